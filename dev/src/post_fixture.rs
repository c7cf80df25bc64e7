//! The deterministic 2 KiB PoSt fixture: a sealed sector (the 2 KiB PoRep fixture's, sealed
//! again here: < 1 s) kept with its cache (`tree_r_last`, `p_aux`) so that filecoin-proofs-api's
//! `post::generate_single_vanilla_proof` makes vanilla proofs for any randomness, plus the
//! Groth16 test parameters of the 2 KiB WinningPoSt and WindowPoSt circuits.
//!
//! [`ensure_post_fixture`] builds (once) and reuses a directory laid out as
//!
//! ```text
//! <dir>/post.json    metadata (this module's `PostFixture`); written last
//! <dir>/params/      v28-proof-of-spacetime-fallback-…-<sha256>.params / .vk / .meta (both circuits)
//! <dir>/seal/        the sealed replica and its cache (read by the vanilla proofs)
//! <dir>/c1.json      the sector's C1 output (written by the sealing; unused here)
//! <dir>/.lock        held (flock) while a process checks or builds the fixture
//! ```
//!
//! Everything comes from constants: the sector is the PoRep fixture's (same piece data, ticket,
//! prover id `f01000` and sector 4242, so the same `comm_r`); the parameters come from
//! `ChaCha20Rng::from_seed` of [`WINNING_PARAMS_RNG_SEED`] and [`WINDOW_PARAMS_RNG_SEED`]
//! (**test** parameters: the seed is the toxic waste). Cost on 2 cores: sealing < 1 s, the
//! two circuits' parameters about a minute (WinningPoSt 2 KiB: 66 sectors of one challenge,
//! WindowPoSt 2 KiB: 2 sectors of 10 challenges; a few MB each).

use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use filecoin_proofs::constants::SectorShape2KiB;
use filecoin_proofs_api::post;
use filecoin_proofs_api::{PrivateReplicaInfo, PublicReplicaInfo, RegisteredPoStProof, SectorId};
use fs2::FileExt;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::{Deserialize, Serialize};
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::parameter_cache::CacheEntryMetadata;
use storage_proofs_post::fallback::{FallbackPoSt, FallbackPoStCompound};

use crate::fixture::{fp, from_hex32, seal_sector, write_atomic, FixtureSize, ACTOR_ID, SECTOR_ID};
use cuzk::c1::{hex as to_hex, prover_id_from_actor_id};
use cuzk::{Error, ProofKind, Result};

/// Version of the PoSt fixture layout and constants; bumping it changes the default directory.
pub const POST_FIXTURE_VERSION: u32 = 1;
/// Name of the metadata file inside a PoSt fixture directory.
pub const POST_JSON: &str = "post.json";
/// WinningPoSt 2 KiB in the actors' numbering (what Curio sends).
pub const WINNING_2KIB: u64 = 0;
/// WindowPoSt 2 KiB (V1_1 of the actors, filecoin-proofs-api's `StackedDrgWindow2KiBV1_2`).
pub const WINDOW_2KIB: u64 = 10;
/// ChaCha20 seed of the WinningPoSt parameter generation.
pub const WINNING_PARAMS_RNG_SEED: [u8; 32] = *b"cuzk 2KiB winning post params v1";
/// ChaCha20 seed of the WindowPoSt parameter generation.
pub const WINDOW_PARAMS_RNG_SEED: [u8; 32] = *b"cuzk 2KiB window post params, v1";
/// A PoSt randomness of the tests (32 bytes, top bits clear as the chain's are).
pub const RANDOMNESS: [u8; 32] = *b"cuzk 2KiB post randomness, v1..\x00";

