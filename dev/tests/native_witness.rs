//! The native witness equals the gadget witness value for value on generated real-shape C1
//! outputs of every sector size (`cuzk_dev::c1gen`: consistent challenged nodes, paths and
//! columns): 8 MiB and 512 MiB whole partitions, 32 GiB and 64 GiB for the prefix and their
//! first challenges (a whole 32 GiB partition, 18 challenges and 4.2 GB per witness, is
//! compared by `cargo run --release --example witness_check -- --sector-size 32GiB`).

use cuzk::progress::Timings;
use cuzk::{Backend, Engine, EngineConfig, Synthesis};
use cuzk_dev::c1gen::{self, C1Spec};
use filecoin_proofs_api::RegisteredSealProof;

const SECTOR_ID: u64 = 91;

fn check(p: RegisteredSealProof, partition: usize, challenges: Option<usize>) {
    let spec = C1Spec {
        registered_proof: p,
        seed: c1gen::seed_from_str("native-witness"),
        sector_id: SECTOR_ID,
        prover_id: cuzk::c1::prover_id_from_actor_id(4321),
    };
    let g = c1gen::generate(&spec).expect("generate");
    let c1 = g.c1_json().unwrap();
    let engine = Engine::new(EngineConfig::default().with_backend(Backend::Cpu)).unwrap();
    let mut t = Timings::default();
    let mut run = |s| {
        engine
            .witness_c1(
                &c1,
                SECTOR_ID,
                &spec.prover_id,
                partition,
                s,
                challenges,
                &mut t,
            )
            .unwrap()
    };
    let (layout, native) = run(Synthesis::Compiled);
    let (_, gadget) = run(Synthesis::Gadget);
    assert_eq!(native.input.len(), layout.num_inputs());
    assert_eq!(native.aux.len(), layout.num_aux());
    assert_eq!(native.input, gadget.input, "{p:?}: inputs");
    assert_eq!(native.aux.len(), gadget.aux.len());
    let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
    assert_eq!(first, None, "{p:?}: first differing aux value");
    // Not a trivially equal pair: most values are bits, but not all of them zero.
    assert!(
        native
            .aux
            .iter()
            .filter(|v| bool::from(!ff::Field::is_zero(*v)))
            .count()
            > native.aux.len() / 8
    );
    eprintln!(
        "{p:?} partition {partition}: {} challenges, {} aux values equal; {:?}",
        layout.challenges,
        native.aux.len(),
        t.entries
    );
}

#[test]
fn native_equals_gadget_8mib() {
    check(RegisteredSealProof::StackedDrg8MiBV1_1, 0, None);
}

#[test]
fn native_equals_gadget_512mib() {
    check(RegisteredSealProof::StackedDrg512MiBV1_1, 0, None);
}

#[test]
fn native_equals_gadget_32gib_first_challenges() {
    check(RegisteredSealProof::StackedDrg32GiBV1_1, 0, Some(2));
    check(RegisteredSealProof::StackedDrg32GiBV1_1, 9, Some(1));
}

#[test]
fn native_equals_gadget_64gib_first_challenge() {
    check(RegisteredSealProof::StackedDrg64GiBV1_1, 3, Some(1));
}
