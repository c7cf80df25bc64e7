//! Value-for-value tests of the native SHA-256 routines against the real gadgets run into an
//! [`AuxRecorder`]: the native tape must equal the recorded aux vector (length and every
//! value), the outputs must be the same values and the same kinds (constant / `Is` / `Not`,
//! which decide later allocations).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multieq::MultiEq;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::gadgets::sha256::sha256 as sha256_gadget;
use bellperson::gadgets::uint32::UInt32;
use bellperson::ConstraintSystem;
use blstrs::Scalar as Fr;
use ff::Field;
use filecoin_hashers::sha256::{Sha256Domain, Sha256Function};
use filecoin_hashers::{HashFunction, PoseidonBinaryArity};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use storage_proofs_core::gadgets::uint64::UInt64 as UInt64Gadget;
use storage_proofs_core::util::reverse_bit_numbering as reverse_bit_numbering_gadget;
use storage_proofs_porep::stacked::create_label_circuit;

use super::*;
use crate::circuit::native::tape::test_support::AuxRecorder;

/// Runs `f` on a tape sized to the gadget's `expected` aux values and asserts the tape is
/// exactly `expected`: as many values, each equal.
fn check_native<R>(expected: &[Fr], f: impl FnOnce(&mut Tape) -> R) -> R {
    let sentinel = Fr::from(0xdead_beefu64);
    let mut aux = vec![sentinel; expected.len()];
    let mut t = Tape::new(&mut aux);
    let r = f(&mut t);
    assert_eq!(t.len(), expected.len(), "native / gadget aux counts");
    t.finish().expect("tape length");
    if let Some(i) = (0..aux.len()).find(|&i| aux[i] != expected[i]) {
        panic!(
            "aux value {i} of {}: native {:?}, gadget {:?}",
            aux.len(),
            aux[i],
            expected[i]
        );
    }
    r
}

/// Whether a gadget `Boolean` and a native [`Bit`] are the same kind with the same values.
fn same(g: &Boolean, n: Bit) -> bool {
    match (g, n) {
        (Boolean::Constant(x), Bit::Constant(y)) => *x == y,
        (Boolean::Is(x), Bit::Is(y)) => x.get_value() == Some(y),
        (Boolean::Not(x), Bit::Not(y)) => x.get_value() == Some(y),
        _ => false,
    }
}

fn assert_same_bits(g: &[Boolean], n: &[Bit]) {
    assert_eq!(g.len(), n.len(), "bit counts");
    for (i, (g, &n)) in g.iter().zip(n).enumerate() {
        assert!(
            same(g, n),
            "bit {i}: gadget {:?}, native {n:?}",
            g.get_value()
        );
    }
}

/// How an input bit is made: a constant, a variable, or a variable's negation; and its
/// logical value.
#[derive(Clone, Copy, Debug)]
enum Spec {
    Constant(bool),
    Is(bool),
    Not(bool),
}

impl Spec {
    const ALL: [Spec; 6] = [
        Spec::Constant(false),
        Spec::Constant(true),
        Spec::Is(false),
        Spec::Is(true),
        Spec::Not(false),
        Spec::Not(true),
    ];

    fn value(self) -> bool {
        match self {
            Spec::Constant(v) | Spec::Is(v) | Spec::Not(v) => v,
        }
    }

    /// The gadget's bit, built with the real `Boolean` API (allocating for `Is` / `Not`).
    fn gadget<CS: ConstraintSystem<Fr>>(self, mut cs: CS) -> Boolean {
        match self {
            Spec::Constant(v) => Boolean::constant(v),
            Spec::Is(v) => AllocatedBit::alloc(cs.namespace(|| "in"), Some(v))
                .unwrap()
                .into(),
            Spec::Not(v) => {
                Boolean::from(AllocatedBit::alloc(cs.namespace(|| "in"), Some(!v)).unwrap()).not()
            }
        }
    }

    /// The native bit, allocated the same way.
    fn native(self, t: &mut Tape) -> Bit {
        match self {
            Spec::Constant(v) => Bit::Constant(v),
            Spec::Is(v) => Bit::alloc(t, v),
            Spec::Not(v) => Bit::alloc(t, !v).not(),
        }
    }
}

