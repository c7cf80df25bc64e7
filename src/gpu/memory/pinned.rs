//! Process-wide registry of pinned (page-locked) host ranges, reference-counted.
//!
//! Uploads of a, b, c and of streamed MSM bases are fastest from pinned memory. Pinning a range
//! (`cuMemHostRegister`) twice fails with `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED` (712), and
//! unpinning it while another worker still copies from it is a use-after-free of the
//! registration. The [`PinnedRegistry`] makes both impossible: every pin goes through it, it
//! registers a range once however many users ask, and it unregisters it when the last
//! [`PinGuard`] drops.
//!
//! # Policy for ranges that meet registered ones
//! The driver pins whole pages, so two registrations that touch the same page collide (712).
//! The registry therefore compares ranges after rounding them out to the page size
//! ([`PAGE_SIZE`], 4 KiB, or [`PinnedRegistry::with_page_size`]):
//! - **same or contained** — a range inside a registered range (exact bytes, not rounded) shares
//!   that registration: its reference count goes up, nothing is registered;
//! - **disjoint** — a range whose pages meet no registered range is registered on its own;
//! - **partial overlap** (including a range that contains a registered one, or shares a page
//!   with one without lying inside it) — served **pageable** ([`PageableReason::Overlap`],
//!   logged with `log::warn!`). Growing the registration is not done: it would need to
//!   unregister a range other workers are copying from. Never a double registration.
//! - **being unregistered** — a pin that meets a range whose last user is unregistering it waits
//!   for that to finish, then registers afresh (no 712 in the window between the two calls).
//!
//! If registration fails (memlock limit, out of host memory), the guard is [`PinState::Pageable`]
//! with [`PageableReason::RegisterFailed`] and a `log::warn!` line — a fallback, never an error.
//! Concurrent pins of one range block only until the first caller's registration finishes (the
//! registry's lock is not held during the driver calls, so unrelated ranges never wait).
//!
//! The CUDA [`HostPinner`] (`cuMemHostRegister` / `cuMemHostUnregister`) comes with the device
//! code; tests use `FakePinner`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
#[cfg(any(test, feature = "test-hooks"))]
use std::time::Duration;

#[cfg(any(test, feature = "test-hooks"))]
use crate::error::Error;
use crate::error::Result;

/// Default host page size in bytes (4 KiB) used to detect ranges that share pages.
pub const PAGE_SIZE: usize = 4096;

/// Registers host memory with the driver.
pub trait HostPinner: Send + Sync {
    /// Page-locks `len` bytes at address `ptr` for DMA (`cuMemHostRegister`, portable).
    ///
    /// # Errors
    /// [`crate::Error::Cuda`] with the driver's message (712 when already registered, 2 when out of
    /// memory or over the memlock limit).
    fn register(&self, ptr: usize, len: usize) -> Result<()>;
    /// Releases the registration that starts at `ptr` (`cuMemHostUnregister`).
    ///
    /// # Errors
    /// [`crate::Error::Cuda`] (713 when `ptr` is not registered).
    fn unregister(&self, ptr: usize) -> Result<()>;
}

/// Why a [`PinGuard`] is pageable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageableReason {
    /// Zero-length range: nothing to pin (not logged).
    Empty,
    /// `ptr + len` overflows the address space.
    InvalidRange,
    /// The range partially overlaps (or shares a page with) a registered range it does not lie
    /// inside.
    Overlap {
        /// Start of the registered range met.
        registered_ptr: usize,
        /// Its length in bytes.
        registered_len: usize,
    },
    /// The driver refused the registration; its message.
    RegisterFailed(String),
}

impl fmt::Display for PageableReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageableReason::Empty => f.write_str("empty range"),
            PageableReason::InvalidRange => f.write_str("range overflows the address space"),
            PageableReason::Overlap { registered_ptr, registered_len } => write!(
                f,
                "overlaps the registered range {registered_ptr:#x}+{registered_len} without lying inside it"
            ),
            PageableReason::RegisterFailed(m) => write!(f, "registration failed: {m}"),
        }
    }
}

