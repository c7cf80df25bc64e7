//! Real, deterministic PoRep test fixtures: a sealed sector's C1 output plus Groth16 parameters
//! generated from a fixed seed, for a 2 KiB or an 8 MiB sector ([`FixtureSize`]).
//!
//! [`ensure_fixture`] (and [`ensure_2kib_fixture`], its 2 KiB form) builds (once) and reuses a
//! directory laid out as
//!
//! ```text
//! <dir>/fixture.json   metadata (this module's `Fixture`, hex-encoded byte arrays); written last
//! <dir>/c1.json        filecoin-proofs-api `SealCommitPhase1Output`, serde_json
//! <dir>/params/        v28-stacked-proof-of-replication-…-<sha256>.params / .vk / .meta
//! <dir>/seal/          the staged, sealed and cache files of the sector (not needed afterwards)
//! <dir>/.lock          held (flock) while a process checks or builds the fixture
//! ```
//!
//! Everything is derived from constants of this module, the same for both sizes: the piece data
//! (ChaCha20 from [`PIECE_RNG_SEED`], as many bytes as a full-sector piece holds), ticket, seed,
//! prover id (actor 1000) and sector id (4242) are fixed, so `comm_d`, `comm_r` and `c1.json` are
//! the same on every machine; the parameters come from `ChaCha20Rng::from_seed(PARAMS_RNG_SEED)`
//! and are therefore the same too (they are **test** parameters: anyone knowing the seed knows
//! the toxic waste).
//!
//! | size | proof | default directory | sealing | parameters |
//! |---|---|---|---|---|
//! | 2 KiB | `StackedDrg2KiBV1_1`, 1 partition | `~/.cache/cuzk/fixture-2kib-v1` | < 1 s | ~15 min on 2 cores, ~141 s on 16; 1.1 GB |
//! | 8 MiB | `StackedDrg8MiBV1_1`, 1 partition | `~/.cache/cuzk/fixture-8mib-v1` | 7–12 s on 2 cores, 5.8 s on 16 | 260 s of the fixture's 270 s on 16 cores (H200 host, next to a 2 KiB build), ~20 min on 2 (estimated); 1.43 GB |
//!
//! 8 MiB sealing is deterministic (`comm_r` `2eae2cfc…`, `comm_d` `dfd2e891…` here, with the
//! ignored test `fixture::tests::seal_8mib_sector_only`, and on the H200 host); its parameters
//! were generated on the H200 host only (BENCHMARKS.md).
//!
//! One directory holds one fixture: [`ensure_fixture`] refuses a directory whose `fixture.json`
//! is of the other size (both default directories differ; `$CUZK_FIXTURE_DIR` overrides both).
//!
//! # No process-wide settings
//!
//! Nothing here sets an environment variable (`std::env::set_var` is unsound while other
//! threads read the environment, e.g. in a test harness): the parameter files are written to
//! and read from explicit paths, and [`Fixture::verify`] reads the fixture's `.vk` file itself.
//! Sealing uses filecoin-proofs' parent cache as configured (`FIL_PROOFS_PARENT_CACHE`, default
//! `/var/tmp/filecoin-parents`). Only filecoin-proofs' own prover (`seal_commit_phase2`, used by
//! `tests/fixture_verify.rs`) needs `FIL_PROOFS_PARAMETER_CACHE` to point at
//! [`Fixture::param_dir`]; such a test sets it for a child process ([`run_self_with_env`]).

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use filecoin_proofs::constants::{DefaultPieceHasher, SectorShape2KiB, SectorShape8MiB};
use filecoin_proofs_api::seal::{self, SealCommitPhase1Output};
use filecoin_proofs_api::{RegisteredSealProof, SectorId, UnpaddedBytesAmount};
use fs2::FileExt;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_core::parameter_cache::{
    parameter_cache_params_path, parameter_cache_verifying_key_path, CacheEntryMetadata,
    CacheableParameters, ParameterSetMetadata, PARAMETER_METADATA_EXT, VERSION,
};
use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound, StackedDrg};

use cuzk::c1::{hex as to_hex, prover_id_from_actor_id};
use cuzk::{Error, Result};

/// Version of the fixture layout and constants; bumping it changes the default directory names.
pub const FIXTURE_VERSION: u32 = 1;
/// The proof type of the 2 KiB fixture (see [`FixtureSize::registered_proof`]).
pub const REGISTERED_PROOF: RegisteredSealProof = RegisteredSealProof::StackedDrg2KiBV1_1;
/// Sector number of the fixture (both sizes; so are the constants below).
pub const SECTOR_ID: u64 = 4242;
/// Miner actor id whose prover id seals the fixture (`f01000`).
pub const ACTOR_ID: u64 = 1000;
/// Interactive-PoRep ticket (32 bytes).
pub const TICKET: [u8; 32] = *b"cuzk 2KiB fixture ticket, v1 ...";
/// Interactive-PoRep seed (32 bytes).
pub const SEED: [u8; 32] = *b"cuzk 2KiB fixture seed, v1 .....";
/// ChaCha20 seed of the piece data (the unpadded bytes of a full-sector piece: 2032 for 2 KiB,
/// 8,323,072 for 8 MiB).
pub const PIECE_RNG_SEED: [u8; 32] = *b"cuzk 2KiB fixture piece data, v1";
/// ChaCha20 seed of the Groth16 parameter generation.
pub const PARAMS_RNG_SEED: [u8; 32] = *b"cuzk 2KiB fixture groth16 params";

