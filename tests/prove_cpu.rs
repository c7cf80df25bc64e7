//! The main job on the real 2 KiB fixture, CPU backend: our proof verifies with filecoin-proofs'
//! `verify_seal`, equals bellperson's proof for the same r and s, and bad input gets typed errors.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bellperson::groth16::{create_proof, Proof};
use blstrs::{Bls12, Scalar as Fr};
use cuzk::{Backend, Engine, EngineConfig, ProveOptions};
use cuzk_dev::fixture::{default_fixture_dir, ensure_2kib_fixture, Fixture};
use ff::Field;

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let _ = env_logger::builder().is_test(true).try_init();
        ensure_2kib_fixture(&default_fixture_dir()).expect("2 KiB fixture")
    })
}

fn engine() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        Engine::new(
            EngineConfig::default()
                .with_parameter_dir(&fixture().param_dir)
                .with_backend(Backend::Cpu),
        )
        .expect("engine")
    })
    .clone()
}

fn c1() -> Vec<u8> {
    fixture().read_c1().expect("c1.json")
}

/// Options whose progress callback counts the [`cuzk::Stage::Parse`] reports in `count`.
fn counting_parse(count: &Arc<AtomicUsize>) -> ProveOptions {
    let c = count.clone();
    ProveOptions::default().with_progress(Arc::new(move |e: &cuzk::ProgressEvent| {
        if e.stage == cuzk::Stage::Parse {
            c.fetch_add(1, Ordering::SeqCst);
        }
    }))
}

#[test]
fn cpu_proof_verifies_with_filecoin_proofs_and_every_byte_flip_fails() {
    let f = fixture();
    let parses = Arc::new(AtomicUsize::new(0));
    let out = engine()
        .prove_porep_c2(&c1(), f.sector_id, &f.prover_id, &counting_parse(&parses))
        .unwrap();
    // Parse (the JSON and the vanilla proofs) is one stage of the call, reported once.
    assert_eq!(parses.load(Ordering::SeqCst), 1);
    let parse_entries: Vec<_> = out
        .timings
        .entries
        .iter()
        .filter(|e| e.1 == cuzk::Stage::Parse)
        .collect();
    assert_eq!(parse_entries.len(), 1, "{:?}", out.timings.entries);
    assert_eq!(parse_entries[0].0, None, "a call-wide stage");
    assert_eq!(out.proof.len(), 192);
    assert!(out.verified);
    assert_eq!(out.partitions.len(), 1);
    assert_eq!(out.partitions[0].backend, "cpu");
    for stage in [
        cuzk::Stage::Synthesis,
        cuzk::Stage::Ntt,
        cuzk::Stage::MsmH,
        cuzk::Stage::Verify,
    ] {
        assert!(
            out.timings.of_partition(0).any(|(s, _)| s == stage),
            "{stage:?} timed"
        );
    }
    assert!(
        f.verify(&out.proof).unwrap(),
        "verify_seal rejects our proof"
    );
    for i in 0..out.proof.len() {
        let mut bad = out.proof.clone();
        bad[i] ^= 0x01;
        assert!(
            !matches!(f.verify(&bad), Ok(true)),
            "proof with byte {i} flipped verified"
        );
    }
}

#[test]
fn wrapped_input_proves_and_checks_its_sector_number() {
    use base64::Engine as _;
    let f = fixture();
    let wrap = |num: u64, size: u64| {
        serde_json::json!({
            "SectorNum": num,
            "Phase1Out": base64::engine::general_purpose::STANDARD.encode(c1()),
            "SectorSize": size,
        })
        .to_string()
        .into_bytes()
    };
    let out = engine()
        .prove_porep_c2(
            &wrap(f.sector_id, 2048),
            f.sector_id,
            &f.prover_id,
            &ProveOptions::default(),
        )
        .unwrap();
    assert!(f.verify(&out.proof).unwrap());
    let e = engine().prove_porep_c2(
        &wrap(f.sector_id, 8 << 20),
        f.sector_id,
        &f.prover_id,
        &ProveOptions::default(),
    );
    assert!(
        matches!(e, Err(cuzk::Error::InvalidInput(ref m)) if m.contains("SectorSize")),
        "{e:?}"
    );
    let e = engine().prove_porep_c2(
        &wrap(f.sector_id + 1, 2048),
        f.sector_id,
        &f.prover_id,
        &ProveOptions::default(),
    );
    assert!(
        matches!(e, Err(cuzk::Error::InvalidInput(ref m)) if m.contains("SectorNum")),
        "{e:?}"
    );
}

