//! Native Merkle inclusion paths (PoR): the witness of storage-proofs' `insert`, `SubPath` and
//! `PoRCircuit`, generic over the node hash.
//!
//! Mirrors `storage-proofs-core-19.1.0/src/gadgets/insertion.rs` (`insert`, `insert_2`,
//! `insert_4`, `insert_8`, `select`, `pick`) and `…/gadgets/por.rs` (`SubPath::synthesize`,
//! `PoRCircuit::synthesize`) as the stacked circuit calls them: through `enforce_inclusion`
//! (`storage-proofs-porep-19.1.0/src/stacked/circuit/params.rs`), which passes the leaf and the
//! root as already-allocated variables (`Root::Var`) and `private = true`.
//!
//! # What a path allocates
//! For each level of each sub-path (base levels, then the sub-tree level, then the top-tree
//! level), in this order:
//! 1. the index bits: `log2(arity)` `AllocatedBit`s, least significant first;
//! 2. the `arity − 1` siblings (`AllocatedNum`s);
//! 3. the insertion of the current node among the siblings ([`insert`]);
//! 4. the node hash of the `arity` children (the closure: Poseidon for tree R and C,
//!    SHA-256 for tree D).
//!
//! Nothing else goes to aux: `Root::Var` leaf and root are not allocated again, the root check
//! (`constraint::equal`) is a constraint only, and `private = true` skips `rt.inputize`. But
//! `PoRCircuit::synthesize` always calls `multipack::pack_into_inputs` on the concatenated
//! index bits, so **each path allocates one public input** (the packed bits, see
//! [`path_input`]); it is an input, not an aux value, and is not written to the tape.

use blstrs::Scalar as Fr;
use ff::Field;

use super::tape::Tape;

/// The largest arity [`insert`] takes (the largest power of two with Poseidon constants).
pub const MAX_ARITY: usize = 16;

/// The arities of a tree: base, sub-tree and top-tree (0: none), as storage-proofs'
/// `MerkleTreeTrait::{Arity, SubTreeArity, TopTreeArity}`.
///
/// A path of `n` levels is split as `AuthPath`'s `From<Vec<(Vec<Option<Fr>>, Option<usize>)>>`
/// splits it: the last level is the top tree's (when `top > 0`), the one before the sub-tree's
/// (when `sub > 0`), the others the base tree's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeShape {
    /// Arity of the base tree: 2, 4, 8 or 16.
    pub base: usize,
    /// Arity of the sub-tree level, 0 for none.
    pub sub: usize,
    /// Arity of the top-tree level, 0 for none (then `sub` may still be non-zero).
    pub top: usize,
}

impl TreeShape {
    /// Tree D (comm_d): binary, `AuthPath<Sha256Hasher, U2, U0, U0>`.
    pub const BINARY: TreeShape = TreeShape::new(2, 0, 0);
    /// Trees R and C of 2 KiB, 8 MiB and 512 MiB sectors: `(8, 0, 0)`.
    #[cfg(test)]
    pub const OCT: TreeShape = TreeShape::new(8, 0, 0);
    /// Trees R and C of 32 GiB sectors: `(8, 8, 0)`.
    #[cfg(test)]
    pub const OCT_SUB8: TreeShape = TreeShape::new(8, 8, 0);
    /// Trees R and C of 64 GiB sectors: `(8, 8, 2)`.
    #[cfg(test)]
    pub const OCT_SUB8_TOP2: TreeShape = TreeShape::new(8, 8, 2);

    /// A shape; the arities must be powers of two in `2..=MAX_ARITY` (or 0 for `sub`/`top`).
    ///
    /// # Panics
    /// On any other arity.
    pub const fn new(base: usize, sub: usize, top: usize) -> Self {
        assert!(base.is_power_of_two() && base >= 2 && base <= MAX_ARITY);
        assert!(sub == 0 || (sub.is_power_of_two() && sub >= 2 && sub <= MAX_ARITY));
        assert!(top == 0 || (top.is_power_of_two() && top >= 2 && top <= MAX_ARITY));
        TreeShape { base, sub, top }
    }

