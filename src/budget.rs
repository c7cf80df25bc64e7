//! The engine-wide host-memory budget: one account shared by every call on an engine, counting
//! the loaded parameters and every partition in flight, so that concurrent proofs (two 32 GiB
//! sectors at once on a 128 GiB host) wait for memory instead of being OOM-killed.
//!
//! The limit is the caller's (`EngineConfig::host_memory_limit`, `CUZK_HOST_MEM_LIMIT`) or, when
//! none is given, `MemAvailable` of /proc/meminfo read once when the engine is created, less a
//! margin left to the rest of the machine ([`host_margin`]: 1/16, at least 4 GiB, at most half). A
//! caller's limit that cannot hold one partition (beside the loaded parameters) is an
//! [`Error::OutOfHostMemory`] up front; with the machine's own figure the engine runs one
//! partition at a time instead (logged), since that figure is an estimate.
//!
//! # Pooled host buffers
//! The engine's pool of witness buffers ([`crate::gpu::memory::hostpool`], page-locked once and
//! reused) keeps real memory between partitions, so it is counted — but in two places, by the
//! buffer's state, never twice: a buffer a partition holds is inside that partition's [`Permit`]
//! (the per-partition estimate already counts z, 32 B per variable), and an idle one is counted
//! here as *pooled* bytes ([`HostBudget::add_pooled`]). Counting idle bytes in permits instead
//! would leave them uncounted between calls, or hold a permit for memory no partition uses.
//! Pooled bytes do not hold back [`HostBudget::acquire`]: they are reclaimable, either reused
//! by the partition admitted (they then move into its permit) or freed by the pool as soon as
//! what is counted exceeds the limit ([`HostBudget::over_limit`]: the engine trims the pool
//! after admitting a partition that takes no pooled buffer and after every parameter or circuit
//! load, `HostPool::trim_to_budget`, and the pool at every take). A returning buffer first leaves its partition's permit
//! ([`Permit::release`]) and then comes back into the pool only where
//! [`HostBudget::pooled_fits`], so it is never counted twice. A reused buffer larger than its
//! request keeps the excess counted as pooled while it is out.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::config::Priority;
use crate::error::{Error, Result};

/// The account (see the module docs).
#[derive(Debug)]
pub struct HostBudget {
    limit: Option<u64>,
    strict: bool,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    params: u64,
    partitions: u64,
    in_flight: usize,
    /// Idle buffers of the engine's host pool (see the module docs).
    pooled: u64,
    /// Admissions that had to wait ([`HostBudget::waits`]).
    waits: u64,
    /// Admissions waiting now, by priority ([`Priority::index`]): memory freed goes to the
    /// highest priority waiting first.
    waiting: [usize; 4],
}

/// An admission that waits at least this long is logged at `warn` level when it ends (else
/// `info`).
pub const LONG_WAIT: Duration = Duration::from_secs(60);

/// Bytes of one partition held while it is proved; returned when dropped.
#[derive(Debug)]
pub struct Permit<'a> {
    budget: &'a HostBudget,
    bytes: u64,
}

impl Permit<'_> {
    /// Returns `bytes` of this permit now (at most what it still holds), e.g. a pooled witness
    /// buffer's share before the buffer goes back to the pool and is counted as pooled.
    pub fn release(&mut self, bytes: u64) {
        let b = bytes.min(self.bytes);
        if let Ok(mut s) = self.budget.state.lock() {
            s.partitions -= b;
            self.bytes -= b;
        }
        self.budget.freed.notify_all();
    }

    /// Bytes this permit holds now.
    #[cfg(any(test, feature = "internals"))]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.budget.state.lock() {
            s.partitions -= self.bytes;
            s.in_flight -= 1;
        }
        self.budget.freed.notify_all();
    }
}

