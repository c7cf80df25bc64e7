//! The C ABI from C: `tests/c/prove.c` is compiled against `include/cuzk.h`, linked with the
//! static library, and run on the 2 KiB fixture (CPU backend).
//!
//! ```text
//! cargo test --release --test ffi_c
//! ```
//!
//! Where the static library is: `cargo test` builds the library with every crate type of
//! Cargo.toml (`rlib`, `staticlib`, `cdylib`) into the directory of the test executables
//! (`target/release/deps/libcuzk.a`, next to the `libcuzk.rlib` this test links), and
//! `cargo build --release` also copies it to `target/release/libcuzk.a`. The test takes the one
//! next to its own executable, so it always links the code it was built with;
//! `CUZK_STATICLIB=/path/to/libcuzk.a` overrides that. The C compiler is `$CC`, else `cc`.
//!
//! The fixture comes from `cuzk_dev::fixture::ensure_2kib_fixture(&default_fixture_dir())`
//! (`$CUZK_FIXTURE_DIR`, else `~/.cache/cuzk/fixture-2kib-v1`; about 15 minutes to generate
//! the first time).

use std::path::{Path, PathBuf};
use std::process::Command;

use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture};

/// System libraries Rust's standard library needs in a static link
/// (`cargo rustc --release --lib --crate-type staticlib -- --print native-static-libs`).
const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The static library built together with the `libcuzk.rlib` this test links.
fn staticlib() -> PathBuf {
    if let Some(p) = std::env::var_os("CUZK_STATICLIB").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "CUZK_STATICLIB={} is not a file", p.display());
        return p;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("test executable has a directory");
    let candidates = [
        deps.join("libcuzk.a"),
        deps.parent().unwrap_or(deps).join("libcuzk.a"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "no libcuzk.a at {:?}: is `staticlib` still in [lib] crate-type of Cargo.toml? \
             (or set CUZK_STATICLIB)",
                candidates
            )
        })
}

fn c_compiler() -> String {
    std::env::var("CC")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into())
}

fn run_checked(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}): {cmd:?}\n{text}",
        out.status
    );
    text
}

fn work_dir() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ffi_c");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn header_compiles_as_strict_c_and_cpp() {
    let dir = work_dir();
    let src = dir.join("header_only.c");
    std::fs::write(
        &src,
        "#include \"cuzk.h\"\n#include \"cuzk.h\"\n\
         int main(void) { cuzk_options_t o; cuzk_options_init(&o, sizeof o); return o.verify ? 0 : 1; }\n",
    )
    .unwrap();
    let include = root().join("include");
    for std in ["-std=c99", "-std=c11"] {
        run_checked(
            Command::new(c_compiler())
                .args([
                    std,
                    "-Wall",
                    "-Wextra",
                    "-Werror",
                    "-pedantic",
                    "-fsyntax-only",
                    "-I",
                ])
                .arg(&include)
                .arg(&src),
            &format!("compiling the header as C ({std})"),
        );
    }
    let cxx = std::env::var("CXX")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or("c++".into());
    if Command::new(&cxx).arg("--version").output().is_err() {
        // rustc needs a C compiler to link, so `cc` is always there; a C++ one may not be.
        eprintln!("no C++ compiler {cxx:?}: the C++ check of the header is skipped");
        return;
    }
    run_checked(
        Command::new(&cxx)
            .args([
                "-x",
                "c++",
                "-std=c++17",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(&include)
            .arg(&src),
        "compiling the header as C++",
    );
}

#[test]
fn c_program_links_the_static_library_proves_and_checks_errors() {
    let _ = env_logger::builder().is_test(true).try_init();
    let fixture = ensure_2kib_fixture(&default_fixture_dir()).expect("2 KiB fixture");

    let dir = work_dir();
    let exe = dir.join("prove");
    let lib = staticlib();
    eprintln!("linking {}", lib.display());
    run_checked(
        Command::new(c_compiler())
            .args([
                "-std=c11",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-pedantic",
                "-O1",
                "-I",
            ])
            .arg(root().join("include"))
            .arg(root().join("tests/c/prove.c"))
            .arg(&lib)
            .args(NATIVE_LIBS)
            .arg("-o")
            .arg(&exe),
        "compiling tests/c/prove.c",
    );

    let proof_path = dir.join("proof.bin");
    let _ = std::fs::remove_file(&proof_path);
    let out = Command::new(&exe)
        .arg(&fixture.param_dir)
        .arg(&fixture.c1_json)
        .arg(fixture.sector_id.to_string())
        .arg(fixture.actor_id.to_string())
        .arg(hex(&fixture.prover_id))
        .arg(&proof_path)
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "--- prove.c stdout\n{stdout}--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the C program failed ({}): see its output above",
        out.status
    );
    assert!(stdout.contains("all checks passed"));

    // The proof the C caller got verifies with filecoin-proofs' own verifier.
    let proof = std::fs::read(&proof_path).expect("the C program wrote the proof");
    assert_eq!(proof.len(), 192);
    assert!(
        fixture.verify(&proof).expect("verify_seal ran"),
        "the proof does not verify"
    );
}