/// A ready PoSt fixture: where its files are and the values needed to prove and verify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostFixture {
    /// The fixture directory.
    pub dir: PathBuf,
    /// Directory of the `.params` / `.vk` files of both circuits (`<dir>/params`); pass it as
    /// `EngineConfig::parameter_dir`, or as `FIL_PROOFS_PARAMETER_CACHE` to filecoin-proofs.
    pub param_dir: PathBuf,
    /// The sector's cache directory (`tree_r_last`, `p_aux`, `t_aux`).
    pub cache_dir: PathBuf,
    /// The sealed replica.
    pub replica: PathBuf,
    /// Sector number.
    pub sector_id: u64,
    /// 32-byte prover id (of actor [`ACTOR_ID`]).
    pub prover_id: [u8; 32],
    /// Replica commitment (32 bytes).
    pub comm_r: [u8; 32],
}

/// On-disk form of [`PostFixture`] (paths relative to the fixture directory).
#[derive(Serialize, Deserialize)]
struct Meta {
    version: u32,
    sector_id: u64,
    comm_r: String,
}

/// The proof type of `kind` at 2 KiB (filecoin-proofs-api's enum).
pub fn registered_2kib(kind: ProofKind) -> RegisteredPoStProof {
    match kind {
        ProofKind::WinningPost => RegisteredPoStProof::StackedDrgWinning2KiBV1,
        _ => RegisteredPoStProof::StackedDrgWindow2KiBV1_2,
    }
}

/// The number of `kind`'s 2 KiB proof type in the actors' numbering.
pub fn number_2kib(kind: ProofKind) -> u64 {
    match kind {
        ProofKind::WinningPost => WINNING_2KIB,
        _ => WINDOW_2KIB,
    }
}

/// The default PoSt fixture directory: `$CUZK_POST_FIXTURE_DIR` if set (and not empty), else
/// `$HOME/.cache/cuzk/post-2kib-v1`, else `<temp dir>/cuzk/post-2kib-v1`.
pub fn default_post_fixture_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CUZK_POST_FIXTURE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    crate::fixture::cache_dir().join(format!("post-2kib-v{POST_FIXTURE_VERSION}"))
}

impl PostFixture {
    fn at(dir: &Path, sector_id: u64, comm_r: [u8; 32]) -> PostFixture {
        let seal = dir.join("seal");
        PostFixture {
            dir: dir.to_path_buf(),
            param_dir: dir.join("params"),
            cache_dir: seal.join("cache"),
            replica: seal.join("sealed"),
            sector_id,
            prover_id: prover_id_from_actor_id(ACTOR_ID),
            comm_r,
        }
    }

    /// Reads `<dir>/post.json`.
    ///
    /// # Errors
    /// [`Error::Io`]; [`Error::Internal`] for metadata of another version or shape.
    pub fn load(dir: &Path) -> Result<PostFixture> {
        let path = dir.join(POST_JSON);
        let m: Meta = serde_json::from_slice(&fs::read(&path)?).map_err(|e| {
            Error::Internal(format!("bad PoSt fixture metadata {}: {e}", path.display()))
        })?;
        let comm_r = from_hex32(&m.comm_r).filter(|_| m.version == POST_FIXTURE_VERSION);
        let comm_r = comm_r.ok_or_else(|| {
            Error::Internal(format!(
                "PoSt fixture metadata {} is not of version {POST_FIXTURE_VERSION}",
                path.display()
            ))
        })?;
        Ok(PostFixture::at(dir, m.sector_id, comm_r))
    }

    /// The `.params` and `.vk` files of `kind`'s 2 KiB circuit.
    ///
    /// # Errors
    /// [`Error::Internal`] from filecoin-proofs' public parameters.
    pub fn param_files(&self, kind: ProofKind) -> Result<(PathBuf, PathBuf)> {
        let pp = public_params(kind)?;
        Ok(cuzk::srs::post_param_paths::<SectorShape2KiB>(
            &self.param_dir,
            &pp,
        ))
    }

    /// Whether every file the fixture needs exists (files are only created by rename).
    pub fn is_complete(&self) -> bool {
        let params = [ProofKind::WinningPost, ProofKind::WindowPost]
            .into_iter()
            .all(|k| {
                self.param_files(k)
                    .is_ok_and(|(p, v)| p.is_file() && v.is_file())
            });
        params
            && self.dir.join(POST_JSON).is_file()
            && self.replica.is_file()
            && self.cache_dir.join("p_aux").is_file()
    }

