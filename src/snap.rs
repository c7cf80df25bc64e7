//! SnapDeals inputs: what Curio sends to prove a sector update (`ProveUpdate`), checked and made
//! ready for the engine ([`crate::Engine::prove_snap_deals`]).
//!
//! The input is the update proof type (the actors' number, [`registered_update_proof`]), one
//! vanilla proof per partition (the bytes of filecoin-proofs-api's
//! `update::generate_partition_proofs`: bincode of `PartitionProof`), and the three 32-byte
//! commitments comm_r_old (the sector key's), comm_r_new and comm_d_new. The output is what
//! filecoin-proofs-api's `update::generate_empty_sector_update_proof_with_vanilla` returns: one
//! 192-byte Groth16 proof per partition (16 at 32 GiB: 3,072 bytes), checked before it is
//! returned as `update::verify_empty_sector_update_proof` checks it
//! (`EmptySectorUpdateCompound::verify` of the bytes, with the verifying key beside the
//! parameters). Every step that shapes the circuit is filecoin-proofs' own
//! (`EmptySectorUpdateCompound::circuit`, `generate_public_inputs`, `h` of its
//! `SectorUpdateConfig`); the vanilla proofs are verified (`EmptySectorUpdate::
//! verify_all_partitions`: Merkle paths, challenges from comm_r_new, the new labels) before any
//! heavy work, after their values are checked for what that code takes on trust (field
//! elements, path positions), and then their apex leaves as the circuit checks them (the apex
//! tree's root up to comm_d_new, each challenge's path to its apex leaf), which it does not.

use std::path::{Path, PathBuf};

use blstrs::{Bls12, Scalar as Fr};
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::{MerkleTreeTrait, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_core::multi_proof::MultiProof;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_update::constants::{TreeDDomain, TreeDHasher, TreeRDomain, TreeRHasher};
use storage_proofs_update::{
    EmptySectorUpdate, EmptySectorUpdateCompound, PartitionProof, PublicInputs, PublicParams,
};

use crate::circuit::{self, CompiledCircuit, Layout, Witness};

/// filecoin's compound proof of the SnapDeals circuit (its circuit, public inputs, verifier).
type Compound<Tree> = EmptySectorUpdateCompound<Tree>;
/// filecoin's vanilla proof scheme of SnapDeals.
type Scheme<Tree> = EmptySectorUpdate<Tree>;
use crate::error::{Error, Result};
use crate::job::{is_canonical, NOT_CANONICAL};
use crate::job::{Job, ProofKind};
use crate::synth::Assignment;

/// Bytes of each commitment (comm_r_old, comm_r_new, comm_d_new): a field element, little
/// endian.
pub const COMMITMENT_BYTES: usize = 32;

/// The update proof types, in the actors' numbering (`abi.RegisteredUpdateProof`, what Curio
/// and filecoin-ffi send): 0–4 for 2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB sectors.
const BY_NUMBER: [RegisteredUpdateProof; 5] = {
    use RegisteredUpdateProof::*;
    [
        StackedDrg2KiBV1,
        StackedDrg8MiBV1,
        StackedDrg512MiBV1,
        StackedDrg32GiBV1,
        StackedDrg64GiBV1,
    ]
};

/// The update proof type of the actors' number `v`.
///
/// # Errors
/// [`Error::InvalidInput`] for a number that is no update proof type.
pub fn registered_update_proof(v: u64) -> Result<RegisteredUpdateProof> {
    usize::try_from(v)
        .ok()
        .and_then(|i| BY_NUMBER.get(i).copied())
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "registered update proof {v} is not an update proof type (0-4)"
            ))
        })
}

/// Partitions (vanilla proofs, 192-byte proofs) of the update proof type `v`: 1 at 2 KiB, 4 at
/// 8 MiB, 16 at 512 MiB, 32 GiB and 64 GiB.
///
/// # Errors
/// As [`registered_update_proof`].
pub fn partitions(v: u64) -> Result<usize> {
    let proof = registered_update_proof(v)?;
    Ok(public_params(proof).partition_count)
}

