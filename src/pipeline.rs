//! The partition pipeline: how many partitions are in flight engine-wide.
//!
//! A partition in flight holds its witness buffer (z: 4.2 GB at 32 GiB) from its witness to
//! the end of its GPU work. With the native witness (~0.5 s of 16 cores per 32 GiB partition)
//! against ~2 s of GPU work, the GPU is kept busy by a witness or two made ahead of it: more
//! partitions in flight only hold memory. So the engine admits at most
//! `slots + ahead` partitions at once across all calls — `slots` the partitions the backend
//! runs at once (GPU: devices × workers per device), `ahead` the witnesses made while they
//! run ([`crate::Tuning::partitions_ahead`]) — and the host-memory budget
//! ([`crate::budget`]) still decides below that.
//!
//! Admission follows the calls' [`Priority`] ([`crate::ProveOptions::priority`]): a partition is
//! admitted while fewer than `slots + ahead` partitions **of its priority or higher** are in
//! flight, waiters of a higher priority before those of a lower one, first come, first served
//! within a priority. So a higher-priority call never waits for lower-priority witnesses: its
//! partitions are admitted beside them at once (a WinningPoSt's witness is made while PoRep
//! partitions hold every place, and reaches the partition scheduler's queue ahead of theirs),
//! and the lower-priority ones wait while it holds places. Beyond `slots + ahead` only the
//! higher priorities' own partitions are added; the host budget bounds them all.
//!
//! A partition whose witness runs on one thread (the gadgets' whole synthesis of a SnapDeals
//! partition, `Job::serial_witness`: ~20 s of one core at 32 GiB) needs many
//! witnesses in the making to keep up with its GPU work (~1.5 s): such partitions are admitted
//! up to `slots` plus the host's cores ([`Gate::enter_ahead`]).
//!
//! Steady state is then max(witness, GPU) per partition instead of their sum, and peak host
//! memory is the parameters, the compiled circuit and `slots + ahead` witness buffers. One
//! exception: during a cold parameter load, a partition whose H side has run waits for the other
//! sections outside the gate, its witness kept, and runs its L, A, B MSMs as they arrive
//! (`engine`, [`crate::HAhead`]); then the host
//! budget alone bounds how many witnesses are held (all ten of a 32 GiB proof on a 128 GiB
//! host: 93 GiB in use at the peak, BENCHMARKS.md).

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};

use crate::config::Priority;

/// A counting gate of partitions in flight, by priority (see the module docs).
#[derive(Debug)]
pub struct Gate {
    /// Most partitions admitted at once; `usize::MAX`: no gate.
    limit: usize,
    state: Mutex<GateState>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Partitions admitted now, per [`Priority::index`].
    in_flight: [usize; Priority::ALL.len()],
    /// Waiters in the order they are admitted: the highest priority first, then by ticket
    /// (arrival).
    waiting: BTreeSet<(Reverse<Priority>, u64)>,
    /// The next waiter's ticket.
    next_ticket: u64,
}

impl GateState {
    /// Partitions of `priority` or higher in flight.
    fn at_or_above(&self, priority: Priority) -> usize {
        self.in_flight[priority.index()..].iter().sum()
    }
}

/// One admitted partition; its place is given back when this drops.
#[derive(Debug)]
pub struct Pass<'a> {
    gate: &'a Gate,
    priority: Priority,
}

impl Gate {
    /// A gate of `limit` partitions (`None`: unlimited).
    pub fn new(limit: Option<usize>) -> Self {
        Gate {
            limit: limit.map_or(usize::MAX, |l| l.max(1)),
            state: Mutex::new(GateState::default()),
            freed: Condvar::new(),
        }
    }

    /// The limit (`None`: unlimited).
    pub fn limit(&self) -> Option<usize> {
        (self.limit != usize::MAX).then_some(self.limit)
    }

    /// Partitions admitted now (all priorities).
    #[cfg(any(test, feature = "internals"))]
    pub fn in_flight(&self) -> usize {
        self.state.lock().map_or(0, |s| s.in_flight.iter().sum())
    }

    /// Partitions waiting for a place now.
    #[cfg(any(test, feature = "internals"))]
    pub fn waiting(&self) -> usize {
        self.state.lock().map_or(0, |s| s.waiting.len())
    }