/// Name of the metadata file inside a fixture directory.
pub const FIXTURE_JSON: &str = "fixture.json";
/// Name of the C1 output file inside a fixture directory.
pub const C1_JSON: &str = "c1.json";

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;

/// The sector size of a fixture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FixtureSize {
    /// 2 KiB sector, `StackedDrg2KiBV1_1`.
    Kib2,
    /// 8 MiB sector, `StackedDrg8MiBV1_1`.
    Mib8,
}

impl FixtureSize {
    /// Every size, smallest first.
    pub const ALL: [FixtureSize; 2] = [FixtureSize::Kib2, FixtureSize::Mib8];

    /// The proof type of this size's fixture.
    pub fn registered_proof(self) -> RegisteredSealProof {
        match self {
            FixtureSize::Kib2 => RegisteredSealProof::StackedDrg2KiBV1_1,
            FixtureSize::Mib8 => RegisteredSealProof::StackedDrg8MiBV1_1,
        }
    }

    /// `"2KiB"` or `"8MiB"` (what [`FromStr`] accepts, case-insensitively).
    pub fn name(self) -> &'static str {
        match self {
            FixtureSize::Kib2 => "2KiB",
            FixtureSize::Mib8 => "8MiB",
        }
    }

    /// Sector size in bytes.
    pub fn sector_size(self) -> u64 {
        u64::from(self.registered_proof().sector_size())
    }

    /// The size whose fixture uses `proof`, if any.
    pub fn from_registered_proof(proof: RegisteredSealProof) -> Option<FixtureSize> {
        FixtureSize::ALL
            .into_iter()
            .find(|s| s.registered_proof() == proof)
    }

    /// Name of the default directory under `~/.cache/cuzk` (`fixture-2kib-v1`, `fixture-8mib-v1`).
    fn dir_name(self) -> String {
        format!(
            "fixture-{}-v{FIXTURE_VERSION}",
            self.name().to_ascii_lowercase()
        )
    }
}

impl std::fmt::Display for FixtureSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FixtureSize {
    type Err = Error;

    /// Parses `2KiB` or `8MiB`, case-insensitively (surrounding blanks ignored).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (name `sector size`) for anything else.
    fn from_str(s: &str) -> Result<FixtureSize> {
        let t = s.trim();
        FixtureSize::ALL
            .into_iter()
            .find(|size| size.name().eq_ignore_ascii_case(t))
            .ok_or_else(|| Error::InvalidConfig {
                name: "sector size".into(),
                value: s.into(),
                reason: "expected 2KiB or 8MiB".into(),
            })
    }
}

/// A ready fixture: where its files are and the values needed to prove and verify it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixture {
    /// The fixture directory.
    pub dir: PathBuf,
    /// Directory of the Groth16 `.params` / `.vk` files (`<dir>/params`); pass it as
    /// `EngineConfig::parameter_dir`.
    pub param_dir: PathBuf,
    /// The C1 output (`SealCommitPhase1Output` JSON of filecoin-proofs-api), `<dir>/c1.json`.
    pub c1_json: PathBuf,
    /// Groth16 parameter file (about 1.1 GB for 2 KiB), inside `param_dir`.
    pub params_file: PathBuf,
    /// Groth16 verifying-key file, inside `param_dir`.
    pub vk_file: PathBuf,
    /// Proof type (`StackedDrg2KiBV1_1` or `StackedDrg8MiBV1_1`).
    pub registered_proof: RegisteredSealProof,
    /// Sector number.
    pub sector_id: u64,
    /// Miner actor id the prover id was derived from.
    pub actor_id: u64,
    /// 32-byte prover id ([`cuzk::c1::prover_id_from_actor_id`] of `actor_id`).
    pub prover_id: [u8; 32],
    /// 32-byte ticket.
    pub ticket: [u8; 32],
    /// 32-byte interactive seed.
    pub seed: [u8; 32],
    /// Replica commitment (32 bytes, as filecoin-proofs returns it).
    pub comm_r: [u8; 32],
    /// Data commitment (32 bytes).
    pub comm_d: [u8; 32],
}

/// On-disk form of [`Fixture`]: byte arrays in hex, paths relative to the fixture directory.
#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    registered_proof: RegisteredSealProof,
    sector_id: u64,
    actor_id: u64,
    prover_id: String,
    ticket: String,
    seed: String,
    comm_r: String,
    comm_d: String,
    c1_json: String,
    params_file: String,
    vk_file: String,
}

impl Fixture {
    /// Reads `<dir>/fixture.json` (paths in it are relative to `dir`).
    ///
    /// Does not check that the files it names exist (see [`Fixture::is_complete`]) and does not
    /// touch `FIL_PROOFS_PARAMETER_CACHE`.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be read; [`Error::Internal`] if it is not a fixture
    /// metadata file of version [`FIXTURE_VERSION`].
    pub fn load(dir: &Path) -> Result<Fixture> {
        let path = dir.join(FIXTURE_JSON);
        let text = fs::read(&path)?;
        let m: Meta = serde_json::from_slice(&text).map_err(|e| {
            Error::Internal(format!("bad fixture metadata {}: {e}", path.display()))
        })?;
        if m.version != FIXTURE_VERSION {
            return Err(Error::Internal(format!(
                "fixture metadata {} has version {}, expected {FIXTURE_VERSION}",
                path.display(),
                m.version
            )));
        }
        let b = |name: &str, v: &str| {
            from_hex32(v).ok_or_else(|| {
                Error::Internal(format!(
                    "bad fixture metadata {}: {name} is not 64 hex digits",
                    path.display()
                ))
            })
        };
        let param_dir = dir.join("params");
        Ok(Fixture {
            dir: dir.to_path_buf(),
            c1_json: dir.join(&m.c1_json),
            params_file: param_dir.join(&m.params_file),
            vk_file: param_dir.join(&m.vk_file),
            param_dir,
            registered_proof: m.registered_proof,
            sector_id: m.sector_id,
            actor_id: m.actor_id,
            prover_id: b("prover_id", &m.prover_id)?,
            ticket: b("ticket", &m.ticket)?,
            seed: b("seed", &m.seed)?,
            comm_r: b("comm_r", &m.comm_r)?,
            comm_d: b("comm_d", &m.comm_d)?,
        })
    }

