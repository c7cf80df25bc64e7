//! Engine configuration ([`EngineConfig`], its [`Tuning`]) and per-call options
//! ([`ProveOptions`]), from code or from environment variables (the table of [`EngineConfig`]).

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::gpu::memory::{alloc::TierKind, layout::Accumulation};
use crate::progress::ProgressFn;

/// Default parameter directory of filecoin-proofs.
pub const DEFAULT_PARAMETER_CACHE: &str = "/var/tmp/filecoin-proof-parameters";

/// Default of [`EngineConfig::stage_timeout`] (600 s): far above any GPU stage of a 2^27
/// partition (seconds), far below a process that hangs for hours.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// Which prover backend runs the NTT and MSMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Backend {
    /// GPU if the crate was built with `cuda` and a usable device exists, otherwise CPU
    /// (the choice is logged and reported per partition, never silent).
    #[default]
    Auto,
    /// CPU only (rayon, blst multi-exponentiation).
    Cpu,
    /// GPU only: no device is [`Error::NoDevice`] (unless `allow_cpu_fallback`).
    Gpu,
}

/// Engine-wide settings, fixed when the [`crate::Engine`] is created.
///
/// Built from [`EngineConfig::default`] or [`EngineConfig::from_env`] with one `with_*` setter
/// per field — `with_x(v)` sets field `x` to `v` (to `Some(v)` for a field that is an
/// `Option`):
///
/// ```
/// # use cuzk::{Backend, EngineConfig, Tuning};
/// let config = EngineConfig::default()
///     .with_backend(Backend::Cpu)
///     .with_parameter_dir("/var/tmp/filecoin-proof-parameters")
///     .with_host_memory_limit(64 << 30)
///     .with_tuning(Tuning::default().with_partitions_ahead(1));
/// assert_eq!(config.backend, Backend::Cpu);
/// ```
///
/// The fields stay public to read (and to assign); the struct is `#[non_exhaustive]`, so later
/// versions can add settings without breaking callers. What users set is here; the performance
/// knobs, whose defaults are the measured best, are in [`EngineConfig::tuning`].
///
/// Environment variables of [`EngineConfig::from_env`] and [`ProveOptions::from_env`] (all
/// optional; a value that cannot be parsed is an [`Error::InvalidConfig`], never silently
/// ignored; an empty or blank value means unset; rows marked *tuning* fill [`Tuning`]):
///
/// | variable | meaning | default |
/// |---|---|---|
/// | `FIL_PROOFS_PARAMETER_CACHE` | directory of the `.params` / `.vk` files (empty: unset) | `/var/tmp/filecoin-proof-parameters` |
/// | `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` | `1`/`true`: check each parameter file once against filecoin-proofs' official digests | `0` |
/// | `CUZK_BACKEND` | `auto`, `cpu` or `gpu` | `auto` (GPU when built with `cuda` and a device exists, else CPU) |
/// | `CUZK_DEVICES` | comma-separated CUDA ordinals (after `CUDA_VISIBLE_DEVICES`) | all |
/// | `CUZK_GPU_WORKERS_PER_DEVICE` | GPU workers per device, 1 ..= 64 | 2 |
/// | `CUZK_VRAM_LIMIT` | cap on device memory cuzk may use per device, e.g. `16GiB` | none |
/// | `CUZK_HOST_MEM_LIMIT` | host-memory budget for concurrent synthesis, e.g. `64GiB` | `MemAvailable` of /proc/meminfo less 1/16 (at least 4 GiB) |
/// | `CUZK_STAGE_TIMEOUT` | longest a GPU stage (a kernel, a copy) may take before it is an error and the device is retired, e.g. `600s`, `10m`, `1.5h`, `500ms` | `600s` |
/// | `CUZK_ALLOW_CPU` | `1`/`true` lets a GPU job fall back to the CPU, explicitly reported | `0` |
/// | `CUZK_CIRCUIT_CACHE` | directory of compiled-circuit cache files; `off`: keep them in memory only | `$XDG_CACHE_HOME/cuzk/circuits`, else `~/.cache/cuzk/circuits` |
/// | `CUZK_VERIFY` | per call ([`ProveOptions`]): `0`/`false` turns self-verification off | `1` |
/// | `CUZK_SYNTHESIS` | per call ([`ProveOptions`]): `compiled` (recorded R1CS, native witness, SpMV), `gadget` (the same with the gadgets' witness: the cross-check) or `reference` (bellpepper synthesis) | `compiled` |
/// | `CUZK_GPU_SECTIONS` | *tuning*: partitions whose kernels may run at once on a device (each worker's GPU section), 1 ..= 64 | 1 |
/// | `CUZK_PARTITIONS_AHEAD` | *tuning*: witnesses made ahead of the partitions the GPU runs: at most devices × workers + this many partitions are in flight engine-wide | devices × workers per device |
/// | `CUZK_GPU_SPMV` | *tuning*: `0`: the GPU backend computes a, b, c on the CPU even when the matrices fit on the device | `1` |
/// | `CUZK_PACKED_Z` | *tuning*: `0`: the GPU backend uploads the witness's aux dense (32 B a value) instead of packed (zeros and ones as bits, the other values as they are: 103 MB instead of 4.17 GB for a 32 GiB PoRep partition, expanded on the device) | `1` where it pays (at most 1/8 of the values neither 0 nor 1) |
/// | `CUZK_MSM_GATHER` | *tuning*: `0`: partitions sharing streamed bases run each pass's Pippenger part (the scalars neither 0 nor 1) on its own, instead of copying those scalars and their points into a device buffer and summing them in one MSM after the last pass | `1` where the plan holds the sinks |
/// | `CUZK_MSM_ACCUMULATION` | *tuning*: `affine` (batch-affine bucket accumulation on long lists, G1 and G2) or `xyzz` (XYZZ mixed additions everywhere) | `affine` |
/// | `CUZK_H_AHEAD` | *tuning*: when a partition runs its H side ahead of its other MSMs ([`HAhead`]): `while-loading`, `always` or `off` | `while-loading` |
/// | `CUZK_MSM_BATCH` | *tuning*: partitions whose L, A and B MSMs share one streamed upload of the bases when the parameters cannot stay on the device, 1 ..= 16 (1: each streams its own) | `4` |
/// | `CUZK_MSM_AFFINE_MIN_LIST` | *tuning*: shortest bucket list (entries) accumulated batch-affine, both groups; `0`: every MSM | G1 `67108864` (2^26), G2 `33554432` (2^25) |
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EngineConfig {
    /// Directory holding the Groth16 `.params` and `.vk` files; `None`: the
    /// `FIL_PROOFS_PARAMETER_CACHE` variable (when set and not empty), else
    /// `/var/tmp/filecoin-proof-parameters` (see [`EngineConfig::resolved_parameter_dir`]).
    pub parameter_dir: Option<PathBuf>,
    /// Check every `.params` and `.vk` file against filecoin-proofs' official digest list
    /// before first use (filecoin-proofs' `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS`, same meaning):
    /// a file that is not listed or whose digest differs is [`Error::ParametersInvalid`]. Each
    /// file is hashed once per process (~45 s for the 44 GiB file of 32 GiB sectors). Default
    /// `false`.
    pub verify_production_params: bool,
    /// Backend choice (`CUZK_BACKEND`; default [`Backend::Auto`]).
    pub backend: Backend,
    /// CUDA device ordinals to use (`CUZK_DEVICES`; `None`, the default: all visible devices).
    pub devices: Option<Vec<usize>>,
    /// GPU workers per device (`CUZK_GPU_WORKERS_PER_DEVICE`; 0, the default, means 2).
    pub gpu_workers_per_device: usize,
    /// Cap, in bytes, on the device memory cuzk may use on each device (`CUZK_VRAM_LIMIT`;
    /// `None`, the default: the card's).
    pub vram_limit: Option<u64>,
    /// Host-memory budget in bytes for loaded parameters and the partitions in flight
    /// (`CUZK_HOST_MEM_LIMIT`; `None`, the default: the machine's `MemAvailable` when the
    /// engine is created, less 1/16 of it, at least 4 GiB, left to the rest of the machine).
    ///
    /// It covers every call of the engine: loaded parameter sets and compiled circuits (sets
    /// of several circuits load within it, the least recently used idle one evicted for
    /// another, WinningPoSt's kept), and each partition in flight (~170 B a constraint,
    /// ~22 GB at 32 GiB; ~40 B, ~5.2 GB, when the GPU SpMV computes a, b, c on the device — a
    /// worker that computes them on the host after all takes the rest then). Idle pooled
    /// witness buffers count too and are freed first. A set larger than the limit, or a limit
    /// below the loaded parameters plus one partition, is [`crate::Error::OutOfHostMemory`]
    /// (401) once the parameters are loaded, before any partition starts. A partition that
    /// waits for memory logs one `info` line when it starts waiting (what it needs, what is in
    /// use and free, the limit) and one when admitted (how long it waited; `warn` from 60 s).
    pub host_memory_limit: Option<u64>,
    /// Let GPU jobs run on the CPU when no device can take them, reported, never silent
    /// (`CUZK_ALLOW_CPU`; default `false`).
    pub allow_cpu_fallback: bool,
    /// Where compiled circuits are cached (`CUZK_CIRCUIT_CACHE`; default
    /// [`CircuitCache::Default`]).
    pub circuit_cache: CircuitCache,
    /// Longest one GPU stage (H step, one MSM, an upload) may wait for the device before it
    /// fails with a timeout fault and the device is retired (`CUZK_STAGE_TIMEOUT`; `None`, the
    /// default: 600 s).
    pub stage_timeout: Option<Duration>,
    /// Performance knobs (default: the measured best).
    pub tuning: Tuning,
}

