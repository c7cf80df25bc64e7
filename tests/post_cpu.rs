//! WindowPoSt and WinningPoSt on the real 2 KiB PoSt fixture, CPU backend: the proofs verify
//! with filecoin-proofs-api's `verify_window_post` / `verify_winning_post` (a flipped byte does
//! not), the compiled path (native witness, the default, or the gadgets') and the reference
//! synthesis give the same bytes for the same r and s, the native witness equals the gadgets'
//! value for value, bad input gets typed errors before any proving, and each kind's parameters
//! are read once while they stay loaded.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use blstrs::Scalar as Fr;
use cuzk::{Backend, CircuitCache, Engine, EngineConfig, ProofKind, ProveOptions, Synthesis};
use cuzk_dev::fixture::run_self_with_env;
use cuzk_dev::post_fixture::{
    default_post_fixture_dir, ensure_post_fixture, number_2kib, PostFixture, RANDOMNESS,
};

const KINDS: [ProofKind; 2] = [ProofKind::WinningPost, ProofKind::WindowPost];

fn fixture() -> &'static PostFixture {
    static F: OnceLock<PostFixture> = OnceLock::new();
    F.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        ensure_post_fixture(&default_post_fixture_dir()).expect("2 KiB PoSt fixture")
    })
}

/// The engine the tests share.
fn engine() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(new_engine).clone()
}

/// A CPU engine over the fixture's parameters, without a circuit cache file.
fn new_engine() -> Arc<Engine> {
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&fixture().param_dir)
            .with_backend(Backend::Cpu)
            .with_circuit_cache(CircuitCache::Off),
    )
    .expect("engine")
}

/// Proves `kind` from `vanilla` (as Curio sends it) with `randomness`.
fn prove(
    kind: ProofKind,
    vanilla: &[Vec<u8>],
    randomness: &[u8],
    options: &ProveOptions,
) -> cuzk::Result<cuzk::ProofOutput> {
    prove_on(&engine(), kind, vanilla, randomness, options)
}

/// [`prove`] on the engine `e`.
fn prove_on(
    e: &Engine,
    kind: ProofKind,
    vanilla: &[Vec<u8>],
    randomness: &[u8],
    options: &ProveOptions,
) -> cuzk::Result<cuzk::ProofOutput> {
    let f = fixture();
    let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
    let n = number_2kib(kind);
    match kind {
        ProofKind::WinningPost => e.prove_winning_post(n, &v, randomness, &f.prover_id, options),
        _ => e.prove_window_post(n, &v, randomness, &f.prover_id, 0, options),
    }
}

fn proof_file(dir: &std::path::Path, kind: ProofKind) -> PathBuf {
    dir.join(format!("{kind}.proof"))
}

