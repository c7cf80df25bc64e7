//! Witness walk of the 2 KiB fixture, for profiling (callgrind, perf) and wall-time checks.
//!
//! ```text
//! cargo run --release --example witness_profile -- one  [reps]   # ONE challenge (prefix + block 0)
//! cargo run --release --example witness_profile -- part [reps]   # the whole partition 0 (compiled witness)
//! cargo run --release --example witness_profile -- ref  [reps]   # the reference synthesis of partition 0
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind target/release/examples/witness_profile one 1
//! ```
//! The fixture is read from `CUZK_FIXTURE_DIR` or the default cache directory (never built
//! here); the compiled circuit is cached under `CUZK_CIRCUIT_CACHE` or `target/witness-profile`
//! so that a profiled run only loads it.

use std::path::PathBuf;
use std::time::Instant;

use cuzk::circuit::{cache, porep, witness};
use cuzk_dev::fixture::{default_fixture_dir_for, Fixture, FixtureSize};
use filecoin_proofs::{DefaultPieceHasher, SectorShape2KiB};
use storage_proofs_core::compound_proof::{self, CompoundProof};
use storage_proofs_porep::stacked::{self, StackedCompound, StackedDrg};

type Tree = SectorShape2KiB;
type Compound = StackedCompound<Tree, DefaultPieceHasher>;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("one");
    let reps: usize = args.get(2).map(|r| r.parse()).transpose()?.unwrap_or(1);
    let dir = std::env::var_os("CUZK_FIXTURE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| default_fixture_dir_for(FixtureSize::Kib2));
    let f = Fixture::load_for(&dir, FixtureSize::Kib2)?;
    let c1 = f.c1_output()?;

    let config = c1.registered_proof.as_v1_config();
    let vanilla: Vec<Vec<stacked::Proof<Tree, DefaultPieceHasher>>> = c1
        .vanilla_proofs
        .try_into()
        .map_err(|e: anyhow::Error| anyhow::anyhow!("vanilla proofs: {e:#}"))?;
    let comm_r = filecoin_proofs::as_safe_commitment(&c1.comm_r, "comm_r")?;
    let comm_d = filecoin_proofs::as_safe_commitment(&c1.comm_d, "comm_d")?;
    let public_inputs = stacked::PublicInputs {
        replica_id: blstrs::Scalar::from(c1.replica_id).into(),
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(c1.seed),
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(&config)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let pp =
        <Compound as CompoundProof<StackedDrg<'_, Tree, DefaultPieceHasher>, _>>::setup(&setup)?;
    let vp = &pp.vanilla_params;

    let cache_dir = std::env::var_os("CUZK_CIRCUIT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/witness-profile"));
    let (name, key) = porep::cache_name_and_key("witness-profile-2kib.params", vp);
    let (cc, _) = cache::load_or_build(Some(&cache_dir), &name, &key, || porep::compile(vp))?;
    let k = 0;
    let part = &vanilla[k];

    for _ in 0..reps {
        let t = Instant::now();
        let n = match mode {
            "one" => {
                // The task of challenge 0 alone: prefix + block 0, as `porep::witness` runs it.
                let one = cuzk::circuit::Layout {
                    challenges: 1,
                    ..cc.layout
                };
                let w = witness::generate(&one, k, |i| {
                    let v = vec![part[i].clone()];
                    Compound::circuit(&public_inputs, (), &v, vp, Some(k))
                        .map_err(cuzk::Error::internal)
                })?;
                w.aux.len()
            }
            "part" => porep::witness(&cc.layout, &public_inputs, part, vp, k, false)?
                .aux
                .len(),
            "ref" => {
                let circuit = Compound::circuit(&public_inputs, (), part, vp, Some(k))?;
                cuzk::synth::Assignment::synthesize(circuit)?.aux.len()
            }
            m => anyhow::bail!("mode {m}: one, part or ref"),
        };
        eprintln!("{mode}: {n} aux in {:.3} s", t.elapsed().as_secs_f64());
    }
    Ok(())
}