/// Performance knobs of an [`EngineConfig`] (its field `tuning`): how the GPU backend overlaps
/// and computes its work. The defaults are the measured best (BENCHMARKS.md); the knobs exist
/// for benchmarks, tests of the lower memory tiers and the odd machine. Built like
/// [`EngineConfig`]: `Tuning::default().with_x(v)`, one setter per field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tuning {
    /// Workers of a device that may be inside their GPU section (SpMV, NTT, MSM kernels) at
    /// once (`CUZK_GPU_SECTIONS`, 1 ..= 64; 0, the default, means 1; more than the workers per
    /// device acts as that many). With 1, a second worker overlaps only its uploads and host
    /// work with the first one's kernels; with more, kernels of several partitions share the
    /// device (each partition's memory is still its own plan). A 2^27 partition's kernels fill
    /// an H200, so 2 gains nothing there; small partitions leave gaps that a second section
    /// fills (BENCHMARKS.md).
    pub gpu_sections_per_device: usize,
    /// GPU backend, compiled path: compute a, b, c on the CPU even when the matrices fit on the
    /// device (`CUZK_GPU_SPMV=0`; default `false`: on the device when they fit).
    pub cpu_spmv_only: bool,
    /// GPU backend: upload the witness's aux dense, 32 B a value, instead of packed — three
    /// 32-bit words per 32 values plus the values that are neither 0 nor 1, ~1/40 of the
    /// bytes for a PoRep witness, expanded on the device (`gpu::kernels::zpack`)
    /// (`CUZK_PACKED_Z=0`; default `false`: packed where it pays).
    pub dense_z_upload: bool,
    /// GPU backend: partitions whose L, A, B MSMs share streamed bases run each pass's
    /// Pippenger part (scalars neither 0 nor 1) on its own, instead of gathering those scalars
    /// and their points on the device and summing them in one MSM per query after the last
    /// pass (`gpu::kernels::msm::GatherSink`; `CUZK_MSM_GATHER=0`; default `false`: gathered).
    /// Gathering costs 224 B of device memory per such value and partition (1.70 M values,
    /// 381 MB, for a 32 GiB PoRep partition); a plan that cannot hold it runs without.
    pub pippenger_per_pass: bool,
    /// How MSM buckets are accumulated on the GPU, G1 and G2 (`CUZK_MSM_ACCUMULATION`;
    /// default [`MsmAccumulation::BatchAffine`]).
    pub msm_accumulation: MsmAccumulation,
    /// Shortest bucket list (entries) accumulated batch-affine, both groups
    /// (`CUZK_MSM_AFFINE_MIN_LIST`; `None`, the default: 2^26 entries for G1 — MSMs of random
    /// scalars from ~2^22 points —, 2^25 for G2). 0 runs it on every MSM (the GPU == CPU checks
    /// of small partitions use this).
    pub msm_affine_min_list: Option<u64>,
    /// The memory tier each partition tries first, on every device it moves to (`None`, the
    /// default: [`Tier::Resident`]; lower tiers follow as memory requires, higher ones are
    /// never tried, so a partition can fail here that `Resident` would have proved). For tests
    /// of the lower tiers: on small shapes a [`EngineConfig::vram_limit`] alone cannot force
    /// [`Tier::Partial`], whose MSM pass needs more memory than `Resident` does. Not read from
    /// the environment.
    pub gpu_start_tier: Option<Tier>,
    /// Witnesses made ahead of the partitions the backend is running
    /// (`CUZK_PARTITIONS_AHEAD`): at most `slots + ahead` partitions are in flight
    /// engine-wide, where `slots` is the partitions the GPU backend runs at once (devices ×
    /// workers per device); each holds its witness (4.2 GB at 32 GiB). `None`, the default:
    /// `slots` (a witness ready for every worker). Ignored on the CPU backend (the host budget
    /// alone decides there), and for a kind whose witness runs on one thread per partition
    /// (SnapDeals: as many ahead as the host has cores).
    pub partitions_ahead: Option<usize>,
    /// When a compiled partition runs its H side (SpMV, R1CS check, H step, H MSM) apart from
    /// the other four MSMs (`CUZK_H_AHEAD`; default [`HAhead::WhileLoading`]).
    pub h_ahead: HAhead,
    /// Partitions whose L, A and B MSMs share one streamed upload of the bases
    /// (`CUZK_MSM_BATCH`, 1 ..= 16; `None`: [`DEFAULT_MSM_BATCH`]). Where no device can keep
    /// the parameters resident, every compiled partition runs its H side first
    /// ([`HAhead`]) and up to this many partitions then run L, A, B_G1 and B_G2 together on
    /// one device: each pass of bases goes up once and serves each partition's scalars (the
    /// device holds each partition's aux, 3.9 GiB at 32 GiB). 1: each partition streams its
    /// own.
    pub msm_batch: Option<usize>,
}

