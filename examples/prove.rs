//! Proves a deterministic PoRep fixture (2 KiB or 8 MiB sector) with cuzk, then checks the proof
//! with filecoin-proofs' own `verify_seal`.
//!
//! ```text
//! cargo run --release --example prove -- [DIR | --fixture DIR] [--sector-size 2KiB|8MiB]
//!                                        [--backend cpu|gpu|auto] [--repeat N]
//! ```
//!
//! * `--sector-size`: `2KiB` (default) or `8MiB`, case-insensitive.
//! * `DIR` / `--fixture DIR`: fixture directory (default
//!   `cuzk_dev::fixture::default_fixture_dir_for(size)`: `$CUZK_FIXTURE_DIR`, else
//!   `~/.cache/cuzk/fixture-2kib-v1` or `~/.cache/cuzk/fixture-8mib-v1`); built on first use
//!   (2 KiB: about 15 minutes on 2 cores, ~141 s on 16; 8 MiB: ~270 s on 16, ~20 min on 2 (estimated) —
//!   the Groth16 test parameters are generated once and kept). A directory holding a fixture of
//!   the other size is refused.
//! * `--backend`: overrides `CUZK_BACKEND` (default `auto`: GPU when built with `--features cuda`
//!   and a device exists, else CPU).
//! * `--repeat N`: N proofs in one process and one engine; the 2nd and later show warm timings
//!   (parameters already loaded).
//!
//! Other settings come from the environment (`cuzk::EngineConfig::from_env`,
//! `cuzk::ProveOptions::from_env`); `RUST_LOG` overrides the default `info` log filter.
//! Exits with status 1 and prints `error <code>: <message>` on any failure, including a proof
//! that filecoin-proofs rejects.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cuzk::c1::hex as to_hex;
use cuzk::{Backend, C2Output, Engine, EngineConfig, Error, ProveOptions, Stage};
use cuzk_dev::fixture::{default_fixture_dir_for, ensure_fixture, Fixture, FixtureSize};

const USAGE: &str = "usage: prove [DIR | --fixture DIR] [--sector-size 2KiB|8MiB] \
                     [--backend cpu|gpu|auto] [--repeat N]";

struct Args {
    fixture: Option<PathBuf>,
    size: FixtureSize,
    backend: Option<Backend>,
    repeat: usize,
}

fn parse_args() -> Result<Args, Error> {
    let bad = |name: &str, value: &str, reason: &str| Error::InvalidConfig {
        name: name.into(),
        value: value.into(),
        reason: format!("{reason}; {USAGE}"),
    };
    let mut a = Args {
        fixture: None,
        size: FixtureSize::Kib2,
        backend: None,
        repeat: 1,
    };
    let mut it = std::env::args_os().skip(1);
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        let mut value = |name: &str| {
            it.next()
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| bad(name, "", "missing value"))
        };
        match s.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--fixture" => a.fixture = Some(PathBuf::from(value("--fixture")?)),
            "--sector-size" => {
                let v = value("--sector-size")?;
                a.size = v.parse().map_err(|_| {
                    bad(
                        "--sector-size",
                        &v,
                        "expected 2KiB or 8MiB (case-insensitive)",
                    )
                })?;
            }
            "--backend" => {
                let v = value("--backend")?;
                a.backend = Some(match v.to_ascii_lowercase().as_str() {
                    "cpu" => Backend::Cpu,
                    "gpu" | "cuda" => Backend::Gpu,
                    "auto" => Backend::Auto,
                    _ => return Err(bad("--backend", &v, "expected cpu, gpu or auto")),
                });
            }
            "--repeat" => {
                let v = value("--repeat")?;
                a.repeat = match v.parse::<usize>() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(bad("--repeat", &v, "expected a count >= 1")),
                };
            }
            _ if s.starts_with('-') => return Err(bad("argument", &s, "unknown option")),
            _ if a.fixture.is_none() => a.fixture = Some(PathBuf::from(arg)),
            _ => return Err(bad("argument", &s, "more than one fixture directory")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error {}: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let args = parse_args()?;
    let dir = args
        .fixture
        .clone()
        .unwrap_or_else(|| default_fixture_dir_for(args.size));
    // The engine first: a backend that cannot run (e.g. `--backend gpu` without a GPU build)
    // fails before a fixture is generated. Parameters are loaded on first use, after the fixture
    // exists; `ensure_fixture` keeps them in `<dir>/params`.
    let mut config = EngineConfig::from_env()?.with_parameter_dir(dir.join("params"));
    if let Some(b) = args.backend {
        config.backend = b;
    }
    let engine = Engine::new(config)?;
    let options = ProveOptions::from_env()?;
    let fixture = ensure_fixture(&dir, args.size)?;
    let c1 = fixture.read_c1()?;
    println!(
        "fixture {}: {:?}, sector {}, c1.json {} bytes\n  comm_r {}\n  comm_d {}",
        fixture.dir.display(),
        fixture.registered_proof,
        fixture.sector_id,
        c1.len(),
        to_hex(&fixture.comm_r),
        to_hex(&fixture.comm_d)
    );

    let mut totals = Vec::with_capacity(args.repeat);
    for run in 1..=args.repeat {
        println!(
            "\n=== proof {run}/{} ({}) ===",
            args.repeat,
            if run == 1 { "cold" } else { "warm" }
        );
        let t = Instant::now();
        let out = engine.prove_porep_c2(&c1, fixture.sector_id, &fixture.prover_id, &options)?;
        let wall = t.elapsed();
        print_report(&out, wall);
        check_independently(&fixture, &out.proof)?;
        totals.push(wall);
    }
    if args.repeat > 1 {
        let warm = &totals[1..];
        let mean = warm.iter().sum::<Duration>() / warm.len() as u32;
        println!(
            "\ncold {:.3} s, warm mean {:.3} s over {} warm proof(s)",
            totals[0].as_secs_f64(),
            mean.as_secs_f64(),
            warm.len()
        );
    }
    Ok(())
}

