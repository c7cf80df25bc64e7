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
//!
//! Group `witness_native_<size>`: the native witness of a generated real-shape C1
//! (`cuzk_dev::c1gen`, `CUZK_BENCH_WITNESS_SIZE`, default 32GiB; `none` skips it): one
//! challenge (with the prefix) on one thread — its core-seconds —, a whole partition on one
//! thread (the partition's core-seconds; the target is ≤ 5 s at 32 GiB) and on every core.
//! ```text
//! cargo bench --bench synthesis -- witness_native
//! ```

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
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(CircuitCache::Off),
    )
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

fn bench_native(c: &mut Criterion) {
    let size = std::env::var("CUZK_BENCH_WITNESS_SIZE")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "32GiB".into());
    if size == "none" {
        return;
    }
    let spec = cuzk_dev::c1gen::C1Spec {
        registered_proof: cuzk_dev::c1gen::proof_type_for_size(&size).expect("size"),
        seed: cuzk_dev::c1gen::seed_from_str("bench-witness"),
        sector_id: 5,
        prover_id: cuzk::c1::prover_id_from_actor_id(1000),
    };
    let c1 = cuzk_dev::c1gen::generate(&spec)
        .and_then(|g| g.c1_json())
        .expect("c1");
    let engine = Engine::new(EngineConfig::default().with_backend(Backend::Cpu)).expect("engine");
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let all = rayon::ThreadPoolBuilder::new().build().unwrap();
    let run = |pool: &rayon::ThreadPool, challenges: Option<usize>| -> Duration {
        let mut t = Timings::default();
        pool.install(|| {
            engine.witness_c1(
                &c1,
                spec.sector_id,
                &spec.prover_id,
                0,
                Synthesis::Compiled,
                challenges,
                &mut t,
            )
        })
        .expect("witness");
        t.of_partition(0)
            .filter(|e| e.0 == Stage::Witness)
            .map(|e| e.1)
            .sum()
    };
    run(&one, Some(1)); // records the layout once (kept by the engine)
    let mut g = c.benchmark_group(format!("witness_native_{size}"));
    g.sample_size(10);
    g.bench_function("challenge_1_thread", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(&one, Some(1))).sum())
    });
    g.bench_function("partition_1_thread", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| run(&one, None)).sum())
    });
    g.bench_function(
        format!("partition_{}_threads", all.current_num_threads()),
        |b| b.iter_custom(|iters| (0..iters).map(|_| run(&all, None)).sum()),
    );
    g.finish();
}

criterion_group!(benches, bench, bench_native);
criterion_main!(benches);
