//! The native witness of whole partitions against the gadget witness, value for value, with
//! the native witness's wall time and CPU time (core-seconds) — the check and the figures of
//! the issue "a native witness" on a real-shape C1 of any size (generated here by
//! `cuzk_dev::c1gen`, no sealing, no parameter file needed).
//!
//! ```text
//! cargo run --release --example witness_check -- --sector-size 32GiB [--partitions 0,9] [--threads N] [--native-only] [--repeat N]
//! ```
//! Prints per partition: the native witness's wall time on the pool (`--threads`, default all
//! cores; with `--threads 1` the wall time is its core-seconds), the process CPU time of the
//! whole call (parsing, the vanilla check and the layout included), the gadget path's, and
//! whether every input and aux value is equal (exit 1 if not).

use std::time::Instant;

use cuzk::progress::Timings;
use cuzk::{Backend, Engine, EngineConfig, Synthesis};
use cuzk_dev::c1gen::{self, C1Spec};
use cuzk_dev::cputime::process_cpu_seconds;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut size = "32GiB".to_string();
    let mut parts: Option<Vec<usize>> = None;
    let mut gadget = true;
    let mut repeat = 1usize;
    let mut threads: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sector-size" => size = args.next().ok_or("--sector-size SIZE")?,
            "--partitions" => {
                parts = Some(
                    args.next()
                        .ok_or("--partitions LIST")?
                        .split(',')
                        .map(|p| p.trim().parse())
                        .collect::<Result<_, _>>()?,
                )
            }
            "--native-only" => gadget = false,
            "--threads" => threads = Some(args.next().ok_or("--threads N")?.parse()?),
            "--repeat" => repeat = args.next().ok_or("--repeat N")?.parse()?,
            _ => return Err(format!("unknown argument {a}").into()),
        }
    }
    let _ = env_logger::builder().try_init();
    let spec = C1Spec {
        registered_proof: c1gen::proof_type_for_size(&size)?,
        seed: c1gen::seed_from_str("witness-check"),
        sector_id: 5,
        prover_id: cuzk::c1::prover_id_from_actor_id(1000),
    };
    let t = Instant::now();
    let g = c1gen::generate(&spec)?;
    let c1 = g.c1_json()?;
    println!("{size}: C1 generated in {:.1} s", t.elapsed().as_secs_f64());
    let engine = Engine::new(EngineConfig::from_env()?.with_backend(Backend::Cpu))?;
    let partitions = usize::from(spec.registered_proof.partitions());
    let parts = parts.unwrap_or_else(|| (0..partitions).collect());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build()?;
    let threads = pool.current_num_threads();
    let mut ok = true;
    for &k in &parts {
        let mut native = None;
        for r in 0..repeat {
            let (c0, t0) = (process_cpu_seconds(), Instant::now());
            let mut tm = Timings::default();
            let (layout, w) = pool.install(|| {
                engine.witness_c1(
                    &c1,
                    spec.sector_id,
                    &spec.prover_id,
                    k,
                    Synthesis::Compiled,
                    None,
                    &mut tm,
                )
            })?;
            let witness_s: f64 = tm
                .entries
                .iter()
                .filter(|e| e.1 == cuzk::Stage::Witness)
                .map(|e| e.2.as_secs_f64())
                .sum();
            println!(
                "partition {k} run {r}: native witness {witness_s:.3} s wall on {threads} threads; \
                 the call {:.1} s, {:.2} core-s (parse, vanilla check, layout included); \
                 {} challenges, {} aux",
                t0.elapsed().as_secs_f64(),
                process_cpu_seconds() - c0,
                layout.challenges,
                w.aux.len()
            );
            native = Some(w);
        }
        if !gadget {
            continue;
        }
        let native = native.ok_or("--repeat 0")?;
        let (c0, t0) = (process_cpu_seconds(), Instant::now());
        let mut tm = Timings::default();
        let (_, w) = engine.witness_c1(
            &c1,
            spec.sector_id,
            &spec.prover_id,
            k,
            Synthesis::Gadget,
            None,
            &mut tm,
        )?;
        let first = native.aux.iter().zip(&w.aux).position(|(a, b)| a != b);
        let equal = native.input == w.input && native.aux.len() == w.aux.len() && first.is_none();
        println!(
            "partition {k}: gadget witness {:.1} s wall, {:.1} core-s; native == gadget: {equal}{}",
            t0.elapsed().as_secs_f64(),
            process_cpu_seconds() - c0,
            first.map_or(String::new(), |i| format!(
                " (first differing aux value {i})"
            ))
        );
        ok &= equal;
    }
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
