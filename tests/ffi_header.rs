//! `include/cuzk.h` must be exactly what the pinned cbindgen (=0.29.2) generates from
//! `src/ffi.rs` with `cbindgen.toml`, so the committed header never drifts from the code.
//!
//! After changing the C ABI, regenerate the header with
//!
//! ```text
//! CUZK_BLESS=1 cargo test --release --test ffi_header
//! ```

use std::path::Path;

fn generate() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cannot read cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi.rs"))
        .generate()
        .expect("cbindgen failed on src/ffi.rs");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen wrote non-UTF-8")
}

fn bless_requested() -> bool {
    match std::env::var("CUZK_BLESS") {
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => true,
            "" | "0" | "false" | "no" | "off" => false,
            other => panic!("CUZK_BLESS={other:?}: expected 1/0, true/false, yes/no or on/off"),
        },
        Err(_) => false,
    }
}

#[test]
fn header_matches_src_ffi_rs() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/cuzk.h");
    let fresh = generate();
    if bless_requested() {
        std::fs::write(&path, &fresh).expect("cannot write include/cuzk.h");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first_diff = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        panic!(
            "{} is out of date with src/ffi.rs / cbindgen.toml (first difference at line {}:\n  \
             committed: {:?}\n  generated: {:?}).\nRegenerate it with\n  \
             CUZK_BLESS=1 cargo test --release --test ffi_header\nand commit the result.",
            path.display(),
            first_diff + 1,
            committed.lines().nth(first_diff).unwrap_or("<end of file>"),
            fresh.lines().nth(first_diff).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn header_declares_the_api() {
    let h = generate();
    for name in [
        "cuzk_options_init",
        "cuzk_engine_new",
        "cuzk_engine_free",
        "cuzk_prove_porep_c2",
        "cuzk_result_free",
        "cuzk_prover_id_from_actor_id",
        "cuzk_last_error_message",
        "CUZK_STATUS_OK = 0",
        "CUZK_STATUS_MALFORMED_INPUT = 100",
        "CUZK_STATUS_PARAMETERS_NOT_FOUND = 200",
        "CUZK_STATUS_PANIC = 901",
        "typedef struct cuzk_engine_t cuzk_engine_t;",
    ] {
        assert!(h.contains(name), "generated header lacks {name:?}");
    }
    assert!(
        !h.contains("cuzk_test_inject_panic"),
        "the test hook must stay out of the header"
    );
}
