//! Engine configuration and per-call options, from code or from environment variables.
//!
//! Environment variables (all optional; a value that cannot be parsed is an
//! [`Error::InvalidConfig`], never silently ignored):
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `FIL_PROOFS_PARAMETER_CACHE` | directory of the `.params` / `.vk` files (empty: unset) | `/var/tmp/filecoin-proof-parameters` |
//! | `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` | `1`/`true`: check each parameter file once against filecoin-proofs' official digests | `0` |
//! | `CUZK_BACKEND` | `auto`, `cpu` or `gpu` | `auto` (GPU when built with `cuda` and a device exists, else CPU) |
//! | `CUZK_DEVICES` | comma-separated CUDA ordinals (after `CUDA_VISIBLE_DEVICES`) | all |
//! | `CUZK_GPU_WORKERS_PER_DEVICE` | GPU workers per device, ≥ 1 | 2 |
//! | `CUZK_GPU_SECTIONS` | partitions whose kernels may run at once on a device (each worker's GPU section), 1 ..= 64 | 1 |
//! | `CUZK_VRAM_LIMIT` | cap on device memory cuzk may use per device, e.g. `16GiB` | none |
//! | `CUZK_HOST_MEM_LIMIT` | host-memory budget for concurrent synthesis, e.g. `64GiB` | `MemAvailable` of /proc/meminfo less 1/16 (at least 4 GiB) |
//! | `CUZK_STAGE_TIMEOUT` | longest a GPU stage (a kernel, a copy) may take before it is an error and the device is retired, e.g. `600s`, `10m`, `1.5h`, `500ms` | `600s` |
//! | `CUZK_ALLOW_CPU` | `1`/`true` lets a GPU job fall back to the CPU, explicitly reported | `0` |
//! | `CUZK_VERIFY` | `0`/`false` turns self-verification off | `1` |
//! | `CUZK_SYNTHESIS` | `compiled` (recorded R1CS, native witness, SpMV), `gadget` (the same with the gadgets' witness: the cross-check) or `reference` (bellpepper synthesis) | `compiled` |
//! | `CUZK_MSM_ACCUMULATION` | `affine` (batch-affine bucket accumulation on long lists, G1 and G2) or `xyzz` (XYZZ mixed additions everywhere) | `affine` |
//! | `CUZK_MSM_AFFINE_MIN_LIST` | shortest bucket list (entries) accumulated batch-affine, both groups; `0`: every MSM | G1 `67108864` (2^26), G2 `33554432` (2^25) |
//! | `CUZK_GPU_SPMV` | `0`: the GPU backend computes a, b, c on the CPU even when the matrices fit on the device | `1` |
//! | `CUZK_PARTITIONS_AHEAD` | witnesses made ahead of the partitions the GPU runs: at most devices × workers + this many partitions are in flight engine-wide ([`crate::pipeline`]) | devices × workers per device |
//! | `CUZK_CIRCUIT_CACHE` | directory of compiled-circuit cache files; `off`: keep them in memory only | `$XDG_CACHE_HOME/cuzk/circuits`, else `~/.cache/cuzk/circuits` |

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::progress::ProgressFn;

/// Default parameter directory of filecoin-proofs.
pub const DEFAULT_PARAMETER_CACHE: &str = "/var/tmp/filecoin-proof-parameters";

/// Default of [`EngineConfig::stage_timeout`] (600 s): far above any GPU stage of a 2^27
/// partition (seconds), far below a process that hangs for hours.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(600);

