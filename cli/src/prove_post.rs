//! `cuzk prove-post`: WindowPoSt or WinningPoSt proofs of a `post.json` (`cuzk gen-post`'s
//! output: the proof type, randomness, prover id, sectors and vanilla proofs as Curio sends
//! them), each checked with filecoin-proofs' `verify_window_post` / `verify_winning_post`;
//! `--repeat` / `--jobs` as `cuzk prove` (the first proof alone, the cold one).

use clap::Args;
use cuzk::{Error, ProofKind};
use cuzk_dev::postgen::{self, GeneratedPost, PostFile};

use super::generated::RunArgs;
use super::Failure;

#[derive(Args)]
pub(crate) struct ProvePostArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
}

pub(crate) fn prove_post(a: ProvePostArgs) -> Result<(), Failure> {
    let g = a.run.read(|f: &PostFile| GeneratedPost::from_file(f))?;
    let number = g
        .registered_proof_number()
        .map_err(|e| Error::InvalidInput(format!("{e:#}")))?;
    let run = a.run.start()?;
    let kind = g.kind();
    say!(
        "proving {:?} ({} sector(s), {} vanilla proof bytes){}",
        g.spec.registered_proof,
        g.sectors.len(),
        g.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        run.describe()
    );
    let vanilla: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    let prove = || -> Result<Vec<u8>, Failure> {
        let (engine, options) = (&run.engine, &run.options);
        Ok(match kind {
            ProofKind::WinningPost => engine.prove_winning_post(
                number,
                &vanilla,
                &g.randomness,
                &g.spec.prover_id,
                options,
            )?,
            _ => engine.prove_window_post(
                number,
                &vanilla,
                &g.randomness,
                &g.spec.prover_id,
                0,
                options,
            )?,
        }
        .proof)
    };
    run.repeat("filecoin-proofs verifier", prove, |proof| {
        postgen::verify_with_filecoin_proofs(&g, proof)
    })
}
