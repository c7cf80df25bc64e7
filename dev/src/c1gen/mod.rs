//! Real-shape C1 outputs without sealing.
//!
//! [`generate`] makes the `SealCommitPhase1Output` of filecoin-proofs-api for any interactive
//! PoRep proof type (`StackedDrg{2KiB,8MiB,512MiB,32GiB,64GiB}V1_1`) from a 32-byte seed, without
//! a sector on disk: a sparse but consistent sector of which only what the challenges open
//! exists, so that storage-proofs-porep's `verify_all_partitions` accepts it and its circuit is
//! satisfied, exactly as for a sealed sector.
//!
//! How the sector is made (all randomness from ChaCha20 streams derived from the seed):
//! - **Data** (tree D, binary SHA-256): a random block of `min(nodes, 1024)` field elements,
//!   repeated over the whole sector, so comm_d is computed from the block alone. (The data cannot
//!   be a sparse tree with random fillers: comm_d fixes the replica id and with it the challenges,
//!   which say which leaves are opened.)
//! - **Ticket and interactive seed**: random; replica id = storage-proofs-porep's
//!   `generate_replica_id(prover id, sector id, ticket, comm_d, porep id)`.
//! - **Challenges**: storage-proofs-porep's own derivation (`PublicInputs::challenges`) for each
//!   partition, on the proof type's public parameters (filecoin-proofs' `setup_params`).
//! - **Columns**: each challenged node's DRG (6) and expander (8) parents, from the proof type's
//!   `StackedBucketGraph`, get random columns (one label per layer); the challenged node's own
//!   labels are computed layer by layer with the labeling function (SHA-256 of the replica id,
//!   layer, node and the 37 parent labels, truncated to 254 bits; each label is checked with
//!   storage-proofs' `LabelingProof::verify`). A node that is both a parent and challenged gets
//!   its computed column everywhere.
//! - **Replica**: the challenged node's replica leaf = its last-layer label + its data leaf
//!   (storage-proofs' encoding).
//! - **Tree C** (column hashes) and **tree R** (replica, "comm_r_last"): Poseidon trees of the
//!   proof type's shape (base arity 8; 32 GiB: 8 sub-trees; 64 GiB: 2 × 8 sub-trees), sparse
//!   ([`tree::SparseTree`]): only the opened leaves' paths are computed, every other subtree is a
//!   random filler digest. comm_r = Poseidon hash2(comm_c, comm_r_last).
//!
//! | proof type | nodes | layers | partitions × challenges | tree C/R levels (arities) |
//! |---|---|---|---|---|
//! | 2 KiB | 2^6 | 2 | 1 × 2 | 8, 8 |
//! | 8 MiB | 2^18 | 2 | 1 × 2 | 8 × 6 |
//! | 512 MiB | 2^24 | 2 | 1 × 2 | 8 × 8 |
//! | 32 GiB | 2^30 | 11 | 10 × 18 | 8 × 9, then 8 (sub-trees) |
//! | 64 GiB | 2^31 | 11 | 10 × 18 | 8 × 9, then 8 (sub), 2 (top) |
//!
//! Generation time on 2 cores (`cuzk gen-c1`): 2 KiB … 512 MiB 0.1–0.2 s; 32 GiB 2.5 s (+ 0.9 s to
//! write 39 MB of JSON, 52 MB wrapped), 64 GiB 2.7 s; peak RSS 160 MB.

pub mod tree;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use base64::Engine as _;
use blstrs::Scalar as Fr;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::constants::{DefaultPieceHasher, DefaultTreeHasher};
use filecoin_proofs::types::{MerkleTreeTrait, VanillaSealProof as RawVanillaSealProof};
use filecoin_proofs::with_shape;
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::RegisteredSealProof;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::MerkleProof;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    generate_replica_id, Column, ColumnProof, EncodingProof, LabelingProof, Proof, PublicInputs,
    ReplicaColumnProof, StackedDrg, TOTAL_PARENTS,
};
use typenum::Unsigned;

use tree::{PeriodicTree, SparseTree};

