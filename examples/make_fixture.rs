//! Builds (or reuses) the deterministic 2 KiB PoRep fixture and prints its location and
//! commitments.
//!
//! ```text
//! cargo run --release --example make_fixture [-- DIR]
//! ```
//!
//! `DIR` defaults to `cuzk::fixture::default_fixture_dir()` (`$CUZK_FIXTURE_DIR`, else
//! `~/.cache/cuzk/fixture-2kib-v1`). The first run generates 1.1 GB of Groth16 test parameters
//! (about 10 minutes on 2 cores); later runs return at once.

use std::path::PathBuf;
use std::process::ExitCode;

use cuzk::c1::hex as to_hex;
use cuzk::fixture::{default_fixture_dir, ensure_2kib_fixture};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(default_fixture_dir);
    match ensure_2kib_fixture(&dir) {
        Ok(f) => {
            println!("fixture   {}", f.dir.display());
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