/// The proofs of both kinds, checked by filecoin-proofs-api in a child process whose
/// `FIL_PROOFS_PARAMETER_CACHE` is the fixture's parameter directory (read once per process).
#[test]
fn post_proofs_verify_with_filecoin_proofs_and_a_flipped_byte_does_not() {
    const TEST: &str = "post_proofs_verify_with_filecoin_proofs_and_a_flipped_byte_does_not";
    let f = fixture();
    if let Some(dir) = std::env::var_os("CUZK_TEST_POST_PROOFS") {
        // The child: filecoin-proofs-api's verifiers on the parent's proofs.
        let dir = PathBuf::from(dir);
        for kind in KINDS {
            let proof = std::fs::read(proof_file(&dir, kind)).unwrap();
            assert_eq!(proof.len(), 192, "{kind}");
            assert!(
                f.verify_with_filecoin_proofs(kind, &RANDOMNESS, &proof)
                    .unwrap(),
                "{kind}: filecoin-proofs rejects our proof"
            );
            for i in [0, 47, 48, 100, 143, 144, 191] {
                let mut bad = proof.clone();
                bad[i] ^= 0x01;
                let verdict = f.verify_with_filecoin_proofs(kind, &RANDOMNESS, &bad);
                assert!(
                    !matches!(verdict, Ok(true)),
                    "{kind}: byte {i} flipped still verifies"
                );
            }
            // Another randomness: the same proof is not a proof of it.
            let mut other = RANDOMNESS;
            other[0] ^= 1;
            assert!(!matches!(
                f.verify_with_filecoin_proofs(kind, &other, &proof),
                Ok(true)
            ));
        }
        println!("child verified both kinds");
        return;
    }
    let dir = std::env::temp_dir().join(format!("cuzk-post-proofs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for kind in KINDS {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let out = prove(kind, &vanilla, &RANDOMNESS, &ProveOptions::default()).unwrap();
        assert_eq!(out.proof.len(), 192, "{kind}");
        assert!(out.verified);
        assert_eq!(out.partitions.len(), 1);
        assert_eq!(out.partitions[0].backend, "cpu");
        std::fs::write(proof_file(&dir, kind), &out.proof).unwrap();
    }
    let child = run_self_with_env(
        TEST,
        &[
            ("FIL_PROOFS_PARAMETER_CACHE", f.param_dir.as_os_str()),
            ("CUZK_TEST_POST_PROOFS", dir.as_os_str()),
        ],
    )
    .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && out.contains("child verified both kinds"),
        "child: {out}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With the same r and s, the compiled circuit (recorded once, one `sector_<i>` block per
/// sector; native witness or the gadgets') and the reference synthesis of filecoin's circuit
/// give the same proof bytes.
#[test]
fn compiled_and_reference_paths_give_the_same_post_proof() {
    let f = fixture();
    let rs = vec![(Fr::from(12_345u64), Fr::from(67_890u64))];
    for kind in KINDS {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let proofs: Vec<Vec<u8>> = [Synthesis::Compiled, Synthesis::Gadget, Synthesis::Reference]
            .into_iter()
            .map(|s| {
                let o = ProveOptions::default()
                    .with_synthesis(s)
                    .with_randomness(rs.clone());
                prove(kind, &vanilla, &RANDOMNESS, &o).unwrap().proof
            })
            .collect();
        assert_eq!(proofs[0], proofs[1], "{kind}: native and gadget witness");
        assert_eq!(proofs[0], proofs[2], "{kind}: compiled and reference");
    }
}

/// The native witness of both kinds equals the gadgets' value for value (inputs and aux), and
/// its inputs are the public inputs the verifiers check.
#[test]
fn native_post_witness_equals_the_gadget_witness() {
    let f = fixture();
    for kind in KINDS {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let v: Vec<&[u8]> = vanilla.iter().map(Vec::as_slice).collect();
        let req = cuzk::post::PostRequest {
            kind,
            registered_proof: number_2kib(kind),
            vanilla_proofs: &v,
            randomness: &RANDOMNESS,
            prover_id: &f.prover_id,
            partition_index: 0,
        };
        let (layout, native, public) = cuzk::post::witness(&req, true).unwrap();
        let (_, gadget, _) = cuzk::post::witness(&req, false).unwrap();
        assert_eq!(native.input.len(), layout.num_inputs(), "{kind}");
        assert_eq!(native.aux.len(), layout.num_aux(), "{kind}");
        assert_eq!(native.input, gadget.input, "{kind}: inputs");
        assert_eq!(native.input[1..], public[..], "{kind}: public inputs");
        assert_eq!(native.aux.len(), gadget.aux.len(), "{kind}");
        let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
        assert_eq!(first, None, "{kind}: first differing aux value");
        eprintln!(
            "{kind}: native == gadget over {} sectors, {} inputs, {} aux values",
            layout.challenges,
            native.input.len(),
            native.aux.len()
        );
    }
}

#[test]
fn bad_post_input_gets_typed_errors_before_proving() {
    let f = fixture();
    let o = ProveOptions::default();
    for kind in KINDS {
        let vanilla = f.vanilla_proofs(kind, &RANDOMNESS).unwrap();
        let code = |v: &[Vec<u8>], r: &[u8]| prove(kind, v, r, &o).unwrap_err().code();
        // Vanilla proofs of another randomness: their challenges are not this one's.
        let mut other = RANDOMNESS;
        other[3] ^= 0x10;
        assert_eq!(code(&vanilla, &other), 101, "{kind}: other randomness");
        assert_eq!(
            code(&vanilla, &RANDOMNESS[..31]),
            101,
            "{kind}: short randomness"
        );
        assert_eq!(code(&[], &RANDOMNESS), 101, "{kind}: no vanilla proofs");
        let cut = vec![vanilla[0][..vanilla[0].len() / 2].to_vec()];
        assert_eq!(
            code(&cut, &RANDOMNESS),
            100,
            "{kind}: truncated vanilla proof"
        );
        // Two sector proofs in one sector's vanilla proof (bincode: sector id, comm_r, then the
        // sector proofs' u64 count at byte 40): filecoin-proofs would take the second in
        // unchecked; refused before proving.
        let mut twice = vanilla.clone();
        let body = twice[0][48..].to_vec();
        twice[0][40..48].copy_from_slice(&2u64.to_le_bytes());
        twice[0].extend_from_slice(&body);
        assert_eq!(code(&twice, &RANDOMNESS), 101, "{kind}: two sector proofs");
        // comm_r_last (the last 32 bytes, little endian) no longer the paths' root: the vanilla
        // check reads the root from the paths, so only the job's own check stops it before
        // proving.
        let mut root = vanilla.clone();
        let n = root[0].len();
        root[0][n - 32] ^= 0x01;
        let e = prove(kind, &root, &RANDOMNESS, &o).unwrap_err();
        assert_eq!(e.code(), 101, "{kind}: comm_r_last: {e}");
        assert!(e.to_string().contains("comm_r_last"), "{kind}: {e}");
        // A leaf (byte 92: inclusion proof 0's) or a sibling (byte 140) that is no canonical
        // scalar, a path position out of range for arity 8 (byte 364): refused naming the
        // sector and the value before filecoin-proofs' code runs on them (it panics on them;
        // tests/post_vanilla_fields.rs counts the panics).
        let sector = format!("sector {}", f.sector_id);
        for (at, bytes, what) in [
            (
                92,
                [0xff; 32].to_vec(),
                "inclusion proof 0 leaf is not a canonical",
            ),
            (
                140,
                [0xff; 32].to_vec(),
                "path level 0, sibling 0 is not a canonical",
            ),
            (364, 8u64.to_le_bytes().to_vec(), "position 8 out of range"),
        ] {
            let mut bad = vanilla.clone();
            bad[0][at..at + bytes.len()].copy_from_slice(&bytes);
            let e = prove(kind, &bad, &RANDOMNESS, &o).unwrap_err();
            let msg = e.to_string();
            assert_eq!(e.code(), 101, "{kind} {what}: {msg}");
            assert!(msg.contains(what) && msg.contains(&sector), "{kind}: {msg}");
        }
        // Bytes after a whole vanilla proof.
        let mut long = vanilla.clone();
        long[0].extend_from_slice(b"garbage!");
        assert_eq!(code(&long, &RANDOMNESS), 100, "{kind}: trailing bytes");
        // A byte of a Merkle path changed: decodes, does not verify.
        let mut bent = vanilla.clone();
        let n = bent[0].len();
        bent[0][n - 40] ^= 0x01;
        assert!(
            matches!(code(&bent, &RANDOMNESS), 100 | 101),
            "{kind}: damaged vanilla proof"
        );
    }
    // Two WindowPoSt sectors (the fixture's replica under its number and the next one) out of
    // ascending order, or one sector twice: refused, not proved in an order no verifier takes.
    let next = |id| {
        f.vanilla_proof_as(ProofKind::WindowPost, &RANDOMNESS, id)
            .unwrap()
    };
    let (a, b) = (next(f.sector_id), next(f.sector_id + 1));
    let (id, id1) = (f.sector_id, f.sector_id + 1);
    for (v, what, says) in [
        (
            vec![b.clone(), a.clone()],
            "descending",
            format!("vanilla proof 0 is of sector {id1}, the next one of sector {id}"),
        ),
        (
            vec![a.clone(), a.clone()],
            "twice",
            format!("vanilla proofs 0 and 1 are both of sector {id}:"),
        ),
    ] {
        let e = prove(ProofKind::WindowPost, &v, &RANDOMNESS, &o).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.code(), 101, "{what}: {msg}");
        assert!(msg.contains(&says), "{what}: {msg}");
        assert!(msg.contains("ascending order"), "{what}: {msg}");
    }
    // WinningPoSt's challenged sector's vanilla proof sent twice: one line that says so once
    // (the sector named once), not an ordering complaint about the sector and itself.
    let winning = f
        .vanilla_proofs(ProofKind::WinningPost, &RANDOMNESS)
        .unwrap();
    let e = prove(
        ProofKind::WinningPost,
        &[winning[0].clone(), winning[0].clone()],
        &RANDOMNESS,
        &o,
    )
    .unwrap_err();
    let msg = e.to_string();
    assert_eq!(e.code(), 101, "{msg}");
    assert_eq!(
        msg,
        format!(
            "invalid input: winning-post: 2 vanilla proofs (vanilla proofs 0 and 1 are both of \
             sector {id}), expected 1: the challenged sector's"
        )
    );
    assert_eq!(msg.lines().count(), 1, "{msg}");
    // A WindowPoSt partition index past the most partitions a deadline holds (3000), up to
    // usize::MAX: invalid input before any proving, no panic; the last index proves.
    let partition = f
        .vanilla_proofs(ProofKind::WindowPost, &RANDOMNESS)
        .unwrap();
    let partition: Vec<&[u8]> = partition.iter().map(Vec::as_slice).collect();
    for index in [3000, 1 << 32, usize::MAX] {
        let e = engine()
            .prove_window_post(10, &partition, &RANDOMNESS, &f.prover_id, index, &o)
            .unwrap_err();
        assert_eq!(e.code(), 101, "{index}: {e}");
        assert_eq!(
            e.to_string(),
            format!(
                "invalid input: window-post: partition_index {index} is out of range: a \
                 deadline holds at most 3000 partitions (0 to 2999)"
            )
        );
    }
    let last = engine()
        .prove_window_post(10, &partition, &RANDOMNESS, &f.prover_id, 2999, &o)
        .unwrap();
    assert_eq!(last.proof.len(), 192);
    // One kind's vanilla proof sent as the other's.
    let window = f
        .vanilla_proofs(ProofKind::WindowPost, &RANDOMNESS)
        .unwrap();
    let e = prove(ProofKind::WinningPost, &window, &RANDOMNESS, &o).unwrap_err();
    assert_eq!(e.code(), 101, "{e}");
    // Proof types of the other kind or unknown.
    let v: Vec<&[u8]> = window.iter().map(Vec::as_slice).collect();
    for (n, code) in [(0, 101), (99, 101), (5, 103)] {
        let e = engine()
            .prove_window_post(n, &v, &RANDOMNESS, &f.prover_id, 0, &o)
            .unwrap_err();
        assert_eq!(e.code(), code, "{n}: {e}");
    }
    let e = engine()
        .prove_window_post(10, &v, &RANDOMNESS, &f.prover_id[..31], 0, &o)
        .unwrap_err();
    assert_eq!(e.code(), 102, "{e}");
}

/// Proofs of both kinds on one engine read each kind's parameter file once while it stays
/// loaded (WinningPoSt's pinned); an idle set evicted by name is read again by its next proof.
#[test]
fn each_parameter_set_is_read_once_while_it_stays_loaded() {
    use cuzk::srs::ParamSet;
    use cuzk::srs_cache::Eviction;
    use filecoin_proofs_api::RegisteredPoStProof;
    let f = fixture();
    let e = new_engine();
    let vanilla = KINDS.map(|kind| f.vanilla_proofs(kind, &RANDOMNESS).unwrap());
    let o = ProveOptions::default();
    for _ in 0..2 {
        for (kind, v) in KINDS.iter().zip(&vanilla) {
            prove_on(&e, *kind, v, &RANDOMNESS, &o).unwrap();
        }
    }
    assert_eq!(e.param_loads(), 2, "one read per set for four proofs");
    let sets = e.loaded_params();
    assert_eq!(sets.len(), 2, "{sets:?}");
    assert!(sets.iter().all(|s| s.loaded && s.calls == 0), "{sets:?}");
    let winning = ParamSet::Post(RegisteredPoStProof::StackedDrgWinning2KiBV1);
    let pinned: Vec<_> = sets.iter().filter(|s| s.pinned).map(|s| &s.path).collect();
    assert_eq!(pinned, [&winning.params_path(&f.param_dir).unwrap()]);
    let window = ParamSet::Post(RegisteredPoStProof::StackedDrgWindow2KiBV1_2);
    let Eviction::Evicted { bytes } = e.evict_params(window).unwrap() else {
        panic!("the idle WindowPoSt set was not evicted");
    };
    // The points and the compiled circuit beside them.
    assert!(bytes > sets.iter().find(|s| !s.pinned).unwrap().bytes);
    prove_on(&e, ProofKind::WindowPost, &vanilla[1], &RANDOMNESS, &o).unwrap();
    prove_on(&e, ProofKind::WinningPost, &vanilla[0], &RANDOMNESS, &o).unwrap();
    assert_eq!(e.param_loads(), 3);
}