/// Partitions sharing one streamed upload of the bases by default ([`Tuning::msm_batch`]).
pub const DEFAULT_MSM_BATCH: usize = 4;
/// The most [`Tuning::msm_batch`] accepts.
pub const MAX_MSM_BATCH: usize = 16;

/// When a compiled partition runs its H side ahead of its other MSMs ([`Tuning::h_ahead`]).
///
/// A cold proof reads the parameter file front to back: H (13 of 47 GB at 32 GiB) first, then
/// L, A, B_G1, B_G2. Split, a partition whose witness is ready runs its a, b, c, R1CS check,
/// H step and H MSM against the H section as soon as it is decoded, while the disk reads on,
/// gives its place among the partitions in flight to the next (its witness kept), then runs
/// each of its L, A, B MSMs as soon as that query's section is decoded — those decoded by then
/// in one call —, so that after the last byte only the B_G2 MSMs (the last section's) remain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HAhead {
    /// Split the partitions of a proof whose parameters are still loading; one pass otherwise.
    #[default]
    WhileLoading,
    /// Split every compiled partition, parameters loaded or not (its proof is the same: the
    /// tests check the parts against one pass).
    Always,
    /// Never split: every partition waits for the whole parameter file.
    Off,
}

/// How the GPU MSMs accumulate their buckets, G1 and G2 ([`Tuning::msm_accumulation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MsmAccumulation {
    /// XYZZ mixed additions everywhere (`CUZK_MSM_ACCUMULATION=xyzz`).
    Xyzz,
    /// Affine additions sharing one binary-GCD inversion per step across a block of threads,
    /// on bucket lists of at least [`Tuning::msm_affine_min_list`] entries (shorter ones as
    /// `Xyzz`); 260 B (G1) / 500 B (G2) of device memory per chain of 65–260 list entries,
    /// planned by the allocator (`CUZK_MSM_ACCUMULATION=affine`, the default).
    #[default]
    BatchAffine,
}

/// A memory tier of the GPU backend's allocator, best first: how much of a partition's data
/// stays on the device ([`Tuning::gpu_start_tier`]; a partition's tier is reported as
/// [`crate::PartitionReport::tier`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Tier {
    /// Parameters resident on the device, full staging of a, b, c (`resident`).
    Resident,
    /// Full staging of a, b, c; parameter points streamed (`full-staging`).
    FullStaging,
    /// a and one buffer shared by b and c; parameter points streamed (`partial`).
    Partial,
    /// One domain buffer; MSMs in chunks that fit (`streaming`).
    Streaming,
}

impl From<MsmAccumulation> for Accumulation {
    fn from(a: MsmAccumulation) -> Self {
        match a {
            MsmAccumulation::Xyzz => Self::Xyzz,
            MsmAccumulation::BatchAffine => Self::BatchAffine,
        }
    }
}

impl From<Accumulation> for MsmAccumulation {
    fn from(a: Accumulation) -> Self {
        match a {
            Accumulation::Xyzz => Self::Xyzz,
            Accumulation::BatchAffine => Self::BatchAffine,
        }
    }
}

impl From<Tier> for TierKind {
    fn from(t: Tier) -> Self {
        match t {
            Tier::Resident => Self::Resident,
            Tier::FullStaging => Self::FullStaging,
            Tier::Partial => Self::Partial,
            Tier::Streaming => Self::Streaming,
        }
    }
}

/// For cuzk's own tools (a tier chosen among the allocator's `TierKind`s).
#[cfg(feature = "internals")]
impl From<TierKind> for Tier {
    fn from(t: TierKind) -> Self {
        match t {
            TierKind::Resident => Self::Resident,
            TierKind::FullStaging => Self::FullStaging,
            TierKind::Partial => Self::Partial,
            TierKind::Streaming => Self::Streaming,
        }
    }
}

/// Where compiled circuits (a proof type's R1CS recorded once, ~5.8 GB for 32 GiB sectors) are
/// kept between processes ([`EngineConfig::circuit_cache`]); a damaged or stale file is rebuilt
/// with a warning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CircuitCache {
    /// `$XDG_CACHE_HOME/cuzk/circuits`, else `$HOME/.cache/cuzk/circuits` (in memory when
    /// neither variable is set).
    #[default]
    Default,
    /// This directory.
    Dir(PathBuf),
    /// Nowhere: each engine records the circuit once and keeps it in memory.
    Off,
}

impl CircuitCache {
    /// The directory this setting resolves to (`None`: in memory only).
    pub fn dir(&self) -> Option<PathBuf> {
        match self {
            CircuitCache::Dir(d) => Some(d.clone()),
            CircuitCache::Off => None,
            CircuitCache::Default => {
                let nonempty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
                nonempty("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| nonempty("HOME").map(|h| PathBuf::from(h).join(".cache")))
                    .map(|c| c.join("cuzk").join("circuits"))
            }
        }
    }
}

/// How a partition's witness and a, b, c are computed ([`ProveOptions::synthesis`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Synthesis {
    /// The compiled circuit (the proof type's R1CS recorded once): the native witness
    /// (SHA-256 and Poseidon computed directly, written in the gadgets' allocation order) one
    /// PoRep challenge, PoSt sector or SnapDeals challenge per task in parallel, then a, b, c
    /// by SpMV, then the R1CS check.
    #[default]
    Compiled,
    /// The compiled circuit with the gadgets' witness (bellpepper's SHA-256, neptune's
    /// Poseidon run into a witness-only constraint system, one challenge or sector per task; a
    /// SnapDeals partition in one synthesis on one thread): the cross-check of the native
    /// witness, ~10x its CPU time.
    Gadget,
    /// bellpepper synthesis of the whole partition on one thread: the reference the compiled
    /// path is tested against.
    Reference,
}