    /// The vanilla proofs Curio would send for `kind` and `randomness` (one sector: the
    /// fixture's), made by filecoin-proofs-api: `post::generate_fallback_sector_challenges`
    /// (after `post::generate_winning_post_sector_challenge` for WinningPoSt), then
    /// `post::generate_single_vanilla_proof` (bincode of `FallbackPoStSectorProof`).
    ///
    /// # Errors
    /// [`Error::Internal`] when filecoin-proofs fails (e.g. the sector's cache is missing).
    pub fn vanilla_proofs(&self, kind: ProofKind, randomness: &[u8; 32]) -> Result<Vec<Vec<u8>>> {
        Ok(vec![self.vanilla_proof_as(
            kind,
            randomness,
            self.sector_id,
        )?])
    }

    /// The vanilla proof of the fixture's replica for `kind` and `randomness` as the sector
    /// numbered `sector_id` (as [`PostFixture::vanilla_proofs`] for the fixture's own number).
    /// PoSt knows a sector only by its number (which picks the challenged leaves) and its
    /// `comm_r` (which the leaves' Merkle paths must reach); the replica id that ties the
    /// data to a number is PoRep's. So under another number the proof is a real one of the same
    /// data, and filecoin-proofs' PoSt verifiers accept it for that number and `comm_r`: a
    /// second sector for tests that need two (two WindowPoSt partitions of one deadline).
    ///
    /// # Errors
    /// As [`PostFixture::vanilla_proofs`].
    pub fn vanilla_proof_as(
        &self,
        kind: ProofKind,
        randomness: &[u8; 32],
        sector_id: u64,
    ) -> Result<Vec<u8>> {
        let proof = registered_2kib(kind);
        let sector = SectorId::from(sector_id);
        if kind == ProofKind::WinningPost {
            let chosen =
                post::generate_winning_post_sector_challenge(proof, randomness, 1, self.prover_id)
                    .map_err(fp("generate_winning_post_sector_challenge"))?;
            if chosen != [0] {
                return Err(Error::Internal(format!(
                    "WinningPoSt over one sector challenged {chosen:?}"
                )));
            }
        }
        let challenges =
            post::generate_fallback_sector_challenges(proof, randomness, &[sector], self.prover_id)
                .map_err(fp("generate_fallback_sector_challenges"))?;
        let replica = PrivateReplicaInfo::new(
            proof,
            self.comm_r,
            self.cache_dir.clone(),
            self.replica.clone(),
        );
        post::generate_single_vanilla_proof(proof, sector, &replica, &challenges[&sector])
            .map_err(fp("generate_single_vanilla_proof"))
    }

    /// filecoin-proofs-api's verdict on `proof` of `kind` for `randomness`:
    /// `post::verify_winning_post` or `post::verify_window_post` over the fixture's sector.
    /// They read the verifying key from `FIL_PROOFS_PARAMETER_CACHE`, which must be
    /// [`PostFixture::param_dir`] from the process's start (see
    /// [`crate::fixture::run_self_with_env`]).
    ///
    /// # Errors
    /// [`Error::Internal`] when filecoin-proofs fails (e.g. bytes that are not curve points,
    /// no verifying key).
    pub fn verify_with_filecoin_proofs(
        &self,
        kind: ProofKind,
        randomness: &[u8; 32],
        proof: &[u8],
    ) -> Result<bool> {
        let registered = registered_2kib(kind);
        let replicas = std::collections::BTreeMap::from([(
            SectorId::from(self.sector_id),
            PublicReplicaInfo::new(registered, self.comm_r),
        )]);
        match kind {
            ProofKind::WinningPost => {
                post::verify_winning_post(randomness, proof, &replicas, self.prover_id)
                    .map_err(fp("verify_winning_post"))
            }
            _ => post::verify_window_post(
                randomness,
                &[(registered, proof)],
                &replicas,
                self.prover_id,
            )
            .map_err(fp("verify_window_post")),
        }
    }
}

