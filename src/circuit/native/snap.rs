//! The SnapDeals circuit, natively: the composition of the native SHA-256, Poseidon and Merkle
//! path routines in the allocation order of `storage-proofs-update` 19.1.0
//! `EmptySectorUpdateCircuit::synthesize` (`src/circuit.rs`, with the gadgets of
//! `src/gadgets.rs`), and the partition driver that runs it one challenge per task.
//!
//! # Allocation order
//! The prefix (`A` apex leaves, `P` partition bits, `D` challenge digests; `H` = 45,331 the
//! values of one SHA-256 node hash — two 255-bit decompositions, two compressions, the packed
//! digest —, `Q` = 311 those of one Poseidon hash of arity 2):
//! 1. `k_and_h_select` (one value; its input), its `P + 6` bits (`AllocatedBit`s, least
//!    significant first), the partition index packed from its `P` low bits (`pack_bits`);
//! 2. comm_r_old, comm_d_new, comm_r_new (one value and one input each);
//! 3. phi = Poseidon(comm_d_new, comm_r_old) with the constants of `GEN_RANDOMNESS`
//!    ([`poseidon::constants_gen_randomness`]);
//! 4. comm_c, root_r_old, root_r_new, the `A` apex leaves, the `P` siblings of the partition
//!    path;
//! 5. comm_r_old = H(comm_c, root_r_old) and comm_r_new = H(comm_c, root_r_new): Poseidon of
//!    arity 2 (the equalities are constraints only);
//! 6. the apex tree (`apex_por`): its `A − 1` SHA-256 node hashes row by row
//!    ([`sha256::hash_multi_leaf2`]), then the partition path from the apex root to comm_d_new
//!    (`por_no_challenge_input` of TreeD: per level the binary insertion, 2 values, and a node
//!    hash; the index bits are the partition bits, already allocated);
//! 7. `gen_challenge_bits`: per digest `j`, its index `k·D + j`, the digest
//!    Poseidon(comm_r_new, index) (`GEN_RANDOMNESS`), its 255 bits; each challenge takes the
//!    next `challenge_bit_len − P` of them, the partition bits above.
//!
//! Then one block per challenge (the namespaces `… (c_index=<i>…)`):
//! 1. `get_challenge_high_bits`: per `h` of the six `hs`, the `h` high challenge bits packed
//!    and that value or zero (`h_select`'s bit), then their sum (13 values);
//! 2. rho = Poseidon(phi, high bits) (`GEN_RANDOMNESS`);
//! 3. leaf_r_old, leaf_d_new, leaf_d_new·rho and leaf_r_new = leaf_r_old + leaf_d_new·rho;
//! 4. the TreeROld path's siblings (every level), then the path from leaf_r_old
//!    (`por_no_challenge_input`: per level the insertion, 22 values at arity 8, and a Poseidon
//!    node hash; index bits the challenge's, allocated in the prefix); the same for TreeRNew
//!    from leaf_r_new;
//! 5. the apex leaf of the challenge (`insertion::select` on the `log2 A` bits above the path
//!    to it: `A − 1` picks);
//! 6. the TreeDNew path's siblings up to the apex leaf, then that path from leaf_d_new
//!    (binary insertion and SHA-256 node hash per level).
//!
//! No block allocates an input. A 32 GiB partition (86 challenges, `A` = 128, `P` = 4, `D` =
//! 10; TreeR paths of 10 levels of arity 8, 527 values each; 19 TreeD levels to the apex
//! leaf) is a prefix of 5,945,122 values (1,083 + 127·`H` + 4·(2 + `H`) + 10·567) and 5
//! inputs, then 86 blocks of 872,481 values (13 + 311 + 4 + 2·(70 + 10·527) + 127 + 19 +
//! 19·(2 + `H`)): 80,978,488 aux values.
//!
//! The apex tree's rows run as parallel tasks inside the first challenge's task (the prefix
//! is ~7 blocks' work); the values of the prefix that every block reads (phi, the apex
//! leaves, the challenges) are computed before the tasks start.

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::Domain;
use rayon::prelude::*;
use sha2::digest::typenum::Unsigned;
use storage_proofs_core::merkle::{MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_update::constants::{hs, TreeRHasher};
use storage_proofs_update::{ChallengeProof, PartitionProof, PublicInputs, PublicParams};

use super::por::{self, TreeShape};
use super::{poseidon, sha256, Tape};
use crate::circuit::witness::{self, Task, TaskError, Witness};
use crate::circuit::Layout;
use crate::error::{Error, Result};

/// Inputs of a partition: the constant one, `k_and_h_select`, comm_r_old, comm_d_new,
/// comm_r_new.
const INPUTS: usize = 5;

/// Bits of one challenge digest (`Fr::NUM_BITS`: `field_into_allocated_bits_le`).
const DIGEST_BITS: usize = Fr::NUM_BITS as usize;

/// The native witness of partition `k` (see the module docs) into `w`, with the driver and
/// buffer rules of [`witness::generate_into`]; the values equal the gadget path's
/// ([`crate::circuit::snap::witness_into`] of the circuit `EmptySectorUpdateCompound::circuit`
/// builds from the same `pub_inputs`, `vanilla`, `pp` and `k`).
///
/// # Errors
/// [`Error::InvalidInput`] when the inputs make no circuit of `pp` (`k` or `h` out of range, a
/// vanilla proof of another shape, a value that is no field element, a new leaf that is not
/// the encoding of the old one, challenges with different partition paths: where the gadgets
/// assert); [`Error::Synthesis`] when the native routine allocates another number of values
/// or inputs than the compiled layout (it does not mirror the recorded circuit);
/// [`Error::Internal`] when a vector of `w` has capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    layout: &Layout,
    pub_inputs: &PublicInputs,
    vanilla: &PartitionProof<Tree>,
    pp: &PublicParams,
    k: usize,
    w: &mut Witness,
) -> Result<()> {
    let s = Shared::new::<Tree>(pub_inputs, vanilla, pp, k)?;
    if layout.challenges != pp.challenge_count {
        return Err(Error::Synthesis {
            partition: k,
            message: format!(
                "a compiled circuit of {} challenges for {} in the public parameters",
                layout.challenges, pp.challenge_count
            ),
        });
    }
    witness::generate_tasks_into(layout, k, w, |i, task: &mut Task<'_>| {
        if let Some((input, aux)) = task.prefix.take() {
            s.write_prefix(input, aux)?;
        }
        if !task.block_input.is_empty() {
            return Err(format!(
                "the compiled circuit has {} inputs per challenge, the native witness none",
                task.block_input.len()
            )
            .into());
        }
        let o = Opening::new::<Tree>(&s, &vanilla.challenge_proofs[i])
            .map_err(|m| Error::InvalidInput(format!("partition {k}, challenge {i}: {m}")))?;
        let mut t = Tape::new(task.block_aux);
        let leaf_r_new = s.block(&mut t, s.challenges[i], &o);
        t.finish().map_err(|(got, want)| {
            format!(
                "the native witness allocated {got} aux values, the compiled circuit has {want}"
            )
        })?;
        if leaf_r_new != o.leaf_r_new {
            return Err(Error::InvalidInput(format!(
                "partition {k}, challenge {i}: the TreeRNew leaf is not the encoding of the \
                 TreeROld leaf and the new data"
            ))
            .into());
        }
        Ok(())
    })
}

