//! Checking a `SubmitProofRequest` before it is queued: proof kind, priority, proof type, sizes,
//! and a light read of the C1 output (its JSON, the wrapper's sector number and size, the proof
//! type inside), or for PoSt and SnapDeals the engine's own input checks ([`cuzk::post::check`]:
//! vanilla proofs decoded and verified against the randomness; [`cuzk::snap::check`]: one
//! vanilla proof per partition, 32-byte commitments (decoded here from the CIDs Curio sends),
//! the vanilla proofs verified against them), so that bad input is refused at once instead of
//! after its wait in the queue.

use base64::Engine as _;
use cuzk::srs::ParamSet;
use filecoin_proofs_api::RegisteredSealProof;

use crate::error::DaemonError;
use crate::proto;

/// A job's priority: the library's, which orders the job in the daemon's queue (higher starts
/// first) and its partitions inside the engine ([`cuzk::ProveOptions::priority`]).
pub use cuzk::Priority;

/// The priority of the wire value `v`; `PRIORITY_UNSPECIFIED` (0) is `NORMAL`, PoRep's default.
///
/// # Errors
/// [`DaemonError::InvalidArgument`] for a value that is no `Priority`.
pub fn priority_from_wire(v: i32) -> Result<Priority, DaemonError> {
    match proto::Priority::try_from(v) {
        Ok(proto::Priority::Unspecified) | Ok(proto::Priority::Normal) => Ok(Priority::Normal),
        Ok(proto::Priority::Low) => Ok(Priority::Low),
        Ok(proto::Priority::High) => Ok(Priority::High),
        Ok(proto::Priority::Critical) => Ok(Priority::Critical),
        Err(_) => Err(DaemonError::InvalidArgument(format!(
            "unknown priority {v} (LOW=1, NORMAL=2, HIGH=3, CRITICAL=4)"
        ))),
    }
}

/// A PoRep C2 job, checked and ready for the engine.
#[derive(Clone, Debug)]
pub struct PorepJob {
    /// The C1 output as sent (plain or wrapped JSON).
    pub c1: Vec<u8>,
    /// Sector number.
    pub sector_number: u64,
    /// Miner actor id.
    pub miner_id: u64,
    /// 32-byte prover id of `miner_id`.
    pub prover_id: [u8; 32],
    /// The proof type (request and C1 output agree on it).
    pub registered_proof: RegisteredSealProof,
    /// The request's priority, handed to the engine.
    pub priority: Priority,
}

/// A WindowPoSt partition or WinningPoSt job, checked and ready for the engine.
#[derive(Clone, Debug)]
pub struct PostJob {
    /// [`cuzk::ProofKind::WindowPost`] or [`cuzk::ProofKind::WinningPost`].
    pub kind: cuzk::ProofKind,
    /// The PoSt proof type in the actors' numbering (see [`cuzk::post::registered_post_proof`]).
    pub registered_proof: u64,
    /// One vanilla proof per sector (filecoin-proofs-api's `generate_single_vanilla_proof`).
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// 32 bytes.
    pub randomness: Vec<u8>,
    /// Miner actor id.
    pub miner_id: u64,
    /// 32-byte prover id of `miner_id`.
    pub prover_id: [u8; 32],
    /// WindowPoSt: the partition index (0 for WinningPoSt).
    pub partition_index: usize,
    /// Sector size of `registered_proof`, bytes.
    pub sector_size: u64,
    /// The request's priority, handed to the engine.
    pub priority: Priority,
}

impl PostJob {
    /// The parameter set of the job's proof type.
    ///
    /// # Errors
    /// The engine's error for a proof type of another kind (a job that passed [`check_post`]
    /// has none).
    pub fn param_set(&self) -> Result<ParamSet, cuzk::Error> {
        cuzk::post::registered_post_proof(self.kind, self.registered_proof).map(ParamSet::Post)
    }

    /// Calls `f` with the engine's view of the job ([`cuzk::post::PostRequest`]).
    pub fn with_request<T>(&self, f: impl FnOnce(&cuzk::post::PostRequest<'_>) -> T) -> T {
        let vanilla: Vec<&[u8]> = self.vanilla_proofs.iter().map(Vec::as_slice).collect();
        f(&cuzk::post::PostRequest {
            kind: self.kind,
            registered_proof: self.registered_proof,
            vanilla_proofs: &vanilla,
            randomness: &self.randomness,
            prover_id: &self.prover_id,
            partition_index: self.partition_index,
        })
    }
}

/// A SnapDeals (sector update) job, checked and ready for the engine.
#[derive(Clone, Debug)]
pub struct SnapJob {
    /// The update proof type in the actors' numbering (see
    /// [`cuzk::snap::registered_update_proof`]).
    pub registered_proof: u64,
    /// One vanilla proof per partition (filecoin-proofs-api's `generate_partition_proofs`).
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// 32 bytes each: the sector key's replica commitment, the updated replica's, the new
    /// data's (a commitment CID of the request already decoded: [`commitment_bytes`]).
    pub comm_r_old: Vec<u8>,
    /// See `comm_r_old`.
    pub comm_r_new: Vec<u8>,
    /// See `comm_r_old`.
    pub comm_d_new: Vec<u8>,
    /// Sector number (logs only: the proof does not depend on it).
    pub sector_number: u64,
    /// Miner actor id (logs only).
    pub miner_id: u64,
    /// Sector size of `registered_proof`, bytes.
    pub sector_size: u64,
    /// The request's priority, handed to the engine.
    pub priority: Priority,
}

impl SnapJob {
    /// The parameter set of the job's proof type.
    ///
    /// # Errors
    /// The engine's error for a number that is no update proof type (a job that passed
    /// [`check_snap`] has none).
    pub fn param_set(&self) -> Result<ParamSet, cuzk::Error> {
        cuzk::snap::registered_update_proof(self.registered_proof).map(ParamSet::Snap)
    }