impl HostBudget {
    /// A budget of `limit` bytes when given (strict), else of the machine's `MemAvailable` now
    /// less [`host_margin`] (not strict; unlimited when unreadable).
    pub fn new(limit: Option<u64>) -> Self {
        let (limit, strict) = match limit {
            Some(l) => (Some(l), true),
            None => (
                available_host_memory().map(|a| a.saturating_sub(host_margin(a))),
                false,
            ),
        };
        HostBudget {
            limit,
            strict,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    /// The limit in bytes (`None`: unknown, unlimited).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Whether the limit is the caller's (`EngineConfig::host_memory_limit`): then a
    /// partition's permit must cover all it may hold, since nothing may go over it.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Counts `bytes` kept between calls (loaded parameter sets, compiled circuits; kept until
    /// evicted, [`crate::srs_cache`]).
    pub fn add_params(&self, bytes: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.params += bytes;
        }
    }

    /// Stops counting `bytes` of [`HostBudget::add_params`] (a set's room once it is loaded or
    /// its load failed, an evicted set or circuit).
    pub fn sub_params(&self, bytes: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.params = s.params.saturating_sub(bytes);
        }
        self.freed.notify_all();
    }

    /// Counts `bytes` of idle pooled host buffers (see the module docs).
    pub fn add_pooled(&self, bytes: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.pooled += bytes;
        }
    }

    /// Stops counting `bytes` of pooled buffers (taken by a partition, or freed).
    pub fn sub_pooled(&self, bytes: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.pooled = s.pooled.saturating_sub(bytes);
        }
        self.freed.notify_all();
    }

    /// Bytes of idle pooled buffers now counted.
    #[cfg(any(test, feature = "internals"))]
    pub fn pooled(&self) -> u64 {
        self.state.lock().map(|s| s.pooled).unwrap_or(0)
    }

    /// Whether `bytes` more of idle pooled buffers fit under the limit beside everything
    /// counted (parameters, permits, pooled); always without a limit.
    pub fn pooled_fits(&self, bytes: u64) -> bool {
        let Some(limit) = self.limit else { return true };
        self.state
            .lock()
            .map(|s| s.params + s.partitions + s.pooled + bytes <= limit)
            .unwrap_or(false)
    }

    /// Whether what is counted (parameters, permits, top-ups, pooled buffers) exceeds the
    /// limit: the pool then frees idle buffers. Never without a limit.
    pub fn over_limit(&self) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        self.state
            .lock()
            .map(|s| s.params + s.partitions + s.pooled > limit)
            .unwrap_or(false)
    }

    /// Waits until what is counted — parameters (a set's room just counted included) and the
    /// partitions in flight — fits the limit, or no partition is in flight; at once without a
    /// limit. A parameter set's load waits here after its room is counted
    /// ([`crate::srs_cache`]): no partition is admitted beyond it meanwhile, so the ones in
    /// flight drain, and the load never allocates memory they still hold. Idle pooled buffers
    /// are not waited for (the pool frees them over the limit).
    ///
    /// # Errors
    /// [`Error::Cancelled`] when `cancel` is set while it waits (polled every 100 ms);
    /// [`Error::Internal`] if the account's lock is poisoned.
    pub fn wait_within_limit(&self, cancel: Option<&crate::cancel::CancelToken>) -> Result<()> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let poisoned = || Error::internal("host budget lock poisoned");
        let mut s = self.state.lock().map_err(|_| poisoned())?;
        while s.in_flight > 0 && s.params + s.partitions > limit {
            crate::cancel::CancelToken::check(cancel)?;
            s = self
                .freed
                .wait_timeout(s, Duration::from_millis(100))
                .map_err(|_| poisoned())?
                .0;
        }
        Ok(())
    }

    /// (parameters, partitions in flight) bytes now counted (pooled buffers:
    /// [`HostBudget::pooled`]).
    pub fn used(&self) -> (u64, u64) {
        self.state
            .lock()
            .map(|s| (s.params, s.partitions))
            .unwrap_or((0, 0))
    }

    /// How many partitions of `need` bytes fit beside the parameters (at least 1 unless strict).
    ///
    /// # Errors
    /// [`Error::OutOfHostMemory`] when the caller's limit cannot hold one.
    pub fn fits(&self, need: u64) -> Result<usize> {
        let Some(limit) = self.limit else {
            return Ok(usize::MAX);
        };
        let params = self.used().0;
        let room = limit.saturating_sub(params);
        if room < need {
            if self.strict {
                return Err(Error::OutOfHostMemory {
                    needed: need + params,
                    budget: limit,
                });
            }
            log::warn!(
                "host memory: a partition needs ~{:.1} GB, {:.1} GB left beside {:.1} GB of \
                 parameters; proving one partition at a time",
                need as f64 / 1e9,
                room as f64 / 1e9,
                params as f64 / 1e9
            );
            return Ok(1);
        }
        Ok((room / need) as usize)
    }

    /// How many admissions ([`HostBudget::acquire`]) have had to wait for memory so far.
    #[cfg(any(test, feature = "internals"))]
    pub fn waits(&self) -> u64 {
        self.state.lock().map(|s| s.waits).unwrap_or(0)
    }

    /// Waits until `need` bytes fit beside the parameters and the permits in flight (or nothing
    /// else is in flight), then holds them. Idle pooled buffers do not make it wait (see the
    /// module docs). [`HostBudget::acquire_as`] for "a partition".
    ///
    /// # Errors
    /// As [`HostBudget::fits`]; [`Error::Internal`] if the account's lock is poisoned.
    #[cfg(any(test, feature = "internals"))]
    pub fn acquire(&self, need: u64) -> Result<Permit<'_>> {
        self.acquire_as(need, "a partition")
    }

    /// [`HostBudget::acquire`] for `who` (e.g. "sector 5 partition 3"), named in the log: one
    /// line when it has to wait (what it needs, what is in use and free, the limit), one when
    /// it is admitted after waiting (how long it waited; `warn` from [`LONG_WAIT`] on). Nothing
    /// is logged when it is admitted at once.
    ///
    /// # Errors
    /// As [`HostBudget::acquire`].
    // Used by the tests and cuzk's own tools.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn acquire_as(&self, need: u64, who: &str) -> Result<Permit<'_>> {
        self.acquire_with(need, who, Priority::Normal)
    }

    /// [`HostBudget::acquire_as`] at `priority`: while admissions of a higher priority wait,
    /// this one waits too even where its bytes would fit, so that memory freed by a finished
    /// partition goes to the highest priority first (a CRITICAL WinningPoSt partition is not
    /// overtaken by NORMAL PoRep partitions queued for memory beside it). Equal priorities
    /// take what fits, in no set order.
    ///
    /// # Errors
    /// As [`HostBudget::acquire`].
    pub fn acquire_with(&self, need: u64, who: &str, priority: Priority) -> Result<Permit<'_>> {
        self.fits(need)?;
        let poisoned = |_| Error::internal("host budget lock poisoned");
        let mut s = self.state.lock().map_err(poisoned)?;
        let mut waiting: Option<Instant> = None;
        let p = priority.index();
        while let Some(limit) = self.limit {
            let higher_waiting = s.waiting[p + 1..].iter().any(|&n| n > 0);
            if !higher_waiting && (s.in_flight == 0 || s.params + s.partitions + need <= limit) {
                break;
            }
            if waiting.is_none() {
                waiting = Some(Instant::now());
                s.waits += 1;
                s.waiting[p] += 1;
                log::info!(
                    "{}",
                    wait_message(
                        who,
                        need,
                        s.params,
                        s.partitions,
                        s.in_flight,
                        limit,
                        self.strict
                    )
                );
            }
            s = self.freed.wait(s).map_err(poisoned)?;
        }
        if let Some(t) = waiting {
            s.waiting[p] -= 1;
            // Lower priorities held back by this one may fit now.
            self.freed.notify_all();
            let waited = t.elapsed();
            let msg = admitted_message(who, need, waited);
            if waited >= LONG_WAIT {
                log::warn!("{msg}");
            } else {
                log::info!("{msg}");
            }
        }
        s.partitions += need;
        s.in_flight += 1;
        Ok(Permit {
            budget: self,
            bytes: need,
        })
    }
}