/// Number of leaves of the repeated data block (fewer for sectors with fewer nodes).
pub const DATA_BLOCK_LEAVES: usize = 1024;

/// The interactive PoRep proof types (`V1_1`) [`generate`] makes, smallest first.
pub const PROOF_TYPES: [RegisteredSealProof; 5] = [
    RegisteredSealProof::StackedDrg2KiBV1_1,
    RegisteredSealProof::StackedDrg8MiBV1_1,
    RegisteredSealProof::StackedDrg512MiBV1_1,
    RegisteredSealProof::StackedDrg32GiBV1_1,
    RegisteredSealProof::StackedDrg64GiBV1_1,
];

/// The `V1_1` proof type of a sector size written as `2KiB`, `8MiB`, `512MiB`, `32GiB` or
/// `64GiB` (case-insensitive; a plain byte count is accepted too).
///
/// # Errors
/// For any other size.
pub fn proof_type_for_size(size: &str) -> Result<RegisteredSealProof> {
    let t = size.trim();
    PROOF_TYPES
        .into_iter()
        .find(|p| {
            let bytes = u64::from(p.sector_size());
            size_name(*p).eq_ignore_ascii_case(t) || t.parse::<u64>().ok() == Some(bytes)
        })
        .ok_or_else(|| {
            anyhow!("unsupported sector size {size:?}: expected 2KiB, 8MiB, 512MiB, 32GiB or 64GiB")
        })
}

/// `"2KiB"`, `"8MiB"`, `"512MiB"`, `"32GiB"`, `"64GiB"` (or the byte count for other types).
pub fn size_name(p: RegisteredSealProof) -> String {
    let b = u64::from(p.sector_size());
    match b {
        b if b >= 1 << 30 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 => format!("{}KiB", b >> 10),
        b => b.to_string(),
    }
}

/// The generator's 32-byte seed from a text (any string, e.g. `"1"` or `"bench-a"`): SHA-256 of a
/// fixed tag and the text.
pub fn seed_from_str(s: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"cuzk c1gen seed v1\0")
        .chain_update(s.as_bytes())
        .finalize()
        .into()
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct C1Spec {
    /// Proof type: one of [`PROOF_TYPES`].
    pub registered_proof: RegisteredSealProof,
    /// Generator seed: the same seed (and sector id, prover id) gives the same output.
    pub seed: [u8; 32],
    /// Sector number.
    pub sector_id: u64,
    /// 32-byte prover id (see `cuzk::c1::prover_id_from_actor_id`).
    pub prover_id: [u8; 32],
}

/// A generated C1 output and the values needed to prove and verify it.
#[derive(Clone, Debug)]
pub struct GeneratedC1 {
    /// The spec it was generated from.
    pub spec: C1Spec,
    /// The C1 output, as filecoin-proofs-api's `seal_commit_phase1` returns it.
    pub output: SealCommitPhase1Output,
}

/// The meta file (`meta.json`): the public values of a generated C1 output, byte arrays in hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Proof type, e.g. `StackedDrg32GiBV1_1`.
    pub registered_proof: RegisteredSealProof,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// Sector number.
    pub sector_id: u64,
    /// Prover id (32 bytes, hex).
    pub prover_id: String,
    /// Ticket (32 bytes, hex).
    pub ticket: String,
    /// Interactive seed (32 bytes, hex).
    pub seed: String,
    /// comm_r (32 bytes, hex).
    pub comm_r: String,
    /// comm_d (32 bytes, hex).
    pub comm_d: String,
    /// Replica id (32 bytes, hex).
    pub replica_id: String,
    /// The generator seed (32 bytes, hex).
    pub generator_seed: String,
}

/// File names [`GeneratedC1::write_dir`] writes.
pub const C1_JSON: &str = "c1.json";
/// The wrapper form of the C1 output.
pub const C1_WRAPPER_JSON: &str = "c1-wrapper.json";
/// The meta file.
pub const META_JSON: &str = "meta.json";