/// The mix of kinds of random input bits.
#[derive(Clone, Copy, Debug)]
enum Mix {
    /// All `Is` (the circuit's common case).
    Variables,
    /// Constant, `Is`, `Not` equally likely.
    Mixed,
    /// Mostly `Is`, one in eight constant.
    FewConstants,
    /// All constant.
    Constants,
}

fn random_specs(rng: &mut impl Rng, n: usize, mix: Mix) -> Vec<Spec> {
    let specs: Vec<Spec> = (0..n)
        .map(|_| {
            let v = rng.gen::<bool>();
            match mix {
                Mix::Variables => Spec::Is(v),
                Mix::Constants => Spec::Constant(v),
                Mix::FewConstants if rng.gen_ratio(1, 8) => Spec::Constant(v),
                Mix::FewConstants => Spec::Is(v),
                Mix::Mixed => [Spec::Constant(v), Spec::Is(v), Spec::Not(v)][rng.gen_range(0..3)],
            }
        })
        .collect();
    if matches!(mix, Mix::Mixed) && n >= 64 {
        // The mix must exercise every kind, or the test proves less than it claims.
        assert!(specs.iter().any(|s| matches!(s, Spec::Constant(_))));
        assert!(specs.iter().any(|s| matches!(s, Spec::Is(_))));
        assert!(specs.iter().any(|s| matches!(s, Spec::Not(_))));
    }
    specs
}

fn gadget_bits(cs: &mut AuxRecorder, specs: &[Spec]) -> Vec<Boolean> {
    specs.iter().map(|s| s.gadget(&mut *cs)).collect()
}

fn native_bits(t: &mut Tape, specs: &[Spec]) -> Vec<Bit> {
    specs.iter().map(|s| s.native(t)).collect()
}

/// `Tape::alloc_bits_masked` (its one-bounds-check paths) against `alloc_bit` bit by bit,
/// with room for all the bits, for some, for none.
#[test]
fn tape_alloc_bits_masked_matches_bit_by_bit() {
    let mut rng = ChaCha8Rng::seed_from_u64(10);
    for _ in 0..300 {
        let words: Vec<(u32, u32)> = (0..4)
            .map(|_| {
                let mask = match rng.gen_range(0..3) {
                    0 => u32::MAX,
                    1 => 0,
                    _ => rng.next_u32(),
                };
                (rng.next_u32(), mask)
            })
            .collect();
        let total: usize = words.iter().map(|w| w.1.count_ones() as usize).sum();
        for room in [total, total.saturating_sub(rng.gen_range(1..40)), 0] {
            let mut expected = vec![Fr::from(3u64); room];
            let mut t = Tape::new(&mut expected);
            for &(w, m) in &words {
                (0..32)
                    .filter(|i| m >> i & 1 == 1)
                    .for_each(|i| t.alloc_bit(w >> i & 1 == 1));
            }
            assert_eq!(t.len(), total);
            let mut got = vec![Fr::from(3u64); room];
            let mut t = Tape::new(&mut got);
            for &(w, m) in &words {
                t.alloc_bits_masked(w, m);
            }
            assert_eq!(t.len(), total);
            assert_eq!(t.finish().is_ok(), room == total);
            assert_eq!(got, expected);
        }
    }
}

#[test]
fn bit_ops_match_boolean_gadget_in_every_case() {
    for &a in &Spec::ALL {
        for &b in &Spec::ALL {
            let mut cs = AuxRecorder::default();
            let (ga, gb) = (a.gadget(&mut cs), b.gadget(&mut cs));
            let gx = Boolean::xor(cs.namespace(|| "xor"), &ga, &gb).unwrap();
            let gy = Boolean::and(cs.namespace(|| "and"), &ga, &gb).unwrap();
            let (nx, ny) = check_native(&cs.aux, |t| {
                let (na, nb) = (a.native(t), b.native(t));
                (Bit::xor(t, na, nb), Bit::and(t, na, nb))
            });
            assert!(same(&gx, nx), "xor {a:?} {b:?}: {nx:?}");
            assert!(same(&gy, ny), "and {a:?} {b:?}: {ny:?}");
            assert_eq!(nx.value(), a.value() ^ b.value());
            assert_eq!(ny.value(), a.value() & b.value());

            for &c in &Spec::ALL {
                let mut cs = AuxRecorder::default();
                let (ga, gb, gc) = (a.gadget(&mut cs), b.gadget(&mut cs), c.gadget(&mut cs));
                let gch = Boolean::sha256_ch(cs.namespace(|| "ch"), &ga, &gb, &gc).unwrap();
                let gmaj = Boolean::sha256_maj(cs.namespace(|| "maj"), &ga, &gb, &gc).unwrap();
                let (nch, nmaj) = check_native(&cs.aux, |t| {
                    let (na, nb, nc) = (a.native(t), b.native(t), c.native(t));
                    (
                        Bit::sha256_ch(t, na, nb, nc),
                        Bit::sha256_maj(t, na, nb, nc),
                    )
                });
                assert!(same(&gch, nch), "ch {a:?} {b:?} {c:?}: {nch:?}");
                assert!(same(&gmaj, nmaj), "maj {a:?} {b:?} {c:?}: {nmaj:?}");
                let (x, y, z) = (a.value(), b.value(), c.value());
                assert_eq!(nch.value(), (x & y) ^ (!x & z));
                assert_eq!(nmaj.value(), (x & y) ^ (x & z) ^ (y & z));
            }
        }
    }
}

