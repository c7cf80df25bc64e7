//! The generated PoSt inputs: for every sector size and both kinds, filecoin-proofs' vanilla
//! verification and cuzk's pre-proving check accept them, the proofs open exactly the leaves
//! filecoin-proofs-api derives from the randomness, the file form round-trips, the same seed gives
//! the same bytes; a changed byte is rejected. (Proving them with parameters of `gen-params
//! --kind`: `cli/tests/cli.rs`.)

use std::time::Instant;

use cuzk::post::PostRequest;
use cuzk::ProofKind;
use cuzk_dev::postgen::{self, GeneratedPost, PostSpec};
use filecoin_proofs_api::post;
use filecoin_proofs_api::SectorId;

const SIZES: [&str; 5] = ["2KiB", "8MiB", "512MiB", "32GiB", "64GiB"];
const KINDS: [ProofKind; 2] = [ProofKind::WindowPost, ProofKind::WinningPost];

fn spec(kind: ProofKind, size: &str, seed: &str, sectors: Option<usize>) -> PostSpec {
    PostSpec {
        registered_proof: postgen::proof_type(kind, size).unwrap(),
        seed: postgen::seed_from_str(seed),
        prover_id: cuzk::c1::prover_id_from_actor_id(1234),
        randomness: None,
        first_sector: 500,
        sectors,
    }
}

/// cuzk's own check before proving (the daemon's before queueing): the vanilla proofs verify
/// against the randomness, prover id and their comm_r.
fn engine_check(g: &GeneratedPost) -> cuzk::Result<()> {
    let v: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    cuzk::post::check(&PostRequest {
        kind: g.kind(),
        registered_proof: g.registered_proof_number().unwrap(),
        vanilla_proofs: &v,
        randomness: &g.randomness,
        prover_id: &g.spec.prover_id,
        partition_index: 0,
    })
}

/// The checks every generated input passes.
fn check_accepted(g: &GeneratedPost) {
    let p = g.spec.registered_proof;
    assert!(postgen::verify_vanilla(g).unwrap(), "{p:?}: rejected");
    engine_check(g).unwrap_or_else(|e| panic!("{p:?}: cuzk::post::check: {e}"));
    // The challenges filecoin-proofs-api derives (the winning sector first, as Curio picks it).
    if g.kind() == ProofKind::WinningPost {
        let chosen =
            post::generate_winning_post_sector_challenge(p, &g.randomness, 1, g.spec.prover_id)
                .unwrap();
        assert_eq!(chosen, [0]);
    }
    let ids: Vec<SectorId> = g.sectors.iter().map(|s| s.sector_id.into()).collect();
    let expected =
        post::generate_fallback_sector_challenges(p, &g.randomness, &ids, g.spec.prover_id)
            .unwrap();
    let opened = postgen::opened_leaves(g).unwrap();
    assert_eq!(opened.len(), g.sectors.len());
    for ((s, id), leaves) in g.sectors.iter().zip(&ids).zip(&opened) {
        assert_eq!(leaves.len(), postgen::challenges_per_sector(p));
        assert_eq!(leaves, &expected[id], "{p:?} sector {id:?}: opened leaves");
        assert_eq!(&s.challenges, leaves);
    }
    // The file form round-trips.
    let f = g.to_file().unwrap();
    assert_eq!(f.registered_proof, g.registered_proof_number().unwrap());
    let back = GeneratedPost::from_file(&serde_json::from_slice(&g.json().unwrap()).unwrap());
    assert_eq!(&back.unwrap(), g);
}

/// Every sector size and kind: WindowPoSt with 2 sectors (a full partition below 32 GiB),
/// WinningPoSt with its one sector of 66 challenges.
#[test]
fn every_size_and_kind_is_accepted() {
    for size in SIZES {
        for kind in KINDS {
            let sectors = (kind == ProofKind::WindowPost).then_some(2);
            let t = Instant::now();
            let g = postgen::generate(&spec(kind, size, "every", sectors)).unwrap();
            let gen_s = t.elapsed().as_secs_f64();
            check_accepted(&g);
            let bytes: Vec<usize> = g.vanilla_proofs.iter().map(Vec::len).collect();
            eprintln!(
                "{size} {kind}: {} sectors, vanilla proofs {bytes:?} bytes, generated in \
                 {gen_s:.2} s, checked in {:.2} s",
                g.sectors.len(),
                t.elapsed().as_secs_f64() - gen_s
            );
        }
    }
}

