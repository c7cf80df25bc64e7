//! The deterministic 2 KiB SnapDeals fixture: a sealed sector (the 2 KiB PoRep fixture's,
//! sealed again here: < 1 s) updated with new data by filecoin-proofs-api
//! (`update::empty_sector_update_encode_into`), the vanilla partition proofs of the update
//! (`update::generate_partition_proofs`: what Curio sends), and the Groth16 test parameters of
//! the 2 KiB `EmptySectorUpdateCircuit` (cuzk's generator on the CPU, from the compiled
//! circuit; `tests/compiled_circuit.rs` checks that circuit against bellperson's synthesis).
//!
//! [`ensure_snap_fixture`] builds (once) and reuses a directory laid out as
//!
//! ```text
//! <dir>/snap.json        metadata (this module's `SnapFixture`); written last
//! <dir>/vanilla-0.bin    the partition proof of partition 0 (bincode of `PartitionProof`)
//! <dir>/params/          v28-empty-sector-update-…-<sha256>.params / .vk / .meta
//! <dir>/seal/            the sector key (`sealed`) and its cache
//! <dir>/update/          the new data (`staged`), the updated replica (`replica`), its cache
//! <dir>/.lock            held (flock) while a process checks or builds the fixture
//! ```
//!
//! Everything comes from constants: the sector key is the PoRep fixture's (same piece data,
//! ticket, prover id `f01000`, sector 4242: the same comm_r, here comm_r_old); the new data come
//! from `ChaCha20Rng::from_seed` of [`NEW_DATA_RNG_SEED`] and the parameters from
//! [`SNAP_PARAMS_RNG_SEED`] (**test** parameters: the seed is the toxic waste). Cost on 2
//! cores: sealing and the update ~1 s, the circuit's parameters (1.7 M constraints) ~2 min.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use filecoin_proofs_api::seal;
use filecoin_proofs_api::update;
use filecoin_proofs_api::{PartitionProofBytes, RegisteredUpdateProof, UnpaddedBytesAmount};
use fs2::FileExt;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};

use crate::fixture::{fp, from_hex32, seal_sector, write_atomic, FixtureSize};
use crate::paramgen::{self, Device};
use cuzk::c1::hex as to_hex;
use cuzk::{Error, Result};

/// Version of the SnapDeals fixture layout and constants; bumping it changes the default
/// directory.
pub const SNAP_FIXTURE_VERSION: u32 = 1;
/// Name of the metadata file inside a SnapDeals fixture directory.
pub const SNAP_JSON: &str = "snap.json";
/// The 2 KiB update proof type in the actors' numbering (what Curio sends).
pub const UPDATE_2KIB: u64 = 0;
/// filecoin-proofs-api's 2 KiB update proof type.
pub const REGISTERED_UPDATE_2KIB: RegisteredUpdateProof = RegisteredUpdateProof::StackedDrg2KiBV1;
/// ChaCha20 seed of the new data written into the sector.
pub const NEW_DATA_RNG_SEED: [u8; 32] = *b"cuzk 2KiB snap new data, v1 ....";
/// ChaCha20 seed of the parameter generation.
pub const SNAP_PARAMS_RNG_SEED: [u8; 32] = *b"cuzk 2KiB snap deals params, v1.";

/// A ready SnapDeals fixture: where its files are and the values needed to prove and verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapFixture {
    /// The fixture directory.
    pub dir: PathBuf,
    /// Directory of the `.params` / `.vk` files (`<dir>/params`); pass it as
    /// `EngineConfig::parameter_dir`, or as `FIL_PROOFS_PARAMETER_CACHE` to filecoin-proofs.
    pub param_dir: PathBuf,
    /// The sector key's replica commitment (32 bytes).
    pub comm_r_old: [u8; 32],
    /// The updated replica's commitment (32 bytes).
    pub comm_r_new: [u8; 32],
    /// The new data's commitment (32 bytes).
    pub comm_d_new: [u8; 32],
}

/// On-disk form of [`SnapFixture`].
#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    comm_r_old: String,
    comm_r_new: String,
    comm_d_new: String,
}

