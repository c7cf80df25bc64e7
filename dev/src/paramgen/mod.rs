//! Groth16 test parameters for a compiled circuit, written as the v28 `.params` / `.vk` files
//! that filecoin-proofs reads — **test** parameters: whoever knows the seed knows the toxic waste.
//! [`generate_porep`] makes them for a PoRep circuit, [`generate_post`] for a WindowPoSt or
//! WinningPoSt circuit, both from the engine's compiled circuit ([`generate_params`]).
//!
//! The algorithm is Groth16's setup (Groth, "On the Size of Pairing-based Non-interactive
//! Arguments", 2016) in the form bellperson 0.27's `generate_random_parameters` uses, and the
//! output equals bellperson's byte for byte for the same RNG (see the test `fixture_bytes` in
//! `cli/tests`):
//! 1. **Secrets** ([`Toxic::draw`]): G1 and G2 bases g₁, g₂ (random points, not the standard
//!    generators), then α, β, γ, δ, τ, drawn in that order from the RNG.
//! 2. **QAP at τ** ([`qap::evaluate`]): the domain of size m = 2^⌈log₂ n⌉ for the n constraints
//!    (the circuit's, then one `inputᵢ · 0 = 0` per input — the compiled circuit's last rows);
//!    uᵢ(τ), vᵢ(τ), wᵢ(τ) for every variable from the A, B, C matrices and the Lagrange
//!    coefficients at τ.
//! 3. **Queries** (fixed-base multiplications, [`fixed_base`] on the CPU or the GPU):
//!    - H: τⁱ·(τᵐ − 1)/δ · g₁ for i = 0 … m − 2;
//!    - IC (inputs) and L (aux): (β·uᵢ + α·vᵢ + wᵢ)/γ · g₁ resp. /δ · g₁ (an L point at infinity
//!      is an unconstrained variable: an error, as in bellperson);
//!    - A: uᵢ·g₁, B: vᵢ·g₁ and vᵢ·g₂, for inputs then aux, **without** the points at infinity
//!      (variables whose uᵢ resp. vᵢ is 0);
//!    - vk: α·g₁, β·g₁, β·g₂, γ·g₂, δ·g₁, δ·g₂, IC.
//! 4. **Files**: `.params` = vk ‖ H ‖ L ‖ A ‖ B_G1 ‖ B_G2 (each query a big-endian `u32` count,
//!    then uncompressed points: 96 bytes in G1, 192 in G2; layout in `cuzk::srs`); `.vk` = the
//!    vk alone; `.meta` = `{"sector_size":N}`. Written under temporary names, then renamed.
//!
//! Memory: the matrices, the m Lagrange coefficients, u, v, w (32 bytes per variable each) and
//! one column-ordered copy of one matrix at a time (8 bytes per non-zero); points are written in
//! chunks of 2^20.

pub mod fixed_base;
pub mod qap;

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use blstrs::{G1Projective, G2Projective, Scalar as Fr};
use ff::Field;
use filecoin_proofs::constants::DefaultPieceHasher;
use filecoin_proofs::types::MerkleTreeTrait;
use filecoin_proofs::with_shape;
use filecoin_proofs::PoStType;
use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof, RegisteredUpdateProof};
use group::{Curve, Group};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use cuzk::circuit::CompiledCircuit;
use fixed_base::FixedBaseTable;

/// Scalars per written chunk.
const WRITE_CHUNK: usize = 1 << 20;

/// The toxic waste of one setup.
#[derive(Clone, Debug)]
pub struct Toxic {
    /// G1 base.
    pub g1: G1Projective,
    /// G2 base.
    pub g2: G2Projective,
    /// α.
    pub alpha: Fr,
    /// β.
    pub beta: Fr,
    /// γ.
    pub gamma: Fr,
    /// δ.
    pub delta: Fr,
    /// τ.
    pub tau: Fr,
}

impl Toxic {
    /// Draws g₁, g₂, α, β, γ, δ, τ from `rng`, in bellperson's order.
    pub fn draw<R: RngCore>(rng: &mut R) -> Toxic {
        let g1 = G1Projective::random(&mut *rng);
        let g2 = G2Projective::random(&mut *rng);
        let alpha = Fr::random(&mut *rng);
        let beta = Fr::random(&mut *rng);
        let gamma = Fr::random(&mut *rng);
        let delta = Fr::random(&mut *rng);
        let tau = Fr::random(&mut *rng);
        Toxic {
            g1,
            g2,
            alpha,
            beta,
            gamma,
            delta,
            tau,
        }
    }

