//! Core-seconds of the SnapDeals witness of one partition, by the gadgets (what the engine runs:
//! one synthesis per partition, one thread), on real-shape inputs of any size from
//! `cuzk_dev::snapgen` (no sealing, no parameters).
//!
//! ```text
//! cargo run --release --features test-hooks --example snap_witness -- 32GiB [partitions] [reps]
//! ```
//! Prints the generation time of the inputs, then per partition its aux count and the seconds
//! of `EmptySectorUpdateCircuit::synthesize` into bellperson's `WitnessCS` (values only, no
//! constraints), on the calling thread.

use std::time::Instant;

use anyhow::{anyhow, Context};
use bellperson::util_cs::witness_cs::WitnessCS;
use bellperson::{Circuit, ConstraintSystem};
use blstrs::Scalar as Fr;
use filecoin_proofs::{with_shape, MerkleTreeTrait, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use storage_proofs_core::compound_proof::CompoundProof;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::{
    EmptySectorUpdateCompound, PartitionProof, PublicInputs, PublicParams,
};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let size = args.get(1).map(String::as_str).unwrap_or("2KiB");
    let parts: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let reps: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(1);
    let proof = match size {
        "2KiB" => RegisteredUpdateProof::StackedDrg2KiBV1,
        "8MiB" => RegisteredUpdateProof::StackedDrg8MiBV1,
        "512MiB" => RegisteredUpdateProof::StackedDrg512MiBV1,
        "32GiB" => RegisteredUpdateProof::StackedDrg32GiBV1,
        "64GiB" => RegisteredUpdateProof::StackedDrg64GiBV1,
        s => {
            return Err(anyhow!(
                "unknown sector size {s} (2KiB, 8MiB, 512MiB, 32GiB, 64GiB)"
            ))
        }
    };
    let t = Instant::now();
    let snap = cuzk_dev::snapgen::generate(proof, [7; 32])?;
    println!(
        "inputs of {size} generated in {:.2} s",
        t.elapsed().as_secs_f64()
    );
    with_shape!(
        u64::from(proof.sector_size()),
        measure,
        proof,
        &snap,
        parts,
        reps
    )
}

fn measure<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    proof: RegisteredUpdateProof,
    snap: &cuzk_dev::snapgen::GeneratedSnap,
    parts: usize,
    reps: usize,
) -> anyhow::Result<()> {
    let pp = PublicParams::from_sector_size(u64::from(proof.sector_size()));
    let config = SectorUpdateConfig::from_porep_config(&proof.as_v1_config());
    fn domain<D: From<Fr>>(b: &[u8; 32]) -> anyhow::Result<D> {
        let fr = Option::<Fr>::from(Fr::from_bytes_le(b)).context("commitment not in the field")?;
        Ok(fr.into())
    }
    let pub_inputs = PublicInputs {
        k: pp.partition_count,
        comm_r_old: domain(&snap.comm_r_old)?,
        comm_d_new: domain(&snap.comm_d_new)?,
        comm_r_new: domain(&snap.comm_r_new)?,
        h: config.h,
    };
    for k in 0..parts.min(pp.partition_count) {
        let vanilla: PartitionProof<Tree> = bincode::deserialize(&snap.vanilla_proofs[k])?;
        for r in 0..reps {
            let circuit = EmptySectorUpdateCompound::<Tree>::circuit(
                &pub_inputs,
                (),
                &vanilla,
                &pp,
                Some(k),
            )?;
            let mut cs = WitnessCS::<Fr>::new();
            let t = Instant::now();
            circuit.synthesize(&mut cs)?;
            println!(
                "partition {k} run {r}: {} aux, {} inputs, gadget witness {:.2} s on one thread",
                cs.aux_slice().len(),
                cs.scalar_inputs().len(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}
