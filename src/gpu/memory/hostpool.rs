//! The engine's pool of host buffers for the witness z: `Vec<Fr>` allocations page-locked once
//! and reused by every partition.
//!
//! The witness generation of a compiled partition writes its aux vector (130,169,893 `Fr`,
//! 4.2 GB for a 32 GiB partition) into a buffer taken from the pool ([`HostPool::take`]). The
//! GPU worker's uploads of z then find that range already registered in the
//! [`PinnedRegistry`] (a range inside a registered one shares its registration: no driver call),
//! so no partition pays `cuMemHostRegister` (~0.5 s for 4.2 GB) on freshly synthesized memory.
//! When the partition is done the buffer goes back to the pool ([`PooledBuf`]'s `Drop`).
//!
//! # Buffers
//! - A buffer's whole capacity (`capacity × 32` bytes) is pinned once through the registry, when
//!   it is allocated; its [`PinGuard`] lives with the buffer while it is out and while it is
//!   idle, and is dropped before its memory is freed (never a registration over freed memory).
//! - A pooled buffer keeps its allocation: [`PooledBuf::lend`] moves the `Vec` out (to travel
//!   in a [`crate::circuit::Witness`] and the proving assignment) and [`PooledBuf::restore`]
//!   takes it back; `clear`, `truncate` and writes within the capacity keep the address. A
//!   `Vec` that comes back with another address or capacity (it was reallocated) is not pooled
//!   again and the registration of the lost range is released at once.
//! - If pinning fails (memlock limit, out of memory, no device), the buffer is handed out all
//!   the same, pageable (the guard says why, as the registry reports it); reusing an idle
//!   pageable buffer tries to pin it again.
//! - Without a registry (the CPU backend, no device open) buffers are plain `Vec`s.
//!
//! # Bounds
//! - At most `max_idle` idle buffers (the GPU backend: one per worker, devices × workers per
//!   device; 0 keeps none: every buffer is freed after its partition, as plain `Vec`s were). A
//!   buffer returned beyond the bound is freed.
//! - [`HostPool::take`] reuses the smallest idle buffer that holds the request and is at most
//!   [`MAX_SLACK`] times larger; on a miss the largest idle buffer that is too small is freed (the
//!   new buffer replaces it).
//! - Host memory: idle bytes are counted in the engine's [`HostBudget`] as *pooled*; a buffer
//!   taken out moves into the partition's permit (which counts z); idle buffers are freed
//!   whenever what the budget counts exceeds its limit (see [`crate::budget`]).
//!
//! A device copy from a buffer must be finished before the buffer goes back: the uploads of z
//! are synchronous, and a partition whose stage timed out during a copy (the copy may still
//! run) gives its buffer up with [`PooledBuf::retire`] instead (kept, never reused or freed).
//!
//! Plain Rust: unit-tested with the registry's `FakePinner`, without a GPU.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use blstrs::Scalar as Fr;

use crate::budget::HostBudget;
use crate::error::{Error, Result};
#[cfg(any(test, feature = "internals"))]
use crate::gpu::memory::pinned::PinState;
use crate::gpu::memory::pinned::{PageableReason, PinGuard, PinnedRegistry};

/// An idle buffer is reused for a request of `n` values only if its capacity is at most
/// `MAX_SLACK × n` (a 32 GiB partition's 4.2 GB buffer is not tied up by a 2 KiB one).
pub const MAX_SLACK: usize = 2;

/// Bytes of one element (`Fr`, 32).
const ELEM: usize = std::mem::size_of::<Fr>();

