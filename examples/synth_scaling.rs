//! Synthesis of one partition of a C1 output (any sector size, e.g. a real-shape 32 GiB C1 from
//! `cuzk gen-c1`) on the compiled path, with 16 threads and with 1 — the witness scaling of the
//! issue "Synthesis at the speed of the hardware". Needs no parameter file (only its name).
//!
//! ```text
//! cargo run --release --example synth_scaling -- C1.json SECTOR_NUM PROVER_ACTOR_ID [THREADS...]
//! ```
//! Prints the compile time, then per thread count the witness and CPU SpMV times of partition 0.

use cuzk::progress::{Stage, Timings};
use cuzk::{Backend, Engine, EngineConfig, Synthesis};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: synth_scaling C1.json SECTOR_NUM PROVER_ACTOR_ID [THREADS...]");
        std::process::exit(2);
    }
    let c1 = std::fs::read(&args[0])?;
    let sector: u64 = args[1].parse()?;
    let prover = cuzk::c1::prover_id_from_actor_id(args[2].trim_start_matches("f0").parse()?);
    let threads: Vec<usize> = if args.len() > 3 {
        args[3..]
            .iter()
            .map(|t| t.parse())
            .collect::<Result<_, _>>()?
    } else {
        vec![16, 1]
    };
    let engine = Engine::new(EngineConfig::from_env()?.with_backend(Backend::Cpu))?;
    let stage = |t: &Timings, s: Stage, p: Option<usize>| -> f64 {
        t.entries
            .iter()
            .filter(|e| e.0 == p && e.1 == s)
            .map(|e| e.2.as_secs_f64())
            .sum()
    };
    for n in threads {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build()?;
        let mut t = Timings::default();
        let asg = pool.install(|| {
            engine.synthesize_c1(&c1, sector, &prover, 0, Synthesis::Compiled, &mut t)
        })?;
        println!(
            "threads {n:>2}: compile {:.2} s, witness {:.3} s, spmv {:.3} s ({} constraints, {} aux)",
            stage(&t, Stage::Compile, None),
            stage(&t, Stage::Witness, Some(0)),
            stage(&t, Stage::Spmv, Some(0)),
            asg.a.len(),
            asg.aux.len()
        );
    }
    Ok(())
}
