//! PoSt vanilla proofs whose values filecoin-proofs takes on trust — a field element that is not
//! a canonical BLS12-381 scalar (leaf, path sibling, comm_c, comm_r_last, comm_r), a path
//! position out of range for the tree's arity, a path level with a sibling too few — are refused
//! by `cuzk::post::check` (what the engine and the daemon run before any heavy work) as invalid
//! input (101) naming the sector and the value, before filecoin-proofs' code runs on them: it
//! would panic on them (`from_repr failure`, an insertion index out of range, an unsupported
//! Poseidon arity), and the panic hook would print a backtrace on stderr even though the panic
//! is caught. Counted here by a panic hook; the only test of this binary, so that no other
//! test's panics are counted. Inputs from `cuzk_dev::postgen` (2 KiB, no sealing, no
//! parameters).

mod panic_count;

use std::sync::atomic::Ordering;

use blstrs::Scalar as Fr;
use cuzk::post::{check, PostRequest};
use cuzk::ProofKind;
use cuzk_dev::postgen::{self, GeneratedPost, PostSpec};
use ff::{Field, PrimeField};

/// The 2 KiB inputs of `kind`: WindowPoSt two sectors (7 and 8), WinningPoSt one (7).
fn generated(kind: ProofKind) -> GeneratedPost {
    postgen::generate(&PostSpec {
        registered_proof: postgen::proof_type(kind, "2KiB").unwrap(),
        seed: postgen::seed_from_str("vanilla fields"),
        prover_id: cuzk::c1::prover_id_from_actor_id(1000),
        randomness: None,
        first_sector: 7,
        sectors: None,
    })
    .unwrap()
}

/// Byte offsets in a 2 KiB vanilla proof (filecoin-proofs-api's bincode, fixed-width little
/// endian: sector id 0..8, comm_r 8..40, the sector proofs' count 40..48, the inclusion proofs'
/// count 48..56; inclusion proof 0 from 56: its enum tag (u32), root, leaf, the path's level
/// count, then per level the siblings' count, 7 siblings and the position), comm_c and
/// comm_r_last its last 64 bytes.
const COMM_R: usize = 8;
const ROOT: usize = 60;
const LEAF: usize = 92;
const LEVELS: usize = 124;
const SIBLINGS_LEN: usize = 132;
const SIBLING_0: usize = 140;
const POSITION_0: usize = SIBLING_0 + 7 * 32;
const LEVEL_1: usize = POSITION_0 + 8;

/// Not canonical: 2^256 - 1 and the scalar field's modulus r itself (little endian).
fn non_canonical() -> [[u8; 32]; 2] {
    let mut r = (-Fr::ONE).to_repr();
    // r - 1 ends in the byte 0x00 (little endian first): r is it plus one.
    assert_eq!(r[0], 0);
    r[0] = 1;
    assert!(bool::from(Fr::from_repr(r).is_none()));
    [[0xff; 32], r]
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[test]
fn non_canonical_values_and_bad_positions_are_refused_without_a_panic() {
    let panics = panic_count::count_panics();
    for kind in [ProofKind::WindowPost, ProofKind::WinningPost] {
        let g = generated(kind);
        let number = g.registered_proof_number().unwrap();
        let run = |vanilla: &[Vec<u8>]| {
            let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
            check(&PostRequest {
                kind,
                registered_proof: number,
                vanilla_proofs: &v,
                randomness: &g.randomness,
                prover_id: &g.spec.prover_id,
                partition_index: 0,
            })
        };
        run(&g.vanilla_proofs).expect("the generated inputs");
        // The layout the offsets assume.
        let v0 = &g.vanilla_proofs[0];
        assert_eq!(u64_at(v0, 0), 7);
        assert_eq!(u64_at(v0, 40), 1, "{kind}: one sector proof");
        assert_eq!(u64_at(v0, LEVELS), 2, "{kind}: two path levels at 2 KiB");
        assert_eq!(u64_at(v0, SIBLINGS_LEN), 7, "{kind}: arity 8");
        assert_eq!(u64_at(v0, LEVEL_1), 7, "{kind}: arity 8");
        assert!(u64_at(v0, POSITION_0) < 8, "{kind}");
        let n = v0.len();
        // (what, at, bytes written there, words the message names)
        let mut cases: Vec<(String, usize, Vec<u8>, Vec<&str>)> = Vec::new();
        for (x, bad) in non_canonical().into_iter().enumerate() {
            let value = |name: &str, at, field: &'static str| {
                (
                    format!("{name} {x}"),
                    at,
                    bad.to_vec(),
                    vec![field, "not a canonical"],
                )
            };
            cases.push(value("leaf", LEAF, "inclusion proof 0 leaf"));
            cases.push(value("root", ROOT, "inclusion proof 0 root"));
            cases.push(value(
                "sibling",
                SIBLING_0 + 32,
                "inclusion proof 0, path level 0, sibling 1",
            ));
            cases.push(value(
                "sibling of level 1",
                LEVEL_1 + 8 + 6 * 32,
                "inclusion proof 0, path level 1, sibling 6",
            ));
            cases.push(value("comm_c", n - 64, "comm_c"));
            cases.push(value("comm_r_last", n - 32, "comm_r_last"));
            cases.push(value("comm_r", COMM_R, "comm_r"));
        }
        for pos in [8u64, 9, u64::MAX] {
            cases.push((
                format!("position {pos}"),
                POSITION_0,
                pos.to_le_bytes().to_vec(),
                vec!["path level 0", "position", "arity 8"],
            ));
        }
        for (what, at, bytes, words) in cases {
            let mut bad = g.vanilla_proofs.clone();
            bad[0][at..at + bytes.len()].copy_from_slice(&bytes);
            let e = run(&bad).expect_err(&what);
            let msg = e.to_string();
            assert_eq!(e.code(), 101, "{kind} {what}: {msg}");
            assert!(msg.contains("sector 7"), "{kind} {what}: {msg}");
            for w in words {
                assert!(msg.contains(w), "{kind} {what}: {msg} (no {w:?})");
            }
            assert_eq!(panics.load(Ordering::SeqCst), 0, "{kind} {what}: a panic");
        }
        // A level with 6 siblings (the count and one sibling taken out): decodes, then a
        // Poseidon hash of 7 would panic.
        let mut short = g.vanilla_proofs.clone();
        short[0].splice(SIBLING_0..SIBLING_0 + 32, []);
        short[0][SIBLINGS_LEN..SIBLINGS_LEN + 8].copy_from_slice(&6u64.to_le_bytes());
        let e = run(&short).unwrap_err();
        assert_eq!(e.code(), 101, "{kind}: {e}");
        assert!(e.to_string().contains("6 siblings"), "{kind}: {e}");
        // Three path levels (one more copied in): the tree's are two.
        let mut deep = g.vanilla_proofs.clone();
        let level: Vec<u8> = deep[0][LEVEL_1..LEVEL_1 + 240].to_vec();
        deep[0].splice(LEVEL_1..LEVEL_1, level);
        deep[0][LEVELS..LEVELS + 8].copy_from_slice(&3u64.to_le_bytes());
        let e = run(&deep).unwrap_err();
        assert_eq!(e.code(), 101, "{kind}: {e}");
        assert!(e.to_string().contains("3 path levels"), "{kind}: {e}");
        assert_eq!(panics.load(Ordering::SeqCst), 0, "{kind}: a panic");
    }
    let _ = std::panic::take_hook();
}