/// The layout of the circuit of `pp` and `Tree` as the native routine allocates it, without
/// recording the circuit: its inputs and the aux values of the prefix and of one challenge
/// block (a dry run on zeros: the counts do not depend on the values), `pp.challenge_count`
/// blocks; no constraint counts (the witness drivers read only these).
///
/// # Errors
/// [`Error::InvalidInput`] when `Tree` is not the tree of `pp`'s sector size.
#[cfg(any(test, feature = "internals"))]
pub fn counted_layout<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    pp: &PublicParams,
) -> Result<Layout> {
    use crate::circuit::Counts;
    let shape = tree_shape::<Tree>();
    let levels = check_shape(pp, shape)?;
    let s = Shared {
        shape,
        tree_r_levels: levels.clone(),
        challenge_bit_len: pp.challenge_bit_len,
        partition_bit_len: pp.partition_bit_len,
        apex_leaf_bit_len: pp.apex_leaf_bit_len,
        hs: hs(pp.sector_nodes),
        h_select: 1,
        k: 0,
        digests: digests_per_partition(pp),
        comm_r_old: Fr::ZERO,
        comm_d_new: Fr::ZERO,
        comm_r_new: Fr::ZERO,
        comm_c: Fr::ZERO,
        root_r_old: Fr::ZERO,
        root_r_new: Fr::ZERO,
        phi: Fr::ZERO,
        apex_leafs: vec![Fr::ZERO; pp.apex_leaf_count],
        partition_path: vec![[Fr::ZERO]; pp.partition_bit_len],
        challenges: Vec::new(),
    };
    let path_r: Vec<Vec<Fr>> = levels.iter().map(|&a| vec![Fr::ZERO; a - 1]).collect();
    let o = Opening {
        leaf_r_old: Fr::ZERO,
        leaf_d_new: Fr::ZERO,
        leaf_r_new: Fr::ZERO,
        path_r_old: path_r.clone(),
        path_r_new: path_r,
        path_to_apex: vec![[Fr::ZERO]; s.to_apex_len()],
    };
    let block = count(|t| {
        s.block(t, 0, &o);
    });
    Ok(Layout {
        prefix: Counts {
            inputs: INPUTS,
            aux: s.prefix_segments().iter().sum(),
            constraints: 0,
        },
        block: Counts {
            inputs: 0,
            aux: block,
            constraints: 0,
        },
        challenges: pp.challenge_count,
    })
}

/// The shape of `Tree` (base, sub-tree and top-tree arities).
fn tree_shape<Tree: MerkleTreeTrait>() -> TreeShape {
    TreeShape::new(
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    )
}

/// The arity of each level of a TreeR path of `pp`'s sector size in a tree of `shape` (base
/// levels, then the sub- and top-tree levels), after checking that `pp` are the public
/// parameters of an allowed sector size (`EmptySectorUpdateCircuit::blank` asserts it) and that
/// the levels' index bits add up to the challenge's (`validate_tree_r_shape` and
/// `por_no_challenge_input` assert it).
///
/// # Errors
/// [`Error::InvalidInput`] when they are not.
fn check_shape(pp: &PublicParams, shape: TreeShape) -> Result<Vec<usize>> {
    let allowed = storage_proofs_update::constants::ALLOWED_SECTOR_SIZES.contains(&pp.sector_nodes)
        && *pp == PublicParams::from_sector_size((pp.sector_nodes as u64) << 5);
    if !allowed {
        return Err(Error::InvalidInput(format!(
            "public parameters {pp:?} are not those of a sector size"
        )));
    }
    let bits = |a: usize| {
        if a == 0 {
            0
        } else {
            a.trailing_zeros() as usize
        }
    };
    let upper = bits(shape.sub) + bits(shape.top);
    let base_bits = bits(shape.base);
    let rest = pp.challenge_bit_len.checked_sub(upper);
    match rest.filter(|r| r % base_bits == 0) {
        Some(r) => {
            let mut levels = vec![shape.base; r / base_bits];
            levels.extend([shape.sub, shape.top].into_iter().filter(|&a| a > 0));
            Ok(levels)
        }
        None => Err(Error::InvalidInput(format!(
            "a tree of arities {shape:?} for sectors of {} nodes",
            pp.sector_nodes
        ))),
    }
}

