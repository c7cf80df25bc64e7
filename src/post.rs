//! PoSt inputs: what Curio sends for a WindowPoSt partition or a WinningPoSt, checked and made
//! ready for the engine ([`crate::Engine::prove_window_post`],
//! [`crate::Engine::prove_winning_post`]).
//!
//! The input is the proof type (the actors' number, [`registered_post_proof`]), one vanilla
//! proof per sector (the bytes of filecoin-proofs-api's `post::generate_single_vanilla_proof`:
//! bincode of `FallbackPoStSectorProof`), the 32-byte randomness, the 32-byte prover id and, for
//! WindowPoSt, the partition index. Every step that shapes the circuit is filecoin-proofs' own,
//! as its `generate_single_window_post_with_vanilla` / `generate_winning_post_with_vanilla` run
//! it (`single_partition_vanilla_proofs`, `FallbackPoStCompound::circuit`); the public inputs are
//! those its `verify_window_post` / `verify_winning_post` check the proof against
//! (`FallbackPoStCompound::generate_public_inputs`). The vanilla proofs are verified (inclusion
//! paths, challenges from the randomness, comm_r = H(comm_c, comm_r_last)) before any heavy work.

use std::path::{Path, PathBuf};

use blstrs::Scalar as Fr;
use filecoin_hashers::Hasher;
use filecoin_proofs::{FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig};
use filecoin_proofs_api::RegisteredPoStProof;
use rayon::prelude::*;
use sha2::digest::typenum::Unsigned;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::{compound_path_length, MerkleProofTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_core::util::NODE_SIZE;
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector,
};

use crate::circuit::{self, CompiledCircuit, Layout, Witness};
use crate::error::{Error, Result};
use crate::job::{is_canonical, NOT_CANONICAL};
use crate::job::{Job, ProofKind};
use crate::synth::Assignment;

/// Bytes of the PoSt randomness (its top bits cleared: a field element).
pub const RANDOMNESS_BYTES: usize = 32;

/// The PoSt proof types, in the actors' numbering (`abi.RegisteredPoStProof`, what Curio and
/// filecoin-ffi send): 0–4 WinningPoSt 2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB; 5–9 WindowPoSt
/// V1 (before the grindability fix: not proved, as no network accepts it); 10–14 WindowPoSt
/// V1_1, filecoin-proofs-api's `StackedDrgWindow*V1_2`.
const BY_NUMBER: [RegisteredPoStProof; 15] = {
    use RegisteredPoStProof::*;
    [
        StackedDrgWinning2KiBV1,
        StackedDrgWinning8MiBV1,
        StackedDrgWinning512MiBV1,
        StackedDrgWinning32GiBV1,
        StackedDrgWinning64GiBV1,
        StackedDrgWindow2KiBV1,
        StackedDrgWindow8MiBV1,
        StackedDrgWindow512MiBV1,
        StackedDrgWindow32GiBV1,
        StackedDrgWindow64GiBV1,
        StackedDrgWindow2KiBV1_2,
        StackedDrgWindow8MiBV1_2,
        StackedDrgWindow512MiBV1_2,
        StackedDrgWindow32GiBV1_2,
        StackedDrgWindow64GiBV1_2,
    ]
};

/// The PoSt proof type of the actors' number `v`, checked to be of `kind` and one cuzk proves.
///
/// # Errors
/// [`Error::InvalidInput`] for a number that is no PoSt proof type or one of the other kind
/// (or `kind` is not a PoSt kind); [`Error::UnsupportedProof`] for the WindowPoSt V1 types
/// (5–9).
pub fn registered_post_proof(kind: ProofKind, v: u64) -> Result<RegisteredPoStProof> {
    let proof = usize::try_from(v)
        .ok()
        .and_then(|i| BY_NUMBER.get(i).copied())
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "registered PoSt proof {v} is not a PoSt proof type"
            ))
        })?;
    let want = match kind {
        ProofKind::WindowPost => filecoin_proofs::PoStType::Window,
        ProofKind::WinningPost => filecoin_proofs::PoStType::Winning,
        _ => return Err(Error::InvalidInput(format!("{kind} is not a PoSt kind"))),
    };
    if proof.typ() != want {
        return Err(Error::InvalidInput(format!(
            "registered PoSt proof {v} ({proof:?}) is not a {kind} proof type"
        )));
    }
    if (5..10).contains(&v) {
        return Err(Error::UnsupportedProof(format!(
            "{proof:?} (WindowPoSt V1, before the grindability fix): use {:?}",
            BY_NUMBER[v as usize + 5]
        )));
    }
    Ok(proof)
}