    /// Calls `f` with the engine's view of the job ([`cuzk::snap::SnapRequest`]).
    pub fn with_request<T>(&self, f: impl FnOnce(&cuzk::snap::SnapRequest<'_>) -> T) -> T {
        let vanilla: Vec<&[u8]> = self.vanilla_proofs.iter().map(Vec::as_slice).collect();
        f(&cuzk::snap::SnapRequest {
            registered_proof: self.registered_proof,
            vanilla_proofs: &vanilla,
            comm_r_old: &self.comm_r_old,
            comm_r_new: &self.comm_r_new,
            comm_d_new: &self.comm_d_new,
            sector_size: Some(self.sector_size),
        })
    }
}

/// A job of any proof kind, as the scheduler queues it.
#[derive(Clone, Debug)]
pub enum ProofJob {
    /// PoRep C2.
    Porep(PorepJob),
    /// WindowPoSt partition or WinningPoSt.
    Post(PostJob),
    /// SnapDeals.
    Snap(SnapJob),
}

impl From<SnapJob> for ProofJob {
    fn from(j: SnapJob) -> Self {
        ProofJob::Snap(j)
    }
}

impl From<PorepJob> for ProofJob {
    fn from(j: PorepJob) -> Self {
        ProofJob::Porep(j)
    }
}

impl From<PostJob> for ProofJob {
    fn from(j: PostJob) -> Self {
        ProofJob::Post(j)
    }
}

impl ProofJob {
    /// The request's priority: the job's place in the queue, and its partitions' in the engine.
    pub fn priority(&self) -> Priority {
        match self {
            ProofJob::Porep(j) => j.priority,
            ProofJob::Post(j) => j.priority,
            ProofJob::Snap(j) => j.priority,
        }
    }

    /// The proof kind as the wire names it (GetStatus' queues and current kind).
    pub fn proof_kind(&self) -> proto::ProofKind {
        match self {
            ProofJob::Porep(_) => proto::ProofKind::PorepSealCommit,
            ProofJob::Post(j) if j.kind == cuzk::ProofKind::WinningPost => {
                proto::ProofKind::WinningPost
            }
            ProofJob::Post(_) => proto::ProofKind::WindowPostPartition,
            ProofJob::Snap(_) => proto::ProofKind::SnapDealsUpdate,
        }
    }

    /// The circuit id of the job's proof type (`porep-32g`, `wpost-32g`, `winning-32g`,
    /// `snap-32g`, ...).
    pub fn circuit_id(&self) -> String {
        match self {
            ProofJob::Porep(j) => id_of(
                cuzk::ProofKind::PorepC2,
                u64::from(j.registered_proof.sector_size()),
            ),
            ProofJob::Post(j) => id_of(j.kind, j.sector_size),
            ProofJob::Snap(j) => id_of(cuzk::ProofKind::SnapDeals, j.sector_size),
        }
    }