impl Synthesis {
    /// Parses `compiled` / `gadget` / `reference`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `name`.
    pub(crate) fn parse(name: &str, v: &str) -> Result<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "compiled" | "native" => Ok(Synthesis::Compiled),
            "gadget" => Ok(Synthesis::Gadget),
            "reference" | "bellpepper" => Ok(Synthesis::Reference),
            _ => Err(bad(name, v, "expected compiled, gadget or reference")),
        }
    }
}

/// How urgent a proof call is ([`ProveOptions::priority`]): where calls share the engine, a
/// call's partitions go ahead of every partition of a lower priority that has not started yet,
/// first come first served within a priority. Partitions that have started are never
/// interrupted. Ordered `Low < Normal < High < Critical`.
///
/// What it orders (the GPU backend): the engine's gate of partitions in flight (a partition is
/// admitted while fewer than the gate's limit of partitions of its priority or higher are in
/// flight, so a higher priority never waits for lower-priority witnesses), the partition
/// scheduler's queue (and which batch a partition may join), and each device's GPU section
/// (between the kernels of two partitions). The CPU backend runs concurrent calls side by side:
/// there it changes nothing.
///
/// Curio's use: PoRep C2 and SnapDeals `Normal`, WindowPoSt `High`, WinningPoSt `Critical`.
/// The variants are numbered as Curio's `cuzk.v1` wire `Priority` (LOW = 1 … CRITICAL = 4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Priority {
    /// Behind every other priority.
    Low = 1,
    /// The default (Curio's PoRep C2 and SnapDeals).
    #[default]
    Normal = 2,
    /// Ahead of `Normal` and `Low` (Curio's WindowPoSt).
    High = 3,
    /// Ahead of every other priority (Curio's WinningPoSt: block production waits on it).
    Critical = 4,
}