/// Writes every page of `vec`'s capacity once, from all cores, before it is registered. A
/// registration of untouched memory faults in and zeroes its pages inside the driver call —
/// seconds for the 4.2 GB of a 32 GiB witness, during which, it seems, the driver held up other
/// threads' copies and kernels (a cold proof on an H100, whose partitions each take a fresh
/// buffer while the earlier ones wait for the parameters: z uploads and SpMVs of 1.4–2.7 s
/// instead of 0.1 s; BENCHMARKS.md, *L2*). Here the page faults run in parallel, outside it,
/// and the witness later writes into pages that are already there.
fn touch(vec: &mut Vec<Fr>) {
    use ff::Field;
    use rayon::prelude::*;
    vec.spare_capacity_mut()
        .par_chunks_mut(1 << 15)
        .for_each(|c| c.fill(std::mem::MaybeUninit::new(Fr::ZERO)));
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An idle buffer.
struct Idle {
    /// Declared before `vec`: fields drop in declaration order, so the range is unregistered
    /// before its memory is freed.
    pin: Option<PinGuard>,
    vec: Vec<Fr>,
}

impl Idle {
    fn bytes(&self) -> u64 {
        (self.vec.capacity() * ELEM) as u64
    }
}

/// Counters of a [`HostPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers allocated (each pinned once).
    pub allocated: u64,
    /// Takes served by an idle buffer.
    pub reused: u64,
    /// Buffers freed: too small for a request, beyond the idle bound, over the host budget, or
    /// come back reallocated.
    pub freed: u64,
    /// Buffers kept for the process's life by [`PooledBuf::retire`].
    pub retired: u64,
}

struct Inner {
    registry: Option<PinnedRegistry>,
    max_idle: usize,
    budget: Option<Arc<HostBudget>>,
    idle: Mutex<Vec<Idle>>,
    allocated: AtomicU64,
    reused: AtomicU64,
    freed: AtomicU64,
    retired: AtomicU64,
}

impl Inner {
    /// Pins the whole capacity of `vec` (`None` without a registry or capacity).
    fn pin(&self, vec: &Vec<Fr>) -> Option<PinGuard> {
        let reg = self.registry.as_ref()?;
        (vec.capacity() > 0).then(|| reg.pin(vec.as_ptr() as usize, vec.capacity() * ELEM))
    }

    /// Removes idle buffer `i` (its bytes leave the budget's pooled count).
    fn unpool(&self, idle: &mut Vec<Idle>, i: usize) -> Idle {
        let b = idle.swap_remove(i);
        if let Some(budget) = &self.budget {
            budget.sub_pooled(b.bytes());
        }
        b
    }

    /// Moves idle buffers into `out` (to be freed outside the lock) while the budget counts
    /// more than its limit, largest first.
    fn trim(&self, idle: &mut Vec<Idle>, out: &mut Vec<Idle>) {
        let Some(budget) = &self.budget else { return };
        while budget.over_limit() {
            let largest = idle
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.vec.capacity())
                .map(|(i, _)| i);
            let Some(i) = largest else { break };
            out.push(self.unpool(idle, i));
        }
    }

    /// Frees `bufs` (outside the lock: unregistering 4 GB takes a while).
    fn free(&self, bufs: Vec<Idle>) {
        self.freed.fetch_add(bufs.len() as u64, Ordering::Relaxed);
        drop(bufs);
    }

    /// Takes `b` back (from a [`PooledBuf`] that is dropped, `slack` bytes of it still counted
    /// as pooled), within the bounds.
    fn give_back(&self, b: Idle, slack: u64) {
        if let Some(budget) = &self.budget {
            budget.sub_pooled(slack);
        }
        let mut idle = lock(&self.idle);
        let keep = b.vec.capacity() > 0
            && idle.len() < self.max_idle
            && self
                .budget
                .as_ref()
                .map_or(true, |budget| budget.pooled_fits(b.bytes()));
        if keep {
            if let Some(budget) = &self.budget {
                budget.add_pooled(b.bytes());
            }
            idle.push(b);
        } else {
            drop(idle);
            self.free(vec![b]);
        }
    }
}

/// The pool (see the module docs). Clones share one pool.
#[derive(Clone)]
pub struct HostPool {
    inner: Arc<Inner>,
}

impl fmt::Debug for HostPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostPool")
            .field("pinning", &self.inner.registry.is_some())
            .field("max_idle", &self.inner.max_idle)
            .field("idle", &self.idle_buffers())
            .field("idle_bytes", &self.idle_bytes())
            .field("stats", &self.stats())
            .finish()
    }
}