/// One SnapDeals request as Curio sends it (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub struct SnapRequest<'a> {
    /// The update proof type, in the actors' numbering ([`registered_update_proof`]).
    pub registered_proof: u64,
    /// One vanilla proof per partition, in partition order ([`partitions`] of them).
    pub vanilla_proofs: &'a [&'a [u8]],
    /// The sector key's replica commitment ([`COMMITMENT_BYTES`]).
    pub comm_r_old: &'a [u8],
    /// The updated replica's commitment ([`COMMITMENT_BYTES`]).
    pub comm_r_new: &'a [u8],
    /// The new data's commitment ([`COMMITMENT_BYTES`]).
    pub comm_d_new: &'a [u8],
    /// The sector size in bytes the caller expects, checked against the proof type's; `None`:
    /// the proof type's (Curio's proof-share jobs send 0, which the daemon and the C ABI take
    /// as `None`).
    pub sector_size: Option<u64>,
}

/// Checks `req` as the engine does before any heavy work — the proof type and sector size, the
/// commitments, the partition count, the vanilla proofs' encoding and shape (every field
/// element a canonical scalar, every path of the tree's shape with its positions in range), the
/// vanilla proofs themselves against the commitments, and the apex leaves as the circuit checks
/// them — without parameters or a device: what the daemon runs before queueing.
///
/// # Errors
/// [`Error::InvalidInput`], [`Error::MalformedInput`] as the engine's call returns them.
pub fn check(req: &SnapRequest<'_>) -> Result<()> {
    let proof = registered_update_proof(req.registered_proof)?;
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), check_shape, req, proof,)
}

fn check_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &SnapRequest<'_>,
    proof: RegisteredUpdateProof,
) -> Result<()> {
    prepare::<Tree>(req, proof, Path::new("")).map(|_| ())
}

/// filecoin-proofs' public parameters of the SnapDeals circuit of `proof`.
fn public_params(proof: RegisteredUpdateProof) -> PublicParams {
    PublicParams::from_sector_size(u64::from(proof.sector_size()))
}

/// A commitment of `req` as a field element.
fn commitment<D: filecoin_hashers::Domain>(bytes: &[u8], name: &str) -> Result<D> {
    let arr: [u8; COMMITMENT_BYTES] = bytes.try_into().map_err(|_| {
        Error::InvalidInput(format!(
            "snap-deals: {name} of {} bytes, expected {COMMITMENT_BYTES}",
            bytes.len()
        ))
    })?;
    filecoin_proofs::as_safe_commitment(&arr, name)
        .map_err(|e| Error::InvalidInput(format!("snap-deals: {e:#}")))
}

/// A SnapDeals request made ready for proving: its vanilla proofs (checked), the public inputs
/// the verifier checks, and the parameter file.
pub(crate) struct SnapJob<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    proof: RegisteredUpdateProof,
    pub_params: PublicParams,
    /// As `verify_empty_sector_update_proof` builds them (`k`: the partition count).
    pub_inputs: PublicInputs,
    vanilla: Vec<PartitionProof<Tree>>,
    params_path: PathBuf,
}

/// Runs `f`, a filecoin-proofs call on the caller's vanilla proofs, turning its error or panic
/// into [`Error::InvalidInput`] prefixed with `what`. The values it panics on (field elements
/// that are not canonical, path positions out of range) are refused before it runs
/// ([`check_partition_fields`]); the panic is caught as the last guard only (the panic hook has
/// printed it by then).
fn on_vanilla<T>(what: &str, f: impl FnOnce() -> anyhow::Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Error::InvalidInput(format!("{what}: {e:#}"))),
        Err(panic) => {
            let msg = match Error::from_panic(panic) {
                Error::Panic(m) => m,
                e => e.to_string(),
            };
            Err(Error::InvalidInput(format!("{what}: {msg}")))
        }
    }
}

