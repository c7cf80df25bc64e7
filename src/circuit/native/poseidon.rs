//! Native Poseidon: the witness of neptune's (v1, "legacy") Poseidon circuit from field
//! arithmetic.
//!
//! Mirrors `neptune-11.0.0/src/circuit.rs`, `poseidon_hash` and the `PoseidonCircuit` it drives,
//! which is what filecoin-hashers' `PoseidonFunction::hash_multi_leaf_circuit`,
//! `hash_leaf_circuit` and `hash2_circuit` call (`filecoin-hashers-14.1.0/src/poseidon.rs`), and
//! what storage-proofs-porep's `hash_single_column` calls for columns of 2 and 11 rows. The
//! gadget builds a linear combination for every MDS product (about 9.6 M instructions per
//! arity-8 hash, none of which the witness reads); this routine computes the same values with
//! plain `Fr` multiplications and writes the allocated ones to the [`Tape`] in the gadget's order.
//!
//! The algorithm is Poseidon (Grassi, Khovratovich, Rechberger, Roy, Schofnegger, "Poseidon: A
//! New Hash Function for Zero-Knowledge Proof Systems", USENIX Security 2021) with x⁵ s-boxes,
//! in neptune's optimized round layout: the round constants are "compressed" (moved through the
//! linear layers so that a partial round adds one constant, to its s-box output), the last
//! full round before the partial rounds uses the pre-sparse matrix and each partial round a
//! sparse matrix (first row dense, `w_hat`; first column `v_rest`; identity elsewhere). The
//! constants are never recomputed here: [`constants`] copies them from filecoin-hashers'
//! `POSEIDON_CONSTANTS_*` statics, the very objects the gadgets read.
//!
//! # Allocations of one hash (width `w` = arity + 1, `R_F` full rounds, `R_P` partial rounds)
//!
//! The state starts as `[domain_tag, preimage…]`; the preimage are the caller's variables (not
//! allocated here), the domain tag a constant.
//! 1. First full round: element 0 (the tag) is a constant, no allocation. Each element `i ≥ 1`:
//!    `(x + pre)²`, `(x + pre)⁴`, `(x + pre)⁵ + post` — 3 allocations (the gadget's
//!    `quintic_s_box_pre_add`: `square_sum`, `square`, `mul_sum`; `x` is the input variable
//!    itself).
//! 2. Every other full round, each element: the s-box input `x` (an `Elt::Num` made an
//!    allocated num by `ensure_allocated`), `x²`, `x⁴`, `x⁵ (+ post)` — 4 allocations; the
//!    terminal round adds no constant.
//! 3. Every partial round: the same 4 for element 0 only.
//! 4. The result: state element 1 (`ensure_allocated` of "hash result") — 1 allocation.
//!
//! In all `3·arity + 4·w·(R_F − 1) + 4·R_P + 1` values, one per constraint of the gadget: 311
//! for arity 2, 505 for arity 8, 598 for arity 11.

use std::sync::OnceLock;

use blstrs::Scalar as Fr;
use ff::Field;

use super::tape::Tape;

/// The widest state supported (arity 36, filecoin-hashers' `POSEIDON_CONSTANTS_36`).
const MAX_WIDTH: usize = 37;

/// The Poseidon constants of one arity in the layout the native routine reads, copied from
/// neptune's `PoseidonConstants` (`neptune-11.0.0/src/poseidon.rs`) as filecoin-hashers builds
/// them (`filecoin-hashers-14.1.0/src/poseidon_types.rs`, `POSEIDON_CONSTANTS_*`).
///
/// The matrices are stored by column (`m[i][j]` at `j·w + i`): the circuit's MDS product is
/// `state'[j] = Σᵢ state[i]·m[i][j]` (`PoseidonCircuit::product_mds_with_matrix`).
pub struct PoseidonConstants {
    arity: usize,
    width: usize,
    half_full_rounds: usize,
    /// Read by [`PoseidonConstants::allocations`] only (its tests).
    #[cfg(test)]
    partial_rounds: usize,
    domain_tag: Fr,
    /// neptune's `compressed_round_constants`, in the order the circuit consumes them.
    round_constants: Vec<Fr>,
    /// `mds_matrices.m`, by column.
    mds: Vec<Fr>,
    /// `pre_sparse_matrix`, by column.
    pre_sparse: Vec<Fr>,
    /// `sparse_matrixes[r]` for partial round `r`: `w_hat` (w values) then `v_rest` (w − 1).
    sparse: Vec<Fr>,
}