/// The default is a full partition: 2 sectors below 32 GiB, 1 for WinningPoSt; more is an error.
#[test]
fn sector_counts() {
    let g = postgen::generate(&spec(ProofKind::WindowPost, "2KiB", "n", None)).unwrap();
    assert_eq!(g.sectors.len(), 2);
    assert_eq!(
        g.sectors.iter().map(|s| s.sector_id).collect::<Vec<_>>(),
        [500, 501]
    );
    let g = postgen::generate(&spec(ProofKind::WinningPost, "2KiB", "n", None)).unwrap();
    assert_eq!(g.sectors.len(), 1);
    assert_eq!(g.sectors[0].challenges.len(), 66);
    for (kind, size, n) in [
        (ProofKind::WindowPost, "2KiB", 3),
        (ProofKind::WindowPost, "2KiB", 0),
        (ProofKind::WindowPost, "32GiB", 2350),
        (ProofKind::WindowPost, "64GiB", 2301),
        (ProofKind::WinningPost, "2KiB", 2),
    ] {
        assert!(
            postgen::generate(&spec(kind, size, "n", Some(n))).is_err(),
            "{kind} {size} {n} sectors"
        );
    }
    assert_eq!(
        postgen::partition_sectors(postgen::proof_type(ProofKind::WindowPost, "32GiB").unwrap()),
        2349
    );
}

#[test]
fn proof_types_follow_the_actors_numbering() {
    for (i, size) in SIZES.iter().enumerate() {
        let win = postgen::proof_type(ProofKind::WinningPost, size).unwrap();
        let window = postgen::proof_type(ProofKind::WindowPost, size).unwrap();
        assert_eq!(postgen::actors_number(win).unwrap(), i as u64);
        assert_eq!(postgen::actors_number(window).unwrap(), 10 + i as u64);
        assert!(format!("{window:?}").ends_with("V1_2"));
    }
    assert!(postgen::proof_type(ProofKind::WindowPost, "4KiB").is_err());
    assert!(postgen::proof_type(ProofKind::PorepC2, "2KiB").is_err());
}

#[test]
fn deterministic_from_the_seed_and_randomness() {
    let a = postgen::generate(&spec(ProofKind::WindowPost, "8MiB", "a", None)).unwrap();
    let b = postgen::generate(&spec(ProofKind::WindowPost, "8MiB", "a", None)).unwrap();
    assert_eq!(a.json().unwrap(), b.json().unwrap());
    // The derived randomness is a field element.
    assert_eq!(a.randomness[31] & 0xc0, 0);
    let c = postgen::generate(&spec(ProofKind::WindowPost, "8MiB", "c", None)).unwrap();
    assert_ne!(a.randomness, c.randomness);
    assert_ne!(a.sectors[0].comm_r, c.sectors[0].comm_r);
    // The randomness given: other challenges, the same seed's comm_c.
    let mut s = spec(ProofKind::WindowPost, "8MiB", "a", None);
    s.randomness = Some(postgen::parse_randomness(&"11".repeat(32)).unwrap());
    let d = postgen::generate(&s).unwrap();
    assert_eq!(d.randomness, [0x11; 32]);
    assert_ne!(a.sectors[0].challenges, d.sectors[0].challenges);
    assert_eq!(a.sectors[0].comm_c, d.sectors[0].comm_c);
    check_accepted(&d);
    // Not a field element / not 32 bytes.
    assert!(postgen::parse_randomness(&"ff".repeat(32)).is_err());
    assert!(postgen::parse_randomness("1234").is_err());
}

/// A copy of `v` with the lowest bit of byte `at` flipped (the first byte of a little-endian
/// field element keeps it one).
fn flip(v: &[u8], at: usize) -> Vec<u8> {
    let mut v = v.to_vec();
    v[at] ^= 1;
    v
}