impl HostPool {
    /// A pool that pins its buffers through `registry` (`None`: plain pageable `Vec`s), keeps
    /// at most `max_idle` idle buffers, and counts idle bytes in `budget` (when given).
    pub fn new(
        registry: Option<PinnedRegistry>,
        max_idle: usize,
        budget: Option<Arc<HostBudget>>,
    ) -> Self {
        HostPool {
            inner: Arc::new(Inner {
                registry,
                max_idle,
                budget,
                idle: Mutex::new(Vec::new()),
                allocated: AtomicU64::new(0),
                reused: AtomicU64::new(0),
                freed: AtomicU64::new(0),
                retired: AtomicU64::new(0),
            }),
        }
    }

    /// A buffer of at least `n` values' capacity (`n × 32` bytes): an idle one (see the module
    /// docs for which), else a new allocation of exactly `n`, pinned once. `n = 0` gives an
    /// empty, unpooled buffer. Never fails for a pinning problem (the buffer is then pageable).
    ///
    /// # Errors
    /// [`Error::OutOfHostMemory`] when `n × 32` bytes cannot be allocated (`budget`: the host
    /// budget's limit, 0 when none).
    pub fn take(&self, n: usize) -> Result<PooledBuf> {
        let inner = &self.inner;
        if n == 0 {
            return Ok(PooledBuf::plain(Vec::new()));
        }
        let mut to_free = Vec::new();
        let mut idle = lock(&inner.idle);
        let fits = |b: &Idle| b.vec.capacity() >= n && b.vec.capacity() / MAX_SLACK <= n;
        let best = idle
            .iter()
            .enumerate()
            .filter(|(_, b)| fits(b))
            .min_by_key(|(_, b)| b.vec.capacity())
            .map(|(i, _)| i);
        let reused = best.map(|i| inner.unpool(&mut idle, i));
        if reused.is_none() {
            let small = idle
                .iter()
                .enumerate()
                .filter(|(_, b)| b.vec.capacity() < n)
                .max_by_key(|(_, b)| b.vec.capacity())
                .map(|(i, _)| i);
            if let Some(i) = small {
                to_free.push(inner.unpool(&mut idle, i));
            }
        }
        inner.trim(&mut idle, &mut to_free);
        drop(idle);
        inner.free(to_free);
        let mut slack = 0u64;
        let (vec, pin) = match reused {
            Some(Idle { pin, vec }) => {
                inner.reused.fetch_add(1, Ordering::Relaxed);
                // The partition's permit counts n values; the rest of the capacity stays
                // counted as pooled while the buffer is out.
                slack = ((vec.capacity() - n) * ELEM) as u64;
                if let Some(budget) = &inner.budget {
                    budget.add_pooled(slack);
                }
                // A pageable buffer (registration refused earlier) is tried again.
                let pin = match pin {
                    Some(g) if matches!(g.fallback(), Some(PageableReason::RegisterFailed(_))) => {
                        drop(g);
                        inner.pin(&vec)
                    }
                    other => other,
                };
                (vec, pin)
            }
            None => {
                let mut vec = Vec::new();
                vec.try_reserve_exact(n)
                    .map_err(|_| Error::OutOfHostMemory {
                        needed: (n as u64).saturating_mul(ELEM as u64),
                        budget: inner.budget.as_ref().and_then(|b| b.limit()).unwrap_or(0),
                    })?;
                inner.allocated.fetch_add(1, Ordering::Relaxed);
                if inner.registry.is_some() {
                    touch(&mut vec);
                }
                let pin = inner.pin(&vec);
                (vec, pin)
            }
        };
        Ok(PooledBuf {
            ptr: vec.as_ptr() as usize,
            cap: vec.capacity(),
            pin,
            vec,
            lent: false,
            slack,
            budget: inner.budget.clone(),
            pool: Some(inner.clone()),
        })
    }

    /// Idle buffers now.
    pub fn idle_buffers(&self) -> usize {
        lock(&self.inner.idle).len()
    }

    /// Bytes of the idle buffers now (their capacities × 32).
    pub fn idle_bytes(&self) -> u64 {
        lock(&self.inner.idle).iter().map(Idle::bytes).sum()
    }