impl GeneratedC1 {
    /// The `SealCommitPhase1Output` JSON (serde_json, as lotus / Curio write it).
    ///
    /// # Errors
    /// If serialization fails.
    pub fn c1_json(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.output)?)
    }

    /// The wrapper form `{"SectorNum": n, "Phase1Out": base64(JSON), "SectorSize": bytes}`.
    ///
    /// # Errors
    /// If serialization fails.
    pub fn wrapper_json(&self) -> Result<Vec<u8>> {
        let inner = self.c1_json()?;
        let v = serde_json::json!({
            "SectorNum": self.spec.sector_id,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(inner),
            "SectorSize": u64::from(self.output.registered_proof.sector_size()),
        });
        Ok(serde_json::to_vec(&v)?)
    }

    /// The public values.
    pub fn meta(&self) -> Meta {
        let o = &self.output;
        let h = cuzk::c1::hex;
        Meta {
            registered_proof: o.registered_proof,
            sector_size: u64::from(o.registered_proof.sector_size()),
            sector_id: self.spec.sector_id,
            prover_id: h(&self.spec.prover_id),
            ticket: h(&o.ticket),
            seed: h(&o.seed),
            comm_r: h(&o.comm_r),
            comm_d: h(&o.comm_d),
            replica_id: h(&o.replica_id.into_bytes()),
            generator_seed: h(&self.spec.seed),
        }
    }

    /// Writes [`C1_JSON`], [`C1_WRAPPER_JSON`] and [`META_JSON`] into `dir` (created if needed).
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let meta = serde_json::to_vec_pretty(&self.meta())?;
        for (name, bytes) in [
            (C1_JSON, self.c1_json()?),
            (C1_WRAPPER_JSON, self.wrapper_json()?),
            (META_JSON, meta),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

/// Generates the C1 output of `spec` (see the module docs for how).
///
/// # Errors
/// For a proof type other than [`PROOF_TYPES`], or if a storage-proofs setup step fails.
pub fn generate(spec: &C1Spec) -> Result<GeneratedC1> {
    let p = spec.registered_proof;
    ensure!(
        PROOF_TYPES.contains(&p),
        "{p:?}: the generator makes interactive PoRep V1_1 proof types only"
    );
    let output = with_shape!(u64::from(p.sector_size()), generate_shape, spec)?;
    Ok(GeneratedC1 {
        spec: spec.clone(),
        output,
    })
}

pub(crate) type TreeDomain = <DefaultTreeHasher as Hasher>::Domain;
type PieceDomain = <DefaultPieceHasher as Hasher>::Domain;

/// A ChaCha20 stream of the generator, separated by `tag` and `index`.
pub(crate) fn stream(seed: &[u8; 32], tag: &str, index: u64) -> ChaCha20Rng {
    let s: [u8; 32] = Sha256::new()
        .chain_update(seed)
        .chain_update(tag.as_bytes())
        .chain_update(index.to_le_bytes())
        .finalize()
        .into();
    ChaCha20Rng::from_seed(s)
}

/// The label of `node` at `layer` (1-based) from its `TOTAL_PARENTS` parent labels.
fn label(replica_id: &TreeDomain, layer: usize, node: usize, parents: &[TreeDomain]) -> TreeDomain {
    let mut head = [0u8; 64];
    head[..32].copy_from_slice(&replica_id.into_bytes());
    head[32..36].copy_from_slice(&(layer as u32).to_be_bytes());
    head[36..44].copy_from_slice(&(node as u64).to_be_bytes());
    let mut h = Sha256::new().chain_update(head);
    for p in parents {
        h.update(p.into_bytes());
    }
    let mut out: [u8; 32] = h.finalize().into();
    out[31] &= 0b0011_1111;
    TreeDomain::try_from_bytes(&out).expect("a 254-bit value is a field element")
}

/// Arities and node-hash heights of the levels of a tree of shape `Tree` with `nodes` leaves.
pub(crate) fn tree_levels<Tree: MerkleTreeTrait>(nodes: usize) -> Result<(Vec<usize>, Vec<usize>)> {
    let base = Tree::Arity::to_usize();
    let sub = Tree::SubTreeArity::to_usize();
    let top = Tree::TopTreeArity::to_usize();
    let base_leaves = nodes / sub.max(1) / top.max(1);
    let mut base_levels = 0;
    let mut n = 1;
    while n < base_leaves {
        n *= base;
        base_levels += 1;
    }
    ensure!(
        n == base_leaves,
        "{nodes} nodes do not fill a tree of arity {base}/{sub}/{top}"
    );
    let mut arities = vec![base; base_levels];
    let mut heights: Vec<usize> = (0..base_levels).collect();
    for a in [sub, top] {
        if a > 0 {
            arities.push(a);
            heights.push(0);
        }
    }
    Ok((arities, heights))
}

fn into_api<Tree: 'static + MerkleTreeTrait>(
    p: RegisteredSealProof,
    proofs: Vec<Vec<RawVanillaSealProof<Tree>>>,
) -> Result<VanillaSealProof> {
    use filecoin_proofs::constants::{
        SectorShape2KiB, SectorShape32GiB, SectorShape512MiB, SectorShape64GiB, SectorShape8MiB,
    };
    use std::any::Any;
    let any: Box<dyn Any> = Box::new(proofs);
    let v = match u64::from(p.sector_size()) {
        s if s == 2 << 10 => any
            .downcast::<Vec<Vec<RawVanillaSealProof<SectorShape2KiB>>>>()
            .map(|b| VanillaSealProof::StackedDrg2KiBV1(*b)),
        s if s == 8 << 20 => any
            .downcast::<Vec<Vec<RawVanillaSealProof<SectorShape8MiB>>>>()
            .map(|b| VanillaSealProof::StackedDrg8MiBV1(*b)),
        s if s == 512 << 20 => any
            .downcast::<Vec<Vec<RawVanillaSealProof<SectorShape512MiB>>>>()
            .map(|b| VanillaSealProof::StackedDrg512MiBV1(*b)),
        s if s == 32 << 30 => any
            .downcast::<Vec<Vec<RawVanillaSealProof<SectorShape32GiB>>>>()
            .map(|b| VanillaSealProof::StackedDrg32GiBV1(*b)),
        s if s == 64 << 30 => any
            .downcast::<Vec<Vec<RawVanillaSealProof<SectorShape64GiB>>>>()
            .map(|b| VanillaSealProof::StackedDrg64GiBV1(*b)),
        _ => bail!("{p:?}: no vanilla proof variant"),
    };
    v.map_err(|_| anyhow!("{p:?}: vanilla proofs of another tree shape"))
}