    /// [`Fixture::load`], and checks that the fixture is of `size`.
    ///
    /// # Errors
    /// Those of [`Fixture::load`]; [`Error::InvalidConfig`] (name `registered_proof`) if
    /// `fixture.json` names another proof type than `size.registered_proof()`.
    pub fn load_for(dir: &Path, size: FixtureSize) -> Result<Fixture> {
        let f = Fixture::load(dir)?;
        check_size(&f, size)?;
        Ok(f)
    }

    /// The fixture's size, or `None` for a proof type no [`FixtureSize`] uses.
    pub fn size(&self) -> Option<FixtureSize> {
        FixtureSize::from_registered_proof(self.registered_proof)
    }

    /// Writes `<dir>/fixture.json` atomically (temporary name, then rename).
    ///
    /// # Errors
    /// [`Error::Io`] on write failure; [`Error::Internal`] if a path is not inside the fixture
    /// directory.
    pub fn save(&self) -> Result<()> {
        let rel = |p: &Path, base: &Path| -> Result<String> {
            p.strip_prefix(base)
                .map(|r| r.to_string_lossy().into_owned())
                .map_err(|_| {
                    Error::Internal(format!("{} is not inside {}", p.display(), base.display()))
                })
        };
        let m = Meta {
            version: FIXTURE_VERSION,
            registered_proof: self.registered_proof,
            sector_id: self.sector_id,
            actor_id: self.actor_id,
            prover_id: to_hex(&self.prover_id),
            ticket: to_hex(&self.ticket),
            seed: to_hex(&self.seed),
            comm_r: to_hex(&self.comm_r),
            comm_d: to_hex(&self.comm_d),
            c1_json: rel(&self.c1_json, &self.dir)?,
            params_file: rel(&self.params_file, &self.param_dir)?,
            vk_file: rel(&self.vk_file, &self.param_dir)?,
        };
        let json = serde_json::to_vec_pretty(&m).map_err(Error::internal)?;
        write_atomic(&self.dir.join(FIXTURE_JSON), |w| w.write_all(&json))
    }

    /// Whether every file the fixture needs (`fixture.json`, `c1.json`, `.params`, `.vk`) exists.
    /// Files are only ever created by rename, so existing files are complete.
    pub fn is_complete(&self) -> bool {
        [
            self.dir.join(FIXTURE_JSON),
            self.c1_json.clone(),
            self.params_file.clone(),
            self.vk_file.clone(),
        ]
        .iter()
        .all(|p| p.is_file())
    }

    /// Reads the C1 output bytes (`c1.json`).
    ///
    /// # Errors
    /// [`Error::Io`].
    pub fn read_c1(&self) -> Result<Vec<u8>> {
        Ok(fs::read(&self.c1_json)?)
    }

    /// Reads and parses the C1 output as filecoin-proofs-api's type.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::MalformedInput`] if `c1.json` does not parse.
    pub fn c1_output(&self) -> Result<SealCommitPhase1Output> {
        let bytes = self.read_c1()?;
        serde_json::from_slice(&bytes)
            .map_err(|e| Error::MalformedInput(format!("{}: {e}", self.c1_json.display())))
    }

    /// Verifies `proof` (192 bytes per partition) against this fixture's public values, the
    /// way filecoin-proofs' `verify_seal` does — an implementation independent of cuzk's prover:
    /// the replica id from prover id, sector, ticket and `comm_d`, the public inputs of
    /// `StackedCompound`, then `StackedCompound::verify` with the fixture's verifying key. The key
    /// is read from [`Fixture::vk_file`] (where `verify_seal` would look it up through
    /// `FIL_PROOFS_PARAMETER_CACHE`), so no process-wide setting is needed.
    ///
    /// Returns `Ok(false)` for a well-formed proof that does not verify.
    ///
    /// # Errors
    /// [`Error::Io`] / [`Error::ParametersInvalid`] when the `.vk` file cannot be read;
    /// [`Error::Internal`] when filecoin-proofs fails (e.g. bytes that are not curve points, all-
    /// zero commitments, or a proof type no [`FixtureSize`] uses).
    pub fn verify(&self, proof: &[u8]) -> Result<bool> {
        let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12>::read(BufReader::new(
            File::open(&self.vk_file)?,
        ))
        .map_err(|e| Error::ParametersInvalid {
            path: self.vk_file.clone(),
            reason: e.to_string(),
        })?;
        let pvk = bellperson::groth16::prepare_verifying_key(&vk);
        match self.size() {
            Some(FixtureSize::Kib2) => self.verify_shape::<SectorShape2KiB>(&pvk, proof),
            Some(FixtureSize::Mib8) => self.verify_shape::<SectorShape8MiB>(&pvk, proof),
            None => Err(Error::Internal(format!(
                "no fixture size proves {:?}",
                self.registered_proof
            ))),
        }
    }

