//! Real-shape WindowPoSt and WinningPoSt inputs without sealing.
//!
//! [`generate`] makes what Curio sends to a PoSt prover — the proof type, the randomness, the
//! prover id and one vanilla proof per sector, each the bytes of filecoin-proofs-api's
//! `post::generate_single_vanilla_proof` (bincode of filecoin-proofs' `FallbackPoStSectorProof`)
//! — for any sector size, from a 32-byte seed, without a sector on disk. filecoin-proofs accepts
//! the vanilla proofs (`single_partition_vanilla_proofs`, storage-proofs-post's
//! `FallbackPoSt::verify`: [`verify_vanilla`]) and cuzk proves them into proofs that
//! filecoin-proofs-api's `verify_window_post` / `verify_winning_post` accept (tested at 2 KiB and
//! 8 MiB in `cli/tests`), as for sealed sectors.
//!
//! How each sector is made (all randomness from ChaCha20 streams derived from the seed and the
//! sector number, so sectors are generated in parallel and the output is a function of the
//! seed, the sector numbers, the prover id and the randomness):
//! - **Challenges**: filecoin-proofs-api's own derivation, `post::generate_fallback_sector_challenges`
//!   (after `post::generate_winning_post_sector_challenge` over the one-sector set for
//!   WinningPoSt, as Curio does): SHA-256 of the randomness, the sector number and the challenge
//!   index, modulo the sector's nodes (storage-proofs-post `generate_leaf_challenge`).
//! - **comm_c**: a random digest (the column tree is not opened by PoSt).
//! - **tree_r_last**: a Poseidon tree of the sector size's shape (filecoin-proofs'
//!   `SectorShape*`, base arity 8; 32 GiB: 8 sub-trees; 64 GiB: 2 × 8), sparse
//!   ([`crate::c1gen::tree::SparseTree`]): the challenged leaves are random field elements, every
//!   other node a path needs is a random filler digest drawn in a fixed order, so all paths of one
//!   sector are paths of one tree and agree on its root comm_r_last.
//! - **comm_r** = Poseidon `hash2(comm_c, comm_r_last)`, as filecoin-proofs computes it.
//! - **Vanilla proof**: one `SectorProof` of one inclusion proof per challenge (storage-proofs'
//!   `MerkleProof::from_parts`, the form `gen_cached_proof` returns), comm_c and comm_r_last,
//!   wrapped in `FallbackPoStSectorProof { sector_id, comm_r, … }` and bincode-encoded.
//!
//! The randomness is the spec's (`cuzk gen-post --randomness`) or 32 bytes of the seed's stream
//! with the top two bits cleared (a field element, as the chain's randomness is made one).
//!
//! | sector size | nodes (32 B) | tree_r_last levels (arities) | WindowPoSt partition | WinningPoSt | vanilla proof per sector, bytes (Window / Winning) |
//! |---|---|---|---|---|---|
//! | 2 KiB | 2^6 | 8 × 2 | 2 sectors × 10 challenges | 1 × 66 | 5,680 / 36,816 |
//! | 8 MiB | 2^18 | 8 × 6 | 2 × 10 | 1 × 66 | 15,280 / 100,176 |
//! | 512 MiB | 2^24 | 8 × 8 | 2 × 10 | 1 × 66 | 20,080 / 131,856 |
//! | 32 GiB | 2^30 | 8 × 9, then 8 | 2349 × 10 | 1 × 66 | 24,960 / 164,064 |
//! | 64 GiB | 2^31 | 8 × 9, then 8, 2 | 2300 × 10 | 1 × 66 | 25,520 / 167,760 |
//!
//! The output file ([`POST_JSON`], [`PostFile`]) is self-describing JSON: the proof type in the
//! actors' numbering (what Curio sends: 0–4 WinningPoSt, 10–14 WindowPoSt V1_1; see
//! `cuzk::post::registered_post_proof`) and filecoin-proofs-api's name, the sector size in
//! bytes, the partition index (0), randomness and prover id (hex), the sectors (number, comm_r,
//! comm_c, comm_r_last in hex, challenges) and the vanilla proofs (standard base64, in the
//! sectors' order): the arguments of `cuzk::Engine::prove_window_post` /
//! `prove_winning_post` and of the daemon's `Prove` request.
//!
//! Generation time on 2 cores (`cuzk gen-post`, busy machine): a full 32 GiB WindowPoSt
//! partition 10.7 s (58.6 MB of vanilla proofs; 79 MB of JSON written in 0.4 s; peak RSS
//! 220 MB), 64 GiB 11.8 s; any WinningPoSt and the small sizes < 0.2 s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{anyhow, bail, ensure, Context, Result};
use base64::Engine as _;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::constants::DefaultTreeHasher;
use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs::with_shape;
use filecoin_proofs::{FallbackPoStSectorProof, PoStConfig, PoStType};
use filecoin_proofs_api::post;
use filecoin_proofs_api::{RegisteredPoStProof, SectorId};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_post::fallback::{self, FallbackPoSt, PublicSector, SectorProof};