/// The most partitions a WindowPoSt deadline holds: the actors' policy
/// `MAX_PARTITIONS_PER_DEADLINE`, 3000 for every sector size (300 partitions of 2349 32 GiB
/// sectors in each of the 48 deadlines make about 1 EiB). A WindowPoSt partition index is below
/// it.
pub const MAX_PARTITIONS_PER_DEADLINE: usize = 3000;

/// Checks a PoSt request's partition index: a WindowPoSt's must be below
/// [`MAX_PARTITIONS_PER_DEADLINE`] (WinningPoSt has no partitions: its index is not used). A
/// cheap check of the request's own field, run by [`check`] and the engine's calls before
/// anything else, and by the daemon before it reads the vanilla proofs.
///
/// # Errors
/// [`Error::InvalidInput`] naming the index and the limit.
pub fn check_partition_index(kind: ProofKind, partition_index: usize) -> Result<()> {
    if kind == ProofKind::WindowPost && partition_index >= MAX_PARTITIONS_PER_DEADLINE {
        return Err(Error::InvalidInput(format!(
            "{kind}: partition_index {partition_index} is out of range: a deadline holds at \
             most {MAX_PARTITIONS_PER_DEADLINE} partitions (0 to {})",
            MAX_PARTITIONS_PER_DEADLINE - 1
        )));
    }
    Ok(())
}

/// Sector size in bytes of the PoSt proof type `v` of `kind` ([`registered_post_proof`]).
///
/// # Errors
/// As [`registered_post_proof`].
pub fn sector_size(kind: ProofKind, v: u64) -> Result<u64> {
    registered_post_proof(kind, v).map(|p| u64::from(p.sector_size()))
}

/// One PoSt request as Curio sends it (see the [module docs](self)).
#[derive(Clone, Copy, Debug)]
pub struct PostRequest<'a> {
    /// [`ProofKind::WindowPost`] or [`ProofKind::WinningPost`].
    pub kind: ProofKind,
    /// The proof type, in the actors' numbering ([`registered_post_proof`]).
    pub registered_proof: u64,
    /// One vanilla proof per sector: WindowPoSt, the partition's sectors (at most its sector
    /// count: 2349 at 32 GiB, 2 at 2 KiB); WinningPoSt, the one challenged sector.
    pub vanilla_proofs: &'a [&'a [u8]],
    /// The 32-byte randomness ([`RANDOMNESS_BYTES`]).
    pub randomness: &'a [u8],
    /// The 32-byte prover id ([`crate::c1::prover_id_from_actor_id`]).
    pub prover_id: &'a [u8],
    /// WindowPoSt: the partition's index in the deadline, below [`MAX_PARTITIONS_PER_DEADLINE`]
    /// (not used by WinningPoSt). It goes to filecoin-proofs as its
    /// `generate_single_window_post_with_vanilla` takes it; from V1_1 on the challenges, and so
    /// the proof, do not depend on it.
    pub partition_index: usize,
}

/// Checks `req` as the engine does before any heavy work — the proof type, the partition index
/// ([`check_partition_index`]), the vanilla proofs' encoding and shape (one sector proof of the
/// proof type's challenge count each, every field element a canonical scalar, every path of the
/// tree's shape with its positions in range; WinningPoSt's one vanilla proof, WindowPoSt's in
/// ascending order of their sectors, each once), the randomness and prover id, and the vanilla
/// proofs themselves against the randomness —
/// without parameters or a device: what the daemon runs before queueing.
///
/// # Errors
/// [`Error::InvalidInput`], [`Error::MalformedInput`], [`Error::InvalidProverId`],
/// [`Error::UnsupportedProof`] as the engine's calls return them.
pub fn check(req: &PostRequest<'_>) -> Result<()> {
    let proof = registered_post_proof(req.kind, req.registered_proof)?;
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), check_shape, req, proof,)
}

