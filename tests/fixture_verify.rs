//! The 2 KiB fixture is a real sector: filecoin-proofs' own C2 (the reference prover) proves its
//! C1 output with the fixture's parameters, and both filecoin-proofs-api's `verify_seal` and
//! `Fixture::verify` (its steps with the `.vk` file read by path) accept that proof and reject
//! tampered versions of it.
//!
//! filecoin-proofs finds its parameters through `FIL_PROOFS_PARAMETER_CACHE`, read once per
//! process: unless it already points at the fixture, the test runs itself again in a child
//! process with the variable set (`cuzk_dev::fixture::run_self_with_env`).
//!
//! Builds the fixture in `cuzk_dev::fixture::default_fixture_dir()` on first use (about 10 minutes
//! on 2 cores); afterwards the test takes about a minute (reference proving on the CPU).

use cuzk::c1::hex as to_hex;
use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture, Fixture};
use filecoin_proofs_api::seal::{seal_commit_phase2, verify_seal};
use filecoin_proofs_api::SectorId;

const TEST: &str = "reference_proof_of_fixture_verifies_and_tampering_is_rejected";
const PARAM_VAR: &str = "FIL_PROOFS_PARAMETER_CACHE";

/// filecoin-proofs-api's `verify_seal` on the fixture's public values.
fn chain_verify(f: &Fixture, proof: &[u8]) -> bool {
    matches!(
        verify_seal(
            f.registered_proof,
            f.comm_r,
            f.comm_d,
            f.prover_id,
            SectorId::from(f.sector_id),
            f.ticket,
            f.seed,
            proof,
        ),
        Ok(true)
    )
}

fn rejected(f: &Fixture, proof: &[u8]) -> bool {
    // A tampered proof either parses and fails (Ok(false)) or is not a valid point (Err); both
    // verifiers must agree.
    !matches!(f.verify(proof), Ok(true)) && !chain_verify(f, proof)
}

fn same_dir(a: &std::path::Path, b: &std::path::Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[test]
fn reference_proof_of_fixture_verifies_and_tampering_is_rejected() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .is_test(true)
        .try_init();
    let f = ensure_2kib_fixture(&default_fixture_dir()).expect("fixture");
    let in_force = std::env::var_os(PARAM_VAR).filter(|v| !v.is_empty());
    if !in_force.is_some_and(|v| same_dir(v.as_ref(), &f.param_dir)) {
        assert!(
            std::env::var_os("CUZK_TEST_CHILD").is_none(),
            "child run without {PARAM_VAR} = {}",
            f.param_dir.display()
        );
        let out = cuzk_dev::fixture::run_self_with_env(
            TEST,
            &[
                (PARAM_VAR, f.param_dir.as_os_str()),
                ("CUZK_TEST_CHILD", "1".as_ref()),
            ],
        )
        .expect("run the test binary");
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "child run failed: {}", out.status);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "the child ran no test"
        );
        return;
    }
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
        f.verify(&out.proof).expect("Fixture::verify runs"),
        "reference proof must verify"
    );
    assert!(
        chain_verify(&f, &out.proof),
        "reference proof must pass filecoin-proofs-api's verify_seal"
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
