//! SnapDeals vanilla partition proofs whose values filecoin-proofs takes on trust — a field
//! element that is not a canonical BLS12-381 scalar (comm_c, an apex leaf, a TreeROld,
//! TreeDNew or TreeRNew leaf, root or sibling), a path position out of range for its level's
//! arity — are refused by `cuzk::snap::check` (what the engine and the daemon run before any
//! heavy work) and by the engine's CPU path as invalid input (101) naming the partition, the
//! challenge and the value, before filecoin-proofs' code runs on them: it would panic on them
//! (`from_repr failure`), and the panic hook would print a backtrace on stderr even though the
//! panic is caught. Apex leaves out of order (halves swapped) or one changed, which
//! filecoin-proofs' vanilla check accepts and the circuit does not, are refused the same way
//! instead of failing in synthesis (500). Counted here by a panic hook; the only test of this
//! binary, so that no other test's panics are counted. Inputs: the real 2 KiB SnapDeals
//! fixture (its parameters are not read: every request is refused before) and
//! `cuzk_dev::snapgen`'s generated ones.

mod panic_count;

use std::sync::atomic::Ordering;

use blstrs::Scalar as Fr;
use cuzk::snap::SnapRequest;
use cuzk::{Backend, CircuitCache, Engine, EngineConfig, ProveOptions};
use cuzk_dev::snap_fixture::{default_snap_fixture_dir, ensure_snap_fixture, UPDATE_2KIB};
use ff::{Field, PrimeField};

/// Where the values of a Merkle path sit in a vanilla proof's bytes.
struct PathAt {
    root: usize,
    leaf: usize,
    /// Per level: its siblings' offsets and its position's.
    levels: Vec<(Vec<usize>, usize)>,
}

/// Where the values of a 2 KiB partition proof sit (filecoin-proofs-api's bincode, fixed-width
/// little endian: comm_c, the apex leaves' count and the leaves, the challenge proofs' count,
/// then per challenge its TreeROld, TreeDNew and TreeRNew proofs: each an enum tag (u32, 0: a
/// single tree), root, leaf, the path's level count, then per level the siblings' count, the
/// siblings and the position).
struct Layout {
    comm_c: usize,
    apex_leaves: Vec<usize>,
    /// Per challenge: TreeROld, TreeDNew, TreeRNew.
    challenges: Vec<[PathAt; 3]>,
}

fn u64_at(b: &[u8], at: usize) -> usize {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize
}

fn layout(b: &[u8]) -> Layout {
    let mut at = 32;
    let count = |at: &mut usize| {
        let n = u64_at(b, *at);
        *at += 8;
        n
    };
    let values = |at: &mut usize, n: usize| {
        let v: Vec<usize> = (0..n).map(|i| *at + 32 * i).collect();
        *at += 32 * n;
        v
    };
    let n = count(&mut at);
    let apex_leaves = values(&mut at, n);
    let mut challenges = Vec::new();
    for _ in 0..count(&mut at) {
        let mut path = || {
            assert_eq!(&b[at..at + 4], [0; 4], "a single tree's proof");
            let (root, leaf) = (at + 4, at + 36);
            at += 68;
            let levels = (0..count(&mut at))
                .map(|_| {
                    let n = count(&mut at);
                    let siblings = values(&mut at, n);
                    at += 8;
                    (siblings, at - 8)
                })
                .collect();
            PathAt { root, leaf, levels }
        };
        challenges.push([path(), path(), path()]);
    }
    assert_eq!(at, b.len(), "the whole vanilla proof");
    Layout {
        comm_c: 0,
        apex_leaves,
        challenges,
    }
}

/// Not canonical: 2^256 - 1, the scalar field's modulus r itself, and r + 5 (little endian).
fn non_canonical() -> [[u8; 32]; 3] {
    let mut r = (-Fr::ONE).to_repr();
    // r - 1 ends in the byte 0x00 (little endian first): r is it plus one.
    assert_eq!(r[0], 0);
    r[0] = 1;
    assert!(bool::from(Fr::from_repr(r).is_none()));
    let mut r5 = r;
    r5[0] = 6;
    [[0xff; 32], r, r5]
}