#[test]
fn word_ops_match_uint32_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mixes = [
        Mix::Variables,
        Mix::Mixed,
        Mix::FewConstants,
        Mix::Constants,
    ];
    for trial in 0..400 {
        let mix = |rng: &mut ChaCha8Rng| mixes[rng.gen_range(0..mixes.len())];
        let n_add = rng.gen_range(2..=10);
        let specs: Vec<Vec<Spec>> = (0..3 + n_add)
            .map(|_| {
                let m = mix(&mut rng);
                random_specs(&mut rng, 32, m)
            })
            .collect();
        let (r1, r2, s) = (
            rng.gen_range(0..32),
            rng.gen_range(0..32),
            rng.gen_range(0..32),
        );

        let mut cs = AuxRecorder::default();
        let words: Vec<UInt32> = specs
            .iter()
            .map(|s| UInt32::from_bits_be(&gadget_bits(&mut cs, s)))
            .collect();
        let (a, b, c) = (&words[0], &words[1], &words[2]);
        let gx = a.rotr(r1).xor(cs.namespace(|| "x1"), &b.rotr(r2)).unwrap();
        let gx = gx.xor(cs.namespace(|| "x2"), &c.shr(s)).unwrap();
        let gch = UInt32::sha256_ch(cs.namespace(|| "ch"), a, b, c).unwrap();
        let gmaj = UInt32::sha256_maj(cs.namespace(|| "maj"), b, c, a).unwrap();
        let gsum = {
            let mut m = MultiEq::new(&mut cs);
            UInt32::addmany(m.namespace(|| "add"), &words[3..]).unwrap()
        };

        let (nx, nch, nmaj, nsum) = check_native(&cs.aux, |t| {
            let w: Vec<Word> = specs
                .iter()
                .map(|s| Word::from_bits_be(&native_bits(t, s)))
                .collect();
            let (a, b, c) = (&w[0], &w[1], &w[2]);
            let x = a
                .rotr(r1 as u32)
                .xor(t, &b.rotr(r2 as u32))
                .xor(t, &c.shr(s as u32));
            let ch = Word::sha256_ch(t, a, b, c);
            let maj = Word::sha256_maj(t, b, c, a);
            (x, ch, maj, Word::addmany(t, &w[3..]))
        });
        for (name, g, n) in [
            ("xor", gx, nx),
            ("ch", gch, nch),
            ("maj", gmaj, nmaj),
            ("add", gsum, nsum),
        ] {
            let gbits = g.into_bits_be();
            assert!(
                gbits.iter().zip(n.into_bits_be()).all(|(g, n)| same(g, n)),
                "trial {trial}: {name}"
            );
        }
        let v: Vec<u32> = specs
            .iter()
            .map(|s| s.iter().fold(0, |w, b| w << 1 | b.value() as u32))
            .collect();
        assert_eq!(
            nx.value,
            v[0].rotate_right(r1 as u32) ^ v[1].rotate_right(r2 as u32) ^ v[2] >> s
        );
        assert_eq!(
            nsum.value,
            v[3..].iter().fold(0u32, |s, &x| s.wrapping_add(x))
        );
    }
}

