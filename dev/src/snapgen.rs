//! Real-shape SnapDeals inputs for any sector size without sealing: the three commitments and
//! one vanilla partition proof per partition, as Curio sends them (bincode of
//! storage-proofs-update's `PartitionProof`, what filecoin-proofs-api's
//! `update::generate_partition_proofs` returns), for a sector that exists only where the
//! proofs look.
//!
//! The challenges come from comm_r_new, which hashes the updated replica's tree, whose leaves
//! are `label_old + data · rho(phi, high bits)` with phi from comm_d_new and comm_r_old: each
//! tree must be known whole before the challenges are. So the trees are regular and computed
//! from a few nodes per level:
//! - TreeDNew (the new data, binary SHA-256): a random block of `P` leaves repeated
//!   ([`PeriodicTree`], `P` = 64, or less when the sector or a `rho` region is smaller);
//! - TreeROld (the sector key, Poseidon of the proof type's arities): every leaf one random
//!   label, so each level is one repeated digest;
//! - TreeRNew: its leaves follow from the other two; within one `rho` region (the leaves that
//!   share their `h` high bits: 2^20 at 32 GiB) they repeat with period `P`, so a node inside a
//!   region is known by its level, region and offset modulo `P` and only the nodes across
//!   regions are hashed one by one (~80 k Poseidon hashes at 32 GiB).
//!
//! comm_c is random. The vanilla proofs verify (`EmptySectorUpdate::verify_all_partitions`) and
//! make the real circuit, and a proof of them verifies with `verify_empty_sector_update_proof`:
//! only the challenged leaves, their paths and the apex leaves enter the circuit.

use std::collections::HashMap;

use std::path::{Path, PathBuf};

use anyhow::{anyhow, ensure, Context, Result};
use base64::Engine as _;
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::sha256::Sha256Hasher;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs::{with_shape, SectorUpdateConfig};
use filecoin_proofs_api::RegisteredUpdateProof;
use rayon::prelude::*;
use storage_proofs_core::merkle::MerkleProof;
use storage_proofs_update::constants::{TreeDArity, TreeDDomain, TreeRDomain};
use storage_proofs_update::{
    phi, rho, ChallengeProof, Challenges, EmptySectorUpdate, PartitionProof, PublicInputs,
    PublicParams,
};

use crate::c1gen::tree::{hash_children, PathElement, PeriodicTree};
use crate::c1gen::{stream, tree_levels};

/// Leaves of the repeated block of TreeDNew (at most: less for small sectors and regions).
const PERIOD: usize = 64;

/// Name of the inputs file `cuzk gen-snap` writes into its directory.
pub const SNAP_JSON: &str = "snap.json";

/// The on-disk form of [`GeneratedSnap`] (`snap.json`): what a SnapDeals request carries, the
/// commitments in hex, the vanilla proofs in standard base64.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SnapFile {
    /// The update proof type in the actors' numbering (0–4: 2 KiB … 64 GiB).
    pub registered_proof: u64,
    /// Sector size, bytes.
    pub sector_size: u64,
    /// comm_r_old (32 bytes, hex).
    pub comm_r_old: String,
    /// comm_r_new (32 bytes, hex).
    pub comm_r_new: String,
    /// comm_d_new (32 bytes, hex).
    pub comm_d_new: String,
    /// One vanilla proof per partition (base64 of bincode `PartitionProof`).
    pub vanilla_proofs: Vec<String>,
}

/// Generated SnapDeals inputs (see the [module docs](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedSnap {
    /// The update proof type.
    pub registered_proof: RegisteredUpdateProof,
    /// The sector key's replica commitment.
    pub comm_r_old: [u8; 32],
    /// The updated replica's commitment.
    pub comm_r_new: [u8; 32],
    /// The new data's commitment.
    pub comm_d_new: [u8; 32],
    /// One vanilla proof per partition, in order (bincode of `PartitionProof`).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// The actors' number of the update proof type `proof` (0–4).
pub fn actors_number(proof: RegisteredUpdateProof) -> u64 {
    (0..5)
        .find(|&n| cuzk::snap::registered_update_proof(n).ok() == Some(proof))
        .expect("every update proof type has a number")
}

impl GeneratedSnap {
    /// The on-disk form.
    pub fn to_file(&self) -> SnapFile {
        let b64 = base64::engine::general_purpose::STANDARD;
        SnapFile {
            registered_proof: actors_number(self.registered_proof),
            sector_size: u64::from(self.registered_proof.sector_size()),
            comm_r_old: cuzk::c1::hex(&self.comm_r_old),
            comm_r_new: cuzk::c1::hex(&self.comm_r_new),
            comm_d_new: cuzk::c1::hex(&self.comm_d_new),
            vanilla_proofs: self.vanilla_proofs.iter().map(|v| b64.encode(v)).collect(),
        }
    }