/// Checks the values of `p`, one Merkle path of a challenge proof (`tree` names it), that
/// filecoin-proofs takes on trust and panics on: its leaf, root and siblings canonical scalars
/// ([`is_canonical`]), each level's position below its arity (its siblings plus one: the
/// path's shape is checked before), and the position the proof's parts (base, sub-tree, top
/// tree) make the one these levels make.
///
/// # Errors
/// What is wrong, naming the tree and the value.
fn check_path<P: MerkleProofTrait>(tree: &str, p: &P) -> std::result::Result<(), String> {
    for (name, value) in [("leaf", p.leaf()), ("root", p.root())] {
        if !is_canonical(value.as_ref()) {
            return Err(format!("{tree} {name} {NOT_CANONICAL}"));
        }
    }
    let (mut position, mut leaves_below) = (0usize, 1usize);
    for (l, (siblings, at)) in p.path().iter().enumerate() {
        if let Some(s) = siblings.iter().position(|h| !is_canonical(h.as_ref())) {
            return Err(format!(
                "{tree} path level {l}, sibling {s} {NOT_CANONICAL}"
            ));
        }
        let arity = siblings.len() + 1;
        if *at >= arity {
            return Err(format!(
                "{tree} path level {l}: position {at} out of range for arity {arity}"
            ));
        }
        position += at * leaves_below;
        leaves_below *= arity;
    }
    if p.path_index() != position {
        return Err(format!(
            "{tree} path: its parts (base, sub-tree, top tree) do not split the path as the \
             tree's shape does"
        ));
    }
    Ok(())
}

/// Partition `k`'s vanilla proof refused for `what`: [`Error::InvalidInput`] naming it.
fn refuse_partition<T>(k: usize, what: String) -> Result<T> {
    Err(Error::InvalidInput(format!(
        "snap-deals vanilla proof {k} (partition {k}): {what}"
    )))
}

/// Checks `p`, partition `k`'s vanilla proof (of the circuit's shape:
/// [`check_partition_shape`]), for what filecoin-proofs takes on trust and panics on: comm_c,
/// the apex leaves and each challenge's three paths ([`check_path`]: TreeROld, TreeDNew,
/// TreeRNew; the SHA-256 values too, which the vanilla check and the circuit convert to field
/// elements alike).
///
/// # Errors
/// [`Error::InvalidInput`] naming the partition, the challenge and the value.
fn check_partition_fields<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    k: usize,
    p: &PartitionProof<Tree>,
) -> Result<()> {
    let bad = |what: String| refuse_partition(k, what);
    if !is_canonical(p.comm_c.as_ref()) {
        return bad(format!("comm_c {NOT_CANONICAL}"));
    }
    if let Some(a) = p.apex_leafs.iter().position(|l| !is_canonical(l.as_ref())) {
        return bad(format!("apex leaf {a} {NOT_CANONICAL}"));
    }
    for (i, c) in p.challenge_proofs.iter().enumerate() {
        let checked = check_path("TreeROld", &c.proof_r_old)
            .and_then(|()| check_path("TreeDNew", &c.proof_d_new))
            .and_then(|()| check_path("TreeRNew", &c.proof_r_new));
        if let Err(what) = checked {
            return bad(format!("challenge {i}: {what}"));
        }
    }
    Ok(())
}