/// The witness z of `req`'s partition, natively (`native`) or by the gadgets, after the checks
/// of [`check`], with the circuit's layout (recorded from one sector; no matrices are assembled)
/// and the public inputs the verifier checks the proof against (the constant one left out): for
/// the value-for-value comparison of the two witness paths in tests and tools.
///
/// # Errors
/// As [`check`]; [`Error::Synthesis`] from the witness.
#[cfg(feature = "internals")]
pub fn witness(req: &PostRequest<'_>, native: bool) -> Result<(Layout, Witness, Vec<Fr>)> {
    let proof = registered_post_proof(req.kind, req.registered_proof)?;
    filecoin_proofs::with_shape!(
        u64::from(proof.sector_size()),
        witness_shape,
        req,
        proof,
        native,
    )
}

#[cfg(feature = "internals")]
fn witness_shape<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest<'_>,
    proof: RegisteredPoStProof,
    native: bool,
) -> Result<(Layout, Witness, Vec<Fr>)> {
    let job = prepare::<Tree>(req, proof, Path::new(""))?;
    let layout = circuit::post::layout::<Tree>(&job.pub_params)?;
    let mut w = Witness::default();
    job.witness_into(&layout, 0, native, &mut w)?;
    Ok((layout, w, job.public_inputs(0)?))
}

fn check_shape<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest<'_>,
    proof: RegisteredPoStProof,
) -> Result<()> {
    prepare::<Tree>(req, proof, Path::new("")).map(|_| ())
}

/// A PoSt request made ready for proving (one partition): its vanilla partition proof (as
/// filecoin-proofs shapes it for the circuit), the public inputs the verifier checks, and the
/// parameter file.
pub(crate) struct PostJob<Tree: 'static + MerkleTreeTrait> {
    kind: ProofKind,
    proof: RegisteredPoStProof,
    pub_params: fallback::PublicParams,
    /// As `verify_window_post` / `verify_winning_post` build them for this partition.
    pub_inputs: fallback::PublicInputs<<Tree::Hasher as Hasher>::Domain>,
    /// One sector proof per sector of the circuit (`single_partition_vanilla_proofs`), paired
    /// with `pub_inputs`' sectors as `FallbackPoStCompound::circuit` pairs them.
    vanilla: circuit::post::Vanilla<Tree>,
    params_path: PathBuf,
}

/// Runs `f`, a filecoin-proofs call on the caller's vanilla proofs, turning its error or panic
/// into [`Error::InvalidInput`] prefixed with `what`. The values it panics on (field elements
/// that are not canonical, path positions out of range) are refused before it runs
/// ([`check_sector_proof`]); the panic is caught as the last guard only (the panic hook has
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

/// The arity of each level of a challenged leaf's path in `Tree`'s tree_r_last of a sector of
/// `sector_size` bytes, from the leaf up: the base arity for the base trees' levels, then the
/// sub-tree's and the top tree's where the shape has them (the levels storage-proofs'
/// `MerkleProofTrait::expected_len` counts). 2 KiB: 8, 8; 32 GiB: 8 × 9, then 8; 64 GiB: 8 × 9,
/// then 8, 2.
fn path_arities<Tree: MerkleTreeTrait>(sector_size: u64) -> Vec<usize> {
    let leaves = (sector_size / NODE_SIZE as u64) as usize;
    let levels =
        compound_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves);
    let upper: Vec<usize> = [
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    ]
    .into_iter()
    .filter(|&a| a > 0)
    .collect();
    let mut arities = vec![Tree::Arity::to_usize(); levels.saturating_sub(upper.len())];
    arities.extend(upper);
    arities
}