impl Priority {
    /// Every priority, lowest first.
    pub const ALL: [Priority; 4] = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Critical,
    ];

    /// `"low"`, `"normal"`, `"high"` or `"critical"` (logs, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    /// The place of this priority in [`Priority::ALL`] (0 for `Low` … 3 for `Critical`).
    pub fn index(self) -> usize {
        self as usize - 1
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl EngineConfig {
    /// The default configuration with the environment variables of the table above applied
    /// (those of [`EngineConfig`] and [`Tuning`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the variable when a value cannot be parsed.
    pub fn from_env() -> Result<Self> {
        // A value that is not UTF-8 is an error (never ignored); a path may be any bytes.
        let mut c = EngineConfig {
            parameter_dir: std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
                .filter(|v| !v.to_string_lossy().trim().is_empty())
                .map(PathBuf::from),
            ..Default::default()
        };
        if let Some(v) = env_text("CUZK_BACKEND")? {
            c.backend = match v.trim().to_ascii_lowercase().as_str() {
                "auto" => Backend::Auto,
                "cpu" => Backend::Cpu,
                "gpu" | "cuda" => Backend::Gpu,
                _ => return Err(bad("CUZK_BACKEND", &v, "expected auto, cpu or gpu")),
            };
        }
        if let Some(v) = env_text("CUZK_DEVICES")? {
            let list: std::result::Result<Vec<usize>, _> =
                v.split(',').map(|s| s.trim().parse::<usize>()).collect();
            c.devices = Some(list.map_err(|_| bad("CUZK_DEVICES", &v, "expected e.g. 0,1"))?);
        }
        if let Some(v) = env_text("CUZK_GPU_WORKERS_PER_DEVICE")? {
            c.gpu_workers_per_device = parse_per_device("CUZK_GPU_WORKERS_PER_DEVICE", &v)?;
        }
        if let Some(v) = env_text("CUZK_GPU_SECTIONS")? {
            c.tuning.gpu_sections_per_device = parse_per_device("CUZK_GPU_SECTIONS", &v)?;
        }
        if let Some(v) = env_text("CUZK_VRAM_LIMIT")? {
            c.vram_limit = Some(parse_vram_limit(&v)?);
        }
        if let Some(v) = env_text("CUZK_HOST_MEM_LIMIT")? {
            c.host_memory_limit = Some(parse_host_memory_limit(&v)?);
        }
        if let Some(v) = env_text("CUZK_STAGE_TIMEOUT")? {
            c.stage_timeout =
                Some(parse_duration(&v).map_err(|r| bad("CUZK_STAGE_TIMEOUT", &v, &r))?);
        }
        if let Some(v) = env_text("CUZK_ALLOW_CPU")? {
            c.allow_cpu_fallback = parse_bool("CUZK_ALLOW_CPU", &v)?;
        }
        if let Some(v) = env_text("CUZK_H_AHEAD")? {
            c.tuning.h_ahead = match v.trim().to_ascii_lowercase().as_str() {
                "while-loading" => HAhead::WhileLoading,
                "always" => HAhead::Always,
                "off" => HAhead::Off,
                _ => {
                    return Err(bad(
                        "CUZK_H_AHEAD",
                        &v,
                        "expected while-loading, always or off",
                    ))
                }
            };
        }
        if let Some(v) = env_text("CUZK_MSM_BATCH")? {
            c.tuning.msm_batch = Some(
                v.trim()
                    .parse::<usize>()
                    .ok()
                    .filter(|k| (1..=MAX_MSM_BATCH).contains(k))
                    .ok_or_else(|| bad("CUZK_MSM_BATCH", &v, "expected 1 to 16 partitions"))?,
            );
        }
        if let Some(v) = env_text("CUZK_GPU_SPMV")? {
            c.tuning.cpu_spmv_only = !parse_bool("CUZK_GPU_SPMV", &v)?;
        }
        if let Some(v) = env_text("CUZK_PACKED_Z")? {
            c.tuning.dense_z_upload = !parse_bool("CUZK_PACKED_Z", &v)?;
        }
        if let Some(v) = env_text("CUZK_MSM_GATHER")? {
            c.tuning.pippenger_per_pass = !parse_bool("CUZK_MSM_GATHER", &v)?;
        }
        if let Some(v) = env_text("CUZK_MSM_ACCUMULATION")? {
            c.tuning.msm_accumulation = Accumulation::parse(&v)
                .map(MsmAccumulation::from)
                .ok_or_else(|| bad("CUZK_MSM_ACCUMULATION", &v, "expected affine or xyzz"))?;
        }
        if let Some(v) = env_text("CUZK_MSM_AFFINE_MIN_LIST")? {
            c.tuning.msm_affine_min_list = Some(v.trim().parse::<u64>().map_err(|_| {
                bad(
                    "CUZK_MSM_AFFINE_MIN_LIST",
                    &v,
                    "expected a number of list entries",
                )
            })?);
        }
        if let Some(v) = env_text("CUZK_PARTITIONS_AHEAD")? {
            c.tuning.partitions_ahead = Some(v.trim().parse::<usize>().map_err(|_| {
                bad(
                    "CUZK_PARTITIONS_AHEAD",
                    &v,
                    "expected a number of partitions",
                )
            })?);
        }
        if let Some(v) = env_text("CUZK_CIRCUIT_CACHE")? {
            c.circuit_cache = match v.trim() {
                d if d.eq_ignore_ascii_case("off") || d.eq_ignore_ascii_case("none") => {
                    CircuitCache::Off
                }
                d => CircuitCache::Dir(PathBuf::from(d)),
            };
        }
        c.verify_production_params = verify_production_params_from_env()?;
        Ok(c)
    }

    /// The parameter directory this configuration resolves to: [`EngineConfig::parameter_dir`],
    /// else `FIL_PROOFS_PARAMETER_CACHE` when set and not blank (an empty or blank value means
    /// unset, never the working directory), else `/var/tmp/filecoin-proof-parameters`.
    pub fn resolved_parameter_dir(&self) -> PathBuf {
        self.parameter_dir
            .clone()
            .or_else(|| {
                std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
                    .filter(|v| !v.to_string_lossy().trim().is_empty())
                    .map(PathBuf::from)
            })
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PARAMETER_CACHE))
    }

    /// [`EngineConfig::stage_timeout`] with its default applied (600 s).
    pub fn stage_timeout(&self) -> Duration {
        self.stage_timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT)
    }

    /// Checks the values the setters took as the environment's parser would
    /// ([`Engine::new`](crate::Engine::new) calls it): workers and sections per device 0 (the
    /// default) or 1 ..= 64, a VRAM limit, host-memory limit and stage timeout above zero.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (and its environment variable).
    pub fn validate(&self) -> Result<()> {
        let per_device = |name: &str, n: usize| {
            if n > 64 {
                Err(bad(
                    name,
                    &n.to_string(),
                    "expected 0 (the default) or 1 ..= 64",
                ))
            } else {
                Ok(())
            }
        };
        per_device(
            "gpu_workers_per_device (CUZK_GPU_WORKERS_PER_DEVICE)",
            self.gpu_workers_per_device,
        )?;
        per_device(
            "tuning.gpu_sections_per_device (CUZK_GPU_SECTIONS)",
            self.tuning.gpu_sections_per_device,
        )?;
        if self.vram_limit == Some(0) {
            return Err(bad(
                "vram_limit (CUZK_VRAM_LIMIT)",
                "0",
                "expected a size above zero (None: no cap)",
            ));
        }
        if self.host_memory_limit == Some(0) {
            return Err(bad(
                "host_memory_limit (CUZK_HOST_MEM_LIMIT)",
                "0",
                "expected a size above zero (None: the machine's available memory)",
            ));
        }
        if self.stage_timeout == Some(Duration::ZERO) {
            return Err(bad(
                "stage_timeout (CUZK_STAGE_TIMEOUT)",
                "0s",
                "expected a duration above zero",
            ));
        }
        Ok(())
    }

    /// [`EngineConfig::gpu_workers_per_device`] with its default applied (2 when 0).
    pub fn workers_per_device(&self) -> usize {
        if self.gpu_workers_per_device == 0 {
            2
        } else {
            self.gpu_workers_per_device
        }
    }

    /// [`Tuning::gpu_sections_per_device`] with its default applied (1 when 0).
    pub fn sections_per_device(&self) -> usize {
        self.tuning.gpu_sections_per_device.max(1)
    }

    /// Sets [`EngineConfig::parameter_dir`]: the directory of the `.params` / `.vk` files.
    pub fn with_parameter_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.parameter_dir = Some(dir.into());
        self
    }

    /// Sets [`EngineConfig::verify_production_params`]: check the parameter files against
    /// filecoin-proofs' official digests before first use.
    pub fn with_verify_production_params(mut self, on: bool) -> Self {
        self.verify_production_params = on;
        self
    }

    /// Sets [`EngineConfig::backend`].
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Sets [`EngineConfig::devices`]: the CUDA ordinals to use (after `CUDA_VISIBLE_DEVICES`).
    pub fn with_devices(mut self, ordinals: impl IntoIterator<Item = usize>) -> Self {
        self.devices = Some(ordinals.into_iter().collect());
        self
    }

    /// Sets [`EngineConfig::gpu_workers_per_device`] (0: the default, 2).
    pub fn with_gpu_workers_per_device(mut self, workers: usize) -> Self {
        self.gpu_workers_per_device = workers;
        self
    }

    /// Sets [`EngineConfig::vram_limit`]: a cap in bytes on the device memory used per device.
    pub fn with_vram_limit(mut self, bytes: u64) -> Self {
        self.vram_limit = Some(bytes);
        self
    }

    /// Sets [`EngineConfig::host_memory_limit`]: the engine-wide host-memory budget in bytes.
    pub fn with_host_memory_limit(mut self, bytes: u64) -> Self {
        self.host_memory_limit = Some(bytes);
        self
    }

    /// Sets [`EngineConfig::allow_cpu_fallback`]: whether GPU jobs may run on the CPU when no
    /// device can take them (reported).
    pub fn with_allow_cpu_fallback(mut self, allow: bool) -> Self {
        self.allow_cpu_fallback = allow;
        self
    }

    /// Sets [`EngineConfig::circuit_cache`].
    pub fn with_circuit_cache(mut self, cache: CircuitCache) -> Self {
        self.circuit_cache = cache;
        self
    }

    /// Sets [`EngineConfig::stage_timeout`]: the longest one GPU stage may take.
    pub fn with_stage_timeout(mut self, timeout: Duration) -> Self {
        self.stage_timeout = Some(timeout);
        self
    }

    /// Sets [`EngineConfig::tuning`], the performance knobs.
    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }
}

impl Tuning {
    /// Sets [`Tuning::gpu_sections_per_device`]: partitions whose kernels may run at once on a
    /// device (0: the default, 1).
    pub fn with_gpu_sections_per_device(mut self, sections: usize) -> Self {
        self.gpu_sections_per_device = sections;
        self
    }