    /// [`Fixture::verify`] for the tree shape `Tree` of the fixture's sector size.
    fn verify_shape<Tree: 'static + MerkleTreeTrait>(
        &self,
        pvk: &bellperson::groth16::PreparedVerifyingKey<blstrs::Bls12>,
        proof: &[u8],
    ) -> Result<bool> {
        use storage_proofs_core::compound_proof::SetupParams;
        use storage_proofs_porep::stacked::{
            generate_replica_id, ChallengeRequirements, PublicInputs, Tau,
        };
        if self.comm_r == [0; 32] || self.comm_d == [0; 32] || proof.is_empty() {
            return Err(Error::Internal(
                "verify: all-zero commitment or empty proof".into(),
            ));
        }
        let config = self.registered_proof.as_v1_config();
        let comm_r: <Tree::Hasher as filecoin_hashers::Hasher>::Domain =
            filecoin_proofs::as_safe_commitment(&self.comm_r, "comm_r").map_err(fp("comm_r"))?;
        let comm_d: filecoin_proofs::DefaultPieceDomain =
            filecoin_proofs::as_safe_commitment(&self.comm_d, "comm_d").map_err(fp("comm_d"))?;
        let replica_id = generate_replica_id::<Tree::Hasher, _>(
            &self.prover_id,
            self.sector_id,
            &self.ticket,
            comm_d,
            &config.porep_id,
        );
        let setup = SetupParams {
            vanilla_params: filecoin_proofs::parameters::setup_params(&config)
                .map_err(fp("setup_params"))?,
            partitions: Some(usize::from(config.partitions)),
            priority: false,
        };
        let pp = <Compound<Tree> as CompoundProof<
            '_,
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::setup(&setup)
        .map_err(fp("setup"))?;
        let inputs = PublicInputs {
            replica_id,
            tau: Some(Tau { comm_r, comm_d }),
            seed: Some(self.seed),
            k: None,
        };
        let multi = storage_proofs_core::multi_proof::MultiProof::new_from_reader(
            Some(usize::from(config.partitions)),
            proof,
            pvk,
        )
        .map_err(fp("proof bytes"))?;
        <Compound<Tree> as CompoundProof<'_, StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::verify(
            &pp,
            &inputs,
            &multi,
            &ChallengeRequirements {
                minimum_challenges: config.minimum_challenges(),
            },
        )
        .map_err(fp("verify"))
    }
}

/// The default 2 KiB fixture directory: `$CUZK_FIXTURE_DIR` if set (and not empty), else
/// `$HOME/.cache/cuzk/fixture-2kib-v1` (kept across CI runs on one machine), else
/// `<temp dir>/cuzk/fixture-2kib-v1` when `HOME` is unset. Same as
/// `default_fixture_dir_for(FixtureSize::Kib2)`.
pub fn default_fixture_dir() -> PathBuf {
    default_fixture_dir_for(FixtureSize::Kib2)
}