use crate::c1gen::tree::SparseTree;
use crate::c1gen::{self, stream, tree_levels, TreeDomain, TreeProof};
use cuzk::c1::hex;
use cuzk::ProofKind;

/// Name of the file [`GeneratedPost::write_dir`] writes.
pub const POST_JSON: &str = "post.json";

/// The generator's 32-byte seed from a text: SHA-256 of a fixed tag and the text.
pub fn seed_from_str(s: &str) -> [u8; 32] {
    Sha256::new()
        .chain_update(b"cuzk postgen seed v1\0")
        .chain_update(s.as_bytes())
        .finalize()
        .into()
}

/// The PoSt proof type of `kind` at a sector size written as `2KiB`, `8MiB`, `512MiB`, `32GiB`
/// or `64GiB` (or its byte count): WinningPoSt `StackedDrgWinning<size>V1`, WindowPoSt
/// `StackedDrgWindow<size>V1_2` (the actors' V1_1, what the network accepts).
///
/// # Errors
/// For another size, or a `kind` that is not a PoSt kind.
pub fn proof_type(kind: ProofKind, size: &str) -> Result<RegisteredPoStProof> {
    let bytes = u64::from(c1gen::proof_type_for_size(size)?.sector_size());
    (0..15u64)
        .filter_map(|n| cuzk::post::registered_post_proof(kind, n).ok())
        .find(|p| u64::from(p.sector_size()) == bytes)
        .ok_or_else(|| anyhow!("{kind} is not a PoSt kind"))
}

/// The number of the PoSt proof type `p` in the actors' numbering (what Curio sends), as
/// `cuzk::post::registered_post_proof` reads it.
///
/// # Errors
/// For a proof type cuzk does not prove (WindowPoSt V1).
pub fn actors_number(p: RegisteredPoStProof) -> Result<u64> {
    let kind = kind_of(p);
    (0..15u64)
        .find(|&n| cuzk::post::registered_post_proof(kind, n).ok() == Some(p))
        .ok_or_else(|| anyhow!("{p:?} is not a PoSt proof type cuzk proves"))
}

/// [`ProofKind::WindowPost`] or [`ProofKind::WinningPost`], from the proof type.
pub fn kind_of(p: RegisteredPoStProof) -> ProofKind {
    match p.typ() {
        PoStType::Window => ProofKind::WindowPost,
        PoStType::Winning => ProofKind::WinningPost,
    }
}

/// Sectors of one partition of `p` (filecoin-proofs' `WINDOW_POST_SECTOR_COUNT` of the sector
/// size: 2349 at 32 GiB, 2300 at 64 GiB, 2 below; WinningPoSt: `WINNING_POST_SECTOR_COUNT`, 1).
pub fn partition_sectors(p: RegisteredPoStProof) -> usize {
    p.as_v1_config().sector_count
}

/// Challenges per sector of `p` (`WINDOW_POST_CHALLENGE_COUNT` 10,
/// `WINNING_POST_CHALLENGE_COUNT` 66).
pub fn challenges_per_sector(p: RegisteredPoStProof) -> usize {
    p.as_v1_config().challenge_count
}