type Scheme<'a, Tree> = StackedDrg<'a, Tree, DefaultPieceHasher>;
pub(crate) type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

fn generate_shape<Tree: 'static + MerkleTreeTrait<Hasher = DefaultTreeHasher>>(
    spec: &C1Spec,
) -> Result<SealCommitPhase1Output> {
    let p = spec.registered_proof;
    let config = p.as_v1_config();
    let setup = filecoin_proofs::parameters::setup_params(&config)?;
    let pp = <Scheme<'_, Tree> as ProofScheme<'_>>::setup(&setup)?;
    let graph = &pp.graph;
    let nodes = graph.size();
    let layers = pp.num_layers;
    let partitions = usize::from(config.partitions);
    let seed = &spec.seed;

    // Data, tree D, replica id, challenges.
    let mut rng = stream(seed, "public", 0);
    let mut ticket = [0u8; 32];
    let mut interactive_seed = [0u8; 32];
    rng.fill_bytes(&mut ticket);
    rng.fill_bytes(&mut interactive_seed);
    let block_len = nodes.min(DATA_BLOCK_LEAVES);
    let mut data_rng = stream(seed, "data", 0);
    let block: Vec<PieceDomain> = (0..block_len)
        .map(|_| PieceDomain::random(&mut data_rng))
        .collect();
    let tree_d = PeriodicTree::<DefaultPieceHasher>::new(block, nodes);
    let comm_d = tree_d.root();
    let replica_id = generate_replica_id::<DefaultTreeHasher, _>(
        &spec.prover_id,
        spec.sector_id,
        &ticket,
        comm_d,
        &config.porep_id,
    );
    let pub_inputs = PublicInputs::<TreeDomain, PieceDomain> {
        replica_id,
        seed: Some(interactive_seed),
        tau: None,
        k: None,
    };
    let challenges: Vec<Vec<usize>> = (0..partitions)
        .map(|k| pub_inputs.challenges(&pp.challenges, nodes, Some(k)))
        .collect();

    // Parents of every challenged node; random columns for parents that are not challenged.
    let challenged: BTreeSet<usize> = challenges.iter().flatten().copied().collect();
    let degree = graph.degree();
    let drg_degree = graph.base_graph().degree();
    let parents: HashMap<usize, Vec<usize>> = challenged
        .par_iter()
        .map(|&c| {
            let mut ps = vec![0u32; degree];
            graph
                .parents(c, &mut ps)
                .map(|()| (c, ps.into_iter().map(|x| x as usize).collect()))
        })
        .collect::<Result<_>>()?;
    let others: BTreeSet<usize> = parents
        .values()
        .flatten()
        .copied()
        .filter(|n| !challenged.contains(n))
        .collect();
    let mut columns: HashMap<usize, Vec<TreeDomain>> = others
        .into_par_iter()
        .map(|n| {
            let mut r = stream(seed, "column", n as u64);
            (n, (0..layers).map(|_| TreeDomain::random(&mut r)).collect())
        })
        .collect();
    for &c in &challenged {
        columns.insert(c, Vec::with_capacity(layers));
    }

    // Labels of the challenged nodes, layer by layer; within a layer in ascending node order, as a
    // DRG parent is always a smaller node.
    let parent_labels = |columns: &HashMap<usize, Vec<TreeDomain>>, c: usize, layer: usize| {
        let ps = &parents[&c];
        let mut ls: Vec<TreeDomain> = ps[..drg_degree]
            .iter()
            .map(|p| columns[p][layer - 1])
            .collect();
        if layer > 1 {
            ls.extend(ps[drg_degree..].iter().map(|p| columns[p][layer - 2]));
        }
        ls.iter()
            .copied()
            .cycle()
            .take(TOTAL_PARENTS)
            .collect::<Vec<_>>()
    };
    for layer in 1..=layers {
        for &c in &challenged {
            let ps = parent_labels(&columns, c, layer);
            let l = label(&replica_id, layer, c, &ps);
            ensure!(
                LabelingProof::<DefaultTreeHasher>::new(layer as u32, c as u64, ps)
                    .verify(&replica_id, &l),
                "label of node {c} at layer {layer} disagrees with storage-proofs' labeling"
            );
            columns.get_mut(&c).expect("challenged column").push(l);
        }
    }

    // Replica leaves, trees C and R.
    let replica: BTreeMap<usize, TreeDomain> = challenged
        .iter()
        .map(|&c| {
            let key: Fr = columns[&c][layers - 1].into();
            let data: Fr = tree_d.leaf(c).into();
            (c, TreeDomain::from(key + data))
        })
        .collect();
    let column_hashes: BTreeMap<usize, TreeDomain> = columns
        .par_iter()
        .map(|(&n, rows)| {
            let col = Column::<DefaultTreeHasher>::new(n as u32, rows.clone())?;
            Ok((n, TreeDomain::from(col.hash())))
        })
        .collect::<Result<_>>()?;
    let (arities, heights) = tree_levels::<Tree>(nodes)?;
    let (tree_c, tree_r) = rayon::join(
        || {
            SparseTree::<DefaultTreeHasher>::build(
                &column_hashes,
                &arities,
                &heights,
                &mut stream(seed, "tree-c", 0),
            )
        },
        || {
            SparseTree::<DefaultTreeHasher>::build(
                &replica,
                &arities,
                &heights,
                &mut stream(seed, "tree-r", 0),
            )
        },
    );
    let (comm_c, comm_r_last) = (tree_c.root(), tree_r.root());
    let comm_r = <DefaultTreeHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);

    // The vanilla proofs.
    let column_proof = |n: usize| -> Result<ColumnProof<TreeProof<Tree>>> {
        let col = Column::new(n as u32, columns[&n].clone())?;
        let inclusion = TreeProof::<Tree>::from_parts(column_hashes[&n], comm_c, tree_c.path(n));
        ColumnProof::from_column(col, inclusion)
    };
    let vanilla: Vec<Vec<RawVanillaSealProof<Tree>>> = challenges
        .par_iter()
        .map(|cs| {
            cs.par_iter()
                .map(|&c| -> Result<RawVanillaSealProof<Tree>> {
                    let ps = &parents[&c];
                    let labeling_proofs: Vec<LabelingProof<DefaultTreeHasher>> = (1..=layers)
                        .map(|layer| {
                            LabelingProof::new(
                                layer as u32,
                                c as u64,
                                parent_labels(&columns, c, layer),
                            )
                        })
                        .collect();
                    let encoding_proof = EncodingProof::new(
                        layers as u32,
                        c as u64,
                        parent_labels(&columns, c, layers),
                    );
                    Ok(Proof {
                        comm_d_proofs: MerkleProof::from_parts(
                            tree_d.leaf(c),
                            comm_d,
                            tree_d.path(c),
                        ),
                        comm_r_last_proof: TreeProof::<Tree>::from_parts(
                            replica[&c],
                            comm_r_last,
                            tree_r.path(c),
                        ),
                        replica_column_proofs: ReplicaColumnProof {
                            c_x: column_proof(c)?,
                            drg_parents: ps[..drg_degree]
                                .iter()
                                .map(|&n| column_proof(n))
                                .collect::<Result<_>>()?,
                            exp_parents: ps[drg_degree..]
                                .iter()
                                .map(|&n| column_proof(n))
                                .collect::<Result<_>>()?,
                        },
                        labeling_proofs,
                        encoding_proof,
                    })
                })
                .collect()
        })
        .collect::<Result<_>>()?;

    let bytes32 = |v: Vec<u8>| -> [u8; 32] { v.try_into().expect("32-byte digests") };
    Ok(SealCommitPhase1Output {
        registered_proof: p,
        vanilla_proofs: into_api::<Tree>(p, vanilla)?,
        comm_r: bytes32(comm_r.into_bytes()),
        comm_d: bytes32(comm_d.into_bytes()),
        replica_id,
        seed: interactive_seed,
        ticket,
    })
}

