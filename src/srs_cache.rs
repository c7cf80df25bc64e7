//! The engine's loaded parameter sets, one per `.params` file (one per circuit: PoRep C2,
//! WindowPoSt and WinningPoSt of each sector size), loaded on demand and kept within the
//! host-memory budget ([`crate::budget`]). A 32 GiB PoRep set (44 GiB) and a 32 GiB WindowPoSt
//! set do not both fit beside partitions on a 128 GiB host: a load that lacks room evicts the
//! least recently used idle set.
//!
//! # Rules
//! - **Holds.** An engine call holds its set ([`Hold`]) from before the set is loaded until the
//!   call returns (its partitions queued or running included); a held set is never evicted. Only
//!   engine calls hold sets, not jobs waiting in the daemon's queue: a queued job holding its set
//!   could keep it from ever going idle while the running job it waits for waits for room.
//! - **Room.** Before its partitions start, a call makes room ([`Hold::make_room`]): what the
//!   budget counts as kept (loaded and loading sets, compiled circuits), plus its own set's
//!   bytes when it is not loaded, plus the headroom of the largest call holding a set (one
//!   partition, and a compiled circuit not loaded yet) must fit the limit. Else the least
//!   recently used idle set is evicted (used: a call took a hold on it, or its load ended), then
//!   the next, until it fits. A preload (the daemon's `PreloadSRS`) asks room for the set alone.
//! - **Waiting.** With no idle set left to evict and a set in use by a running call (one not
//!   itself waiting for room: two calls never wait for each other), the call waits until a set
//!   goes idle; it is not an error. While a call waits for room, new calls of a loaded set that
//!   could be evicted wait behind it (first come, first served), so that a steady stream of one
//!   kind cannot keep another kind's set out (a WindowPoSt deadline behind continuous PoRep).
//!   The waits end with [`Error::Cancelled`] when the call's token is cancelled.
//! - **Pinned sets** — WinningPoSt's: small (~0.2 GB at 32 GiB), and block production waits on
//!   it — are never evicted for room, their calls never wait behind a load, for room or for
//!   the drain below (they evict idle sets when needed, else load beside them); only
//!   [`SetCache::evict`] (the daemon's `EvictSRS`) removes them.
//! - **Too large.** A set larger than the caller's whole limit (`CUZK_HOST_MEM_LIMIT`) is
//!   [`Error::OutOfHostMemory`] at once, nothing evicted. When nothing more can be evicted or
//!   waited for, the set loads anyway (beyond the machine's own estimated limit, with a
//!   warning): its partitions then wait for memory, or fail as with a single set when a caller's
//!   limit cannot hold one beside the parameters.
//! - **Drain.** Once a set's room is counted, its load waits until the partitions in flight fit
//!   the limit beside it ([`HostBudget::wait_within_limit`]; none is admitted meanwhile), so that
//!   the load never allocates memory those partitions still hold (pinned sets excepted).
//! - **Once.** A loaded set is never read again while it stays loaded: concurrent calls of a
//!   set wait for its one load; a failed load is not kept (a later call tries again, the room
//!   staying counted while calls hold the set).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use crate::budget::HostBudget;
use crate::cancel::CancelToken;
use crate::error::{Error, Result};

/// How often a wait of a call with a cancellation token looks at the token.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// The loaded sets (see the module docs). `T` is the set (the engine's [`crate::srs::Srs`];
/// tests use small fake sets); keys are the sets' `.params` paths.
pub struct SetCache<T> {
    budget: Arc<HostBudget>,
    state: Mutex<State<T>>,
    /// Notified on every change: a hold dropped, a load ended, a set evicted, room counted, a
    /// wait for room begun or ended.
    changed: Condvar,
}

struct State<T> {
    sets: HashMap<PathBuf, Entry<T>>,
    /// The LRU clock: one tick per use.
    clock: u64,
    /// Calls waiting for room now.
    waiting: usize,
    /// Loads run so far (a set read from its file).
    loads: u64,
}