/// Parses 64 hex digits into a PoSt randomness, which must be a field element (BLS12-381
/// scalar, little-endian) as filecoin-proofs requires.
///
/// # Errors
/// For anything else.
pub fn parse_randomness(s: &str) -> Result<[u8; 32]> {
    let r = crate::fixture::from_hex32(s.trim())
        .ok_or_else(|| anyhow!("expected 64 hex digits (32 bytes)"))?;
    filecoin_proofs::as_safe_commitment::<TreeDomain, _>(&r, "randomness")
        .map_err(|_| anyhow!("not a field element (little-endian, below the scalar modulus)"))?;
    Ok(r)
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostSpec {
    /// The proof type ([`proof_type`]).
    pub registered_proof: RegisteredPoStProof,
    /// Generator seed: the same spec gives the same bytes.
    pub seed: [u8; 32],
    /// 32-byte prover id (see `cuzk::c1::prover_id_from_actor_id`).
    pub prover_id: [u8; 32],
    /// The randomness; `None`: derived from the seed.
    pub randomness: Option<[u8; 32]>,
    /// Number of the first sector; the others follow it.
    pub first_sector: u64,
    /// Sectors: WindowPoSt 1 to [`partition_sectors`] (`None`: a full partition); WinningPoSt
    /// 1 (`None` too).
    pub sectors: Option<usize>,
}

/// One generated sector's public values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostSector {
    /// Sector number.
    pub sector_id: u64,
    /// comm_r = H(comm_c, comm_r_last).
    pub comm_r: [u8; 32],
    /// comm_c (random).
    pub comm_c: [u8; 32],
    /// Root of the sparse tree_r_last.
    pub comm_r_last: [u8; 32],
    /// The challenged leaves, as filecoin-proofs derives them (one per inclusion proof).
    pub challenges: Vec<u64>,
}

/// Generated PoSt inputs: everything a prover and a verifier need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeneratedPost {
    /// The spec (with `sectors` resolved).
    pub spec: PostSpec,
    /// The randomness used.
    pub randomness: [u8; 32],
    /// The sectors, in the order of `vanilla_proofs`.
    pub sectors: Vec<PostSector>,
    /// One vanilla proof per sector (`post::generate_single_vanilla_proof`'s bytes).
    pub vanilla_proofs: Vec<Vec<u8>>,
}

/// One sector of [`PostFile`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostFileSector {
    /// Sector number.
    pub sector_id: u64,
    /// comm_r (32 bytes, hex).
    pub comm_r: String,
    /// comm_c (32 bytes, hex).
    pub comm_c: String,
    /// comm_r_last (32 bytes, hex).
    pub comm_r_last: String,
    /// The challenged leaf of each inclusion proof.
    pub challenges: Vec<u64>,
}

/// The file [`POST_JSON`]: a [`GeneratedPost`] with byte strings in hex, vanilla proofs in
/// standard base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostFile {
    /// `"window-post"` or `"winning-post"`.
    pub kind: String,
    /// The proof type in the actors' numbering (0–4 WinningPoSt, 10–14 WindowPoSt V1_1).
    pub registered_proof: u64,
    /// filecoin-proofs-api's name of it (e.g. `StackedDrgWindow32GiBV1_2`).
    pub registered_proof_name: RegisteredPoStProof,
    /// Sector size in bytes.
    pub sector_size: u64,
    /// The WindowPoSt partition index (always 0: the sectors are one partition).
    pub partition_index: usize,
    /// Randomness (32 bytes, hex).
    pub randomness: String,
    /// Prover id (32 bytes, hex).
    pub prover_id: String,
    /// The sectors, in the order of `vanilla_proofs`.
    pub sectors: Vec<PostFileSector>,
    /// One vanilla proof per sector (base64 of `post::generate_single_vanilla_proof`'s bytes).
    pub vanilla_proofs: Vec<String>,
    /// The generator seed (32 bytes, hex).
    pub generator_seed: String,
}

fn unhex32(s: &str, what: &str) -> Result<[u8; 32]> {
    crate::fixture::from_hex32(s).ok_or_else(|| anyhow!("{what}: expected 64 hex digits"))
}

impl GeneratedPost {
    /// The proof type in the actors' numbering.
    ///
    /// # Errors
    /// As [`actors_number`].
    pub fn registered_proof_number(&self) -> Result<u64> {
        actors_number(self.spec.registered_proof)
    }

    /// WindowPoSt or WinningPoSt.
    pub fn kind(&self) -> ProofKind {
        kind_of(self.spec.registered_proof)
    }