/// Checks the sector proof of `v` (vanilla proof `i`, holding one sector proof) for what
/// filecoin-proofs takes on trust and panics on: every field element — the sector's comm_r, the
/// proof's comm_c and comm_r_last, each inclusion proof's leaf, root and path siblings — a
/// canonical scalar ([`is_canonical`]), and each path of the tree's shape (`arities`, from
/// [`path_arities`]): its levels, `arity - 1` siblings and a position below the arity at each
/// level, and the position the proof's parts (base, sub-tree, top tree) make the one these
/// levels make. Then each path's root is comm_r_last: filecoin-proofs' vanilla check reads the
/// root from the paths, the circuit from comm_r_last, so one that differs would pass the check
/// and fail in synthesis.
///
/// # Errors
/// [`Error::InvalidInput`] naming the sector and the value.
fn check_sector_proof<Tree: 'static + MerkleTreeTrait>(
    kind: ProofKind,
    i: usize,
    v: &FallbackPoStSectorProof<Tree>,
    arities: &[usize],
) -> Result<()> {
    let sector = &v.vanilla_proof.sectors[0];
    let id = u64::from(v.sector_id);
    let refuse = |what: String| {
        Error::InvalidInput(format!("{kind} vanilla proof {i} (sector {id}): {what}"))
    };
    for (name, value) in [
        ("comm_r", &v.comm_r),
        ("comm_c", &sector.comm_c),
        ("comm_r_last", &sector.comm_r_last),
    ] {
        if !is_canonical(value.as_ref()) {
            return Err(refuse(format!("{name} {NOT_CANONICAL}")));
        }
    }
    for (j, p) in sector.inclusion_proofs.iter().enumerate() {
        let path = p.path();
        if path.len() != arities.len() {
            return Err(refuse(format!(
                "inclusion proof {j} has {} path levels, expected {} for its sector size",
                path.len(),
                arities.len()
            )));
        }
        for (name, value) in [("leaf", p.leaf()), ("root", p.root())] {
            if !is_canonical(value.as_ref()) {
                return Err(refuse(format!(
                    "inclusion proof {j} {name} {NOT_CANONICAL}"
                )));
            }
        }
        let (mut position, mut leaves_below) = (0usize, 1usize);
        for (l, ((siblings, at), &arity)) in path.iter().zip(arities).enumerate() {
            if siblings.len() != arity - 1 {
                return Err(refuse(format!(
                    "inclusion proof {j}, path level {l}: {} siblings, expected {} (arity \
                     {arity})",
                    siblings.len(),
                    arity - 1
                )));
            }
            if let Some(s) = siblings.iter().position(|h| !is_canonical(h.as_ref())) {
                return Err(refuse(format!(
                    "inclusion proof {j}, path level {l}, sibling {s} {NOT_CANONICAL}"
                )));
            }
            if *at >= arity {
                return Err(refuse(format!(
                    "inclusion proof {j}, path level {l}: position {at} out of range for arity \
                     {arity}"
                )));
            }
            position += at * leaves_below;
            leaves_below *= arity;
        }
        if p.path_index() != position {
            return Err(refuse(format!(
                "inclusion proof {j}: its parts (base, sub-tree, top tree) do not split the path \
                 as the tree's shape does"
            )));
        }
    }
    if let Some(j) = sector
        .inclusion_proofs
        .iter()
        .position(|p| p.root() != sector.comm_r_last)
    {
        return Err(Error::InvalidInput(format!(
            "{kind} vanilla proof {i}: comm_r_last is not the root of inclusion proof {j}"
        )));
    }
    Ok(())
}