    /// Sets [`Tuning::cpu_spmv_only`]: compute a, b, c on the CPU even when the GPU could.
    pub fn with_cpu_spmv_only(mut self, on: bool) -> Self {
        self.cpu_spmv_only = on;
        self
    }

    /// Sets [`Tuning::dense_z_upload`]: upload the witness's aux dense, not packed.
    pub fn with_dense_z_upload(mut self, on: bool) -> Self {
        self.dense_z_upload = on;
        self
    }

    /// Sets [`Tuning::pippenger_per_pass`]: streamed passes run their Pippenger parts on their
    /// own, not gathered.
    pub fn with_pippenger_per_pass(mut self, on: bool) -> Self {
        self.pippenger_per_pass = on;
        self
    }

    /// Sets [`Tuning::msm_accumulation`].
    pub fn with_msm_accumulation(mut self, accumulation: MsmAccumulation) -> Self {
        self.msm_accumulation = accumulation;
        self
    }

    /// Sets [`Tuning::msm_affine_min_list`]: the shortest bucket list (entries) accumulated
    /// batch-affine, both groups (0: every MSM).
    pub fn with_msm_affine_min_list(mut self, entries: u64) -> Self {
        self.msm_affine_min_list = Some(entries);
        self
    }

    /// Sets [`Tuning::gpu_start_tier`]: the memory tier each partition tries first.
    pub fn with_gpu_start_tier(mut self, tier: Tier) -> Self {
        self.gpu_start_tier = Some(tier);
        self
    }

    /// Sets [`Tuning::partitions_ahead`]: witnesses made ahead of the partitions the GPU runs.
    pub fn with_partitions_ahead(mut self, partitions: usize) -> Self {
        self.partitions_ahead = Some(partitions);
        self
    }

    /// Sets [`Tuning::msm_batch`]: partitions sharing one streamed upload of the bases
    /// (clamped to 1 ..= 16).
    pub fn with_msm_batch(mut self, partitions: usize) -> Self {
        self.msm_batch = Some(partitions.clamp(1, MAX_MSM_BATCH));
        self
    }

    /// The partitions sharing one streamed upload of the bases ([`Tuning::msm_batch`]).
    pub fn msm_batch(&self) -> usize {
        self.msm_batch
            .unwrap_or(DEFAULT_MSM_BATCH)
            .clamp(1, MAX_MSM_BATCH)
    }

    /// Sets [`Tuning::h_ahead`]: when a partition runs its H side ahead of its other MSMs.
    pub fn with_h_ahead(mut self, h_ahead: HAhead) -> Self {
        self.h_ahead = h_ahead;
        self
    }
}

/// Per-call options of [`crate::Engine::prove_porep_c2`].
///
/// Built like [`EngineConfig`]: [`ProveOptions::default`] or [`ProveOptions::from_env`], then
/// one `with_*` setter per field (`with_x(v)` sets `x` to `v`, to `Some(v)` for an `Option`):
///
/// ```
/// # use cuzk::{CancelToken, ProveOptions, Synthesis};
/// let cancel = CancelToken::new();
/// let options = ProveOptions::default()
///     .with_synthesis(Synthesis::Compiled)
///     .with_cancel(cancel.clone());
/// assert!(options.verify);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ProveOptions {
    /// Verify every partition's proof before returning (`CUZK_VERIFY`; default `true`). A proof
    /// that fails is [`Error::VerificationFailed`], never a result.
    pub verify: bool,
    /// Called for every finished stage of every partition (default `None`).
    pub progress: Option<ProgressFn>,
    /// Fixed Groth16 blinding factors `(r, s)` per partition, for known-answer tests only
    /// (cuzk's own tests: `with_randomness`, feature `internals`). `None` (the default) draws
    /// them from the OS random generator.
    pub(crate) randomness: Option<Vec<(blstrs::Scalar, blstrs::Scalar)>>,
    /// Compiled with the native witness (default), compiled with the gadget witness, or
    /// reference synthesis (`CUZK_SYNTHESIS`).
    pub synthesis: Synthesis,
    /// Stops the call at its next checkpoint once set, with [`Error::Cancelled`] (see
    /// [`crate::CancelToken`]). `None` (the default): the call runs to its end.
    pub cancel: Option<crate::CancelToken>,
    /// Where the call's partitions queue among those of concurrent calls ([`Priority`];
    /// default [`Priority::Normal`]).
    pub priority: Priority,
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            verify: true,
            progress: None,
            randomness: None,
            synthesis: Synthesis::default(),
            cancel: None,
            priority: Priority::Normal,
        }
    }
}

impl ProveOptions {
    /// Default options with `CUZK_VERIFY` and `CUZK_SYNTHESIS` applied.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `CUZK_VERIFY` is not a boolean or `CUZK_SYNTHESIS` not
    /// `compiled` / `gadget` / `reference`.
    pub fn from_env() -> Result<Self> {
        let mut o = ProveOptions::default();
        if let Some(v) = env_text("CUZK_VERIFY")? {
            o.verify = parse_bool("CUZK_VERIFY", &v)?;
        }
        if let Some(v) = env_text("CUZK_SYNTHESIS")? {
            o.synthesis = Synthesis::parse("CUZK_SYNTHESIS", &v)?;
        }
        Ok(o)
    }

    /// Sets [`ProveOptions::verify`]: self-verification of every partition's proof.
    pub fn with_verify(mut self, verify: bool) -> Self {
        self.verify = verify;
        self
    }

    /// Sets [`ProveOptions::progress`]: the callback of every finished stage.
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Sets [`ProveOptions::synthesis`].
    pub fn with_synthesis(mut self, synthesis: Synthesis) -> Self {
        self.synthesis = synthesis;
        self
    }

    /// Sets [`ProveOptions::cancel`]: the token that stops the call at its next checkpoint.
    pub fn with_cancel(mut self, cancel: crate::CancelToken) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Sets [`ProveOptions::priority`]: where the call's partitions queue among those of
    /// concurrent calls.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Fixes the Groth16 blinding factors `(r, s)`, one pair per partition (a count that
    /// differs from the proof's partitions is [`Error::InvalidInput`]): for known-answer tests
    /// only; a proof made with known factors reveals its witness. cuzk's own tests only
    /// (feature `internals`).
    #[cfg(feature = "internals")]
    pub fn with_randomness(mut self, rs: Vec<(blstrs::Scalar, blstrs::Scalar)>) -> Self {
        self.randomness = Some(rs);
        self
    }
}

impl std::fmt::Debug for ProveOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProveOptions")
            .field("verify", &self.verify)
            .field("progress", &self.progress.is_some())
            .field("randomness", &self.randomness.as_ref().map(|v| v.len()))
            .field("synthesis", &self.synthesis)
            .field("cancel", &self.cancel)
            .field("priority", &self.priority)
            .finish()
    }
}