    /// The file form.
    ///
    /// # Errors
    /// As [`actors_number`].
    pub fn to_file(&self) -> Result<PostFile> {
        let p = self.spec.registered_proof;
        let b64 = base64::engine::general_purpose::STANDARD;
        Ok(PostFile {
            kind: self.kind().name().into(),
            registered_proof: actors_number(p)?,
            registered_proof_name: p,
            sector_size: u64::from(p.sector_size()),
            partition_index: 0,
            randomness: hex(&self.randomness),
            prover_id: hex(&self.spec.prover_id),
            sectors: self
                .sectors
                .iter()
                .map(|s| PostFileSector {
                    sector_id: s.sector_id,
                    comm_r: hex(&s.comm_r),
                    comm_c: hex(&s.comm_c),
                    comm_r_last: hex(&s.comm_r_last),
                    challenges: s.challenges.clone(),
                })
                .collect(),
            vanilla_proofs: self
                .vanilla_proofs
                .par_iter()
                .map(|v| b64.encode(v))
                .collect(),
            generator_seed: hex(&self.spec.seed),
        })
    }

    /// Back from the file form.
    ///
    /// # Errors
    /// For a file whose fields disagree (kind, number and name of the proof type, sector size,
    /// counts) or are not hex / base64.
    pub fn from_file(f: &PostFile) -> Result<GeneratedPost> {
        let p = f.registered_proof_name;
        let kind = kind_of(p);
        ensure!(
            f.kind == kind.name()
                && cuzk::post::registered_post_proof(kind, f.registered_proof).ok() == Some(p)
                && f.sector_size == u64::from(p.sector_size()),
            "kind {:?}, proof type {} ({p:?}) and sector size {} disagree",
            f.kind,
            f.registered_proof,
            f.sector_size
        );
        ensure!(
            f.sectors.len() == f.vanilla_proofs.len() && !f.sectors.is_empty(),
            "{} sectors, {} vanilla proofs",
            f.sectors.len(),
            f.vanilla_proofs.len()
        );
        let b64 = base64::engine::general_purpose::STANDARD;
        let sectors = f
            .sectors
            .iter()
            .map(|s| {
                Ok(PostSector {
                    sector_id: s.sector_id,
                    comm_r: unhex32(&s.comm_r, "comm_r")?,
                    comm_c: unhex32(&s.comm_c, "comm_c")?,
                    comm_r_last: unhex32(&s.comm_r_last, "comm_r_last")?,
                    challenges: s.challenges.clone(),
                })
            })
            .collect::<Result<_>>()?;
        let vanilla_proofs = f
            .vanilla_proofs
            .par_iter()
            .enumerate()
            .map(|(i, v)| b64.decode(v).with_context(|| format!("vanilla proof {i}")))
            .collect::<Result<_>>()?;
        Ok(GeneratedPost {
            spec: PostSpec {
                registered_proof: p,
                seed: unhex32(&f.generator_seed, "generator_seed")?,
                prover_id: unhex32(&f.prover_id, "prover_id")?,
                randomness: Some(unhex32(&f.randomness, "randomness")?),
                first_sector: f.sectors[0].sector_id,
                sectors: Some(f.sectors.len()),
            },
            randomness: unhex32(&f.randomness, "randomness")?,
            sectors,
            vanilla_proofs,
        })
    }

    /// The [`POST_JSON`] bytes.
    ///
    /// # Errors
    /// As [`GeneratedPost::to_file`].
    pub fn json(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(&self.to_file()?)?)
    }

    /// Writes `dir/`[`POST_JSON`] (`dir` created if needed); returns its path and size.
    ///
    /// # Errors
    /// I/O errors, naming the path.
    pub fn write_dir(&self, dir: &Path) -> Result<(std::path::PathBuf, u64)> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(POST_JSON);
        let json = self.json()?;
        std::fs::write(&path, &json).with_context(|| format!("writing {}", path.display()))?;
        Ok((path, json.len() as u64))
    }

    /// Reads a [`POST_JSON`] file.
    ///
    /// # Errors
    /// I/O and parse errors, naming the path; those of [`GeneratedPost::from_file`].
    pub fn read(path: &Path) -> Result<GeneratedPost> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let f: PostFile = serde_json::from_slice(&bytes)
            .with_context(|| format!("parsing {}", path.display()))?;
        GeneratedPost::from_file(&f).with_context(|| format!("{}", path.display()))
    }
}

