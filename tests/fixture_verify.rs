//! The 2 KiB fixture is a real sector: filecoin-proofs' own C2 (the reference prover) proves its
//! C1 output with the fixture's parameters, and `verify_seal` accepts that proof and rejects
//! tampered versions of it.
//!
//! Builds the fixture in `cuzk::fixture::default_fixture_dir()` on first use (about 10 minutes
//! on 2 cores); afterwards the test takes about a minute (reference proving on the CPU).

use cuzk::c1::hex as to_hex;
use cuzk::fixture::{default_fixture_dir, ensure_2kib_fixture, Fixture};
use filecoin_proofs_api::seal::seal_commit_phase2;
use filecoin_proofs_api::SectorId;

fn rejected(f: &Fixture, proof: &[u8]) -> bool {
    // A tampered proof either parses and fails (Ok(false)) or is not a valid point (Err).
    !matches!(f.verify(proof), Ok(true))
}

#[test]
fn reference_proof_of_fixture_verifies_and_tampering_is_rejected() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .is_test(true)
        .try_init();
    let f = ensure_2kib_fixture(&default_fixture_dir()).expect("fixture");
    assert!(f.is_complete());
    assert_eq!(
        f.registered_proof,
        filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1_1
    );
    assert_eq!(
        f,
        Fixture::load(&f.dir).expect("fixture.json"),
        "fixture.json round-trips"
    );

    let c1 = f
        .c1_output()
        .expect("c1.json parses as SealCommitPhase1Output");
    assert_eq!(c1.comm_r, f.comm_r);
    assert_eq!(c1.comm_d, f.comm_d);

    let t = std::time::Instant::now();
    let out = seal_commit_phase2(c1, f.prover_id, SectorId::from(f.sector_id))
        .expect("filecoin-proofs seal_commit_phase2 on the fixture");
    eprintln!(
        "reference C2: {} bytes in {:.1} s, starts {}",
        out.proof.len(),
        t.elapsed().as_secs_f64(),
        to_hex(&out.proof[..16])
    );
    assert_eq!(out.proof.len(), 192, "one partition of 192 bytes for 2 KiB");
    assert!(
        f.verify(&out.proof).expect("verify_seal runs"),
        "reference proof must verify"
    );

    // One flipped byte in each of A, B and C.
    for i in [5usize, 48 + 40, 144 + 20] {
        let mut bad = out.proof.clone();
        bad[i] ^= 0x01;
        assert!(
            rejected(&f, &bad),
            "proof with byte {i} flipped was accepted"
        );
    }
    // The right proof for other public inputs.
    let mut other = f.clone();
    other.sector_id += 1;
    assert!(
        rejected(&other, &out.proof),
        "proof accepted for another sector id"
    );
    let mut other = f.clone();
    other.seed[0] ^= 1;
    assert!(
        rejected(&other, &out.proof),
        "proof accepted for another seed"
    );
}