struct Entry<T> {
    stage: Stage<T>,
    /// Calls holding the set.
    holds: usize,
    /// Of those, the calls waiting for room.
    waiting: usize,
    /// The clock at its last use.
    last_used: u64,
    /// Never evicted for room (see the module docs).
    pinned: bool,
    /// The largest headroom its calls asked for ([`SetCache::hold`]).
    headroom: u64,
}

/// Where a set is; every stage but `Empty` has its bytes counted in the budget.
enum Stage<T> {
    /// Not loaded, nothing counted.
    Empty,
    /// Room counted; waiting for the partitions in flight to fit beside it.
    Draining(u64),
    /// Room counted, no load running (before the first, or after a failed one).
    Reserved(u64),
    /// Room counted; a call is loading the set.
    Loading(u64),
    /// Loaded, with the bytes counted for it (the decoded size).
    Loaded(Arc<T>, u64),
}

impl<T> Stage<T> {
    /// Bytes the budget counts for the set in this stage.
    fn counted(&self) -> u64 {
        match self {
            Stage::Empty => 0,
            Stage::Draining(b) | Stage::Reserved(b) | Stage::Loading(b) | Stage::Loaded(_, b) => *b,
        }
    }
}

/// What [`SetCache::evict`] did.
#[cfg(any(test, feature = "internals"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// The set was idle and is evicted: `bytes` no longer counted (the set's and what the
    /// eviction hook freed beside it).
    Evicted {
        /// Bytes freed.
        bytes: u64,
    },
    /// The set is not loaded: nothing done.
    NotLoaded,
    /// The set is held by `calls` engine calls (running, or loading it): nothing done; it can be
    /// evicted once they are done.
    InUse {
        /// Calls holding it.
        calls: usize,
    },
}

/// One set as [`SetCache::sets`] lists it.
#[cfg(any(test, feature = "internals"))]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetState {
    /// The set's `.params` path.
    pub path: PathBuf,
    /// Whether it is loaded (else being loaded or waiting for room).
    pub loaded: bool,
    /// Bytes counted for it: its decoded size once loaded, its file's size before.
    pub bytes: u64,
    /// Engine calls holding it.
    pub calls: usize,
    /// Never evicted for room (WinningPoSt's).
    pub pinned: bool,
}

/// A call's hold on one set (see the module docs): the set is not evicted while it lives.
pub struct Hold<'a, T> {
    cache: &'a SetCache<T>,
    key: PathBuf,
}