    /// The most idle buffers kept.
    #[cfg(any(test, feature = "internals"))]
    pub fn max_idle(&self) -> usize {
        self.inner.max_idle
    }

    /// Whether buffers are pinned (a registry was given).
    #[cfg(any(test, feature = "internals"))]
    pub fn pins(&self) -> bool {
        self.inner.registry.is_some()
    }

    /// Counters since creation.
    pub fn stats(&self) -> PoolStats {
        let i = &self.inner;
        PoolStats {
            allocated: i.allocated.load(Ordering::Relaxed),
            reused: i.reused.load(Ordering::Relaxed),
            freed: i.freed.load(Ordering::Relaxed),
            retired: i.retired.load(Ordering::Relaxed),
        }
    }

    /// Frees idle buffers, largest first, while the budget counts more than its limit (the
    /// engine calls it after admitting a partition that takes no pooled buffer and after each
    /// parameter or circuit load: idle bytes never hold an admission back, so this is where
    /// they give way; [`HostPool::take`] trims too).
    pub fn trim_to_budget(&self) {
        let mut out = Vec::new();
        let mut idle = lock(&self.inner.idle);
        self.inner.trim(&mut idle, &mut out);
        drop(idle);
        if !out.is_empty() {
            self.inner.free(out);
        }
    }

    /// Frees every idle buffer (e.g. before a phase that needs the host memory).
    #[cfg(any(test, feature = "internals"))]
    pub fn clear(&self) {
        let mut idle = lock(&self.inner.idle);
        let all: Vec<Idle> = (0..idle.len())
            .rev()
            .map(|i| self.inner.unpool(&mut idle, i))
            .collect();
        drop(idle);
        self.inner.free(all);
    }
}

/// A buffer out of a [`HostPool`]; goes back to the pool when dropped (see the module docs).
/// Dropped while lent ([`PooledBuf::lend`] without [`PooledBuf::restore`]), it releases the
/// registration (the memory is the borrower's) and nothing goes back to the pool.
pub struct PooledBuf {
    /// Declared before `vec` (dropped first: unregister, then free).
    pin: Option<PinGuard>,
    vec: Vec<Fr>,
    /// Address and capacity (elements) of the pooled allocation.
    ptr: usize,
    cap: usize,
    lent: bool,
    /// Bytes of the capacity beyond the request, counted as pooled while the buffer is out.
    slack: u64,
    /// The engine's budget (kept apart from `pool`, which a lost allocation drops).
    budget: Option<Arc<HostBudget>>,
    pool: Option<Arc<Inner>>,
}

impl fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBuf")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("capacity", &self.cap)
            .field("pin", &self.pin.as_ref().map(PinGuard::state))
            .field("lent", &self.lent)
            .field("pooled", &self.pool.is_some())
            .finish()
    }
}

impl PooledBuf {
    fn plain(vec: Vec<Fr>) -> Self {
        PooledBuf {
            ptr: vec.as_ptr() as usize,
            cap: vec.capacity(),
            pin: None,
            vec,
            lent: false,
            slack: 0,
            budget: None,
            pool: None,
        }
    }

    /// Stops counting the slack (the buffer does not go back to the pool).
    fn drop_slack(&mut self) {
        if let Some(budget) = &self.budget {
            budget.sub_pooled(self.slack);
        }
        self.slack = 0;
    }

    /// Capacity in elements (32 bytes each); at least what was asked of [`HostPool::take`].
    #[cfg(any(test, feature = "internals"))]
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Address of the allocation (stable for the buffer's life in the pool).
    #[cfg(any(test, feature = "internals"))]
    pub fn ptr(&self) -> usize {
        self.ptr
    }

    /// Whether the whole capacity is page-locked.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_pinned(&self) -> bool {
        self.pin.as_ref().is_some_and(PinGuard::is_pinned)
    }

    /// The registration's state; `None` for a plain buffer (no registry, or empty).
    #[cfg(any(test, feature = "internals"))]
    pub fn pin_state(&self) -> Option<&PinState> {
        self.pin.as_ref().map(PinGuard::state)
    }