/// Checks `req` (of the proof type `proof`, tree shape `Tree`) and builds its job; the
/// parameter file is looked up in `param_dir`.
pub(crate) fn prepare<Tree: 'static + MerkleTreeTrait>(
    req: &PostRequest<'_>,
    proof: RegisteredPoStProof,
    param_dir: &Path,
) -> Result<PostJob<Tree>> {
    let kind = req.kind;
    check_partition_index(kind, req.partition_index)?;
    let prover_id = crate::c1::prover_id(req.prover_id)?;
    if req.vanilla_proofs.is_empty() {
        return Err(Error::InvalidInput(format!("{kind}: no vanilla proofs")));
    }
    if req.randomness.len() != RANDOMNESS_BYTES {
        return Err(Error::InvalidInput(format!(
            "{kind}: randomness of {} bytes, expected {RANDOMNESS_BYTES}",
            req.randomness.len()
        )));
    }
    let mut randomness = [0u8; RANDOMNESS_BYTES];
    randomness.copy_from_slice(req.randomness);
    let vanilla: Vec<FallbackPoStSectorProof<Tree>> = req
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            crate::job::decode_vanilla(b).map_err(|e| {
                Error::MalformedInput(format!(
                    "{kind} vanilla proof {i} ({} bytes) is not a {proof:?} sector proof: {e}",
                    b.len()
                ))
            })
        })
        .collect::<Result<_>>()?;
    let randomness_safe: <Tree::Hasher as Hasher>::Domain =
        filecoin_proofs::as_safe_commitment(&randomness, "randomness")
            .map_err(|e| Error::InvalidInput(format!("{kind}: {e:#}")))?;
    let prover_id_safe: <Tree::Hasher as Hasher>::Domain =
        filecoin_proofs::as_safe_commitment(&prover_id, "prover_id")
            .map_err(|e| Error::InvalidInput(format!("{kind}: {e:#}")))?;
    let config: PoStConfig = proof.as_v1_config();
    // WinningPoSt proves the one challenged sector: more vanilla proofs (the same one repeated,
    // say) are refused as that, before the checks of each proof and of their order.
    if kind == ProofKind::WinningPost && vanilla.len() != config.sector_count {
        let ids: Vec<u64> = vanilla.iter().map(|v| u64::from(v.sector_id)).collect();
        let repeated = ids.iter().enumerate().find_map(|(i, id)| {
            let j = ids[i + 1..].iter().position(|x| x == id)?;
            Some(format!(
                " (vanilla proofs {i} and {} are both of sector {id})",
                i + 1 + j
            ))
        });
        return Err(Error::InvalidInput(format!(
            "{kind}: {} vanilla proofs{}, expected {}: the challenged sector's",
            vanilla.len(),
            repeated.unwrap_or_default(),
            config.sector_count
        )));
    }
    // One sector's vanilla proof holds one sector proof of `challenge_count` inclusion proofs
    // (filecoin-proofs-api `generate_single_vanilla_proof`). filecoin-proofs would take extra
    // sector proofs into the partition unchecked, so a crafted one fails only in synthesis.
    for (i, v) in vanilla.iter().enumerate() {
        let held = v.vanilla_proof.sectors.len();
        if held != 1 {
            return Err(Error::InvalidInput(format!(
                "{kind} vanilla proof {i} holds {held} sector proofs, expected 1"
            )));
        }
        let challenges = v.vanilla_proof.sectors[0].inclusion_proofs.len();
        if challenges != config.challenge_count {
            return Err(Error::InvalidInput(format!(
                "{kind} vanilla proof {i} holds {challenges} inclusion proofs, expected {} for \
                 {proof:?}",
                config.challenge_count
            )));
        }
    }
    // Before any filecoin-proofs code runs on them (`on_vanilla` stays the last guard).
    let arities = path_arities::<Tree>(u64::from(config.sector_size));
    let checked: Vec<Result<()>> = vanilla
        .par_iter()
        .enumerate()
        .map(|(i, v)| check_sector_proof(kind, i, v, &arities))
        .collect();
    checked.into_iter().collect::<Result<()>>()?;
    // filecoin-proofs' verifiers take a partition's sectors as a map by number: in ascending
    // order, each once. A proof over another order (which filecoin-proofs would make, and our
    // self-check in that order would accept) never verifies there.
    if let Some(i) = vanilla
        .windows(2)
        .position(|w| u64::from(w[0].sector_id) >= u64::from(w[1].sector_id))
    {
        let (a, b) = (
            u64::from(vanilla[i].sector_id),
            u64::from(vanilla[i + 1].sector_id),
        );
        let what = if a == b {
            format!("vanilla proofs {i} and {} are both of sector {a}", i + 1)
        } else {
            format!(
                "vanilla proof {i} is of sector {a}, the next one of sector {b}, a lower number"
            )
        };
        return Err(Error::InvalidInput(format!(
            "{kind}: {what}: the sectors must come in ascending order of their numbers, each \
             once (as the verifiers take them)"
        )));
    }
    let sectors: Vec<PublicSector<_>> = vanilla
        .iter()
        .map(|v| PublicSector {
            id: v.sector_id,
            comm_r: v.comm_r,
        })
        .collect();
    let inputs = |sectors: Vec<PublicSector<_>>, k| fallback::PublicInputs {
        randomness: randomness_safe,
        prover_id: prover_id_safe,
        sectors,
        k,
    };
    let (pub_params, partition_proof, pub_inputs) = match kind {
        ProofKind::WindowPost => {
            let pp = public_params::<Tree>(proof)?;
            if vanilla.len() > pp.sector_count {
                return Err(Error::InvalidInput(format!(
                    "{kind}: {} vanilla proofs for a partition of {} sectors",
                    vanilla.len(),
                    pp.sector_count
                )));
            }
            let partition = inputs(sectors.clone(), Some(req.partition_index));
            let p = on_vanilla("vanilla proofs", || {
                filecoin_proofs::single_partition_vanilla_proofs(&config, &pp, &partition, &vanilla)
            })?;
            // The partition's sectors, as the verifier's partition `partition_index` holds
            // them (challenges do not depend on the partition from V1_2 on).
            (pp, p, inputs(sectors, Some(0)))
        }
        ProofKind::WinningPost => {
            // One vanilla proof per challenged sector: checked above.
            let pp = public_params::<Tree>(proof)?;
            let one = inputs(sectors.clone(), Some(0));
            let p = on_vanilla("vanilla proofs", || {
                filecoin_proofs::single_partition_vanilla_proofs(&config, &pp, &one, &vanilla)
            })?;
            // `verify_winning_post` repeats the challenged sectors once per circuit block.
            let repeated = (0..pp.sector_count).flat_map(|_| sectors.iter().cloned());
            (pp, p, inputs(repeated.collect(), Some(0)))
        }
        _ => return Err(Error::InvalidInput(format!("{kind} is not a PoSt kind"))),
    };
    let ok = on_vanilla("vanilla proofs", || {
        <FallbackPoSt<'_, Tree> as ProofScheme<'_>>::verify(
            &pub_params,
            &pub_inputs,
            &partition_proof,
        )
    })?;
    if !ok {
        return Err(Error::InvalidInput(format!(
            "{kind}: the vanilla proofs do not verify against the randomness, prover id and \
             their comm_r (wrong randomness, sector size or challenges?)"
        )));
    }
    // What `FallbackPoStCompound::circuit` requires of the partition (the witness checks the
    // rest: each sector's challenges and paths).
    if partition_proof.sectors.len() != pub_params.sector_count {
        return Err(Error::InvalidInput(format!(
            "{kind}: {} sector proofs for a circuit of {} sectors",
            partition_proof.sectors.len(),
            pub_params.sector_count
        )));
    }
    let (params_path, _) = crate::srs::post_param_paths::<Tree>(param_dir, &pub_params);
    Ok(PostJob {
        kind,
        proof,
        pub_params,
        pub_inputs,
        vanilla: partition_proof,
        params_path,
    })
}

