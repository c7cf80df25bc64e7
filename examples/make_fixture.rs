//! Builds (or reuses) a deterministic PoRep fixture (2 KiB or 8 MiB sector) and prints its
//! location and commitments.
//!
//! ```text
//! cargo run --release --example make_fixture [-- [--sector-size 2KiB|8MiB] [DIR]]
//! ```
//!
//! * `--sector-size`: `2KiB` (default) or `8MiB`, case-insensitive.
//! * `DIR` defaults to `cuzk_dev::fixture::default_fixture_dir_for(size)` (`$CUZK_FIXTURE_DIR`,
//!   else `~/.cache/cuzk/fixture-2kib-v1` or `~/.cache/cuzk/fixture-8mib-v1`).
//!
//! The first 2 KiB run generates 1.1 GB of Groth16 test parameters (about 15 minutes on 2 cores,
//! ~141 s on 16); the 8 MiB one 1.43 GB (270 s on 16 cores, ~20 min on 2, estimated). Later runs
//! return at once.
//! Exits with status 1 and prints `error <code>: <message>` on any failure (including a bad
//! argument).

use std::path::PathBuf;
use std::process::ExitCode;

use cuzk::c1::hex as to_hex;
use cuzk::Error;
use cuzk_dev::fixture::{default_fixture_dir_for, ensure_fixture, FixtureSize};

const USAGE: &str = "usage: make_fixture [--sector-size 2KiB|8MiB] [DIR]";

fn parse_args() -> Result<(FixtureSize, Option<PathBuf>), Error> {
    let bad = |name: &str, value: &str, reason: &str| Error::InvalidConfig {
        name: name.into(),
        value: value.into(),
        reason: format!("{reason}; {USAGE}"),
    };
    let mut size = FixtureSize::Kib2;
    let mut dir = None;
    let mut it = std::env::args_os().skip(1);
    while let Some(arg) = it.next() {
        let s = arg.to_string_lossy().into_owned();
        match s.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "--sector-size" => {
                let v = it
                    .next()
                    .map(|v| v.to_string_lossy().into_owned())
                    .ok_or_else(|| bad("--sector-size", "", "missing value"))?;
                size = v.parse().map_err(|_| {
                    bad(
                        "--sector-size",
                        &v,
                        "expected 2KiB or 8MiB (case-insensitive)",
                    )
                })?;
            }
            _ if s.starts_with('-') => return Err(bad("argument", &s, "unknown option")),
            _ if dir.is_none() => dir = Some(PathBuf::from(arg)),
            _ => return Err(bad("argument", &s, "more than one fixture directory")),
        }
    }
    Ok((size, dir))
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let result = parse_args().and_then(|(size, dir)| {
        let dir = dir.unwrap_or_else(|| default_fixture_dir_for(size));
        ensure_fixture(&dir, size)
    });
    match result {
        Ok(f) => {
            println!("fixture   {}", f.dir.display());
            println!("proof     {:?}", f.registered_proof);
            println!("c1.json   {}", f.c1_json.display());
            println!("params    {}", f.params_file.display());
            println!("vk        {}", f.vk_file.display());
            println!(
                "sector    {}  prover id {}",
                f.sector_id,
                to_hex(&f.prover_id)
            );
            println!("comm_r    {}", to_hex(&f.comm_r));
            println!("comm_d    {}", to_hex(&f.comm_d));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error {}: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}