/// Whether a guarded range is pinned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PinState {
    /// Page-locked; copies can be asynchronous.
    Pinned {
        /// `true` when an existing registration was shared (this guard did not register).
        shared: bool,
    },
    /// Not pinned: uploads must use pageable (staged) copies.
    Pageable(PageableReason),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum EntryState {
    Registering,
    Registered,
    Failed(String),
    Unregistering,
}

#[derive(Debug)]
struct Entry {
    len: usize,
    refs: usize,
    state: EntryState,
}

/// Counters of a [`PinnedRegistry`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg(any(test, feature = "internals"))]
pub struct PinStats {
    /// Successful `register` calls.
    pub registrations: u64,
    /// Pins that shared an existing registration.
    pub shared: u64,
    /// Pins served pageable (all reasons but `Empty`).
    pub fallbacks: u64,
    /// `unregister` calls.
    pub unregistrations: u64,
}

struct Inner {
    pinner: Arc<dyn HostPinner>,
    page: usize,
    map: Mutex<BTreeMap<usize, Entry>>,
    changed: Condvar,
    registrations: AtomicU64,
    shared: AtomicU64,
    fallbacks: AtomicU64,
    unregistrations: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inner {
    fn round(&self, start: usize, end: usize) -> (usize, usize) {
        let lo = start / self.page * self.page;
        let hi = end.div_ceil(self.page).saturating_mul(self.page);
        (lo, hi)
    }

    /// Keys of entries whose page-rounded extents meet the page-rounded `[lo, hi)`.
    fn overlapping(map: &BTreeMap<usize, Entry>, this: &Inner, lo: usize, hi: usize) -> Vec<usize> {
        let mut keys = Vec::new();
        for (&start, e) in map.range(..hi).rev() {
            let (_, ehi) = this.round(start, start + e.len);
            if ehi <= lo {
                break;
            }
            keys.push(start);
        }
        keys
    }

    fn release(&self, key: usize) {
        let mut map = lock(&self.map);
        let Some(e) = map.get_mut(&key) else { return };
        e.refs -= 1;
        if e.refs > 0 {
            return;
        }
        e.state = EntryState::Unregistering;
        drop(map);
        let r = self.pinner.unregister(key);
        self.unregistrations.fetch_add(1, Ordering::Relaxed);
        let mut map = lock(&self.map);
        map.remove(&key);
        drop(map);
        self.changed.notify_all();
        if let Err(e) = r {
            log::warn!("unpinning host range at {key:#x} failed: {e}");
        }
    }
}

/// The registry; clone it freely (clones share one registry). Use one per process:
/// [`PinnedRegistry::global`].
#[derive(Clone)]
pub struct PinnedRegistry {
    inner: Arc<Inner>,
}

impl fmt::Debug for PinnedRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedRegistry")
            .field("page", &self.inner.page)
            .field("ranges", &*lock(&self.inner.map))
            .finish()
    }
}

static GLOBAL: OnceLock<PinnedRegistry> = OnceLock::new();

impl PinnedRegistry {
    /// A registry over `pinner` with [`PAGE_SIZE`] pages.
    pub fn new(pinner: Arc<dyn HostPinner>) -> Self {
        Self::with_page_size(pinner, PAGE_SIZE)
    }

    /// A registry over `pinner` whose overlap checks use `page`-byte pages (rounded up to a
    /// power of two, at least 1; e.g. 2 MiB for huge-page buffers).
    pub fn with_page_size(pinner: Arc<dyn HostPinner>, page: usize) -> Self {
        PinnedRegistry {
            inner: Arc::new(Inner {
                pinner,
                page: page.max(1).next_power_of_two(),
                map: Mutex::new(BTreeMap::new()),
                changed: Condvar::new(),
                registrations: AtomicU64::new(0),
                shared: AtomicU64::new(0),
                fallbacks: AtomicU64::new(0),
                unregistrations: AtomicU64::new(0),
            }),
        }
    }