/// The default fixture directory of `size`: `$CUZK_FIXTURE_DIR` if set (and not empty, for
/// either size), else `$HOME/.cache/cuzk/fixture-<2kib|8mib>-v1`, else
/// `<temp dir>/cuzk/fixture-<2kib|8mib>-v1` when `HOME` is unset.
pub fn default_fixture_dir_for(size: FixtureSize) -> PathBuf {
    if let Some(d) = std::env::var_os("CUZK_FIXTURE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    cache_dir().join(size.dir_name())
}

/// `$HOME/.cache/cuzk`, or `<temp dir>/cuzk` when `HOME` is unset: where the default fixture
/// directories are (kept across CI runs on one machine).
pub(crate) fn cache_dir() -> PathBuf {
    let base = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache"))
        .unwrap_or_else(std::env::temp_dir);
    base.join("cuzk")
}

/// Runs the test `test` of the current test binary in a child process with `vars` added to its
/// environment, and returns the child's output (status, stdout, stderr).
///
/// For tests that need a process-wide setting read by a dependency (e.g. filecoin-proofs'
/// `FIL_PROOFS_PARAMETER_CACHE`, read once per process): the child gets the setting from its
/// start, so no thread ever sees the environment change (`std::env::set_var` would be unsound
/// in the multithreaded test harness). The child runs `<test binary> --exact <test>
/// --nocapture --test-threads 1`; the test tells the two runs apart by one of `vars`.
///
/// # Errors
/// [`Error::Io`] when the test binary cannot be run.
pub fn run_self_with_env(
    test: &str,
    vars: &[(&str, &std::ffi::OsStr)],
) -> Result<std::process::Output> {
    let exe = std::env::current_exe()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args([test, "--exact", "--nocapture", "--test-threads", "1"]);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    Ok(cmd.output()?)
}

/// Builds the 2 KiB fixture in `dir` if needed, or reuses what is there and complete: exactly
/// `ensure_fixture(dir, FixtureSize::Kib2)`.
///
/// # Errors
/// See [`ensure_fixture`].
pub fn ensure_2kib_fixture(dir: &Path) -> Result<Fixture> {
    ensure_fixture(dir, FixtureSize::Kib2)
}

/// Builds the fixture of `size` in `dir` if needed, or reuses what is there and complete.
///
/// Idempotent and safe to run from several processes at once (an exclusive lock on
/// `<dir>/.lock` serializes them; the second finds the fixture complete). Every file is written
/// under a temporary name and renamed into place, so an interrupted run is resumed, never
/// mistaken for complete. Sets no environment variable: the parameters are written to
/// `<dir>/params` by path.
///
/// Steps, each logged with its duration: seal the sector (add_piece, pre-commit 1 and 2,
/// commit 1 → `c1.json`; < 1 s for 2 KiB, ~10 s for 8 MiB), then generate the Groth16
/// parameters and the verifying key if missing (2 KiB: ~15 min on 2 cores, 1.1 GB; see the
/// module table).
///
/// # Errors
/// [`Error::InvalidConfig`] when `dir` already holds a fixture of the other size (name
/// `registered_proof`); [`Error::Io`] for file-system errors;
/// [`Error::Internal`] when filecoin-proofs or bellperson fail.
pub fn ensure_fixture(dir: &Path, size: FixtureSize) -> Result<Fixture> {
    let t_all = Instant::now();
    // File-system errors name the path (a fixture directory that cannot be created or written
    // is the usual user error here).
    let at = |path: &Path| {
        let path = path.display().to_string();
        move |e: std::io::Error| std::io::Error::new(e.kind(), format!("{path}: {e}"))
    };
    fs::create_dir_all(dir).map_err(at(dir))?;
    let dir = fs::canonicalize(dir).map_err(at(dir))?;
    let param_dir = dir.join("params");
    fs::create_dir_all(&param_dir).map_err(at(&param_dir))?;

    let lock_path = dir.join(".lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(at(&lock_path))?;
    if lock.try_lock_exclusive().is_err() {
        log::info!(
            "fixture {}: another process is building it, waiting for its lock",
            dir.display()
        );
        lock.lock_exclusive()?;
    }
    let result = match size {
        FixtureSize::Kib2 => ensure_locked::<SectorShape2KiB>(&dir, &param_dir, size),
        FixtureSize::Mib8 => ensure_locked::<SectorShape8MiB>(&dir, &param_dir, size),
    };
    let _ = fs2::FileExt::unlock(&lock);
    let fixture = result?;
    log::info!(
        "fixture {} ({size}) ready in {:.1} s: comm_r {} comm_d {}",
        dir.display(),
        t_all.elapsed().as_secs_f64(),
        to_hex(&fixture.comm_r),
        to_hex(&fixture.comm_d)
    );
    Ok(fixture)
}

/// [`ensure_fixture`] under the lock, for the tree shape `Tree` of `size`.
fn ensure_locked<Tree: 'static + MerkleTreeTrait>(
    dir: &Path,
    param_dir: &Path,
    size: FixtureSize,
) -> Result<Fixture> {
    let (params_file, vk_file, meta_file, pp) = parameter_files::<Tree>(param_dir, size)?;

    if let Ok(f) = Fixture::load(dir) {
        // Never rebuild (overwrite) a fixture of the other size in place.
        check_size(&f, size)?;
        if f.is_complete() && f.params_file == params_file && f.vk_file == vk_file {
            log::info!("fixture {}: reusing the complete fixture", dir.display());
            return Ok(f);
        }
    }

    // Leftovers of interrupted runs (we hold the lock, so nobody else is writing them).
    for d in [dir, param_dir] {
        for entry in fs::read_dir(d)? {
            let path = entry?.path();
            if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".tmp."))
            {
                log::info!("fixture: removing leftover {}", path.display());
                fs::remove_file(&path)?;
            }
        }
    }

    // (a) The sealed sector and its C1 output (cheap: always redone when fixture.json is absent).
    let c1_json = dir.join(C1_JSON);
    let t = Instant::now();
    let (comm_r, comm_d) = seal_sector(dir, &c1_json, size)?;
    log::info!(
        "fixture: sealed {size} sector {SECTOR_ID} and wrote {} in {:.2} s",
        c1_json.display(),
        t.elapsed().as_secs_f64()
    );

    // (b) Groth16 parameters and verifying key.
    if params_file.is_file() {
        log::info!("fixture: reusing parameters {}", params_file.display());
    } else {
        let t = Instant::now();
        log::warn!(
            "fixture: generating Groth16 test parameters for the {size} PoRep circuit into {} \
             (once; {})",
            params_file.display(),
            match size {
                FixtureSize::Kib2 => "about 15 minutes on 2 cores, 2.5 on 16; 1.1 GB",
                FixtureSize::Mib8 => "about 20 minutes on 2 cores (estimated), 4.5 on 16; 1.43 GB",
            }
        );
        let circuit = <Compound<Tree> as CompoundProof<
            '_,
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            _,
        >>::blank_circuit(&pp);
        let mut rng = ChaCha20Rng::from_seed(PARAMS_RNG_SEED);
        let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
            circuit, &mut rng,
        )
        .map_err(|e| Error::Internal(format!("Groth16 parameter generation: {e}")))?;
        log::info!(
            "fixture: generated parameters in {:.1} s, writing",
            t.elapsed().as_secs_f64()
        );
        let t_w = Instant::now();
        write_atomic(&params_file, |w| params.write(w))?;
        log::info!(
            "fixture: wrote {} ({} bytes) in {:.1} s",
            params_file.display(),
            fs::metadata(&params_file)?.len(),
            t_w.elapsed().as_secs_f64()
        );
    }
    if !vk_file.is_file() {
        // The .params file starts with the verifying key (bellperson's Parameters::write).
        let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12>::read(BufReader::new(
            File::open(&params_file)?,
        ))
        .map_err(|e| Error::ParametersInvalid {
            path: params_file.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&vk_file, |w| vk.write(w))?;
        log::info!("fixture: wrote {}", vk_file.display());
    }
    if !meta_file.is_file() {
        let meta = CacheEntryMetadata {
            sector_size: pp.sector_size(),
        };
        let json = serde_json::to_vec(&meta).map_err(Error::internal)?;
        write_atomic(&meta_file, |w| w.write_all(&json))?;
    }

    // The file names are filecoin-proofs' own (parameter_files), so its cache finds these files
    // when FIL_PROOFS_PARAMETER_CACHE points at param_dir.

    let fixture = Fixture {
        dir: dir.to_path_buf(),
        param_dir: param_dir.to_path_buf(),
        c1_json,
        params_file,
        vk_file,
        registered_proof: size.registered_proof(),
        sector_id: SECTOR_ID,
        actor_id: ACTOR_ID,
        prover_id: prover_id_from_actor_id(ACTOR_ID),
        ticket: TICKET,
        seed: SEED,
        comm_r,
        comm_d,
    };
    fixture.save()?;
    Ok(fixture)
}

