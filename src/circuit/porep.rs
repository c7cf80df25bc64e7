//! The PoRep (`storage-proofs-porep` `StackedCircuit`) side of the compiled circuit: the blank
//! circuit of one challenge that is recorded, the cache key of a proof type, and the circuit of
//! one real challenge that witness generation runs.

use filecoin_proofs::DefaultPieceHasher;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_porep::stacked::{
    self, Challenges, StackedCircuit, StackedCompound, StackedDrg,
};

use super::{witness, CompiledCircuit, Layout, Witness};
use crate::error::{Error, Result};

type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;
type Vanilla<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;

/// Public parameters of one PoRep proof type.
pub type PublicParams<Tree> = stacked::PublicParams<Tree>;

/// Public inputs of one PoRep sector (replica id, comm_d, comm_r, seed).
pub type PublicInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as filecoin_hashers::Hasher>::Domain,
    <DefaultPieceHasher as filecoin_hashers::Hasher>::Domain,
>;

/// Cache name and key of the compiled circuit of `pp`: the name of its parameter file (whose
/// suffix is filecoin-proofs' digest of the public parameters' identifier: graph, challenges,
/// layers, tree shape) and its challenges per partition.
pub fn cache_name_and_key<Tree: 'static + MerkleTreeTrait>(
    params_file_name: &str,
    pp: &PublicParams<Tree>,
) -> (String, [u8; 32]) {
    let challenges = pp.challenges.num_challenges_per_partition() as u64;
    let key = super::cache::key(&[
        b"porep",
        params_file_name.as_bytes(),
        &challenges.to_le_bytes(),
        &(pp.num_layers as u64).to_le_bytes(),
    ]);
    let stem = params_file_name
        .strip_suffix(".params")
        .unwrap_or(params_file_name);
    (stem.to_string(), key)
}

/// Records the PoRep circuit of `pp` (see the [module docs of `circuit`](super)).
///
/// # Errors
/// [`Error::Internal`] if the circuit does not have the expected prefix/challenge shape.
pub fn compile<Tree: 'static + MerkleTreeTrait>(
    pp: &PublicParams<Tree>,
) -> Result<CompiledCircuit> {
    let challenges = pp.challenges.num_challenges_per_partition();
    let mut one = pp.clone();
    one.challenges = one_challenge(&pp.challenges);
    let blank = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(&one);
    CompiledCircuit::compile(blank, super::Blocks::POREP, challenges)
}

/// The layout of the PoRep circuit of `pp` (prefix, one challenge block, challenges per
/// partition) from the recording of one challenge, without assembling the partition's
/// matrices: what witness generation needs (tests and benches of the witness on large
/// sectors, e.g. a 32 GiB partition, whose full matrices take ~6 GB).
///
/// # Errors
/// As [`compile`].
#[cfg(any(test, feature = "internals"))]
pub fn layout<Tree: 'static + MerkleTreeTrait>(pp: &PublicParams<Tree>) -> Result<Layout> {
    let mut one = pp.clone();
    one.challenges = one_challenge(&pp.challenges);
    let blank = <Compound<Tree> as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::blank_circuit(&one);
    super::layout_of(
        blank,
        super::Blocks::POREP,
        pp.challenges.num_challenges_per_partition(),
    )
}

fn one_challenge(c: &Challenges) -> Challenges {
    match c {
        Challenges::Interactive(_) => Challenges::new_interactive(1),
        Challenges::Synth(_) => Challenges::new_synthetic(1),
        Challenges::Ni(_) => Challenges::new_non_interactive(1),
    }
}

/// The witness of partition `k` from its vanilla proofs (one per challenge), generated one
/// challenge per task in parallel by the gadgets (`native = false`) or natively
/// ([`super::native`]), in new vectors ([`witness_into`] writes into given ones).
///
/// # Errors
/// [`Error::InvalidInput`] when the vanilla proofs do not make a circuit (inconsistent
/// commitments) or their count is not the layout's; [`Error::Synthesis`] from the witness.
// The engine writes into pooled buffers ([`witness_into`]); this form serves tools and tests.
#[cfg(any(test, feature = "internals"))]
pub fn witness<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &PublicInputs<Tree>,
    vanilla: &[Vanilla<Tree>],
    pp: &PublicParams<Tree>,
    k: usize,
    native: bool,
) -> Result<Witness> {
    let mut w = Witness::default();
    witness_into(layout, public_inputs, vanilla, pp, k, native, &mut w)?;
    Ok(w)
}

/// [`witness()`] into `w`'s vectors, in their own allocations when they have capacity (a pooled
/// host buffer keeps its address: see [`witness::generate_into`]).
///
/// # Errors
/// As [`witness()`]; [`Error::Internal`] when a vector of `w` has capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &PublicInputs<Tree>,
    vanilla: &[Vanilla<Tree>],
    pp: &PublicParams<Tree>,
    k: usize,
    native: bool,
    w: &mut Witness,
) -> Result<()> {
    if native {
        return super::native::block::witness_into(layout, public_inputs, vanilla, pp, k, w);
    }
    if vanilla.len() != layout.challenges {
        return Err(Error::InvalidInput(format!(
            "partition {k}: {} vanilla proofs for {} challenges",
            vanilla.len(),
            layout.challenges
        )));
    }
    witness::generate_into(
        layout,
        k,
        |i| -> Result<StackedCircuit<Tree, DefaultPieceHasher>> {
            let one = vec![vanilla[i].clone()];
            <Compound<Tree> as CompoundProof<_, _>>::circuit(public_inputs, (), &one, pp, Some(k))
                .map_err(|e| Error::InvalidInput(format!("partition {k}, challenge {i}: {e:#}")))
        },
        w,
    )
}