/// Checks what the circuit checks of the TreeDNew values of `p`, partition `k`'s vanilla proof
/// (verified by filecoin-proofs: each challenge's TreeDNew path leads to `comm_d_new` from the
/// challenged leaf), and filecoin-proofs' vanilla check does not: the root of the apex tree
/// (SHA-256 of pairs, row by row, as `apex_por`) leads to `comm_d_new` along the partition's
/// path (challenge 0's TreeDNew path above the apex tree, which every challenge's must equal,
/// with `k`'s bits), and each challenge's TreeDNew path leads from its leaf to the apex leaf at
/// its position. filecoin-proofs' check only looks each apex-path sibling up somewhere in the
/// apex tree's row: apex leaves out of order pass it and fail in synthesis.
///
/// # Errors
/// [`Error::InvalidInput`] naming the partition (and the challenge).
fn check_apex<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    pp: &PublicParams,
    k: usize,
    p: &PartitionProof<Tree>,
    comm_d_new: &TreeDDomain,
) -> Result<()> {
    let bad = |what: String| refuse_partition(k, what);
    let hash2 = <TreeDHasher as Hasher>::Function::hash2;
    // `node` at position `at` (0: left, 1: right) among the pair with `sibling`.
    let up = |node: &TreeDDomain, sibling: &TreeDDomain, at: usize| {
        if at == 0 {
            hash2(node, sibling)
        } else {
            hash2(sibling, node)
        }
    };
    let mut row = p.apex_leafs.clone();
    while row.len() > 1 {
        row = row.chunks(2).map(|s| hash2(&s[0], &s[1])).collect();
    }
    let to_apex = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let above_apex = pp.challenge_bit_len - pp.partition_bit_len;
    let siblings_above = |c: &storage_proofs_update::ChallengeProof<Tree>| -> Vec<TreeDDomain> {
        c.proof_d_new.path()[above_apex..]
            .iter()
            .map(|(s, _)| s[0])
            .collect()
    };
    let partition_path = siblings_above(&p.challenge_proofs[0]);
    if let Some(i) = (1..p.challenge_proofs.len())
        .find(|&i| siblings_above(&p.challenge_proofs[i]) != partition_path)
    {
        return bad(format!(
            "challenge {i}: its TreeDNew path above the apex tree is not challenge 0's (the \
             partition's path)"
        ));
    }
    let root = partition_path
        .iter()
        .enumerate()
        .fold(row[0], |node, (j, s)| up(&node, s, (k >> j) & 1));
    if root != *comm_d_new {
        return bad(
            "the root of its apex leaves does not lead to comm_d_new along the partition's path \
             (apex leaves changed or out of order?)"
                .into(),
        );
    }
    for (i, c) in p.challenge_proofs.iter().enumerate() {
        let path = c.proof_d_new.path();
        let apex_leaf = path[..to_apex]
            .iter()
            .fold(c.proof_d_new.leaf(), |node, (s, at)| up(&node, &s[0], *at));
        let a = path[to_apex..above_apex]
            .iter()
            .enumerate()
            .fold(0, |a, (j, (_, at))| a | at << j);
        if apex_leaf != p.apex_leafs[a] {
            return bad(format!(
                "challenge {i}: its TreeDNew path does not lead to apex leaf {a}"
            ));
        }
    }
    Ok(())
}

/// The shape of a Merkle path: siblings per level.
fn path_shape<T>(path: &[(Vec<T>, usize)]) -> Vec<usize> {
    path.iter().map(|(s, _)| s.len()).collect()
}