    /// The path's levels as base, sub-tree and top-tree levels (`AuthPath::from`'s split).
    ///
    /// # Panics
    /// If the path is shorter than the sub- and top-tree levels.
    #[allow(clippy::type_complexity)]
    pub fn split<'p, L>(&self, path: &'p [L]) -> (&'p [L], &'p [L], &'p [L]) {
        let top = usize::from(self.top > 0);
        let sub = usize::from(self.sub > 0);
        assert!(path.len() >= top + sub, "path of {} levels", path.len());
        let (rest, top) = path.split_at(path.len() - top);
        let (base, sub) = rest.split_at(rest.len() - sub);
        (base, sub, top)
    }
}

/// Values [`insert`] allocates for `arity`: 2 (arity 2), 8 (4), 22 (8), `arity·(arity − 1)`
/// otherwise (the general `select` construction).
#[cfg(test)]
pub const fn insert_allocations(arity: usize) -> usize {
    match arity {
        2 => 2,
        4 => 8,
        8 => 22,
        n => n * (n - 1),
    }
}

/// `pick`: allocates and returns `if c { a } else { b }`.
#[inline(always)]
fn pick(t: &mut Tape<'_>, c: bool, a: Fr, b: Fr) -> Fr {
    let v = if c { a } else { b };
    t.alloc(v);
    v
}

/// Inserts `element` among `siblings` at the position given by the low `log2(arity)` bits of
/// `index` (as the gadget's index bits carry them), writing the `arity` children to `out`
/// (`out.len() == siblings.len() + 1 == arity`, a power of two ≤ [`MAX_ARITY`]).
///
/// Mirrors `storage_proofs_core::gadgets::insertion::insert`: its hand-written `insert_2`,
/// `insert_4` and `insert_8`, else the general `select` per position. Allocates every `pick`
/// (and, for arity 8, the `b0 nor b1` and `b0 and b1` bits first): `insert_allocations`
/// values. The caller allocates the element, the index bits and the siblings before (as
/// `SubPath::synthesize` does; [`sub_path`] does all of it).
///
/// # Panics
/// On another arity or mismatched lengths.
pub fn insert(t: &mut Tape<'_>, element: Fr, index: usize, siblings: &[Fr], out: &mut [Fr]) {
    let n = siblings.len() + 1;
    assert!(n.is_power_of_two() && (2..=MAX_ARITY).contains(&n) && out.len() == n);
    let bit = |k: usize| (index >> k) & 1 == 1;
    let a = element;
    match n {
        2 => {
            let b0 = bit(0);
            out[0] = pick(t, b0, siblings[0], a);
            out[1] = pick(t, b0, a, siblings[0]);
        }
        4 => {
            let (b0, b1) = (bit(0), bit(1));
            let [b, c, d] = [siblings[0], siblings[1], siblings[2]];
            let p0 = pick(t, b0, b, a);
            out[0] = pick(t, b1, b, p0);
            let p1 = pick(t, b0, a, b);
            out[1] = pick(t, b1, c, p1);
            let p2 = pick(t, b0, d, a);
            out[2] = pick(t, b1, p2, c);
            let p3 = pick(t, b0, a, d);
            out[3] = pick(t, b1, p3, d);
        }
        8 => {
            let (b0, b1, b2) = (bit(0), bit(1), bit(2));
            let s = siblings;
            let [b, c, d, e, f, g, h] = [s[0], s[1], s[2], s[3], s[4], s[5], s[6]];
            let nor = !b0 && !b1;
            t.alloc_bit(nor);
            let and = b0 && b1;
            t.alloc_bit(and);

            let x = pick(t, nor, a, b);
            out[0] = pick(t, b2, b, x);

            let x = pick(t, b0, a, b);
            let x = pick(t, b1, c, x);
            out[1] = pick(t, b2, c, x);

            let x = pick(t, b0, d, a);
            let x = pick(t, b1, x, c);
            out[2] = pick(t, b2, d, x);

            let x = pick(t, and, a, d);
            out[3] = pick(t, b2, e, x);

            let x = pick(t, nor, a, f);
            out[4] = pick(t, b2, x, e);

            let x = pick(t, b0, a, f);
            let x = pick(t, b1, g, x);
            out[5] = pick(t, b2, x, f);

            let x = pick(t, b0, h, a);
            let x = pick(t, b1, x, g);
            out[6] = pick(t, b2, x, g);

            let x = pick(t, and, a, h);
            out[7] = pick(t, b2, x, h);
        }
        _ => {
            // `select` of position `pos` among the `n` candidate results (element inserted at
            // each index), halving on the index bits from the most significant.
            let bits = n.trailing_zeros() as usize;
            for (pos, o) in out.iter_mut().enumerate() {
                let mut state = [Fr::ZERO; MAX_ARITY];
                for (idx, v) in state[..n].iter_mut().enumerate() {
                    *v = match pos.cmp(&idx) {
                        std::cmp::Ordering::Less => siblings[pos],
                        std::cmp::Ordering::Equal => a,
                        std::cmp::Ordering::Greater => siblings[pos - 1],
                    };
                }
                let mut half = n / 2;
                for k in (0..bits).rev() {
                    for j in 0..half {
                        state[j] = pick(t, bit(k), state[half + j], state[j]);
                    }
                    half /= 2;
                }
                *o = state[0];
            }
        }
    }
}

