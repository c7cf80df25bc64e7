//! `cuzk` — the command-line tool of cuzk: proves PoRep commit phase 2 (C2) from a C1 output and
//! checks the proof with filecoin-proofs' `verify_seal`; checks PoSt proofs with its
//! `verify_window_post` / `verify_winning_post`; generates real-shape C1 outputs and PoSt inputs
//! without sealing, and Groth16 test parameters (test and bench tooling); serves the proving
//! daemon. See `cuzk --help` and `cuzk <command> --help`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use cuzk::c1::hex;
use cuzk::{Backend, Engine, EngineConfig, Error, ProgressEvent, ProofKind, ProveOptions};
use cuzk_dev::{c1gen, paramgen, post_fixture, postgen, snap_fixture, snapgen};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::{PublicReplicaInfo, SectorId};

mod out;

/// `eprintln!` that never panics: progress and error lines are best effort, so a closed or full
/// standard error (a pipe whose reader left, a full disk) cannot abort a proof.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod generated;
mod prove_post;
mod prove_snap;

const EXIT_CODES: &str = "\
Exit codes: 0 success; 2 bad command line; otherwise the library's
status code c (cuzk::Error::code, the C ABI's status) as (c / 100) * 10 + c % 100:
  10 malformed input (100)       11 invalid input (101)        12 invalid prover id (102)
  13 unsupported proof (103)     14 invalid configuration (104)
  20 parameters not found (200)  21 parameters invalid (201)
  30 no device (300)             31 device unsupported (301)   32 CUDA error (302)
  40 out of device memory (400)  41 out of host memory (401)
  50 synthesis failed (500)      51 verification failed (501; also: verify_seal or
                                    verify-post's verifier rejected the proof, or could not read
                                    it, e.g. bytes that are not points)
  52 cancelled (502)
  90 I/O error (900)             91 panic (901)                92 internal error (902)";

#[derive(Parser)]
#[command(
    name = "cuzk",
    version,
    about = "Filecoin PoRep C2, SnapDeals, WindowPoSt and WinningPoSt prover (Groth16, BLS12-381) on NVIDIA GPUs or the CPU",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove commit phase 2 of a sector from its C1 output, then check the proof with
    /// filecoin-proofs' verify_seal (the C1 output's own comm_r, comm_d, ticket and seed).
    #[command(after_help = EXIT_CODES)]
    Prove(ProveArgs),
    /// Check a C2 proof of a C1 output with filecoin-proofs' verify_seal.
    #[command(after_help = EXIT_CODES)]
    Verify(VerifyArgs),
    /// Check a WindowPoSt partition's or a WinningPoSt proof (as `cuzk serve` answers them) with
    /// filecoin-proofs' verify_window_post / verify_winning_post.
    #[command(name = "verify-post", after_help = EXIT_CODES)]
    VerifyPost(VerifyPostArgs),
    /// Check a SnapDeals proof (as `cuzk serve` answers it) with filecoin-proofs-api's
    /// verify_empty_sector_update_proof.
    #[command(name = "verify-snap", after_help = EXIT_CODES)]
    VerifySnap(VerifySnapArgs),
    /// Prove the WindowPoSt partition or the WinningPoSt of a post.json (`cuzk gen-post`'s
    /// inputs), each proof checked with filecoin-proofs' verify_window_post /
    /// verify_winning_post; --repeat and --jobs as for prove.
    #[command(name = "prove-post", after_help = EXIT_CODES)]
    ProvePost(prove_post::ProvePostArgs),
    /// Prove the SnapDeals update of a snap.json (`cuzk gen-snap`'s inputs), each proof checked
    /// with filecoin-proofs-api's verify_empty_sector_update_proof; --repeat and --jobs as for
    /// prove.
    #[command(name = "prove-snap", after_help = EXIT_CODES)]
    ProveSnap(prove_snap::ProveSnapArgs),
    /// Generate a real-shape C1 output without sealing (deterministic from --seed); writes
    /// c1.json, c1-wrapper.json and meta.json into DIR.
    #[command(name = "gen-c1", after_help = EXIT_CODES)]
    GenC1(GenC1Args),
    /// Generate real-shape WindowPoSt or WinningPoSt inputs without sealing (deterministic from
    /// --seed): the proof type, randomness, prover id, sectors and one vanilla proof per sector as
    /// Curio sends them; writes post.json into DIR.
    #[command(name = "gen-post", after_help = EXIT_CODES)]
    GenPost(GenPostArgs),
    /// Generate real-shape SnapDeals inputs without sealing (deterministic from --seed): the
    /// update proof type, the three commitments and one vanilla proof per partition as Curio
    /// sends them; writes snap.json into DIR.
    #[command(name = "gen-snap", after_help = EXIT_CODES)]
    GenSnap(GenSnapArgs),
    /// Generate Groth16 test parameters (insecure: the seed gives the toxic waste) for a sector
    /// size's PoRep, WindowPoSt, WinningPoSt or SnapDeals circuit; writes the v28 .params, .vk
    /// and .meta files into DIR.
    #[command(name = "gen-params", after_help = EXIT_CODES)]
    GenParams(GenParamsArgs),
    /// Serve the cuzk.v1.ProvingEngine gRPC API (Curio's cuzk daemon) until SIGINT / SIGTERM:
    /// PoRep C2, SnapDeals, WindowPoSt and WinningPoSt jobs in a priority queue, proved on one engine (see
    /// the README's "Proving daemon" section).
    #[command(after_help = EXIT_CODES)]
    Serve(cuzk_daemon::ServeArgs),
    /// Test tooling (daemon/go): make or reuse the 2 KiB PoSt fixture (cuzk_dev::post_fixture)
    /// and print, as JSON on stdout, what Curio would send for it: the proof types, miner id,
    /// the fixture's randomness, and each sector's comm_r and WindowPoSt / WinningPoSt vanilla
    /// proofs for it (hex).
    #[command(name = "post-fixture", hide = true, after_help = EXIT_CODES)]
    PostFixture(PostFixtureArgs),
    /// Test tooling (daemon/go): make or reuse the 2 KiB SnapDeals fixture
    /// (cuzk_dev::snap_fixture) and print, as JSON on stdout, what Curio would send for it: the
    /// update proof type, miner id, sector number, the three commitments and the vanilla
    /// partition proofs (hex).
    #[command(name = "snap-fixture", hide = true, after_help = EXIT_CODES)]
    SnapFixture(SnapFixtureArgs),
}