    /// Waits for a place and takes it: once fewer than the limit of partitions of `priority`
    /// or higher are in flight and no earlier waiter of `priority`, nor any waiter of a higher
    /// one, is left.
    // Used by the tests and cuzk's own tools.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn enter(&self, priority: Priority) -> Pass<'_> {
        self.enter_ahead(priority, 0)
    }

    /// [`Gate::enter`] for a partition whose witness runs on one thread
    /// (`Job::serial_witness`): admitted while fewer than the limit plus `extra`
    /// partitions of `priority` or higher are in flight, so that enough such witnesses are
    /// made at once to keep the GPU busy (the host budget still bounds their memory). The
    /// order of admission is [`Gate::enter`]'s.
    pub fn enter_ahead(&self, priority: Priority, extra: usize) -> Pass<'_> {
        let limit = self.limit.saturating_add(extra);
        let mut s = match self.state.lock() {
            Ok(s) => s,
            // A poisoned gate admits (the budget still bounds memory).
            Err(p) => p.into_inner(),
        };
        let me = (Reverse(priority), s.next_ticket);
        s.next_ticket += 1;
        s.waiting.insert(me);
        // The first waiter is the only one that may be admitted: when it cannot (its priority's
        // places are taken), no later one can, as their priorities are not higher.
        while s.waiting.first() != Some(&me) || s.at_or_above(priority) >= limit {
            s = match self.freed.wait(s) {
                Ok(s) => s,
                Err(p) => p.into_inner(),
            };
        }
        s.waiting.remove(&me);
        s.in_flight[priority.index()] += 1;
        drop(s);
        // The next waiter may be admissible too.
        self.freed.notify_all();
        Pass {
            gate: self,
            priority,
        }
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.gate.state.lock() {
            s.in_flight[self.priority.index()] -= 1;
        }
        self.gate.freed.notify_all();
    }
}

/// A value made by one thread and waited for by others: the parameters of a cold proof, read
/// while its partitions' witnesses are made (the witness needs only the compiled circuit).
#[derive(Debug)]
pub struct Latch<T> {
    value: Mutex<Option<Option<T>>>,
    set: Condvar,
}

impl<T: Clone> Latch<T> {
    /// An empty latch.
    pub fn new() -> Self {
        Latch {
            value: Mutex::new(None),
            set: Condvar::new(),
        }
    }

    /// A latch holding `v` already.
    #[cfg(any(test, feature = "internals"))]
    pub fn with(v: T) -> Self {
        Latch {
            value: Mutex::new(Some(Some(v))),
            set: Condvar::new(),
        }
    }

    /// Sets the value (`None`: the maker failed; waiters get `None`). Only the first call counts.
    pub fn set(&self, v: Option<T>) {
        let mut g = match self.value.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if g.is_none() {
            *g = Some(v);
        }
        drop(g);
        self.set.notify_all();
    }