/// `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` as a boolean (see [`parse_bool`]); unset or empty:
/// `false`.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the variable when it is set to something else.
pub fn verify_production_params_from_env() -> Result<bool> {
    const VAR: &str = "FIL_PROOFS_VERIFY_PRODUCTION_PARAMS";
    match std::env::var(VAR) {
        Ok(v) if !v.trim().is_empty() => parse_bool(VAR, &v),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(
            VAR,
            &v.to_string_lossy(),
            "not UTF-8; expected 1/0 or true/false",
        )),
    }
}

/// The text of environment variable `name`: `None` when unset, empty or blank.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the variable when its value is not UTF-8 (a bad value is an
/// error, never ignored).
fn env_text(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v)),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(bad(name, &v.to_string_lossy(), "not UTF-8")),
    }
}

fn bad(name: &str, value: &str, reason: &str) -> Error {
    Error::InvalidConfig {
        name: name.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// A per-device count (workers, sections): an integer in 1 ..= 64.
///
/// # Errors
/// [`Error::InvalidConfig`] naming `name`.
fn parse_per_device(name: &str, v: &str) -> Result<usize> {
    match v.trim().parse::<usize>() {
        Ok(n) if (1..=64).contains(&n) => Ok(n),
        _ => Err(bad(name, v, "expected 1..=64")),
    }
}

/// Parses a boolean setting: `1/true/yes/on` or `0/false/no/off` (case-insensitive).
/// Anything else is an error, so `X=0` can never mean "on".
pub fn parse_bool(name: &str, value: &str) -> Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(bad(
            name,
            value,
            "expected 1/0, true/false, yes/no or on/off",
        )),
    }
}

