//! The PoSt (`storage-proofs-post` `FallbackPoStCircuit`) side of the compiled circuit: the blank
//! circuit of one sector that is recorded, the cache key of a PoSt circuit, and the circuit of
//! one real sector that witness generation runs.
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

/// The witness of partition `k` of `circuit` (the partition's full circuit, as
/// `FallbackPoStCompound::circuit` builds it) into `w`'s vectors: the gadgets of one sector
/// per task, in parallel ([`witness::generate_into`]; PoSt has no native witness).
///
/// # Errors
/// [`Error::InvalidInput`] when the circuit's sector count is not the layout's;
/// [`Error::Synthesis`] from the witness; [`Error::Internal`] when a vector of `w` has
/// capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    circuit: &Circuit<Tree>,
    k: usize,
    w: &mut Witness,
) -> Result<()> {
    if circuit.sectors.len() != layout.challenges {
        return Err(Error::InvalidInput(format!(
            "partition {k}: {} sectors for a circuit of {}",
            circuit.sectors.len(),
            layout.challenges
        )));
    }
    witness::generate_into(
        layout,
        k,
        |i| -> Result<Circuit<Tree>> {
            Ok(FallbackPoStCircuit {
                prover_id: circuit.prover_id,
                sectors: vec![circuit.sectors[i].clone()],
            })
        },
        w,
    )
}