    /// The value if it is set (`Some(None)`: its maker failed), without waiting.
    pub fn peek(&self) -> Option<Option<T>> {
        match self.value.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Waits for the value: `None` when its maker failed.
    pub fn wait(&self) -> Option<T> {
        let mut g = match self.value.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        loop {
            if let Some(v) = g.as_ref() {
                return v.clone();
            }
            g = match self.set.wait(g) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
        }
    }
}

impl<T: Clone> Default for Latch<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn the_gate_never_admits_more_than_its_limit() {
        let gate = Arc::new(Gate::new(Some(3)));
        let peak = Arc::new(AtomicUsize::new(0));
        let now = Arc::new(AtomicUsize::new(0));
        std::thread::scope(|s| {
            for _ in 0..12 {
                let (gate, peak, now) = (gate.clone(), peak.clone(), now.clone());
                s.spawn(move || {
                    for _ in 0..20 {
                        let _p = gate.enter(Priority::Normal);
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_micros(200));
                        now.fetch_sub(1, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(peak.load(Ordering::SeqCst), 3);
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn the_gate_admits_in_arrival_order() {
        let gate = Arc::new(Gate::new(Some(1)));
        let first = gate.enter(Priority::Normal);
        let order = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for i in 0..4 {
                let (g, order) = (gate.clone(), order.clone());
                s.spawn(move || {
                    let _p = g.enter(Priority::Normal);
                    order.lock().unwrap().push(i);
                });
                // Each waiter takes its ticket before the next one starts.
                while gate.state.lock().unwrap().next_ticket < i as u64 + 2 {
                    std::thread::yield_now();
                }
            }
            drop(first);
        });
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(Gate::new(None).limit(), None);
    }

    #[test]
    fn serial_witnesses_are_admitted_beyond_the_limit_and_others_still_wait_at_it() {
        let gate = Gate::new(Some(2));
        // Five partitions with one-thread witnesses: limit 2 + 3 more, none waits.
        let mut serial: Vec<_> = (0..5)
            .map(|_| gate.enter_ahead(Priority::Normal, 3))
            .collect();
        assert_eq!(gate.in_flight(), 5);
        let admitted = Mutex::new(false);
        std::thread::scope(|s| {
            let (gate, admitted) = (&gate, &admitted);
            s.spawn(move || {
                let _p = gate.enter(Priority::Normal);
                *admitted.lock().unwrap() = true;
            });
            until_waiting(gate, 1);
            // Another one-thread witness is not admitted past limit + extra either.
            for _ in 0..3 {
                serial.pop();
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert!(
                    !*admitted.lock().unwrap(),
                    "admitted with {} in flight, limit 2",
                    gate.in_flight()
                );
            }
            // One in flight: the plain partition gets its place (the scope joins it).
            serial.pop();
        });
        assert!(*admitted.lock().unwrap());
        drop(serial);
        assert_eq!(gate.in_flight(), 0);
    }

    /// Waits until `n` partitions wait at `gate`.
    fn until_waiting(gate: &Gate, n: usize) {
        while gate.waiting() < n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn higher_priorities_are_admitted_beside_lower_ones_which_then_wait() {
        use Priority::{Critical, High, Low, Normal};
        let gate = Gate::new(Some(2));
        let (a, b) = (gate.enter(Normal), gate.enter(Normal));
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (i, (name, p)) in [("n1", Normal), ("low", Low), ("n2", Normal)]
                .into_iter()
                .enumerate()
            {
                let (gate, order) = (&gate, &order);
                s.spawn(move || {
                    let _p = gate.enter(p);
                    order.lock().unwrap().push(name);
                });
                until_waiting(gate, i + 1);
            }
            // Both places are taken by Normal partitions: High and Critical come in beside them.
            let h = gate.enter(High);
            let c = gate.enter(Critical);
            assert_eq!((gate.in_flight(), gate.waiting()), (4, 3));
            // A Normal place given back is not one while High and Critical hold two.
            drop(a);
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(order.lock().unwrap().is_empty());
            drop(h);
            drop(c);
            // Normal first, one at a time beside b, in arrival order; then Low.
            while order.lock().unwrap().len() < 2 {
                std::thread::yield_now();
            }
            drop(b);
        });
        assert_eq!(*order.lock().unwrap(), vec!["n1", "n2", "low"]);
        assert_eq!(gate.in_flight(), 0);
    }

    #[test]
    fn waiters_of_a_higher_priority_go_first() {
        use Priority::{Critical, Normal};
        let gate = Gate::new(Some(1));
        let held = gate.enter(Critical);
        let order = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (i, (name, p)) in [("n", Normal), ("c", Critical)].into_iter().enumerate() {
                let (gate, order) = (&gate, &order);
                s.spawn(move || {
                    let _p = gate.enter(p);
                    order.lock().unwrap().push(name);
                });
                until_waiting(gate, i + 1);
            }
            drop(held);
        });
        assert_eq!(*order.lock().unwrap(), vec!["c", "n"]);
    }

    #[test]
    fn a_latch_hands_its_value_or_its_failure_to_every_waiter() {
        let l = Latch::<u32>::new();
        std::thread::scope(|s| {
            let waiters: Vec<_> = (0..4).map(|_| s.spawn(|| l.wait())).collect();
            std::thread::sleep(std::time::Duration::from_millis(5));
            l.set(Some(7));
            l.set(Some(8)); // ignored: the first value stays
            for w in waiters {
                assert_eq!(w.join().unwrap(), Some(7));
            }
        });
        let failed = Latch::<u32>::new();
        failed.set(None);
        assert_eq!(failed.wait(), None);
        assert_eq!(Latch::with(3u32).wait(), Some(3));
    }
}