fn specs_of_bytes(bytes: &[u8], rng: &mut impl Rng, mix: Mix) -> Vec<Spec> {
    let kinds = random_specs(rng, bytes.len() * 8, mix);
    bytes
        .iter()
        .flat_map(|&b| (0..8).rev().map(move |i| b >> i & 1 == 1))
        .zip(kinds)
        .map(|(v, k)| match k {
            Spec::Constant(_) => Spec::Constant(v),
            Spec::Is(_) => Spec::Is(v),
            Spec::Not(_) => Spec::Not(v),
        })
        .collect()
}

fn digest_of(bits: &[Bit]) -> Vec<u8> {
    bits.chunks(8)
        .map(|c| c.iter().fold(0u8, |b, x| b << 1 | x.value() as u8))
        .collect()
}

#[test]
fn sha256_matches_gadget_and_fips() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    // Bytes: empty, 1 block (up to 55), the 2-block boundary, 2 and several blocks.
    for len in [0usize, 1, 3, 32, 55, 56, 64, 100, 119, 120, 200, 320] {
        for mix in [
            Mix::Variables,
            Mix::Mixed,
            Mix::FewConstants,
            Mix::Constants,
        ] {
            let mut msg = vec![0u8; len];
            rng.fill_bytes(&mut msg);
            let specs = specs_of_bytes(&msg, &mut rng, mix);

            let mut cs = AuxRecorder::default();
            let input = gadget_bits(&mut cs, &specs);
            let gout = sha256_gadget(cs.namespace(|| "sha"), &input).unwrap();
            let nout = check_native(&cs.aux, |t| {
                let input = native_bits(t, &specs);
                sha256(t, &input)
            });
            assert_same_bits(&gout, &nout);
            assert_eq!(
                digest_of(&nout),
                Sha256::digest(&msg).to_vec(),
                "{len} bytes, {mix:?}"
            );
            if !matches!(mix, Mix::Constants) && len > 0 {
                assert!(
                    cs.aux.len() > 20_000,
                    "{len} bytes, {mix:?}: {} values",
                    cs.aux.len()
                );
            }
        }
    }
}

#[test]
fn num_to_bits_le_matches_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut values = vec![Fr::ZERO, Fr::ONE, -Fr::ONE, Fr::from(u64::MAX)];
    values.extend((0..20).map(|_| Fr::random(&mut rng)));
    for v in values {
        let mut cs = AuxRecorder::default();
        let num = AllocatedNum::alloc(cs.namespace(|| "num"), || Ok(v)).unwrap();
        let gbits = num.to_bits_le(cs.namespace(|| "bits")).unwrap();
        let nbits = check_native(&cs.aux, |t| {
            t.alloc(v);
            num_to_bits_le(t, &v)
        });
        assert_eq!(cs.aux.len(), 256);
        assert_same_bits(&gbits, &nbits);
        let back = nbits
            .iter()
            .rev()
            .fold(Fr::ZERO, |acc, b| acc.double() + Fr::from(b.value() as u64));
        assert_eq!(back, v);
    }
}

#[test]
fn uint64_alloc_matches_gadget() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut values = vec![0, 1, u64::MAX, 1 << 63];
    values.extend((0..20).map(|_| rng.next_u64()));
    for v in values {
        let mut cs = AuxRecorder::default();
        let g = UInt64Gadget::alloc(cs.namespace(|| "u64"), Some(v)).unwrap();
        let n = check_native(&cs.aux, |t| uint64_alloc(t, v));
        assert_eq!(cs.aux.len(), 64);
        assert_same_bits(&g.to_bits_be(), &n.to_bits_be());
        assert_same_bits(&g.to_bits_le(), n.bits_le());
        assert_eq!(n.value(), v);
        assert_eq!(g.get_value(), Some(v));
    }
    assert_eq!(
        UInt64::constant(0x1234_5678_9abc_def0).value(),
        0x1234_5678_9abc_def0
    );
    assert!(UInt64::constant(5)
        .bits_le()
        .iter()
        .all(|b| b.is_constant()));
}

/// `StackedCircuit`'s parent expansion (storage-proofs-porep `stacked/circuit/params.rs`).
fn expand<T: Clone>(parents: Vec<T>, layer: u32) -> Vec<T> {
    let mut expanded = parents.clone();
    if layer > 1 {
        expanded.extend_from_slice(&parents);
        expanded.extend_from_slice(&parents[..9]);
    } else {
        for _ in 0..5 {
            expanded.extend_from_slice(&parents);
        }
        expanded.push(parents[0].clone());
    }
    expanded
}