/// The sectors `spec` asks for, checked against its proof type.
///
/// # Errors
/// WindowPoSt: 0 or more than [`partition_sectors`]; WinningPoSt: other than 1.
pub fn resolve_sectors(spec: &PostSpec) -> Result<usize> {
    let p = spec.registered_proof;
    let max = partition_sectors(p);
    let n = spec.sectors.unwrap_or(max);
    match kind_of(p) {
        ProofKind::WinningPost => ensure!(
            n == max,
            "WinningPoSt proves {max} sector (its {} challenges), not {n}",
            challenges_per_sector(p)
        ),
        _ => ensure!(
            (1..=max).contains(&n),
            "{n} sectors: a {p:?} partition holds 1 to {max}"
        ),
    }
    ensure!(
        spec.first_sector.checked_add(n as u64 - 1).is_some(),
        "sector numbers from {} overflow",
        spec.first_sector
    );
    Ok(n)
}

/// The randomness of `spec`: its own, or 32 bytes of the seed's stream with the top two bits
/// cleared.
pub fn randomness_of(spec: &PostSpec) -> [u8; 32] {
    spec.randomness.unwrap_or_else(|| {
        let mut r = [0u8; 32];
        rand::RngCore::fill_bytes(&mut stream(&spec.seed, "post-randomness", 0), &mut r);
        r[31] &= 0x3f;
        r
    })
}

/// Generates the PoSt inputs of `spec` (see the module docs).
///
/// # Errors
/// Those of [`resolve_sectors`]; a randomness that is not a field element; filecoin-proofs'
/// errors (reported with their context).
pub fn generate(spec: &PostSpec) -> Result<GeneratedPost> {
    let p = spec.registered_proof;
    let n = resolve_sectors(spec)?;
    let randomness = randomness_of(spec);
    filecoin_proofs::as_safe_commitment::<TreeDomain, _>(&randomness, "randomness")?;
    let ids: Vec<SectorId> = (0..n as u64)
        .map(|i| SectorId::from(spec.first_sector + i))
        .collect();
    if kind_of(p) == ProofKind::WinningPost {
        // Curio first picks the challenged sector of its eligible set; here the set is the one
        // generated sector.
        let chosen =
            post::generate_winning_post_sector_challenge(p, &randomness, 1, spec.prover_id)?;
        ensure!(
            chosen == [0],
            "WinningPoSt over one sector challenged {chosen:?}"
        );
    }
    let challenges =
        post::generate_fallback_sector_challenges(p, &randomness, &ids, spec.prover_id)?;
    let nodes = usize::try_from(u64::from(p.sector_size()) / 32)?;
    let per_sector: Vec<(PostSector, Vec<u8>)> = ids
        .par_iter()
        .map(|id| {
            let cs = challenges
                .get(id)
                .ok_or_else(|| anyhow!("no challenges for sector {id:?}"))?;
            with_shape!(
                u64::from(p.sector_size()),
                sector_shape,
                &spec.seed,
                u64::from(*id),
                cs,
                nodes
            )
        })
        .collect::<Result<_>>()?;
    let (sectors, vanilla_proofs) = per_sector.into_iter().unzip();
    Ok(GeneratedPost {
        spec: PostSpec {
            sectors: Some(n),
            randomness: Some(randomness),
            ..spec.clone()
        },
        randomness,
        sectors,
        vanilla_proofs,
    })
}

fn bytes32(d: TreeDomain) -> Result<[u8; 32]> {
    d.into_bytes()
        .try_into()
        .map_err(|_| anyhow!("a digest of other than 32 bytes"))
}

