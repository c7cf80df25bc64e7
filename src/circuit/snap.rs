//! The SnapDeals (`storage-proofs-update` `EmptySectorUpdateCircuit`) side of the compiled
//! circuit: the blank circuit of one partition that is recorded, its cache key, and the gadget
//! witness of one real partition (the native one is [`super::native::snap`]).
//!
//! A partition's circuit is a prefix — the public inputs (`k` and `h_select` packed, comm_r_old,
//! comm_d_new, comm_r_new), phi, comm_r_old/new = H(comm_c, root_r_old/new), the partition's
//! apex tree and its path to comm_d_new, and the challenge bits of every challenge (Poseidon
//! digests of comm_r_new, split into bits) — then one block per challenge
//! ([`Blocks::SNAP`]: its high bits, rho, the new label, the Merkle paths in TreeROld, TreeRNew
//! and TreeDNew up to the apex leaf). A block reads its own challenge's bits of the prefix, so
//! the blocks are not copies of one recorded block: the whole partition is recorded
//! ([`CompiledCircuit::compile_whole`]) and its gadget witness made by one synthesis
//! ([`witness::generate_whole_into`]); the native witness computes the prefix's values that
//! the blocks read first, then runs one task per block.
//!
//! Shapes (filecoin-proofs' `PublicParams::from_sector_size`): 2 KiB — 1 partition of 10
//! challenges, 8 apex leaves; 8 MiB — 4 × 10, 128; 512 MiB — 16 × 86, 128; 32 GiB — 16 × 86,
//! 128 (81,049,499 constraints per partition); 64 GiB — 16 × 86, 128.

use storage_proofs_core::merkle::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::EmptySectorUpdateCircuit;

use super::{witness, Blocks, CompiledCircuit, Layout, Witness};
use crate::error::Result;

/// Public parameters of the SnapDeals circuit of one sector size (challenges, partitions,
/// apex leaves).
pub type PublicParams = storage_proofs_update::PublicParams;

/// The SnapDeals circuit of one partition.
pub type Circuit<Tree> = EmptySectorUpdateCircuit<Tree>;

/// Cache name and key of the compiled circuit of `pp`: the name of its parameter file (whose
/// suffix is filecoin-proofs' digest of the public parameters' identifier: the sector's nodes)
/// and its challenges, partitions and apex leaves.
pub fn cache_name_and_key(params_file_name: &str, pp: &PublicParams) -> (String, [u8; 32]) {
    let key = super::cache::key(&[
        b"snap",
        params_file_name.as_bytes(),
        &(pp.sector_nodes as u64).to_le_bytes(),
        &(pp.challenge_count as u64).to_le_bytes(),
        &(pp.partition_count as u64).to_le_bytes(),
        &(pp.apex_leaf_count as u64).to_le_bytes(),
    ]);
    let stem = params_file_name
        .strip_suffix(".params")
        .unwrap_or(params_file_name);
    (stem.to_string(), key)
}

/// Records the SnapDeals circuit of `pp` whole (see the [module docs](self)): its blank
/// circuit, `pp.challenge_count` blocks.
///
/// # Errors
/// [`crate::Error::Internal`] if the circuit does not have the expected block shape.
pub fn compile<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    pp: &PublicParams,
) -> Result<CompiledCircuit> {
    CompiledCircuit::compile_whole(
        Circuit::<Tree>::blank(pp.clone()),
        Blocks::SNAP,
        pp.challenge_count,
    )
}

/// The layout [`compile`] records, without assembling the matrices.
///
/// # Errors
/// As [`compile`].
#[cfg(any(test, feature = "internals"))]
pub fn layout<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    pp: &PublicParams,
) -> Result<Layout> {
    super::layout_of_whole(
        Circuit::<Tree>::blank(pp.clone()),
        Blocks::SNAP,
        pp.challenge_count,
    )
}

/// The gadget witness of one partition's `circuit` (as `EmptySectorUpdateCompound::circuit` builds it)
/// into `w`'s vectors, by its gadgets in one synthesis ([`witness::generate_whole_into`]).
///
/// # Errors
/// [`crate::Error::Synthesis`] from the witness; [`crate::Error::Internal`] when a vector of
/// `w` has capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    layout: &Layout,
    circuit: Circuit<Tree>,
    k: usize,
    w: &mut Witness,
) -> Result<()> {
    witness::generate_whole_into(layout, k, circuit, w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::constants::{SectorShape2KiB, SectorShape8MiB};

    /// The recorded shapes of the small sizes (storage-proofs-update 19.1): one prefix, one
    /// block per challenge, within the engine's bound before recording.
    #[test]
    fn the_small_circuits_record_one_block_per_challenge() {
        let cc = compile::<SectorShape2KiB>(&PublicParams::from_sector_size(2048)).unwrap();
        let l = cc.layout;
        assert_eq!(l.challenges, 10);
        assert_eq!(l.num_inputs(), 5);
        assert_eq!(l.block.inputs, 0);
        // The counts `snap::partition_constraints_bound` is checked against.
        assert_eq!(l.num_constraints(), 1_705_044);
        assert_eq!((l.prefix.constraints, l.block.constraints), (319_169, 138_587));
        let pp = PublicParams::from_sector_size(8 << 20);
        let l8 = super::super::layout_of_whole(
            Circuit::<SectorShape8MiB>::blank(pp.clone()),
            Blocks::SNAP,
            10,
        )
        .unwrap();
        assert_eq!(l8.num_constraints(), 10_007_508);
        assert_eq!((l8.prefix.aux, l8.block.aux), (5_849_349, 414_869));
    }
}