impl<T> SetCache<T> {
    /// An empty cache whose sets are counted in `budget`.
    pub fn new(budget: Arc<HostBudget>) -> Self {
        SetCache {
            budget,
            state: Mutex::new(State {
                sets: HashMap::new(),
                clock: 0,
                waiting: 0,
                loads: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, State<T>>> {
        self.state
            .lock()
            .map_err(|_| Error::internal("parameter cache lock poisoned"))
    }

    /// Waits for a change (polling `cancel` when given).
    fn wait<'g>(
        &self,
        s: MutexGuard<'g, State<T>>,
        cancel: Option<&CancelToken>,
    ) -> Result<MutexGuard<'g, State<T>>> {
        let poisoned = || Error::internal("parameter cache lock poisoned");
        match cancel {
            None => self.changed.wait(s).map_err(|_| poisoned()),
            Some(_) => Ok(self
                .changed
                .wait_timeout(s, CANCEL_POLL)
                .map_err(|_| poisoned())?
                .0),
        }
    }

    /// Takes a hold on the set at `key` for a call that needs `headroom` bytes beside the sets
    /// (one partition, and its compiled circuit when not loaded; 0 for a preload). A `pinned`
    /// set (WinningPoSt's) stays pinned until evicted. While another call waits for room, a
    /// call of a loaded set that is not pinned waits here first (see the module docs).
    ///
    /// # Errors
    /// [`Error::Cancelled`] when `cancel` is set while it waits; [`Error::Internal`] if the
    /// cache's lock is poisoned.
    pub fn hold(
        &self,
        key: &Path,
        pinned: bool,
        headroom: u64,
        cancel: Option<&CancelToken>,
    ) -> Result<Hold<'_, T>> {
        let mut s = self.lock()?;
        loop {
            let behind = s.waiting > 0
                && !pinned
                && s.sets
                    .get(key)
                    .is_some_and(|e| !e.pinned && matches!(e.stage, Stage::Loaded(..)));
            if !behind {
                break;
            }
            CancelToken::check(cancel)?;
            s = self.wait(s, cancel)?;
        }
        s.clock += 1;
        let tick = s.clock;
        let e = s.sets.entry(key.to_path_buf()).or_insert(Entry {
            stage: Stage::Empty,
            holds: 0,
            waiting: 0,
            last_used: 0,
            pinned: false,
            headroom: 0,
        });
        e.holds += 1;
        e.last_used = tick;
        e.pinned |= pinned;
        e.headroom = e.headroom.max(headroom);
        Ok(Hold {
            cache: self,
            key: key.to_path_buf(),
        })
    }

    /// Evicts the set at `key` if it is loaded and idle, pinned or not (the daemon's
    /// `EvictSRS`); `on_evict` is called with its key (under the cache's lock) and returns the
    /// bytes it stopped counting beside the set's (e.g. its compiled circuit).
    ///
    /// # Errors
    /// [`Error::Internal`] if the cache's lock is poisoned.
    #[cfg(any(test, feature = "internals"))]
    pub fn evict(&self, key: &Path, on_evict: &dyn Fn(&Path) -> u64) -> Result<Eviction> {
        let mut s = self.lock()?;
        let Some(e) = s.sets.get(key) else {
            return Ok(Eviction::NotLoaded);
        };
        if matches!(e.stage, Stage::Empty) {
            return Ok(Eviction::NotLoaded);
        }
        if e.holds > 0 {
            return Ok(Eviction::InUse { calls: e.holds });
        }
        let bytes = self.remove(&mut s, key, on_evict, "EvictSRS");
        self.changed.notify_all();
        Ok(Eviction::Evicted { bytes })
    }

    /// Every set the cache knows, loaded or on its way, by path.
    #[cfg(any(test, feature = "internals"))]
    pub fn sets(&self) -> Vec<SetState> {
        let Ok(s) = self.lock() else {
            return Vec::new();
        };
        let mut v: Vec<SetState> = s
            .sets
            .iter()
            .filter(|(_, e)| !matches!(e.stage, Stage::Empty))
            .map(|(k, e)| SetState {
                path: k.clone(),
                loaded: matches!(e.stage, Stage::Loaded(..)),
                bytes: e.stage.counted(),
                calls: e.holds,
                pinned: e.pinned,
            })
            .collect();
        v.sort_by(|a, b| a.path.cmp(&b.path));
        v
    }

    /// Whether the set at `key` is loaded.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_loaded(&self, key: &Path) -> bool {
        self.lock().is_ok_and(|s| {
            s.sets
                .get(key)
                .is_some_and(|e| matches!(e.stage, Stage::Loaded(..)))
        })
    }

    /// Loads run so far: how many times a set was read from its file.
    #[cfg(any(test, feature = "internals"))]
    pub fn loads(&self) -> u64 {
        self.lock().map_or(0, |s| s.loads)
    }

    /// Calls waiting for room now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lock().map_or(0, |s| s.waiting)
    }

    /// Removes the loaded set at `key` (idle: the caller checked), stops counting it, and calls
    /// `on_evict`; returns the bytes freed. `why` names what asked for it (logged).
    fn remove(
        &self,
        s: &mut State<T>,
        key: &Path,
        on_evict: &dyn Fn(&Path) -> u64,
        why: &str,
    ) -> u64 {
        let bytes = s.sets.remove(key).map_or(0, |e| e.stage.counted());
        self.budget.sub_params(bytes);
        let beside = on_evict(key);
        log::info!(
            "parameters {}: evicted ({:.2} GB, {:.2} GB beside them) for {why}",
            key.display(),
            bytes as f64 / 1e9,
            beside as f64 / 1e9
        );
        bytes + beside
    }
}

/// The least recently used set that may be evicted for room: loaded, idle, not pinned, not
/// `except`.
fn lru_idle<T>(s: &State<T>, except: &Path) -> Option<PathBuf> {
    s.sets
        .iter()
        .filter(|(k, e)| {
            k.as_path() != except
                && e.holds == 0
                && !e.pinned
                && matches!(e.stage, Stage::Loaded(..))
        })
        .min_by_key(|(_, e)| e.last_used)
        .map(|(k, _)| k.clone())
}

