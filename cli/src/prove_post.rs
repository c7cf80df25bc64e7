//! `cuzk prove-post`: WindowPoSt or WinningPoSt proofs of a `post.json` (`cuzk gen-post`'s
//! output: the proof type, randomness, prover id, sectors and vanilla proofs as Curio sends
//! them), each checked with filecoin-proofs' `verify_window_post` / `verify_winning_post`;
//! `--repeat` / `--jobs` as `cuzk prove` (the first proof alone, the cold one). The file's
//! `partition_index` goes to `Engine::prove_window_post` (the challenges of WindowPoSt V1_1 do
//! not depend on it: the proof is one of the file's sectors for any index) and must be below the
//! most partitions a deadline holds (3000); a WinningPoSt's must be 0 (invalid input, exit 11).
//! Before the vanilla proofs are decoded: the proof type, the number's (`registered_proof`: the
//! library's error, 101, exit 11, for a number that is no PoSt proof type; 103, exit 13, for
//! WindowPoSt V1), which `registered_proof_name`, `kind` and `sector_size` must repeat (else
//! 101), the partition index, then the parameter files (20 / 21). Before proving: the file's
//! `sectors` (what filecoin-proofs' verifier checks the proof against) must be the vanilla
//! proofs' sectors, in their order, each once, with the comm_r each vanilla proof carries (else
//! 101: a proof the verifier rejects would read as a bad proof of cuzk's, exit 51).

use clap::Args;
use cuzk::c1::hex;
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
    // The proof type as the engine and the daemon answer it: the number's (0–4 WinningPoSt,
    // the others checked as WindowPoSt), which the name, the kind and the sector size must
    // repeat.
    let number = f.registered_proof;
    let kind = if number < 5 {
        ProofKind::WinningPost
    } else {
        ProofKind::WindowPost
    };
    let proof_type = cuzk::post::registered_post_proof(kind, number)?;
    check_proof_type(&f, proof_type).map_err(Error::InvalidInput)?;
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
    check_sectors(&g.sectors, &postgen::vanilla_sectors(&g)).map_err(Error::InvalidInput)?;
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

/// Checks that the file's `registered_proof_name`, `kind` and `sector_size` are those of
/// `proof_type`, the proof type of its `registered_proof` (the number is what the engine
/// proves; the others only describe it).
///
/// # Errors
/// The invalid input's message, naming the field that disagrees.
fn check_proof_type(
    f: &PostFile,
    proof_type: filecoin_proofs_api::RegisteredPoStProof,
) -> Result<(), String> {
    let number = f.registered_proof;
    if f.registered_proof_name != proof_type {
        return Err(format!(
            "registered_proof {number} is {proof_type:?}, but registered_proof_name says {:?}",
            f.registered_proof_name
        ));
    }
    let kind = postgen::kind_of(proof_type).name();
    if f.kind != kind {
        return Err(format!(
            "registered_proof {number} is {proof_type:?}, a {kind} proof type, but kind says {:?}",
            f.kind
        ));
    }
    let size = u64::from(proof_type.sector_size());
    if f.sector_size != size {
        return Err(format!(
            "registered_proof {number} is {proof_type:?}, of {size}-byte sectors, but \
             sector_size says {}",
            f.sector_size
        ));
    }
    Ok(())
}

/// Checks the file's `sectors` (what filecoin-proofs' verifier checks the proof against) against
/// what the vanilla proofs carry (`vanilla`, from [`postgen::vanilla_sectors`]; `None` for one
/// that does not decode, left to the engine's error): each sector once, the vanilla proofs'
/// sector numbers in their order, their comm_r. A list that disagrees would make a proof of the
/// vanilla proofs that the verifier then refuses, as if cuzk had made a bad proof.
///
/// # Errors
/// The invalid input's message, naming the sector and the field.
fn check_sectors(
    sectors: &[postgen::PostSector],
    vanilla: &[Option<(u64, [u8; 32])>],
) -> Result<(), String> {
    for (i, s) in sectors.iter().enumerate() {
        if let Some(j) = sectors[..i].iter().position(|t| t.sector_id == s.sector_id) {
            return Err(format!(
                "sectors[{i}].sector_id {} repeats sectors[{j}]'s: each sector is listed once",
                s.sector_id
            ));
        }
    }
    for (i, (s, v)) in sectors.iter().zip(vanilla).enumerate() {
        let Some((id, comm_r)) = *v else { continue };
        if s.sector_id != id {
            return Err(format!(
                "sectors[{i}].sector_id {}, but vanilla proof {i} is of sector {id}: the sectors \
                 are the vanilla proofs', in their order",
                s.sector_id
            ));
        }
        if s.comm_r != comm_r {
            return Err(format!(
                "sectors[{i}].comm_r (sector {id}) is {}, but vanilla proof {i} carries {}",
                hex(&s.comm_r),
                hex(&comm_r)
            ));
        }
    }
    Ok(())
}