    /// The process-wide registry, created by `init` on the first call (later calls return the
    /// same registry and ignore `init`).
    pub fn global(init: impl FnOnce() -> Arc<dyn HostPinner>) -> &'static PinnedRegistry {
        GLOBAL.get_or_init(|| PinnedRegistry::new(init()))
    }

    /// Pins `len` bytes at `ptr` (see the module's policy). Never fails: a range that cannot be
    /// pinned gives a [`PinState::Pageable`] guard. May block while another caller registers or
    /// unregisters the same range.
    ///
    /// The memory must stay allocated while the guard lives (the driver keeps it locked).
    pub fn pin(&self, ptr: usize, len: usize) -> PinGuard {
        let inner = &self.inner;
        let pageable = |reason: PageableReason| {
            if reason != PageableReason::Empty {
                inner.fallbacks.fetch_add(1, Ordering::Relaxed);
                log::warn!(
                    "host range {ptr:#x}+{len} served pageable ({reason}); its uploads are synchronous copies"
                );
            }
            PinGuard {
                registry: None,
                key: 0,
                ptr,
                len,
                state: PinState::Pageable(reason),
            }
        };
        if len == 0 {
            return pageable(PageableReason::Empty);
        }
        let Some(end) = ptr.checked_add(len) else {
            return pageable(PageableReason::InvalidRange);
        };
        let (lo, hi) = inner.round(ptr, end);
        let mut map = lock(&inner.map);
        loop {
            let keys = Inner::overlapping(&map, inner, lo, hi);
            if keys.is_empty() {
                map.insert(
                    ptr,
                    Entry {
                        len,
                        refs: 1,
                        state: EntryState::Registering,
                    },
                );
                drop(map);
                let r = inner.pinner.register(ptr, len);
                let mut map = lock(&inner.map);
                let e = map
                    .get_mut(&ptr)
                    .expect("registering entry stays while referenced");
                let guard = match r {
                    Ok(()) => {
                        e.state = EntryState::Registered;
                        inner.registrations.fetch_add(1, Ordering::Relaxed);
                        Ok(PinGuard {
                            registry: Some(self.clone()),
                            key: ptr,
                            ptr,
                            len,
                            state: PinState::Pinned { shared: false },
                        })
                    }
                    Err(err) => {
                        let msg = err.to_string();
                        e.state = EntryState::Failed(msg.clone());
                        e.refs -= 1;
                        if e.refs == 0 {
                            map.remove(&ptr);
                        }
                        Err(msg)
                    }
                };
                drop(map);
                inner.changed.notify_all();
                return guard.unwrap_or_else(|m| pageable(PageableReason::RegisterFailed(m)));
            }
            // Anything in transition (failed or being unregistered) will leave the map: wait
            // for it and look again.
            if keys.iter().any(|k| {
                matches!(
                    map[k].state,
                    EntryState::Unregistering | EntryState::Failed(_)
                )
            }) {
                map = inner
                    .changed
                    .wait(map)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            let key = keys[0];
            let e = map.get_mut(&key).expect("key from the map");
            let contained = keys.len() == 1 && key <= ptr && end <= key + e.len;
            if !contained {
                let reason = PageableReason::Overlap {
                    registered_ptr: key,
                    registered_len: e.len,
                };
                drop(map);
                return pageable(reason);
            }
            e.refs += 1;
            // Registered already, or wait for the first caller's registration to settle.
            loop {
                let e = map.get_mut(&key).expect("entry stays while referenced");
                match &e.state {
                    EntryState::Registered => {
                        inner.shared.fetch_add(1, Ordering::Relaxed);
                        return PinGuard {
                            registry: Some(self.clone()),
                            key,
                            ptr,
                            len,
                            state: PinState::Pinned { shared: true },
                        };
                    }
                    EntryState::Failed(m) => {
                        let m = m.clone();
                        e.refs -= 1;
                        if e.refs == 0 {
                            map.remove(&key);
                            inner.changed.notify_all();
                        }
                        drop(map);
                        return pageable(PageableReason::RegisterFailed(m));
                    }
                    _ => {
                        map = inner
                            .changed
                            .wait(map)
                            .unwrap_or_else(PoisonError::into_inner)
                    }
                }
            }
        }
    }

    /// Pins the memory of a slice (`size_of_val(slice)` bytes at its address); see [`Self::pin`].
    /// The slice must outlive the guard.
    pub fn pin_slice<T>(&self, slice: &[T]) -> PinGuard {
        self.pin(slice.as_ptr() as usize, std::mem::size_of_val(slice))
    }

    /// Registered ranges now, as `(ptr, len, users)`, sorted by address (settled entries only).
    #[cfg(any(test, feature = "internals"))]
    pub fn registered(&self) -> Vec<(usize, usize, usize)> {
        lock(&self.inner.map)
            .iter()
            .filter(|(_, e)| e.state == EntryState::Registered)
            .map(|(&p, e)| (p, e.len, e.refs))
            .collect()
    }

    /// Counters since creation.
    #[cfg(any(test, feature = "internals"))]
    pub fn stats(&self) -> PinStats {
        let i = &self.inner;
        PinStats {
            registrations: i.registrations.load(Ordering::Relaxed),
            shared: i.shared.load(Ordering::Relaxed),
            fallbacks: i.fallbacks.load(Ordering::Relaxed),
            unregistrations: i.unregistrations.load(Ordering::Relaxed),
        }
    }
}