/// Byte offsets in a vanilla proof's bincode (`FallbackPoStSectorProof`: sector id `u64`,
/// comm_r, `Vec` of one `SectorProof` { `Vec` of inclusion proofs, comm_c, comm_r_last }; an
/// inclusion proof is a `u32` variant, then Single { root, leaf, path } or Sub { base path, sub
/// path, root, leaf }; a path is a `u64` length and elements { `Vec` of siblings, `u64` index }).
struct Offsets {
    comm_r: usize,
    first_sibling: usize,
    first_index: usize,
    comm_c: usize,
}

fn offsets(len: usize, single: bool) -> Offsets {
    // Proof 0 starts at 56; a Single proof's path at 56 + 4 + 64, a Sub proof's at 56 + 4.
    let path = if single { 124 } else { 60 };
    Offsets {
        comm_r: 8,
        first_sibling: path + 16,
        first_index: path + 16 + 7 * 32,
        comm_c: len - 64,
    }
}

fn tampered_are_rejected(kind: ProofKind, size: &str, single: bool) {
    let g = postgen::generate(&spec(kind, size, "tamper", Some(1))).unwrap();
    let v = &g.vanilla_proofs[0];
    let o = offsets(v.len(), single);
    // The layout is what the offsets say.
    assert_eq!(v[o.comm_r..o.comm_r + 32], g.sectors[0].comm_r);
    assert_eq!(v[o.comm_c..o.comm_c + 32], g.sectors[0].comm_c);
    assert_eq!(v[v.len() - 32..], g.sectors[0].comm_r_last);
    for (what, at) in [
        ("comm_r", o.comm_r),
        ("a sibling", o.first_sibling),
        ("a sibling index", o.first_index),
        ("comm_c", o.comm_c),
    ] {
        let mut bad = g.clone();
        bad.vanilla_proofs[0] = flip(v, at);
        assert!(
            !matches!(postgen::verify_vanilla(&bad), Ok(true)),
            "{size} {kind}: filecoin-proofs accepts a changed {what}"
        );
        let e = engine_check(&bad).expect_err(what);
        assert!(matches!(e.code(), 100 | 101), "{what}: {e}");
    }
    // The public comm_r changed: the proofs are not of that sector.
    let mut bad = g.clone();
    bad.sectors[0].comm_r[0] ^= 1;
    assert!(!postgen::verify_vanilla(&bad).unwrap());
    // Another randomness: other challenges.
    let mut bad = g.clone();
    bad.randomness[0] ^= 1;
    assert!(!postgen::verify_vanilla(&bad).unwrap());
    assert_eq!(engine_check(&bad).unwrap_err().code(), 101);
    assert!(postgen::verify_vanilla(&g).unwrap());
}

#[test]
fn tampered_2kib_is_rejected() {
    for kind in KINDS {
        tampered_are_rejected(kind, "2KiB", true);
    }
}

#[test]
fn tampered_32gib_is_rejected() {
    tampered_are_rejected(ProofKind::WindowPost, "32GiB", false);
}

/// A full 32 GiB WindowPoSt partition (2349 sectors × 10 challenges): generated and checked by
/// filecoin-proofs and by cuzk's pre-proving check. Ignored by default: 11–19 s to generate and
/// ~90 s to check (both checks) on 2 busy cores.
#[test]
#[ignore = "about 2 minutes on 2 cores; run with --ignored"]
fn full_32gib_window_partition() {
    let t = Instant::now();
    let g = postgen::generate(&spec(ProofKind::WindowPost, "32GiB", "full", None)).unwrap();
    let gen_s = t.elapsed().as_secs_f64();
    assert_eq!(g.sectors.len(), 2349);
    let t = Instant::now();
    assert!(postgen::verify_vanilla(&g).unwrap());
    engine_check(&g).unwrap();
    let bytes: usize = g.vanilla_proofs.iter().map(Vec::len).sum();
    eprintln!(
        "32 GiB WindowPoSt partition: {bytes} bytes of vanilla proofs, generated in {gen_s:.1} s, \
         checked in {:.1} s",
        t.elapsed().as_secs_f64()
    );
}