/// Which prover backend runs the NTT and MSMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
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
#[derive(Clone, Debug, Default)]
pub struct EngineConfig {
    /// Directory holding the Groth16 `.params` and `.vk` files; `None`: the
    /// `FIL_PROOFS_PARAMETER_CACHE` variable (when set and not empty), else
    /// [`DEFAULT_PARAMETER_CACHE`].
    pub parameter_dir: Option<PathBuf>,
    /// Check every `.params` and `.vk` file against filecoin-proofs' official digest list
    /// before first use (filecoin-proofs' `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS`, same meaning):
    /// a file that is not listed or whose digest differs is [`Error::ParametersInvalid`]. Each
    /// file is hashed once per process (~45 s for the 44 GiB file of 32 GiB sectors). Default
    /// `false`.
    pub verify_production_params: bool,
    /// Backend choice.
    pub backend: Backend,
    /// CUDA device ordinals to use (`None`: all visible devices).
    pub devices: Option<Vec<usize>>,
    /// GPU workers per device (default 2 when 0).
    pub gpu_workers_per_device: usize,
    /// Workers of a device that may be inside their GPU section (SpMV, NTT, MSM kernels) at
    /// once (default 1 when 0; more than the workers per device acts as that many). With 1, a
    /// second worker overlaps only its uploads and host work with the first one's kernels; with
    /// more, kernels of several partitions share the device (each partition's memory is still
    /// its own plan). A 2^27 partition's kernels fill an H200, so 2 gains nothing there; small
    /// partitions leave gaps that a second section fills (BENCHMARKS.md).
    pub gpu_sections_per_device: usize,
    /// Cap, in bytes, on the device memory cuzk may use on each device (`None`: the card's).
    pub vram_limit: Option<u64>,
    /// Host-memory budget in bytes for partitions synthesized at once (`None`: the
    /// machine's `MemAvailable` less a margin, `budget::host_margin`).
    pub host_memory_limit: Option<u64>,
    /// Let GPU jobs run on the CPU when no device can take them (reported, never silent).
    pub allow_cpu_fallback: bool,
    /// Where compiled circuits are cached ([`crate::circuit::cache`]).
    pub circuit_cache: CircuitCache,
    /// GPU backend, compiled path: compute a, b, c on the CPU even when the matrices fit on the
    /// device (`CUZK_GPU_SPMV=0`; default `false`: on the device when they fit).
    pub cpu_spmv_only: bool,
    /// How MSM buckets are accumulated on the GPU, G1 and G2 (`CUZK_MSM_ACCUMULATION`:
    /// `affine`, the default, or `xyzz`); see [`crate::gpu::memory::layout::Accumulation`].
    pub msm_accumulation: crate::gpu::memory::layout::Accumulation,
    /// Shortest bucket list (entries) accumulated batch-affine, both groups
    /// (`CUZK_MSM_AFFINE_MIN_LIST`; `None`: [`crate::gpu::memory::layout::AFFINE_MIN_LIST`] for G1,
    /// [`crate::gpu::memory::layout::AFFINE_MIN_LIST_G2`] for G2). 0 runs it on every MSM (the GPU ==
    /// CPU checks of small partitions use this).
    pub msm_affine_min_list: Option<u64>,
    /// Longest one GPU stage (H step, one MSM, an upload) may wait for the device before it
    /// fails with a timeout fault and the device is retired (`None`: [`DEFAULT_STAGE_TIMEOUT`]).
    pub stage_timeout: Option<Duration>,
    /// The memory tier each partition tries first, on every device it moves to (`None`:
    /// `Resident`; lower tiers follow as memory requires, higher ones are never tried, so a
    /// partition can fail here that `Resident` would have proved). For tests of the lower
    /// tiers: on small shapes a [`Self::vram_limit`] alone cannot force `Partial`, whose MSM
    /// pass needs more memory than `Resident` does. Not read from the environment.
    pub gpu_start_tier: Option<crate::gpu::memory::alloc::TierKind>,
    /// Witnesses made ahead of the partitions the backend is running
    /// ([`crate::pipeline`]): at most `slots + ahead` partitions are in flight engine-wide,
    /// where `slots` is the partitions the GPU backend runs at once (devices × workers per
    /// device). `None`: `slots` (a witness ready for every worker). Ignored on the CPU backend
    /// (the host budget alone decides there).
    pub partitions_ahead: Option<usize>,
}

/// Where compiled circuits ([`crate::circuit`]) are kept between processes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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