/// One user's hold on a host range. Pinned ranges are unregistered when their last guard drops.
pub struct PinGuard {
    registry: Option<PinnedRegistry>,
    key: usize,
    ptr: usize,
    len: usize,
    state: PinState,
}

impl fmt::Debug for PinGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinGuard")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("state", &self.state)
            .finish()
    }
}

impl PinGuard {
    /// Start address of the guarded range.
    #[cfg(any(test, feature = "internals"))]
    pub fn ptr(&self) -> usize {
        self.ptr
    }

    /// Length in bytes.
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Pinned or pageable, with the reason.
    pub fn state(&self) -> &PinState {
        &self.state
    }

    /// `true` when the range is page-locked.
    pub fn is_pinned(&self) -> bool {
        matches!(self.state, PinState::Pinned { .. })
    }

    /// Why the range is pageable, `None` when pinned.
    pub fn fallback(&self) -> Option<&PageableReason> {
        match &self.state {
            PinState::Pageable(r) => Some(r),
            PinState::Pinned { .. } => None,
        }
    }

    /// Start address of the registration covering this range (equal to [`Self::ptr`] unless it
    /// shares a larger one), `None` when pageable.
    #[cfg(any(test, feature = "internals"))]
    pub fn registration(&self) -> Option<usize> {
        self.registry.as_ref().map(|_| self.key)
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Some(reg) = self.registry.take() {
            reg.inner.release(self.key);
        }
    }
}

#[cfg(any(test, feature = "test-hooks"))]
/// One call made to a [`FakePinner`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinCall {
    /// `register(ptr, len)`.
    Register {
        /// Address.
        ptr: usize,
        /// Bytes.
        len: usize,
    },
    /// `unregister(ptr)`.
    Unregister {
        /// Address.
        ptr: usize,
    },
}

#[cfg(any(test, feature = "test-hooks"))]
#[derive(Debug, Default)]
struct FakePinState {
    live: BTreeMap<usize, usize>,
    calls: Vec<PinCall>,
    fail_next: usize,
    fail_all: bool,
    already_registered_errors: u64,
    max_live: usize,
}

#[cfg(any(test, feature = "test-hooks"))]
/// A [`HostPinner`] for tests: records every call, keeps the set of registered ranges, fails
/// like the driver does — `CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712)` when a range shares
/// a page with a registered one, `CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713)` for an unknown
/// unregister — and can be told to refuse registrations (`CUDA_ERROR_OUT_OF_MEMORY (2)`).
/// An optional delay inside each call widens race windows.
#[derive(Debug)]
pub struct FakePinner {
    state: Mutex<FakePinState>,
    page: usize,
    delay: Duration,
}

#[cfg(any(test, feature = "test-hooks"))]
impl Default for FakePinner {
    fn default() -> Self {
        FakePinner::new()
    }
}