    /// [`Toxic::draw`] from `ChaCha20Rng::from_seed(seed)` (the fixture's RNG).
    pub fn from_seed(seed: [u8; 32]) -> Toxic {
        Toxic::draw(&mut ChaCha20Rng::from_seed(seed))
    }
}

/// The 32-byte seed of a `--seed` text: 64 hex digits are the bytes themselves (e.g. the 2 KiB
/// fixture's `PARAMS_RNG_SEED`); any other text is hashed (SHA-256 of a fixed tag and the text).
pub fn seed_from_str(s: &str) -> [u8; 32] {
    let t = s.trim();
    if t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut out = [0u8; 32];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).expect("hex digits");
        }
        return out;
    }
    Sha256::new()
        .chain_update(b"cuzk paramgen seed v1\0")
        .chain_update(s.as_bytes())
        .finalize()
        .into()
}

/// Where the fixed-base multiplications run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU (blstrs, rayon).
    Cpu,
    /// CUDA device 0 (needs the `cuda` feature).
    Gpu,
}

/// Fixed-base multiplications of the two bases, uncompressed encodings out.
trait FixedBase: Sync {
    fn g1(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()>;
    fn g2(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()>;
}

struct Cpu {
    g1: FixedBaseTable<G1Projective>,
    g2: FixedBaseTable<G2Projective>,
}

impl FixedBase for Cpu {
    fn g1(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()> {
        fixed_base::g1_encoded(&self.g1, scalars, out);
        Ok(())
    }
    fn g2(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()> {
        fixed_base::g2_encoded(&self.g2, scalars, out);
        Ok(())
    }
}

#[cfg(feature = "cuda")]
use group::prime::PrimeCurveAffine;

#[cfg(feature = "cuda")]
struct Gpu(cuzk::gpu::kernels::fixed_base::FixedBase);

#[cfg(feature = "cuda")]
impl FixedBase for Gpu {
    fn g1(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()> {
        let mut pts = vec![blstrs::G1Affine::identity(); scalars.len()];
        self.0.g1(scalars, &mut pts)?;
        fixed_base::encode_g1_affine(&pts, out);
        Ok(())
    }
    fn g2(&self, scalars: &[Fr], out: &mut [u8]) -> Result<()> {
        let mut pts = vec![blstrs::G2Affine::identity(); scalars.len()];
        self.0.g2(scalars, &mut pts)?;
        out.par_chunks_exact_mut(192)
            .zip(pts.par_iter())
            .for_each(|(o, p)| o.copy_from_slice(&p.to_uncompressed()));
        Ok(())
    }
}

fn backend(device: Device, t: &Toxic) -> Result<Box<dyn FixedBase>> {
    match device {
        Device::Cpu => {
            let (g1, g2) = rayon::join(|| FixedBaseTable::new(t.g1), || FixedBaseTable::new(t.g2));
            Ok(Box::new(Cpu { g1, g2 }))
        }
        #[cfg(feature = "cuda")]
        Device::Gpu => {
            let dev = cuzk::gpu::driver::device::Device::get(0)?;
            Ok(Box::new(Gpu(
                cuzk::gpu::kernels::fixed_base::FixedBase::new(&dev, &t.g1, &t.g2)?,
            )))
        }
        #[cfg(not(feature = "cuda"))]
        Device::Gpu => bail!("the GPU path needs a build with --features cuda"),
    }
}

/// What a generation made and how long its steps took.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Inputs (IC points), aux (L points), domain size m (H has m − 1 points).
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Domain size.
    pub domain: usize,
    /// Points in the A, B_G1 (= B_G2) queries.
    pub a: usize,
    /// Points in B.
    pub b: usize,
    /// Bytes of the `.params` file.
    pub params_bytes: u64,
    /// Seconds: QAP at τ, base tables, H, IC + L, A, B (G1 and G2), total.
    pub secs: [f64; 7],
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.secs;
        write!(
            f,
            "{} inputs, {} aux, domain 2^{}, A {}, B {}; {:.2} GB; QAP {:.1} s, tables {:.1} s, \
             H {:.1} s, IC+L {:.1} s, A {:.1} s, B {:.1} s, total {:.1} s",
            self.inputs,
            self.aux,
            self.domain.trailing_zeros(),
            self.a,
            self.b,
            self.params_bytes as f64 / 1e9,
            s[0],
            s[1],
            s[2],
            s[3],
            s[4],
            s[5],
            s[6]
        )
    }
}

/// Writes one query: the `u32` count, then the points of `count` scalars, made chunk by chunk
/// by `scalars(chunk index)` and multiplied by `mul` into `elem`-byte encodings.
fn write_query(
    w: &mut impl Write,
    count: usize,
    elem: usize,
    chunks: usize,
    scalars: impl Fn(usize) -> Vec<Fr>,
    mul: impl Fn(&[Fr], &mut [u8]) -> Result<()>,
) -> Result<()> {
    let n = u32::try_from(count).context("query longer than 2^32 points")?;
    w.write_all(&n.to_be_bytes())?;
    let mut buf = Vec::new();
    let mut written = 0;
    for k in 0..chunks {
        let s = scalars(k);
        buf.resize(s.len() * elem, 0);
        mul(&s, &mut buf)?;
        w.write_all(&buf)?;
        written += s.len();
    }
    ensure!(written == count, "query of {count} points wrote {written}");
    Ok(())
}

/// Writes `path` through `write` into `<path>.tmp.<pid>`, then renames it.
fn write_atomic(path: &Path, write: impl FnOnce(&mut BufWriter<File>) -> Result<()>) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.tmp.{}", path.display(), std::process::id()));
    let r = (|| -> Result<()> {
        let mut w = BufWriter::with_capacity(8 << 20, File::create(&tmp)?);
        write(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(())
    })();
    if let Err(e) = r {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Generates the parameters of `cc` with the secrets `t` and writes `params_path` and
/// `vk_path` (see the module docs).
///
/// # Errors
/// A variable that no constraint uses (L point at infinity), τ in the domain, I/O errors, GPU
/// errors.
pub fn generate_params(
    cc: &CompiledCircuit,
    t: &Toxic,
    device: Device,
    params_path: &Path,
    vk_path: &Path,
) -> Result<Report> {
    let t_all = Instant::now();
    let mut rep = Report::default();
    let ni = cc.layout.num_inputs();
    let na = cc.layout.num_aux();
    rep.inputs = ni;
    rep.aux = na;

    let t0 = Instant::now();
    let q = qap::evaluate(cc, t.tau)?;
    let m = 1usize << q.log_m;
    rep.domain = m;
    rep.a = q.u.par_iter().filter(|x| !bool::from(x.is_zero())).count();
    rep.b = q.v.par_iter().filter(|x| !bool::from(x.is_zero())).count();
    rep.secs[0] = t0.elapsed().as_secs_f64();
    log::info!(
        "paramgen: QAP at τ of {ni} inputs, {na} aux, domain 2^{} in {:.2} s",
        q.log_m,
        rep.secs[0]
    );

    let t0 = Instant::now();
    let fb = backend(device, t)?;
    rep.secs[1] = t0.elapsed().as_secs_f64();

    let gamma_inv = Option::<Fr>::from(t.gamma.invert()).context("γ = 0")?;
    let delta_inv = Option::<Fr>::from(t.delta.invert()).context("δ = 0")?;
    let ext = |i: usize, inv: Fr| (t.beta * q.u[i] + t.alpha * q.v[i] + q.w[i]) * inv;

    // IC (needed for the vk at the head of the file).
    let ic_scalars: Vec<Fr> = (0..ni).into_par_iter().map(|i| ext(i, gamma_inv)).collect();
    let mut ic = vec![0u8; ni * 96];
    fb.g1(&ic_scalars, &mut ic)?;
    let g1 = t.g1.to_affine();
    let g2 = t.g2.to_affine();
    let mut vk = Vec::with_capacity(3 * 96 + 3 * 192 + 4 + ic.len());
    vk.extend_from_slice(&(g1 * t.alpha).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g1 * t.beta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * t.beta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * t.gamma).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g1 * t.delta).to_affine().to_uncompressed());
    vk.extend_from_slice(&(g2 * t.delta).to_affine().to_uncompressed());
    vk.extend_from_slice(&u32::try_from(ni)?.to_be_bytes());
    vk.extend_from_slice(&ic);

    // Variables of A and B (non-zero u resp. v), in order, chunk by chunk.
    let nonzero = |p: &[Fr], k: usize| -> Vec<Fr> {
        let e = ((k + 1) * WRITE_CHUNK).min(p.len());
        p[k * WRITE_CHUNK..e]
            .iter()
            .copied()
            .filter(|x| !bool::from(x.is_zero()))
            .collect()
    };
    let nvars = ni + na;
    let var_chunks = nvars.div_ceil(WRITE_CHUNK);

    write_atomic(params_path, |w| {
        w.write_all(&vk)?;
        // H: τ^i · (τ^m − 1)/δ for i < m − 1.
        let t0 = Instant::now();
        let coeff = (t.tau.pow_vartime([m as u64]) - Fr::ONE) * delta_inv;
        let h = m - 1;
        write_query(
            w,
            h,
            96,
            h.div_ceil(WRITE_CHUNK),
            |k| {
                let s = k * WRITE_CHUNK;
                let e = (s + WRITE_CHUNK).min(h);
                let mut out = vec![Fr::ZERO; e - s];
                out.par_chunks_mut(1 << 12).enumerate().for_each(|(c, o)| {
                    let mut p = t.tau.pow_vartime([(s + (c << 12)) as u64]) * coeff;
                    for x in o {
                        *x = p;
                        p *= t.tau;
                    }
                });
                out
            },
            |s, o| fb.g1(s, o),
        )?;
        rep.secs[2] = t0.elapsed().as_secs_f64();
        log::info!("paramgen: H ({h} points) in {:.1} s", rep.secs[2]);

        // L: aux variables.
        let t0 = Instant::now();
        write_query(
            w,
            na,
            96,
            na.div_ceil(WRITE_CHUNK),
            |k| {
                let s = ni + k * WRITE_CHUNK;
                let e = (s + WRITE_CHUNK).min(nvars);
                (s..e).into_par_iter().map(|i| ext(i, delta_inv)).collect()
            },
            |s, o| {
                if let Some(i) = s.iter().position(|x| bool::from(x.is_zero())) {
                    bail!("an aux variable is unconstrained (its L point would be at infinity; chunk offset {i})");
                }
                fb.g1(s, o)
            },
        )?;
        rep.secs[3] = t0.elapsed().as_secs_f64();
        log::info!("paramgen: L ({na} points) in {:.1} s", rep.secs[3]);

        let t0 = Instant::now();
        write_query(
            w,
            rep.a,
            96,
            var_chunks,
            |k| nonzero(&q.u, k),
            |s, o| fb.g1(s, o),
        )?;
        rep.secs[4] = t0.elapsed().as_secs_f64();
        log::info!("paramgen: A ({} points) in {:.1} s", rep.a, rep.secs[4]);

        let t0 = Instant::now();
        write_query(
            w,
            rep.b,
            96,
            var_chunks,
            |k| nonzero(&q.v, k),
            |s, o| fb.g1(s, o),
        )?;
        write_query(
            w,
            rep.b,
            192,
            var_chunks,
            |k| nonzero(&q.v, k),
            |s, o| fb.g2(s, o),
        )?;
        rep.secs[5] = t0.elapsed().as_secs_f64();
        log::info!(
            "paramgen: B ({} points, G1 and G2) in {:.1} s",
            rep.b,
            rep.secs[5]
        );
        Ok(())
    })?;
    write_atomic(vk_path, |w| Ok(w.write_all(&vk)?))?;
    rep.params_bytes = fs::metadata(params_path)?.len();
    rep.secs[6] = t_all.elapsed().as_secs_f64();
    Ok(rep)
}

/// The files [`generate_porep`] or [`generate_post`] wrote.
#[derive(Clone, Debug)]
pub struct ParamFiles {
    /// `.params`.
    pub params: PathBuf,
    /// `.vk`.
    pub vk: PathBuf,
    /// `.meta`.
    pub meta: PathBuf,
    /// Seconds spent building (or loading) the compiled circuit.
    pub compile_secs: f64,
    /// The generation's report.
    pub report: Report,
}

/// The files of a PoRep circuit (the name [`generate_porep`] returned them under before PoSt).
pub type PorepFiles = ParamFiles;

/// Generates the parameters of the PoRep circuit of `proof` (one partition) into `dir` under
/// filecoin-proofs' v28 names, with the secrets of `ChaCha20Rng::from_seed(seed)`. The compiled
/// circuit comes from (and goes to) the engine's circuit cache (`EngineConfig::from_env`).
///
/// # Errors
/// Unsupported proof types, those of [`generate_params`], I/O.
pub fn generate_porep(
    proof: RegisteredSealProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    with_shape!(
        u64::from(proof.sector_size()),
        generate_porep_shape,
        proof,
        seed,
        dir,
        device
    )
}

/// The circuit's parameter files from its compiled circuit (built by `compile` unless the
/// engine's circuit cache holds it under `name` and `key`), the secrets of `seed`, and the
/// `.meta` of `sector_size`.
fn generate_files(
    what: &str,
    (name, key): (String, [u8; 32]),
    compile: impl FnOnce() -> cuzk::Result<CompiledCircuit>,
    seed: [u8; 32],
    device: Device,
    (params, vk, meta): (PathBuf, PathBuf, PathBuf),
    sector_size: u64,
) -> Result<ParamFiles> {
    use storage_proofs_core::parameter_cache::CacheEntryMetadata;
    let t0 = Instant::now();
    let cache = cuzk::EngineConfig::from_env()?.circuit_cache.dir();
    let (cc, _) = cuzk::circuit::cache::load_or_build(cache.as_deref(), &name, &key, compile)?;
    let compile_secs = t0.elapsed().as_secs_f64();
    log::info!("paramgen: compiled circuit of {what} in {compile_secs:.1} s");

    let report = generate_params(&cc, &Toxic::from_seed(seed), device, &params, &vk)?;
    let json = serde_json::to_vec(&CacheEntryMetadata { sector_size })?;
    write_atomic(&meta, |w| Ok(w.write_all(&json)?))?;
    Ok(ParamFiles {
        params,
        vk,
        meta,
        compile_secs,
        report,
    })
}

/// The file name of `path` (empty if none).
fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn generate_porep_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredSealProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    use storage_proofs_core::parameter_cache::{
        CacheableParameters, ParameterSetMetadata, PARAMETER_METADATA_EXT, VERSION,
    };
    use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound};
    let config = proof.as_v1_config();
    let pp = filecoin_proofs::parameters::public_params::<Tree>(&config)
        .map_err(|e| anyhow::anyhow!("{proof:?} public parameters: {e:#}"))?;
    let (params, vk) = cuzk::srs::porep_param_paths::<Tree>(dir, &pp);
    let id = <StackedCompound<Tree, DefaultPieceHasher> as CacheableParameters<
        StackedCircuit<Tree, DefaultPieceHasher>,
        _,
    >>::cache_identifier(&pp);
    let meta = dir.join(format!("v{VERSION}-{id}.{PARAMETER_METADATA_EXT}"));
    let cache_key = cuzk::circuit::porep::cache_name_and_key(&file_name(&params), &pp);
    generate_files(
        &format!("{proof:?}"),
        cache_key,
        || cuzk::circuit::porep::compile(&pp),
        seed,
        device,
        (params, vk, meta),
        pp.sector_size(),
    )
}

/// Generates the parameters of the PoSt circuit of `proof` (WindowPoSt: one partition of
/// `WINDOW_POST_SECTOR_COUNT` sectors × 10 challenges; WinningPoSt: 66 one-challenge sectors)
/// into `dir` under filecoin-proofs' v28 names (`v28-proof-of-spacetime-fallback-merkletree-
/// poseidon_hasher-8-<sub>-<top>-<sha256 of the public parameters' identifier>` `.params`,
/// `.vk`, `.meta`: the files filecoin-proofs' `get_post_params` and the engine look up), with
/// the secrets of `ChaCha20Rng::from_seed(seed)`. The circuit is the engine's PoSt circuit
/// (`cuzk::circuit::post::compile` of filecoin-proofs' public parameters), from and to the
/// engine's circuit cache (`EngineConfig::from_env`). With the seeds of the 2 KiB PoSt fixture
/// (`post_fixture::WINNING_PARAMS_RNG_SEED`, `WINDOW_PARAMS_RNG_SEED`) the files equal its
/// bellperson-generated ones byte for byte.
///
/// # Errors
/// Those of [`generate_params`], filecoin-proofs' public parameters, I/O.
pub fn generate_post(
    proof: RegisteredPoStProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    with_shape!(
        u64::from(proof.sector_size()),
        generate_post_shape,
        proof,
        seed,
        dir,
        device
    )
}

fn generate_post_shape<Tree: 'static + MerkleTreeTrait>(
    proof: RegisteredPoStProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    use storage_proofs_core::parameter_cache::PARAMETER_METADATA_EXT;
    let config = proof.as_v1_config();
    let pp = match config.typ {
        PoStType::Window => filecoin_proofs::parameters::window_post_public_params::<Tree>(&config),
        PoStType::Winning => {
            filecoin_proofs::parameters::winning_post_public_params::<Tree>(&config)
        }
    }
    .map_err(|e| anyhow::anyhow!("{proof:?} public parameters: {e:#}"))?;
    let (params, vk) = cuzk::srs::post_param_paths::<Tree>(dir, &pp);
    let meta = params.with_extension(PARAMETER_METADATA_EXT);
    let cache_key = cuzk::circuit::post::cache_name_and_key(&file_name(&params), &pp);
    generate_files(
        &format!("{proof:?}"),
        cache_key,
        || cuzk::circuit::post::compile::<Tree>(&pp),
        seed,
        device,
        (params, vk, meta),
        pp.sector_size,
    )
}

