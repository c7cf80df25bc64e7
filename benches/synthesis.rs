//! Synthesis of one real partition, the compiled path against the reference path, on the CPU:
//! witness generation, the CPU SpMV (a, b, c = A·z, B·z, C·z), the compiled synthesis (both),
//! and the reference bellpepper synthesis — all measured in the same process.
//!
//! ```text
//! cargo bench --bench synthesis                       # 2 KiB fixture
//! CUZK_BENCH_SECTOR_SIZE=8MiB cargo bench --bench synthesis
//! ```
//! The fixture comes from `CUZK_FIXTURE_DIR` or the default cache directory (built on first use).
//! Each sample is one partition; the stage times come from the engine's own timings.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use cuzk::progress::{Stage, Timings};
use cuzk::{Backend, CircuitCache, Engine, EngineConfig, Synthesis};
use cuzk_dev::fixture::{default_fixture_dir_for, ensure_fixture, FixtureSize};

fn bench(c: &mut Criterion) {
    let size: FixtureSize = std::env::var("CUZK_BENCH_SECTOR_SIZE")
        .ok()
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().expect("CUZK_BENCH_SECTOR_SIZE: 2KiB or 8MiB"))
        .unwrap_or(FixtureSize::Kib2);
    let f = ensure_fixture(&default_fixture_dir_for(size), size).expect("fixture");
    let engine = Engine::new(EngineConfig {
        parameter_dir: Some(f.param_dir.clone()),
        backend: Backend::Cpu,
        circuit_cache: CircuitCache::Off,
        ..Default::default()
    })
    .expect("engine");
    let c1 = f.read_c1().expect("c1");
    let run = |path: Synthesis| -> Timings {
        let mut t = Timings::default();
        engine
            .synthesize_c1(&c1, f.sector_id, &f.prover_id, 0, path, &mut t)
            .expect("synthesis");
        t
    };
    let stage = |t: &Timings, s: Stage| -> Duration {
        t.of_partition(0).filter(|e| e.0 == s).map(|e| e.1).sum()
    };
    run(Synthesis::Compiled); // records the circuit once (kept by the engine)
    let mut g = c.benchmark_group(format!("synthesis_{size}"));
    g.sample_size(10);
    for (name, path, s) in [
        ("witness", Synthesis::Compiled, Stage::Witness),
        ("spmv_cpu", Synthesis::Compiled, Stage::Spmv),
        ("compiled", Synthesis::Compiled, Stage::Synthesis),
        ("reference", Synthesis::Reference, Stage::Synthesis),
    ] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| (0..iters).map(|_| stage(&run(path), s)).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