#[cfg(any(test, feature = "test-hooks"))]
impl FakePinner {
    /// A fake with [`PAGE_SIZE`] pages and no delay.
    pub fn new() -> Self {
        FakePinner {
            state: Mutex::default(),
            page: PAGE_SIZE,
            delay: Duration::ZERO,
        }
    }

    /// The same fake, sleeping `delay` inside every call.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Makes the next `n` registrations fail.
    pub fn fail_next(&self, n: usize) {
        lock(&self.state).fail_next = n;
    }

    /// Makes every registration fail (`true`) or succeed again (`false`).
    pub fn set_fail_all(&self, fail: bool) {
        lock(&self.state).fail_all = fail;
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<PinCall> {
        lock(&self.state).calls.clone()
    }

    /// Number of `register` calls (successful or not).
    pub fn register_calls(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, PinCall::Register { .. }))
            .count()
    }

    /// Number of `unregister` calls.
    pub fn unregister_calls(&self) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, PinCall::Unregister { .. }))
            .count()
    }

    /// Currently registered ranges `(ptr, len)`.
    pub fn live(&self) -> Vec<(usize, usize)> {
        lock(&self.state)
            .live
            .iter()
            .map(|(&p, &l)| (p, l))
            .collect()
    }

    /// Most ranges registered at once.
    pub fn max_live(&self) -> usize {
        lock(&self.state).max_live
    }

    /// How many registrations were refused with 712 (a registry bug if ever non-zero).
    pub fn already_registered_errors(&self) -> u64 {
        lock(&self.state).already_registered_errors
    }
}

#[cfg(any(test, feature = "test-hooks"))]
impl HostPinner for FakePinner {
    fn register(&self, ptr: usize, len: usize) -> Result<()> {
        let err = |m: &str| Error::Cuda {
            device: 0,
            call: "cuMemHostRegister".into(),
            message: m.into(),
            fault: None,
        };
        let mut s = lock(&self.state);
        s.calls.push(PinCall::Register { ptr, len });
        if s.fail_all || s.fail_next > 0 {
            s.fail_next = s.fail_next.saturating_sub(1);
            return Err(err("CUDA_ERROR_OUT_OF_MEMORY (2): RLIMIT_MEMLOCK (fake)"));
        }
        let page = self.page;
        let lo = ptr / page;
        let hi = (ptr + len).div_ceil(page);
        let clash = s
            .live
            .iter()
            .any(|(&p, &l)| p / page < hi && (p + l).div_ceil(page) > lo);
        if clash {
            s.already_registered_errors += 1;
            return Err(err("CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712)"));
        }
        s.live.insert(ptr, len);
        s.max_live = s.max_live.max(s.live.len());
        drop(s);
        std::thread::sleep(self.delay);
        Ok(())
    }