/// Generates the parameters of the SnapDeals circuit of `proof` (one partition of
/// `EmptySectorUpdateCircuit`: 10 challenges at 2 KiB and 8 MiB, 86 from 512 MiB on) into `dir`
/// under filecoin-proofs' v28 names (`v28-empty-sector-update-merkletree-poseidon_hasher-8-
/// <sub>-<top>-<sha256 of the public parameters' identifier>` `.params`, `.vk`, `.meta`: the
/// files filecoin-proofs' `get_empty_sector_update_params` and the engine look up), with the
/// secrets of `ChaCha20Rng::from_seed(seed)`. The circuit is the engine's
/// (`cuzk::circuit::snap::compile` of filecoin-proofs' public parameters), from and to the
/// engine's circuit cache (`EngineConfig::from_env`).
///
/// # Errors
/// Those of [`generate_params`], I/O.
pub fn generate_snap(
    proof: RegisteredUpdateProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    with_shape!(
        u64::from(proof.sector_size()),
        generate_snap_shape,
        proof,
        seed,
        dir,
        device
    )
}

fn generate_snap_shape<
    Tree: 'static + MerkleTreeTrait<Hasher = filecoin_hashers::poseidon::PoseidonHasher>,
>(
    proof: RegisteredUpdateProof,
    seed: [u8; 32],
    dir: &Path,
    device: Device,
) -> Result<ParamFiles> {
    use storage_proofs_core::parameter_cache::PARAMETER_METADATA_EXT;
    let pp = storage_proofs_update::PublicParams::from_sector_size(u64::from(proof.sector_size()));
    let (params, vk) = cuzk::srs::snap_param_paths::<Tree>(dir, &pp);
    let meta = params.with_extension(PARAMETER_METADATA_EXT);
    let cache_key = cuzk::circuit::snap::cache_name_and_key(&file_name(&params), &pp);
    generate_files(
        &format!("{proof:?}"),
        cache_key,
        || cuzk::circuit::snap::compile::<Tree>(&pp),
        seed,
        device,
        (params, vk, meta),
        u64::from(proof.sector_size()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds() {
        let fixture = *b"cuzk 2KiB fixture groth16 params";
        let hex: String = fixture.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(seed_from_str(&hex), fixture);
        assert_ne!(seed_from_str("1"), seed_from_str("2"));
    }
}