/// What identifies the sector and where the parameters are (prove and verify).
#[derive(Args)]
struct SectorArgs {
    /// C1 output: the SealCommitPhase1Output JSON, or the wrapper
    /// {"SectorNum", "Phase1Out": base64(JSON), "SectorSize"}; any sector size.
    c1: PathBuf,
    /// Sector number (default: the wrapper's SectorNum).
    #[arg(long)]
    sector_num: Option<u64>,
    /// Prover (miner actor) id: f0NNNN / t0NNNN, a bare actor number, or 64 hex digits.
    #[arg(long)]
    prover_id: String,
    /// Directory of the Groth16 .params / .vk files (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long, value_name = "DIR")]
    params: Option<PathBuf>,
}

#[derive(Args)]
struct ProveArgs {
    #[command(flatten)]
    sector: SectorArgs,
    /// Write the proof (192 bytes per partition; with --repeat, the first proof's) to this file
    /// (default: print it in hex on stdout). The path is checked before proving without creating
    /// anything there; the proof is written whole at the end (a new file renamed onto the path,
    /// so an interrupted run leaves no file and never truncates one; an existing file that no
    /// rename may replace, as another user's in a sticky directory, is rewritten in place at
    /// that moment); if that fails, the proof is printed in hex on stdout instead.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Where partitions run: auto (GPU if built with CUDA and a device exists, else CPU), cpu or
    /// gpu (default: $CUZK_BACKEND, else auto).
    #[arg(long, value_enum)]
    backend: Option<BackendArg>,
    /// Prove the C1 output this many times on one engine (parameters and compiled circuit
    /// loaded once), each proof checked with verify_seal: the first proof runs alone (the cold
    /// one), then the rest --jobs at a time (the steady state).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Proofs in flight at once after the first with --repeat (they share the engine's devices
    /// and host-memory budget). At most --repeat − 1 can be: a larger value is lowered to that
    /// (1 with --repeat 1) with a note on stderr.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    jobs: u32,
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    sector: SectorArgs,
    /// The proof file (as `cuzk prove --out` writes it).
    #[arg(long, value_name = "FILE")]
    proof: PathBuf,
}

#[derive(Args)]
struct VerifyPostArgs {
    /// The PoSt proof type in the actors' numbering (the daemon request's registered_proof):
    /// 0–4 WinningPoSt 2KiB, 8MiB, 512MiB, 32GiB, 64GiB; 10–14 WindowPoSt of those sizes (the
    /// actors' V1_1, filecoin-proofs-api's StackedDrgWindow<size>V1_2).
    #[arg(long, value_name = "N")]
    registered_proof: u64,
    /// A sector of the proof, repeatable: its number and comm_r (64 hex digits). WindowPoSt: the
    /// partition's sectors; WinningPoSt: the challenged sector.
    #[arg(long = "sector", value_name = "NUMBER:COMM_R", required = true, value_parser = sector_arg)]
    sectors: Vec<(u64, [u8; 32])>,
    /// The PoSt randomness, 64 hex digits.
    #[arg(long, value_name = "HEX", value_parser = hex32_arg)]
    randomness: [u8; 32],
    /// Prover (miner actor) id: f0NNNN / t0NNNN, a bare actor number, or 64 hex digits
    /// (filecoin-proofs' PoSt verifiers take it, though the challenges do not depend on it).
    #[arg(long)]
    prover_id: String,
    /// Directory of the Groth16 .vk files (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long, value_name = "DIR")]
    params: Option<PathBuf>,
    /// The proof file (192 bytes: one WindowPoSt partition, or a WinningPoSt proof).
    #[arg(long, value_name = "FILE")]
    proof: PathBuf,
}

#[derive(Args)]
struct VerifySnapArgs {
    /// The update proof type in the actors' numbering (the daemon request's registered_proof):
    /// 0–4 for 2KiB, 8MiB, 512MiB, 32GiB, 64GiB sectors.
    #[arg(long, value_name = "N")]
    registered_proof: u64,
    /// The sector key's replica commitment, 64 hex digits.
    #[arg(long, value_name = "HEX", value_parser = hex32_arg)]
    comm_r_old: [u8; 32],
    /// The updated replica's commitment, 64 hex digits.
    #[arg(long, value_name = "HEX", value_parser = hex32_arg)]
    comm_r_new: [u8; 32],
    /// The new data's commitment, 64 hex digits.
    #[arg(long, value_name = "HEX", value_parser = hex32_arg)]
    comm_d_new: [u8; 32],
    /// Directory of the Groth16 .vk files (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long, value_name = "DIR")]
    params: Option<PathBuf>,
    /// The proof file (192 bytes per partition).
    #[arg(long, value_name = "FILE")]
    proof: PathBuf,
}

#[derive(Args)]
struct SnapFixtureArgs {
    /// The fixture directory, made if missing or incomplete (~2 min on 2 cores; default:
    /// $CUZK_SNAP_FIXTURE_DIR, else ~/.cache/cuzk/snap-2kib-v1).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

#[derive(Args)]
struct PostFixtureArgs {
    /// The fixture directory, made if missing or incomplete (~80 s on 2 cores; default:
    /// $CUZK_POST_FIXTURE_DIR, else ~/.cache/cuzk/post-2kib-v1).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Also the vanilla proofs of the fixture's replica as sector number N, repeatable: PoSt
    /// knows a sector by its number and comm_r only, so these are real proofs of a second
    /// sector (same comm_r), e.g. for two WindowPoSt partitions of one deadline.
    #[arg(long = "also-as", value_name = "N")]
    also_as: Vec<u64>,
}

#[derive(Args)]
struct GenC1Args {
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB (proof type `StackedDrg<size>V1_1`).
    #[arg(long)]
    sector_size: String,
    /// Generator seed (any text): the same seed, sector number and prover id give the same files.
    #[arg(long)]
    seed: String,
    /// Sector number.
    #[arg(long, default_value_t = 1)]
    sector_num: u64,
    /// Prover (miner actor) id: f0NNNN / t0NNNN, a bare actor number, or 64 hex digits.
    #[arg(long, default_value = "f01000")]
    prover_id: String,
    /// Output directory (created if needed).
    dir: PathBuf,
}

#[derive(Args)]
struct GenPostArgs {
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long)]
    sector_size: String,
    /// WindowPoSt (one partition, proof type StackedDrgWindow<size>V1_2, actors' 10–14) or
    /// WinningPoSt (one sector of 66 challenges, StackedDrgWinning<size>V1, actors' 0–4).
    #[arg(long, value_enum, default_value = "window")]
    kind: PostKindArg,
    /// Generator seed (any text): the same seed and options give the same bytes.
    #[arg(long)]
    seed: String,
    /// Sectors: WindowPoSt 1 to a partition's (2349 at 32 GiB, 2300 at 64 GiB, 2 below;
    /// default: a full partition); WinningPoSt 1.
    #[arg(long)]
    sectors: Option<usize>,
    /// Number of the first sector (the others follow it).
    #[arg(long, default_value_t = 1)]
    sector_num: u64,
    /// Prover (miner actor) id: f0NNNN / t0NNNN, a bare actor number, or 64 hex digits.
    #[arg(long, default_value = "f01000")]
    prover_id: String,
    /// The randomness, 64 hex digits: a field element, little-endian (the chain's have the top
    /// two bits clear); default: derived from --seed.
    #[arg(long, value_name = "HEX")]
    randomness: Option<String>,
    /// Output directory (created if needed).
    dir: PathBuf,
}