    fn unregister(&self, ptr: usize) -> Result<()> {
        std::thread::sleep(self.delay);
        let mut s = lock(&self.state);
        s.calls.push(PinCall::Unregister { ptr });
        match s.live.remove(&ptr) {
            Some(_) => Ok(()),
            None => Err(Error::Cuda {
                device: 0,
                call: "cuMemHostUnregister".into(),
                message: "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713)".into(),
                fault: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    const MIB: usize = 1 << 20;
    const BASE: usize = 0x7f00_0000_0000;

    fn setup() -> (Arc<FakePinner>, PinnedRegistry) {
        let f = Arc::new(FakePinner::new());
        let r = PinnedRegistry::new(f.clone());
        (f, r)
    }

    #[test]
    fn same_range_twice_registers_once() {
        let (f, r) = setup();
        let g1 = r.pin(BASE, 64 * MIB);
        let g2 = r.pin(BASE, 64 * MIB);
        assert_eq!(g1.state(), &PinState::Pinned { shared: false });
        assert_eq!(g2.state(), &PinState::Pinned { shared: true });
        assert_eq!(
            f.calls(),
            vec![PinCall::Register {
                ptr: BASE,
                len: 64 * MIB
            }]
        );
        assert_eq!(r.registered(), vec![(BASE, 64 * MIB, 2)]);
        drop(g1);
        drop(g2);
        assert_eq!(
            f.calls(),
            vec![
                PinCall::Register {
                    ptr: BASE,
                    len: 64 * MIB
                },
                PinCall::Unregister { ptr: BASE }
            ]
        );
        assert!(f.live().is_empty());
        assert_eq!(f.already_registered_errors(), 0);
        assert_eq!(
            r.stats(),
            PinStats {
                registrations: 1,
                shared: 1,
                fallbacks: 0,
                unregistrations: 1
            }
        );
    }

    #[test]
    fn release_order_first_or_last_user() {
        let (f, r) = setup();
        // first user drops first: the registration survives until the second drops
        let a = r.pin(BASE, MIB);
        let b = r.pin(BASE, MIB);
        drop(a);
        assert_eq!(f.unregister_calls(), 0);
        assert_eq!(f.live(), vec![(BASE, MIB)]);
        assert_eq!(r.registered(), vec![(BASE, MIB, 1)]);
        drop(b);
        assert_eq!(f.unregister_calls(), 1);
        // last user drops first: same outcome
        let a = r.pin(BASE, MIB);
        let b = r.pin(BASE, MIB);
        drop(b);
        assert_eq!(f.unregister_calls(), 1);
        drop(a);
        assert_eq!((f.register_calls(), f.unregister_calls()), (2, 2));
        assert!(f.live().is_empty() && r.registered().is_empty());
    }

    #[test]
    fn contained_range_shares_the_registration() {
        let (f, r) = setup();
        let outer = r.pin(BASE, 16 * MIB);
        let inner = r.pin(BASE + 4096 + 10, MIB);
        let tail = r.pin(BASE + 15 * MIB, MIB); // ends exactly at the outer end
        assert_eq!(inner.state(), &PinState::Pinned { shared: true });
        assert_eq!(tail.state(), &PinState::Pinned { shared: true });
        assert_eq!(inner.registration(), Some(BASE));
        assert_eq!(f.register_calls(), 1);
        // the outer user leaves first: the inner ones keep the registration
        drop(outer);
        assert_eq!(f.unregister_calls(), 0);
        drop(inner);
        assert_eq!(f.unregister_calls(), 0);
        drop(tail);
        assert_eq!(f.calls().last(), Some(&PinCall::Unregister { ptr: BASE }));
        assert!(f.live().is_empty());
    }

    #[test]
    fn overlapping_ranges_are_pageable_never_double_registered() {
        let (f, r) = setup();
        let a = r.pin(BASE, 16 * MIB);
        // straddles the end
        let b = r.pin(BASE + 8 * MIB, 16 * MIB);
        assert_eq!(
            b.fallback(),
            Some(&PageableReason::Overlap {
                registered_ptr: BASE,
                registered_len: 16 * MIB
            })
        );
        assert!(!b.is_pinned());
        assert_eq!(b.registration(), None);
        // contains the registered range
        let c = r.pin(BASE - MIB, 32 * MIB);
        assert!(matches!(c.fallback(), Some(PageableReason::Overlap { .. })));
        // starts right after the registered end but in the same page (end not page aligned)
        let d0 = r.pin(BASE + 32 * MIB, 100);
        let d1 = r.pin(BASE + 32 * MIB + 100, 100);
        assert!(d0.is_pinned());
        assert!(matches!(
            d1.fallback(),
            Some(PageableReason::Overlap { .. })
        ));
        // page-aligned neighbour: its own registration
        let e = r.pin(BASE + 16 * MIB, MIB);
        assert_eq!(e.state(), &PinState::Pinned { shared: false });
        assert_eq!(f.register_calls(), 3);
        assert_eq!(f.already_registered_errors(), 0);
        assert_eq!(r.stats().fallbacks, 3);
        drop((a, b, c, d0, d1, e));
        assert_eq!(f.unregister_calls(), 3);
        assert!(f.live().is_empty());
    }

    #[test]
    fn registration_failure_falls_back_to_pageable() {
        let (f, r) = setup();
        f.set_fail_all(true);
        let g = r.pin(BASE, MIB);
        match g.fallback() {
            Some(PageableReason::RegisterFailed(m)) => {
                assert!(m.contains("cuMemHostRegister"), "{m}");
                assert!(m.contains("RLIMIT_MEMLOCK"), "{m}");
            }
            other => panic!("expected RegisterFailed, got {other:?}"),
        }
        assert!(r.registered().is_empty());
        drop(g);
        assert_eq!(f.unregister_calls(), 0);
        // the next pin tries again and succeeds once the limit is lifted
        f.set_fail_all(false);
        let g = r.pin(BASE, MIB);
        assert!(g.is_pinned());
        assert_eq!(r.stats().fallbacks, 1);
        // empty ranges are pageable without a driver call or a fallback count
        let e = r.pin(BASE, 0);
        assert_eq!(e.fallback(), Some(&PageableReason::Empty));
        let o = r.pin(usize::MAX - 10, 100);
        assert_eq!(o.fallback(), Some(&PageableReason::InvalidRange));
        assert_eq!(f.register_calls(), 2);
    }

    #[test]
    fn pin_slice_pins_a_real_buffer() {
        let (f, r) = setup();
        let buf = vec![0u64; 1000];
        let g = r.pin_slice(&buf);
        assert_eq!((g.ptr(), g.len()), (buf.as_ptr() as usize, 8000));
        assert!(g.is_pinned());
        assert_eq!(f.live(), vec![(buf.as_ptr() as usize, 8000)]);
    }

    #[test]
    fn many_threads_pin_the_same_range_once() {
        let f = Arc::new(FakePinner::new().with_delay(Duration::from_millis(20)));
        let r = PinnedRegistry::new(f.clone());
        let n = 16;
        let barrier = Arc::new(Barrier::new(n));
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let (r, b) = (r.clone(), barrier.clone());
                std::thread::spawn(move || {
                    b.wait();
                    let g = r.pin(BASE, 256 * MIB);
                    let pinned = g.is_pinned();
                    b.wait(); // everyone holds a guard at once
                    pinned
                })
            })
            .collect();
        assert!(handles.into_iter().all(|h| h.join().unwrap()));
        assert_eq!((f.register_calls(), f.unregister_calls()), (1, 1));
        assert_eq!(r.stats().shared, n as u64 - 1);
        assert_eq!(f.already_registered_errors(), 0);
    }

    #[test]
    fn pin_unpin_storm_never_double_registers() {
        let f = Arc::new(FakePinner::new().with_delay(Duration::from_micros(200)));
        let r = PinnedRegistry::new(f.clone());
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..60usize {
                        // same range, a contained one, a straddling one, another buffer
                        let (p, l) = match (t + i) % 4 {
                            0 => (BASE, 8 * MIB),
                            1 => (BASE + MIB, MIB),
                            2 => (BASE + 4 * MIB, 8 * MIB),
                            _ => (BASE + 64 * MIB, MIB),
                        };
                        let g = r.pin(p, l);
                        if i % 3 == 0 {
                            std::thread::yield_now();
                        }
                        drop(g);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(f.already_registered_errors(), 0);
        assert_eq!(f.register_calls(), f.unregister_calls());
        assert!(f.live().is_empty());
        assert!(r.registered().is_empty());
        // unregister of an unknown pointer would have been a 713: every unregister matched
        let mut live = std::collections::BTreeSet::new();
        for c in f.calls() {
            match c {
                PinCall::Register { ptr, .. } => assert!(live.insert(ptr)),
                PinCall::Unregister { ptr } => assert!(live.remove(&ptr)),
            }
        }
    }

    #[test]
    fn global_registry_is_one_per_process() {
        let a = PinnedRegistry::global(|| Arc::new(FakePinner::new()));
        let b = PinnedRegistry::global(|| unreachable!("initialised once"));
        assert!(std::ptr::eq(a, b));
        let g = a.pin(BASE, MIB);
        assert!(g.is_pinned());
    }
}
