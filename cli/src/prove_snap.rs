//! `cuzk prove-snap`: SnapDeals proofs of a `snap.json` (`cuzk gen-snap`'s output: the update
//! proof type, the three commitments and the vanilla partition proofs as Curio sends them), each
//! checked with filecoin-proofs-api's `verify_empty_sector_update_proof`; `--repeat` / `--jobs`
//! as `cuzk prove` (the first proof alone, the cold one).

use clap::Args;
use cuzk::snap::SnapRequest;
use cuzk_dev::snapgen::{GeneratedSnap, SnapFile};

use super::generated::RunArgs;
use super::Failure;

#[derive(Args)]
pub(crate) struct ProveSnapArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

pub(crate) fn prove_snap(a: ProveSnapArgs) -> Result<(), Failure> {
    let g = a.run.read(|f: &SnapFile| GeneratedSnap::from_file(f))?;
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