/// Whether a set other than `except` that room could be made from is in use by a call that
/// is not itself waiting for room (its going idle will wake the waiters).
fn in_use_by_a_running_call<T>(s: &State<T>, except: &Path) -> bool {
    s.sets.iter().any(|(k, e)| {
        k.as_path() != except
            && !e.pinned
            && e.holds > e.waiting
            && !matches!(e.stage, Stage::Empty)
    })
}

impl<'a, T> Hold<'a, T> {
    /// The key (`.params` path) of the held set.
    pub fn key(&self) -> &Path {
        &self.key
    }

    /// Makes room for the held set (see the module docs): when it is not loaded, `bytes` (its
    /// file's size) are counted from now on; the least recently used idle sets are evicted as
    /// needed (`on_evict` called with each key under the cache's lock: it returns the bytes it
    /// stopped counting beside the set, e.g. its compiled circuit); it may wait for a set in
    /// use to go idle, then for the partitions in flight to fit beside the counted room.
    /// Returns at once when the set is loaded or loading and fits beside the headroom.
    ///
    /// # Errors
    /// [`Error::OutOfHostMemory`] when `bytes` exceed the caller's whole limit (nothing
    /// evicted); [`Error::Cancelled`] when `cancel` is set while it waits; [`Error::Internal`]
    /// if a lock is poisoned.
    pub fn make_room(
        &self,
        bytes: u64,
        cancel: Option<&CancelToken>,
        on_evict: &dyn Fn(&Path) -> u64,
    ) -> Result<()> {
        let c = self.cache;
        let mut s = c.lock()?;
        let mut waiting = false;
        let decided = loop {
            let Some(e) = s.sets.get(&self.key) else {
                break Err(Error::internal("a held parameter set has no entry"));
            };
            let pinned = e.pinned;
            let need = match e.stage {
                Stage::Empty => bytes,
                // Another call of this set counted its room: wait until it is ready.
                Stage::Draining(_) => {
                    if let Err(err) = CancelToken::check(cancel) {
                        break Err(err);
                    }
                    s = c.wait(s, cancel)?;
                    continue;
                }
                _ => 0,
            };
            let Some(limit) = c.budget.limit() else {
                break Ok(need);
            };
            if need > limit && c.budget.is_strict() {
                log::error!(
                    "parameters {}: {:.2} GB, more than the whole host-memory limit of {:.2} GB \
                     (CUZK_HOST_MEM_LIMIT / EngineConfig::host_memory_limit)",
                    self.key.display(),
                    need as f64 / 1e9,
                    limit as f64 / 1e9
                );
                break Err(Error::OutOfHostMemory {
                    needed: need,
                    budget: limit,
                });
            }
            let headroom = s
                .sets
                .values()
                .filter(|e| e.holds > 0)
                .map(|e| e.headroom)
                .max()
                .unwrap_or(0);
            let kept = c.budget.used().0;
            if kept + need + headroom <= limit {
                break Ok(need);
            }
            if let Some(victim) = lru_idle(&s, &self.key) {
                let why = format!("room for {}", self.key.display());
                c.remove(&mut s, &victim, on_evict, &why);
                c.changed.notify_all();
                continue;
            }
            if !pinned && in_use_by_a_running_call(&s, &self.key) {
                if let Err(err) = CancelToken::check(cancel) {
                    break Err(err);
                }
                if !waiting {
                    waiting = true;
                    s.waiting += 1;
                    if let Some(e) = s.sets.get_mut(&self.key) {
                        e.waiting += 1;
                    }
                    c.changed.notify_all();
                    log::info!(
                        "parameters {}: waiting for a set in use to go idle: {:.2} GB of \
                         parameters and circuits kept, {:.2} GB more and {:.2} GB for \
                         partitions needed, limit {:.2} GB",
                        self.key.display(),
                        kept as f64 / 1e9,
                        need as f64 / 1e9,
                        headroom as f64 / 1e9,
                        limit as f64 / 1e9
                    );
                }
                s = c.wait(s, cancel)?;
                continue;
            }
            // Nothing more to evict or wait for.
            let over = format!(
                "parameters {}: {:.2} GB beside {:.2} GB of parameters and circuits kept and \
                 {:.2} GB for partitions exceed the host-memory limit of {:.2} GB",
                self.key.display(),
                need as f64 / 1e9,
                kept as f64 / 1e9,
                headroom as f64 / 1e9,
                limit as f64 / 1e9
            );
            if need > limit {
                log::warn!("{over}: loading anyway (the limit is the machine's estimate)");
            } else if need > 0 {
                log::info!("{over}: loading them; partitions wait for memory");
            }
            break Ok(need);
        };
        if waiting {
            s.waiting -= 1;
            if let Some(e) = s.sets.get_mut(&self.key) {
                e.waiting -= 1;
            }
            c.changed.notify_all();
        }
        let need = decided?;
        let Some(e) = s.sets.get_mut(&self.key) else {
            return Err(Error::internal("a held parameter set has no entry"));
        };
        if !matches!(e.stage, Stage::Empty) {
            return Ok(());
        }
        e.stage = Stage::Draining(need);
        let pinned = e.pinned;
        c.budget.add_params(need);
        drop(s);
        // A pinned set's few hundred MB do not wait for partitions to end (its proof's latency
        // matters more).
        let drained = if pinned {
            Ok(())
        } else {
            c.budget.wait_within_limit(cancel)
        };
        let mut s = c.lock()?;
        if let Some(e) = s.sets.get_mut(&self.key) {
            if let Stage::Draining(b) = e.stage {
                e.stage = Stage::Reserved(b);
            }
        }
        c.changed.notify_all();
        drained
    }