/// The 2 KiB circuit of the fixture, built independently of the engine from filecoin-proofs'
/// own types, plus the parameters read by bellperson.
fn reference_circuit() -> (
    storage_proofs_porep::stacked::StackedCircuit<
        filecoin_proofs::SectorShape2KiB,
        filecoin_proofs::DefaultPieceHasher,
    >,
    bellperson::groth16::Parameters<Bls12>,
) {
    use filecoin_proofs::{DefaultPieceHasher as G, SectorShape2KiB as Tree};
    use storage_proofs_core::compound_proof::{CompoundProof, SetupParams};
    use storage_proofs_porep::stacked::{PublicInputs, StackedCompound, StackedDrg, Tau};
    let f = fixture();
    let out = f.c1_output().unwrap();
    let config = out.registered_proof.as_v1_config();
    let vanilla: Vec<Vec<filecoin_proofs::types::VanillaSealProof<Tree>>> =
        out.vanilla_proofs.try_into().unwrap();
    let setup = SetupParams {
        vanilla_params: filecoin_proofs::parameters::setup_params(&config).unwrap(),
        partitions: Some(1),
        priority: false,
    };
    let pp = <StackedCompound<Tree, G> as CompoundProof<StackedDrg<'_, Tree, G>, _>>::setup(&setup)
        .unwrap();
    let pub_in = PublicInputs {
        replica_id: out.replica_id,
        tau: Some(Tau {
            comm_d: filecoin_proofs::as_safe_commitment(&out.comm_d, "comm_d").unwrap(),
            comm_r: filecoin_proofs::as_safe_commitment(&out.comm_r, "comm_r").unwrap(),
        }),
        k: None,
        seed: Some(out.seed),
    };
    let circuit = <StackedCompound<Tree, G> as CompoundProof<_, _>>::circuit(
        &pub_in,
        (),
        &vanilla[0],
        &pp.vanilla_params,
        Some(0),
    )
    .unwrap();
    let params =
        bellperson::groth16::Parameters::read(std::fs::File::open(&f.params_file).unwrap(), false)
            .unwrap();
    (circuit, params)
}

#[test]
fn known_answer_same_r_s_gives_bellpersons_bytes_and_h() {
    let f = fixture();
    let r = Fr::from(0x1234_5678_9abc_def0u64).square();
    let s = Fr::from(0x0fed_cba9_8765_4321u64).square();
    let opts = ProveOptions::default().with_randomness(vec![(r, s)]);
    let ours = engine()
        .prove_porep_c2(&c1(), f.sector_id, &f.prover_id, &opts)
        .unwrap();

    let (circuit, params) = reference_circuit();
    // H polynomial: ours vs bellperson's EvaluationDomain on the same a, b, c.
    let asg = cuzk::synth::Assignment::synthesize(circuit.clone()).unwrap();
    // 2,687,921 circuit constraints + one `input · 0 = 0` constraint per input (40).
    assert_eq!(asg.num_constraints(), 2_687_961);
    assert_eq!(asg.input.len(), 40, "39 public inputs + the constant one");
    let h = cuzk::ntt::compute_h(asg.a.clone(), asg.b.clone(), asg.c.clone()).unwrap();
    {
        use bellperson::domain::EvaluationDomain;
        use ec_gpu_gen::threadpool::Worker;
        let w = Worker::new();
        let mut a = EvaluationDomain::from_coeffs(asg.a.clone()).unwrap();
        let mut b = EvaluationDomain::from_coeffs(asg.b.clone()).unwrap();
        let mut c = EvaluationDomain::from_coeffs(asg.c.clone()).unwrap();
        for d in [&mut a, &mut b, &mut c] {
            d.ifft(&w, &mut None).unwrap();
            d.coset_fft(&w, &mut None).unwrap();
        }
        a.mul_assign(&w, &b);
        a.sub_assign(&w, &c);
        a.divide_by_z_on_coset(&w);
        a.icoset_fft(&w, &mut None).unwrap();
        let mut reference = a.into_coeffs();
        assert_eq!(reference.pop(), Some(Fr::ZERO), "deg h ≤ n − 2");
        assert_eq!(h.len(), (1 << 22) - 1);
        assert!(h == reference, "H polynomial differs from bellperson's");
    }
    drop(asg);

    let theirs: Proof<Bls12> = create_proof(circuit, &params, r, s).unwrap();
    let mut theirs_bytes = Vec::new();
    theirs.write(&mut theirs_bytes).unwrap();
    assert_eq!(
        ours.proof, theirs_bytes,
        "same r, s must give bellperson's exact proof bytes"
    );
    assert!(f.verify(&ours.proof).unwrap());
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cuzk-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn engine_with_params(dir: &Path) -> Arc<Engine> {
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(dir)
            .with_backend(Backend::Cpu),
    )
    .unwrap()
}