#[derive(Args)]
struct GenSnapArgs {
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long)]
    sector_size: String,
    /// Generator seed (any text): the same seed gives the same bytes.
    #[arg(long)]
    seed: String,
    /// Output directory (created if needed).
    dir: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum PostKindArg {
    Window,
    Winning,
}

#[derive(Args)]
struct GenParamsArgs {
    /// Sector size: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long)]
    sector_size: String,
    /// The circuit: PoRep (StackedDrg<size>V1_1, one partition), WindowPoSt (one partition),
    /// WinningPoSt or SnapDeals (EmptySectorUpdateCircuit, one partition) of the sector size.
    #[arg(long, value_enum, default_value = "porep")]
    kind: ParamsKindArg,
    /// Seed of the (test, insecure) toxic waste: 64 hex digits are the ChaCha20 seed itself
    /// (the 2 KiB fixture's: 63757a6b20324b694220666978747572652067726f7468313620706172616d73,
    /// cuzk_dev::fixture::PARAMS_RNG_SEED), any other text is hashed into one.
    #[arg(long)]
    seed: String,
    /// Where the fixed-base multiplications run (gpu needs a build with --features cuda).
    #[arg(long, value_enum, default_value = "cpu")]
    device: DeviceArg,
    /// Output directory of the .params / .vk / .meta files (created if needed).
    dir: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum ParamsKindArg {
    Porep,
    WindowPost,
    WinningPost,
    SnapDeals,
}

#[derive(Clone, Copy, ValueEnum)]
enum DeviceArg {
    Cpu,
    Gpu,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendArg {
    Auto,
    Cpu,
    Gpu,
}

impl From<BackendArg> for Backend {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Cpu => Backend::Cpu,
            BackendArg::Gpu => Backend::Gpu,
        }
    }
}

/// A failure of a command: a library error (exit code from its status code) or a command's own.
enum Failure {
    Lib(Error),
    /// filecoin-proofs' `verify_seal` returned false, or an error for proof bytes it cannot read
    /// (e.g. not curve points): exit status 51, as for a proof that fails self-verification.
    Rejected(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Lib(e)
    }
}

/// The exit status of a library status code: `(code / 100) * 10 + code % 100` (see
/// [`EXIT_CODES`]), clamped into 1..=255.
fn exit_status(code: i32) -> u8 {
    let s = (code / 100) * 10 + code % 100;
    u8::try_from(s.clamp(1, 255)).unwrap_or(255)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The daemon logs its jobs at info level by default; the one-shot commands only warnings.
    let level = if matches!(cli.command, Command::Serve(_)) {
        "info"
    } else {
        "warn"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    // A missing parameter file's hint names --params when it was given (not the variable).
    let params = match &cli.command {
        Command::Prove(a) => a.sector.params.clone(),
        Command::Verify(a) => a.sector.params.clone(),
        Command::VerifyPost(a) => a.params.clone(),
        Command::VerifySnap(a) => a.params.clone(),
        Command::ProvePost(a) => a.run.params.clone(),
        Command::ProveSnap(a) => a.run.params.clone(),
        Command::Serve(a) => a.params.clone(),
        Command::GenC1(_)
        | Command::GenPost(_)
        | Command::GenSnap(_)
        | Command::GenParams(_)
        | Command::PostFixture(_)
        | Command::SnapFixture(_) => None,
    };
    let r = match cli.command {
        Command::Prove(a) => prove(a),
        Command::Verify(a) => verify(a),
        Command::VerifyPost(a) => verify_post(a),
        Command::ProvePost(a) => prove_post::prove_post(a),
        Command::ProveSnap(a) => prove_snap::prove_snap(a),
        Command::VerifySnap(a) => verify_snap(a),
        Command::PostFixture(a) => post_fixture_json(a),
        Command::SnapFixture(a) => snap_fixture_json(a),
        Command::GenC1(a) => gen_c1(a),
        Command::GenPost(a) => gen_post(a),
        Command::GenSnap(a) => gen_snap(a),
        Command::GenParams(a) => gen_params(a),
        Command::Serve(a) => cuzk_daemon::run(a).map_err(Failure::Lib),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Lib(e)) => {
            let e = e.with_parameter_dir(params.as_deref());
            say!("cuzk: error {}: {e}", e.code());
            ExitCode::from(exit_status(e.code()))
        }
        Err(Failure::Rejected(m)) => {
            say!("cuzk: {m}");
            ExitCode::from(exit_status(
                Error::VerificationFailed { partition: 0 }.code(),
            ))
        }
    }
}

/// Parses a prover id: `f0NNNN` / `t0NNNN` or a bare actor id (→ LEB128 prover id, as
/// filecoin-ffi builds it), or 64 hex digits (the 32 bytes themselves).
///
/// # Errors
/// [`Error::InvalidProverId`] (exit status 12) naming the text, for anything else.
fn parse_prover_id(s: &str) -> Result<[u8; 32], Error> {
    let t = s.trim();
    let bad = || Error::InvalidProverId {
        len: t.chars().count(),
        text: Some(t.into()),
    };
    if let Some(id) = hex32(t) {
        return Ok(id);
    }
    let digits = t
        .strip_prefix("f0")
        .or_else(|| t.strip_prefix("t0"))
        .unwrap_or(t);
    // ASCII digits only: `u64::from_str` would take a leading `+`.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let id: u64 = digits.parse().map_err(|_| bad())?;
    Ok(cuzk::c1::prover_id_from_actor_id(id))
}

