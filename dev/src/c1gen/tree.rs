//! Merkle trees of which only a few leaves are known: the paths of those leaves, with random
//! filler digests for every subtree nobody opens ([`SparseTree`]), and the binary SHA-256 tree of
//! a sector whose data repeats with a short period ([`PeriodicTree`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use filecoin_hashers::{Domain, Hasher};
use merkletree::hash::Algorithm;
use rand::RngCore;
use rayon::prelude::*;

/// One inclusion-path element as storage-proofs' `MerkleProof::from_parts` takes it: the
/// siblings of the node (arity − 1 digests, in order) and the node's position among them.
pub type PathElement<D> = (Vec<D>, usize);

/// `H`'s node hash of one group of children at `height` (what `InclusionPath::root` calls).
pub fn hash_children<H: Hasher>(children: &[H::Domain], height: usize) -> H::Domain {
    let mut a = H::Function::default();
    a.multi_node(children, height)
}

/// A Merkle tree of `H` whose levels have the given arities (leaves first), of which only some
/// leaves are known: every node that a known leaf's path needs but no known leaf determines is a
/// random filler digest. The root is that of a real tree with those leaves and fillers.
pub struct SparseTree<H: Hasher> {
    /// Arity of each level, leaf level first.
    arities: Vec<usize>,
    /// `levels[l]`: the known (or filled) nodes of level `l` by index; the last one holds the root.
    levels: Vec<HashMap<usize, H::Domain>>,
}

impl<H: Hasher> SparseTree<H> {
    /// Builds the tree over `leaves` (leaf index → digest). `arities` lists each level's arity
    /// from the leaves up and `heights` the height `H`'s node hash is given at each level (the
    /// height inside the base, sub or top tree that level belongs to). Fillers come from `rng`,
    /// drawn in a fixed order (level by level, node index ascending), so the tree is a function
    /// of the leaves and the generator's state.
    ///
    /// # Panics
    /// If `arities` and `heights` differ in length, or a leaf index is beyond the tree.
    pub fn build(
        leaves: &BTreeMap<usize, H::Domain>,
        arities: &[usize],
        heights: &[usize],
        rng: &mut impl RngCore,
    ) -> Self {
        assert_eq!(arities.len(), heights.len());
        let width: usize = arities.iter().product();
        assert!(leaves.keys().all(|&i| i < width), "leaf beyond the tree");
        let mut levels: Vec<HashMap<usize, H::Domain>> =
            vec![leaves.iter().map(|(&i, &d)| (i, d)).collect()];
        for (&a, &height) in arities.iter().zip(heights) {
            let level = levels.last_mut().expect("at least the leaf level");
            let groups: BTreeSet<usize> = level.keys().map(|i| i / a).collect();
            for &g in &groups {
                for i in g * a..(g + 1) * a {
                    level.entry(i).or_insert_with(|| H::Domain::random(rng));
                }
            }
            let level = &*level;
            let next: HashMap<usize, H::Domain> = groups
                .into_par_iter()
                .map(|g| {
                    let children: Vec<H::Domain> =
                        (g * a..(g + 1) * a).map(|i| level[&i]).collect();
                    (g, hash_children::<H>(&children, height))
                })
                .collect();
            levels.push(next);
        }
        SparseTree {
            arities: arities.to_vec(),
            levels,
        }
    }

    /// The root.
    pub fn root(&self) -> H::Domain {
        self.levels.last().expect("levels")[&0]
    }

    /// The inclusion path of leaf `leaf` (one element per level, leaves first).
    ///
    /// # Panics
    /// If `leaf` was not one of the leaves the tree was built over.
    pub fn path(&self, leaf: usize) -> Vec<PathElement<H::Domain>> {
        let mut idx = leaf;
        self.arities
            .iter()
            .zip(&self.levels)
            .map(|(&a, level)| {
                let (g, pos) = (idx / a, idx % a);
                let siblings = (g * a..(g + 1) * a)
                    .filter(|&i| i != idx)
                    .map(|i| level[&i])
                    .collect();
                idx = g;
                (siblings, pos)
            })
            .collect()
    }
}

/// The binary Merkle tree (hasher `H`, arity 2) of a sector of `2^k` leaves whose leaves repeat
/// with period `block.len()` (a power of two): the sector is the block, repeated. Only the block's
/// own tree is stored; above it every level is one repeated digest.
pub struct PeriodicTree<H: Hasher> {
    /// `block_levels[l][i]`: node `i` of level `l` of the block's tree (level 0 = the block).
    block_levels: Vec<Vec<H::Domain>>,
    /// The repeated digest of each level above the block's root, and the sector's root last.
    upper: Vec<H::Domain>,
}

impl<H: Hasher> PeriodicTree<H> {
    /// The tree of `leaves` leaves (a power of two, ≥ `block.len()`), the leaves being `block`
    /// repeated.
    ///
    /// # Panics
    /// If the sizes are not powers of two or the block is larger than the sector.
    pub fn new(block: Vec<H::Domain>, leaves: usize) -> Self {
        assert!(block.len().is_power_of_two() && leaves.is_power_of_two() && block.len() <= leaves);
        let mut block_levels = vec![block];
        while block_levels.last().expect("block").len() > 1 {
            let below = block_levels.last().expect("block");
            let height = block_levels.len() - 1;
            let next = below
                .par_chunks(2)
                .map(|pair| hash_children::<H>(pair, height))
                .collect();
            block_levels.push(next);
        }
        let mut upper = Vec::new();
        let mut digest = block_levels.last().expect("block")[0];
        for height in block_levels.len() - 1..leaves.trailing_zeros() as usize {
            digest = hash_children::<H>(&[digest, digest], height);
            upper.push(digest);
        }
        PeriodicTree {
            block_levels,
            upper,
        }
    }

    /// The root.
    pub fn root(&self) -> H::Domain {
        match self.upper.last() {
            Some(d) => *d,
            None => self.block_levels.last().expect("block")[0],
        }
    }

    /// Node `i` of level `level` (0: the leaves; the sector's root at the top level).
    ///
    /// # Panics
    /// If `level` is above the root.
    pub fn node(&self, level: usize, i: usize) -> H::Domain {
        match self.block_levels.get(level) {
            Some(nodes) => nodes[i % nodes.len()],
            None => self.upper[level - self.block_levels.len()],
        }
    }

    /// The value of leaf `i`.
    pub fn leaf(&self, i: usize) -> H::Domain {
        let block = &self.block_levels[0];
        block[i % block.len()]
    }

    /// The inclusion path of leaf `i` (one element per level, leaves first).
    pub fn path(&self, i: usize) -> Vec<PathElement<H::Domain>> {
        let block_height = self.block_levels.len() - 1;
        let within = i % self.block_levels[0].len();
        let mut path: Vec<PathElement<H::Domain>> = (0..block_height)
            .map(|l| {
                let idx = within >> l;
                (vec![self.block_levels[l][idx ^ 1]], idx & 1)
            })
            .collect();
        // Above the block, a node's sibling is the same repeated digest as the node itself.
        let mut sibling = self.block_levels[block_height][0];
        for (l, up) in (block_height..).zip(&self.upper) {
            path.push((vec![sibling], (i >> l) & 1));
            sibling = *up;
        }
        path
    }
}