/// How a partition's witness and a, b, c are computed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synthesis {
    /// The compiled circuit ([`crate::circuit`]): the native witness
    /// ([`crate::circuit::native`]: SHA-256 and Poseidon computed directly, written in the
    /// gadgets' allocation order) one challenge per task in parallel, then a, b, c by SpMV,
    /// then the R1CS check.
    #[default]
    Compiled,
    /// The compiled circuit with the gadgets' witness (bellpepper's SHA-256, neptune's
    /// Poseidon run into a witness-only constraint system, one challenge per task): the
    /// cross-check of the native witness, ~10x its CPU time.
    Gadget,
    /// bellpepper synthesis of the whole partition on one thread
    /// ([`crate::synth::Assignment::synthesize`]): the reference the compiled path is tested
    /// against.
    Reference,
}

impl Synthesis {
    /// Parses `compiled` / `gadget` / `reference`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming `name`.
    pub fn parse(name: &str, v: &str) -> Result<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "compiled" | "native" => Ok(Synthesis::Compiled),
            "gadget" => Ok(Synthesis::Gadget),
            "reference" | "bellpepper" => Ok(Synthesis::Reference),
            _ => Err(bad(name, v, "expected compiled, gadget or reference")),
        }
    }
}

impl EngineConfig {
    /// Reads the configuration from the environment variables in the module table.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the variable when a value cannot be parsed.
    pub fn from_env() -> Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mut c = EngineConfig {
            parameter_dir: var("FIL_PROOFS_PARAMETER_CACHE").map(PathBuf::from),
            ..Default::default()
        };
        if let Some(v) = var("CUZK_BACKEND") {
            c.backend = match v.trim().to_ascii_lowercase().as_str() {
                "auto" => Backend::Auto,
                "cpu" => Backend::Cpu,
                "gpu" | "cuda" => Backend::Gpu,
                _ => return Err(bad("CUZK_BACKEND", &v, "expected auto, cpu or gpu")),
            };
        }
        if let Some(v) = var("CUZK_DEVICES") {
            let list: std::result::Result<Vec<usize>, _> =
                v.split(',').map(|s| s.trim().parse::<usize>()).collect();
            c.devices = Some(list.map_err(|_| bad("CUZK_DEVICES", &v, "expected e.g. 0,1"))?);
        }
        if let Some(v) = var("CUZK_GPU_WORKERS_PER_DEVICE") {
            c.gpu_workers_per_device = parse_per_device("CUZK_GPU_WORKERS_PER_DEVICE", &v)?;
        }
        if let Some(v) = var("CUZK_GPU_SECTIONS") {
            c.gpu_sections_per_device = parse_per_device("CUZK_GPU_SECTIONS", &v)?;
        }
        if let Some(v) = var("CUZK_VRAM_LIMIT") {
            c.vram_limit = Some(parse_vram_limit(&v)?);
        }
        if let Some(v) = var("CUZK_HOST_MEM_LIMIT") {
            c.host_memory_limit =
                Some(parse_bytes(&v).map_err(|r| bad("CUZK_HOST_MEM_LIMIT", &v, &r))?);
        }
        if let Some(v) = var("CUZK_STAGE_TIMEOUT") {
            c.stage_timeout =
                Some(parse_duration(&v).map_err(|r| bad("CUZK_STAGE_TIMEOUT", &v, &r))?);
        }
        if let Some(v) = var("CUZK_ALLOW_CPU") {
            c.allow_cpu_fallback = parse_bool("CUZK_ALLOW_CPU", &v)?;
        }
        if let Some(v) = var("CUZK_GPU_SPMV") {
            c.cpu_spmv_only = !parse_bool("CUZK_GPU_SPMV", &v)?;
        }
        if let Some(v) = var("CUZK_MSM_ACCUMULATION") {
            c.msm_accumulation = crate::gpu::memory::layout::Accumulation::parse(&v)
                .ok_or_else(|| bad("CUZK_MSM_ACCUMULATION", &v, "expected affine or xyzz"))?;
        }
        if let Some(v) = var("CUZK_MSM_AFFINE_MIN_LIST") {
            c.msm_affine_min_list = Some(v.trim().parse::<u64>().map_err(|_| {
                bad(
                    "CUZK_MSM_AFFINE_MIN_LIST",
                    &v,
                    "expected a number of list entries",
                )
            })?);
        }
        if let Some(v) = var("CUZK_PARTITIONS_AHEAD") {
            c.partitions_ahead = Some(v.trim().parse::<usize>().map_err(|_| {
                bad(
                    "CUZK_PARTITIONS_AHEAD",
                    &v,
                    "expected a number of partitions",
                )
            })?);
        }
        if let Some(v) = var("CUZK_CIRCUIT_CACHE") {
            c.circuit_cache = match v.trim() {
                "off" | "none" => CircuitCache::Off,
                d => CircuitCache::Dir(PathBuf::from(d)),
            };
        }
        c.verify_production_params = verify_production_params_from_env()?;
        Ok(c)
    }

    /// The parameter directory this configuration resolves to: [`EngineConfig::parameter_dir`],
    /// else `FIL_PROOFS_PARAMETER_CACHE` when set and not blank (an empty or blank value means
    /// unset, never the working directory), else [`DEFAULT_PARAMETER_CACHE`].
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

    /// The per-stage GPU timeout, with the default applied ([`DEFAULT_STAGE_TIMEOUT`]).
    pub fn stage_timeout(&self) -> Duration {
        self.stage_timeout.unwrap_or(DEFAULT_STAGE_TIMEOUT)
    }

    /// Workers per device, with the default applied.
    pub fn workers_per_device(&self) -> usize {
        if self.gpu_workers_per_device == 0 {
            2
        } else {
            self.gpu_workers_per_device
        }
    }

    /// [`EngineConfig::gpu_sections_per_device`] with its default applied (1 when 0).
    pub fn sections_per_device(&self) -> usize {
        self.gpu_sections_per_device.max(1)
    }
}