/// Bytes a partition may still need in host memory beyond its [`Permit`]: a, b, c of a compiled
/// partition whose permit counted only its witness (the GPU SpMV was expected; only under the
/// machine's own estimate, never under a caller's limit), taken when a GPU worker or a CPU
/// fallback computes them on the host after all ([`HostTopUp::take`]).
#[derive(Clone, Debug)]
// Taken by the GPU backend only (feature `cuda`).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct HostTopUp {
    /// The engine's budget.
    pub budget: Arc<HostBudget>,
    /// Bytes of the host-side a, b, c (the difference of the engine's two per-partition
    /// estimates: 130 B per constraint).
    pub bytes: u64,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
impl HostTopUp {
    /// Takes [`HostTopUp::bytes`] from the budget now, without waiting (a GPU worker must not
    /// wait for memory that partitions queued for it hold). Over the machine's own estimate
    /// the bytes are still counted (with a warning), so that no further partition is admitted
    /// until they are returned: at most one top-up per GPU worker is held at a time. Under a
    /// caller's limit that cannot give them, [`Error::OutOfHostMemory`] (the engine does not
    /// hand out top-ups under such a limit: its permits count a, b, c up front).
    ///
    /// # Errors
    /// As above, for partition `partition`.
    pub fn take(&self, partition: usize) -> Result<Extra> {
        let b = &self.budget;
        let mut s = b
            .state
            .lock()
            .map_err(|_| Error::internal("host budget lock poisoned"))?;
        match b.limit {
            Some(limit) if s.params + s.partitions + self.bytes > limit => {
                let needed = s.params + s.partitions + self.bytes;
                if b.strict {
                    return Err(Error::OutOfHostMemory {
                        needed,
                        budget: limit,
                    });
                }
                s.partitions += self.bytes;
                drop(s);
                log::warn!(
                    "host memory: partition {partition} computes a, b, c on the host ({:.1} GB), \
                     {:.1} GB in all beyond the estimated {:.1} GB available",
                    self.bytes as f64 / 1e9,
                    needed as f64 / 1e9,
                    limit as f64 / 1e9
                );
            }
            _ => s.partitions += self.bytes,
        }
        Ok(Extra {
            budget: self.budget.clone(),
            bytes: self.bytes,
        })
    }
}