/// Checks the proof with filecoin-proofs' `verify_seal`, an implementation independent of cuzk.
fn check_independently(fixture: &Fixture, proof: &[u8]) -> Result<(), Error> {
    let t = Instant::now();
    let ok = fixture.verify(proof)?;
    if !ok {
        return Err(Error::VerificationFailed {
            partition: usize::MAX,
        });
    }
    println!(
        "filecoin-proofs verify_seal: OK ({:.3} s)",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Prints the stage table (seconds; one column for call-wide stages, one per partition), the
/// partition placement and the proof.
fn print_report(out: &C2Output, wall: Duration) {
    let n = out.partitions.len().max(
        out.timings
            .entries
            .iter()
            .filter_map(|e| e.0)
            .max()
            .map_or(0, |p| p + 1),
    );
    // Stages in first-recorded order.
    let mut stages: Vec<Stage> = Vec::new();
    for e in &out.timings.entries {
        if !stages.contains(&e.1) {
            stages.push(e.1);
        }
    }
    let shown = n.min(10); // keep the table readable; the sum column covers every partition
    let mut header = format!("{:<12} {:>9}", "stage", "call");
    for p in 0..shown {
        header.push_str(&format!(" {:>9}", format!("p{p}")));
    }
    header.push_str(&format!(" {:>9}", "sum(p)"));
    println!("{header}");
    let cell = |d: Option<Duration>| match d {
        Some(d) => format!(" {:>9.3}", d.as_secs_f64()),
        None => format!(" {:>9}", "-"),
    };
    for s in stages {
        let of = |part: Option<usize>| -> Option<Duration> {
            let mut it = out
                .timings
                .entries
                .iter()
                .filter(|e| e.0 == part && e.1 == s)
                .peekable();
            it.peek()?;
            Some(it.map(|e| e.2).sum())
        };
        let mut line = format!("{:<12}", s.name());
        line.push_str(&cell(of(None)));
        for p in 0..shown {
            line.push_str(&cell(of(Some(p))));
        }
        let per_part: Duration = out
            .timings
            .entries
            .iter()
            .filter(|e| e.0.is_some() && e.1 == s)
            .map(|e| e.2)
            .sum();
        line.push_str(&cell(Some(per_part).filter(|d| !d.is_zero())));
        println!("{line}");
    }
    println!("{:<12} {:>9.3}", "wall", wall.as_secs_f64());
    for r in &out.partitions {
        let mut where_ = r.backend.to_string();
        if let Some(d) = r.device {
            where_.push_str(&format!(" device {d}"));
        }
        if let Some(t) = &r.tier {
            where_.push_str(&format!(" tier {t}"));
        }
        println!("partition {}: {where_}", r.partition);
    }
    let prefix = &out.proof[..out.proof.len().min(16)];
    println!(
        "proof: {} bytes ({} partitions), self-verified: {}, starts {}…",
        out.proof.len(),
        out.proof.len() / 192,
        out.verified,
        to_hex(prefix)
    );
}