#[test]
fn bad_values_and_apex_leaves_are_refused_without_a_panic() {
    let panics = panic_count::count_panics();
    let f = ensure_snap_fixture(&default_snap_fixture_dir()).expect("2 KiB SnapDeals fixture");
    let engine = Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&f.param_dir)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(CircuitCache::Off),
    )
    .expect("engine");
    let vanilla = f.vanilla_proofs().unwrap();
    assert_eq!(vanilla.len(), 1, "one partition at 2 KiB");
    let good = vanilla[0].clone();
    // Refused by the check and by the engine alike, as invalid input naming `words`.
    let refused = |bytes: &[u8], comms: [&[u8; 32]; 3], what: &str, words: &[&str]| {
        let v = [bytes];
        let req = SnapRequest {
            registered_proof: UPDATE_2KIB,
            vanilla_proofs: &v,
            comm_r_old: comms[0],
            comm_r_new: comms[1],
            comm_d_new: comms[2],
            sector_size: None,
        };
        let e = cuzk::snap::check(&req).expect_err(what);
        let msg = e.to_string();
        assert_eq!(e.code(), 101, "{what}: {msg}");
        assert!(msg.contains("partition 0"), "{what}: {msg}");
        for w in words {
            assert!(msg.contains(w), "{what}: {msg} (no {w:?})");
        }
        let e = engine
            .prove_snap_deals(&req, &ProveOptions::default())
            .expect_err(what);
        assert_eq!((e.code(), e.to_string()), (101, msg), "{what}: the engine");
        assert_eq!(panics.load(Ordering::SeqCst), 0, "{what}: a panic");
    };
    let fixture_comms = [&f.comm_r_old, &f.comm_r_new, &f.comm_d_new];
    let l = layout(&good);
    assert_eq!(l.apex_leaves.len(), 8);
    assert_eq!(l.challenges.len(), 10);
    for (tree, levels, arity) in [("TreeROld", 2, 8), ("TreeDNew", 6, 2), ("TreeRNew", 2, 8)] {
        let t = ["TreeROld", "TreeDNew", "TreeRNew"]
            .iter()
            .position(|&n| n == tree)
            .unwrap();
        let p = &l.challenges[0][t];
        assert_eq!(p.levels.len(), levels, "{tree}");
        assert!(p.levels.iter().all(|(s, _)| s.len() == arity - 1), "{tree}");
    }

    // (what, at, bytes written there, words the message names)
    let mut cases: Vec<(String, usize, Vec<u8>, Vec<String>)> = Vec::new();
    for (x, bad) in non_canonical().into_iter().enumerate() {
        let mut value = |name: &str, at: usize, words: &[&str]| {
            let mut w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
            w.push("is not a canonical".into());
            cases.push((format!("{name} {x}"), at, bad.to_vec(), w));
        };
        value("comm_c", l.comm_c, &["comm_c"]);
        value("apex leaf 5", l.apex_leaves[5], &["apex leaf 5"]);
        let c = &l.challenges;
        value("r_old leaf", c[0][0].leaf, &["challenge 0: TreeROld leaf"]);
        value("r_old root", c[3][0].root, &["challenge 3: TreeROld root"]);
        value(
            "r_old sibling",
            c[9][0].levels[1].0[6],
            &["challenge 9: TreeROld path level 1, sibling 6"],
        );
        value("d_new leaf", c[1][1].leaf, &["challenge 1: TreeDNew leaf"]);
        value("d_new root", c[0][1].root, &["challenge 0: TreeDNew root"]);
        value(
            "d_new sibling",
            c[2][1].levels[4].0[0],
            &["challenge 2: TreeDNew path level 4, sibling 0"],
        );
        value("r_new leaf", c[4][2].leaf, &["challenge 4: TreeRNew leaf"]);
        value("r_new root", c[0][2].root, &["challenge 0: TreeRNew root"]);
        value(
            "r_new sibling",
            c[5][2].levels[0].0[2],
            &["challenge 5: TreeRNew path level 0, sibling 2"],
        );
    }
    for (t, tree, level, arity) in [
        (0, "TreeROld", 0, 8),
        (1, "TreeDNew", 3, 2),
        (2, "TreeRNew", 1, 8),
    ] {
        for pos in [arity as u64, 9, u64::MAX] {
            cases.push((
                format!("{tree} position {pos}"),
                l.challenges[6][t].levels[level].1,
                pos.to_le_bytes().to_vec(),
                vec![format!(
                    "challenge 6: {tree} path level {level}: position {pos} out of range for \
                     arity {arity}"
                )],
            ));
        }
    }
    for (what, at, bytes, words) in cases {
        let mut bad = good.clone();
        bad[at..at + bytes.len()].copy_from_slice(&bytes);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        refused(&bad, fixture_comms, &what, &words);
    }

    // The apex leaves' halves swapped: filecoin-proofs' vanilla check finds every apex-path
    // sibling in the apex tree's rows still; the circuit's apex root is another.
    let apex = l.apex_leaves[0]..l.apex_leaves[7] + 32;
    let mut swapped = good.clone();
    swapped[apex.clone()].rotate_left(4 * 32);
    assert_ne!(swapped, good);
    refused(
        &swapped,
        fixture_comms,
        "apex leaves swapped",
        &["apex leaves does not lead to comm_d_new"],
    );

    // Generated 2 KiB inputs: their apex leaves repeat with a period of 4 (the TreeDNew data is
    // a repeated block), so leaf 4 changed leaves every apex-path sibling in the rows still.
    let proof = cuzk::snap::registered_update_proof(UPDATE_2KIB).unwrap();
    let g = cuzk_dev::snapgen::generate(proof, [9; 32]).unwrap();
    let gl = layout(&g.vanilla_proofs[0]);
    let comms = [&g.comm_r_old, &g.comm_r_new, &g.comm_d_new];
    let mut one = g.vanilla_proofs[0].clone();
    let (at, first) = (gl.apex_leaves[4], gl.apex_leaves[0]);
    assert_eq!(one[at..at + 32], one[first..first + 32], "period 4");
    one[at] ^= 1;
    refused(
        &one,
        comms,
        "generated apex leaf 4 changed",
        &["apex leaves does not lead to comm_d_new"],
    );

    // The good inputs pass.
    let v = [good.as_slice()];
    cuzk::snap::check(&SnapRequest {
        registered_proof: UPDATE_2KIB,
        vanilla_proofs: &v,
        comm_r_old: &f.comm_r_old,
        comm_r_new: &f.comm_r_new,
        comm_d_new: &f.comm_d_new,
        sector_size: None,
    })
    .expect("the fixture");
    let v = [g.vanilla_proofs[0].as_slice()];
    cuzk::snap::check(&SnapRequest {
        registered_proof: UPDATE_2KIB,
        vanilla_proofs: &v,
        comm_r_old: &g.comm_r_old,
        comm_r_new: &g.comm_r_new,
        comm_d_new: &g.comm_d_new,
        sector_size: None,
    })
    .expect("the generated inputs");
    assert_eq!(engine.param_loads(), 0, "nothing was proved");
    assert_eq!(panics.load(Ordering::SeqCst), 0, "a panic");
    let _ = std::panic::take_hook();
}