    /// From the on-disk form.
    ///
    /// # Errors
    /// A number that is no update proof type, a sector size not its, fields that are not hex
    /// or base64.
    pub fn from_file(f: &SnapFile) -> Result<GeneratedSnap> {
        let registered_proof = cuzk::snap::registered_update_proof(f.registered_proof)?;
        ensure!(
            u64::from(registered_proof.sector_size()) == f.sector_size,
            "sector_size {} is not {registered_proof:?}'s",
            f.sector_size
        );
        let comm = |s: &str, what: &str| {
            crate::fixture::from_hex32(s).ok_or_else(|| anyhow!("{what}: expected 64 hex digits"))
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        Ok(GeneratedSnap {
            registered_proof,
            comm_r_old: comm(&f.comm_r_old, "comm_r_old")?,
            comm_r_new: comm(&f.comm_r_new, "comm_r_new")?,
            comm_d_new: comm(&f.comm_d_new, "comm_d_new")?,
            vanilla_proofs: f
                .vanilla_proofs
                .iter()
                .enumerate()
                .map(|(i, v)| b64.decode(v).with_context(|| format!("vanilla proof {i}")))
                .collect::<Result<_>>()?,
        })
    }

    /// Writes `dir/`[`SNAP_JSON`] (`dir` created if needed); returns its path and size.
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn write_dir(&self, dir: &Path) -> Result<(PathBuf, u64)> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(SNAP_JSON);
        let json = serde_json::to_vec(&self.to_file())?;
        std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
        Ok((path, json.len() as u64))
    }

    /// filecoin-proofs-api's `update::verify_empty_sector_update_proof` of `proof` for these
    /// commitments (the verifying key from `FIL_PROOFS_PARAMETER_CACHE`).
    ///
    /// # Errors
    /// filecoin-proofs' (bytes that are not curve points, no verifying key).
    pub fn verify_with_filecoin_proofs(&self, proof: &[u8]) -> Result<bool> {
        filecoin_proofs_api::update::verify_empty_sector_update_proof(
            self.registered_proof,
            proof,
            self.comm_r_old,
            self.comm_r_new,
            self.comm_d_new,
        )
    }
}

/// Generates SnapDeals inputs of `proof`'s sector size, deterministic from `seed`.
///
/// # Errors
/// When the generated vanilla proofs do not verify (a bug), or encoding fails.
pub fn generate(proof: RegisteredUpdateProof, seed: [u8; 32]) -> Result<GeneratedSnap> {
    with_shape!(u64::from(proof.sector_size()), generate_shape, proof, seed)
}

/// The updated replica's tree: its leaves `r_old + d(c) · rho(c >> region_bits)`, its nodes
/// by level and index, memoized by (level, region, offset modulo the period) inside a region.
struct NewTree<'a> {
    arities: &'a [usize],
    heights: &'a [usize],
    /// Leaves under one node of each level.
    widths: Vec<usize>,
    region_bits: usize,
    period: usize,
    r_old: Fr,
    tree_d: &'a PeriodicTree<Sha256Hasher>,
    rhos: &'a [Fr],
    memo: HashMap<(usize, usize, usize), TreeRDomain>,
}

impl NewTree<'_> {
    fn leaf(&self, c: usize) -> TreeRDomain {
        let d: Fr = self.tree_d.leaf(c).into();
        (self.r_old + d * self.rhos[c >> self.region_bits]).into()
    }

    fn node(&mut self, level: usize, i: usize) -> TreeRDomain {
        let width = self.widths[level];
        let (start, end) = (i * width, (i + 1) * width - 1);
        let region = start >> self.region_bits;
        let key = if region == end >> self.region_bits {
            (level, region, start % self.period)
        } else {
            (level, usize::MAX, i)
        };
        if let Some(d) = self.memo.get(&key) {
            return *d;
        }
        let d = if level == 0 {
            self.leaf(i)
        } else {
            let a = self.arities[level - 1];
            let children: Vec<TreeRDomain> = (i * a..(i + 1) * a)
                .map(|j| self.node(level - 1, j))
                .collect();
            hash_children::<PoseidonHasher>(&children, self.heights[level - 1])
        };
        self.memo.insert(key, d);
        d
    }

    /// The inclusion path of leaf `c`.
    fn path(&mut self, c: usize) -> Vec<PathElement<TreeRDomain>> {
        let mut idx = c;
        let arities = self.arities;
        let mut path = Vec::with_capacity(arities.len());
        for (level, &a) in arities.iter().enumerate() {
            let (g, pos) = (idx / a, idx % a);
            let siblings = (g * a..(g + 1) * a)
                .filter(|&j| j != idx)
                .map(|j| self.node(level, j))
                .collect();
            path.push((siblings, pos));
            idx = g;
        }
        path
    }
}

type TreeRProof<Tree> = MerkleProof<
    PoseidonHasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