/// The default SnapDeals fixture directory: `$CUZK_SNAP_FIXTURE_DIR` if set (and not empty),
/// else `$HOME/.cache/cuzk/snap-2kib-v1`, else `<temp dir>/cuzk/snap-2kib-v1`.
pub fn default_snap_fixture_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CUZK_SNAP_FIXTURE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    crate::fixture::cache_dir().join(format!("snap-2kib-v{SNAP_FIXTURE_VERSION}"))
}

impl SnapFixture {
    /// Reads `<dir>/snap.json`.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Internal`] for metadata of another version or shape.
    pub fn load(dir: &Path) -> Result<SnapFixture> {
        let path = dir.join(SNAP_JSON);
        let m: Meta = serde_json::from_slice(&fs::read(&path)?).map_err(|e| {
            Error::Internal(format!("bad snap fixture metadata {}: {e}", path.display()))
        })?;
        let bad = || {
            Error::Internal(format!(
                "snap fixture metadata {} is not of version {SNAP_FIXTURE_VERSION}",
                path.display()
            ))
        };
        if m.version != SNAP_FIXTURE_VERSION {
            return Err(bad());
        }
        let comm = |s: &str| from_hex32(s).ok_or_else(bad);
        Ok(SnapFixture {
            dir: dir.to_path_buf(),
            param_dir: dir.join("params"),
            comm_r_old: comm(&m.comm_r_old)?,
            comm_r_new: comm(&m.comm_r_new)?,
            comm_d_new: comm(&m.comm_d_new)?,
        })
    }

    /// The `.params` and `.vk` files of the 2 KiB SnapDeals circuit.
    pub fn param_files(&self) -> (PathBuf, PathBuf) {
        let pp = storage_proofs_update::PublicParams::from_sector_size(2048);
        cuzk::srs::snap_param_paths::<filecoin_proofs::constants::SectorShape2KiB>(
            &self.param_dir,
            &pp,
        )
    }

    fn vanilla_file(&self, k: usize) -> PathBuf {
        self.dir.join(format!("vanilla-{k}.bin"))
    }

    /// Whether every file the fixture needs exists (files are only created by rename).
    pub fn is_complete(&self) -> bool {
        let (p, v) = self.param_files();
        p.is_file() && v.is_file() && self.vanilla_file(0).is_file()
    }

    /// The vanilla proofs Curio would send (one per partition: one at 2 KiB), as
    /// filecoin-proofs-api's `update::generate_partition_proofs` made them.
    ///
    /// # Errors
    /// [`Error::Io`] when a file is missing.
    pub fn vanilla_proofs(&self) -> Result<Vec<Vec<u8>>> {
        Ok(vec![fs::read(self.vanilla_file(0))?])
    }

    /// filecoin-proofs-api's verdict on `proof` (`update::verify_empty_sector_update_proof`)
    /// for the fixture's commitments with `comm_r_new` in place of its own. It reads the
    /// verifying key from `FIL_PROOFS_PARAMETER_CACHE`, which must be
    /// [`SnapFixture::param_dir`] from the process's start (see
    /// [`crate::fixture::run_self_with_env`]).
    ///
    /// # Errors
    /// [`Error::Internal`] when filecoin-proofs fails (e.g. bytes that are not curve points,
    /// no verifying key).
    pub fn verify_with_filecoin_proofs(&self, proof: &[u8], comm_r_new: [u8; 32]) -> Result<bool> {
        update::verify_empty_sector_update_proof(
            REGISTERED_UPDATE_2KIB,
            proof,
            self.comm_r_old,
            comm_r_new,
            self.comm_d_new,
        )
        .map_err(fp("verify_empty_sector_update_proof"))
    }
}

/// Builds the 2 KiB SnapDeals fixture in `dir` if needed, or reuses what is there and
/// complete. Safe to run from several processes at once (an exclusive lock on `<dir>/.lock`);
/// every file is written under a temporary name and renamed into place.
///
/// # Errors
/// [`Error::Io`] for file-system errors; [`Error::Internal`] when filecoin-proofs or the
/// parameter generator fail.
pub fn ensure_snap_fixture(dir: &Path) -> Result<SnapFixture> {
    let t_all = Instant::now();
    fs::create_dir_all(dir.join("params"))?;
    let dir = fs::canonicalize(dir)?;
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))?;
    lock.lock_exclusive()?;
    let result = ensure_locked(&dir);
    let _ = fs2::FileExt::unlock(&lock);
    let f = result?;
    log::info!(
        "snap fixture {} ready in {:.1} s: comm_r_new {}",
        dir.display(),
        t_all.elapsed().as_secs_f64(),
        to_hex(&f.comm_r_new)
    );
    Ok(f)
}