/// One label in the circuit's shape: the replica id num and its bits, the challenge
/// `UInt64`, the parents' nums and per-layer `to_bits_le` (as `StackedCircuit::synthesize`
/// and `Proof::synthesize` allocate them, around `create_label_circuit`), gadget vs native;
/// the label also against FIPS SHA-256 of the label's bytes. With `prefix_bits`, the native
/// side passes the replica id's bits from [`fr_bits_le`].
fn check_label(seed: u64, layer: u32, prefix_bits: bool) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let replica_id = Fr::random(&mut rng);
    let node = rng.next_u64() >> rng.gen_range(0..40);
    let n_parents = if layer > 1 { 6 + 8 } else { 6 };
    let parents: Vec<Fr> = (0..n_parents).map(|_| Fr::random(&mut rng)).collect();

    let mut cs = AuxRecorder::default();
    let rid = AllocatedNum::alloc(cs.namespace(|| "replica_id"), || Ok(replica_id)).unwrap();
    let rid_bits =
        reverse_bit_numbering_gadget(rid.to_bits_le(cs.namespace(|| "replica_id_bits")).unwrap());
    let challenge = UInt64Gadget::alloc(cs.namespace(|| "challenge"), Some(node)).unwrap();
    let nums: Vec<AllocatedNum<Fr>> = parents
        .iter()
        .enumerate()
        .map(|(i, &p)| AllocatedNum::alloc(cs.namespace(|| format!("p{i}")), || Ok(p)).unwrap())
        .collect();
    let gparents: Vec<Vec<Boolean>> = nums
        .iter()
        .enumerate()
        .map(|(i, p)| {
            reverse_bit_numbering_gadget(p.to_bits_le(cs.namespace(|| format!("b{i}"))).unwrap())
        })
        .collect();
    let glabel = create_label_circuit(
        cs.namespace(|| "create_label"),
        &rid_bits,
        expand(gparents, layer),
        UInt32::constant(layer),
        challenge,
    )
    .unwrap();

    let nlabel = check_native(&cs.aux, |t| {
        t.alloc(replica_id);
        let allocated = num_to_bits_le(t, &replica_id);
        // As the engine will: the replica id's bits are allocated in the prefix, a block
        // uses them unallocated.
        let rid_bits = reverse_bit_numbering(if prefix_bits {
            fr_bits_le(&replica_id)
        } else {
            allocated
        });
        let challenge = uint64_alloc(t, node);
        for &p in &parents {
            t.alloc(p);
        }
        let nparents: Vec<Vec<Bit>> = parents
            .iter()
            .map(|p| reverse_bit_numbering(num_to_bits_le(t, p)))
            .collect();
        create_label(t, &rid_bits, &expand(nparents, layer), layer, &challenge)
    });
    assert_eq!(Some(nlabel), glabel.get_value());
    assert_eq!(cs.aux.last(), Some(&nlabel));
    // 20 blocks of about 26 k values (fewer where the message bits are constant).
    assert!(cs.aux.len() > 500_000, "{} values", cs.aux.len());

    let mut h = Sha256::new();
    h.update(replica_id.to_bytes_le());
    h.update(layer.to_be_bytes());
    h.update(node.to_be_bytes());
    h.update([0u8; 20]);
    for p in expand(parents, layer) {
        h.update(p.to_bytes_le());
    }
    let mut digest: [u8; 32] = h.finalize().into();
    digest[31] &= 0x3f;
    assert_eq!(nlabel, Fr::from_bytes_le(&digest).unwrap());
}

#[test]
fn create_label_matches_gadget_layer_1() {
    check_label(5, 1, false);
}

#[test]
fn create_label_matches_gadget_layer_above_1() {
    check_label(6, 2, false);
    check_label(7, 11, true);
}