/// Digests of challenge bits per partition (`gen_challenge_bits`): each gives
/// `Fr::CAPACITY / bits` challenges.
fn digests_per_partition(pp: &PublicParams) -> usize {
    let per = Fr::CAPACITY as usize / (pp.challenge_bit_len - pp.partition_bit_len);
    pp.challenge_count.div_ceil(per)
}

/// The field element of a domain value (a commitment, leaf or sibling), or `None` when its
/// bytes are no canonical field element (filecoin's `From` conversion would panic).
fn field<D: Domain>(d: D) -> Option<Fr> {
    let bytes: [u8; 32] = d.as_ref().try_into().ok()?;
    Fr::from_repr_vartime(bytes)
}

/// `len` (≤ 64) bits of the little-endian `bytes` from bit `start`, as an integer.
fn bits_at(bytes: &[u8; 32], start: usize, len: usize) -> u64 {
    let mut window = [0u8; 16];
    let from = start / 8;
    let n = (bytes.len() - from).min(16);
    window[..n].copy_from_slice(&bytes[from..from + n]);
    let v = u128::from_le_bytes(window) >> (start % 8);
    (v & ((1u128 << len) - 1)) as u64
}

/// The value of a hash whose allocations are not wanted (a tape that counts, stores nothing).
fn value_of(f: impl FnOnce(&mut Tape<'_>) -> Fr) -> Fr {
    let mut none: [Fr; 0] = [];
    f(&mut Tape::new(&mut none))
}

/// Values allocated by `f` (a dry run on a tape that stores nothing).
fn count(f: impl FnOnce(&mut Tape<'_>)) -> usize {
    let mut none: [Fr; 0] = [];
    let mut t = Tape::new(&mut none);
    f(&mut t);
    t.finish().unwrap_or_else(|(n, _)| n)
}

/// Values of one SHA-256 node hash of two field elements ([`sha256::hash_multi_leaf2`]: the
/// same for every value, its bits' constancy being fixed), counted once.
fn sha_node_values() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        count(|t| {
            sha256::hash_multi_leaf2(t, &[Fr::ZERO; 2]);
        })
    })
}

/// Values of one Poseidon hash of arity 2 (311), counted once.
fn poseidon2_values() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        count(|t| {
            poseidon::hash2(t, Fr::ZERO, Fr::ZERO);
        })
    })
}

/// `pick`: allocates and returns `if c { a } else { b }`.
#[inline(always)]
fn pick(t: &mut Tape<'_>, c: bool, a: Fr, b: Fr) -> Fr {
    let v = if c { a } else { b };
    t.alloc(v);
    v
}

/// `insertion::select` (storage-proofs-core 19.1.0 `gadgets/insertion.rs`) of `from` (a power
/// of two long) by the `log2(from.len())` bits of `c` from bit `start` (least significant
/// first; the gadget consumes them most significant first): `from.len() − 1` picks.
fn select(t: &mut Tape<'_>, from: &[Fr], c: u64, start: usize) -> Fr {
    let bits = from.len().trailing_zeros() as usize;
    let mut state = from.to_vec();
    let mut half = from.len() / 2;
    for i in 0..bits {
        let bit = (c >> (start + bits - 1 - i)) & 1 == 1;
        for j in 0..half {
            state[j] = pick(t, bit, state[half + j], state[j]);
        }
        half /= 2;
    }
    state[0]
}