/// The `.params`, `.vk` and `.meta` paths filecoin-proofs looks up for the PoRep circuit of
/// `size` (tree shape `Tree`), and the circuit's public parameters — built exactly as
/// filecoin-proofs' `get_stacked_params` builds them for the registered proof's `PoRepConfig`.
fn parameter_files<Tree: 'static + MerkleTreeTrait>(
    param_dir: &Path,
    size: FixtureSize,
) -> Result<(
    PathBuf,
    PathBuf,
    PathBuf,
    storage_proofs_porep::stacked::PublicParams<Tree>,
)> {
    let porep_config = size.registered_proof().as_v1_config();
    let pp = filecoin_proofs::parameters::public_params::<Tree>(&porep_config)
        .map_err(|e| Error::Internal(format!("{size} public parameters: {e:#}")))?;
    let id = <Compound<Tree> as CacheableParameters<StackedCircuit<Tree, DefaultPieceHasher>, _>>::cache_identifier(&pp);
    let name = |p: PathBuf| -> Result<PathBuf> {
        p.file_name().map(|n| param_dir.join(n)).ok_or_else(|| {
            Error::Internal(format!("parameter path {} has no file name", p.display()))
        })
    };
    let params = name(parameter_cache_params_path(&id))?;
    let vk = name(parameter_cache_verifying_key_path(&id))?;
    let meta = param_dir.join(format!("v{VERSION}-{id}.{PARAMETER_METADATA_EXT}"));
    Ok((params, vk, meta, pp))
}

/// Seals the fixture's sector of `size` under `<dir>/seal` (from scratch) and writes the C1
/// output to `c1_json` atomically. Returns `(comm_r, comm_d)`. (filecoin-proofs-api dispatches
/// on the registered proof, so this needs no tree-shape type.)
pub(crate) fn seal_sector(
    dir: &Path,
    c1_json: &Path,
    size: FixtureSize,
) -> Result<([u8; 32], [u8; 32])> {
    let registered_proof = size.registered_proof();
    let seal_dir = dir.join("seal");
    if seal_dir.exists() {
        fs::remove_dir_all(&seal_dir)?;
    }
    let cache_dir = seal_dir.join("cache");
    fs::create_dir_all(&cache_dir)?;
    let staged = seal_dir.join("staged");
    let sealed = seal_dir.join("sealed");

    let sector_size = size.sector_size();
    let piece_len = sector_size - sector_size / 128; // unpadded bytes of a full-sector piece
    let mut data = vec![0u8; piece_len as usize];
    ChaCha20Rng::from_seed(PIECE_RNG_SEED).fill_bytes(&mut data);

    let mut staged_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)?;
    let (piece, _) = seal::add_piece(
        registered_proof,
        &data[..],
        &mut staged_file,
        UnpaddedBytesAmount(piece_len),
        &[],
    )
    .map_err(fp("add_piece"))?;
    staged_file.sync_all()?;
    drop(staged_file);
    File::create(&sealed)?;
    let pieces = [piece];

    let prover_id = prover_id_from_actor_id(ACTOR_ID);
    let sector = SectorId::from(SECTOR_ID);
    let p1 = seal::seal_pre_commit_phase1(
        registered_proof,
        &cache_dir,
        &staged,
        &sealed,
        prover_id,
        sector,
        TICKET,
        &pieces,
    )
    .map_err(fp("seal_pre_commit_phase1"))?;
    let p2 = seal::seal_pre_commit_phase2(p1, &cache_dir, &sealed)
        .map_err(fp("seal_pre_commit_phase2"))?;
    let (comm_r, comm_d) = (p2.comm_r, p2.comm_d);
    let c1 = seal::seal_commit_phase1(
        &cache_dir, &sealed, prover_id, sector, TICKET, SEED, p2, &pieces,
    )
    .map_err(fp("seal_commit_phase1"))?;
    let json = serde_json::to_vec(&c1).map_err(Error::internal)?;
    write_atomic(c1_json, |w| w.write_all(&json))?;
    Ok((comm_r, comm_d))
}