/// Checks that `p`, partition `k`'s vanilla proof, has the circuit's shape for `pp` (apex
/// leaves, challenges, each Merkle path's levels and siblings): the circuit asserts these and
/// would panic on another shape.
fn check_partition_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    pp: &PublicParams,
    k: usize,
    p: &PartitionProof<Tree>,
) -> Result<()> {
    let bad = |what: String| refuse_partition(k, what);
    if p.apex_leafs.len() != pp.apex_leaf_count {
        return bad(format!(
            "{} apex leaves, expected {}",
            p.apex_leafs.len(),
            pp.apex_leaf_count
        ));
    }
    if p.challenge_proofs.len() != pp.challenge_count {
        return bad(format!(
            "{} challenge proofs, expected {}",
            p.challenge_proofs.len(),
            pp.challenge_count
        ));
    }
    let blank = storage_proofs_update::circuit::ChallengeProof::<Tree>::empty(pp.sector_nodes);
    let want_r: Vec<usize> = blank.path_r_old.iter().map(Vec::len).collect();
    let want_d: Vec<usize> = blank.path_d_new.iter().map(Vec::len).collect();
    for (i, c) in p.challenge_proofs.iter().enumerate() {
        let shapes = [
            ("TreeROld", path_shape(&c.proof_r_old.path()), &want_r),
            ("TreeDNew", path_shape(&c.proof_d_new.path()), &want_d),
            ("TreeRNew", path_shape(&c.proof_r_new.path()), &want_r),
        ];
        for (tree, got, want) in shapes {
            if got != *want {
                return bad(format!(
                    "challenge {i}: a {tree} path of {got:?} siblings per level, expected \
                     {want:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Checks `req` (of the proof type `proof`, tree shape `Tree`) and builds its job; the
/// parameter file is looked up in `param_dir`.
pub(crate) fn prepare<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    req: &SnapRequest<'_>,
    proof: RegisteredUpdateProof,
    param_dir: &Path,
) -> Result<SnapJob<Tree>> {
    let size = u64::from(proof.sector_size());
    if let Some(s) = req.sector_size.filter(|&s| s != size) {
        return Err(Error::InvalidInput(format!(
            "snap-deals: sector size {s} for {proof:?} (sectors of {size} bytes)"
        )));
    }
    let comm_r_old: TreeRDomain = commitment(req.comm_r_old, "comm_r_old")?;
    let comm_r_new: TreeRDomain = commitment(req.comm_r_new, "comm_r_new")?;
    let comm_d_new: TreeDDomain = commitment(req.comm_d_new, "comm_d_new")?;
    let pp = public_params(proof);
    if req.vanilla_proofs.len() != pp.partition_count {
        return Err(Error::InvalidInput(format!(
            "snap-deals: {} vanilla proofs for {proof:?}, expected one per partition ({})",
            req.vanilla_proofs.len(),
            pp.partition_count
        )));
    }
    let vanilla: Vec<PartitionProof<Tree>> = req
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(k, b)| {
            crate::job::decode_vanilla(b).map_err(|e| {
                Error::MalformedInput(format!(
                    "snap-deals vanilla proof {k} ({} bytes) is not a {proof:?} partition \
                     proof: {e}",
                    b.len()
                ))
            })
        })
        .collect::<Result<_>>()?;
    // Before any filecoin-proofs code runs on them (`on_vanilla` stays the last guard).
    for (k, p) in vanilla.iter().enumerate() {
        check_partition_shape(&pp, k, p)?;
        check_partition_fields(k, p)?;
    }
    let config = SectorUpdateConfig::from_porep_config(&proof.as_v1_config());
    let pub_inputs = PublicInputs {
        k: pp.partition_count,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        h: config.h,
    };
    let ok = on_vanilla("snap-deals vanilla proofs", || {
        EmptySectorUpdate::<Tree>::verify_all_partitions(&pp, &pub_inputs, &vanilla)
    })?;
    if !ok {
        return Err(Error::InvalidInput(
            "snap-deals: the vanilla proofs do not verify against comm_r_old, comm_r_new and \
             comm_d_new (wrong commitments, partition order or sector size?)"
                .into(),
        ));
    }
    for (k, p) in vanilla.iter().enumerate() {
        check_apex(&pp, k, p, &comm_d_new)?;
    }
    let (params_path, _) = crate::srs::snap_param_paths::<Tree>(param_dir, &pp);
    Ok(SnapJob {
        proof,
        pub_params: pp,
        pub_inputs,
        vanilla,
        params_path,
    })
}

/// The `.params` file of the update proof type `proof` in `dir` (its `.vk` beside it), under
/// filecoin-proofs' v28 name ([`crate::srs::snap_param_paths`]).
#[cfg(any(test, feature = "internals"))]
pub(crate) fn param_path(proof: RegisteredUpdateProof, dir: &Path) -> PathBuf {
    fn of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        proof: RegisteredUpdateProof,
        dir: &Path,
    ) -> PathBuf {
        crate::srs::snap_param_paths::<Tree>(dir, &public_params(proof)).0
    }
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), of, proof, dir,)
}

/// Constraints of one SHA-256 hash of two nodes in the circuit (bellperson's gadget, two
/// compression blocks; 45,379 recorded), an upper bound.
const SHA256_CONSTRAINTS: u64 = 45_500;
/// Constraints of one level of a TreeR Merkle path (a Poseidon hash of arity 8 and the
/// insertion of the node among its siblings; ~540 recorded), an upper bound.
const TREE_R_LEVEL_CONSTRAINTS: u64 = 600;
/// Constraints per challenge besides its Merkle paths (its high bits, rho, the new label, the
/// apex-leaf selection), an upper bound.
const CHALLENGE_REST_CONSTRAINTS: u64 = 1_000;
/// Constraints of the prefix besides its SHA-256 hashes (public inputs, phi, comm_r checks,
/// challenge digests), an upper bound.
const PREFIX_REST_CONSTRAINTS: u64 = 20_000;

/// An upper bound of the constraints of one partition of the SnapDeals circuit of `pp`, before
/// it is recorded: its SHA-256 hashes (the apex tree, the partition path, each challenge's
/// TreeDNew path to its apex leaf) and each challenge's two TreeR paths (a level per 3 bits of
/// the challenge), plus a 1 % margin. Recorded: 1,705,044 at 2 KiB (bound 1.75 M), 10,007,508
/// at 8 MiB (10.2 M), 81,049,499 at 32 GiB (82.3 M).
pub(crate) fn partition_constraints_bound(pp: &PublicParams) -> u64 {
    let to_apex = (pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len) as u64;
    let challenges = pp.challenge_count as u64;
    let sha = (pp.apex_leaf_count as u64 - 1) + pp.partition_bit_len as u64 + challenges * to_apex;
    let tree_r_levels = (pp.challenge_bit_len as u64).div_ceil(3);
    let per_challenge = 2 * tree_r_levels * TREE_R_LEVEL_CONSTRAINTS + CHALLENGE_REST_CONSTRAINTS;
    let n = sha * SHA256_CONSTRAINTS + challenges * per_challenge + PREFIX_REST_CONSTRAINTS;
    n + n / 100
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapJob<Tree> {
    /// The circuit of partition `k`, as filecoin-proofs builds it.
    fn circuit(&self, k: usize) -> Result<circuit::snap::Circuit<Tree>> {
        on_vanilla("snap-deals vanilla proofs", || {
            <Compound<Tree> as CompoundProof<'_, Scheme<Tree>, _>>::circuit(
                &self.pub_inputs,
                (),
                &self.vanilla[k],
                &self.pub_params,
                Some(k),
            )
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> Job for SnapJob<Tree> {
    fn label(&self) -> String {
        format!("{} {:?}", ProofKind::SnapDeals, self.proof)
    }

    fn partitions(&self) -> usize {
        self.pub_params.partition_count
    }

    fn kind(&self) -> ProofKind {
        ProofKind::SnapDeals
    }

    fn params_path(&self) -> &Path {
        &self.params_path
    }

    /// From its hashes ([`partition_constraints_bound`]).
    fn constraints_bound(&self) -> u64 {
        partition_constraints_bound(&self.pub_params)
    }

    fn circuit_cache_name_and_key(&self) -> (String, [u8; 32]) {
        let file = crate::job::file_name(&self.params_path);
        circuit::snap::cache_name_and_key(&file, &self.pub_params)
    }

    fn compile(&self) -> Result<CompiledCircuit> {
        circuit::snap::compile::<Tree>(&self.pub_params)
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        <Compound<Tree> as CompoundProof<'_, Scheme<Tree>, _>>::generate_public_inputs(
            &self.pub_inputs,
            &self.pub_params,
            Some(k),
        )
        .map_err(Error::internal)
    }

    /// Natively, one challenge per task ([`circuit::native::snap`]), or by the gadgets in one
    /// synthesis of the whole partition.
    fn witness_into(&self, layout: &Layout, k: usize, native: bool, w: &mut Witness) -> Result<()> {
        if !native {
            return circuit::snap::witness_into(layout, self.circuit(k)?, k, w);
        }
        let vanilla = self.vanilla.get(k).ok_or_else(|| {
            Error::InvalidInput(format!("partition {k} of {}", self.vanilla.len()))
        })?;
        circuit::native::snap::witness_into::<Tree>(
            layout,
            &self.pub_inputs,
            vanilla,
            &self.pub_params,
            k,
            w,
        )
    }

    /// The gadget witness is one synthesis of the whole partition, on one thread; the native
    /// one runs a task per challenge.
    fn serial_witness(&self, native: bool) -> bool {
        !native
    }

    fn synthesize(&self, k: usize) -> Result<Assignment> {
        Assignment::synthesize(self.circuit(k)?).map_err(|e| Error::Synthesis {
            partition: k,
            message: e.to_string(),
        })
    }

    /// `update::verify_empty_sector_update_proof`'s check of `proof` (all partitions' bytes):
    /// read with subgroup checks, then `EmptySectorUpdateCompound::verify` with `pvk`; a proof
    /// it rejects or cannot read is [`Error::VerificationFailed`] of the whole multi-proof
    /// (`partition: usize::MAX`).
    fn check_proof(
        &self,
        proof: &[u8],
        pvk: &bellperson::groth16::PreparedVerifyingKey<Bls12>,
    ) -> Result<()> {
        let partitions = self.pub_params.partition_count;
        let setup = compound_proof::SetupParams {
            vanilla_params: storage_proofs_update::SetupParams {
                sector_bytes: u64::from(self.proof.sector_size()),
            },
            partitions: Some(partitions),
            priority: true,
        };
        let ok = (|| -> anyhow::Result<bool> {
            let pp = <Compound<Tree> as CompoundProof<'_, Scheme<Tree>, _>>::setup(&setup)?;
            let multi = MultiProof::new_from_bytes(Some(partitions), proof, pvk)?;
            <Compound<Tree> as CompoundProof<'_, Scheme<Tree>, _>>::verify(
                &pp,
                &self.pub_inputs,
                &multi,
                &(),
            )
        })();
        match ok {
            Ok(true) => return Ok(()),
            Ok(false) => log::error!(
                "snap-deals {:?}: the proof does not verify as verify_empty_sector_update_proof \
                 checks it",
                self.proof
            ),
            Err(e) => log::error!(
                "snap-deals {:?}: verify_empty_sector_update_proof's check cannot read the proof: \
                 {e:#}",
                self.proof
            ),
        }
        Err(Error::VerificationFailed {
            partition: usize::MAX,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_proof_numbers_follow_the_actors_numbering() {
        use RegisteredUpdateProof::*;
        assert_eq!(registered_update_proof(0).unwrap(), StackedDrg2KiBV1);
        assert_eq!(registered_update_proof(3).unwrap(), StackedDrg32GiBV1);
        assert_eq!(registered_update_proof(4).unwrap(), StackedDrg64GiBV1);
        for v in [5, 8, u64::MAX] {
            assert_eq!(registered_update_proof(v).unwrap_err().code(), 101, "{v}");
        }
        assert_eq!(
            (0..5).map(|v| partitions(v).unwrap()).collect::<Vec<_>>(),
            [1, 4, 16, 16, 16]
        );
    }

    #[test]
    fn constraint_bounds_cover_the_recorded_partitions() {
        // 32 GiB: 81,049,499 constraints per partition (recorded; storage-proofs-update 19.1).
        // 2 KiB and 8 MiB are recorded in `circuit::snap`'s tests.
        for (size, recorded) in [
            (2048, 1_705_044),
            (8 << 20, 10_007_508),
            (32 << 30, 81_049_499),
        ] {
            let bound = partition_constraints_bound(&PublicParams::from_sector_size(size));
            assert!(
                (recorded..recorded * 21 / 20).contains(&bound),
                "{size}: bound {bound}, recorded {recorded}"
            );
        }
    }

    #[test]
    fn malformed_requests_are_input_errors() {
        let comm = [1u8; 32];
        let junk: &[u8] = b"not a vanilla proof";
        let base = SnapRequest {
            registered_proof: 0,
            vanilla_proofs: &[junk],
            comm_r_old: &comm,
            comm_r_new: &comm,
            comm_d_new: &comm,
            sector_size: None,
        };
        let code = |r: SnapRequest<'_>| check(&r).unwrap_err().code();
        assert_eq!(code(base), 100, "garbage vanilla proof");
        assert_eq!(
            code(SnapRequest {
                sector_size: Some(2048),
                ..base
            }),
            100,
            "the proof type's own size is accepted"
        );
        for (what, bad) in [
            (
                "no vanilla proofs",
                SnapRequest {
                    vanilla_proofs: &[],
                    ..base
                },
            ),
            (
                "two vanilla proofs for one partition",
                SnapRequest {
                    vanilla_proofs: &[junk, junk],
                    ..base
                },
            ),
            (
                "short comm_r_old",
                SnapRequest {
                    comm_r_old: &comm[..31],
                    ..base
                },
            ),
            (
                "long comm_r_new",
                SnapRequest {
                    comm_r_new: &[1u8; 33],
                    ..base
                },
            ),
            (
                "empty comm_d_new",
                SnapRequest {
                    comm_d_new: &[],
                    ..base
                },
            ),
            (
                "comm_r_old not a field element",
                SnapRequest {
                    comm_r_old: &[0xff; 32],
                    ..base
                },
            ),
            (
                "sector size of another proof type",
                SnapRequest {
                    sector_size: Some(8 << 20),
                    ..base
                },
            ),
            (
                "unknown proof type",
                SnapRequest {
                    registered_proof: 5,
                    ..base
                },
            ),
            (
                "a 32 GiB proof type with one vanilla proof",
                SnapRequest {
                    registered_proof: 3,
                    ..base
                },
            ),
        ] {
            assert_eq!(code(bad), 101, "{what}");
        }
    }
}