/// Bytes taken by [`HostTopUp::take`]; returned when dropped.
#[derive(Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct Extra {
    budget: Arc<HostBudget>,
    bytes: u64,
}

impl Drop for Extra {
    fn drop(&mut self) {
        if let Ok(mut s) = self.budget.state.lock() {
            s.partitions -= self.bytes;
        }
        self.budget.freed.notify_all();
    }
}

/// Bytes as GB (10^9) with two decimals, e.g. "1.50 GB".
fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// The log line of an admission that starts waiting: `who` needs `need` bytes; `params` and
/// `partitions` bytes are in use (`in_flight` permits), of `limit` (the caller's when
/// `strict`, else the machine's estimate).
fn wait_message(
    who: &str,
    need: u64,
    params: u64,
    partitions: u64,
    in_flight: usize,
    limit: u64,
    strict: bool,
) -> String {
    let used = params + partitions;
    format!(
        "host memory: {who} waits for {}: {} of the {} limit in use ({} parameters and \
         compiled circuits, {} held by {in_flight} partition(s) in flight), {} free (limit: {})",
        gb(need),
        gb(used),
        gb(limit),
        gb(params),
        gb(partitions),
        gb(limit.saturating_sub(used)),
        if strict {
            "CUZK_HOST_MEM_LIMIT / EngineConfig::host_memory_limit"
        } else {
            "MemAvailable when the engine was created, less its margin"
        }
    )
}

/// The log line of an admission after waiting `waited`.
fn admitted_message(who: &str, need: u64, waited: Duration) -> String {
    format!(
        "host memory: {who} admitted after waiting {:.3} s for {}",
        waited.as_secs_f64(),
        gb(need)
    )
}

/// Smallest host memory left out of a budget taken from `MemAvailable`: 4 GiB.
pub const HOST_MARGIN_MIN: u64 = 4 << 30;

/// Host memory a budget taken from `MemAvailable` (`available` bytes) leaves to the rest of the
/// machine: 1/16 of it, at least [`HOST_MARGIN_MIN`] (7.8 GiB of a 125 GiB host), at most half
/// of it (a small host keeps a budget). The estimates
/// the budget counts are close to what a partition holds (the H200's 32 GiB run, BENCHMARKS.md:
/// 123.6 GiB in use at the peak with a budget of the whole 124 GiB `MemAvailable`), so without a
/// margin the transient allocations of the witness gadgets, the page cache of the parameter
/// file and any other process that grows after the engine started would meet the OOM killer.
/// A caller's `CUZK_HOST_MEM_LIMIT` is taken as given.
pub fn host_margin(available: u64) -> u64 {
    (available / 16).max(HOST_MARGIN_MIN).min(available / 2)
}