/// `por_no_challenge_input` (storage-proofs-core 19.1.0 `gadgets/por.rs`): the path of a
/// `shape` tree from `leaf` whose siblings the caller allocated (all levels, before), each
/// level's index the next bits of `c` (its index bits, allocated elsewhere): per level the
/// insertion ([`por::insert`]) and `node_hash` of the children; returns the computed root (its
/// equality with the root is a constraint only).
fn path_no_index<S, H>(
    t: &mut Tape<'_>,
    shape: TreeShape,
    leaf: Fr,
    path: &[S],
    c: u64,
    mut node_hash: H,
) -> Fr
where
    S: AsRef<[Fr]>,
    H: FnMut(&mut Tape<'_>, &[Fr]) -> Fr,
{
    let (base, sub, top) = shape.split(path);
    let mut children = [Fr::ZERO; por::MAX_ARITY];
    let mut cur = leaf;
    let mut shift = 0;
    for (arity, levels) in [(shape.base, base), (shape.sub, sub), (shape.top, top)] {
        for siblings in levels {
            let index = ((c >> shift) as usize) & (arity - 1);
            por::insert(t, cur, index, siblings.as_ref(), &mut children[..arity]);
            cur = node_hash(t, &children[..arity]);
            shift += arity.trailing_zeros();
        }
    }
    cur
}

/// The Poseidon node hash of a TreeR path.
fn poseidon_node(t: &mut Tape<'_>, children: &[Fr]) -> Fr {
    poseidon::poseidon_node(t, children, 0)
}

/// The SHA-256 node hash of a TreeD path.
fn sha_node(t: &mut Tape<'_>, children: &[Fr]) -> Fr {
    sha256::hash_multi_leaf2(t, &[children[0], children[1]])
}

/// What the prefix and every block read: the partition's parameters and public values, the
/// prefix's private values, and every challenge.
struct Shared {
    shape: TreeShape,
    /// The arity of each level of a TreeR path.
    tree_r_levels: Vec<usize>,
    challenge_bit_len: usize,
    partition_bit_len: usize,
    apex_leaf_bit_len: usize,
    hs: [usize; 6],
    /// One bit set: the index of `h` in `hs`.
    h_select: u64,
    k: usize,
    /// Digests of challenge bits.
    digests: usize,
    comm_r_old: Fr,
    comm_d_new: Fr,
    comm_r_new: Fr,
    comm_c: Fr,
    root_r_old: Fr,
    root_r_new: Fr,
    phi: Fr,
    apex_leafs: Vec<Fr>,
    /// The TreeDNew path's top `partition_bit_len` levels (challenge 0's).
    partition_path: Vec<[Fr; 1]>,
    /// Each challenge's index in the sector: its generated bits, the partition bits above.
    challenges: Vec<u64>,
}

impl Shared {
    /// The shared values of partition `k`, checked as the circuit asserts them.
    fn new<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        pub_inputs: &PublicInputs,
        vanilla: &PartitionProof<Tree>,
        pp: &PublicParams,
        k: usize,
    ) -> Result<Shared> {
        let bad = |m: String| Error::InvalidInput(format!("partition {k}: {m}"));
        if k >= pp.partition_count {
            return Err(bad(format!("not one of {} partitions", pp.partition_count)));
        }
        let shape = tree_shape::<Tree>();
        let tree_r_levels = check_shape(pp, shape)?;
        let hs = hs(pp.sector_nodes);
        let h_index = hs
            .iter()
            .position(|&h| h == pub_inputs.h)
            .ok_or_else(|| bad(format!("h = {} is none of {hs:?}", pub_inputs.h)))?;
        if vanilla.apex_leafs.len() != pp.apex_leaf_count {
            return Err(bad(format!(
                "{} apex leaves, expected {}",
                vanilla.apex_leafs.len(),
                pp.apex_leaf_count
            )));
        }
        if vanilla.challenge_proofs.len() != pp.challenge_count {
            return Err(bad(format!(
                "{} challenge proofs, expected {}",
                vanilla.challenge_proofs.len(),
                pp.challenge_count
            )));
        }
        let first = &vanilla.challenge_proofs[0];
        let path_d = first.proof_d_new.path();
        if path_d.len() != pp.challenge_bit_len || path_d.iter().any(|(s, _)| s.len() != 1) {
            return Err(bad("challenge 0: a TreeDNew path of another shape".into()));
        }
        let f =
            |v: Option<Fr>, what: &str| v.ok_or_else(|| bad(format!("{what} is no field element")));
        let apex_leafs = vanilla
            .apex_leafs
            .iter()
            .map(|&l| f(field(l), "an apex leaf"))
            .collect::<Result<Vec<_>>>()?;
        let partition_path = path_d[pp.challenge_bit_len - pp.partition_bit_len..]
            .iter()
            .map(|(s, _)| f(field(s[0]), "a partition path sibling").map(|v| [v]))
            .collect::<Result<Vec<_>>>()?;
        let comm_r_old = f(field(pub_inputs.comm_r_old), "comm_r_old")?;
        let comm_d_new = f(field(pub_inputs.comm_d_new), "comm_d_new")?;
        let comm_r_new = f(field(pub_inputs.comm_r_new), "comm_r_new")?;
        let gen = poseidon::constants_gen_randomness();
        let phi = value_of(|t| poseidon::poseidon_hash(t, &[comm_d_new, comm_r_old], gen));
        let mut s = Shared {
            shape,
            tree_r_levels,
            challenge_bit_len: pp.challenge_bit_len,
            partition_bit_len: pp.partition_bit_len,
            apex_leaf_bit_len: pp.apex_leaf_bit_len,
            hs,
            h_select: 1 << h_index,
            k,
            digests: digests_per_partition(pp),
            comm_r_old,
            comm_d_new,
            comm_r_new,
            comm_c: f(field(vanilla.comm_c), "comm_c")?,
            root_r_old: f(field(first.proof_r_old.root()), "root_r_old")?,
            root_r_new: f(field(first.proof_r_new.root()), "root_r_new")?,
            phi,
            apex_leafs,
            partition_path,
            challenges: Vec::new(),
        };
        s.challenges = s.generate_challenges(pp.challenge_count);
        Ok(s)
    }

    /// The challenges of `gen_challenge_bits`: per digest Poseidon(comm_r_new, k·D + j), its
    /// low bits in chunks of `challenge_bit_len − partition_bit_len`, `k` above each.
    fn generate_challenges(&self, n: usize) -> Vec<u64> {
        let b = self.challenge_bit_len - self.partition_bit_len;
        let per = Fr::CAPACITY as usize / b;
        let gen = poseidon::constants_gen_randomness();
        let mut out = Vec::with_capacity(n);
        for j in 0..self.digests {
            let digest = value_of(|t| {
                poseidon::poseidon_hash(t, &[self.comm_r_new, self.digest_index(j)], gen)
            });
            let bytes = digest.to_bytes_le();
            let take = per.min(n - out.len());
            out.extend((0..take).map(|i| bits_at(&bytes, i * b, b) | ((self.k as u64) << b)));
        }
        out
    }

    /// The index of digest `j` of the partition: `k·D + j`.
    fn digest_index(&self, j: usize) -> Fr {
        Fr::from((self.k * self.digests + j) as u64)
    }

    /// `k_and_h_select`: `k`, `h_select` above its `partition_bit_len` bits.
    fn k_and_h_select(&self) -> u64 {
        self.k as u64 | (self.h_select << self.partition_bit_len)
    }

    /// TreeD levels from a challenged leaf to its apex leaf.
    fn to_apex_len(&self) -> usize {
        self.challenge_bit_len - self.partition_bit_len - self.apex_leaf_bit_len
    }

    /// The prefix's aux values in the pieces [`Shared::write_prefix`] writes: up to the apex
    /// tree, the apex tree, the partition path, the challenge digests.
    fn prefix_segments(&self) -> [usize; 4] {
        let (q, h) = (poseidon2_values(), sha_node_values());
        let (a, p) = (self.apex_leafs.len(), self.partition_bit_len);
        [
            1 + (p + self.hs.len()) + 1 + 3 + q + 3 + a + p + 2 * q,
            (a - 1) * h,
            p * (2 + h),
            self.digests * (1 + q + DIGEST_BITS),
        ]
    }

    /// The prefix (module docs) into its inputs and aux values, the apex tree's rows in
    /// parallel.
    fn write_prefix(&self, input: &mut [Fr], aux: &mut [Fr]) -> std::result::Result<(), TaskError> {
        if input.len() != INPUTS {
            return Err(format!(
                "the compiled circuit has {} inputs, the native witness {INPUTS}",
                input.len()
            )
            .into());
        }
        let seg = self.prefix_segments();
        let total: usize = seg.iter().sum();
        if aux.len() != total {
            return Err(format!(
                "the native witness allocates {total} aux values in the prefix, the compiled \
                 circuit has {}",
                aux.len()
            )
            .into());
        }
        let kh = self.k_and_h_select();
        input.copy_from_slice(&[
            Fr::ONE,
            Fr::from(kh),
            self.comm_r_old,
            self.comm_d_new,
            self.comm_r_new,
        ]);
        let (head, rest) = aux.split_at_mut(seg[0]);
        let (apex, rest) = rest.split_at_mut(seg[1]);
        let (partition, digests) = rest.split_at_mut(seg[2]);
        let gen = poseidon::constants_gen_randomness();

        // 1.–5.: the public inputs, phi, the private values, comm_r_old/new.
        let mut t = Tape::new(head);
        t.alloc(Fr::from(kh));
        for i in 0..self.partition_bit_len + self.hs.len() {
            t.alloc_bit((kh >> i) & 1 == 1);
        }
        t.alloc(Fr::from(self.k as u64));
        for v in [self.comm_r_old, self.comm_d_new, self.comm_r_new] {
            t.alloc(v);
        }
        poseidon::poseidon_hash(&mut t, &[self.comm_d_new, self.comm_r_old], gen);
        for v in [self.comm_c, self.root_r_old, self.root_r_new] {
            t.alloc(v);
        }
        self.apex_leafs.iter().for_each(|&v| t.alloc(v));
        self.partition_path.iter().for_each(|s| t.alloc(s[0]));
        poseidon::hash2(&mut t, self.comm_c, self.root_r_old);
        poseidon::hash2(&mut t, self.comm_c, self.root_r_new);
        finish(t, "prefix")?;

        // 6.: the apex tree, one task per node hash of a row; the partition path.
        let h = sha_node_values();
        let mut row = self.apex_leafs.clone();
        let mut rest = apex;
        while row.len() > 1 {
            let n = row.len() / 2;
            let (here, next) = std::mem::take(&mut rest).split_at_mut(n * h);
            let mut up = vec![Fr::ZERO; n];
            here.par_chunks_mut(h)
                .zip(up.par_iter_mut())
                .enumerate()
                .try_for_each(|(i, (chunk, node))| {
                    let mut t = Tape::new(chunk);
                    *node = sha256::hash_multi_leaf2(&mut t, &[row[2 * i], row[2 * i + 1]]);
                    finish(t, "apex tree")
                })?;
            row = up;
            rest = next;
        }
        let mut t = Tape::new(partition);
        path_no_index(
            &mut t,
            TreeShape::BINARY,
            row[0],
            &self.partition_path,
            self.k as u64,
            sha_node,
        );
        finish(t, "partition path")?;

        // 7.: the challenge digests and their bits.
        let mut t = Tape::new(digests);
        for j in 0..self.digests {
            let index = self.digest_index(j);
            t.alloc(index);
            let d = poseidon::poseidon_hash(&mut t, &[self.comm_r_new, index], gen);
            sha256::num_to_bits_le(&mut t, &d);
        }
        finish(t, "challenge digests")
    }

    /// The block of challenge `c` (module docs) with its opening `o`; returns leaf_r_new as the
    /// circuit computes it.
    fn block(&self, t: &mut Tape<'_>, c: u64, o: &Opening) -> Fr {
        // 1. The high bits: per h, the packed high bits and the selected value or zero.
        let bit_len = self.challenge_bit_len;
        let mut high = Fr::ZERO;
        for (j, &h) in self.hs.iter().enumerate() {
            let packed = Fr::from(c >> (bit_len - h));
            t.alloc(packed);
            let v = if (self.h_select >> j) & 1 == 1 {
                packed
            } else {
                Fr::ZERO
            };
            t.alloc(v);
            high += v;
        }
        t.alloc(high);
        // 2. rho.
        let gen = poseidon::constants_gen_randomness();
        let rho = poseidon::poseidon_hash(t, &[self.phi, high], gen);
        // 3. The leaves and the new label.
        t.alloc(o.leaf_r_old);
        t.alloc(o.leaf_d_new);
        let data_rho = o.leaf_d_new * rho;
        t.alloc(data_rho);
        let leaf_r_new = o.leaf_r_old + data_rho;
        t.alloc(leaf_r_new);
        // 4. The TreeROld and TreeRNew paths (their roots' equalities are constraints only).
        for (leaf, path) in [(o.leaf_r_old, &o.path_r_old), (leaf_r_new, &o.path_r_new)] {
            path.iter().flatten().for_each(|&s| t.alloc(s));
            path_no_index(t, self.shape, leaf, path, c, poseidon_node);
        }
        // 5. The apex leaf (the root of the path below; the equality is a constraint only).
        select(t, &self.apex_leafs, c, self.to_apex_len());
        // 6. The TreeDNew path to it.
        o.path_to_apex.iter().for_each(|s| t.alloc(s[0]));
        path_no_index(
            t,
            TreeShape::BINARY,
            o.leaf_d_new,
            &o.path_to_apex,
            c,
            sha_node,
        );
        leaf_r_new
    }
}

