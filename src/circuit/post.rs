//! The PoSt (`storage-proofs-post` `FallbackPoStCircuit`) side of the compiled circuit: the blank
//! circuit of one sector that is recorded, the cache key of a PoSt circuit, and the witness of
//! a partition: natively ([`super::native::post`]) or by the circuit of one real sector per
//! task.
//!
//! A PoSt partition has no prefix beyond the constant one: the circuit is one `sector_<i>`
//! block per sector (inside its `outer namespace`, [`Blocks::POST`]), each proving comm_r =
//! H(comm_c, comm_r_last) and its challenges' inclusion paths in comm_r_last. WindowPoSt's
//! circuit has `sector_count` sectors of `challenge_count` challenges (2 × 10 at 2 KiB,
//! 2349 × 10 at 32 GiB); WinningPoSt's has one block per challenge (66 × 1).

use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_post::fallback::{self, FallbackPoStCircuit, Sector};

use super::{witness, Blocks, CompiledCircuit, Layout, Witness};
use crate::error::{Error, Result};

/// Public parameters of one PoSt circuit (sector size, sectors and challenges per partition).
pub type PublicParams = fallback::PublicParams;

/// Public inputs of a PoSt (randomness, prover id, the sectors' numbers and comm_r).
pub type PublicInputs<Tree> =
    fallback::PublicInputs<<<Tree as MerkleTreeTrait>::Hasher as filecoin_hashers::Hasher>::Domain>;

/// The vanilla proof of one partition: one sector proof (comm_c, comm_r_last and the
/// challenges' inclusion proofs in comm_r_last) per sector of the circuit.
pub type Vanilla<Tree> = fallback::Proof<<Tree as MerkleTreeTrait>::Proof>;

/// The PoSt circuit of one partition.
pub type Circuit<Tree> = FallbackPoStCircuit<Tree>;

/// Cache name and key of the compiled circuit of `pp`: the name of its parameter file (whose
/// suffix is filecoin-proofs' digest of the public parameters' identifier: sector size,
/// challenges, sectors) and its sectors and challenges per partition.
pub fn cache_name_and_key(params_file_name: &str, pp: &PublicParams) -> (String, [u8; 32]) {
    let key = super::cache::key(&[
        b"post",
        params_file_name.as_bytes(),
        &(pp.sector_count as u64).to_le_bytes(),
        &(pp.challenge_count as u64).to_le_bytes(),
    ]);
    let stem = params_file_name
        .strip_suffix(".params")
        .unwrap_or(params_file_name);
    (stem.to_string(), key)
}

/// The blank circuit of one sector of `pp`: the recorded block.
fn one_sector<Tree: 'static + MerkleTreeTrait>(pp: &PublicParams) -> Circuit<Tree> {
    FallbackPoStCircuit {
        prover_id: None,
        sectors: vec![Sector::blank_circuit(pp)],
    }
}

/// Records the PoSt circuit of `pp` (see the [module docs of `circuit`](super)): one sector,
/// repeated `pp.sector_count` times.
///
/// # Errors
/// [`Error::Internal`] if the circuit does not have the expected block shape.
pub fn compile<Tree: 'static + MerkleTreeTrait>(pp: &PublicParams) -> Result<CompiledCircuit> {
    CompiledCircuit::compile(one_sector::<Tree>(pp), Blocks::POST, pp.sector_count)
}

/// The layout of the PoSt circuit of `pp` without assembling its matrices.
///
/// # Errors
/// As [`compile`].
#[cfg(any(test, feature = "internals"))]
pub fn layout<Tree: 'static + MerkleTreeTrait>(pp: &PublicParams) -> Result<Layout> {
    super::layout_of(one_sector::<Tree>(pp), Blocks::POST, pp.sector_count)
}

/// The witness of partition `k` from its vanilla partition proof (one sector proof per circuit
/// sector, as filecoin-proofs' `single_partition_vanilla_proofs` makes it) and the public
/// inputs, paired as `FallbackPoStCompound::circuit` pairs them: generated one sector per task in
/// parallel by the gadgets (`native = false`) or natively ([`super::native::post`]), in new
/// vectors ([`witness_into`] writes into given ones).
///
/// The vanilla proof, not the circuit, is the input: the circuit's `AuthPath`s do not expose
/// their values, which the native witness reads.
///
/// # Errors
/// As [`witness_into`].
// The engine writes into pooled buffers ([`witness_into`]); this form serves tools and tests.
#[cfg(any(test, feature = "internals"))]
pub fn witness<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &PublicInputs<Tree>,
    vanilla: &Vanilla<Tree>,
    pp: &PublicParams,
    k: usize,
    native: bool,
) -> Result<Witness> {
    let mut w = Witness::default();
    witness_into::<Tree>(layout, public_inputs, vanilla, pp, k, native, &mut w)?;
    Ok(w)
}

/// [`witness()`] into `w`'s vectors, in their own allocations when they have capacity (a pooled
/// host buffer keeps its address: see [`witness::generate_into`]).
///
/// # Errors
/// [`Error::InvalidInput`] when the vanilla proof does not fit the circuit (its sector count is
/// not the layout's, no public sectors for partition `k`, a sector with another challenge count,
/// a path of another shape); [`Error::Synthesis`] from the witness; [`Error::Internal`] when a
/// vector of `w` has capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &PublicInputs<Tree>,
    vanilla: &Vanilla<Tree>,
    pp: &PublicParams,
    k: usize,
    native: bool,
    w: &mut Witness,
) -> Result<()> {
    use super::native::post as checked;
    if native {
        return checked::witness_into::<Tree>(layout, public_inputs, vanilla, pp, k, w);
    }
    let sectors = checked::public_sectors::<Tree>(layout, public_inputs, vanilla, pp, k)?;
    witness::generate_into(
        layout,
        k,
        |i| -> Result<Circuit<Tree>> {
            // The checks of the native path: a malformed path would panic in the gadgets.
            let proof = &vanilla.sectors[i];
            checked::sector_paths::<Tree>(pp, proof)
                .map_err(|m| Error::InvalidInput(format!("partition {k}, sector {i}: {m}")))?;
            let sector = Sector::circuit(sectors[i], proof)
                .map_err(|e| Error::InvalidInput(format!("partition {k}, sector {i}: {e:#}")))?;
            Ok(FallbackPoStCircuit {
                prover_id: Some(public_inputs.prover_id.into()),
                sectors: vec![sector],
            })
        },
        w,
    )
}