fn generate_shape<Tree: 'static + MerkleTreeTrait<Hasher = PoseidonHasher>>(
    proof: RegisteredUpdateProof,
    seed: [u8; 32],
) -> Result<GeneratedSnap> {
    let size = u64::from(proof.sector_size());
    let pp = PublicParams::from_sector_size(size);
    let nodes = pp.sector_nodes;
    let h = SectorUpdateConfig::from_porep_config(&proof.as_v1_config()).h;
    let region_bits = pp.challenge_bit_len - h;
    let period = PERIOD.min(1 << region_bits).min(nodes);
    let mut rng = stream(&seed, "snap", 0);

    // TreeDNew: a random block, repeated.
    let block: Vec<TreeDDomain> = (0..period).map(|_| TreeDDomain::random(&mut rng)).collect();
    let tree_d = PeriodicTree::<Sha256Hasher>::new(block, nodes);
    let comm_d_new = tree_d.root();

    // TreeROld: one label everywhere.
    let (arities, heights) = tree_levels::<Tree>(nodes)?;
    let r_old = TreeRDomain::random(&mut rng);
    let mut uniform = vec![r_old];
    for (&a, &height) in arities.iter().zip(&heights) {
        let below = *uniform.last().expect("the leaf level");
        uniform.push(hash_children::<PoseidonHasher>(&vec![below; a], height));
    }
    let root_r_old = *uniform.last().expect("the root");
    let comm_c = TreeRDomain::random(&mut rng);
    let hash2 =
        |a: &TreeRDomain, b: &TreeRDomain| <PoseidonHasher as Hasher>::Function::hash2(a, b);
    let comm_r_old = hash2(&comm_c, &root_r_old);

    // TreeRNew from phi's rhos, one per region.
    let phi = phi(&comm_d_new, &comm_r_old);
    let rhos: Vec<Fr> = (0..1u32 << h)
        .into_par_iter()
        .map(|high| rho(&phi, high))
        .collect();
    let mut widths = vec![1];
    for &a in &arities {
        widths.push(widths.last().expect("widths") * a);
    }
    let mut tree_new = NewTree {
        arities: &arities,
        heights: &heights,
        widths,
        region_bits,
        period,
        r_old: r_old.into(),
        tree_d: &tree_d,
        rhos: &rhos,
        memo: HashMap::new(),
    };
    let root_r_new = tree_new.node(arities.len(), 0);
    let comm_r_new = hash2(&comm_c, &root_r_new);

    // The partitions' proofs.
    let apex_level = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let uniform_path = |c: usize| -> Vec<PathElement<TreeRDomain>> {
        let mut idx = c;
        arities
            .iter()
            .zip(&uniform)
            .map(|(&a, &d)| {
                let pos = idx % a;
                idx /= a;
                (vec![d; a - 1], pos)
            })
            .collect()
    };
    let mut partitions = Vec::with_capacity(pp.partition_count);
    for k in 0..pp.partition_count {
        let challenge_proofs: Vec<ChallengeProof<Tree>> = Challenges::new(nodes, comm_r_new, k)
            .map(|c| {
                let c = c as usize;
                ChallengeProof {
                    proof_r_old: TreeRProof::<Tree>::from_parts(r_old, root_r_old, uniform_path(c)),
                    proof_d_new: MerkleProof::<Sha256Hasher, TreeDArity>::from_parts(
                        tree_d.leaf(c),
                        comm_d_new,
                        tree_d.path(c),
                    ),
                    proof_r_new: TreeRProof::<Tree>::from_parts(
                        tree_new.leaf(c),
                        root_r_new,
                        tree_new.path(c),
                    ),
                }
            })
            .collect();
        let apex_leafs = (0..pp.apex_leaf_count)
            .map(|i| tree_d.node(apex_level, k * pp.apex_leaf_count + i))
            .collect();
        partitions.push(PartitionProof::<Tree> {
            comm_c,
            apex_leafs,
            challenge_proofs,
        });
    }
    let inputs = PublicInputs {
        k: pp.partition_count,
        comm_r_old,
        comm_d_new,
        comm_r_new,
        h,
    };
    use storage_proofs_core::proof::ProofScheme;
    ensure!(
        EmptySectorUpdate::<Tree>::verify_all_partitions(&pp, &inputs, &partitions)?,
        "{proof:?}: the generated vanilla proofs do not verify"
    );
    let vanilla_proofs = partitions
        .iter()
        .map(bincode::serialize)
        .collect::<std::result::Result<_, _>>()?;
    Ok(GeneratedSnap {
        registered_proof: proof,
        comm_r_old: comm_r_old.into_bytes().try_into().expect("32 bytes"),
        comm_r_new: comm_r_new.into_bytes().try_into().expect("32 bytes"),
        comm_d_new: comm_d_new.into_bytes().try_into().expect("32 bytes"),
        vanilla_proofs,
    })
}