/// filecoin-proofs' public parameters of `kind`'s 2 KiB circuit.
fn public_params(kind: ProofKind) -> Result<storage_proofs_post::fallback::PublicParams> {
    let config = registered_2kib(kind).as_v1_config();
    match kind {
        ProofKind::WinningPost => {
            filecoin_proofs::parameters::winning_post_public_params::<SectorShape2KiB>(&config)
        }
        _ => filecoin_proofs::parameters::window_post_public_params::<SectorShape2KiB>(&config),
    }
    .map_err(fp("PoSt public parameters"))
}

/// Builds the 2 KiB PoSt fixture in `dir` if needed, or reuses what is there and complete.
/// Safe to run from several processes at once (an exclusive lock on `<dir>/.lock`); every file
/// is written under a temporary name and renamed into place.
///
/// # Errors
/// [`Error::Io`] for file-system errors; [`Error::Internal`] when filecoin-proofs or
/// bellperson fail.
pub fn ensure_post_fixture(dir: &Path) -> Result<PostFixture> {
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
        "PoSt fixture {} ready in {:.1} s: comm_r {}",
        dir.display(),
        t_all.elapsed().as_secs_f64(),
        to_hex(&f.comm_r)
    );
    Ok(f)
}

fn ensure_locked(dir: &Path) -> Result<PostFixture> {
    if let Ok(f) = PostFixture::load(dir) {
        if f.is_complete() {
            return Ok(f);
        }
    }
    let t = Instant::now();
    let (comm_r, _) = seal_sector(dir, &dir.join("c1.json"), FixtureSize::Kib2)?;
    log::info!(
        "PoSt fixture: sealed the 2 KiB sector in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    let f = PostFixture::at(dir, SECTOR_ID, comm_r);
    for (kind, seed) in [
        (ProofKind::WinningPost, WINNING_PARAMS_RNG_SEED),
        (ProofKind::WindowPost, WINDOW_PARAMS_RNG_SEED),
    ] {
        let (params_file, vk_file) = f.param_files(kind)?;
        if params_file.is_file() && vk_file.is_file() {
            continue;
        }
        let t = Instant::now();
        let pp = public_params(kind)?;
        let circuit = <FallbackPoStCompound<SectorShape2KiB> as CompoundProof<
            '_,
            FallbackPoSt<'_, SectorShape2KiB>,
            _,
        >>::blank_circuit(&pp);
        let mut rng = ChaCha20Rng::from_seed(seed);
        let params = bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(
            circuit, &mut rng,
        )
        .map_err(|e| Error::Internal(format!("{kind} Groth16 parameters: {e}")))?;
        write_atomic(&params_file, |w| params.write(w))?;
        let vk = bellperson::groth16::VerifyingKey::<blstrs::Bls12>::read(BufReader::new(
            File::open(&params_file)?,
        ))
        .map_err(|e| Error::ParametersInvalid {
            path: params_file.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&vk_file, |w| vk.write(w))?;
        let meta = CacheEntryMetadata {
            sector_size: pp.sector_size,
        };
        let json = serde_json::to_vec(&meta).map_err(Error::internal)?;
        write_atomic(&params_file.with_extension("meta"), |w| w.write_all(&json))?;
        log::info!(
            "PoSt fixture: {kind} 2 KiB parameters {} in {:.1} s",
            params_file.display(),
            t.elapsed().as_secs_f64()
        );
    }
    let meta = Meta {
        version: POST_FIXTURE_VERSION,
        sector_id: f.sector_id,
        comm_r: to_hex(&f.comm_r),
    };
    let json = serde_json::to_vec_pretty(&meta).map_err(Error::internal)?;
    write_atomic(&dir.join(POST_JSON), |w| w.write_all(&json))?;
    Ok(f)
}