#[test]
fn bad_inputs_get_typed_errors_and_nothing_panics() {
    let f = fixture();
    let good = c1();
    let e = engine();
    let prove = |eng: &Engine, input: &[u8], sector: u64, prover: &[u8]| {
        eng.prove_porep_c2(input, sector, prover, &ProveOptions::default())
            .map(|_| ())
            .unwrap_err()
    };
    // malformed and truncated JSON
    assert_eq!(
        prove(&e, b"{not json", f.sector_id, &f.prover_id).code(),
        100
    );
    let err = prove(&e, &good[..good.len() / 2], f.sector_id, &f.prover_id);
    assert!(err.to_string().contains("truncated"), "{err}");
    // prover id of the wrong length
    assert!(matches!(
        prove(&e, &good, f.sector_id, &f.prover_id[..31]),
        cuzk::Error::InvalidProverId {
            len: 31,
            text: None
        }
    ));
    // another prover id or sector number than the C1 was sealed for
    let mut other = f.prover_id;
    other[0] ^= 1;
    assert!(prove(&e, &good, f.sector_id, &other)
        .to_string()
        .contains("replica id"));
    assert!(prove(&e, &good, f.sector_id + 1, &f.prover_id)
        .to_string()
        .contains("replica id"));
    // a proof type that does not match the vanilla proofs (8 MiB label on a 2 KiB C1)
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    assert_eq!(v["registered_proof"], "StackedDrg2KiBV1_1");
    v["registered_proof"] = "StackedDrg8MiBV1_1".into();
    let err = prove(
        &e,
        &serde_json::to_vec(&v).unwrap(),
        f.sector_id,
        &f.prover_id,
    );
    assert_eq!(err.code(), 101, "{err}");
    assert!(
        err.to_string()
            .contains("vanilla proofs are for 2048-byte sectors"),
        "{err}"
    );

    // A damaged C1: one challenge's vanilla proof removed; a hash that is not a field element.
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    let proofs = v["vanilla_proofs"]["StackedDrg2KiBV1"][0]
        .as_array_mut()
        .unwrap();
    assert!(proofs.len() > 1);
    proofs.remove(1);
    let dropped = serde_json::to_vec(&v).unwrap();
    let err = prove(&e, &dropped, f.sector_id, &f.prover_id);
    assert_eq!(err.code(), 101, "{err}");
    assert!(err.to_string().contains("vanilla proofs"), "{err}");
    fn first_hash(v: &mut serde_json::Value) -> Option<&mut serde_json::Value> {
        match v {
            serde_json::Value::Array(a) if a.len() == 32 && a.iter().all(|x| x.is_u64()) => Some(v),
            serde_json::Value::Array(a) => a.iter_mut().find_map(first_hash),
            serde_json::Value::Object(o) => o.values_mut().find_map(first_hash),
            _ => None,
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    let hash = first_hash(&mut v["vanilla_proofs"]).expect("a 32-byte hash in the vanilla proofs");
    hash[31] = serde_json::json!(255);
    let err = prove(
        &e,
        &serde_json::to_vec(&v).unwrap(),
        f.sector_id,
        &f.prover_id,
    );
    assert_eq!(err.code(), 101, "{err}");

    let name = f.params_file.file_name().unwrap();
    // missing parameter file
    let empty = temp_dir("missing");
    let err = prove(
        &engine_with_params(&empty),
        &good,
        f.sector_id,
        &f.prover_id,
    );
    // The directory was given in the configuration: the error names it (not the variable).
    assert!(
        matches!(
            &err,
            cuzk::Error::ParametersNotFound {
                given_dir: Some(d),
                ..
            } if d == &empty
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("the parameter directory given is"),
        "{err}"
    );
    // Parse reported once before the parameters are found missing.
    let parses = Arc::new(AtomicUsize::new(0));
    let err = engine_with_params(&empty)
        .prove_porep_c2(&good, f.sector_id, &f.prover_id, &counting_parse(&parses))
        .unwrap_err();
    assert_eq!(err.code(), 200, "{err}");
    assert_eq!(parses.load(Ordering::SeqCst), 1);
    // zero-length parameter file
    let zero = temp_dir("zero");
    std::fs::write(zero.join(name), b"").unwrap();
    let err = prove(&engine_with_params(&zero), &good, f.sector_id, &f.prover_id);
    assert!(
        err.code() == 201 && err.to_string().contains("empty"),
        "{err}"
    );
    // truncated parameter file (first 50 MB of the real one)
    let trunc = temp_dir("trunc");
    {
        use std::io::Read;
        let mut head = vec![0u8; 50 << 20];
        std::fs::File::open(&f.params_file)
            .unwrap()
            .read_exact(&mut head)
            .unwrap();
        std::fs::write(trunc.join(name), head).unwrap();
    }
    let err = prove(
        &engine_with_params(&trunc),
        &good,
        f.sector_id,
        &f.prover_id,
    );
    assert!(
        err.code() == 201 && err.to_string().contains("truncated"),
        "{err}"
    );
    // parameters of another circuit (a well-formed file with other query sizes) under this name
    let other_params = temp_dir("other");
    cuzk_dev::fixture::write_fake_params(&other_params.join(name), 40, [3, 3, 3, 3, 3]).unwrap();
    let err = prove(
        &engine_with_params(&other_params),
        &good,
        f.sector_id,
        &f.prover_id,
    );
    assert!(
        err.code() == 201
            && err
                .to_string()
                .contains("not the parameters of this circuit"),
        "{err}"
    );
    for d in [empty, zero, trunc, other_params] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// The 0/1 split of the real 2 KiB witness, which the GPU MSM exploits (reported in
/// BENCHMARKS.md): most aux values are 0 or 1.
#[test]
fn witness_split_of_the_2kib_circuit() {
    let (circuit, _) = reference_circuit();
    let asg = cuzk::synth::Assignment::synthesize(circuit).unwrap();
    let n = asg.aux.len();
    let pct = |x: usize, of: usize| 100.0 * x as f64 / of as f64;
    for (name, d) in [
        ("all aux", None),
        ("A query", Some(&asg.a_aux_density)),
        ("B query", Some(&asg.b_aux_density)),
    ] {
        let (z, o, r) = asg.aux_split(d);
        let m = z + o + r;
        println!(
            "{name:8}: {m} values ({:.1} % of aux): zeros {:.1} %, ones {:.1} %, others {:.2} %",
            pct(m, n),
            pct(z, m),
            pct(o, m),
            pct(r, m)
        );
        assert!(
            m > 0 && r < m / 5,
            "{name}: the PoRep witness is mostly 0/1"
        );
    }
    assert!(asg.a_aux_density.count() > n * 9 / 10, "A density is high");
    assert!(asg.b_aux_density.count() < n / 2, "B density is low");
}

/// A cancel token stops a call: set before the call, nothing heavy runs; set from the progress
/// callback when partition 0's witness is done, the call stops there (no MSM, no epilogue), returns
/// `Error::Cancelled` (code 502), and gives its host memory back; the same engine then proves.
#[test]
fn a_cancelled_call_stops_at_its_next_checkpoint_and_the_engine_goes_on() {
    let f = fixture();
    let engine = engine_with_params(&f.param_dir);
    let stages = Arc::new(std::sync::Mutex::new(Vec::new()));
    let token = cuzk::CancelToken::new();
    let opts = |cancel_at: Option<cuzk::Stage>| {
        let (seen, t) = (stages.clone(), token.clone());
        ProveOptions::default()
            .with_progress(Arc::new(move |e: &cuzk::ProgressEvent| {
                seen.lock().unwrap().push(e.stage);
                if Some(e.stage) == cancel_at {
                    t.cancel();
                }
            }))
            .with_cancel(token.clone())
    };

    // Cancelled after the witness of partition 0.
    let e = engine
        .prove_porep_c2(
            &c1(),
            f.sector_id,
            &f.prover_id,
            &opts(Some(cuzk::Stage::Witness)),
        )
        .unwrap_err();
    assert!(matches!(e, cuzk::Error::Cancelled), "{e}");
    assert_eq!(e.code(), 502);
    let seen = std::mem::take(&mut *stages.lock().unwrap());
    assert!(seen.contains(&cuzk::Stage::Witness), "{seen:?}");
    for never in [
        cuzk::Stage::MsmH,
        cuzk::Stage::Ntt,
        cuzk::Stage::Epilogue,
        cuzk::Stage::Verify,
    ] {
        assert!(
            !seen.contains(&never),
            "{never:?} ran after the cancel: {seen:?}"
        );
    }
    assert_eq!(
        engine.host_budget().used().1,
        0,
        "partition memory given back"
    );

    // Already cancelled: refused before the vanilla check and the witness.
    let e = engine
        .prove_porep_c2(&c1(), f.sector_id, &f.prover_id, &opts(None))
        .unwrap_err();
    assert!(matches!(e, cuzk::Error::Cancelled), "{e}");
    let seen = std::mem::take(&mut *stages.lock().unwrap());
    assert!(!seen.contains(&cuzk::Stage::Witness), "{seen:?}");

    // A new token: the engine proves (its gate and budget were left clean).
    let out = engine
        .prove_porep_c2(
            &c1(),
            f.sector_id,
            &f.prover_id,
            &ProveOptions::default().with_cancel(cuzk::CancelToken::new()),
        )
        .unwrap();
    assert!(out.verified);
    assert_eq!(out.proof.len(), 192);
}

/// A fresh CPU engine on the fixture's parameters (loaded cold by its first proof) whose
/// partitions split as `h` says ([`cuzk::HAhead`]).
fn split_engine(h: cuzk::HAhead) -> Arc<Engine> {
    Engine::new(
        EngineConfig::default()
            .with_parameter_dir(&fixture().param_dir)
            .with_backend(Backend::Cpu)
            .with_tuning(cuzk::Tuning::default().with_h_ahead(h)),
    )
    .unwrap()
}

/// The fixture's proof on `e` with fixed r and s: the same bytes however its MSMs are split.
fn prove_fixed(e: &Engine) -> cuzk::C2Output {
    let f = fixture();
    let r = Fr::from(0x5151_7777u64).square();
    let s = Fr::from(0x2222_9999u64).square();
    let opts = ProveOptions::default().with_randomness(vec![(r, s)]);
    e.prove_porep_c2(&c1(), f.sector_id, &f.prover_id, &opts)
        .unwrap()
}

/// The H side ahead of the other MSMs ([`cuzk::HAhead::Always`]: every partition split, on a
/// fresh engine whose parameters load cold — the H section handed out early — and again on the
/// same engine with them loaded) gives the one pass's exact bytes for the same r and s, and the
/// report says which ran.
#[test]
fn h_side_ahead_gives_the_one_pass_proof_bytes() {
    use cuzk::HAhead;
    let f = fixture();
    let always = split_engine(HAhead::Always);
    let cold = prove_fixed(&always);
    let warm = prove_fixed(&always);
    let one = prove_fixed(&split_engine(HAhead::Off));
    for split in [&cold, &warm] {
        assert!(split.partitions.iter().all(|p| p.h_ahead));
        assert_eq!(
            split.proof, one.proof,
            "the parts must give the one pass's bytes"
        );
    }
    assert!(one.partitions.iter().all(|p| !p.h_ahead && p.parts == 1));
    // Loaded, all four L, A, B MSMs go in one call after the H side.
    assert!(warm.partitions.iter().all(|p| p.parts == 2));
    assert!(f.verify(&one.proof).unwrap());
}

/// A cold load slower than the prover (each section handed out only after a backend call
/// since the one before: `Engine::pace_sections_for_test`, feature `test-hooks`): the default
/// mode splits, each partition's L, A, B MSMs follow the sections one call each (the H side,
/// then L, A, B_G1, B_G2: five parts for the fixture's one partition), and the bytes are still
/// the one pass's.
#[cfg(feature = "test-hooks")]
#[test]
fn sections_one_at_a_time_give_the_one_pass_proof_bytes() {
    use cuzk::HAhead;
    let f = fixture();
    let one = prove_fixed(&split_engine(HAhead::Off));
    let slow = split_engine(HAhead::WhileLoading);
    slow.pace_sections_for_test();
    let split = prove_fixed(&slow);
    assert_eq!(
        split.proof, one.proof,
        "section by section: the one pass's bytes"
    );
    for p in &split.partitions {
        assert!(p.h_ahead, "partition {} not split", p.partition);
        assert_eq!(p.parts, 5, "partition {}", p.partition);
    }
    assert!(f.verify(&split.proof).unwrap());
}