    /// Whether the `Vec` is out ([`PooledBuf::lend`]) and not yet restored.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_lent(&self) -> bool {
        self.lent
    }

    /// The buffer's values (empty while lent).
    #[cfg(any(test, feature = "internals"))]
    pub fn as_slice(&self) -> &[Fr] {
        &self.vec
    }

    /// Moves the `Vec` out, with the length its last user left (0 for a new buffer; the
    /// values are initialised, possibly an earlier partition's): writes within its capacity
    /// keep the allocation. Give it back with [`PooledBuf::restore`] before this buffer drops;
    /// until then the memory must not be freed. A second call while lent returns an empty
    /// `Vec`.
    pub fn lend(&mut self) -> Vec<Fr> {
        if self.lent {
            return Vec::new();
        }
        self.lent = true;
        std::mem::take(&mut self.vec)
    }

    /// Takes back the `Vec` of [`PooledBuf::lend`]. Returns `true` when it is the pooled
    /// allocation (same address and capacity). Otherwise the allocation was lost (reallocated
    /// or replaced): the registration of its range is released now, the buffer will not be
    /// pooled again and `v` is kept as a plain `Vec` (logged as an error: a bug).
    pub fn restore(&mut self, v: Vec<Fr>) -> bool {
        self.lent = false;
        let same = v.as_ptr() as usize == self.ptr && v.capacity() == self.cap;
        if !same {
            log::error!(
                "pooled host buffer {:#x} ({} values) came back as {:#x} ({} values): not pooled again",
                self.ptr,
                self.cap,
                v.as_ptr() as usize,
                v.capacity()
            );
            self.pin = None;
            if let Some(pool) = self.pool.take() {
                // The pooled allocation is gone: counted as freed.
                pool.freed.fetch_add(1, Ordering::Relaxed);
            }
            self.drop_slack();
            self.ptr = v.as_ptr() as usize;
            self.cap = v.capacity();
        }
        self.vec = v;
        same
    }

    /// Gives the buffer up while a device copy from it may still be running (a stage timed out
    /// during an upload, so the device was retired with the copy pending): its memory and
    /// registration are kept for the process's life, never reused or freed, and its bytes are
    /// counted as kept in the host budget ([`HostBudget::add_params`]). Returns those bytes.
    /// While lent, the memory is the borrower's: the registration is released and 0 returned.
    pub fn retire(mut self) -> u64 {
        if self.lent {
            return 0;
        }
        let bytes = (self.vec.capacity() * ELEM) as u64;
        if let Some(pool) = self.pool.take() {
            pool.retired.fetch_add(1, Ordering::Relaxed);
        }
        self.drop_slack();
        if let Some(budget) = &self.budget {
            budget.add_params(bytes);
        }
        log::warn!(
            "host buffer {:#x} ({:.2} GB) kept for the process's life: a device copy from it may \
             still be running",
            self.ptr,
            bytes as f64 / 1e9
        );
        std::mem::forget(std::mem::take(&mut self.vec));
        std::mem::forget(self.pin.take());
        bytes
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        let pin = self.pin.take();
        let vec = std::mem::take(&mut self.vec);
        match self.pool.take() {
            Some(pool) if !self.lent => pool.give_back(Idle { pin, vec }, self.slack),
            _ => {
                self.drop_slack();
                // Lent: the borrower owns the memory; only the registration goes (before the
                // borrower can free it). Plain: unregister (if pinned), then free.
                drop(pin);
                drop(vec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::memory::pinned::{FakePinner, PinStats};
    use ff::Field;

    /// Elements of a test buffer: 32 MiB, so that the allocator maps each one on its own pages
    /// (smaller heap blocks may share a page, which the registry serves pageable). Only the
    /// values a test writes are touched.
    const M: usize = 1 << 20;
    /// Bytes of an `M` buffer.
    const B: u64 = 32 * M as u64;

    fn setup(max_idle: usize) -> (Arc<FakePinner>, PinnedRegistry, HostPool) {
        let f = Arc::new(FakePinner::new());
        let r = PinnedRegistry::new(f.clone());
        let pool = HostPool::new(Some(r.clone()), max_idle, None);
        (f, r, pool)
    }

    /// What a partition does with its buffer: lend, write `n` values, pin them for an upload
    /// (a hit in the registry), restore. Returns the address the values were written at.
    fn use_once(r: &PinnedRegistry, b: &mut PooledBuf, n: usize, v: u64) -> usize {
        let mut z = b.lend();
        z.clear();
        z.extend((0..n as u64).map(|i| Fr::from(i + v)));
        let ptr = z.as_ptr() as usize;
        let up = r.pin_slice(&z[..]);
        assert_eq!(up.state(), &PinState::Pinned { shared: true });
        assert_eq!(up.registration(), Some(b.ptr()));
        drop(up);
        assert!(b.restore(z));
        ptr
    }

    #[test]
    fn a_buffer_is_registered_once_across_many_partitions() {
        let (f, r, pool) = setup(1);
        let mut ptrs = Vec::new();
        for k in 0..20 {
            let mut b = pool.take(M).unwrap();
            assert_eq!(b.capacity(), M);
            assert!(b.is_pinned());
            ptrs.push(b.ptr());
            ptrs.push(use_once(&r, &mut b, 1000 + k, k as u64));
            assert_eq!(b.as_slice()[0], Fr::from(k as u64));
            assert_eq!(b.as_slice().len(), 1000 + k);
        }
        // Filled to the capacity: still the same allocation.
        let mut b = pool.take(M).unwrap();
        let mut z = b.lend();
        z.resize(M, Fr::ONE);
        ptrs.push(z.as_ptr() as usize);
        assert!(b.restore(z));
        drop(b);
        assert!(
            ptrs.iter().all(|&p| p == ptrs[0]),
            "one allocation throughout"
        );
        assert_eq!(f.register_calls(), 1);
        assert_eq!(f.unregister_calls(), 0);
        assert_eq!(f.live(), vec![(ptrs[0], M * 32)]);
        assert_eq!(
            pool.stats(),
            PoolStats {
                allocated: 1,
                reused: 20,
                freed: 0,
                retired: 0
            }
        );
        assert_eq!(
            r.stats(),
            PinStats {
                registrations: 1,
                shared: 20,
                fallbacks: 0,
                unregistrations: 0
            }
        );
        assert_eq!((pool.idle_buffers(), pool.idle_bytes()), (1, B));
        pool.clear();
        assert_eq!(f.unregister_calls(), 1);
        assert!(f.live().is_empty() && r.registered().is_empty());
        assert_eq!(f.already_registered_errors(), 0);
    }

    #[test]
    fn pinning_failure_falls_back_to_a_pageable_buffer_and_is_retried_on_reuse() {
        let (f, r, pool) = setup(1);
        f.fail_next(1);
        let mut b = pool.take(M).unwrap();
        assert!(!b.is_pinned());
        assert!(matches!(
            b.pin_state(),
            Some(PinState::Pageable(PageableReason::RegisterFailed(m))) if m.contains("RLIMIT_MEMLOCK")
        ));
        // Handed out all the same: usable, pageable.
        let mut z = b.lend();
        z.resize(4096, Fr::ONE);
        assert!(b.restore(z));
        let ptr = b.ptr();
        drop(b);
        assert_eq!(pool.idle_buffers(), 1, "a pageable buffer is pooled too");
        // Reused: the registration is tried again, and holds from then on.
        for _ in 0..3 {
            let b = pool.take(M).unwrap();
            assert_eq!(b.ptr(), ptr);
            assert!(b.is_pinned());
            assert_eq!(b.as_slice()[4095], Fr::ONE);
        }
        assert_eq!(f.register_calls(), 2);
        assert_eq!(r.stats().fallbacks, 1);
        // Without a registry: plain buffers, no pinning at all.
        let plain = HostPool::new(None, 1, None);
        let b = plain.take(100).unwrap();
        assert_eq!(
            (b.pin_state(), b.is_pinned(), b.capacity()),
            (None, false, 100)
        );
        assert!(!plain.pins());
    }

    #[test]
    fn the_idle_bound_frees_extras_and_too_small_buffers_are_replaced() {
        let (f, _r, pool) = setup(2);
        let bufs: Vec<_> = (0..4).map(|_| pool.take(M).unwrap()).collect();
        assert!(bufs.iter().all(PooledBuf::is_pinned));
        assert_eq!(f.register_calls(), 4);
        drop(bufs);
        // Two kept, two freed (unregistered first).
        assert_eq!(pool.idle_buffers(), 2);
        assert_eq!(f.unregister_calls(), 2);
        assert_eq!(f.live().len(), 2);
        // A larger request: the largest too-small idle buffer is freed and replaced.
        let big = pool.take(3 * M).unwrap();
        assert_eq!(big.capacity(), 3 * M);
        assert_eq!((pool.idle_buffers(), f.unregister_calls()), (1, 3));
        drop(big);
        assert_eq!(pool.idle_buffers(), 2);
        // A smaller request takes the smallest buffer that holds it …
        let small = pool.take(M - M / 10).unwrap();
        assert_eq!(small.capacity(), M);
        // … and none more than MAX_SLACK times larger than it: the 3·M one stays idle.
        let tiny = pool.take(10).unwrap();
        assert_eq!(tiny.capacity(), 10);
        assert_eq!((pool.idle_buffers(), pool.idle_bytes()), (1, 3 * B));
        assert_eq!(
            pool.stats(),
            PoolStats {
                allocated: 6,
                reused: 1,
                freed: 3,
                retired: 0
            }
        );
    }

    #[test]
    fn a_buffer_that_comes_back_reallocated_is_not_pooled() {
        let (f, r, pool) = setup(1);
        let mut b = pool.take(100).unwrap();
        let mut z = b.lend();
        z.extend(std::iter::repeat(Fr::ONE).take(200)); // grows: reallocated
        assert!(!b.restore(z));
        assert_eq!(
            f.unregister_calls(),
            1,
            "the lost range is released at once"
        );
        assert!(r.registered().is_empty());
        drop(b);
        assert_eq!(pool.idle_buffers(), 0);
        // Dropped while lent: the registration goes, nothing returns to the pool.
        let mut b = pool.take(100).unwrap();
        let z = b.lend();
        assert!(b.is_lent() && b.lend().is_empty());
        drop(b);
        assert_eq!(f.unregister_calls(), 2);
        assert_eq!(pool.idle_buffers(), 0);
        drop(z);
        assert_eq!(f.already_registered_errors(), 0);
        // n = 0: no allocation, no registration.
        let e = pool.take(0).unwrap();
        assert_eq!((e.capacity(), e.pin_state()), (0, None));
        assert_eq!(f.register_calls(), 2);
        // An impossible size is a typed error, not a panic.
        let huge = pool.take(usize::MAX / 8).unwrap_err();
        assert!(matches!(huge, Error::OutOfHostMemory { .. }), "{huge}");
    }

    /// The engine's order at the end of a partition — the permit lets go of z
    /// (`Permit::release`), then the buffer returns — pools the buffer even under a limit
    /// sized for one partition (returned inside the permit it would count twice and be freed,
    /// allocated and registered anew for every partition); an admission over the limit makes
    /// the idle buffer give way (`trim_to_budget`); a reused buffer larger than its request
    /// keeps the excess counted as pooled while it is out.
    #[test]
    fn a_returning_buffer_leaves_its_permit_first_and_idle_ones_give_way() {
        // Room for the parameters (2·B) and one partition (3·B, z = B of it).
        let budget = Arc::new(HostBudget::new(Some(5 * B)));
        budget.add_params(2 * B);
        let f = Arc::new(FakePinner::new());
        let pool = HostPool::new(
            Some(PinnedRegistry::new(f.clone())),
            2,
            Some(budget.clone()),
        );
        for _ in 0..5 {
            let mut permit = budget.acquire(3 * B).unwrap();
            let b = pool.take(M).unwrap(); // reuses: the idle B moves into the permit
            assert!(!budget.over_limit());
            permit.release(B);
            assert_eq!(permit.bytes(), 2 * B);
            drop(b);
            assert_eq!(budget.pooled(), B, "pooled, counted once");
            assert!(!budget.over_limit());
        }
        assert_eq!(
            (
                f.register_calls(),
                pool.stats().allocated,
                pool.stats().reused
            ),
            (1, 1, 4)
        );
        // A partition that does not use the pool (the reference path) is admitted beside the
        // idle buffer; trimming then frees it, so nothing counted exceeds the limit.
        let permit = budget.acquire(3 * B).unwrap();
        assert!(budget.over_limit());
        pool.trim_to_budget();
        assert!(!budget.over_limit());
        assert_eq!((pool.idle_buffers(), budget.pooled()), (0, 0));
        assert_eq!(f.unregister_calls(), 1);
        drop(permit);
        // Slack: a 2M buffer reused for M values keeps M values' bytes counted as pooled.
        let budget = Arc::new(HostBudget::new(Some(100 * B)));
        let pool = HostPool::new(
            Some(PinnedRegistry::new(f.clone())),
            2,
            Some(budget.clone()),
        );
        drop(pool.take(2 * M).unwrap());
        assert_eq!(budget.pooled(), 2 * B);
        let b = pool.take(M).unwrap();
        assert_eq!(
            (b.capacity(), budget.pooled()),
            (2 * M, B),
            "the excess stays counted"
        );
        drop(b);
        assert_eq!(budget.pooled(), 2 * B, "back: its whole capacity, once");
        let b = pool.take(M).unwrap();
        assert_eq!(b.retire(), 2 * B);
        assert_eq!(
            budget.used(),
            (2 * B, 0),
            "retired: kept, the slack no longer pooled"
        );
        assert_eq!(budget.pooled(), 0);
    }

    #[test]
    fn idle_bytes_are_counted_in_the_host_budget() {
        // A 10·B budget with 6·B of parameters: one idle B buffer fits beside a 3·B permit,
        // not beside a 3.5·B one.
        let budget = Arc::new(HostBudget::new(Some(10 * B)));
        budget.add_params(6 * B);
        let f = Arc::new(FakePinner::new());
        let pool = HostPool::new(
            Some(PinnedRegistry::new(f.clone())),
            4,
            Some(budget.clone()),
        );
        {
            let _permit = budget.acquire(3 * B).unwrap();
            let b = pool.take(M).unwrap();
            assert_eq!(budget.pooled(), 0, "out of the pool: counted by the permit");
            drop(b);
            assert_eq!((budget.pooled(), pool.idle_bytes()), (B, B));
        }
        // Taken again: its bytes move back into the partition's permit.
        let permit = budget.acquire(3 * B).unwrap();
        let b = pool.take(M).unwrap();
        assert_eq!(budget.pooled(), 0);
        drop(b);
        assert_eq!(budget.pooled(), B);
        drop(permit);
        // Idle bytes do not hold a permit back …
        let permit = budget.acquire(3 * B + B / 2).unwrap();
        assert!(budget.over_limit());
        // … and a take that cannot reuse the idle buffer frees it (over the limit).
        let b = pool.take(10).unwrap();
        assert_eq!((budget.pooled(), pool.idle_buffers()), (0, 0));
        assert!(!budget.over_limit());
        assert_eq!(f.unregister_calls(), 1);
        // Returned while the budget has no room for it: freed, not pooled.
        let c = pool.take(M).unwrap();
        drop(c);
        assert_eq!(pool.idle_buffers(), 0);
        drop(b); // 320 bytes: room for them
        assert_eq!(budget.pooled(), 320);
        drop(permit);
        assert_eq!(budget.used(), (6 * B, 0));
        // Retired: never reused or freed, counted as kept memory.
        let b = pool.take(M).unwrap();
        let live = f.live();
        assert_eq!(b.retire(), B);
        assert_eq!(budget.used(), (7 * B, 0));
        assert_eq!(f.live(), live, "still registered");
        assert_eq!(pool.stats().retired, 1);
        assert_eq!(pool.idle_buffers(), 0);
    }
}
