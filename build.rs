//! Build script: compiles the CUDA kernels in `cuda/` into one fatbin when the `cuda` feature is
//! on; does nothing CUDA-related otherwise.
//!
//! With `--features cuda`:
//! 1. finds `nvcc`: `$NVCC`, then `$CUDA_PATH/bin/nvcc`, `$CUDA_HOME/bin/nvcc`, then `PATH`;
//! 2. checks its version (CUDA >= 11.8, the first release that targets sm_90);
//! 3. asks `nvcc --list-gpu-code` which real architectures it can build, keeps those from sm_75
//!    up (or takes the list in `$CUZK_CUDA_ARCHS`, e.g. `sm_90` or `sm_80,sm_90`);
//! 4. compiles one translation unit that includes every `cuda/*.cu` (sorted by name; the test
//!    kernels of `cuda/test_kernels.cu` only with the feature `test-hooks`) into
//!    `$OUT_DIR/cuzk.fatbin`: SASS for each architecture plus PTX for the newest one, so newer
//!    GPUs can JIT it;
//! 5. exports `CUZK_FATBIN_SASS` (e.g. `75,80,90`) and `CUZK_FATBIN_PTX` (e.g. `90`) to the
//!    crate, which `src/gpu/driver/device.rs` compares with each device's compute capability.
//!
//! Extra nvcc flags can be passed in `$CUZK_NVCC_FLAGS` (whitespace separated, e.g.
//! `-Xptxas -v` for the register report). Linking libcuda is done by `cuda-driver-sys`
//! (`$CUDA_LIBRARY_PATH`); on a machine without a GPU driver the link-only stub of
//! `scripts/install-cuda.sh` satisfies it.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const ENV_VARS: &[&str] = &[
    "NVCC",
    "CUDA_PATH",
    "CUDA_HOME",
    "PATH",
    "CUZK_CUDA_ARCHS",
    "CUZK_NVCC_FLAGS",
];

/// Kernels for cuzk's own tests (`tests/gpu_field.rs`, the Fr multiplication probe of
/// `benches/ntt.rs`): in the fatbin only with the feature `test-hooks`.
const TEST_ONLY_SOURCES: &[&str] = &["test_kernels.cu"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_CUDA");
    println!("cargo:rerun-if-env-changed=CARGO_FEATURE_TEST_HOOKS");
    if env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    println!("cargo:rerun-if-changed=cuda");
    for v in ENV_VARS {
        println!("cargo:rerun-if-env-changed={v}");
    }
    if let Err(msg) = build_cuda() {
        eprintln!("\nerror: cuzk feature `cuda`: {msg}\n");
        panic!("cuzk feature `cuda`: {msg}");
    }
}