/// Ends a tape of the prefix piece `what`, its count checked.
fn finish(t: Tape<'_>, what: &str) -> std::result::Result<(), TaskError> {
    t.finish().map(|_| ()).map_err(|(got, want)| {
        format!(
            "the native witness allocated {got} aux values in the {what}, the compiled circuit \
             has {want}"
        )
        .into()
    })
}

/// One challenge's values from its vanilla challenge proof.
struct Opening {
    leaf_r_old: Fr,
    leaf_d_new: Fr,
    /// The vanilla proof's TreeRNew leaf (checked against the computed one).
    leaf_r_new: Fr,
    path_r_old: Vec<Vec<Fr>>,
    path_r_new: Vec<Vec<Fr>>,
    /// The TreeDNew path's levels below the apex leaf.
    path_to_apex: Vec<[Fr; 1]>,
}

impl Opening {
    /// The values of `p`, checked to have the circuit's shape (`s`'s tree) and the partition
    /// path of challenge 0 (the circuit asserts both).
    ///
    /// # Errors
    /// A message naming what is wrong.
    fn new<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        s: &Shared,
        p: &ChallengeProof<Tree>,
    ) -> std::result::Result<Opening, String> {
        let f = |d: Option<Fr>, what: &str| d.ok_or_else(|| format!("{what} is no field element"));
        let tree_r = |path: Vec<(Vec<_>, usize)>, what: &str| {
            let fits = path.len() == s.tree_r_levels.len()
                && path
                    .iter()
                    .zip(&s.tree_r_levels)
                    .all(|((sib, _), &arity)| sib.len() + 1 == arity);
            if !fits {
                return Err(format!("a {what} path of another shape"));
            }
            path.iter()
                .map(|(sib, _)| {
                    sib.iter()
                        .map(|&v| {
                            field(v).ok_or_else(|| format!("a {what} sibling is no field element"))
                        })
                        .collect()
                })
                .collect::<std::result::Result<Vec<Vec<Fr>>, String>>()
        };
        let path_d = p.proof_d_new.path();
        if path_d.len() != s.challenge_bit_len || path_d.iter().any(|(sib, _)| sib.len() != 1) {
            return Err("a TreeDNew path of another shape".into());
        }
        let top = &path_d[s.challenge_bit_len - s.partition_bit_len..];
        if top
            .iter()
            .zip(&s.partition_path)
            .any(|((sib, _), want)| field(sib[0]) != Some(want[0]))
        {
            return Err("a partition path other than challenge 0's".into());
        }
        let path_to_apex = path_d[..s.to_apex_len()]
            .iter()
            .map(|(sib, _)| f(field(sib[0]), "a TreeDNew sibling").map(|v| [v]))
            .collect::<std::result::Result<Vec<_>, String>>()?;
        Ok(Opening {
            leaf_r_old: f(field(p.proof_r_old.leaf()), "the TreeROld leaf")?,
            leaf_d_new: f(field(p.proof_d_new.leaf()), "the TreeDNew leaf")?,
            leaf_r_new: f(field(p.proof_r_new.leaf()), "the TreeRNew leaf")?,
            path_r_old: tree_r(p.proof_r_old.path(), "TreeROld")?,
            path_r_new: tree_r(p.proof_r_new.path(), "TreeRNew")?,
            path_to_apex,
        })
    }
}