/// One sector's public values and vanilla proof bytes.
fn sector_shape<Tree: 'static + MerkleTreeTrait<Hasher = DefaultTreeHasher>>(
    seed: &[u8; 32],
    sector_id: u64,
    challenges: &[u64],
    nodes: usize,
) -> Result<(PostSector, Vec<u8>)> {
    let mut rng = stream(seed, "post-sector", sector_id);
    let comm_c = TreeDomain::random(&mut rng);
    let distinct: BTreeSet<usize> = challenges
        .iter()
        .map(|&c| usize::try_from(c))
        .collect::<Result<_, _>>()?;
    ensure!(
        distinct.iter().all(|&c| c < nodes),
        "a challenge beyond the sector's {nodes} nodes"
    );
    let leaves: BTreeMap<usize, TreeDomain> = distinct
        .into_iter()
        .map(|c| (c, TreeDomain::random(&mut rng)))
        .collect();
    let (arities, heights) = tree_levels::<Tree>(nodes)?;
    let tree = SparseTree::<DefaultTreeHasher>::build(&leaves, &arities, &heights, &mut rng);
    let comm_r_last = tree.root();
    let comm_r = <DefaultTreeHasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let inclusion_proofs: Vec<TreeProof<Tree>> = challenges
        .iter()
        .map(|&c| {
            let c = c as usize;
            TreeProof::<Tree>::from_parts(leaves[&c], comm_r_last, tree.path(c))
        })
        .collect();
    let proof = FallbackPoStSectorProof::<Tree> {
        sector_id: SectorId::from(sector_id),
        comm_r,
        vanilla_proof: fallback::Proof {
            sectors: vec![SectorProof {
                inclusion_proofs,
                comm_c,
                comm_r_last,
            }],
        },
    };
    let bytes = bincode::serialize(&proof)?;
    Ok((
        PostSector {
            sector_id,
            comm_r: bytes32(comm_r)?,
            comm_c: bytes32(comm_c)?,
            comm_r_last: bytes32(comm_r_last)?,
            challenges: challenges.to_vec(),
        },
        bytes,
    ))
}

/// filecoin-proofs' verdict on the vanilla proofs of `g` against its public values (the
/// randomness, the prover id and the sectors' numbers and comm_r, as a verifier knows them;
/// each vanilla proof must name its sector's number and comm_r, in order):
/// `single_partition_vanilla_proofs` (filecoin-proofs' shaping of the partition, as its
/// `generate_*_with_vanilla` run it, which checks them), then storage-proofs-post's
/// `FallbackPoSt::verify` of the partition over the public sectors as `verify_window_post` /
/// `verify_winning_post` list them (WinningPoSt: the sector once per challenge, so every
/// challenge is checked): comm_r = H(comm_c, comm_r_last), every inclusion path's root and
/// length, every challenge derived from the randomness. (The vanilla verification reads
/// comm_r_last from the first inclusion proof's root: the `comm_r_last` copy in the sector proof
/// is checked by the circuit only.) `Ok(false)` when filecoin-proofs refuses them (an error or a panic inside it
/// counts as a refusal).
///
/// # Errors
/// When a vanilla proof is not bincode of a `FallbackPoStSectorProof` of the proof type's
/// shape, or a public value is not a field element.
pub fn verify_vanilla(g: &GeneratedPost) -> Result<bool> {
    let size = u64::from(g.spec.registered_proof.sector_size());
    with_shape!(size, verify_shape, g)
}

fn verify_shape<Tree: 'static + MerkleTreeTrait>(g: &GeneratedPost) -> Result<bool> {
    let p = g.spec.registered_proof;
    let config: PoStConfig = p.as_v1_config();
    let vanilla: Vec<FallbackPoStSectorProof<Tree>> = g
        .vanilla_proofs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            bincode::deserialize(b)
                .with_context(|| format!("vanilla proof {i} is not a {p:?} sector proof"))
        })
        .collect::<Result<_>>()?;
    let safe = |b: &[u8; 32], what: &str| {
        filecoin_proofs::as_safe_commitment::<<Tree::Hasher as Hasher>::Domain, _>(b, what)
    };
    let sectors: Vec<PublicSector<_>> = g
        .sectors
        .iter()
        .map(|s| {
            Ok(PublicSector {
                id: SectorId::from(s.sector_id),
                comm_r: safe(&s.comm_r, "comm_r")?,
            })
        })
        .collect::<Result<_>>()?;
    // The proving side takes each sector's number and comm_r from its vanilla proof
    // (`generate_*_with_vanilla`): they must be the public ones.
    let claimed = vanilla.iter().map(|v| (v.sector_id, v.comm_r));
    if sectors.len() != vanilla.len() || !claimed.eq(sectors.iter().map(|s| (s.id, s.comm_r))) {
        return Ok(false);
    }
    let randomness = safe(&g.randomness, "randomness")?;
    let prover_id = safe(&g.spec.prover_id, "prover_id")?;
    let inputs = |sectors: Vec<PublicSector<_>>| fallback::PublicInputs {
        randomness,
        prover_id,
        sectors,
        k: Some(0),
    };
    let pp = match config.typ {
        PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(&config),
        PoStType::Winning => {
            filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config)
        }
    }?;
    let verdict = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<bool> {
        let partition = filecoin_proofs::single_partition_vanilla_proofs(
            &config,
            &pp,
            &inputs(sectors.clone()),
            &vanilla,
        )?;
        let public = match config.typ {
            PoStType::Window => sectors.clone(),
            PoStType::Winning => (0..pp.sector_count)
                .flat_map(|_| sectors.iter().cloned())
                .collect(),
        };
        <FallbackPoSt<'_, Tree> as ProofScheme<'_>>::verify(&pp, &inputs(public), &partition)
    }));
    Ok(matches!(verdict, Ok(Ok(true))))
}