/// Parses a byte size: a plain number of bytes, or a number with a unit
/// `KiB/MiB/GiB/TiB` (powers of 1024) or `KB/MB/GB/TB` (powers of 1000); `K/M/G/T` alone are
/// binary. Fractions are allowed (`1.5GiB`).
///
/// # Errors
/// A human-readable reason when the text is not a size.
pub fn parse_bytes(text: &str) -> std::result::Result<u64, String> {
    let (num, unit) = number_and_unit(text, "a size like 16GiB")?;
    let mult: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        u => {
            return Err(format!(
                "unknown unit {u:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let v = num * mult;
    // `u64::MAX as f64` rounds up to 2^64, which itself does not fit.
    if !v.is_finite() || v < 0.0 || v >= u64::MAX as f64 {
        return Err(format!("{text:?} is out of range"));
    }
    if mult == 1.0 && num.fract() != 0.0 {
        return Err(format!(
            "{text:?} is a fraction of a byte (give a unit, e.g. 1.5GiB)"
        ));
    }
    Ok(v as u64)
}

/// Splits `12.5GiB` into (12.5, "gib"): the leading decimal number and the lower-cased unit.
fn number_and_unit(text: &str, what: &str) -> std::result::Result<(f64, String), String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.parse().map_err(|_| format!("{text:?} is not {what}"))?;
    Ok((num, unit.trim().to_ascii_lowercase()))
}

/// Parses a duration above zero: a number with a unit `ms`, `s`, `m`/`min` or `h`
/// (`600s`, `10m`, `1.5h`, `500ms`); a plain number is seconds.
///
/// # Errors
/// A human-readable reason when the text is not such a duration.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let (num, unit) = number_and_unit(text, "a duration like 600s")?;
    let secs = match unit.as_str() {
        "ms" => num / 1e3,
        "" | "s" | "sec" => num,
        "m" | "min" => num * 60.0,
        "h" => num * 3600.0,
        u => return Err(format!("unknown unit {u:?} (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return Err(format!("{text:?} must be above zero and at most 1e9 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A `CUZK_VRAM_LIMIT` value: a byte size (see [`parse_bytes`]) above zero. (The C ABI's 0
/// means "no cap"; as a cap, 0 bytes would only fail every GPU job.)
fn parse_vram_limit(v: &str) -> Result<u64> {
    match parse_bytes(v) {
        Ok(0) => Err(bad(
            "CUZK_VRAM_LIMIT",
            v,
            "a cap of 0 bytes leaves no device memory; unset it for no cap",
        )),
        Ok(b) => Ok(b),
        Err(r) => Err(bad("CUZK_VRAM_LIMIT", v, &r)),
    }
}

/// A `CUZK_HOST_MEM_LIMIT` value: a byte size (see [`parse_bytes`]) above zero (unset, the
/// limit is the machine's available memory; a limit of 0 bytes would refuse every job).
fn parse_host_memory_limit(v: &str) -> Result<u64> {
    match parse_bytes(v) {
        Ok(0) => Err(bad(
            "CUZK_HOST_MEM_LIMIT",
            v,
            "a limit of 0 bytes leaves no host memory; unset it for the machine's available \
             memory",
        )),
        Ok(b) => Ok(b),
        Err(r) => Err(bad("CUZK_HOST_MEM_LIMIT", v, &r)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_bytes("16GiB").unwrap(), 16 << 30);
        assert_eq!(parse_bytes("512 MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("141GB").unwrap(), 141_000_000_000);
        assert_eq!(parse_bytes("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        // No fraction of a byte, nothing from 2^64 up.
        assert!(parse_bytes("1.5").is_err());
        assert!(parse_bytes("1.5B").is_err());
        assert!(parse_bytes("18446744073709551616").is_err());
        assert!(parse_bytes("16EiB").is_err());
        assert!(parse_bytes("sixteen").is_err());
        assert!(parse_bytes("16XB").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("600s").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_duration("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration(" 30 ").unwrap(), Duration::from_secs(30));
        for bad_value in ["0", "0s", "-5s", "ten", "5 days", ""] {
            assert!(parse_duration(bad_value).is_err(), "{bad_value}");
        }
        assert_eq!(
            EngineConfig::default().stage_timeout(),
            DEFAULT_STAGE_TIMEOUT
        );
    }

    #[test]
    fn host_memory_limit_must_be_a_size_above_zero() {
        assert_eq!(parse_host_memory_limit("64GiB").unwrap(), 64 << 30);
        for zero in ["0", "0GiB"] {
            let e = parse_host_memory_limit(zero).unwrap_err();
            assert_eq!(e.code(), 104, "{zero}");
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid configuration CUZK_HOST_MEM_LIMIT=\"{zero}\": a limit of 0 bytes \
                     leaves no host memory; unset it for the machine's available memory"
                )
            );
        }
        let e = parse_host_memory_limit("abc").unwrap_err();
        assert_eq!(e.code(), 104);
        assert!(e.to_string().contains("CUZK_HOST_MEM_LIMIT"), "{e}");
    }

    #[test]
    fn vram_limit_must_be_a_size_above_zero() {
        assert_eq!(parse_vram_limit("16GiB").unwrap(), 16 << 30);
        for bad_value in ["0", "0GiB", "abc"] {
            let e = parse_vram_limit(bad_value).unwrap_err();
            assert_eq!(e.code(), 104, "{bad_value}");
            assert!(e.to_string().contains("CUZK_VRAM_LIMIT"), "{e}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_value_that_is_not_utf8_is_an_error_and_a_blank_one_unset() {
        use std::os::unix::ffi::OsStrExt;
        // A name no other test reads.
        let name = "CUZK_TEST_ENV_TEXT";
        std::env::set_var(name, std::ffi::OsStr::from_bytes(b"16\xffGiB"));
        let e = env_text(name).unwrap_err();
        std::env::set_var(name, "  ");
        let blank = env_text(name).unwrap();
        std::env::set_var(name, "4GiB");
        let set = env_text(name).unwrap();
        std::env::remove_var(name);
        assert!(
            matches!(&e, Error::InvalidConfig { name: n, .. } if n == name),
            "{e:?}"
        );
        assert_eq!(blank, None);
        assert_eq!(set.as_deref(), Some("4GiB"));
        assert_eq!(env_text(name).unwrap(), None);
    }

    #[test]
    fn setter_values_are_checked_like_the_environment() {
        assert!(EngineConfig::default().validate().is_ok());
        let bad_configs = [
            EngineConfig::default().with_gpu_workers_per_device(65),
            EngineConfig::default().with_vram_limit(0),
            EngineConfig::default().with_host_memory_limit(0),
            EngineConfig::default().with_stage_timeout(Duration::ZERO),
        ];
        for c in bad_configs {
            let e = c.validate().unwrap_err();
            assert_eq!(e.code(), 104, "{e}");
        }
        assert!(EngineConfig::default()
            .with_gpu_workers_per_device(64)
            .with_vram_limit(1)
            .validate()
            .is_ok());
    }

    #[test]
    fn per_device_counts_parse() {
        assert_eq!(parse_per_device("CUZK_GPU_SECTIONS", " 2 ").unwrap(), 2);
        assert_eq!(parse_per_device("CUZK_GPU_SECTIONS", "64").unwrap(), 64);
        for v in ["0", "65", "-1", "two", "1.5"] {
            let e = parse_per_device("CUZK_GPU_SECTIONS", v).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidConfig { name, .. } if name == "CUZK_GPU_SECTIONS"),
                "{v}: {e:?}"
            );
        }
        let c = EngineConfig::default();
        assert_eq!((c.workers_per_device(), c.sections_per_device()), (2, 1));
    }

    #[test]
    fn setters_set_their_field_and_nothing_else() {
        let c = EngineConfig::default()
            .with_parameter_dir("/p")
            .with_verify_production_params(true)
            .with_backend(Backend::Cpu)
            .with_devices([1, 0])
            .with_gpu_workers_per_device(3)
            .with_vram_limit(16 << 30)
            .with_host_memory_limit(64 << 30)
            .with_allow_cpu_fallback(true)
            .with_circuit_cache(CircuitCache::Off)
            .with_stage_timeout(Duration::from_secs(5))
            .with_tuning(
                Tuning::default()
                    .with_gpu_sections_per_device(2)
                    .with_cpu_spmv_only(true)
                    .with_dense_z_upload(true)
                    .with_pippenger_per_pass(true)
                    .with_msm_accumulation(MsmAccumulation::Xyzz)
                    .with_msm_affine_min_list(0)
                    .with_gpu_start_tier(Tier::Partial)
                    .with_partitions_ahead(1)
                    .with_msm_batch(40),
            );
        assert_eq!(c.parameter_dir.as_deref(), Some(std::path::Path::new("/p")));
        assert!(c.verify_production_params && c.allow_cpu_fallback);
        assert_eq!(c.backend, Backend::Cpu);
        assert_eq!(c.devices, Some(vec![1, 0]));
        assert_eq!((c.workers_per_device(), c.sections_per_device()), (3, 2));
        assert_eq!(
            (c.vram_limit, c.host_memory_limit),
            (Some(16 << 30), Some(64 << 30))
        );
        assert_eq!(c.circuit_cache, CircuitCache::Off);
        assert_eq!(c.stage_timeout(), Duration::from_secs(5));
        let t = &c.tuning;
        assert!(t.cpu_spmv_only && t.dense_z_upload && t.pippenger_per_pass);
        let d = Tuning::default();
        assert!(!d.dense_z_upload && !d.pippenger_per_pass, "packed and gathered by default");
        assert_eq!(t.msm_accumulation, MsmAccumulation::Xyzz);
        assert_eq!(t.msm_affine_min_list, Some(0));
        assert_eq!(t.gpu_start_tier, Some(Tier::Partial));
        assert_eq!(t.partitions_ahead, Some(1));
        assert_eq!((t.msm_batch(), Tuning::default().msm_batch()), (16, 4));
        let o = ProveOptions::default()
            .with_verify(false)
            .with_synthesis(Synthesis::Gadget)
            .with_cancel(crate::CancelToken::new());
        assert!(!o.verify && o.progress.is_none() && o.cancel.is_some());
        assert_eq!(o.synthesis, Synthesis::Gadget);
        assert!(ProveOptions::default().verify);
    }

    #[test]
    fn public_tuning_enums_map_onto_the_gpu_types() {
        for (t, k) in [
            Tier::Resident,
            Tier::FullStaging,
            Tier::Partial,
            Tier::Streaming,
        ]
        .into_iter()
        .zip(TierKind::ALL)
        {
            assert_eq!(TierKind::from(t), k);
        }
        for (m, a) in [
            (MsmAccumulation::Xyzz, Accumulation::Xyzz),
            (MsmAccumulation::BatchAffine, Accumulation::BatchAffine),
        ] {
            assert_eq!(Accumulation::from(m), a);
            assert_eq!(MsmAccumulation::from(a), m);
        }
        assert_eq!(
            Accumulation::from(MsmAccumulation::default()),
            Accumulation::default()
        );
    }

    #[test]
    fn bools_parse_strictly() {
        assert!(!parse_bool("X", "0").unwrap());
        assert!(!parse_bool("X", "off").unwrap());
        assert!(parse_bool("X", "TRUE").unwrap());
        let e = parse_bool("X", "2").unwrap_err();
        assert_eq!(e.code(), 104);
        assert!(e.to_string().contains("X=\"2\""));
    }
}