#[test]
fn hash_multi_leaf2_matches_gadgets() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut pairs = vec![[Fr::ZERO, Fr::ZERO], [-Fr::ONE, Fr::ONE]];
    pairs.extend((0..6).map(|_| [Fr::random(&mut rng), Fr::random(&mut rng)]));
    for [a, b] in pairs {
        let mut cs = AuxRecorder::default();
        let na = AllocatedNum::alloc(cs.namespace(|| "a"), || Ok(a)).unwrap();
        let nb = AllocatedNum::alloc(cs.namespace(|| "b"), || Ok(b)).unwrap();
        let g = Sha256Function::hash_multi_leaf_circuit::<PoseidonBinaryArity, _>(
            cs.namespace(|| "hash"),
            &[na.clone(), nb.clone()],
            0,
        )
        .unwrap();
        let mut cs2 = AuxRecorder::default();
        let na2 = AllocatedNum::alloc(cs2.namespace(|| "a"), || Ok(a)).unwrap();
        let nb2 = AllocatedNum::alloc(cs2.namespace(|| "b"), || Ok(b)).unwrap();
        let g2 = Sha256Function::hash2_circuit(cs2.namespace(|| "hash2"), &na2, &nb2).unwrap();

        for expected in [&cs.aux, &cs2.aux] {
            let n = check_native(expected, |t| {
                t.alloc(a);
                t.alloc(b);
                hash_multi_leaf2(t, &[a, b])
            });
            assert_eq!(Some(n), g.get_value());
            assert_eq!(Some(n), g2.get_value());
            let vanilla: Fr =
                Sha256Function::hash2(&Sha256Domain::from(a), &Sha256Domain::from(b)).into();
            assert_eq!(n, vanilla);
        }
        assert!(cs.aux.len() > 40_000, "{} values", cs.aux.len());
    }
}

/// Speed of `create_label` in the 32 GiB shape (layer > 1, 14 parents expanded to 37):
/// `cargo test --release --lib circuit::native::sha256 -- --ignored --nocapture`.
#[test]
#[ignore]
fn create_label_speed_32gib_shape() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let layer = 5;
    let replica_id = Fr::random(&mut rng);
    let parents: Vec<Fr> = (0..14).map(|_| Fr::random(&mut rng)).collect();
    let label_inputs = |t: &mut Tape| {
        let rid = reverse_bit_numbering(num_to_bits_le(t, &replica_id));
        let node = uint64_alloc(t, 123_456_789);
        let ps: Vec<Vec<Bit>> = parents
            .iter()
            .map(|p| reverse_bit_numbering(num_to_bits_le(t, p)))
            .collect();
        (rid, node, expand(ps, layer))
    };
    let mut scratch = Vec::new();
    let (rid, node, ps) = label_inputs(&mut Tape::new(&mut scratch));
    let n = {
        let mut t = Tape::new(&mut scratch);
        create_label(&mut t, &rid, &ps, layer, &node);
        t.len()
    };
    // Hot: one label's aux (16.7 MB) rewritten, mostly in cache. Streaming: 12 labels'
    // aux one after the other (200 MB, past any cache, as a challenge block's 240 MB are).
    let labels = 12;
    let mut aux = vec![Fr::ZERO; n * labels];
    for (name, span) in [("hot", n), ("streaming", n * labels)] {
        let mut best = f64::MAX;
        for _ in 0..4 {
            let start = std::time::Instant::now();
            for _ in 0..labels {
                for chunk in aux[..span].chunks_exact_mut(n) {
                    let mut t = Tape::new(chunk);
                    std::hint::black_box(create_label(&mut t, &rid, &ps, layer, &node));
                    t.finish().unwrap();
                }
            }
            let per = start.elapsed().as_secs_f64() / (labels * span / n) as f64;
            best = best.min(per);
        }
        println!(
            "create_label (32 GiB shape, {name}): {n} values, {:.1} us per label, {:.2} ns per value",
            best * 1e6,
            best * 1e9 / n as f64
        );
    }

    let pair = [Fr::random(&mut rng), Fr::random(&mut rng)];
    let m = {
        let mut t = Tape::new(&mut scratch);
        hash_multi_leaf2(&mut t, &pair);
        t.len()
    };
    let mut aux = vec![Fr::ZERO; m];
    let start = std::time::Instant::now();
    for _ in 0..400 {
        let mut t = Tape::new(&mut aux);
        std::hint::black_box(hash_multi_leaf2(&mut t, &pair));
        t.finish().unwrap();
    }
    let per = start.elapsed().as_secs_f64() / 400.0;
    println!(
        "hash_multi_leaf2: {m} values, {:.1} us per hash, {:.2} ns per value",
        per * 1e6,
        per * 1e9 / m as f64
    );
}
