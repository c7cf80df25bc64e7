//! The generated C1 outputs: storage-proofs-porep's vanilla verifier accepts them for every
//! proof type and rejects them after one changed byte; cuzk's parser and validation accept both
//! encodings.

use std::time::Instant;

use cuzk_dev::c1gen::{self, C1Spec, GeneratedC1};
use filecoin_proofs_api::seal::SealCommitPhase1Output;
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
    for (i, json) in [g.c1_json().unwrap(), g.wrapper_json().unwrap()]
        .iter()
        .enumerate()
    {
        let input = cuzk::c1::parse(json).expect("parse");
        assert_eq!(input.wrapper_sector_num.is_some(), i == 1);
        cuzk::c1::validate(&input, SECTOR_ID, &g.spec.prover_id).expect("validate");
        if i == 0 {
            // The JSON round trip keeps the proofs valid.
            assert!(c1gen::verify_vanilla(&input.output).unwrap());
        }
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

/// Flips the lowest bit of the first byte of the 32-byte array at `pointer` (a JSON pointer into
/// the C1 output) and returns whether the vanilla verifier still accepts the result. The lowest
/// byte of a field element's little-endian bytes keeps it a field element.
fn flipped(c1: &serde_json::Value, pointer: &str) -> SealCommitPhase1Output {
    let mut v = c1.clone();
    let byte = v
        .pointer_mut(&format!("{pointer}/0"))
        .unwrap_or_else(|| panic!("no {pointer} in the C1 output"));
    let b = byte.as_u64().unwrap();
    *byte = serde_json::json!(b ^ 1);
    serde_json::from_value(v).expect("still a C1 output")
}

/// Whether the vanilla verifier (storage-proofs-porep's `verify_all_partitions`) and the tree D
/// / tree R path check accept `o`. A verifier error is a rejection.
fn accepted(o: &SealCommitPhase1Output) -> bool {
    c1gen::verify_vanilla(o).unwrap_or(false) && c1gen::verify_merkle_paths(o).unwrap_or(false)
}

/// Whether the circuit of partition 0 is satisfied (a panic while building it counts as not).
fn circuit_satisfied(o: &SealCommitPhase1Output) -> bool {
    std::panic::catch_unwind(|| c1gen::check_circuit(o, 0).is_ok()).unwrap_or(false)
}

/// Each pointer (relative to partition 0, challenge 1, except comm_r) changed by one bit is
/// rejected; for `circuit_checked` pointers, the circuit is unsatisfied too.
fn tampered_are_rejected(
    p: RegisteredSealProof,
    variant: &str,
    paths: &[&str],
    circuit_checked: &[&str],
) {
    let g = gen(p);
    let c1: serde_json::Value = serde_json::from_slice(&g.c1_json().unwrap()).unwrap();
    let proof = format!("/vanilla_proofs/{variant}/0/1");
    let mut pointers = vec!["/comm_r".to_string()];
    for rel in paths {
        pointers.push(format!("{proof}/{rel}"));
    }
    for ptr in &pointers {
        assert!(
            !accepted(&flipped(&c1, ptr)),
            "{p:?}: accepted with {ptr} changed"
        );
    }
    for rel in circuit_checked {
        let ptr = format!("{proof}/{rel}");
        let o = flipped(&c1, &ptr);
        assert!(
            !circuit_satisfied(&o),
            "{p:?}: circuit satisfied with {ptr} changed"
        );
    }
    // The untouched output still verifies (the flips above worked on copies).
    assert!(accepted(&g.output));
}

#[test]
fn tampered_2kib_is_rejected() {
    tampered_are_rejected(
        RegisteredSealProof::StackedDrg2KiBV1_1,
        "StackedDrg2KiBV1",
        &[
            // a label of the challenged node, of a DRG parent and of an expander parent
            "replica_column_proofs/c_x/column/rows/1",
            "replica_column_proofs/drg_parents/2/column/rows/0",
            "replica_column_proofs/exp_parents/7/column/rows/1",
            // Merkle paths: tree D, tree R, tree C
            "comm_d_proofs/data/Single/path/path/3/hashes/0",
            "comm_r_last_proof/data/Single/path/path/1/hashes/6",
            "replica_column_proofs/exp_parents/0/inclusion_proof/data/Single/path/path/0/hashes/2",
            // leaves and a labeling proof's parent
            "comm_d_proofs/data/Single/leaf",
            "comm_r_last_proof/data/Single/leaf",
            "labeling_proofs/1/parents/5",
        ],
        // The vanilla verifier does not recompute tree D / tree R paths; the circuit does.
        &[
            "comm_d_proofs/data/Single/path/path/3/hashes/0",
            "comm_r_last_proof/data/Single/path/path/1/hashes/6",
        ],
    );
}

#[test]
fn tampered_64gib_is_rejected() {
    // The 64 GiB tree R / C paths have base, sub-tree and top-tree parts.
    tampered_are_rejected(
        RegisteredSealProof::StackedDrg64GiBV1_1,
        "StackedDrg64GiBV1",
        &[
            "replica_column_proofs/c_x/column/rows/10",
            "comm_r_last_proof/data/Top/top_proof/path/0/hashes/0",
            "replica_column_proofs/drg_parents/3/inclusion_proof/data/Top/sub_proof/path/0/hashes/4",
            "comm_r_last_proof/data/Top/base_proof/path/8/hashes/1",
            "comm_d_proofs/data/Single/path/path/29/hashes/0",
        ],
        &[],
    );
}

/// The generated 2 KiB C1 output's circuit is satisfied (cuzk's synthesis and R1CS check;
/// 2.7 M constraints, ~4 s).
#[test]
fn circuit_2kib_is_satisfied() {
    let g = gen(RegisteredSealProof::StackedDrg2KiBV1_1);
    let t = Instant::now();
    let n = c1gen::check_circuit(&g.output, 0).expect("satisfied");
    eprintln!(
        "2 KiB circuit: {n} constraints satisfied, {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// The generated 8 MiB C1 output's circuit is satisfied (3.8 M constraints: ~6 s, 0.5 GB).
#[test]
fn circuit_8mib_is_satisfied() {
    let g = gen(RegisteredSealProof::StackedDrg8MiBV1_1);
    let t = Instant::now();
    let n = c1gen::check_circuit(&g.output, 0).expect("satisfied");
    eprintln!(
        "8 MiB circuit: {n} constraints satisfied, {:.1} s",
        t.elapsed().as_secs_f64()
    );
}

/// The generated 512 MiB C1 output's circuit is satisfied (4.4 M constraints: ~7 s, 0.6 GB).
#[test]
fn circuit_512mib_is_satisfied() {
    let g = gen(RegisteredSealProof::StackedDrg512MiBV1_1);
    let t = Instant::now();
    let n = c1gen::check_circuit(&g.output, 0).expect("satisfied");
    eprintln!(
        "512 MiB circuit: {n} constraints satisfied, {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