/// The public parameters of the PoSt proof type `proof` (WindowPoSt's or WinningPoSt's, by its
/// type), as filecoin-proofs sets them up from its v1 config.
fn public_params<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
) -> Result<fallback::PublicParams> {
    let config: PoStConfig = proof.as_v1_config();
    match proof.typ() {
        filecoin_proofs::PoStType::Window => {
            filecoin_proofs::parameters::window_post_public_params::<Tree>(&config)
        }
        filecoin_proofs::PoStType::Winning => {
            filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config)
        }
    }
    .map_err(Error::internal)
}

/// The `.params` file of the PoSt proof type `proof` in `dir` (its `.vk` beside it), under
/// filecoin-proofs' v28 name ([`crate::srs::post_param_paths`]).
///
/// # Errors
/// [`Error::Internal`] if filecoin-proofs cannot set up its public parameters.
#[cfg(any(test, feature = "internals"))]
pub(crate) fn param_path(proof: RegisteredPoStProof, dir: &Path) -> Result<PathBuf> {
    fn of<Tree: 'static + MerkleTreeTrait>(
        proof: RegisteredPoStProof,
        dir: &Path,
    ) -> Result<PathBuf> {
        let pp = public_params::<Tree>(proof)?;
        Ok(crate::srs::post_param_paths::<Tree>(dir, &pp).0)
    }
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), of, proof, dir,)
}