/// 32 bytes from exactly 64 hex digits.
fn hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// clap parser of a 32-byte value in 64 hex digits (a bad one is a bad command line, exit 2).
fn hex32_arg(s: &str) -> Result<[u8; 32], String> {
    hex32(s).ok_or_else(|| format!("{s:?} is not 64 hex digits"))
}

/// clap parser of `NUMBER:COMM_R` (a sector number, 64 hex digits).
fn sector_arg(s: &str) -> Result<(u64, [u8; 32]), String> {
    let (n, c) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not NUMBER:COMM_R"))?;
    let n = n
        .parse()
        .map_err(|_| format!("{n:?} is not a sector number"))?;
    Ok((n, hex32_arg(c)?))
}

/// Reads and parses the C1 output; returns its bytes, the parsed form and the sector number.
fn read_c1(a: &SectorArgs) -> Result<(Vec<u8>, SealCommitPhase1Output, u64), Error> {
    let bytes = std::fs::read(&a.c1).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("reading {}: {e}", a.c1.display()),
        ))
    })?;
    let input = cuzk::c1::parse(&bytes)?;
    let sector = match (a.sector_num, input.wrapper_sector_num) {
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            return Err(Error::InvalidConfig {
                name: "--sector-num".into(),
                value: String::new(),
                reason: "required for a plain (unwrapped) C1 output".into(),
            })
        }
    };
    Ok((bytes, input.output, sector))
}

/// The parameter directory: `--params`, else the engine's default; filecoin-proofs (verify_seal)
/// reads `FIL_PROOFS_PARAMETER_CACHE` once per process, so it is set here, before any of its
/// calls, while the process has one thread.
///
/// # Errors
/// [`Error::InvalidConfig`] (exit status 14) when `--params` names something that exists but is
/// not a directory (a `.params` file given instead of its directory, say).
fn parameter_dir(params: Option<&Path>) -> Result<PathBuf, Error> {
    let dir = match params {
        Some(d) if d.exists() && !d.is_dir() => {
            return Err(Error::InvalidConfig {
                name: "--params".into(),
                value: d.display().to_string(),
                reason: "not a directory: give the directory that holds the .params and .vk files"
                    .into(),
            })
        }
        Some(d) => d.to_path_buf(),
        None => EngineConfig::from_env()?.resolved_parameter_dir(),
    };
    std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &dir);
    Ok(dir)
}

