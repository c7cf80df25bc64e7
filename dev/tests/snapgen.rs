//! Generated SnapDeals inputs (`cuzk_dev::snapgen`): at 2 KiB, 8 MiB and 32 GiB the engine's
//! input check (partition count, shapes, the vanilla proofs verified against the commitments)
//! accepts them, and refuses them with another generation's comm_r_new; a seed gives the same
//! inputs, another seed others. (`cli/tests/cli.rs` proves 2 KiB ones through `gen-snap` and
//! `prove-snap`, checked with `verify_empty_sector_update_proof`.)

use cuzk::snap::SnapRequest;
use cuzk_dev::snapgen::{generate, GeneratedSnap};
use filecoin_proofs_api::RegisteredUpdateProof;

/// The request of `g` (proof type `number` in the actors' numbering) with `vanilla`.
fn request<'a>(g: &'a GeneratedSnap, vanilla: &'a [&'a [u8]], number: u64) -> SnapRequest<'a> {
    SnapRequest {
        registered_proof: number,
        vanilla_proofs: vanilla,
        comm_r_old: &g.comm_r_old,
        comm_r_new: &g.comm_r_new,
        comm_d_new: &g.comm_d_new,
        sector_size: Some(u64::from(g.registered_proof.sector_size())),
    }
}

#[test]
fn generated_inputs_pass_the_engines_input_check_at_2kib_8mib_and_32gib() {
    let _ = env_logger::builder().is_test(true).try_init();
    let seed = *b"cuzk snapgen test seed, v1 .....";
    let g = generate(RegisteredUpdateProof::StackedDrg2KiBV1, seed).unwrap();
    assert_eq!(
        g,
        generate(RegisteredUpdateProof::StackedDrg2KiBV1, seed).unwrap()
    );
    let mut other = seed;
    other[0] ^= 1;
    let o = generate(RegisteredUpdateProof::StackedDrg2KiBV1, other).unwrap();
    assert_ne!(g.comm_r_new, o.comm_r_new);
    let v: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
    cuzk::snap::check(&request(&g, &v, 0)).unwrap();
    // Another generation's comm_r_new: the vanilla proofs do not verify against it.
    let r = SnapRequest {
        comm_r_new: &o.comm_r_new,
        ..request(&g, &v, 0)
    };
    assert_eq!(cuzk::snap::check(&r).unwrap_err().code(), 101);
    for (proof, number, partitions) in [
        (RegisteredUpdateProof::StackedDrg8MiBV1, 1, 4),
        (RegisteredUpdateProof::StackedDrg32GiBV1, 3, 16),
    ] {
        let t = std::time::Instant::now();
        let g = generate(proof, seed).unwrap();
        let gen_s = t.elapsed().as_secs_f64();
        assert_eq!(g.vanilla_proofs.len(), partitions, "{proof:?}");
        let v: Vec<&[u8]> = g.vanilla_proofs.iter().map(Vec::as_slice).collect();
        cuzk::snap::check(&request(&g, &v, number)).unwrap();
        eprintln!(
            "{proof:?}: generated in {gen_s:.2} s, checked in {:.2} s",
            t.elapsed().as_secs_f64() - gen_s
        );
    }
}