/// Checks a C1 output's vanilla proofs with storage-proofs-porep's `verify_all_partitions`, as
/// `cuzk::Engine` does before proving. `Ok(false)` when they do not verify.
///
/// # Errors
/// For malformed commitments, a proof-type mismatch, or a panic inside the verifier (reported
/// as an error).
pub fn verify_vanilla(output: &SealCommitPhase1Output) -> Result<bool> {
    let size = u64::from(output.registered_proof.sector_size());
    with_shape!(size, verify_shape, output)
}

fn verify_shape<Tree: 'static + MerkleTreeTrait<Hasher = DefaultTreeHasher>>(
    o: &SealCommitPhase1Output,
) -> Result<bool> {
    use storage_proofs_porep::stacked::Tau;
    let config = o.registered_proof.as_v1_config();
    let vanilla: Vec<Vec<RawVanillaSealProof<Tree>>> = o.vanilla_proofs.clone().try_into()?;
    let comm_r: TreeDomain = filecoin_proofs::as_safe_commitment(&o.comm_r, "comm_r")?;
    let comm_d: PieceDomain = filecoin_proofs::as_safe_commitment(&o.comm_d, "comm_d")?;
    let pub_inputs = PublicInputs {
        replica_id: o.replica_id,
        tau: Some(Tau { comm_d, comm_r }),
        k: None,
        seed: Some(o.seed),
    };
    let setup = filecoin_proofs::parameters::setup_params(&config)?;
    let pp = <Scheme<'_, Tree> as ProofScheme<'_>>::setup(&setup)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        <Scheme<'_, Tree> as ProofScheme<'_>>::verify_all_partitions(&pp, &pub_inputs, &vanilla)
    }))
    .map_err(|_| anyhow!("the vanilla proof verifier panicked (malformed proofs)"))?
}