#[cfg(test)]
mod tests {
    use filecoin_hashers::sha256::Sha256Domain;
    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB, SectorShape64GiB, SectorShape8MiB};
    use rand_chacha::ChaCha8Rng;
    use storage_proofs_core::compound_proof::CompoundProof;
    use storage_proofs_core::merkle::MerkleProof;
    use storage_proofs_update::constants::{h_default, TreeRDomain};
    use storage_proofs_update::{
        phi, rho, Challenges, EmptySectorUpdate, EmptySectorUpdateCompound,
    };

    use super::*;
    use crate::circuit::native::poseidon::tests::{fr, rng};
    use crate::circuit::snap as gadget;

    fn params(sector_bytes: u64) -> PublicParams {
        PublicParams::from_sector_size(sector_bytes)
    }

    /// A random partition `k` of `pp` with the high-bits count `h`: random commitments, leaves
    /// and siblings, each challenge's TreeRNew leaf the encoding of its TreeROld leaf (the
    /// gadget asserts it; filecoin's `phi` and `rho`), one partition path for every challenge,
    /// paths indexed by filecoin's challenges.
    fn random_partition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        pp: &PublicParams,
        k: usize,
        h: usize,
        seed: u64,
    ) -> (PublicInputs, PartitionProof<Tree>) {
        let mut rng = rng(seed);
        let r = |rng: &mut ChaCha8Rng| TreeRDomain::from(fr(rng));
        let d = |rng: &mut ChaCha8Rng| Sha256Domain::from(fr(rng));
        let inputs = PublicInputs {
            k: pp.partition_count,
            comm_r_old: r(&mut rng),
            comm_d_new: d(&mut rng),
            comm_r_new: r(&mut rng),
            h,
        };
        let levels = check_shape(pp, tree_shape::<Tree>()).unwrap();
        let phi = phi(&inputs.comm_d_new, &inputs.comm_r_old);
        let partition_path: Vec<_> = (0..pp.partition_bit_len).map(|_| d(&mut rng)).collect();
        let (root_r_old, root_r_new, root_d) = (r(&mut rng), r(&mut rng), d(&mut rng));
        let challenge_proofs = Challenges::new(pp.sector_nodes, inputs.comm_r_new, k)
            .map(|c| {
                let c = c as usize;
                let high = c >> (pp.challenge_bit_len - h);
                let (old, data) = (fr(&mut rng), fr(&mut rng));
                let new = old + data * rho(&phi, high as u32);
                let path_r = |rng: &mut ChaCha8Rng| {
                    let mut shift = 0;
                    levels
                        .iter()
                        .map(|&a| {
                            let index = (c >> shift) & (a - 1);
                            shift += a.trailing_zeros() as usize;
                            ((1..a).map(|_| r(rng)).collect::<Vec<_>>(), index)
                        })
                        .collect::<Vec<_>>()
                };
                let path_old = path_r(&mut rng);
                let path_new = path_r(&mut rng);
                let mut path_d: Vec<_> = (0..pp.challenge_bit_len - pp.partition_bit_len)
                    .map(|_| vec![d(&mut rng)])
                    .chain(partition_path.iter().map(|s| vec![*s]))
                    .collect();
                let path_d = path_d
                    .drain(..)
                    .enumerate()
                    .map(|(l, s)| (s, (c >> l) & 1))
                    .collect();
                ChallengeProof {
                    proof_r_old: MerkleProof::from_parts(old.into(), root_r_old, path_old),
                    proof_d_new: MerkleProof::from_parts(data.into(), root_d, path_d),
                    proof_r_new: MerkleProof::from_parts(new.into(), root_r_new, path_new),
                }
            })
            .collect();
        let vanilla = PartitionProof {
            comm_c: r(&mut rng),
            apex_leafs: (0..pp.apex_leaf_count).map(|_| d(&mut rng)).collect(),
            challenge_proofs,
        };
        (inputs, vanilla)
    }

    /// [`counted_layout`] of `pp` (the witness drivers read only its counts).
    fn native_layout<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        pp: &PublicParams,
    ) -> Layout {
        counted_layout::<Tree>(pp).unwrap()
    }

    /// The gadget witness of the circuit filecoin builds from the same inputs.
    fn gadget_witness<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        layout: &Layout,
        inputs: &PublicInputs,
        vanilla: &PartitionProof<Tree>,
        pp: &PublicParams,
        k: usize,
    ) -> Witness {
        type C<T> = EmptySectorUpdateCompound<T>;
        let circuit = <C<Tree> as CompoundProof<'_, EmptySectorUpdate<Tree>, _>>::circuit(
            inputs,
            (),
            vanilla,
            pp,
            Some(k),
        )
        .unwrap();
        let mut w = Witness::default();
        gadget::witness_into(layout, circuit, k, &mut w).unwrap();
        w
    }

    /// The native and gadget witnesses of random partitions, equal value for value.
    fn check_partition<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        layout: &Layout,
        pp: &PublicParams,
        k: usize,
        h: usize,
        seed: u64,
    ) {
        let (inputs, vanilla) = random_partition::<Tree>(pp, k, h, seed);
        let mut native = Witness::default();
        witness_into::<Tree>(layout, &inputs, &vanilla, pp, k, &mut native).unwrap();
        let gadget = gadget_witness::<Tree>(layout, &inputs, &vanilla, pp, k);
        assert_eq!(native.input, gadget.input, "inputs");
        assert_eq!(native.aux.len(), gadget.aux.len());
        let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
        assert_eq!(
            first,
            None,
            "first differing aux value of {}",
            native.aux.len()
        );
    }

    #[test]
    fn challenges_equal_filecoins() {
        let mut rng = rng(1);
        for size in [2048, 8 << 20, 512 << 20, 32 << 30, 64 << 30] {
            let pp = params(size);
            for k in 0..pp.partition_count {
                let comm_r_new = fr(&mut rng);
                let s = Shared {
                    shape: TreeShape::BINARY,
                    tree_r_levels: Vec::new(),
                    challenge_bit_len: pp.challenge_bit_len,
                    partition_bit_len: pp.partition_bit_len,
                    apex_leaf_bit_len: pp.apex_leaf_bit_len,
                    hs: hs(pp.sector_nodes),
                    h_select: 1,
                    k,
                    digests: digests_per_partition(&pp),
                    comm_r_old: Fr::ZERO,
                    comm_d_new: Fr::ZERO,
                    comm_r_new,
                    comm_c: Fr::ZERO,
                    root_r_old: Fr::ZERO,
                    root_r_new: Fr::ZERO,
                    phi: Fr::ZERO,
                    apex_leafs: Vec::new(),
                    partition_path: Vec::new(),
                    challenges: Vec::new(),
                };
                let want: Vec<u64> = Challenges::new(pp.sector_nodes, comm_r_new.into(), k)
                    .map(u64::from)
                    .collect();
                assert_eq!(
                    s.generate_challenges(pp.challenge_count),
                    want,
                    "{size} k={k}"
                );
            }
        }
    }

    #[test]
    fn counts_equal_the_recorded_layout_and_the_module_docs() {
        let pp = params(2048);
        let recorded = gadget::layout::<SectorShape2KiB>(&pp).unwrap();
        let native = native_layout::<SectorShape2KiB>(&pp);
        assert_eq!(
            (
                recorded.prefix.inputs,
                recorded.prefix.aux,
                recorded.block.inputs,
                recorded.block.aux
            ),
            (
                native.prefix.inputs,
                native.prefix.aux,
                native.block.inputs,
                native.block.aux
            )
        );
        let l = native_layout::<SectorShape32GiB>(&params(32 << 30));
        assert_eq!(
            (l.prefix.aux, l.block.aux, l.num_aux()),
            (5_945_122, 872_481, 80_978_488)
        );
        assert_eq!((sha_node_values(), poseidon2_values()), (45_331, 311));
    }

    #[test]
    fn partition_matches_gadget_2kib_shape() {
        let pp = params(2048);
        let layout = gadget::layout::<SectorShape2KiB>(&pp).unwrap();
        for (h, seed) in [(h_default(pp.sector_nodes), 2), (1, 3)] {
            check_partition::<SectorShape2KiB>(&layout, &pp, 0, h, seed);
        }
    }

    #[test]
    fn partition_matches_gadget_8mib_shape() {
        // 4 partitions (2 partition bits, a partition path of 2 levels), 128 apex leaves; the
        // last partition, h the largest of hs.
        let pp = params(8 << 20);
        let layout = native_layout::<SectorShape8MiB>(&pp);
        check_partition::<SectorShape8MiB>(&layout, &pp, 3, 12, 4);
    }

    #[test]
    fn malformed_partitions_are_input_errors() {
        type Tree = SectorShape2KiB;
        let pp = params(2048);
        let layout = native_layout::<Tree>(&pp);
        let (inputs, vanilla) = random_partition::<Tree>(&pp, 0, h_default(pp.sector_nodes), 5);
        let run = |inputs: &PublicInputs, v: &PartitionProof<Tree>, layout: &Layout, k| {
            witness_into::<Tree>(layout, inputs, v, &pp, k, &mut Witness::default())
        };
        assert!(run(&inputs, &vanilla, &layout, 0).is_ok());
        let input_error = |inputs: &PublicInputs, v: &PartitionProof<Tree>, k, what: &str| {
            let e = run(inputs, v, &layout, k).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{what}: {e}");
        };
        input_error(&inputs, &vanilla, 1, "partition 1 of 1");
        let mut i = inputs.clone();
        i.h = 3;
        input_error(&i, &vanilla, 0, "h not in hs");
        let mut i = inputs.clone();
        i.comm_r_new = TreeRDomain::from([0xff; 32]);
        input_error(&i, &vanilla, 0, "comm_r_new not a field element");
        let mut v = vanilla.clone();
        v.apex_leafs.pop();
        input_error(&inputs, &v, 0, "an apex leaf short");
        let mut v = vanilla.clone();
        v.challenge_proofs.pop();
        input_error(&inputs, &v, 0, "a challenge short");
        // The TreeRNew leaf of challenge 4 changed: not the encoding.
        let mut v = vanilla.clone();
        let p = &v.challenge_proofs[4].proof_r_new;
        let leaf: Fr = p.leaf().into();
        v.challenge_proofs[4].proof_r_new =
            MerkleProof::from_parts((leaf + Fr::ONE).into(), p.root(), p.path());
        input_error(&inputs, &v, 0, "leaf_r_new");
        // Paths of another shape: a level short, a sibling short, a sibling too many.
        type Bend = fn(&mut Vec<(Vec<TreeRDomain>, usize)>);
        let bends: [Bend; 3] = [
            |p| _ = p.remove(0),
            |p| _ = p[1].0.pop(),
            |p| p[0].0.push(TreeRDomain::default()),
        ];
        for bend in bends {
            let mut v = vanilla.clone();
            let p = &v.challenge_proofs[2].proof_r_old;
            let mut path = p.path();
            bend(&mut path);
            v.challenge_proofs[2].proof_r_old = MerkleProof::from_parts(p.leaf(), p.root(), path);
            input_error(&inputs, &v, 0, "TreeROld path");
        }
        let mut v = vanilla.clone();
        let p = &v.challenge_proofs[7].proof_d_new;
        let mut path = p.path();
        path.pop();
        v.challenge_proofs[7].proof_d_new = MerkleProof::from_parts(p.leaf(), p.root(), path);
        input_error(&inputs, &v, 0, "TreeDNew path");
        // A sibling that is no field element.
        let mut v = vanilla.clone();
        let p = &v.challenge_proofs[3].proof_d_new;
        let mut path = p.path();
        path[0].0[0].0 = [0xff; 32];
        v.challenge_proofs[3].proof_d_new = MerkleProof::from_parts(p.leaf(), p.root(), path);
        input_error(&inputs, &v, 0, "TreeDNew sibling");
        // Public parameters of no sector size, a tree of another sector size.
        let mut other = pp.clone();
        other.challenge_count += 1;
        let e = witness_into::<Tree>(
            &layout,
            &inputs,
            &vanilla,
            &other,
            0,
            &mut Witness::default(),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        let e = witness_into::<SectorShape64GiB>(
            &layout,
            &inputs,
            &PartitionProof {
                comm_c: vanilla.comm_c,
                apex_leafs: vanilla.apex_leafs.clone(),
                challenge_proofs: Vec::new(),
            },
            &pp,
            0,
            &mut Witness::default(),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        // A layout of another circuit: a synthesis error, not a panic.
        for (dp, db, di) in [(1, 0, 0), (0, 1, 0), (0, 0, 1)] {
            let mut other = layout;
            other.prefix.aux += dp;
            other.block.aux += db;
            other.block.inputs += di;
            let e = run(&inputs, &vanilla, &other, 0).unwrap_err();
            assert!(matches!(e, Error::Synthesis { .. }), "{e}");
        }
    }
}