/// Constraints per challenged sector leaf of the PoSt circuit, an upper bound: its Merkle path
/// in the replica's tree (Poseidon, arity 8, then 8 and 2 at 64 GiB) and comm_r's check.
/// WinningPoSt 32 GiB: ~0.37 M constraints for 66 challenges (5.6 k each); WindowPoSt 32 GiB:
/// 125.3 M for 2349 sectors × 10 challenges (5.3 k).
const CONSTRAINTS_PER_CHALLENGE: u64 = 6_500;

/// An upper bound of the constraints of one partition of the PoSt circuit of `pp`, before it is
/// recorded: its challenges at [`CONSTRAINTS_PER_CHALLENGE`], at most a PoRep partition's of the
/// sector size.
pub(crate) fn partition_constraints_bound(pp: &fallback::PublicParams) -> u64 {
    let challenges = (pp.sector_count * pp.challenge_count) as u64;
    (challenges * CONSTRAINTS_PER_CHALLENGE)
        .min(crate::engine::porep_partition_constraints(pp.sector_size))
}

impl<Tree: 'static + MerkleTreeTrait> PostJob<Tree> {
    /// filecoin-proofs' circuit of partition `k` (`FallbackPoStCompound::circuit`), for the
    /// reference synthesis.
    fn circuit(&self, k: usize) -> Result<FallbackPoStCircuit<Tree>> {
        on_vanilla("vanilla proofs", || {
            <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::circuit(
                &self.pub_inputs,
                Default::default(),
                &self.vanilla,
                &self.pub_params,
                Some(k),
            )
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> Job for PostJob<Tree> {
    fn label(&self) -> String {
        format!("{} {:?}", self.kind, self.proof)
    }

    fn partitions(&self) -> usize {
        1
    }

    fn params_path(&self) -> &Path {
        &self.params_path
    }

    fn kind(&self) -> ProofKind {
        self.kind
    }

    /// From its challenges ([`partition_constraints_bound`]): ~0.43 M at 32 GiB WinningPoSt,
    /// a PoRep partition's 130.3 M at 32 GiB WindowPoSt (125.3 M recorded).
    fn constraints_bound(&self) -> u64 {
        partition_constraints_bound(&self.pub_params)
    }

    fn circuit_cache_name_and_key(&self) -> (String, [u8; 32]) {
        let file = crate::job::file_name(&self.params_path);
        circuit::post::cache_name_and_key(&file, &self.pub_params)
    }

    fn compile(&self) -> Result<CompiledCircuit> {
        circuit::post::compile::<Tree>(&self.pub_params)
    }

    fn public_inputs(&self, k: usize) -> Result<Vec<Fr>> {
        <FallbackPoStCompound<Tree> as CompoundProof<'_, FallbackPoSt<'_, Tree>, _>>::generate_public_inputs(
            &self.pub_inputs,
            &self.pub_params,
            Some(k),
        )
        .map_err(Error::internal)
    }

    fn witness_into(&self, layout: &Layout, k: usize, native: bool, w: &mut Witness) -> Result<()> {
        circuit::post::witness_into::<Tree>(
            layout,
            &self.pub_inputs,
            &self.vanilla,
            &self.pub_params,
            k,
            native,
            w,
        )
    }

    fn synthesize(&self, k: usize) -> Result<Assignment> {
        Assignment::synthesize(self.circuit(k)?).map_err(|e| Error::Synthesis {
            partition: k,
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::PrimeField;

    #[test]
    fn post_proof_numbers_follow_the_actors_numbering() {
        use RegisteredPoStProof::*;
        let win = ProofKind::WinningPost;
        let window = ProofKind::WindowPost;
        assert_eq!(
            registered_post_proof(win, 0).unwrap(),
            StackedDrgWinning2KiBV1
        );
        assert_eq!(
            registered_post_proof(win, 3).unwrap(),
            StackedDrgWinning32GiBV1
        );
        assert_eq!(
            registered_post_proof(window, 10).unwrap(),
            StackedDrgWindow2KiBV1_2
        );
        assert_eq!(
            registered_post_proof(window, 13).unwrap(),
            StackedDrgWindow32GiBV1_2
        );
        assert_eq!(
            registered_post_proof(window, 14).unwrap(),
            StackedDrgWindow64GiBV1_2
        );
        assert_eq!(sector_size(window, 13).unwrap(), 32 << 30);
        assert_eq!(sector_size(win, 0).unwrap(), 2048);
        for (kind, v, code) in [
            (win, 10, 101),
            (window, 0, 101),
            (window, 15, 101),
            (window, u64::MAX, 101),
            (window, 8, 103),
            (ProofKind::PorepC2, 0, 101),
        ] {
            let e = registered_post_proof(kind, v).unwrap_err();
            assert_eq!(e.code(), code, "{kind} {v}: {e}");
        }
    }

    #[test]
    fn path_arities_follow_the_tree_shapes() {
        use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB, SectorShape64GiB};
        assert_eq!(path_arities::<SectorShape2KiB>(2048), [8, 8]);
        let mut a = vec![8; 9];
        a.push(8);
        assert_eq!(path_arities::<SectorShape32GiB>(32 << 30), a);
        a.push(2);
        assert_eq!(path_arities::<SectorShape64GiB>(64 << 30), a);
    }

    #[test]
    fn canonical_scalars_are_those_below_the_modulus() {
        use ff::Field;
        let max = (-Fr::ONE).to_repr();
        assert!(is_canonical(&max));
        assert!(is_canonical(&[0; 32]));
        let mut r = max;
        r[0] += 1;
        assert!(!is_canonical(&r));
        assert!(!is_canonical(&[0xff; 32]));
        assert!(!is_canonical(&[0; 31]));
    }

    #[test]
    fn malformed_requests_are_input_errors() {
        let good_rand = [7u8; 32];
        let prover = crate::c1::prover_id_from_actor_id(1000);
        let junk: &[u8] = b"not a vanilla proof";
        let base = PostRequest {
            kind: ProofKind::WindowPost,
            registered_proof: 10,
            vanilla_proofs: &[junk],
            randomness: &good_rand,
            prover_id: &prover,
            partition_index: 0,
        };
        let code = |r: PostRequest<'_>| check(&r).unwrap_err().code();
        assert_eq!(code(base), 100);
        assert_eq!(
            code(PostRequest {
                vanilla_proofs: &[],
                ..base
            }),
            101
        );
        assert_eq!(
            code(PostRequest {
                randomness: &good_rand[..31],
                ..base
            }),
            101
        );
        assert_eq!(
            code(PostRequest {
                prover_id: &prover[..5],
                ..base
            }),
            102
        );
        assert_eq!(
            code(PostRequest {
                registered_proof: 0,
                ..base
            }),
            101
        );
        assert_eq!(
            code(PostRequest {
                kind: ProofKind::WinningPost,
                registered_proof: 0,
                ..base
            }),
            100
        );
    }

    #[test]
    fn window_post_partition_indices_stop_at_the_deadlines_limit() {
        let rand = [7u8; 32];
        let prover = crate::c1::prover_id_from_actor_id(1000);
        let junk: &[&[u8]] = &[b"not a vanilla proof"];
        let req = |kind, registered_proof, partition_index| PostRequest {
            kind,
            registered_proof,
            vanilla_proofs: junk,
            randomness: &rand,
            prover_id: &prover,
            partition_index,
        };
        // Past the limit: refused before the vanilla proofs are read (no panic, whatever the
        // value); below it, the junk vanilla proof is what is refused (100).
        for index in [3000, 3001, 1 << 40, usize::MAX - 1, usize::MAX] {
            let e = check(&req(ProofKind::WindowPost, 13, index)).unwrap_err();
            assert_eq!(e.code(), 101, "{index}: {e}");
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid input: window-post: partition_index {index} is out of range: a \
                     deadline holds at most 3000 partitions (0 to 2999)"
                )
            );
        }
        for index in [0, 1, 2999] {
            let e = check(&req(ProofKind::WindowPost, 13, index)).unwrap_err();
            assert_eq!(e.code(), 100, "{index}: {e}");
        }
        // WinningPoSt has no partitions: the index is not looked at.
        let e = check(&req(ProofKind::WinningPost, 0, usize::MAX)).unwrap_err();
        assert_eq!(e.code(), 100, "{e}");
        assert!(check_partition_index(ProofKind::WinningPost, usize::MAX).is_ok());
        assert_eq!(MAX_PARTITIONS_PER_DEADLINE, 3000);
    }
}