impl PoseidonConstants {
    /// Copies one arity's constants (see [`constants`]); checks the shapes the circuit relies on.
    #[allow(clippy::too_many_arguments)]
    fn from_parts<'a>(
        width: usize,
        full_rounds: usize,
        half_full_rounds: usize,
        partial_rounds: usize,
        domain_tag: Fr,
        round_constants: &[Fr],
        mds: &[Vec<Fr>],
        pre_sparse: &[Vec<Fr>],
        sparse: impl ExactSizeIterator<Item = (&'a [Fr], &'a [Fr])>,
    ) -> Self {
        assert!((3..=MAX_WIDTH).contains(&width), "width {width}");
        assert!(half_full_rounds >= 1 && full_rounds == 2 * half_full_rounds);
        assert_eq!(round_constants.len(), width * full_rounds + partial_rounds);
        let by_column = |m: &[Vec<Fr>]| {
            assert!(m.len() == width && m.iter().all(|row| row.len() == width));
            (0..width * width)
                .map(|k| m[k % width][k / width])
                .collect::<Vec<_>>()
        };
        assert_eq!(sparse.len(), partial_rounds);
        let mut flat = Vec::with_capacity(partial_rounds * (2 * width - 1));
        for (w_hat, v_rest) in sparse {
            assert!(w_hat.len() == width && v_rest.len() == width - 1);
            flat.extend_from_slice(w_hat);
            flat.extend_from_slice(v_rest);
        }
        PoseidonConstants {
            arity: width - 1,
            width,
            half_full_rounds,
            #[cfg(test)]
            partial_rounds,
            domain_tag,
            round_constants: round_constants.to_vec(),
            mds: by_column(mds),
            pre_sparse: by_column(pre_sparse),
            sparse: flat,
        }
    }

    /// The arity (preimage length); the state is one wider (the domain tag).
    #[cfg(test)]
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// Values one hash allocates: `3·arity + 4·w·(R_F − 1) + 4·R_P + 1` (see the module docs).
    #[cfg(test)]
    pub fn allocations(&self) -> usize {
        3 * self.arity
            + 4 * self.width * (2 * self.half_full_rounds - 1)
            + 4 * self.partial_rounds
            + 1
    }
}

/// Copies the constants of a filecoin-hashers static (`&*POSEIDON_CONSTANTS_n`: neptune's
/// `PoseidonConstants<Fr, Un>`, a type this crate cannot name, hence a macro).
macro_rules! copy_constants {
    ($c:expr) => {{
        let c = &*$c;
        PoseidonConstants::from_parts(
            c.width(),
            c.full_rounds,
            c.half_full_rounds,
            c.partial_rounds,
            c.domain_tag,
            &c.compressed_round_constants,
            &c.mds_matrices.m,
            &c.pre_sparse_matrix,
            c.sparse_matrixes
                .iter()
                .map(|s| (s.w_hat.as_slice(), s.v_rest.as_slice())),
        )
    }};
}