/// filecoin-proofs' `verify_seal` of `proof` against the C1 output's public values.
fn verify_seal(
    c1: &SealCommitPhase1Output,
    sector: u64,
    prover_id: [u8; 32],
    proof: &[u8],
) -> Result<(), Failure> {
    let t = Instant::now();
    let ok = filecoin_proofs_api::seal::verify_seal(
        c1.registered_proof,
        c1.comm_r,
        c1.comm_d,
        prover_id,
        SectorId::from(sector),
        c1.ticket,
        c1.seed,
        proof,
    )
    .map_err(|e| {
        Failure::Rejected(format!(
            "filecoin-proofs verify_seal: REJECTED ({} bytes that it cannot check: {e:#})",
            proof.len()
        ))
    })?;
    if !ok {
        return Err(Failure::Rejected(
            "filecoin-proofs verify_seal: REJECTED (the proof does not verify)".into(),
        ));
    }
    say!(
        "filecoin-proofs verify_seal: OK ({:.3} s)",
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The proofs in flight at once after the first of `repeat` when `--jobs` is `jobs`: at most
/// `repeat − 1` (the first proof runs alone), at least 1. A `--jobs` above that is lowered to
/// it, with a note on stderr that says so.
fn jobs_in_flight(repeat: u32, jobs: u32) -> usize {
    let (repeat, asked) = (repeat as usize, jobs as usize);
    let jobs = asked.min(repeat.saturating_sub(1)).max(1);
    if asked > jobs {
        if repeat == 1 {
            say!("note: --jobs {asked} has no effect with --repeat 1: one proof, alone");
        } else {
            say!(
                "note: --jobs {asked} lowered to {jobs}: with --repeat {repeat} the first proof \
                 runs alone, then {jobs} at a time"
            );
        }
    }
    jobs
}

fn prove(a: ProveArgs) -> Result<(), Failure> {
    let param_dir = parameter_dir(a.sector.params.as_deref())?;
    let prover_id = parse_prover_id(&a.sector.prover_id)?;
    let (bytes, c1, sector) = read_c1(&a.sector)?;
    let mut config = EngineConfig::from_env()?.with_parameter_dir(param_dir);
    if let Some(b) = a.backend {
        config.backend = match b {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Cpu => Backend::Cpu,
            BackendArg::Gpu => Backend::Gpu,
        };
    }
    // The output path is checked now, not after minutes of proving (see `out`).
    let out = a
        .out
        .as_deref()
        .map(|p| out::ProofFile::check(p, &a.sector.c1))
        .transpose()?;
    prove_with(&a, config, &bytes, &c1, sector, prover_id, out.as_ref())
}

/// The proving part of [`prove`]: the engine, R proofs, the summary, the output.
fn prove_with(
    a: &ProveArgs,
    config: EngineConfig,
    bytes: &[u8],
    c1: &SealCommitPhase1Output,
    sector: u64,
    prover_id: [u8; 32],
    out: Option<&out::ProofFile>,
) -> Result<(), Failure> {
    // The first proof runs alone: at most repeat − 1 are ever in flight.
    let repeat = a.repeat as usize;
    let jobs = jobs_in_flight(a.repeat, a.jobs);
    let engine = Engine::new(config)?;
    let partitions = c1.registered_proof.partitions();
    say!(
        "proving {:?}, sector {sector}, {partitions} partition(s) on {}{}; comm_r {}",
        c1.registered_proof,
        engine.backend_name(),
        if repeat > 1 {
            format!(", {repeat} proofs, {jobs} in flight")
        } else {
            String::new()
        },
        hex(&c1.comm_r)
    );
    let start = Instant::now();
    let base = ProveOptions::from_env()?;
    let one = |i: usize| -> Result<Finished, Failure> {
        let who = if repeat > 1 {
            format!("proof {i} ")
        } else {
            String::new()
        };
        let mut options = base.clone();
        let tag = who.clone();
        // (stage, seconds, of a partition?) of every event, for the per-stage line at the end.
        type StageEvent = (&'static str, f64, bool);
        let stages: Arc<std::sync::Mutex<Vec<StageEvent>>> = Default::default();
        let seen = stages.clone();
        options.progress = Some(Arc::new(move |ev: &ProgressEvent| {
            if let Ok(mut v) = seen.lock() {
                v.push((
                    ev.stage.name(),
                    ev.elapsed.as_secs_f64(),
                    ev.partition.is_some(),
                ));
            }
            let part = ev
                .partition
                .map_or_else(|| "call".to_string(), |p| format!("partition {p}"));
            say!(
                "[{:8.2} s] {tag}{part}: {} {:.3} s",
                start.elapsed().as_secs_f64(),
                ev.stage.name(),
                ev.elapsed.as_secs_f64()
            );
        }));
        let t0 = start.elapsed().as_secs_f64();
        let out = engine.prove_porep_c2(bytes, sector, &prover_id, &options)?;
        let t1 = start.elapsed().as_secs_f64();
        let ahead = out.partitions.iter().filter(|p| p.h_ahead).count();
        let calls: usize = out
            .partitions
            .iter()
            .filter(|p| p.h_ahead)
            .map(|p| p.parts)
            .sum();
        say!(
            "{}: {} bytes ({} partitions{}) in {:.3} s",
            if repeat > 1 {
                format!("proof {i}")
            } else {
                "proof".into()
            },
            out.proof.len(),
            out.partitions.len(),
            if ahead > 0 {
                format!(
                    ", {ahead} with the H side ahead of the parameters, in {:.1} parts each",
                    calls as f64 / ahead as f64
                )
            } else {
                String::new()
            },
            t1 - t0
        );
        if let Ok(v) = stages.lock() {
            say!("{who}stages: {}", stage_line(&v));
        }
        verify_seal(c1, sector, prover_id, &out.proof)?;
        Ok(Finished {
            start: t0,
            end: t1,
            proof: out.proof,
        })
    };
    let done = run_repeated(repeat, jobs, one)?;
    report_and_write(&done, jobs, out)
}

/// One proof of a repeated run: its bytes, and when its proving started and ended (seconds
/// from the run's start; the verification after it not included).
struct Finished {
    start: f64,
    end: f64,
    proof: Vec<u8>,
}

/// Prints the summary line of a repeated run (`done` in proof order; proof 0 the cold one,
/// the steady state from proof 1's start to the last end) and writes proof 0 to `out`, or in
/// hex to stdout without `out` or when `out` cannot be written (the verified proof is not lost).
fn report_and_write(
    done: &[Finished],
    jobs: usize,
    out: Option<&out::ProofFile>,
) -> Result<(), Failure> {
    let repeat = done.len();
    if repeat > 1 {
        let rest = &done[1..];
        let first_start = rest.iter().map(|d| d.start).fold(f64::INFINITY, f64::min);
        let last_end = rest.iter().map(|d| d.end).fold(0.0, f64::max);
        let per: Vec<String> = done
            .iter()
            .map(|d| format!("{:.3}", d.end - d.start))
            .collect();
        say!(
            "{repeat} proofs, {jobs} in flight: {last_end:.2} s in all; per proof (start to end) \
             {} s; steady state (proofs 1 to {}) {:.3} s per proof; peak RSS {}",
            per.join(" "),
            repeat - 1,
            (last_end - first_start) / (repeat - 1) as f64,
            peak_rss_text()
        );
    } else {
        say!("peak RSS {}", peak_rss_text());
    }
    let proof = &done
        .first()
        .ok_or_else(|| Error::internal("no proof"))?
        .proof;
    match out {
        Some(file) => {
            if let Err(e) = file.write(proof) {
                let _ = out::print_hex(proof);
                return Err(e.into());
            }
        }
        None => out::print_hex(proof)?,
    }
    Ok(())
}

/// Runs `one(i)` for every i in 0..`repeat`: proof 0 alone (the cold one: parameters and
/// compiled circuit loaded), then the rest `jobs` at a time on scoped threads. Returns the
/// finished proofs in index order. The first error stops further proofs from starting and is
/// returned once the running ones end.
fn run_repeated(
    repeat: usize,
    jobs: usize,
    one: impl Fn(usize) -> Result<Finished, Failure> + Sync,
) -> Result<Vec<Finished>, Failure> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let first = one(0)?;
    let next = AtomicUsize::new(1);
    let failure: std::sync::Mutex<Option<Failure>> = Default::default();
    let done: std::sync::Mutex<Vec<(usize, Finished)>> = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= repeat || failure.lock().map_or(true, |f| f.is_some()) {
                    break;
                }
                match one(i) {
                    Ok(f) => {
                        if let Ok(mut d) = done.lock() {
                            d.push((i, f));
                        }
                    }
                    Err(e) => {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
            });
        }
    });
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut rest = done.into_inner().unwrap_or_default();
    rest.sort_by_key(|d| d.0);
    Ok(std::iter::once(first)
        .chain(rest.into_iter().map(|d| d.1))
        .collect())
}

fn verify(a: VerifyArgs) -> Result<(), Failure> {
    let dir = parameter_dir(a.sector.params.as_deref())?;
    let prover_id = parse_prover_id(&a.sector.prover_id)?;
    let (_, c1, sector) = read_c1(&a.sector)?;
    let input = cuzk::c1::C1Input {
        output: c1.clone(),
        wrapper_sector_num: None,
    };
    cuzk::c1::validate(&input, sector, &prover_id)?;
    // The verifying key must be there and readable: a parameter problem is 20/201, not a
    // rejected proof, and filecoin-proofs would otherwise derive a missing .vk from the
    // .params file and write it into the directory.
    let (_, vk) = cuzk::srs::porep_param_paths_of(c1.registered_proof, &dir)?;
    cuzk::srs::read_vk_file(&vk)?;
    let proof = std::fs::read(&a.proof).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("reading {}: {e}", a.proof.display()),
        ))
    })?;
    verify_seal(&c1, sector, prover_id, &proof)?;
    Ok(())
}