/// The sector number and comm_r each vanilla proof of `g` carries (`FallbackPoStSectorProof`'s
/// `sector_id` and `comm_r`), in order: what `g.sectors` must repeat for filecoin-proofs'
/// verifiers to check a proof of them. `None` for a proof that is not bincode of a sector proof
/// of `g`'s proof type (decoded as the prover decodes it: fixed-width integers, nothing left
/// over), whose own error the prover gives.
pub fn vanilla_sectors(g: &GeneratedPost) -> Vec<Option<(u64, [u8; 32])>> {
    let size = u64::from(g.spec.registered_proof.sector_size());
    with_shape!(size, vanilla_sectors_shape, g)
}

fn vanilla_sectors_shape<Tree: 'static + MerkleTreeTrait>(
    g: &GeneratedPost,
) -> Vec<Option<(u64, [u8; 32])>> {
    use bincode::Options;
    g.vanilla_proofs
        .par_iter()
        .map(|b| {
            let v: FallbackPoStSectorProof<Tree> = bincode::DefaultOptions::new()
                .with_fixint_encoding()
                .deserialize(b)
                .ok()?;
            let comm_r: [u8; 32] = v.comm_r.into_bytes().try_into().ok()?;
            Some((u64::from(v.sector_id), comm_r))
        })
        .collect()
}

/// The challenged leaf of every inclusion proof of every vanilla proof of `g`, in order (what
/// the proofs open, for comparison with filecoin-proofs' derivation).
///
/// # Errors
/// As [`verify_vanilla`] for undecodable proofs.
pub fn opened_leaves(g: &GeneratedPost) -> Result<Vec<Vec<u64>>> {
    let size = u64::from(g.spec.registered_proof.sector_size());
    with_shape!(size, opened_shape, g)
}

fn opened_shape<Tree: 'static + MerkleTreeTrait>(g: &GeneratedPost) -> Result<Vec<Vec<u64>>> {
    g.vanilla_proofs
        .iter()
        .map(|b| {
            let v: FallbackPoStSectorProof<Tree> = bincode::deserialize(b)?;
            if v.vanilla_proof.sectors.len() != 1 {
                bail!("{} sector proofs", v.vanilla_proof.sectors.len());
            }
            Ok(v.vanilla_proof.sectors[0]
                .inclusion_proofs
                .iter()
                .map(|p| p.path_index() as u64)
                .collect())
        })
        .collect()
}

/// filecoin-proofs-api's verdict on the 192-byte SNARK `proof` of `g`: `post::verify_window_post`
/// (one partition over `g`'s sectors) or `post::verify_winning_post`, with `g`'s randomness,
/// prover id and sectors' comm_r. They read the verifying key from
/// `FIL_PROOFS_PARAMETER_CACHE`, which must be set from the process's start (see
/// [`crate::fixture::run_self_with_env`]).
///
/// # Errors
/// When filecoin-proofs fails (bytes that are not curve points, no verifying key, …).
pub fn verify_with_filecoin_proofs(g: &GeneratedPost, proof: &[u8]) -> Result<bool> {
    let p = g.spec.registered_proof;
    let replicas: BTreeMap<SectorId, filecoin_proofs_api::PublicReplicaInfo> = g
        .sectors
        .iter()
        .map(|s| {
            (
                SectorId::from(s.sector_id),
                filecoin_proofs_api::PublicReplicaInfo::new(p, s.comm_r),
            )
        })
        .collect();
    match kind_of(p) {
        ProofKind::WinningPost => {
            post::verify_winning_post(&g.randomness, proof, &replicas, g.spec.prover_id)
        }
        _ => post::verify_window_post(&g.randomness, &[(p, proof)], &replicas, g.spec.prover_id),
    }
}