/// The constants of `arity`, copied once from filecoin-hashers' statics: 2, 4, 8, 11, 16, 24
/// and 36 (`POSEIDON_CONSTANTS_2` … `_36`; `PoseidonArity::PARAMETERS()` of `U2`/`U4`/`U8`/
/// `U11`/`U16`/`U24`/`U36`, and `POSEIDON_MD_CONSTANTS` equals `_36`). The PoRep circuit uses
/// 2 (2-layer column hashes, top trees of arity 2), 8 (tree nodes) and 11 (11-layer columns).
///
/// # Panics
/// On any other arity.
pub fn constants(arity: usize) -> &'static PoseidonConstants {
    use filecoin_hashers::{
        POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_16, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_24,
        POSEIDON_CONSTANTS_36, POSEIDON_CONSTANTS_4, POSEIDON_CONSTANTS_8,
    };
    static C: [OnceLock<PoseidonConstants>; 7] = [const { OnceLock::new() }; 7];
    match arity {
        2 => C[0].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_2)),
        4 => C[1].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_4)),
        8 => C[2].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_8)),
        11 => C[3].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_11)),
        16 => C[4].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_16)),
        24 => C[5].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_24)),
        36 => C[6].get_or_init(|| copy_constants!(POSEIDON_CONSTANTS_36)),
        _ => panic!("no Poseidon constants of arity {arity}"),
    }
}

/// The constants of storage-proofs-update's `POSEIDON_CONSTANTS_GEN_RANDOMNESS`
/// (`storage-proofs-update-19.1.0/src/constants.rs`): arity 2 with its own domain tag
/// (`HashType::Custom(CType::Arbitrary(1))`), the SnapDeals circuit's phi, rho and challenge
/// digests. Copied once, as [`constants`].
pub fn constants_gen_randomness() -> &'static PoseidonConstants {
    static C: OnceLock<PoseidonConstants> = OnceLock::new();
    C.get_or_init(|| {
        copy_constants!(storage_proofs_update::constants::POSEIDON_CONSTANTS_GEN_RANDOMNESS)
    })
}

/// Poseidon of `preimage` (its length must be `c.arity()`), writing the values the circuit
/// allocates (module docs) to `t`; returns the hash (the value of the gadget's result, also
/// the last value written).
///
/// Mirrors `neptune::circuit::poseidon_hash(cs, preimage, constants)`
/// (`neptune-11.0.0/src/circuit.rs`). The caller allocates the preimage variables itself,
/// before (they are the gadget's inputs, not allocated by it).
///
/// # Panics
/// If `preimage.len() != c.arity()`.
pub fn poseidon_hash(t: &mut Tape<'_>, preimage: &[Fr], c: &PoseidonConstants) -> Fr {
    assert_eq!(preimage.len(), c.arity, "Poseidon preimage length");
    match c.width {
        3 => hash_w::<3>(t, preimage, c),
        5 => hash_w::<5>(t, preimage, c),
        9 => hash_w::<9>(t, preimage, c),
        12 => hash_w::<12>(t, preimage, c),
        17 => hash_w::<17>(t, preimage, c),
        25 => hash_w::<25>(t, preimage, c),
        37 => hash_w::<37>(t, preimage, c),
        w => unreachable!("no Poseidon of width {w}"),
    }
}

/// The node hash of a Poseidon Merkle tree, for [`super::por`]'s paths: Poseidon of the
/// `children` with the constants of their number (filecoin-hashers'
/// `PoseidonFunction::hash_multi_leaf_circuit::<Arity>`, which ignores the height).
pub fn poseidon_node(t: &mut Tape<'_>, children: &[Fr], _height: usize) -> Fr {
    poseidon_hash(t, children, constants(children.len()))
}

/// Poseidon of two field elements, `a` then `b` (filecoin-hashers'
/// `PoseidonFunction::hash2_circuit`: `poseidon_hash` with `U2::PARAMETERS()`, the constants of
/// arity 2): the PoSt circuit's comm_r = H(comm_c, comm_r_last). The caller allocates `a` and
/// `b` before.
pub fn hash2(t: &mut Tape<'_>, a: Fr, b: Fr) -> Fr {
    poseidon_hash(t, &[a, b], constants(2))
}