/// Reads a proof file (an I/O error names it).
fn read_proof(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| {
        Error::Io(std::io::Error::new(
            e.kind(),
            format!("reading {}: {e}", path.display()),
        ))
    })
}

fn verify_post(a: VerifyPostArgs) -> Result<(), Failure> {
    let dir = parameter_dir(a.params.as_deref())?;
    let prover_id = parse_prover_id(&a.prover_id)?;
    // 0–4 are WinningPoSt; any other number is checked as WindowPoSt (5–9: V1, unsupported).
    let kind = if a.registered_proof < 5 {
        ProofKind::WinningPost
    } else {
        ProofKind::WindowPost
    };
    let proof_type = cuzk::post::registered_post_proof(kind, a.registered_proof)?;
    let replicas: BTreeMap<SectorId, PublicReplicaInfo> = a
        .sectors
        .iter()
        .map(|&(n, comm_r)| {
            (
                SectorId::from(n),
                PublicReplicaInfo::new(proof_type, comm_r),
            )
        })
        .collect();
    if replicas.len() != a.sectors.len() {
        return Err(Error::InvalidInput("a sector number is given twice (--sector)".into()).into());
    }
    if kind == ProofKind::WinningPost && replicas.len() != 1 {
        return Err(Error::InvalidInput(format!(
            "WinningPoSt is of one challenged sector, {} given (--sector)",
            replicas.len()
        ))
        .into());
    }
    // As `verify`: the verifying key must be there and readable (20 / 21), not derived by
    // filecoin-proofs from a .params file.
    let vk = cuzk::srs::ParamSet::Post(proof_type)
        .params_path(&dir)?
        .with_extension("vk");
    cuzk::srs::read_vk_file(&vk)?;
    let proof = read_proof(&a.proof)?;
    let t = Instant::now();
    let (name, verdict) = match kind {
        ProofKind::WinningPost => (
            "verify_winning_post",
            filecoin_proofs_api::post::verify_winning_post(
                &a.randomness,
                &proof,
                &replicas,
                prover_id,
            ),
        ),
        _ => (
            "verify_window_post",
            filecoin_proofs_api::post::verify_window_post(
                &a.randomness,
                &[(proof_type, proof.as_slice())],
                &replicas,
                prover_id,
            ),
        ),
    };
    match verdict {
        Ok(true) => {
            say!(
                "filecoin-proofs {name}: OK ({:.3} s)",
                t.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Ok(false) => Err(Failure::Rejected(format!(
            "filecoin-proofs {name}: REJECTED (the proof does not verify)"
        ))),
        Err(e) => Err(Failure::Rejected(format!(
            "filecoin-proofs {name}: REJECTED ({} bytes that it cannot check: {e:#})",
            proof.len()
        ))),
    }
}

fn verify_snap(a: VerifySnapArgs) -> Result<(), Failure> {
    // filecoin-proofs converts the three to field elements and panics on one that is not:
    // refused first, before the parameters are read.
    for (name, comm) in [
        ("comm-r-old", &a.comm_r_old),
        ("comm-r-new", &a.comm_r_new),
        ("comm-d-new", &a.comm_d_new),
    ] {
        if bool::from(<blstrs::Scalar as ff::PrimeField>::from_repr(*comm).is_none()) {
            return Err(Error::InvalidInput(format!(
                "--{name} {} is not a canonical BLS12-381 scalar field element",
                hex(comm)
            ))
            .into());
        }
    }
    let dir = parameter_dir(a.params.as_deref())?;
    let proof_type = cuzk::snap::registered_update_proof(a.registered_proof)?;
    // As `verify`: the verifying key must be there and readable (20 / 21), not derived by
    // filecoin-proofs from a .params file.
    let vk = cuzk::srs::ParamSet::Snap(proof_type)
        .params_path(&dir)?
        .with_extension("vk");
    cuzk::srs::read_vk_file(&vk)?;
    let proof = read_proof(&a.proof)?;
    let t = Instant::now();
    let verdict = filecoin_proofs_api::update::verify_empty_sector_update_proof(
        proof_type,
        &proof,
        a.comm_r_old,
        a.comm_r_new,
        a.comm_d_new,
    );
    let name = "verify_empty_sector_update_proof";
    match verdict {
        Ok(true) => {
            say!(
                "filecoin-proofs {name}: OK ({:.3} s)",
                t.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Ok(false) => Err(Failure::Rejected(format!(
            "filecoin-proofs {name}: REJECTED (the proof does not verify)"
        ))),
        Err(e) => Err(Failure::Rejected(format!(
            "filecoin-proofs {name}: REJECTED ({} bytes that it cannot check: {e:#})",
            proof.len()
        ))),
    }
}

/// `snap-fixture`: the 2 KiB SnapDeals fixture's request fields as JSON on stdout.
fn snap_fixture_json(a: SnapFixtureArgs) -> Result<(), Failure> {
    let dir = a.dir.unwrap_or_else(snap_fixture::default_snap_fixture_dir);
    let f = snap_fixture::ensure_snap_fixture(&dir)?;
    let vanilla: Vec<String> = f.vanilla_proofs()?.iter().map(|v| hex(v)).collect();
    let out = serde_json::json!({
        "dir": f.dir.display().to_string(),
        "params": f.param_dir.display().to_string(),
        "miner_id": cuzk_dev::fixture::ACTOR_ID,
        "sector_number": cuzk_dev::fixture::SECTOR_ID,
        "sector_size": 2048,
        "registered_proof": snap_fixture::UPDATE_2KIB,
        "comm_r_old": hex(&f.comm_r_old),
        "comm_r_new": hex(&f.comm_r_new),
        "comm_d_new": hex(&f.comm_d_new),
        "vanilla_proofs": vanilla,
    });
    out::print_line(&out.to_string())?;
    Ok(())
}

/// `post-fixture`: the 2 KiB PoSt fixture's request fields as JSON on stdout.
fn post_fixture_json(a: PostFixtureArgs) -> Result<(), Failure> {
    let dir = a.dir.unwrap_or_else(post_fixture::default_post_fixture_dir);
    let f = post_fixture::ensure_post_fixture(&dir)?;
    let randomness = post_fixture::RANDOMNESS;
    let mut sectors = Vec::new();
    for n in std::iter::once(f.sector_id).chain(a.also_as) {
        let mut s = serde_json::json!({ "number": n, "comm_r": hex(&f.comm_r) });
        for (kind, key) in [
            (ProofKind::WindowPost, "window_vanilla_proof"),
            (ProofKind::WinningPost, "winning_vanilla_proof"),
        ] {
            s[key] = hex(&f.vanilla_proof_as(kind, &randomness, n)?).into();
        }
        sectors.push(s);
    }
    let out = serde_json::json!({
        "dir": f.dir.display().to_string(),
        "params": f.param_dir.display().to_string(),
        "miner_id": cuzk_dev::fixture::ACTOR_ID,
        "sector_size": 2048,
        "window_registered_proof": post_fixture::WINDOW_2KIB,
        "winning_registered_proof": post_fixture::WINNING_2KIB,
        "randomness": hex(&randomness),
        "sectors": sectors,
    });
    out::print_line(&out.to_string())?;
    Ok(())
}

/// The proof type of a `--sector-size` value (2KiB … 64GiB).
fn sector_size_arg(size: &str) -> Result<filecoin_proofs_api::RegisteredSealProof, Error> {
    c1gen::proof_type_for_size(size).map_err(|e| Error::InvalidConfig {
        name: "--sector-size".into(),
        value: size.into(),
        reason: format!("{e:#}"),
    })
}

fn gen_c1(a: GenC1Args) -> Result<(), Failure> {
    let registered_proof = sector_size_arg(&a.sector_size)?;
    let spec = c1gen::C1Spec {
        registered_proof,
        seed: c1gen::seed_from_str(&a.seed),
        sector_id: a.sector_num,
        prover_id: parse_prover_id(&a.prover_id)?,
    };
    let t = Instant::now();
    let g = c1gen::generate(&spec).map_err(|e| Error::Internal(format!("{e:#}")))?;
    let gen_s = t.elapsed().as_secs_f64();
    g.write_dir(&a.dir)
        .map_err(|e| Error::Io(std::io::Error::other(format!("{e:#}"))))?;
    say!(
        "{:?}, sector {}: generated in {gen_s:.2} s, written to {} in {:.2} s\n  comm_r {}\n  comm_d {}",
        registered_proof,
        a.sector_num,
        a.dir.display(),
        t.elapsed().as_secs_f64() - gen_s,
        hex(&g.output.comm_r),
        hex(&g.output.comm_d)
    );
    Ok(())
}

/// The PoSt proof type of `kind` at a `--sector-size` value.
fn post_proof_arg(
    kind: cuzk::ProofKind,
    size: &str,
) -> Result<filecoin_proofs_api::RegisteredPoStProof, Error> {
    postgen::proof_type(kind, size).map_err(|e| Error::InvalidConfig {
        name: "--sector-size".into(),
        value: size.into(),
        reason: format!("{e:#}"),
    })
}

/// The update proof type (SnapDeals) of the sector size `size`.
fn update_proof_arg(size: &str) -> Result<filecoin_proofs_api::RegisteredUpdateProof, Error> {
    let bytes = u64::from(sector_size_arg(size)?.sector_size());
    (0..5)
        .filter_map(|n| cuzk::snap::registered_update_proof(n).ok())
        .find(|p| u64::from(p.sector_size()) == bytes)
        .ok_or_else(|| Error::InvalidConfig {
            name: "--sector-size".into(),
            value: size.into(),
            reason: "no update proof type of this sector size".into(),
        })
}

fn gen_snap(a: GenSnapArgs) -> Result<(), Failure> {
    let proof = update_proof_arg(&a.sector_size)?;
    let t = Instant::now();
    let g = snapgen::generate(proof, postgen::seed_from_str(&a.seed))
        .map_err(|e| Error::Internal(format!("{e:#}")))?;
    let gen_s = t.elapsed().as_secs_f64();
    let (path, bytes) = g
        .write_dir(&a.dir)
        .map_err(|e| Error::Io(std::io::Error::other(format!("{e:#}"))))?;
    let vanilla: usize = g.vanilla_proofs.iter().map(Vec::len).sum();
    say!(
        "{proof:?} (registered proof {}), {} partition(s): generated in {gen_s:.2} s ({} of \
         vanilla proofs), written to {} ({}) in {:.2} s\n  comm_r_old {}\n  comm_r_new {}\n  \
         comm_d_new {}",
        snapgen::actors_number(proof),
        g.vanilla_proofs.len(),
        size_text(vanilla as u64),
        path.display(),
        size_text(bytes),
        t.elapsed().as_secs_f64() - gen_s,
        hex(&g.comm_r_old),
        hex(&g.comm_r_new),
        hex(&g.comm_d_new)
    );
    Ok(())
}

fn gen_post(a: GenPostArgs) -> Result<(), Failure> {
    let kind = match a.kind {
        PostKindArg::Window => cuzk::ProofKind::WindowPost,
        PostKindArg::Winning => cuzk::ProofKind::WinningPost,
    };
    let registered_proof = post_proof_arg(kind, &a.sector_size)?;
    let randomness = a
        .randomness
        .as_deref()
        .map(|r| {
            postgen::parse_randomness(r).map_err(|e| Error::InvalidConfig {
                name: "--randomness".into(),
                value: r.into(),
                reason: format!("{e:#}"),
            })
        })
        .transpose()?;
    let spec = postgen::PostSpec {
        registered_proof,
        seed: postgen::seed_from_str(&a.seed),
        prover_id: parse_prover_id(&a.prover_id)?,
        randomness,
        first_sector: a.sector_num,
        sectors: a.sectors,
    };
    let n = postgen::resolve_sectors(&spec).map_err(|e| Error::InvalidConfig {
        name: "--sectors".into(),
        value: a.sectors.map(|n| n.to_string()).unwrap_or_default(),
        reason: format!("{e:#}"),
    })?;
    let t = Instant::now();
    let g = postgen::generate(&spec).map_err(|e| Error::Internal(format!("{e:#}")))?;
    let gen_s = t.elapsed().as_secs_f64();
    let (path, bytes) = g
        .write_dir(&a.dir)
        .map_err(|e| Error::Io(std::io::Error::other(format!("{e:#}"))))?;
    let vanilla: usize = g.vanilla_proofs.iter().map(Vec::len).sum();
    say!(
        "{registered_proof:?} (registered proof {}), {n} sector(s) × {} challenges: generated \
         in {gen_s:.2} s ({} of vanilla proofs), written to {} ({}) in {:.2} s\n  randomness {}",
        postgen::actors_number(registered_proof).map_err(|e| Error::Internal(format!("{e:#}")))?,
        postgen::challenges_per_sector(registered_proof),
        size_text(vanilla as u64),
        path.display(),
        size_text(bytes),
        t.elapsed().as_secs_f64() - gen_s,
        hex(&g.randomness)
    );
    Ok(())
}

fn gen_params(a: GenParamsArgs) -> Result<(), Failure> {
    let device = match a.device {
        DeviceArg::Cpu => paramgen::Device::Cpu,
        DeviceArg::Gpu if !cfg!(feature = "cuda") => {
            return Err(Error::NoDevice(
                "gen-params --device gpu: cuzk was built without the cuda feature".into(),
            )
            .into())
        }
        DeviceArg::Gpu => paramgen::Device::Gpu,
    };
    let seed = paramgen::seed_from_str(&a.seed);
    // A file where the output directory goes is an I/O error (90), found before any work.
    if a.dir.exists() && !a.dir.is_dir() {
        return Err(Error::Io(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{}: not a directory", a.dir.display()),
        ))
        .into());
    }
    let t = Instant::now();
    let (name, files) = match a.kind {
        ParamsKindArg::Porep => {
            let p = sector_size_arg(&a.sector_size)?;
            (
                format!("{p:?}"),
                paramgen::generate_porep(p, seed, &a.dir, device),
            )
        }
        ParamsKindArg::WindowPost | ParamsKindArg::WinningPost => {
            let kind = match a.kind {
                ParamsKindArg::WinningPost => cuzk::ProofKind::WinningPost,
                _ => cuzk::ProofKind::WindowPost,
            };
            let p = post_proof_arg(kind, &a.sector_size)?;
            (
                format!("{p:?}"),
                paramgen::generate_post(p, seed, &a.dir, device),
            )
        }
        ParamsKindArg::SnapDeals => {
            let p = update_proof_arg(&a.sector_size)?;
            (
                format!("{p:?}"),
                paramgen::generate_snap(p, seed, &a.dir, device),
            )
        }
    };
    let files = files.map_err(|e| Error::Internal(format!("gen-params: {e:#}")))?;
    say!(
        "{name}: parameters in {:.1} s (circuit {:.1} s; {}), peak RSS {}\n  {}\n  {}\n  {}",
        t.elapsed().as_secs_f64(),
        files.compile_secs,
        files.report,
        peak_rss_text(),
        files.params.display(),
        files.vk.display(),
        files.meta.display()
    );
    Ok(())
}

/// One line of per-stage times from progress events `(stage, seconds, of a partition?)`, stages
/// in the order they first occur: a call-level stage as its seconds, a partition-level one as
/// "mean × partitions (max)" (the partitions run concurrently, so these are not wall times).
fn stage_line(events: &[(&'static str, f64, bool)]) -> String {
    let mut order: Vec<(&'static str, bool)> = Vec::new();
    for &(name, _, part) in events {
        if !order.contains(&(name, part)) {
            order.push((name, part));
        }
    }
    order
        .iter()
        .map(|&(name, part)| {
            let v: Vec<f64> = events
                .iter()
                .filter(|e| e.0 == name && e.2 == part)
                .map(|e| e.1)
                .collect();
            let sum: f64 = v.iter().sum();
            if part {
                let max = v.iter().copied().fold(0.0, f64::max);
                format!(
                    "{name} {:.3} s × {} (max {max:.3})",
                    sum / v.len() as f64,
                    v.len()
                )
            } else {
                format!("{name} {sum:.3} s")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A byte count in kB or MB (10^3, 10^6).
fn size_text(bytes: u64) -> String {
    if bytes < 1_000_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// [`peak_rss`] in GiB, or "unknown".
fn peak_rss_text() -> String {
    peak_rss().map_or_else(
        || "unknown".into(),
        |b| format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64),
    )
}

/// Peak resident set size of this process (`VmHWM`, Linux), in bytes.
fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_are_distinct_and_fit() {
        let codes = [
            100, 101, 102, 103, 104, 200, 201, 300, 301, 302, 400, 401, 500, 501, 502, 900, 901,
            902,
        ];
        let s: std::collections::BTreeSet<u8> = codes.iter().map(|&c| exit_status(c)).collect();
        assert_eq!(s.len(), codes.len());
        assert!(!s.contains(&0) && !s.contains(&2));
        assert_eq!(exit_status(501), 51);
    }

    #[test]
    fn stage_lines() {
        let ev = [
            ("load_params", 2.0, false),
            ("witness", 1.0, true),
            ("witness", 3.0, true),
            ("msm_h", 0.5, true),
        ];
        assert_eq!(
            stage_line(&ev),
            "load_params 2.000 s, witness 2.000 s × 2 (max 3.000), msm_h 0.500 s × 1 (max 0.500)"
        );
    }

    #[test]
    fn prover_ids() {
        assert_eq!(parse_prover_id("f01000").unwrap()[..2], [0xe8, 0x07]);
        assert_eq!(
            parse_prover_id("t01000").unwrap(),
            parse_prover_id("1000").unwrap()
        );
        let hex64 = "e807".to_string() + &"0".repeat(60);
        assert_eq!(
            parse_prover_id(&hex64).unwrap(),
            parse_prover_id("f01000").unwrap()
        );
        assert!(parse_prover_id("f1abc").is_err());
    }

    #[test]
    fn malformed_prover_ids_are_prover_id_errors() {
        let hex62 = "e807".to_string() + &"0".repeat(58);
        for (bad, chars) in [
            ("zz", 2),
            ("f0abc", 5),
            ("f0", 2),
            ("f099999999999999999999999", 25),
            (hex62.as_str(), 62),
            (" f0abc ", 5),
            ("+1000", 5),
            ("f0+5", 4),
        ] {
            let e = parse_prover_id(bad).unwrap_err();
            assert_eq!(e.code(), 102, "{bad}: {e}");
            assert_eq!(exit_status(e.code()), 12);
            let m = e.to_string();
            assert!(
                m.contains(&format!("{:?} ({chars} characters)", bad.trim())),
                "{m}"
            );
            assert!(m.contains("f01000") && m.contains("64 hex digits"), "{m}");
        }
    }

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