fn build_cuda() -> Result<(), String> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    let out = PathBuf::from(env::var("OUT_DIR").map_err(|e| e.to_string())?);
    let cuda_dir = manifest.join("cuda");

    let nvcc = find_nvcc().ok_or_else(|| {
        "nvcc not found (looked at $NVCC, $CUDA_PATH/bin, $CUDA_HOME/bin and PATH). \
         Install the CUDA toolkit (>= 11.8) or run `source <(bash scripts/install-cuda.sh)`, \
         or build without `--features cuda`."
            .to_string()
    })?;
    let (major, minor) = nvcc_version(&nvcc)?;
    if (major, minor) < (11, 8) {
        return Err(format!(
            "{} is CUDA {major}.{minor}; cuzk needs CUDA >= 11.8 (install a newer toolkit or run scripts/install-cuda.sh)",
            nvcc.display()
        ));
    }

    let supported = supported_archs(&nvcc)?;
    let archs: Vec<u32> = match env::var("CUZK_CUDA_ARCHS") {
        Ok(s) if !s.trim().is_empty() => {
            let mut v = Vec::new();
            for tok in s
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
            {
                let num = tok.trim_start_matches("sm_").trim_start_matches("compute_");
                let a: u32 = num.parse().map_err(|_| {
                    format!("CUZK_CUDA_ARCHS={s:?}: {tok:?} is not of the form sm_NN (e.g. sm_90)")
                })?;
                if !supported.contains(&a) {
                    return Err(format!(
                        "CUZK_CUDA_ARCHS={s:?}: sm_{a} is not supported by {} (it supports {:?})",
                        nvcc.display(),
                        supported
                    ));
                }
                v.push(a);
            }
            v
        }
        _ => supported.iter().copied().filter(|&a| a >= 75).collect(),
    };
    let mut archs = archs;
    archs.sort_unstable();
    archs.dedup();
    let newest = *archs
        .last()
        .ok_or("no CUDA architecture >= sm_75 to build for")?;

    // One translation unit including every cuda/*.cu, so that everything lands in one module;
    // the test kernels only for the test builds (feature `test-hooks`).
    let with_test_kernels = env::var_os("CARGO_FEATURE_TEST_HOOKS").is_some();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&cuda_dir)
        .map_err(|e| format!("cannot read {}: {e}", cuda_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cu"))
        .filter(|p| {
            with_test_kernels
                || !p
                    .file_name()
                    .is_some_and(|n| TEST_ONLY_SOURCES.iter().any(|t| n == *t))
        })
        .collect();
    sources.sort();
    let mut unity =
        String::from("// generated by build.rs: every cuda/*.cu in one translation unit\n");
    for s in &sources {
        unity.push_str(&format!("#include \"{}\"\n", s.display()));
    }
    let unity_path = out.join("cuzk_all.cu");
    std::fs::write(&unity_path, unity).map_err(|e| e.to_string())?;

    let fatbin = out.join("cuzk.fatbin");
    let mut cmd = Command::new(&nvcc);
    cmd.arg("-fatbin")
        .arg("-O3")
        .arg("-std=c++17")
        .arg("-I")
        .arg(&cuda_dir)
        .arg("-o")
        .arg(&fatbin);
    if (major, minor) >= (11, 5) {
        cmd.arg("--threads").arg("0");
    }
    for a in &archs {
        cmd.arg(format!("-gencode=arch=compute_{a},code=sm_{a}"));
    }
    cmd.arg(format!(
        "-gencode=arch=compute_{newest},code=compute_{newest}"
    ));
    if let Ok(extra) = env::var("CUZK_NVCC_FLAGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg(&unity_path);
    let status = cmd
        .status()
        .map_err(|e| format!("failed to run {}: {e}", nvcc.display()))?;
    if !status.success() {
        return Err(format!(
            "nvcc failed ({status}) compiling cuda/*.cu: {cmd:?}"
        ));
    }

    let sass: Vec<String> = archs.iter().map(|a| a.to_string()).collect();
    println!("cargo:rustc-env=CUZK_FATBIN_SASS={}", sass.join(","));
    println!("cargo:rustc-env=CUZK_FATBIN_PTX={newest}");
    println!("cargo:rustc-env=CUZK_NVCC_VERSION={major}.{minor}");
    Ok(())
}

fn find_nvcc() -> Option<PathBuf> {
    let exe = if cfg!(windows) { "nvcc.exe" } else { "nvcc" };
    if let Some(p) = env::var_os("NVCC") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Some(p);
        }
    }
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(root) = env::var_os(var) {
            let p = Path::new(&root).join("bin").join(exe);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let path = env::var_os("PATH")?;
    env::split_paths(&path)
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
}

fn nvcc_version(nvcc: &Path) -> Result<(u32, u32), String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .map_err(|e| format!("failed to run {} --version: {e}", nvcc.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "... Cuda compilation tools, release 13.0, V13.0.88"
    let rel = text
        .split("release ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .ok_or_else(|| format!("cannot parse `{} --version`: {text}", nvcc.display()))?;
    let mut it = rel.trim().split('.');
    let major = it.next().and_then(|s| s.parse().ok());
    let minor = it.next().and_then(|s| s.parse().ok());
    match (major, minor) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(format!("cannot parse nvcc release {rel:?}")),
    }
}

/// Real architectures nvcc can generate SASS for (`sm_NN` lines of `--list-gpu-code`;
/// architecture-specific `sm_NNa`/`sm_NNf` variants are skipped).
fn supported_archs(nvcc: &Path) -> Result<Vec<u32>, String> {
    let out = Command::new(nvcc)
        .arg("--list-gpu-code")
        .output()
        .map_err(|e| format!("failed to run {} --list-gpu-code: {e}", nvcc.display()))?;
    if !out.status.success() {
        return Err(format!("`{} --list-gpu-code` failed", nvcc.display()));
    }
    let mut v: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|t| t.strip_prefix("sm_"))
        .filter_map(|t| t.parse().ok())
        .collect();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() {
        return Err(format!(
            "`{} --list-gpu-code` listed no sm_NN architecture",
            nvcc.display()
        ));
    }
    Ok(v)
}