/// `x²`, `x⁴`, `x⁴·x + post` allocated (the gadget's `l²`, `l⁴`, `mul_sum`); returns the last.
#[inline(always)]
fn s_box(t: &mut Tape<'_>, x: Fr, post: Option<Fr>) -> Fr {
    let x2 = x.square();
    t.alloc(x2);
    let x4 = x2.square();
    t.alloc(x4);
    let mut y = x4 * x;
    if let Some(k) = post {
        y += k;
    }
    t.alloc(y);
    y
}

/// `state ← state · m` for `m` by column (`product_mds_with_matrix`).
#[inline(always)]
fn dense<const W: usize>(s: &mut [Fr; W], m: &[Fr]) {
    let mut out = [Fr::ZERO; W];
    for (j, o) in out.iter_mut().enumerate() {
        let col = &m[j * W..(j + 1) * W];
        let mut acc = s[0] * col[0];
        for i in 1..W {
            acc += s[i] * col[i];
        }
        *o = acc;
    }
    *s = out;
}

/// `state ← state · M''` for a sparse matrix `w_hat ‖ v_rest` (`product_mds_with_sparse_matrix`).
#[inline(always)]
fn sparse<const W: usize>(s: &mut [Fr; W], m: &[Fr]) {
    let (w_hat, v_rest) = m.split_at(W);
    let s0 = s[0];
    let mut acc = s0 * w_hat[0];
    for i in 1..W {
        acc += s[i] * w_hat[i];
        s[i] += s0 * v_rest[i - 1];
    }
    s[0] = acc;
}

/// [`poseidon_hash`] for width `W`.
fn hash_w<const W: usize>(t: &mut Tape<'_>, preimage: &[Fr], c: &PoseidonConstants) -> Fr {
    let half = c.half_full_rounds;
    let rc = c.round_constants.as_slice();
    let mut s = [Fr::ZERO; W];
    s[0] = c.domain_tag;
    s[1..].copy_from_slice(preimage);

    // The MDS product after full round `r` of the first half (`PoseidonCircuit::product_mds`:
    // the pre-sparse matrix after the last of them).
    let first_half_mds = |s: &mut [Fr; W], r: usize| {
        dense(s, if r == half - 1 { &c.pre_sparse } else { &c.mds });
    };

    // First full round: round keys added before and after the s-box; the tag's s-box is a
    // constant (`constant_quintic_s_box_pre_add_tag`), the others `quintic_s_box_pre_add`.
    let (pre, post) = (&rc[..W], &rc[W..2 * W]);
    let x = s[0] + pre[0];
    s[0] = x.square().square() * x + post[0];
    for i in 1..W {
        s[i] = s_box(t, s[i] + pre[i], Some(post[i]));
    }
    let mut k = 2 * W;
    first_half_mds(&mut s, 0);

    // Remaining full rounds of the first half: the s-box input is allocated
    // (`ensure_allocated`), one key after the s-box.
    for r in 1..half {
        for i in 0..W {
            t.alloc(s[i]);
            s[i] = s_box(t, s[i], Some(rc[k + i]));
        }
        k += W;
        first_half_mds(&mut s, r);
    }

    // Partial rounds: element 0 only, one key; sparse matrices.
    for m in c.sparse.chunks_exact(2 * W - 1) {
        t.alloc(s[0]);
        s[0] = s_box(t, s[0], Some(rc[k]));
        k += 1;
        sparse(&mut s, m);
    }

    // Second half: full rounds with one key each, then the terminal round without key.
    for _ in 1..half {
        for i in 0..W {
            t.alloc(s[i]);
            s[i] = s_box(t, s[i], Some(rc[k + i]));
        }
        k += W;
        dense(&mut s, &c.mds);
    }
    debug_assert_eq!(k, rc.len());
    for x in s.iter_mut() {
        t.alloc(*x);
        *x = s_box(t, *x, None);
    }
    // Only element 1 of the last product is read (the result).
    let col = &c.mds[W..2 * W];
    let mut h = s[0] * col[0];
    for i in 1..W {
        h += s[i] * col[i];
    }
    t.alloc(h);
    h
}

