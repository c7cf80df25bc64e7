//! Priorities through the whole engine, on the 2 KiB PoSt fixture: a backend that runs one
//! partition at a time (the CPU's computation behind a gate of one place, as a GPU with one
//! worker and no witness made ahead) holds a WindowPoSt at NORMAL on it; two more NORMAL
//! WindowPoSt calls wait for the gate; a CRITICAL WinningPoSt submitted after them is admitted
//! at once and proved while the first NORMAL one still holds the backend, and the waiting
//! NORMAL calls run after it. Needs the feature `test-hooks` (`Engine::with_backend_for_test`).
#![cfg(feature = "test-hooks")]

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use cuzk::prover::{CpuBackend, MsmResults, PartitionCtx, ProverBackend};
use cuzk::srs::Srs;
use cuzk::synth::Assignment;
use cuzk::{CircuitCache, Engine, EngineConfig, HAhead, Priority, ProofKind, ProveOptions, Tuning};
use cuzk_dev::post_fixture::{
    default_post_fixture_dir, ensure_post_fixture, number_2kib, PostFixture, RANDOMNESS,
};

/// The CPU backend, one partition at a time (the engine's gate of one place), recording the
/// priority of each partition as it starts and ends; the first partition waits until the test
/// lets it go.
#[derive(Default)]
struct OneAtATime {
    state: Mutex<Record>,
    changed: Condvar,
}

#[derive(Default)]
struct Record {
    events: Vec<(&'static str, Priority)>,
    /// Whether the first partition may finish.
    released: bool,
}

impl OneAtATime {
    fn events(&self) -> Vec<(&'static str, Priority)> {
        self.state.lock().unwrap().events.clone()
    }

    fn push(&self, event: &'static str, priority: Priority) -> usize {
        let mut st = self.state.lock().unwrap();
        st.events.push((event, priority));
        self.changed.notify_all();
        st.events.len()
    }

    fn release(&self) {
        self.state.lock().unwrap().released = true;
        self.changed.notify_all();
    }

    /// Waits until the first partition has started.
    fn until_one_started(&self) {
        let st = self.state.lock().unwrap();
        drop(
            self.changed
                .wait_while(st, |s| s.events.is_empty())
                .unwrap(),
        );
    }
}

impl ProverBackend for OneAtATime {
    fn name(&self) -> &'static str {
        "one-at-a-time"
    }

    fn parallel_partitions(&self) -> Option<usize> {
        Some(1)
    }

    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> cuzk::Result<MsmResults> {
        if self.push("start", ctx.priority) == 1 {
            let st = self.state.lock().unwrap();
            drop(self.changed.wait_while(st, |s| !s.released).unwrap());
        }
        let out = CpuBackend.compute(asg, srs, ctx);
        self.push("end", ctx.priority);
        out
    }
}

fn fixture() -> PostFixture {
    let _ = env_logger::builder().is_test(true).try_init();
    ensure_post_fixture(&default_post_fixture_dir()).expect("2 KiB PoSt fixture")
}

#[test]
fn a_critical_winning_post_overtakes_waiting_normal_partitions() {
    let f = fixture();
    let backend = Arc::new(OneAtATime::default());
    let config = EngineConfig::default()
        .with_parameter_dir(&f.param_dir)
        .with_circuit_cache(CircuitCache::Off)
        // One place in flight: the partition on the backend, no witness made ahead; and each
        // partition in one backend call (no H side ahead of a loading parameter file).
        .with_tuning(
            Tuning::default()
                .with_partitions_ahead(0)
                .with_h_ahead(HAhead::Off),
        );
    let engine = Engine::with_backend_for_test(config, backend.clone()).expect("engine");
    assert_eq!(engine.gate().limit(), Some(1));
    let window = f
        .vanilla_proofs(ProofKind::WindowPost, &RANDOMNESS)
        .unwrap();
    let winning = f
        .vanilla_proofs(ProofKind::WinningPost, &RANDOMNESS)
        .unwrap();

    let (done_tx, done) = mpsc::channel::<(&'static str, cuzk::Result<Vec<u8>>)>();
    let spawn = |name: &'static str, kind: ProofKind, priority: Priority| {
        let (engine, f, tx) = (engine.clone(), f.clone(), done_tx.clone());
        let vanilla = match kind {
            ProofKind::WinningPost => winning.clone(),
            _ => window.clone(),
        };
        std::thread::spawn(move || {
            let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
            let opts = ProveOptions::default().with_priority(priority);
            let n = number_2kib(kind);
            let r = match kind {
                ProofKind::WinningPost => {
                    engine.prove_winning_post(n, &v, &RANDOMNESS, &f.prover_id, &opts)
                }
                _ => engine.prove_window_post(n, &v, &RANDOMNESS, &f.prover_id, 0, &opts),
            };
            let _ = tx.send((name, r.map(|o| o.proof)));
        })
    };

    // The first NORMAL call holds the backend (and the gate's one place) until released.
    let mut threads = vec![spawn("normal 1", ProofKind::WindowPost, Priority::Normal)];
    backend.until_one_started();
    threads.push(spawn("normal 2", ProofKind::WindowPost, Priority::Normal));
    threads.push(spawn("normal 3", ProofKind::WindowPost, Priority::Normal));
    while engine.gate().waiting() < 2 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Submitted last, proved first: admitted beside the held partition, before the waiting
    // ones, and done while "normal 1" still holds the backend.
    threads.push(spawn(
        "critical",
        ProofKind::WinningPost,
        Priority::Critical,
    ));
    let first = done.recv_timeout(Duration::from_secs(300));
    backend.release();
    let mut finished = Vec::new();
    if let Ok((name, r)) = first {
        assert_eq!(r.expect(name).len(), 192, "{name}");
        finished.push(name);
    }
    for t in threads {
        t.join().unwrap();
    }
    while let Ok((name, r)) = done.try_recv() {
        assert_eq!(r.expect(name).len(), 192, "{name}");
        finished.push(name);
    }
    assert_eq!(
        finished.first(),
        Some(&"critical"),
        "the CRITICAL call did not finish first: {finished:?}, backend {:?}",
        backend.events()
    );
    use Priority::{Critical, Normal};
    assert_eq!(
        backend.events(),
        vec![
            ("start", Normal),
            ("start", Critical),
            ("end", Critical),
            ("end", Normal),
            ("start", Normal),
            ("end", Normal),
            ("start", Normal),
            ("end", Normal),
        ]
    );
}