/// Synthesizes partition `k` of a C1 output's circuit (storage-proofs-porep's `StackedCompound`
/// circuit, as `cuzk::Engine` builds it) with `cuzk::synth::Assignment` and checks that every
/// constraint holds and that the public inputs are the expected ones. Returns the number of
/// constraints. Costs about 1.5 µs per constraint on one core (2 KiB: 2.7 M constraints, 8 MiB:
/// 3.8 M, 512 MiB: 4.4 M, 32 GiB: ~130 M per partition).
///
/// # Errors
/// When the circuit cannot be built or synthesized, a constraint fails (naming it), or the
/// public inputs differ.
pub fn check_circuit(output: &SealCommitPhase1Output, k: usize) -> Result<usize> {
    let size = u64::from(output.registered_proof.sector_size());
    with_shape!(size, check_circuit_shape, output, k)
}

fn check_circuit_shape<Tree: 'static + MerkleTreeTrait<Hasher = DefaultTreeHasher>>(
    o: &SealCommitPhase1Output,
    k: usize,
) -> Result<usize> {
    use storage_proofs_core::compound_proof::{self, CompoundProof};
    use storage_proofs_porep::stacked::{StackedCompound, Tau};
    type Compound<Tree> = StackedCompound<Tree, DefaultPieceHasher>;
    let config = o.registered_proof.as_v1_config();
    let vanilla: Vec<Vec<RawVanillaSealProof<Tree>>> = o.vanilla_proofs.clone().try_into()?;
    ensure!(k < vanilla.len(), "partition {k} of {}", vanilla.len());
    let pub_inputs = PublicInputs {
        replica_id: o.replica_id,
        tau: Some(Tau {
            comm_d: filecoin_proofs::as_safe_commitment(&o.comm_d, "comm_d")?,
            comm_r: filecoin_proofs::as_safe_commitment(&o.comm_r, "comm_r")?,
        }),
        k: None,
        seed: Some(o.seed),
    };
    let setup = compound_proof::SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(&config)?,
        partitions: Some(usize::from(config.partitions)),
        priority: false,
    };
    let pp = <Compound<Tree> as CompoundProof<Scheme<'_, Tree>, _>>::setup(&setup)?;
    let circuit = <Compound<Tree> as CompoundProof<Scheme<'_, Tree>, _>>::circuit(
        &pub_inputs,
        (),
        &vanilla[k],
        &pp.vanilla_params,
        Some(k),
    )?;
    let asg = cuzk::synth::Assignment::synthesize(circuit)?;
    cuzk::prover::check_satisfied(&asg, k)?;
    let inputs = <Compound<Tree> as CompoundProof<Scheme<'_, Tree>, _>>::generate_public_inputs(
        &pub_inputs,
        &pp.vanilla_params,
        Some(k),
    )?;
    ensure!(
        asg.input[1..] == inputs[..],
        "partition {k}: the circuit's public inputs differ from the expected ones"
    );
    Ok(asg.a.len())
}

/// Recomputes the root of every tree D and tree R path in a C1 output's vanilla proofs and
/// checks it against the root the proof carries.
///
/// storage-proofs-porep's `verify_all_partitions` recomputes the tree C (column) paths but, of
/// the tree D and tree R paths, checks only the leaves, the roots and the positions (the circuit
/// checks the rest): this is the missing part, for tests of this generator.
///
/// # Errors
/// If the vanilla proofs are not of the output's proof type.
pub fn verify_merkle_paths(output: &SealCommitPhase1Output) -> Result<bool> {
    let size = u64::from(output.registered_proof.sector_size());
    with_shape!(size, verify_paths_shape, output)
}

fn verify_paths_shape<Tree: 'static + MerkleTreeTrait<Hasher = DefaultTreeHasher>>(
    o: &SealCommitPhase1Output,
) -> Result<bool> {
    use storage_proofs_core::merkle::MerkleProofTrait;
    let vanilla: Vec<Vec<RawVanillaSealProof<Tree>>> = o.vanilla_proofs.clone().try_into()?;
    Ok(vanilla
        .par_iter()
        .flatten()
        .all(|p| p.comm_d_proofs.verify() && p.comm_r_last_proof.verify()))
}