fn ensure_locked(dir: &Path) -> Result<SnapFixture> {
    if let Ok(f) = SnapFixture::load(dir) {
        if f.is_complete() {
            return Ok(f);
        }
    }
    let t = Instant::now();
    let (comm_r_old, _) = seal_sector(dir, &dir.join("c1.json"), FixtureSize::Kib2)?;
    let seal_dir = dir.join("seal");
    let (sector_key, sector_key_cache) = (seal_dir.join("sealed"), seal_dir.join("cache"));
    let up = dir.join("update");
    if up.exists() {
        fs::remove_dir_all(&up)?;
    }
    let (replica, replica_cache, staged) =
        (up.join("replica"), up.join("cache"), up.join("staged"));
    fs::create_dir_all(&replica_cache)?;
    // The new data: one full-sector piece of random bytes.
    let sector_size = FixtureSize::Kib2.sector_size();
    let piece_len = sector_size - sector_size / 128;
    let mut data = vec![0u8; piece_len as usize];
    ChaCha20Rng::from_seed(NEW_DATA_RNG_SEED).fill_bytes(&mut data);
    let mut staged_file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&staged)?;
    let (piece, _) = seal::add_piece(
        FixtureSize::Kib2.registered_proof(),
        &data[..],
        &mut staged_file,
        UnpaddedBytesAmount(piece_len),
        &[],
    )
    .map_err(fp("add_piece"))?;
    staged_file.sync_all()?;
    drop(staged_file);
    // filecoin-proofs writes the new replica into a file of the sector key's size.
    fs::File::create(&replica)?.set_len(sector_size)?;
    let encoded = update::empty_sector_update_encode_into(
        REGISTERED_UPDATE_2KIB,
        &replica,
        &replica_cache,
        &sector_key,
        &sector_key_cache,
        &staged,
        &[piece],
    )
    .map_err(fp("empty_sector_update_encode_into"))?;
    let proofs: Vec<PartitionProofBytes> = update::generate_partition_proofs(
        REGISTERED_UPDATE_2KIB,
        comm_r_old,
        encoded.comm_r_new,
        encoded.comm_d_new,
        &sector_key,
        &sector_key_cache,
        &replica,
        &replica_cache,
    )
    .map_err(fp("generate_partition_proofs"))?;
    log::info!(
        "snap fixture: sealed and updated the 2 KiB sector, {} partition proof(s), in {:.2} s",
        proofs.len(),
        t.elapsed().as_secs_f64()
    );
    let f = SnapFixture {
        dir: dir.to_path_buf(),
        param_dir: dir.join("params"),
        comm_r_old,
        comm_r_new: encoded.comm_r_new,
        comm_d_new: encoded.comm_d_new,
    };
    for (k, p) in proofs.iter().enumerate() {
        write_atomic(&f.vanilla_file(k), |w| w.write_all(&p.0))?;
    }
    let (params_file, vk_file) = f.param_files();
    if !(params_file.is_file() && vk_file.is_file()) {
        let t = Instant::now();
        let files = paramgen::generate_snap(
            REGISTERED_UPDATE_2KIB,
            SNAP_PARAMS_RNG_SEED,
            &f.param_dir,
            Device::Cpu,
        )
        .map_err(|e| Error::Internal(format!("snap-deals 2 KiB parameters: {e:#}")))?;
        log::info!(
            "snap fixture: parameters {} in {:.1} s ({})",
            files.params.display(),
            t.elapsed().as_secs_f64(),
            files.report
        );
    }
    let meta = Meta {
        version: SNAP_FIXTURE_VERSION,
        comm_r_old: to_hex(&f.comm_r_old),
        comm_r_new: to_hex(&f.comm_r_new),
        comm_d_new: to_hex(&f.comm_d_new),
    };
    let json = serde_json::to_vec_pretty(&meta).map_err(Error::internal)?;
    write_atomic(&dir.join(SNAP_JSON), |w| w.write_all(&json))?;
    Ok(f)
}