/// Per-call options of [`crate::Engine::prove_porep_c2`].
#[derive(Clone)]
pub struct ProveOptions {
    /// Verify every partition's proof before returning (default `true`). A proof that fails is
    /// [`Error::VerificationFailed`], never a result.
    pub verify: bool,
    /// Called for every finished stage of every partition.
    pub progress: Option<ProgressFn>,
    /// Fixed Groth16 blinding factors `(r, s)` per partition, for known-answer tests only.
    /// `None` (the default) draws them from the OS random generator.
    pub randomness: Option<Vec<(blstrs::Scalar, blstrs::Scalar)>>,
    /// Compiled with the native witness (default), compiled with the gadget witness, or
    /// reference synthesis.
    pub synthesis: Synthesis,
    /// Stops the call at its next checkpoint once set, with [`Error::Cancelled`] (see
    /// [`crate::cancel`]). `None` (the default): the call runs to its end.
    pub cancel: Option<crate::CancelToken>,
}

impl Default for ProveOptions {
    fn default() -> Self {
        ProveOptions {
            verify: true,
            progress: None,
            randomness: None,
            synthesis: Synthesis::default(),
            cancel: None,
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
        if let Ok(v) = std::env::var("CUZK_VERIFY") {
            if !v.trim().is_empty() {
                o.verify = parse_bool("CUZK_VERIFY", &v)?;
            }
        }
        if let Ok(v) = std::env::var("CUZK_SYNTHESIS") {
            if !v.trim().is_empty() {
                o.synthesis = Synthesis::parse("CUZK_SYNTHESIS", &v)?;
            }
        }
        Ok(o)
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
    fn vram_limit_must_be_a_size_above_zero() {
        assert_eq!(parse_vram_limit("16GiB").unwrap(), 16 << 30);
        for bad_value in ["0", "0GiB", "abc"] {
            let e = parse_vram_limit(bad_value).unwrap_err();
            assert_eq!(e.code(), 104, "{bad_value}");
            assert!(e.to_string().contains("CUZK_VRAM_LIMIT"), "{e}");
        }
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
    fn bools_parse_strictly() {
        assert!(!parse_bool("X", "0").unwrap());
        assert!(!parse_bool("X", "off").unwrap());
        assert!(parse_bool("X", "TRUE").unwrap());
        let e = parse_bool("X", "2").unwrap_err();
        assert_eq!(e.code(), 104);
        assert!(e.to_string().contains("X=\"2\""));
    }
}