/// One sub-path: from node `cur` up through `levels` of one `arity` (each: the `arity − 1`
/// siblings and the index of the node among the children), writing each level's allocations
/// (module docs) and calling `node_hash(tape, children, level)` (`level`: the index in this
/// sub-path, the `height` argument of `hash_multi_leaf_circuit`); returns the top node.
///
/// Mirrors `SubPath::synthesize` (`storage-proofs-core-19.1.0/src/gadgets/por.rs`); `arity`
/// 0 is the absent sub-path (no level, nothing allocated).
///
/// # Panics
/// On a level whose sibling count is not `arity − 1`, or levels with `arity` 0.
pub fn sub_path<S, H>(
    t: &mut Tape<'_>,
    arity: usize,
    mut cur: Fr,
    levels: &[(S, usize)],
    node_hash: &mut H,
) -> Fr
where
    S: AsRef<[Fr]>,
    H: FnMut(&mut Tape<'_>, &[Fr], usize) -> Fr,
{
    if arity == 0 {
        assert!(levels.is_empty());
        return cur;
    }
    let bits = arity.trailing_zeros() as usize;
    let mut children = [Fr::ZERO; MAX_ARITY];
    for (level, (siblings, index)) in levels.iter().enumerate() {
        let siblings = siblings.as_ref();
        assert_eq!(siblings.len() + 1, arity, "siblings at level {level}");
        for k in 0..bits {
            t.alloc_bit((index >> k) & 1 == 1);
        }
        for &s in siblings {
            t.alloc(s);
        }
        insert(t, cur, *index, siblings, &mut children[..arity]);
        cur = node_hash(t, &children[..arity], level);
    }
    cur
}

/// A Merkle inclusion path of a `shape` tree from `leaf`: the base levels, then the sub-tree
/// and top-tree levels (split by [`TreeShape::split`]); returns the computed root.
///
/// Mirrors `PoRCircuit::synthesize` as `enforce_inclusion` calls it (leaf and root
/// `Root::Var`, `private = true`): the caller has allocated the leaf and the root already, the
/// root check allocates nothing (the R1CS check compares the returned value with the root).
/// The packed index bits are one public input ([`path_input`]), not written here.
/// `node_hash` is the tree's node hash: [`super::poseidon::poseidon_node`] for trees R and C,
/// the SHA-256 routine for tree D.
pub fn por_path<S, H>(
    t: &mut Tape<'_>,
    shape: TreeShape,
    leaf: Fr,
    path: &[(S, usize)],
    mut node_hash: H,
) -> Fr
where
    S: AsRef<[Fr]>,
    H: FnMut(&mut Tape<'_>, &[Fr], usize) -> Fr,
{
    let (base, sub, top) = shape.split(path);
    let cur = sub_path(t, shape.base, leaf, base, &mut node_hash);
    let cur = sub_path(t, shape.sub, cur, sub, &mut node_hash);
    sub_path(t, shape.top, cur, top, &mut node_hash)
}

/// A Merkle inclusion path whose leaf is a value (`Root::Val`): `PoRCircuit::synthesize` first
/// allocates the leaf (its `value.allocated(…)`), then ascends as [`por_path`]; returns the
/// computed root.
///
/// Mirrors `PoRCircuit::synthesize` as the PoSt circuit calls it per challenge
/// (`storage-proofs-post-19.1.0/src/fallback/circuit.rs`, `Sector::synthesize`): the leaf
/// `Root::Val`, the root `Root::Var` (comm_r_last, allocated by the caller: nothing allocated
/// for it) and `private = true`. The packed index bits are one public input ([`path_input`]).
pub fn por_path_value_leaf<S, H>(
    t: &mut Tape<'_>,
    shape: TreeShape,
    leaf: Fr,
    path: &[(S, usize)],
    node_hash: H,
) -> Fr
where
    S: AsRef<[Fr]>,
    H: FnMut(&mut Tape<'_>, &[Fr], usize) -> Fr,
{
    t.alloc(leaf);
    por_path(t, shape, leaf, path, node_hash)
}

/// The public input `PoRCircuit::synthesize` allocates for a path (`pack_into_inputs` of the
/// index bits, base levels first, each level's `log2(arity)` bits least significant first):
/// the challenged leaf's index in the tree.
///
/// # Panics
/// If the path has more than 64 index bits (one input holds 254; no tree in use has over 31).
pub fn path_input<S>(shape: TreeShape, path: &[(S, usize)]) -> Fr {
    let (base, sub, top) = shape.split(path);
    let mut v = 0u64;
    let mut shift = 0u32;
    for (arity, levels) in [(shape.base, base), (shape.sub, sub), (shape.top, top)] {
        let bits = if arity == 0 {
            0
        } else {
            arity.trailing_zeros()
        };
        for (_, index) in levels {
            assert!(shift + bits <= 64, "path of over 64 index bits");
            v |= ((*index as u64) & ((1u64 << bits) - 1)) << shift;
            shift += bits;
        }
    }
    Fr::from(v)
}

#[cfg(test)]
pub(crate) mod tests {
    use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::util_cs::test_cs::TestConstraintSystem;
    use bellperson::ConstraintSystem;
    use filecoin_hashers::poseidon::PoseidonHasher;
    use filecoin_hashers::PoseidonArity;
    use rand::{Rng, RngCore};
    use storage_proofs_core::gadgets::insertion;
    use storage_proofs_core::gadgets::por::{AuthPath, PoRCircuit};
    use storage_proofs_core::gadgets::variables::Root;
    use storage_proofs_core::merkle::DiskTree;

    use super::*;
    use crate::circuit::native::poseidon::poseidon_node;
    use crate::circuit::native::poseidon::tests::{
        alloc_nums, assert_tape_matches, fr, rng, U0, U16, U2, U4, U8,
    };
    use crate::circuit::native::tape::test_support::AuxRecorder;

    /// The gadget's `insert` (bits and siblings allocated first, as `SubPath` does) against
    /// [`insert`], every index of `arity` plus indices with higher bits set.
    fn check_insert(arity: usize, seed: u64) {
        let mut rng = rng(seed);
        let bits = arity.trailing_zeros() as usize;
        for index in (0..arity).chain([arity + 1, 3 * arity - 1]) {
            let element = fr(&mut rng);
            let siblings: Vec<Fr> = (1..arity).map(|_| fr(&mut rng)).collect();
            let mut cs = AuxRecorder::default();
            let el = alloc_nums(&mut cs, &[element]).remove(0);
            let bs: Vec<Boolean> = (0..bits)
                .map(|k| {
                    let v = Some((index >> k) & 1 == 1);
                    Boolean::from(AllocatedBit::alloc(cs.namespace(|| format!("b{k}")), v).unwrap())
                })
                .collect();
            let sibs = alloc_nums(&mut cs, &siblings);
            let got: Vec<Fr> = insertion::insert(&mut cs, &el, &bs, &sibs)
                .unwrap()
                .iter()
                .map(|n| n.get_value().unwrap())
                .collect();
            assert_eq!(
                cs.aux.len(),
                1 + bits + (arity - 1) + insert_allocations(arity)
            );
            let mut out = vec![Fr::ZERO; arity];
            assert_tape_matches(&cs.aux, |t| {
                t.alloc(element);
                (0..bits).for_each(|k| t.alloc_bit((index >> k) & 1 == 1));
                siblings.iter().for_each(|s| t.alloc(*s));
                insert(t, element, index, &siblings, &mut out);
            });
            assert_eq!(out, got, "arity {arity} index {index}");
            // The element is at its index, the siblings around it in order.
            let at = index % arity;
            assert_eq!(out[at], element);
            let rest: Vec<Fr> = (0..arity).filter(|&i| i != at).map(|i| out[i]).collect();
            assert_eq!(rest, siblings);
        }
    }

    #[test]
    fn insert_matches_gadget_every_arity_and_index() {
        check_insert(2, 20);
        check_insert(4, 40);
        check_insert(8, 80);
        check_insert(16, 160);
    }

    /// A random path of `shape` with `base_levels` base levels: siblings and indices (the
    /// challenge's digits).
    pub(crate) fn random_path(
        rng: &mut impl RngCore,
        shape: TreeShape,
        base_levels: usize,
    ) -> Vec<(Vec<Fr>, usize)> {
        let mut arities = vec![shape.base; base_levels];
        arities.extend([shape.sub, shape.top].into_iter().filter(|&a| a > 0));
        arities
            .into_iter()
            .map(|a| ((1..a).map(|_| fr(rng)).collect(), rng.gen_range(0..a)))
            .collect()
    }

    fn auth_path<U, V, W>(path: &[(Vec<Fr>, usize)]) -> AuthPath<PoseidonHasher, U, V, W>
    where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        path.iter()
            .map(|(s, i)| (s.iter().map(|v| Some(*v)).collect(), Some(*i)))
            .collect::<Vec<_>>()
            .into()
    }

    /// `PoRCircuit::<DiskTree<PoseidonHasher, U, V, W>>::synthesize` of `path` from `leaf` to
    /// `root` (allocated by the caller, `Root::Var`), `private = true`.
    fn gadget_path<U, V, W, CS: ConstraintSystem<Fr>>(
        cs: &mut CS,
        leaf: Root<Fr>,
        root: &AllocatedNum<Fr>,
        path: &[(Vec<Fr>, usize)],
    ) where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        PoRCircuit::<DiskTree<PoseidonHasher, U, V, W>>::synthesize(
            cs.namespace(|| "inclusion"),
            leaf,
            auth_path::<U, V, W>(path),
            Root::Var(root.clone()),
            true,
        )
        .unwrap();
    }

    /// `enforce_inclusion`'s gadget: [`gadget_path`] with the leaf allocated by the caller
    /// (`Root::Var`).
    pub(crate) fn gadget_inclusion<U, V, W, CS: ConstraintSystem<Fr>>(
        cs: &mut CS,
        leaf: &AllocatedNum<Fr>,
        root: &AllocatedNum<Fr>,
        path: &[(Vec<Fr>, usize)],
    ) where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        gadget_path::<U, V, W, _>(cs, Root::Var(leaf.clone()), root, path);
    }

    /// The gadget and [`por_path`] on random paths of one shape: same aux, the computed root
    /// is the gadget's last value, one public input equal to [`path_input`], and the gadget's
    /// constraints hold with the native root as the root.
    fn check_path<U, V, W>(shape: TreeShape, base_levels: usize, seed: u64)
    where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        let mut rng = rng(seed);
        for _ in 0..3 {
            let leaf = fr(&mut rng);
            let path = random_path(&mut rng, shape, base_levels);
            let mut buf = vec![Fr::ZERO; 1 << 16];
            let mut t = Tape::new(&mut buf);
            let root = por_path(&mut t, shape, leaf, &path, poseidon_node);
            let n = t.len();

            let mut cs = AuxRecorder::default();
            let lr = alloc_nums(&mut cs, &[leaf, root]);
            gadget_inclusion::<U, V, W, _>(&mut cs, &lr[0], &lr[1], &path);
            // Aux: leaf, root (the caller's), then the path.
            assert_eq!(cs.aux.len(), n + 2);
            assert_eq!(cs.aux[..2], [leaf, root]);
            assert_tape_matches(&cs.aux[2..], |t| {
                assert_eq!(por_path(t, shape, leaf, &path, poseidon_node), root);
            });
            assert_eq!(cs.aux.last(), Some(&root));
            assert_eq!(cs.inputs, vec![path_input(shape, &path)]);

            // The native root satisfies the gadget's root check (and every other constraint);
            // a wrong root fails exactly that one.
            let root_check = Some("inclusion/enforce root is correct");
            for (r, unsatisfied) in [(root, None), (root + Fr::ONE, root_check)] {
                let mut tcs = TestConstraintSystem::<Fr>::new();
                let l = AllocatedNum::alloc(tcs.namespace(|| "leaf"), || Ok(leaf)).unwrap();
                let r = AllocatedNum::alloc(tcs.namespace(|| "root"), || Ok(r)).unwrap();
                gadget_inclusion::<U, V, W, _>(&mut tcs, &l, &r, &path);
                assert_eq!(tcs.which_is_unsatisfied(), unsatisfied);
            }
        }
    }

    /// The PoSt circuit's per-challenge gadget ([`gadget_path`] with the leaf a value,
    /// `Root::Val`, allocated by the gadget) against [`por_path_value_leaf`]: the same aux
    /// (the leaf first), the same public input, and the native root satisfies the gadget's
    /// root check (a wrong root fails exactly that one).
    fn check_value_leaf<U, V, W>(shape: TreeShape, base_levels: usize, seed: u64)
    where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        let mut rng = rng(seed);
        for _ in 0..3 {
            let leaf = fr(&mut rng);
            let path = random_path(&mut rng, shape, base_levels);
            let mut buf = vec![Fr::ZERO; 1 << 16];
            let root = por_path(&mut Tape::new(&mut buf), shape, leaf, &path, poseidon_node);

            let mut cs = AuxRecorder::default();
            let r = alloc_nums(&mut cs, &[root]).remove(0);
            gadget_path::<U, V, W, _>(&mut cs, Root::Val(Some(leaf)), &r, &path);
            assert_eq!(cs.aux[..2], [root, leaf]);
            assert_tape_matches(&cs.aux[1..], |t| {
                let got = por_path_value_leaf(t, shape, leaf, &path, poseidon_node);
                assert_eq!(got, root);
            });
            assert_eq!(cs.inputs, vec![path_input(shape, &path)]);

            let root_check = Some("inclusion/enforce root is correct");
            for (rv, unsatisfied) in [(root, None), (root - Fr::ONE, root_check)] {
                let mut tcs = TestConstraintSystem::<Fr>::new();
                let r = AllocatedNum::alloc(tcs.namespace(|| "root"), || Ok(rv)).unwrap();
                gadget_path::<U, V, W, _>(&mut tcs, Root::Val(Some(leaf)), &r, &path);
                assert_eq!(tcs.which_is_unsatisfied(), unsatisfied);
            }
        }
    }

    #[test]
    fn por_path_value_leaf_matches_gadget() {
        // PoSt's trees R: 2 KiB (2 levels), 32 GiB, 64 GiB.
        check_value_leaf::<U8, U0, U0>(TreeShape::OCT, 2, 11);
        check_value_leaf::<U8, U8, U0>(TreeShape::OCT_SUB8, 9, 12);
        check_value_leaf::<U8, U8, U2>(TreeShape::OCT_SUB8_TOP2, 9, 13);
    }

    #[test]
    fn por_path_matches_gadget_oct() {
        // 2 KiB (64 nodes: 2 levels) and 8 MiB (2^18: 6 levels) trees R / C.
        check_path::<U8, U0, U0>(TreeShape::OCT, 2, 1);
        check_path::<U8, U0, U0>(TreeShape::OCT, 6, 2);
    }

    #[test]
    fn por_path_matches_gadget_oct_sub8() {
        // 32 GiB: 8 sub-trees of 8^9 leaves.
        check_path::<U8, U8, U0>(TreeShape::OCT_SUB8, 9, 3);
    }

    #[test]
    fn por_path_matches_gadget_oct_sub8_top2() {
        // 64 GiB: 2 × 8 sub-trees of 8^9 leaves.
        check_path::<U8, U8, U2>(TreeShape::OCT_SUB8_TOP2, 9, 4);
    }

    #[test]
    fn por_path_matches_gadget_other_shapes() {
        // Tree D's shape with the Poseidon node hash (the routine is generic over the hash),
        // and arities 4 and 16 through the general path code.
        check_path::<U2, U0, U0>(TreeShape::BINARY, 5, 5);
        check_path::<U4, U2, U0>(TreeShape::new(4, 2, 0), 3, 6);
        check_path::<U16, U4, U8>(TreeShape::new(16, 4, 8), 2, 7);
    }

    #[test]
    fn node_hash_gets_children_and_level() {
        // The closure sees the inserted children and the level within each sub-path.
        let mut rng = rng(8);
        let shape = TreeShape::OCT_SUB8_TOP2;
        let leaf = fr(&mut rng);
        let path = random_path(&mut rng, shape, 3);
        let mut buf = vec![Fr::ZERO; 4096];
        let mut seen = Vec::new();
        let mut cur = leaf;
        por_path(
            &mut Tape::new(&mut buf),
            shape,
            leaf,
            &path,
            |_t, ch, level| {
                let idx = path[seen.len()].1;
                assert_eq!(ch[idx], cur);
                seen.push((ch.len(), level));
                cur = Fr::from(seen.len() as u64);
                cur
            },
        );
        assert_eq!(seen, vec![(8, 0), (8, 1), (8, 2), (8, 0), (2, 0)]);
    }

    #[test]
    #[ignore = "timing; run with --ignored --nocapture"]
    fn por_path_speed() {
        let mut rng = rng(1);
        let shape = TreeShape::OCT_SUB8;
        let leaf = fr(&mut rng);
        let path = random_path(&mut rng, shape, 9);
        let mut buf = vec![Fr::ZERO; 1 << 14];
        let n = 200;
        let mut acc = Fr::ZERO;
        let start = std::time::Instant::now();
        for _ in 0..n {
            acc += por_path(&mut Tape::new(&mut buf), shape, leaf, &path, poseidon_node);
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / n as f64;
        println!("32 GiB-shaped path (10 arity-8 levels): {us:.1} µs/path ({acc:?})");
    }
}
