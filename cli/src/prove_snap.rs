//! `cuzk prove-snap`: SnapDeals proofs of a `snap.json` (`cuzk gen-snap`'s output: the update
//! proof type, the three commitments and the vanilla partition proofs as Curio sends them), each
//! checked with filecoin-proofs-api's `verify_empty_sector_update_proof`; `--repeat` / `--jobs`
//! as `cuzk prove` (the first proof alone, the cold one). Before the vanilla proofs are decoded
//! and checked (seconds at 32 GiB): the proof type (the library's error: 101, exit 11, for a
//! number that is no update proof type), then the parameter files (20 / 21).

use clap::Args;
use cuzk::snap::SnapRequest;
use cuzk::srs::ParamSet;
use cuzk_dev::snapgen::{GeneratedSnap, SnapFile};

use super::generated::RunArgs;
use super::Failure;

#[derive(Args)]
pub(crate) struct ProveSnapArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

pub(crate) fn prove_snap(a: ProveSnapArgs) -> Result<(), Failure> {
    let f: SnapFile = a.run.read()?;
    let proof_type = cuzk::snap::registered_update_proof(f.registered_proof)?;
    a.run.check_params(ParamSet::Snap(proof_type))?;
    let g = GeneratedSnap::from_file(&f).map_err(|e| a.run.malformed(&e))?;
    let run = a.run.start()?;
    say!(
        "proving {:?} ({} partition(s), {} vanilla proof bytes){}",
        g.registered_proof,
        g.vanilla_proofs.len(),
        g.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        run.describe()
    );
    let vanilla: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    let req = SnapRequest {
        registered_proof: g.to_file().registered_proof,
        vanilla_proofs: &vanilla,
        comm_r_old: &g.comm_r_old,
        comm_r_new: &g.comm_r_new,
        comm_d_new: &g.comm_d_new,
        sector_size: None,
    };
    run.repeat(
        "verify_empty_sector_update_proof",
        || Ok(run.engine.prove_snap_deals(&req, &run.options)?.proof),
        |proof| g.verify_with_filecoin_proofs(proof),
    )
}
