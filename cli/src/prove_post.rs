//! `cuzk prove-post`: WindowPoSt or WinningPoSt proofs of a `post.json` (`cuzk gen-post`'s
//! output: the proof type, randomness, prover id, sectors and vanilla proofs as Curio sends
//! them), each checked with filecoin-proofs' `verify_window_post` / `verify_winning_post`;
//! `--repeat` / `--jobs` as `cuzk prove` (the first proof alone, the cold one). The file's
//! `partition_index` goes to `Engine::prove_window_post` (the challenges of WindowPoSt V1_1 do
//! not depend on it: the proof is one of the file's sectors for any index) and must be below the
//! most partitions a deadline holds (3000); a WinningPoSt's must be 0 (invalid input, exit 11).
//! Before the vanilla proofs are decoded: the proof type (the library's error: 101, exit 11, for
//! a number that is no PoSt proof type of the file's kind; 103, exit 13, for WindowPoSt V1), the
//! partition index, then the parameter files (20 / 21).

use clap::Args;
use cuzk::srs::ParamSet;
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
    let f: PostFile = a.run.read()?;
    // The proof type as the engine and the daemon answer it (the name only tells the kind).
    let kind = postgen::kind_of(f.registered_proof_name);
    let proof_type = cuzk::post::registered_post_proof(kind, f.registered_proof)?;
    let number = f.registered_proof;
    // WindowPoSt: the file's partition index goes to the engine as Curio's does (and as
    // filecoin-proofs-api's generate_single_window_post_with_vanilla takes it), below the
    // deadline's limit; from V1_1 on the challenges do not depend on it, so the proof is one of
    // the file's sectors for any index. WinningPoSt has no partitions.
    let partition_index = f.partition_index;
    if kind == ProofKind::WinningPost && partition_index != 0 {
        return Err(Error::InvalidInput(format!(
            "partition_index {partition_index} in a WinningPoSt's inputs: a WinningPoSt has no \
             partitions (0)"
        ))
        .into());
    }
    cuzk::post::check_partition_index(kind, partition_index)?;
    a.run.check_params(ParamSet::Post(proof_type))?;
    let g = GeneratedPost::from_file(&f).map_err(|e| a.run.malformed(&e))?;
    let run = a.run.start()?;
    say!(
        "proving {:?} ({} sector(s), {} vanilla proof bytes{}){}",
        g.spec.registered_proof,
        g.sectors.len(),
        g.vanilla_proofs.iter().map(Vec::len).sum::<usize>(),
        match kind {
            ProofKind::WindowPost => format!(", partition {partition_index}"),
            _ => String::new(),
        },
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
                partition_index,
                options,
            )?,
        }
        .proof)
    };
    run.repeat("filecoin-proofs verifier", prove, |proof| {
        postgen::verify_with_filecoin_proofs(&g, proof)
    })
}