    /// The held set: the loaded one, else loaded by `load` (this call is then the one that
    /// reads it; concurrent calls of the set wait for it) and counted at `size` of it in place
    /// of its room. [`Hold::make_room`] first.
    ///
    /// # Errors
    /// `load`'s error (the room stays counted while the set is held; the next call of the set
    /// loads it again); [`Error::Internal`] when no room was made for the set or a lock is
    /// poisoned.
    pub fn load(
        &self,
        load: impl FnOnce() -> Result<T>,
        size: impl FnOnce(&T) -> u64,
    ) -> Result<Arc<T>> {
        let c = self.cache;
        let mut s = c.lock()?;
        let room = loop {
            s.clock += 1;
            let tick = s.clock;
            let Some(e) = s.sets.get_mut(&self.key) else {
                return Err(Error::internal("a held parameter set has no entry"));
            };
            match &e.stage {
                Stage::Loaded(v, _) => {
                    e.last_used = tick;
                    return Ok(v.clone());
                }
                Stage::Reserved(b) => {
                    let b = *b;
                    e.stage = Stage::Loading(b);
                    break b;
                }
                Stage::Empty => {
                    return Err(Error::internal(
                        "a parameter set was loaded before its room was made",
                    ))
                }
                Stage::Draining(_) | Stage::Loading(_) => s = c.wait(s, None)?,
            }
        };
        s.loads += 1;
        drop(s);
        let mut unwinding = Unwinding(Some(self));
        let r = load();
        unwinding.0 = None;
        let mut s = c.lock()?;
        s.clock += 1;
        let tick = s.clock;
        let Some(e) = s.sets.get_mut(&self.key) else {
            return Err(Error::internal("a held parameter set has no entry"));
        };
        let out = match r {
            Ok(v) => {
                let bytes = size(&v);
                c.budget.add_params(bytes);
                c.budget.sub_params(room);
                let v = Arc::new(v);
                e.stage = Stage::Loaded(v.clone(), bytes);
                e.last_used = tick;
                Ok(v)
            }
            Err(err) => {
                e.stage = Stage::Reserved(room);
                Err(err)
            }
        };
        c.changed.notify_all();
        out
    }

    /// Puts a load that did not finish back to `Reserved` (its room kept for the holders).
    fn abandon_load(&self) {
        if let Ok(mut s) = self.cache.state.lock() {
            if let Some(e) = s.sets.get_mut(&self.key) {
                if let Stage::Loading(b) = e.stage {
                    e.stage = Stage::Reserved(b);
                }
            }
        }
        self.cache.changed.notify_all();
    }
}