#[cfg(test)]
pub(crate) mod tests {
    //! Value-for-value tests against neptune's gadget (through filecoin-hashers), and the
    //! arity types the tests of this module tree need (this crate does not depend on typenum:
    //! they are taken from the tree shapes filecoin-proofs exports, and built with the
    //! operators typenum implements).
    use std::ops::{Add, Div};

    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::ConstraintSystem;
    use filecoin_hashers::poseidon::PoseidonFunction;
    use filecoin_hashers::{HashFunction, PoseidonArity};
    use filecoin_proofs::{SectorShapeBase, SectorShapeTop2};
    use rand::{RngCore, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use storage_proofs_core::merkle::MerkleTreeTrait;

    use super::*;
    use crate::circuit::native::tape::test_support::AuxRecorder;

    pub(crate) type U0 = <SectorShapeBase as MerkleTreeTrait>::SubTreeArity;
    pub(crate) type U2 = <SectorShapeTop2 as MerkleTreeTrait>::TopTreeArity;
    pub(crate) type U8 = <SectorShapeTop2 as MerkleTreeTrait>::Arity;
    type U1 = <U2 as Div<U2>>::Output;
    pub(crate) type U4 = <U2 as Add<U2>>::Output;
    pub(crate) type U11 = <<U8 as Add<U2>>::Output as Add<U1>>::Output;
    pub(crate) type U16 = <U8 as Add<U8>>::Output;
    type U24 = <U16 as Add<U8>>::Output;
    type U36 = <<U24 as Add<U8>>::Output as Add<U4>>::Output;

    /// A deterministic rng for the tests.
    pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// A random field element.
    pub(crate) fn fr(rng: &mut impl RngCore) -> Fr {
        Fr::random(rng)
    }

    /// Runs `native` on a tape as long as the gadget's recorded aux vector and asserts the
    /// same number of values, each equal (reports the first difference).
    pub(crate) fn assert_tape_matches(recorded: &[Fr], native: impl FnOnce(&mut Tape<'_>)) {
        let mut buf = vec![Fr::ZERO; recorded.len()];
        let mut t = Tape::new(&mut buf);
        native(&mut t);
        assert_eq!(
            t.finish(),
            Ok(recorded.len()),
            "(native, gadget) allocations"
        );
        if let Some(i) = (0..buf.len()).find(|&i| buf[i] != recorded[i]) {
            panic!(
                "aux {i} of {}: native {:?}, gadget {:?}",
                buf.len(),
                buf[i],
                recorded[i]
            );
        }
    }

    /// Allocates `vals` in `cs` (the caller's variables around a gadget).
    pub(crate) fn alloc_nums(cs: &mut AuxRecorder, vals: &[Fr]) -> Vec<AllocatedNum<Fr>> {
        vals.iter()
            .enumerate()
            .map(|(i, v)| AllocatedNum::alloc(cs.namespace(|| format!("x{i}")), || Ok(*v)).unwrap())
            .collect()
    }

    /// The gadget (`hash_multi_leaf_circuit::<A>`, i.e. neptune's `poseidon_hash` with
    /// `A::PARAMETERS()`) and the native hash on the same random preimages.
    fn check_arity<A: 'static + PoseidonArity>(seed: u64) {
        let arity = A::to_usize();
        let c = constants(arity);
        let mut rng = rng(seed);
        for _ in 0..4 {
            let pre: Vec<Fr> = (0..arity).map(|_| fr(&mut rng)).collect();
            let mut cs = AuxRecorder::default();
            let nums = alloc_nums(&mut cs, &pre);
            let out = PoseidonFunction::hash_multi_leaf_circuit::<A, _>(&mut cs, &nums, 0)
                .unwrap()
                .get_value()
                .unwrap();
            assert_eq!(cs.aux.len(), arity + c.allocations());
            assert!(cs.inputs.is_empty());
            let mut h = Fr::ZERO;
            assert_tape_matches(&cs.aux, |t| {
                pre.iter().for_each(|v| t.alloc(*v));
                h = poseidon_hash(t, &pre, c);
            });
            assert_eq!(h, out);
            assert_eq!(*cs.aux.last().unwrap(), out);
        }
    }

    #[test]
    fn poseidon_matches_gadget_every_arity() {
        check_arity::<U2>(2);
        check_arity::<U4>(4);
        check_arity::<U8>(8);
        check_arity::<U11>(11);
        check_arity::<U16>(16);
        check_arity::<U24>(24);
        check_arity::<U36>(36);
    }

    #[test]
    fn poseidon_allocation_counts() {
        // One allocation per constraint of the gadget: neptune's circuit.rs tests count 311
        // (arity 2) and 505 (arity 8), storage-proofs-porep's `hash_single_column` test 598
        // (arity 11).
        assert_eq!(constants(2).allocations(), 311);
        assert_eq!(constants(8).allocations(), 505);
        assert_eq!(constants(11).allocations(), 598);
    }

    #[test]
    fn poseidon_matches_vanilla_hash() {
        // The value also equals filecoin-hashers' out-of-circuit hash (neptune's optimized
        // `Poseidon::hash`).
        let mut rng = rng(7);
        let (a, b) = (fr(&mut rng), fr(&mut rng));
        let mut buf = vec![Fr::ZERO; constants(2).allocations()];
        let h = poseidon_hash(&mut Tape::new(&mut buf), &[a, b], constants(2));
        let v: Fr = PoseidonFunction::hash2(&a.into(), &b.into()).into();
        assert_eq!(h, v);
    }

    #[test]
    fn hash2_circuit_is_arity_2() {
        let mut rng = rng(9);
        let pre = [fr(&mut rng), fr(&mut rng)];
        let mut cs = AuxRecorder::default();
        let nums = alloc_nums(&mut cs, &pre);
        let out = PoseidonFunction::hash2_circuit(&mut cs, &nums[0], &nums[1])
            .unwrap()
            .get_value()
            .unwrap();
        assert_tape_matches(&cs.aux, |t| {
            pre.iter().for_each(|v| t.alloc(*v));
            poseidon_node(t, &pre, 0);
        });
        // `hash2` is the same hash, operands in order (swapped, another value).
        assert_tape_matches(&cs.aux, |t| {
            pre.iter().for_each(|v| t.alloc(*v));
            assert_eq!(hash2(t, pre[0], pre[1]), out);
        });
        let mut buf = vec![Fr::ZERO; constants(2).allocations()];
        assert_ne!(hash2(&mut Tape::new(&mut buf), pre[1], pre[0]), out);
    }

    #[test]
    #[ignore = "timing; run with --ignored --nocapture"]
    fn poseidon_speed() {
        let mut rng = rng(1);
        // The machine's speed of one field multiplication (blst's `blst_fr_mul`), to read the
        // figures below against: an arity-8 hash is about 1,930 multiplications and squarings
        // and as many additions.
        let (mut x, y) = (fr(&mut rng), fr(&mut rng));
        let n = 1_000_000;
        let start = std::time::Instant::now();
        for _ in 0..n {
            x *= y;
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        println!("Fr mul (dependent chain): {ns:.1} ns ({x:?})");
        for arity in [2usize, 8, 11] {
            let c = constants(arity);
            let pre: Vec<Fr> = (0..arity).map(|_| fr(&mut rng)).collect();
            let mut buf = vec![Fr::ZERO; c.allocations()];
            let n = 2000;
            let mut acc = Fr::ZERO;
            let start = std::time::Instant::now();
            for _ in 0..n {
                let mut t = Tape::new(&mut buf);
                acc += poseidon_hash(&mut t, &pre, c);
            }
            let ns = start.elapsed().as_nanos() as f64 / n as f64;
            println!("poseidon arity {arity}: {ns:.0} ns/hash ({acc:?})");
        }
    }
}