/// `MemAvailable` of /proc/meminfo, in bytes (Linux), if readable.
fn available_host_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_permit_can_return_part_of_its_bytes() {
        let b = HostBudget::new(Some(10));
        let mut p = b.acquire(6).unwrap();
        p.release(2);
        assert_eq!((p.bytes(), b.used()), (4, (0, 4)));
        p.release(9); // at most what it holds
        assert_eq!((p.bytes(), b.used()), (0, (0, 0)));
        drop(p);
        assert_eq!(b.used(), (0, 0));
        let _q = b.acquire(10).unwrap();
    }
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn freed_memory_goes_to_the_highest_priority_waiting() {
        let b = Arc::new(HostBudget::new(Some(10)));
        let mut holder = b.acquire(8).unwrap();
        let admitted = Arc::new(Mutex::new(Vec::new()));
        let spawn = |need: u64, p: Priority| {
            let (b, admitted) = (b.clone(), admitted.clone());
            std::thread::spawn(move || {
                let permit = b.acquire_with(need, p.name(), p).unwrap();
                admitted.lock().unwrap().push(p);
                std::thread::sleep(Duration::from_millis(50));
                drop(permit);
            })
        };
        let wait_for = |n: u64| {
            while b.waits() < n {
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        let normal = spawn(4, Priority::Normal);
        wait_for(1);
        let critical = spawn(7, Priority::Critical);
        wait_for(2);
        // 6 bytes in use: the NORMAL admission's 4 would fit, the CRITICAL one's 7 would not;
        // the two never fit together, so the order of admission is the order of the pushes.
        holder.release(2);
        std::thread::sleep(Duration::from_millis(150));
        assert!(
            admitted.lock().unwrap().is_empty(),
            "a NORMAL admission took memory while a CRITICAL one waited"
        );
        drop(holder);
        critical.join().unwrap();
        normal.join().unwrap();
        assert_eq!(
            *admitted.lock().unwrap(),
            vec![Priority::Critical, Priority::Normal]
        );
        assert_eq!(b.used(), (0, 0));
    }

    #[test]
    fn the_machine_figure_keeps_a_margin_and_a_callers_limit_does_not() {
        const GIB: u64 = 1 << 30;
        // 1/16, at least 4 GiB: 7.8 GiB of the H200 host's 125 GiB, 4 GiB of a 32 GiB one.
        assert_eq!(host_margin(125 * GIB), 125 * GIB / 16);
        assert_eq!(host_margin(32 * GIB), 4 * GIB);
        // At most half: a 6 GiB host keeps 3 GiB, not 2.
        assert_eq!(host_margin(6 * GIB), 3 * GIB);
        assert_eq!(host_margin(0), 0);
        let machine = HostBudget::new(None);
        if let Some(a) = available_host_memory() {
            // MemAvailable moves between the two reads by less than the margin's slack here.
            let l = machine.limit().unwrap();
            assert!(!machine.is_strict());
            assert!(l <= a - host_margin(a), "{l} vs {a}");
            assert!(l + host_margin(a) + GIB > a, "{l} vs {a}");
        }
        let given = HostBudget::new(Some(64 * GIB));
        assert_eq!((given.limit(), given.is_strict()), (Some(64 * GIB), true));
    }

    #[test]
    fn a_strict_limit_that_cannot_hold_one_partition_is_an_error_up_front() {
        let b = HostBudget::new(Some(100));
        b.add_params(60);
        assert_eq!(b.fits(40).unwrap(), 1);
        let e = b.acquire(41).unwrap_err();
        assert_eq!(
            e.code(),
            Error::OutOfHostMemory {
                needed: 0,
                budget: 0
            }
            .code()
        );
        assert!(e.to_string().contains("101"), "{e}");
    }

    #[test]
    fn a_top_up_is_taken_without_waiting_and_given_back() {
        let b = Arc::new(HostBudget::new(Some(10)));
        b.add_params(3);
        let p = b.acquire(2).unwrap();
        let up = HostTopUp {
            budget: b.clone(),
            bytes: 4,
        };
        let extra = up.take(0).unwrap();
        assert_eq!(b.used(), (3, 6));
        // 1 byte left: a strict limit says so with a typed error, at once.
        let e = up.take(1).unwrap_err();
        assert!(
            matches!(
                e,
                Error::OutOfHostMemory {
                    needed: 13,
                    budget: 10
                }
            ),
            "{e}"
        );
        drop(extra);
        drop(p);
        assert_eq!(b.used(), (3, 0));
        // The machine's own estimate: over it, a warning, and the bytes still counted until
        // returned (no further partition is admitted meanwhile).
        let loose = Arc::new(HostBudget {
            limit: Some(10),
            strict: false,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        });
        loose.add_params(9);
        let up = HostTopUp {
            budget: loose.clone(),
            bytes: 4,
        };
        let over = up.take(0).unwrap();
        assert_eq!(loose.used(), (9, 4));
        drop(over);
        assert_eq!(loose.used(), (9, 0));
    }

    #[test]
    fn concurrent_partitions_never_exceed_the_budget() {
        // 10 GB, 3 GB of parameters, partitions of 2 GB: at most 3 at once, from any number of
        // callers.
        let b = Arc::new(HostBudget::new(Some(10)));
        b.add_params(3);
        assert_eq!(b.fits(2).unwrap(), 3);
        let now = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..12)
            .map(|_| {
                let (b, now, peak) = (b.clone(), now.clone(), peak.clone());
                std::thread::spawn(move || {
                    let _p = b.acquire(2).unwrap();
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        assert_eq!(b.used(), (3, 0), "every permit returned");
    }

    #[test]
    fn an_admission_that_waits_is_counted_and_one_at_once_is_not() {
        let b = Arc::new(HostBudget::new(Some(10)));
        b.add_params(2);
        let first = b.acquire_as(5, "sector 1 partition 0").unwrap();
        let mut second = b.acquire_as(3, "sector 1 partition 1").unwrap();
        assert_eq!(b.waits(), 0, "both fit at once");
        let waiter = {
            let b = b.clone();
            std::thread::spawn(move || {
                let p = b.acquire_as(4, "sector 2 partition 0").unwrap();
                p.bytes()
            })
        };
        // The third (4 bytes; none free) waits: counted once it starts waiting, not per wake-up.
        let t = Instant::now();
        while b.waits() == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the third never waited"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // A wake-up that frees too little: still waiting, not counted again.
        second.release(1);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished());
        assert_eq!(b.waits(), 1);
        drop(first); // 6 free: admitted
        assert_eq!(waiter.join().unwrap(), 4);
        assert_eq!(b.waits(), 1);
        drop(second);
        assert_eq!(b.used(), (2, 0));
        // Room again: at once, not counted.
        let _p = b.acquire(8).unwrap();
        assert_eq!(b.waits(), 1);
    }

    #[test]
    fn wait_messages_give_the_numbers() {
        let m = wait_message(
            "sector 7 partition 3",
            22_000_000_000,
            50_000_000_000,
            44_000_000_000,
            2,
            100_000_000_000,
            true,
        );
        assert_eq!(
            m,
            "host memory: sector 7 partition 3 waits for 22.00 GB: 94.00 GB of the 100.00 GB \
             limit in use (50.00 GB parameters and compiled circuits, 44.00 GB held by 2 \
             partition(s) in flight), 6.00 GB free (limit: CUZK_HOST_MEM_LIMIT / \
             EngineConfig::host_memory_limit)"
        );
        // Over the machine's own estimate: nothing free (not a negative figure).
        let m = wait_message("p", 1, 0, 5_000_000_000, 1, 4_000_000_000, false);
        assert!(
            m.contains(
                "0.00 GB free (limit: MemAvailable when the engine was created, less its margin)"
            ),
            "{m}"
        );
        assert_eq!(
            admitted_message(
                "sector 7 partition 3",
                1_500_000_000,
                Duration::from_millis(2500)
            ),
            "host memory: sector 7 partition 3 admitted after waiting 2.500 s for 1.50 GB"
        );
    }

    #[test]
    fn without_a_caller_limit_one_partition_always_runs() {
        let b = HostBudget {
            limit: Some(10),
            strict: false,
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        };
        b.add_params(9);
        assert_eq!(b.fits(5).unwrap(), 1);
        let p = b.acquire(5).unwrap();
        assert_eq!(b.used(), (9, 5));
        drop(p);
        assert_eq!(b.used(), (9, 0));
    }
}
