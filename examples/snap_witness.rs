//! Core-seconds of the SnapDeals witness of one partition, native (what the engine runs by
//! default: one task per challenge, `cuzk::circuit::native::snap`) and by the gadgets
//! (`CUZK_SYNTHESIS=gadget`: one synthesis per partition, one thread), on real-shape inputs of
//! any size from `cuzk_dev::snapgen` (no sealing, no parameters), and whether the two are
//! equal value for value.
//!
//! ```text
//! cargo run --release --features test-hooks --example snap_witness -- 32GiB [partitions] [reps]
//! ```
//! Prints the generation time of the inputs, then per partition and run: the native witness on
//! every core and on one thread, and `EmptySectorUpdateCircuit::synthesize` into bellperson's
//! `WitnessCS` (values only, no constraints) on the calling thread — each as wall seconds and
//! the process's CPU seconds meanwhile (core-seconds; on a busy host the one-thread wall time
//! overstates them) —, and whether the native inputs and aux values equal the gadgets'. The
//! native witness writes into buffers written once before, as the engine's pooled ones; the
//! gadgets' `WitnessCS` grows its own vectors. The native witness's layout is its own count
//! (`native::snap::counted_layout`), not a recording of the circuit: the equality checks it.

use std::time::Instant;

use anyhow::{anyhow, Context};
use bellperson::util_cs::witness_cs::WitnessCS;
use bellperson::{Circuit, ConstraintSystem};
use blstrs::Scalar as Fr;
use cuzk::circuit::native::snap as native;
use cuzk::circuit::Witness;
use cuzk_dev::cputime::process_cpu_seconds;
use ff::Field;
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
    let layout = native::counted_layout::<Tree>(&pp)?;
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let cores = rayon::current_num_threads();
    for k in 0..parts.min(pp.partition_count) {
        let vanilla: PartitionProof<Tree> = bincode::deserialize(&snap.vanilla_proofs[k])?;
        for r in 0..reps {
            // Buffers written once before (the engine's are pooled): the page faults of a new
            // 2.6 GB vector (~1.3 s of a core here at 32 GiB) are not the witness's.
            let buffers = || Witness {
                input: vec![Fr::ZERO; layout.num_inputs()],
                aux: vec![Fr::ZERO; layout.num_aux()],
            };
            let mut w = buffers();
            let (t, c) = (Instant::now(), process_cpu_seconds());
            native::witness_into::<Tree>(&layout, &pub_inputs, &vanilla, &pp, k, &mut w)?;
            let (all_wall, all_cpu) = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
            let mut w1 = buffers();
            let (t, c) = (Instant::now(), process_cpu_seconds());
            one.install(|| {
                native::witness_into::<Tree>(&layout, &pub_inputs, &vanilla, &pp, k, &mut w1)
            })?;
            let (one_wall, one_cpu) = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
            let same_on_one_thread = w == w1;
            drop(w1);
            let circuit = EmptySectorUpdateCompound::<Tree>::circuit(
                &pub_inputs,
                (),
                &vanilla,
                &pp,
                Some(k),
            )?;
            let mut cs = WitnessCS::<Fr>::new();
            let (t, c) = (Instant::now(), process_cpu_seconds());
            circuit.synthesize(&mut cs)?;
            let (gadget_wall, gadget_cpu) = (t.elapsed().as_secs_f64(), process_cpu_seconds() - c);
            let equal = same_on_one_thread
                && w.input[..] == *cs.scalar_inputs()
                && w.aux[..] == *cs.aux_slice();
            println!(
                "partition {k} run {r}: {} aux, {} inputs; native {all_wall:.2} s on {cores} \
                 threads ({all_cpu:.2} core-s), {one_wall:.2} s on one thread ({one_cpu:.2} \
                 core-s); gadget {gadget_wall:.2} s on one thread ({gadget_cpu:.2} core-s, \
                 {:.1}x the native core-s); native == gadget: {equal}",
                cs.aux_slice().len(),
                cs.scalar_inputs().len(),
                gadget_cpu / all_cpu
            );
            if !equal {
                return Err(anyhow!(
                    "partition {k}: the native witness is not the gadgets'"
                ));
            }
        }
    }
    Ok(())
}