/// Writes `path` through `write` into `<path>.tmp.<pid>`, flushes and fsyncs it, then renames it
/// to `path`, so `path` only ever exists complete.
pub(crate) fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::Internal(format!("{} has no file name", path.display())))?;
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let res = (|| -> std::io::Result<()> {
        let f = File::create(&tmp)?;
        {
            let mut w = BufWriter::with_capacity(1 << 20, &f);
            write(&mut w)?;
            w.flush()?;
        }
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    Ok(res?)
}

/// [`Error::InvalidConfig`] (name `registered_proof`) unless `f` is a fixture of `size`.
fn check_size(f: &Fixture, size: FixtureSize) -> Result<()> {
    if f.registered_proof == size.registered_proof() {
        return Ok(());
    }
    Err(Error::InvalidConfig {
        name: "registered_proof".into(),
        value: format!("{:?}", f.registered_proof),
        reason: format!(
            "{} holds a fixture of another proof type; the {size} fixture needs {:?} \
             (use another directory, e.g. cuzk_dev::fixture::default_fixture_dir_for)",
            f.dir.join(FIXTURE_JSON).display(),
            size.registered_proof()
        ),
    })
}

/// Maps a filecoin-proofs (`anyhow`) error to [`Error::Internal`], naming the failed call.
pub(crate) fn fp<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> Error {
    move |e| Error::Internal(format!("{what}: {e:#}"))
}

/// Writes a structurally valid Groth16 parameter file at `path` (bellperson's format, as
/// `cuzk::srs` reads it) with `ic` verifying-key IC points and the query sizes `sizes` = H, L,
/// A, B_G1, B_G2 (points are multiples of the generators, never the identity), and its
/// verifying key as the `.vk` file next to it (`path` with the extension `vk`), as
/// filecoin-proofs stores them. Not the parameters of any circuit: for tests of parameter
/// loading and checking.
///
/// # Errors
/// The I/O error of creating or writing the files.
pub fn write_fake_params(path: &Path, ic: usize, sizes: [usize; 5]) -> std::io::Result<()> {
    use group::Group;
    let g1 =
        |i: usize| (blstrs::G1Projective::generator() * blstrs::Scalar::from(i as u64 + 2)).into();
    let g2 =
        |i: usize| (blstrs::G2Projective::generator() * blstrs::Scalar::from(i as u64 + 2)).into();
    let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12> {
        alpha_g1: g1(0),
        beta_g1: g1(1),
        beta_g2: g2(0),
        gamma_g2: g2(1),
        delta_g1: g1(2),
        delta_g2: g2(2),
        ic: (0..ic).map(g1).collect(),
    };
    let p = bellperson::groth16::Parameters::<blstrs::Bls12> {
        vk,
        h: std::sync::Arc::new((0..sizes[0]).map(g1).collect()),
        l: std::sync::Arc::new((0..sizes[1]).map(g1).collect()),
        a: std::sync::Arc::new((0..sizes[2]).map(g1).collect()),
        b_g1: std::sync::Arc::new((0..sizes[3]).map(g1).collect()),
        b_g2: std::sync::Arc::new((0..sizes[4]).map(g2).collect()),
    };
    p.write(&mut File::create(path)?)?;
    p.vk.write(&mut File::create(path.with_extension("vk"))?)
}

/// Writes a large `.params` file the way [`write_fake_params`] does, fast: the query sizes
/// `sizes` = H, L, A, B_G1, B_G2 (points), filled by repeating 1,024 distinct G1 and 64 distinct
/// G2 points (multiples of the generators) instead of computing every point; 2 IC points, no
/// `.vk` file. For measuring parameter loading at real sizes (a 32 GiB PoRep file has
/// 2^27 − 1 H points and ~47 GB).
///
/// # Errors
/// The I/O error of creating or writing the file.
pub fn write_tiled_fake_params(path: &Path, sizes: [usize; 5]) -> std::io::Result<()> {
    use group::Group;
    let g1: Vec<[u8; 96]> = (0..1024u64)
        .map(|i| {
            let p: blstrs::G1Affine =
                (blstrs::G1Projective::generator() * blstrs::Scalar::from(i + 2)).into();
            p.to_uncompressed()
        })
        .collect();
    let g2: Vec<[u8; 192]> = (0..64u64)
        .map(|i| {
            let p: blstrs::G2Affine =
                (blstrs::G2Projective::generator() * blstrs::Scalar::from(i + 2)).into();
            p.to_uncompressed()
        })
        .collect();
    let mut w = BufWriter::with_capacity(8 << 20, File::create(path)?);
    // vk: α₁, β₁ (G1), β₂, γ₂ (G2), δ₁ (G1), δ₂ (G2), then the IC count and points.
    w.write_all(&g1[0])?;
    w.write_all(&g1[1])?;
    w.write_all(&g2[0])?;
    w.write_all(&g2[1])?;
    w.write_all(&g1[2])?;
    w.write_all(&g2[2])?;
    w.write_all(&2u32.to_be_bytes())?;
    w.write_all(&g1[3])?;
    w.write_all(&g1[4])?;
    let g1_block: Vec<u8> = g1.concat();
    let g2_block: Vec<u8> = g2.concat();
    for (i, &n) in sizes.iter().enumerate() {
        let (block, sz) = if i == 4 {
            (&g2_block, 192)
        } else {
            (&g1_block, 96)
        };
        let n32 =
            u32::try_from(n).map_err(|_| std::io::Error::other("section over 2^32 points"))?;
        w.write_all(&n32.to_be_bytes())?;
        let mut left = n * sz;
        while left > 0 {
            let k = left.min(block.len());
            w.write_all(&block[..k])?;
            left -= k;
        }
    }
    w.flush()
}

/// Parses exactly 64 hex digits into 32 bytes.
pub(crate) fn from_hex32(s: &str) -> Option<[u8; 32]> {
    let s = s.as_bytes();
    if s.len() != 64 {
        return None;
    }
    let nib = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = nib(s[2 * i])? << 4 | nib(s[2 * i + 1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips() {
        let b: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(from_hex32(&to_hex(&b)), Some(b));
        assert_eq!(from_hex32("00"), None);
        assert_eq!(from_hex32(&"zz".repeat(32)), None);
    }

    /// Metadata of a fixture in `dir` (files not created) of proof type `proof`.
    fn fake_fixture(dir: &Path, proof: RegisteredSealProof) -> Fixture {
        let param_dir = dir.join("params");
        Fixture {
            dir: dir.to_path_buf(),
            c1_json: dir.join(C1_JSON),
            params_file: param_dir.join("a.params"),
            vk_file: param_dir.join("a.vk"),
            param_dir,
            registered_proof: proof,
            sector_id: SECTOR_ID,
            actor_id: ACTOR_ID,
            prover_id: prover_id_from_actor_id(ACTOR_ID),
            ticket: TICKET,
            seed: SEED,
            comm_r: [7; 32],
            comm_d: [9; 32],
        }
    }

    #[test]
    fn metadata_round_trips() {
        let dir = std::env::temp_dir().join(format!("cuzk-fixture-meta-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = fake_fixture(&dir, REGISTERED_PROOF);
        f.save().unwrap();
        assert_eq!(Fixture::load(&dir).unwrap(), f);
        assert!(!f.is_complete());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fixture_size_parses_and_names() {
        for (s, want) in [
            ("2KiB", FixtureSize::Kib2),
            ("2kib", FixtureSize::Kib2),
            ("2KIB", FixtureSize::Kib2),
            (" 8MiB ", FixtureSize::Mib8),
            ("8mib", FixtureSize::Mib8),
            ("8MIB", FixtureSize::Mib8),
        ] {
            assert_eq!(s.parse::<FixtureSize>().unwrap(), want, "{s:?}");
        }
        for bad in ["", "2", "2k", "2KB", "8MB", "32GiB", "2KiB8MiB"] {
            match bad.parse::<FixtureSize>() {
                Err(Error::InvalidConfig { name, value, .. }) => {
                    assert_eq!(name, "sector size");
                    assert_eq!(value, bad);
                }
                other => panic!("{bad:?} parsed as {other:?}"),
            }
        }
        for size in FixtureSize::ALL {
            assert_eq!(size.to_string().parse::<FixtureSize>().unwrap(), size);
            assert_eq!(
                FixtureSize::from_registered_proof(size.registered_proof()),
                Some(size)
            );
        }
        assert_eq!(FixtureSize::Kib2.registered_proof(), REGISTERED_PROOF);
        assert_eq!(
            FixtureSize::Mib8.registered_proof(),
            RegisteredSealProof::StackedDrg8MiBV1_1
        );
        assert_eq!(FixtureSize::Kib2.sector_size(), 2048);
        assert_eq!(FixtureSize::Mib8.sector_size(), 8 << 20);
        assert_eq!(FixtureSize::Kib2.dir_name(), "fixture-2kib-v1");
        assert_eq!(FixtureSize::Mib8.dir_name(), "fixture-8mib-v1");
        assert_eq!(
            FixtureSize::from_registered_proof(RegisteredSealProof::StackedDrg32GiBV1_1),
            None
        );
        // Read-only look at the environment: the 2 KiB default is unchanged.
        assert_eq!(
            default_fixture_dir(),
            default_fixture_dir_for(FixtureSize::Kib2)
        );
        if std::env::var_os("CUZK_FIXTURE_DIR")
            .filter(|d| !d.is_empty())
            .is_none()
        {
            assert!(default_fixture_dir().ends_with("cuzk/fixture-2kib-v1"));
            assert!(default_fixture_dir_for(FixtureSize::Mib8).ends_with("cuzk/fixture-8mib-v1"));
        }
    }

    #[test]
    fn load_for_rejects_a_fixture_of_the_other_size() {
        let dir = std::env::temp_dir().join(format!("cuzk-fixture-size-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        for size in FixtureSize::ALL {
            let f = fake_fixture(&dir, size.registered_proof());
            f.save().unwrap();
            assert_eq!(Fixture::load_for(&dir, size).unwrap(), f);
            assert_eq!(f.size(), Some(size));
            for other in FixtureSize::ALL.into_iter().filter(|&o| o != size) {
                match Fixture::load_for(&dir, other) {
                    Err(Error::InvalidConfig { name, value, .. }) => {
                        assert_eq!(name, "registered_proof");
                        assert_eq!(value, format!("{:?}", size.registered_proof()));
                    }
                    r => panic!("{size} fixture loaded as {other}: {r:?}"),
                }
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Seals the 8 MiB sector (no Groth16 parameters) into a temporary directory and checks the
    /// C1 output. Not run by default (seconds to minutes of CPU; touches filecoin-proofs'
    /// parent cache): `cargo test --release -p cuzk-dev --lib fixture::tests::seal_8mib -- --ignored`.
    #[test]
    #[ignore]
    fn seal_8mib_sector_only() {
        let _ = env_logger::builder().is_test(true).try_init();
        let dir = std::env::temp_dir().join(format!("cuzk-fixture-seal8-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let c1_json = dir.join(C1_JSON);
        let t = Instant::now();
        let (comm_r, comm_d) = seal_sector(&dir, &c1_json, FixtureSize::Mib8).unwrap();
        println!(
            "sealed 8 MiB in {:.2} s: comm_r {} comm_d {}",
            t.elapsed().as_secs_f64(),
            to_hex(&comm_r),
            to_hex(&comm_d)
        );
        let c1: SealCommitPhase1Output =
            serde_json::from_slice(&fs::read(&c1_json).unwrap()).unwrap();
        assert_eq!(c1.registered_proof, RegisteredSealProof::StackedDrg8MiBV1_1);
        assert_eq!(c1.comm_r, comm_r);
        assert_eq!(c1.comm_d, comm_d);
        fs::remove_dir_all(&dir).unwrap();
    }
}