    /// The parameter set the job's proof uses.
    ///
    /// # Errors
    /// The engine's error for a PoSt proof type of another kind (a job that passed
    /// [`check_post`] has none).
    pub fn param_set(&self) -> Result<ParamSet, cuzk::Error> {
        match self {
            ProofJob::Porep(j) => Ok(ParamSet::Porep(j.registered_proof)),
            ProofJob::Post(j) => j.param_set(),
            ProofJob::Snap(j) => j.param_set(),
        }
    }
}

/// The PoSt kind of a request, or `None` for every other kind.
pub fn post_kind(req: &proto::SubmitProofRequest) -> Option<cuzk::ProofKind> {
    match proto::ProofKind::try_from(req.proof_kind) {
        Ok(proto::ProofKind::WindowPostPartition) => Some(cuzk::ProofKind::WindowPost),
        Ok(proto::ProofKind::WinningPost) => Some(cuzk::ProofKind::WinningPost),
        _ => None,
    }
}

/// Whether `req` is a SnapDeals request (`SNAP_DEALS_UPDATE`).
pub fn is_snap(req: &proto::SubmitProofRequest) -> bool {
    req.proof_kind == proto::ProofKind::SnapDealsUpdate as i32
}

/// Checks a SnapDeals request's own fields (priority, update proof type, sector size: 0 takes
/// the proof type's, as Curio's proof-share jobs send it; no `vanilla_proof`) and returns its
/// job (with its priority) and [`ContentKey`]. The vanilla proofs and commitments are checked
/// after it, by [`crate::prover::Prover::check_snap`] (the engine's [`cuzk::snap::check`]:
/// one vanilla proof per partition, 32-byte commitments, each vanilla proof decoded and
/// verified), both on a blocking thread. Commitments sent as CIDs (Curio's form) are decoded
/// here ([`commitment_bytes`]).
///
/// # Errors
/// [`DaemonError::InvalidArgument`] for the request's own fields, and the engine's error for a
/// number that is no update proof type (101, INVALID_ARGUMENT).
pub fn check_snap(
    mut req: proto::SubmitProofRequest,
) -> Result<(SnapJob, ContentKey), DaemonError> {
    let priority = priority_from_wire(req.priority)?;
    let proof = cuzk::snap::registered_update_proof(req.registered_proof)?;
    let size = u64::from(proof.sector_size());
    if req.sector_size != 0 && req.sector_size != size {
        return Err(DaemonError::InvalidArgument(format!(
            "sector_size {} disagrees with registered_proof {} ({proof:?}, {size} bytes)",
            req.sector_size, req.registered_proof
        )));
    }
    if !req.vanilla_proof.is_empty() {
        return Err(DaemonError::InvalidArgument(
            "vanilla_proof is set: SnapDeals takes its partition proofs in vanilla_proofs".into(),
        ));
    }
    // Before the content key: a commitment sent as a CID is the same content as its bytes.
    req.comm_r_old = commitment_bytes("comm_r_old", req.comm_r_old, SEALED_COMMITMENT)?;
    req.comm_r_new = commitment_bytes("comm_r_new", req.comm_r_new, SEALED_COMMITMENT)?;
    req.comm_d_new = commitment_bytes("comm_d_new", req.comm_d_new, UNSEALED_COMMITMENT)?;
    let key = ContentKey::of(&req, size);
    let job = SnapJob {
        registered_proof: req.registered_proof,
        vanilla_proofs: req.vanilla_proofs,
        comm_r_old: req.comm_r_old,
        comm_r_new: req.comm_r_new,
        comm_d_new: req.comm_d_new,
        sector_number: req.sector_number,
        miner_id: req.miner_id,
        sector_size: size,
        priority,
    };
    Ok((job, key))
}

/// A Filecoin commitment CID's codec and multihash function (the multicodec table, as
/// go-fil-commcid writes them) and what the commitment is, for messages.
type CommitmentCid = (u64, u64, &'static str);

/// A replica commitment (comm_r): codec `fil-commitment-sealed` (0xf102), multihash
/// `poseidon-bls12_381-a2-fc1` (0xb401).
const SEALED_COMMITMENT: CommitmentCid = (0xf102, 0xb401, "a sealed (replica) commitment");
/// A data commitment (comm_d): codec `fil-commitment-unsealed` (0xf101), multihash
/// `sha2-256-trunc254-padded` (0x1012).
const UNSEALED_COMMITMENT: CommitmentCid = (0xf101, 0x1012, "an unsealed (data) commitment");

/// A SnapDeals commitment field as the engine takes it: 32 bytes as they are (the engine
/// checks that they are a field element), else the 32-byte digest of a commitment CID in its
/// binary form — what Curio puts in the field (`cid.Cid.Bytes()` of the sector's sealed and
/// unsealed CIDs: CIDv1, the commitment's codec and multihash, 40 and 39 bytes).
///
/// # Errors
/// [`DaemonError::InvalidArgument`] naming `name` for other bytes: not a CID, trailing bytes,
/// a CID of another version, codec or multihash (e.g. the unsealed CID in a comm_r field), a
/// digest not of 32 bytes.
pub fn commitment_bytes(
    name: &str,
    bytes: Vec<u8>,
    (codec, hash, what): CommitmentCid,
) -> Result<Vec<u8>, DaemonError> {
    if bytes.len() == 32 {
        return Ok(bytes);
    }
    let bad = |why: String| {
        DaemonError::InvalidArgument(format!(
            "{name} of {} bytes: {why}; expected 32 bytes or the binary CID of {what} \
             (codec 0x{codec:x}, multihash 0x{hash:x})",
            bytes.len()
        ))
    };
    let c = cid::Cid::read_bytes(bytes.as_slice()).map_err(|e| bad(format!("not a CID ({e})")))?;
    if c.encoded_len() != bytes.len() {
        return Err(bad(format!(
            "{} bytes after a CID of {}",
            bytes.len() - c.encoded_len(),
            c.encoded_len()
        )));
    }
    let mh = c.hash();
    if c.version() != cid::Version::V1 || c.codec() != codec || mh.code() != hash {
        return Err(bad(format!(
            "a CID v{} of codec 0x{:x} and multihash 0x{:x}",
            c.version() as u64,
            c.codec(),
            mh.code()
        )));
    }
    if mh.digest().len() != 32 {
        return Err(bad(format!("a CID of a {}-byte digest", mh.digest().len())));
    }
    Ok(mh.digest().to_vec())
}

/// Checks a PoSt request's own fields (priority, proof type of `kind`, sector size, a
/// WindowPoSt partition index below the deadline's limit ([`cuzk::post::check_partition_index`]),
/// no `vanilla_proof`) and returns its job (with its priority) and [`ContentKey`]. The vanilla proofs are
/// checked after it, by [`crate::prover::Prover::check_post`] (the engine's
/// [`cuzk::post::check`]: decoded, one sector proof each, and verified against the randomness; about a
/// second for a 32 GiB WindowPoSt partition's 2349 vanilla proofs, so both run on a blocking
/// thread).
///
/// # Errors
/// [`DaemonError::InvalidArgument`] for the request's own fields, and the engine's error for a
/// proof type that is not of `kind` or a partition index out of range (1xx, as
/// [`DaemonError::Engine`]: a proof type cuzk does not prove (103) is UNIMPLEMENTED, the others
/// INVALID_ARGUMENT).
pub fn check_post(
    req: proto::SubmitProofRequest,
    kind: cuzk::ProofKind,
) -> Result<(PostJob, ContentKey), DaemonError> {
    let priority = priority_from_wire(req.priority)?;
    let size = cuzk::post::sector_size(kind, req.registered_proof)?;
    let partition_index = usize::try_from(req.partition_index).unwrap_or(usize::MAX);
    cuzk::post::check_partition_index(kind, partition_index)?;
    if req.sector_size != 0 && req.sector_size != size {
        return Err(DaemonError::InvalidArgument(format!(
            "sector_size {} disagrees with registered_proof {} ({size} bytes)",
            req.sector_size, req.registered_proof
        )));
    }
    if !req.vanilla_proof.is_empty() {
        return Err(DaemonError::InvalidArgument(
            "vanilla_proof is set: PoSt takes its vanilla proofs in vanilla_proofs".into(),
        ));
    }
    let key = ContentKey::of(&req, size);
    let job = PostJob {
        kind,
        registered_proof: req.registered_proof,
        vanilla_proofs: req.vanilla_proofs,
        randomness: req.randomness,
        miner_id: req.miner_id,
        prover_id: cuzk::c1::prover_id_from_actor_id(req.miner_id),
        partition_index,
        sector_size: size,
        priority,
    };
    Ok((job, key))
}

/// What a request's proof depends on, as one value: two requests with equal keys are due the same
/// proof, so a resubmitted request (same `request_id`, equal key) may attach to the earlier job;
/// with another key it must not (see [`crate::scheduler::Scheduler::submit`]).
///
/// It is the SHA-256 of a canonical encoding of every field of a `SubmitProofRequest` but
/// `request_id` and `priority`: proof kind, registered proof, sector size (the proof type's when
/// the request leaves it 0), sector number, miner id, partition index, randomness, the three
/// commitments, and the bytes of `vanilla_proof` and of each `vanilla_proofs` entry. Integers are
/// fixed-width little-endian and every byte string is preceded by its length, so distinct field
/// values never encode alike. The C1 output is hashed as sent: the same C1 output in another JSON
/// layout is another key (a new job that proves the same thing, never a wrong proof).
///
/// PoSt requests are keyed alike ([`check_post`]), with their PoSt proof type's sector size: every
/// partition of a WindowPoSt deadline comes with one request id
/// (`wdpost-<miner>-0-<randomness[:8]>`), and its partition index and vanilla proofs make each
/// partition's key its own.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContentKey([u8; 32]);

impl ContentKey {
    /// The key of `req`, whose proof type ([`check_fields`] or [`check_post`] read it) has
    /// sectors of `sector_size` bytes. Hashes the whole request (~50 MB for a 32 GiB C1
    /// output): call it off the async runtime.
    pub fn of(req: &proto::SubmitProofRequest, sector_size: u64) -> ContentKey {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        let bytes = |h: &mut sha2::Sha256, b: &[u8]| {
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        };
        // Names the encoding, so that a changed encoding never equals this one.
        bytes(&mut h, b"cuzk.v1.SubmitProofRequest content key 1");
        h.update(req.proof_kind.to_le_bytes());
        h.update(req.registered_proof.to_le_bytes());
        h.update(sector_size.to_le_bytes());
        h.update(req.sector_number.to_le_bytes());
        h.update(req.miner_id.to_le_bytes());
        h.update(req.partition_index.to_le_bytes());
        for b in [
            &req.randomness,
            &req.comm_r_old,
            &req.comm_r_new,
            &req.comm_d_new,
            &req.vanilla_proof,
        ] {
            bytes(&mut h, b);
        }
        h.update((req.vanilla_proofs.len() as u64).to_le_bytes());
        for b in &req.vanilla_proofs {
            bytes(&mut h, b);
        }
        ContentKey(h.finalize().into())
    }
}

impl std::fmt::Debug for ContentKey {
    /// The first 8 bytes in hex (enough to tell keys apart in a log line).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The `RegisteredSealProof` of a numeric value as filecoin's actors (and Curio's
/// `abi.RegisteredSealProof`) number them: 0..4 StackedDrg V1 (2 KiB, 8 MiB, 512 MiB, 32 GiB,
/// 64 GiB), 5..9 V1_1, 10..14 V1_1 synthetic PoRep, 15..19 V1_2 non-interactive PoRep.
pub fn registered_seal_proof(v: u64) -> Option<RegisteredSealProof> {
    use RegisteredSealProof::*;
    const TABLE: [RegisteredSealProof; 20] = [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
        StackedDrg2KiBV1_1,
        StackedDrg8MiBV1_1,
        StackedDrg512MiBV1_1,
        StackedDrg32GiBV1_1,
        StackedDrg64GiBV1_1,
        StackedDrg2KiBV1_1_Feat_SyntheticPoRep,
        StackedDrg8MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg512MiBV1_1_Feat_SyntheticPoRep,
        StackedDrg32GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg64GiBV1_1_Feat_SyntheticPoRep,
        StackedDrg2KiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg8MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg512MiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg32GiBV1_2_Feat_NonInteractivePoRep,
        StackedDrg64GiBV1_2_Feat_NonInteractivePoRep,
    ];
    usize::try_from(v).ok().and_then(|i| TABLE.get(i).copied())
}

/// Checks what can be checked of a request without reading its C1 output: kind, priority,
/// proof type and sizes. Returns the priority and proof type.
///
/// # Errors
/// [`DaemonError::InvalidArgument`] naming the field; [`DaemonError::Unimplemented`] for proof
/// kinds and proof types cuzk does not prove.
pub fn check_fields(
    req: &proto::SubmitProofRequest,
) -> Result<(Priority, RegisteredSealProof), DaemonError> {
    match proto::ProofKind::try_from(req.proof_kind) {
        Ok(proto::ProofKind::PorepSealCommit) => {}
        Ok(proto::ProofKind::Unspecified) => {
            return Err(DaemonError::InvalidArgument(
                "proof_kind is unspecified (POREP_SEAL_COMMIT=1 is what cuzk proves)".into(),
            ))
        }
        Ok(k) => {
            return Err(DaemonError::Unimplemented(format!(
                "proof kind {}: cuzk proves POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, \
                 WINDOW_POST_PARTITION and WINNING_POST",
                k.as_str_name()
            )))
        }
        Err(_) => {
            return Err(DaemonError::InvalidArgument(format!(
                "unknown proof_kind {}",
                req.proof_kind
            )))
        }
    }
    let priority = priority_from_wire(req.priority)?;
    let proof = registered_seal_proof(req.registered_proof).ok_or_else(|| {
        DaemonError::InvalidArgument(format!(
            "unknown registered_proof {} (RegisteredSealProof values are 0..19)",
            req.registered_proof
        ))
    })?;
    cuzk::c1::check_supported(proof).map_err(|e| DaemonError::Unimplemented(e.to_string()))?;
    let size = u64::from(proof.sector_size());
    if req.sector_size != 0 && req.sector_size != size {
        return Err(DaemonError::InvalidArgument(format!(
            "sector_size {} disagrees with registered_proof {} ({proof:?}, {size} bytes)",
            req.sector_size, req.registered_proof
        )));
    }
    if req.vanilla_proof.is_empty() {
        return Err(DaemonError::InvalidArgument(
            "vanilla_proof (the C1 output) is empty".into(),
        ));
    }
    if !req.vanilla_proofs.is_empty() {
        return Err(DaemonError::InvalidArgument(format!(
            "vanilla_proofs has {} entries: PoRep takes its C1 output in vanilla_proof",
            req.vanilla_proofs.len()
        )));
    }
    Ok((priority, proof))
}

/// The fields of a C1 output (or of its wrapper) that [`check_c1`] reads; the rest is skipped
/// without being kept.
#[derive(serde::Deserialize)]
struct Probe {
    #[serde(rename = "SectorNum")]
    sector_num: Option<u64>,
    #[serde(rename = "SectorSize")]
    sector_size: Option<u64>,
    #[serde(rename = "Phase1Out")]
    phase1_out: Option<String>,
    registered_proof: Option<RegisteredSealProof>,
}

fn bad(what: &str, e: impl std::fmt::Display) -> DaemonError {
    DaemonError::InvalidArgument(format!("{what}: {e}"))
}

/// Reads the C1 output of `req` far enough to refuse it early: valid JSON (plain, or the wrapper
/// with base64 `Phase1Out` holding JSON), the proof type inside equal to `proof`, the wrapper's
/// `SectorNum` equal to `sector_number` and its `SectorSize` to the proof type's. The engine
/// checks everything again (and the rest: commitments, replica id, vanilla proofs). Runs on a
/// blocking thread: a 32 GiB C1 output is ~50 MB of JSON.
///
/// # Errors
/// [`DaemonError::InvalidArgument`] naming the problem.
pub fn check_c1(
    c1: &[u8],
    sector_number: u64,
    proof: RegisteredSealProof,
) -> Result<(), DaemonError> {
    let outer: Probe =
        serde_json::from_slice(c1).map_err(|e| bad("vanilla_proof is not C1 JSON", e))?;
    let inner_proof = match &outer.phase1_out {
        Some(b64) => {
            if let Some(n) = outer.sector_num {
                if n != sector_number {
                    return Err(DaemonError::InvalidArgument(format!(
                        "the wrapper's SectorNum {n} differs from sector_number {sector_number}"
                    )));
                }
            }
            let size = u64::from(proof.sector_size());
            if let Some(s) = outer.sector_size {
                if s != size {
                    return Err(DaemonError::InvalidArgument(format!(
                        "the wrapper's SectorSize {s} differs from {proof:?}'s {size} bytes"
                    )));
                }
            }
            let json = base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| bad("the wrapper's Phase1Out is not base64", e))?;
            let inner: Probe = serde_json::from_slice(&json)
                .map_err(|e| bad("the wrapper's Phase1Out is not C1 JSON", e))?;
            inner.registered_proof
        }
        None => outer.registered_proof,
    };
    match inner_proof {
        None => Err(DaemonError::InvalidArgument(
            "the C1 output has no registered_proof".into(),
        )),
        Some(p) if p != proof => Err(DaemonError::InvalidArgument(format!(
            "the C1 output is {p:?}, the request's registered_proof is {proof:?}"
        ))),
        Some(_) => Ok(()),
    }
}

/// The parameter set a circuit id of `PreloadSRS` / `EvictSRS` / `cuzk serve --preload` names:
/// `<kind>-<size>`, the kind `porep` (PoRep C2, V1_1), `wpost` (WindowPoSt, V1_1: proof types
/// 10–14), `winning` (WinningPoSt: 0–4) or `snap` (SnapDeals: update proof types 0–4), the size as Curio writes it (`32g`, `64g`) or, for the
/// small test sizes, `2k`, `8m`, `512m` (also `2kib`, `32gib`, ...), case-insensitive: the ids of
/// [`circuit_id`] and of GetStatus' `loaded_srs`.
///
/// # Errors
/// [`DaemonError::InvalidArgument`] for anything else.
pub fn circuit(id: &str) -> Result<ParamSet, DaemonError> {
    let unknown = || {
        DaemonError::InvalidArgument(format!(
            "unknown circuit id {id:?} (expected porep-, wpost-, winning- or snap- and a sector \
             size, e.g. porep-32g, wpost-32g, winning-32g, snap-32g)"
        ))
    };
    let lower = id.trim().to_ascii_lowercase();
    let (kind, size) = lower.split_once('-').ok_or_else(unknown)?;
    let sizes = ["2k", "8m", "512m", "32g", "64g"];
    let Some(i) = sizes.iter().position(|s| *s == size.trim_end_matches("ib")) else {
        return Err(DaemonError::InvalidArgument(format!(
            "unknown sector size in circuit id {id:?} (2k, 8m, 512m, 32g or 64g)"
        )));
    };
    let porep = [
        RegisteredSealProof::StackedDrg2KiBV1_1,
        RegisteredSealProof::StackedDrg8MiBV1_1,
        RegisteredSealProof::StackedDrg512MiBV1_1,
        RegisteredSealProof::StackedDrg32GiBV1_1,
        RegisteredSealProof::StackedDrg64GiBV1_1,
    ];
    // The actors' PoSt numbers: WinningPoSt 0–4, WindowPoSt V1_1 10–14, by size.
    let post = |kind, number: usize| {
        cuzk::post::registered_post_proof(kind, number as u64)
            .map(ParamSet::Post)
            .map_err(DaemonError::Engine)
    };
    match kind {
        "porep" => Ok(ParamSet::Porep(porep[i])),
        "wpost" => post(cuzk::ProofKind::WindowPost, 10 + i),
        "winning" => post(cuzk::ProofKind::WinningPost, i),
        "snap" => cuzk::snap::registered_update_proof(i as u64)
            .map(ParamSet::Snap)
            .map_err(DaemonError::Engine),
        _ => Err(unknown()),
    }
}

/// The circuit id of a parameter set (`porep-32g`, `wpost-2k`, `winning-64g`, ...), as
/// [`circuit`] reads it.
pub fn circuit_id(set: ParamSet) -> String {
    id_of(set.kind(), set.sector_size())
}

/// The circuit id of `kind` at `sector_size` bytes.
fn id_of(kind: cuzk::ProofKind, sector_size: u64) -> String {
    let prefix = match kind {
        cuzk::ProofKind::WinningPost => "winning",
        cuzk::ProofKind::WindowPost => "wpost",
        cuzk::ProofKind::SnapDeals => "snap",
        _ => "porep",
    };
    format!("{prefix}-{}", size_name(sector_size))
}

/// A sector size as circuit ids write it: `2k`, `8m`, `512m`, `32g`, `64g`.
fn size_name(size: u64) -> String {
    match size {
        s if s >= 1 << 30 => format!("{}g", s >> 30),
        s if s >= 1 << 20 => format!("{}m", s >> 20),
        s => format!("{}k", s >> 10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Edit = fn(&mut proto::SubmitProofRequest);

    /// Edits that leave what is proved unchanged (the caller's key, the queue order, an
    /// implied size): the content key must not change.
    const SAME_CONTENT: [Edit; 3] = [
        |r| r.request_id = "other".into(),
        |r| r.priority = proto::Priority::Critical as i32,
        |r| r.sector_size = 0,
    ];

    fn wrapper(sector: u64, size: u64, proof: &str) -> Vec<u8> {
        let inner =
            format!(r#"{{"registered_proof":"{proof}","vanilla_proofs":{{"x":[1,2,[3]]}}}}"#);
        let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
        format!(r#"{{"SectorNum":{sector},"Phase1Out":"{b64}","SectorSize":{size}}}"#).into_bytes()
    }

    #[test]
    fn numeric_proof_types_follow_the_actors_numbering() {
        assert_eq!(
            registered_seal_proof(0),
            Some(RegisteredSealProof::StackedDrg2KiBV1)
        );
        assert_eq!(
            registered_seal_proof(5),
            Some(RegisteredSealProof::StackedDrg2KiBV1_1)
        );
        assert_eq!(
            registered_seal_proof(8),
            Some(RegisteredSealProof::StackedDrg32GiBV1_1)
        );
        assert_eq!(
            registered_seal_proof(13),
            Some(RegisteredSealProof::StackedDrg32GiBV1_1_Feat_SyntheticPoRep)
        );
        assert_eq!(registered_seal_proof(20), None);
        for v in 0..20 {
            let p = registered_seal_proof(v).unwrap();
            let want = [2048u64, 8 << 20, 512 << 20, 32 << 30, 64 << 30][v as usize % 5];
            assert_eq!(u64::from(p.sector_size()), want, "{p:?}");
        }
    }

    #[test]
    fn c1_checks_catch_wrong_sector_size_number_and_type() {
        let p = RegisteredSealProof::StackedDrg2KiBV1_1;
        assert!(check_c1(&wrapper(7, 2048, "StackedDrg2KiBV1_1"), 7, p).is_ok());
        let plain = br#"{"registered_proof":"StackedDrg2KiBV1_1","comm_r":[1]}"#;
        assert!(check_c1(plain, 7, p).is_ok());
        for (c1, needle) in [
            (wrapper(8, 2048, "StackedDrg2KiBV1_1"), "SectorNum 8"),
            (wrapper(7, 4096, "StackedDrg2KiBV1_1"), "SectorSize 4096"),
            (wrapper(7, 2048, "StackedDrg2KiBV1"), "is StackedDrg2KiBV1,"),
            (
                b"{\"SectorNum\":7,\"Phase1Out\":\"@@\"}".to_vec(),
                "not base64",
            ),
            (
                b"{\"registered_proof\":\"StackedDrg2KiBV1_1\"".to_vec(),
                "not C1 JSON",
            ),
            (b"not json".to_vec(), "not C1 JSON"),
            (b"{}".to_vec(), "no registered_proof"),
        ] {
            let e = check_c1(&c1, 7, p).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            assert!(e.to_string().contains(needle), "{e} / {needle}");
        }
    }

    #[test]
    fn content_keys_differ_by_every_field_the_proof_depends_on() {
        let p = u64::from(RegisteredSealProof::StackedDrg2KiBV1_1.sector_size());
        let base = proto::SubmitProofRequest {
            request_id: "porep-1000-7".into(),
            proof_kind: proto::ProofKind::PorepSealCommit as i32,
            sector_size: 2048,
            registered_proof: 5,
            priority: proto::Priority::Normal as i32,
            vanilla_proof: wrapper(7, 2048, "StackedDrg2KiBV1_1"),
            sector_number: 7,
            miner_id: 1000,
            ..Default::default()
        };
        let key = ContentKey::of(&base, p);
        for edit in SAME_CONTENT {
            let mut r = base.clone();
            edit(&mut r);
            assert_eq!(ContentKey::of(&r, p), key, "{r:?}");
        }
        let other: [(&str, Edit); 13] = [
            ("kind", |r| r.proof_kind = 2),
            ("proof type", |r| r.registered_proof = 0),
            ("sector", |r| r.sector_number = 8),
            ("miner", |r| r.miner_id = 1001),
            ("partition", |r| r.partition_index = 1),
            ("randomness", |r| r.randomness = vec![1; 32]),
            ("comm_r_old", |r| r.comm_r_old = vec![1; 32]),
            ("comm_r_new", |r| r.comm_r_new = vec![1; 32]),
            ("comm_d_new", |r| r.comm_d_new = vec![1; 32]),
            ("c1", |r| r.vanilla_proof.push(b' ')),
            ("vanilla_proofs", |r| r.vanilla_proofs = vec![vec![1]]),
            // The same bytes split otherwise between two byte fields.
            ("split a", |r| r.comm_r_new = vec![1, 2]),
            ("split b", |r| {
                r.comm_r_new = vec![1];
                r.comm_d_new = vec![2];
            }),
        ];
        let mut seen = vec![key];
        for (name, edit) in other {
            let mut r = base.clone();
            edit(&mut r);
            let k = ContentKey::of(&r, p);
            assert!(!seen.contains(&k), "{name}: {k:?} equals an earlier key");
            seen.push(k);
        }
        // Another proof type of another size: the size is part of the key too.
        assert_ne!(
            ContentKey::of(
                &base,
                u64::from(RegisteredSealProof::StackedDrg8MiBV1_1.sector_size())
            ),
            key
        );
    }

    #[test]
    fn post_partitions_of_one_request_id_have_keys_of_their_own() {
        let base = proto::SubmitProofRequest {
            request_id: "wdpost-1000-0-0909090909090909".into(),
            proof_kind: proto::ProofKind::WindowPostPartition as i32,
            sector_size: 2048,
            registered_proof: 10, // WindowPoSt 2 KiB V1_1
            priority: proto::Priority::High as i32,
            vanilla_proofs: vec![vec![1; 40], vec![2; 40]],
            randomness: vec![9; 32],
            miner_id: 1000,
            ..Default::default()
        };
        let key = |r: &proto::SubmitProofRequest| {
            let (job, key) = check_post(r.clone(), cuzk::ProofKind::WindowPost).unwrap();
            assert_eq!(job.priority, priority_from_wire(r.priority).unwrap());
            let size = if r.registered_proof == 10 {
                2048
            } else {
                8 << 20
            };
            assert_eq!(job.sector_size, size);
            assert_eq!(job.partition_index, r.partition_index as usize);
            key
        };
        let k = key(&base);
        for edit in SAME_CONTENT {
            let mut r = base.clone();
            edit(&mut r);
            assert_eq!(key(&r), k, "{r:?}");
        }
        let other: [(&str, Edit); 7] = [
            ("partition", |r| r.partition_index = 1),
            ("miner", |r| r.miner_id = 1001),
            ("randomness", |r| r.randomness[31] = 8),
            ("one vanilla proof", |r| r.vanilla_proofs[1][39] = 3),
            ("fewer vanilla proofs", |r| r.vanilla_proofs.truncate(1)),
            // The same bytes split otherwise between the vanilla proofs.
            ("split", |r| {
                r.vanilla_proofs = vec![vec![1; 41], vec![2; 39]]
            }),
            ("proof type", |r| r.registered_proof = 11), // WindowPoSt 8 MiB V1_1
        ];
        let mut seen = vec![k];
        for (name, edit) in other {
            let mut r = base.clone();
            edit(&mut r);
            if name == "proof type" {
                r.sector_size = 0;
            }
            let k = key(&r);
            assert!(!seen.contains(&k), "{name}: {k:?} equals an earlier key");
            seen.push(k);
        }
        // WinningPoSt 2 KiB (0) with the same fields: another kind, another key.
        let mut r = base.clone();
        r.proof_kind = proto::ProofKind::WinningPost as i32;
        r.registered_proof = 0;
        let (_, w) = check_post(r, cuzk::ProofKind::WinningPost).unwrap();
        assert!(!seen.contains(&w));
    }

    #[test]
    fn snap_requests_of_another_size_or_shape_are_refused() {
        let base = proto::SubmitProofRequest {
            proof_kind: proto::ProofKind::SnapDealsUpdate as i32,
            registered_proof: 3,
            vanilla_proofs: vec![vec![1]; 16],
            ..Default::default()
        };
        let edits: [(&str, Edit); 5] = [
            ("8 MiB sector size", |r| r.sector_size = 8 << 20),
            ("no update proof type", |r| r.registered_proof = 5),
            ("C1 in vanilla_proof", |r| r.vanilla_proof = vec![1]),
            ("unknown priority", |r| r.priority = 9),
            ("a seal proof number", |r| r.registered_proof = 8),
        ];
        for (what, edit) in edits {
            let mut r = base.clone();
            edit(&mut r);
            let e = check_snap(r).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{what}: {e}");
        }
    }

    #[test]
    fn circuit_ids_round_trip() {
        use filecoin_proofs_api::RegisteredPoStProof as Post;
        use filecoin_proofs_api::RegisteredUpdateProof;
        for v in 5..10 {
            let p = ParamSet::Porep(registered_seal_proof(v).unwrap());
            assert_eq!(circuit(&circuit_id(p)).unwrap(), p);
        }
        for (id, set) in [
            (
                "porep-32g",
                ParamSet::Porep(RegisteredSealProof::StackedDrg32GiBV1_1),
            ),
            ("wpost-32g", ParamSet::Post(Post::StackedDrgWindow32GiBV1_2)),
            ("wpost-2k", ParamSet::Post(Post::StackedDrgWindow2KiBV1_2)),
            (
                "winning-32g",
                ParamSet::Post(Post::StackedDrgWinning32GiBV1),
            ),
            (
                "winning-64g",
                ParamSet::Post(Post::StackedDrgWinning64GiBV1),
            ),
            (
                "winning-512m",
                ParamSet::Post(Post::StackedDrgWinning512MiBV1),
            ),
            (
                "snap-32g",
                ParamSet::Snap(RegisteredUpdateProof::StackedDrg32GiBV1),
            ),
            (
                "snap-2k",
                ParamSet::Snap(RegisteredUpdateProof::StackedDrg2KiBV1),
            ),
        ] {
            assert_eq!(circuit(id).unwrap(), set, "{id}");
            assert_eq!(circuit_id(set), id);
        }
        assert_eq!(
            circuit("PoRep-2KiB").unwrap(),
            ParamSet::Porep(RegisteredSealProof::StackedDrg2KiBV1_1)
        );
        assert_eq!(
            circuit(" WPoSt-8MiB ").unwrap(),
            ParamSet::Post(Post::StackedDrgWindow8MiBV1_2)
        );
        // A PoSt job's id and set are those of its proof type.
        let (job, _) = check_post(
            proto::SubmitProofRequest {
                proof_kind: proto::ProofKind::WinningPost as i32,
                registered_proof: 3,
                vanilla_proofs: vec![vec![1]],
                ..Default::default()
            },
            cuzk::ProofKind::WinningPost,
        )
        .unwrap();
        let job = ProofJob::Post(job);
        assert_eq!(job.circuit_id(), "winning-32g");
        assert_eq!(
            circuit(&job.circuit_id()).unwrap(),
            job.param_set().unwrap()
        );
        // A SnapDeals job's too, whatever sector size (0 or the right one) it was sent with.
        for sector_size in [0, 32 << 30] {
            let (job, _) = check_snap(proto::SubmitProofRequest {
                proof_kind: proto::ProofKind::SnapDealsUpdate as i32,
                registered_proof: 3,
                sector_size,
                vanilla_proofs: vec![vec![1]; 16],
                comm_r_old: vec![0; 32],
                comm_r_new: vec![0; 32],
                comm_d_new: vec![0; 32],
                ..Default::default()
            })
            .unwrap();
            let job = ProofJob::Snap(job);
            assert_eq!(job.circuit_id(), "snap-32g");
            assert_eq!(job.proof_kind(), proto::ProofKind::SnapDealsUpdate);
            assert_eq!(
                circuit(&job.circuit_id()).unwrap(),
                job.param_set().unwrap()
            );
        }
        for (id, code) in [
            ("snap-3g", tonic::Code::InvalidArgument),
            ("porep-3g", tonic::Code::InvalidArgument),
            ("wpost-", tonic::Code::InvalidArgument),
            ("winning", tonic::Code::InvalidArgument),
            ("window-32g", tonic::Code::InvalidArgument),
            ("bogus", tonic::Code::InvalidArgument),
            ("", tonic::Code::InvalidArgument),
        ] {
            assert_eq!(circuit(id).unwrap_err().code(), code, "{id:?}");
        }
    }

    /// Curio's commitment CIDs (`cid.Cid.Bytes()`), spelled out: CIDv1, the codec and the
    /// multihash code as unsigned varints, the digest length, the digest.
    fn cid_of(codec: &[u8], hash: &[u8], digest: &[u8]) -> Vec<u8> {
        let mut b = vec![0x01];
        b.extend_from_slice(codec);
        b.extend_from_slice(hash);
        b.push(digest.len() as u8);
        b.extend_from_slice(digest);
        b
    }
    const SEALED: ([u8; 3], [u8; 3]) = ([0x82, 0xe2, 0x03], [0x81, 0xe8, 0x02]); // 0xf102, 0xb401
    const UNSEALED: ([u8; 3], [u8; 2]) = ([0x81, 0xe2, 0x03], [0x92, 0x20]); // 0xf101, 0x1012

    #[test]
    fn snap_commitments_are_taken_raw_or_as_curios_cids() {
        let d: Vec<u8> = (1..=32).collect();
        let sealed = cid_of(&SEALED.0, &SEALED.1, &d);
        let unsealed = cid_of(&UNSEALED.0, &UNSEALED.1, &d);
        assert_eq!((sealed.len(), unsealed.len()), (40, 39));
        let take = |b: &[u8], c| commitment_bytes("comm_x", b.to_vec(), c);
        assert_eq!(take(&d, SEALED_COMMITMENT).unwrap(), d);
        assert_eq!(take(&sealed, SEALED_COMMITMENT).unwrap(), d);
        assert_eq!(take(&unsealed, UNSEALED_COMMITMENT).unwrap(), d);
        let mut trailing = sealed.clone();
        trailing.push(0);
        let short = cid_of(&SEALED.0, &SEALED.1, &d[..31]);
        for (what, b, c) in [
            ("the unsealed CID as comm_r", &unsealed, SEALED_COMMITMENT),
            ("the sealed CID as comm_d", &sealed, UNSEALED_COMMITMENT),
            ("trailing bytes", &trailing, SEALED_COMMITMENT),
            ("a 31-byte digest", &short, SEALED_COMMITMENT),
            ("31 bytes", &d[..31].to_vec(), SEALED_COMMITMENT),
            ("nothing", &Vec::new(), SEALED_COMMITMENT),
            (
                "a CIDv0",
                &[&[0x12u8, 0x20][..], &d].concat(),
                SEALED_COMMITMENT,
            ),
        ] {
            match take(b, c) {
                Err(DaemonError::InvalidArgument(m)) => {
                    assert!(m.contains("comm_x"), "{what}: {m}")
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_snap_request_with_cids_is_the_same_job_and_content_as_with_raw_bytes() {
        let (r_old, r_new, d_new) = ([3u8; 32], [4u8; 32], [5u8; 32]);
        let raw = proto::SubmitProofRequest {
            request_id: "snap-1000-7".into(),
            proof_kind: proto::ProofKind::SnapDealsUpdate as i32,
            registered_proof: 0, // 2 KiB
            priority: proto::Priority::Normal as i32,
            vanilla_proofs: vec![vec![1; 40]],
            comm_r_old: r_old.to_vec(),
            comm_r_new: r_new.to_vec(),
            comm_d_new: d_new.to_vec(),
            sector_number: 7,
            miner_id: 1000,
            ..Default::default()
        };
        let curio = proto::SubmitProofRequest {
            comm_r_old: cid_of(&SEALED.0, &SEALED.1, &r_old),
            comm_r_new: cid_of(&SEALED.0, &SEALED.1, &r_new),
            comm_d_new: cid_of(&UNSEALED.0, &UNSEALED.1, &d_new),
            ..raw.clone()
        };
        let (a, ka) = check_snap(raw).unwrap();
        let (b, kb) = check_snap(curio.clone()).unwrap();
        assert_eq!(ka, kb);
        assert_eq!(
            (b.comm_r_old, b.comm_r_new, b.comm_d_new),
            (a.comm_r_old, a.comm_r_new, a.comm_d_new)
        );
        // comm_r_new and comm_d_new swapped: refused before queueing.
        let swapped = proto::SubmitProofRequest {
            comm_r_new: curio.comm_d_new.clone(),
            comm_d_new: curio.comm_r_new.clone(),
            ..curio
        };
        assert!(matches!(
            check_snap(swapped),
            Err(DaemonError::InvalidArgument(_))
        ));
    }

    #[test]
    fn window_post_partition_indices_past_the_deadlines_limit_are_refused() {
        let base = proto::SubmitProofRequest {
            request_id: "wdpost-1000-0-0909090909090909".into(),
            proof_kind: proto::ProofKind::WindowPostPartition as i32,
            registered_proof: 10, // WindowPoSt 2 KiB V1_1
            priority: proto::Priority::High as i32,
            vanilla_proofs: vec![vec![1; 40]],
            randomness: vec![9; 32],
            miner_id: 1000,
            ..Default::default()
        };
        let with = |partition_index| proto::SubmitProofRequest {
            partition_index,
            ..base.clone()
        };
        for index in [3000, 3001, u32::MAX - 1, u32::MAX] {
            let e = check_post(with(index), cuzk::ProofKind::WindowPost)
                .err()
                .unwrap();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{index}: {e}");
            assert!(
                matches!(&e, DaemonError::Engine(c) if c.code() == 101),
                "{e}"
            );
            assert_eq!(
                tonic::Status::from(e).message(),
                format!(
                    "cuzk error 101: invalid input: window-post: partition_index {index} is out \
                     of range: a deadline holds at most 3000 partitions (0 to 2999)"
                )
            );
        }
        let (job, _) = check_post(with(2999), cuzk::ProofKind::WindowPost).unwrap();
        assert_eq!(job.partition_index, 2999);
        // WinningPoSt has no partitions: its index is not looked at.
        let winning = proto::SubmitProofRequest {
            proof_kind: proto::ProofKind::WinningPost as i32,
            registered_proof: 0,
            partition_index: u32::MAX,
            ..base.clone()
        };
        assert!(check_post(winning, cuzk::ProofKind::WinningPost).is_ok());
    }
}