/// Resets a set's load when the loading closure unwinds (`Some` while it runs), so that the
/// other calls of the set do not wait for it forever.
struct Unwinding<'h, 'a, T>(Option<&'h Hold<'a, T>>);

impl<T> Drop for Unwinding<'_, '_, T> {
    fn drop(&mut self) {
        if let Some(h) = self.0 {
            h.abandon_load();
        }
    }
}

impl<T> Drop for Hold<'_, T> {
    /// Releases the hold; the last one of a set that did not load releases its room.
    fn drop(&mut self) {
        let c = self.cache;
        if let Ok(mut s) = c.state.lock() {
            if let Some(e) = s.sets.get_mut(&self.key) {
                e.holds -= 1;
                if e.holds == 0 {
                    if let Stage::Reserved(b) = e.stage {
                        c.budget.sub_params(b);
                        e.stage = Stage::Empty;
                    }
                    if matches!(e.stage, Stage::Empty) {
                        s.sets.remove(&self.key);
                    }
                }
            }
        }
        c.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::thread::JoinHandle;
    use std::time::Instant;

    /// A fake set: its size in bytes.
    type Cache = SetCache<u64>;

    fn cache(limit: u64) -> Arc<Cache> {
        Arc::new(SetCache::new(Arc::new(HostBudget::new(Some(limit)))))
    }

    fn key(name: &str) -> PathBuf {
        PathBuf::from(format!("/params/{name}.params"))
    }

    /// The eviction hook of the tests: nothing beside the set.
    fn none(_: &Path) -> u64 {
        0
    }

    /// Holds, makes room for and loads the set `name` of `bytes` (a fake set of that size);
    /// returns the hold.
    fn use_set<'c>(c: &'c Cache, name: &str, bytes: u64, pinned: bool) -> Hold<'c, u64> {
        let h = c.hold(&key(name), pinned, 0, None).unwrap();
        h.make_room(bytes, None, &none).unwrap();
        let v = h.load(|| Ok(bytes), |v| *v).unwrap();
        assert_eq!(*v, bytes);
        h
    }

    /// [`use_set`] of an unpinned set on a thread of its own, its hold dropped at the end.
    fn use_set_later(c: &Arc<Cache>, name: &'static str, bytes: u64) -> JoinHandle<()> {
        let c = c.clone();
        std::thread::spawn(move || drop(use_set(&c, name, bytes, false)))
    }

    fn loaded(c: &Cache) -> Vec<String> {
        c.sets()
            .into_iter()
            .filter(|s| s.loaded)
            .map(|s| s.path.file_stem().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    /// Waits (up to 10 s) until `f` holds.
    fn until(what: &str, f: impl Fn() -> bool) {
        let t = Instant::now();
        while !f() {
            assert!(t.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_load_evicts_the_least_recently_used_idle_set_and_reloads_on_return() {
        // Two sets that do not fit together: A, then B evicts A, then A reloads and evicts B.
        let c = cache(100);
        drop(use_set(&c, "a", 60, false));
        drop(use_set(&c, "b", 60, false));
        assert_eq!(loaded(&c), ["b"]);
        assert_eq!(c.budget.used().0, 60);
        drop(use_set(&c, "a", 60, false));
        assert_eq!(loaded(&c), ["a"]);
        assert_eq!(c.loads(), 3);
        // Loaded: a later call reads nothing.
        drop(use_set(&c, "a", 60, false));
        assert_eq!(c.loads(), 3);

        // Three that fit; the least recently used (by holds, not by load order) goes first.
        let c = cache(100);
        for n in ["a", "b", "c"] {
            drop(use_set(&c, n, 30, false));
        }
        drop(c.hold(&key("a"), false, 0, None).unwrap()); // a used again: b is the oldest
        drop(use_set(&c, "d", 40, false));
        assert_eq!(loaded(&c), ["a", "c", "d"]);
        drop(use_set(&c, "e", 40, false)); // c, then a
        assert_eq!(loaded(&c), ["d", "e"]);
        assert_eq!(c.budget.used().0, 80);
    }

    #[test]
    fn a_set_in_use_is_never_evicted_and_a_load_waits_for_it_to_go_idle() {
        let c = cache(100);
        let a = use_set(&c, "a", 60, false);
        let waiter = use_set_later(&c, "b", 60);
        until("the load waits", || c.waiting() == 1);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!waiter.is_finished());
        assert_eq!(loaded(&c), ["a"], "a set in use is not evicted");
        assert_eq!(c.evict(&key("a"), &none).unwrap(), Eviction::InUse { calls: 1 });
        drop(a);
        waiter.join().unwrap();
        assert_eq!(loaded(&c), ["b"]);
        assert_eq!(c.waiting(), 0);
    }

    #[test]
    fn the_pinned_set_survives_every_load_and_goes_only_when_evicted() {
        let c = cache(100);
        drop(use_set(&c, "winning", 10, true));
        drop(use_set(&c, "a", 60, false));
        drop(use_set(&c, "b", 60, false)); // a goes, not the older winning set
        assert_eq!(loaded(&c), ["b", "winning"]);
        drop(use_set(&c, "c", 85, false)); // b goes; 95 with winning
        assert_eq!(loaded(&c), ["c", "winning"]);
        // Only pinned sets left to evict: the load goes on beside them, over the limit.
        drop(use_set(&c, "d", 95, false));
        assert_eq!(loaded(&c), ["d", "winning"]);
        assert_eq!(c.budget.used().0, 105);
        // A pinned set's call neither waits behind a load nor for room.
        let d = c.hold(&key("d"), false, 0, None).unwrap();
        let w = use_set(&c, "winning", 10, true);
        drop(w);
        drop(d);
        assert!(c.sets().iter().any(|s| s.pinned && s.loaded));
        assert_eq!(
            c.evict(&key("winning"), &|_| 5).unwrap(),
            Eviction::Evicted { bytes: 15 }
        );
        assert_eq!(loaded(&c), ["d"]);
        assert_eq!(c.evict(&key("winning"), &none).unwrap(), Eviction::NotLoaded);
    }

    #[test]
    fn a_set_larger_than_the_limit_is_a_typed_error_and_evicts_nothing() {
        let c = cache(100);
        drop(use_set(&c, "a", 60, false));
        let h = c.hold(&key("huge"), false, 0, None).unwrap();
        let e = h.make_room(101, None, &none).unwrap_err();
        assert!(
            matches!(
                e,
                Error::OutOfHostMemory {
                    needed: 101,
                    budget: 100
                }
            ),
            "{e}"
        );
        drop(h);
        assert_eq!(loaded(&c), ["a"]);
        assert_eq!(c.budget.used().0, 60);
    }

    #[test]
    fn concurrent_calls_of_one_set_read_it_once() {
        let c = cache(100);
        let reads = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (c, reads) = (c.clone(), reads.clone());
                std::thread::spawn(move || {
                    let h = c.hold(&key("a"), false, 0, None).unwrap();
                    h.make_room(50, None, &none).unwrap();
                    let v = h
                        .load(
                            || {
                                reads.fetch_add(1, Ordering::SeqCst);
                                std::thread::sleep(Duration::from_millis(30));
                                Ok(40)
                            },
                            |v| *v,
                        )
                        .unwrap();
                    Arc::as_ptr(&v) as usize
                })
            })
            .collect();
        let ptrs: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(ptrs.windows(2).all(|w| w[0] == w[1]), "one shared set");
        assert_eq!((reads.load(Ordering::SeqCst), c.loads()), (1, 1));
        // The decoded size replaced the room counted for the file.
        assert_eq!(c.budget.used().0, 40);
    }

    #[test]
    fn a_failed_load_is_not_kept_and_its_room_goes_with_its_last_call() {
        let c = cache(100);
        let h = c.hold(&key("a"), false, 0, None).unwrap();
        h.make_room(50, None, &none).unwrap();
        assert_eq!(c.budget.used().0, 50);
        let e = h
            .load(|| Err(Error::InvalidInput("missing".into())), |v| *v)
            .unwrap_err();
        assert_eq!(e.code(), 101);
        assert_eq!(c.budget.used().0, 50, "still held: the room stays");
        // A panicking load is abandoned, not left loading.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.load(|| panic!("decoder"), |v: &u64| *v)
        }));
        assert!(r.is_err());
        drop(h);
        assert_eq!(c.budget.used().0, 0);
        assert!(c.sets().is_empty());
        drop(use_set(&c, "a", 50, false));
        assert_eq!(c.loads(), 3);
        // Loading needs room first.
        let h = c.hold(&key("b"), false, 0, None).unwrap();
        assert_eq!(h.load(|| Ok(1), |v| *v).unwrap_err().code(), 902);
    }

    #[test]
    fn calls_of_a_loaded_set_wait_behind_another_set_s_load() {
        let c = cache(100);
        let running = use_set(&c, "a", 60, false);
        let b_load = use_set_later(&c, "b", 60);
        until("b waits for room", || c.waiting() == 1);
        // Another call of a: behind b's load (a would never go idle otherwise).
        let next_a = use_set_later(&c, "a", 60);
        std::thread::sleep(Duration::from_millis(30));
        assert!(!next_a.is_finished() && !b_load.is_finished());
        // Cancelled while it waits behind b: Cancelled, nothing held.
        let t = CancelToken::new();
        t.cancel();
        let e = c.hold(&key("a"), false, 0, Some(&t)).err().unwrap();
        assert!(matches!(e, Error::Cancelled));
        drop(running);
        b_load.join().unwrap();
        next_a.join().unwrap();
        assert_eq!(loaded(&c), ["a"]);
        assert_eq!(c.loads(), 3);
    }

    #[test]
    fn two_calls_never_wait_for_each_other() {
        // a and b loaded (they fit), then each gets a call that needs 30 bytes of partitions:
        // the first waits for the other set, the second cannot wait for a waiting call and goes
        // on; once it is done the first evicts its set.
        let c = cache(100);
        drop(use_set(&c, "a", 40, false));
        drop(use_set(&c, "b", 40, false));
        let x = c.hold(&key("a"), false, 30, None).unwrap();
        let y = c.hold(&key("b"), false, 30, None).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                x.make_room(40, None, &none).unwrap();
                tx.send(()).unwrap();
            });
            until("x waits", || c.waiting() == 1);
            y.make_room(40, None, &none).unwrap(); // does not wait for x
            assert!(rx.try_recv().is_err());
            drop(y);
            rx.recv().unwrap();
        });
        assert_eq!(loaded(&c), ["a"]);
        drop(x);
    }

    #[test]
    fn room_waits_for_the_partitions_in_flight_and_a_cancelled_wait_ends() {
        let budget = Arc::new(HostBudget::new(Some(100)));
        let c = SetCache::<u64>::new(budget.clone());
        let permit = budget.acquire(70).unwrap();
        std::thread::scope(|scope| {
            let t = scope.spawn(|| {
                let h = c.hold(&key("a"), false, 0, None).unwrap();
                h.make_room(50, None, &none).unwrap();
                h.load(|| Ok(50), |v| *v).unwrap();
            });
            // Counted at once (no new partition fits), loaded once the partition is done.
            until("room counted", || budget.used().0 == 50);
            std::thread::sleep(Duration::from_millis(30));
            assert!(!t.is_finished());
            drop(permit);
        });
        assert_eq!(loaded(&c), ["a"]);
        // A pinned set loads at once, over the limit while partitions are in flight.
        let permit = budget.acquire(45).unwrap();
        drop(use_set(&c, "winning", 10, true));
        assert_eq!(budget.used(), (60, 45));
        drop(permit);
        // A call waiting for a set in use stops when cancelled.
        let a = c.hold(&key("a"), false, 0, None).unwrap();
        let token = CancelToken::new();
        std::thread::scope(|scope| {
            let t = scope.spawn(|| {
                let h = c.hold(&key("b"), false, 0, Some(&token)).unwrap();
                h.make_room(60, Some(&token), &none)
            });
            until("b waits", || c.waiting() == 1);
            token.cancel();
            assert!(matches!(t.join().unwrap(), Err(Error::Cancelled)));
        });
        assert_eq!(c.waiting(), 0);
        drop(a);
        assert_eq!(budget.used().0, 60);
    }
}
