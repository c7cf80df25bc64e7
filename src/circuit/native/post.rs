//! The PoSt circuit (WindowPoSt and WinningPoSt), natively: the composition of the native
//! Poseidon and Merkle path routines in the order of `storage-proofs-post`
//! `fallback::FallbackPoStCircuit::synthesize` (19.1.0, `src/fallback/circuit.rs`), and the
//! partition driver that runs it one sector per task.
//!
//! The circuit (`synthesize_default`: the sectors in order, each in its `sector_<i>` namespace)
//! has no prefix beyond the constant one. Per sector, `Sector::synthesize`, in allocation order:
//! 1. comm_r_last, comm_c and comm_r (3 values); comm_r's `inputize` — one input, comm_r, the
//!    sector's first;
//! 2. H(comm_c, comm_r_last): `hash2_circuit`, Poseidon of arity 2 ([`poseidon::hash2`], 311
//!    values); its equality with comm_r is a constraint only;
//! 3. per challenge, `PoRCircuit::synthesize` (`storage-proofs-core-19.1.0/src/gadgets/por.rs`)
//!    with the leaf a value (`Root::Val`: allocated) and the root comm_r_last's variable
//!    (`Root::Var`: nothing allocated), `private = true`: the leaf and its path in tree R
//!    ([`por::por_path_value_leaf`]) — one input, the packed path bits (the challenged leaf's
//!    index in the sector).
//!
//! A 32 GiB sector (tree R of arity 8 with 8 sub-trees: 10 levels of 3 bits, 7 siblings, 22
//! insertion values and a 505-value Poseidon each) is 3 + 311 + 10 × (1 + 10 × 537) = 54,024
//! values and 11 inputs; a WindowPoSt partition holds 2349 of them (126.9 M values), a
//! WinningPoSt one 66 sectors of one challenge.
//!
//! The sectors' public data are paired with the vanilla sector proofs as
//! `FallbackPoStCompound::circuit` (`src/fallback/compound.rs`) pairs them: the partition's
//! chunk of the public sectors, its last sector repeated where the circuit has more sectors.

use blstrs::Scalar as Fr;
use filecoin_hashers::Hasher;
use sha2::digest::typenum::Unsigned;
use storage_proofs_core::merkle::{compound_path_length, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_core::util::NODE_SIZE;
use storage_proofs_post::fallback::{PublicSector, SectorProof};

use super::por::{self, TreeShape};
use super::{poseidon, Tape};
use crate::circuit::post::{PublicInputs, PublicParams, Vanilla};
use crate::circuit::witness::{self, Task, TaskError, Witness};
use crate::circuit::Layout;
use crate::error::{Error, Result};

/// A challenge of a sector: the leaf and its path, `(siblings, index in the node)` per level
/// from the leaf up.
pub type Challenge = (Fr, Vec<(Vec<Fr>, usize)>);

/// The public sector of the partition's sector proofs.
type Public<Tree> = PublicSector<<<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain>;

/// The sector proof of the partition's sectors.
type Proof<Tree> = SectorProof<<Tree as MerkleTreeTrait>::Proof>;

/// The native witness of partition `k` (see the module docs) into `w`, with the driver and
/// buffer rules of [`witness::generate_into`]; the values equal the gadget path's
/// ([`crate::circuit::post::witness_into`] with `native = false`).
///
/// # Errors
/// [`Error::InvalidInput`] when the vanilla proof does not fit the circuit
/// (`public_sectors`, `sector_paths`); [`Error::Synthesis`] when the native routine
/// allocates another number of values or inputs than the compiled layout (it does not mirror
/// the recorded circuit); [`Error::Internal`] when a vector of `w` has capacity but too little.
pub fn witness_into<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &PublicInputs<Tree>,
    vanilla: &Vanilla<Tree>,
    pp: &PublicParams,
    k: usize,
    w: &mut Witness,
) -> Result<()> {
    let sectors = public_sectors::<Tree>(layout, public_inputs, vanilla, pp, k)?;
    let shape = shape::<Tree>();
    witness::generate_tasks_into(layout, k, w, |i, task: &mut Task<'_>| {
        if let Some((input, aux)) = task.prefix.take() {
            // The constant one alone (the layout's prefix, checked).
            witness::write_prefix(layout, input, aux, |_| Ok(()))?;
        }
        let proof = &vanilla.sectors[i];
        let challenges = sector_paths::<Tree>(pp, proof)
            .map_err(|m| Error::InvalidInput(format!("partition {k}, sector {i}: {m}")))?;
        sector(
            shape,
            [
                sectors[i].comm_r.into(),
                proof.comm_c.into(),
                proof.comm_r_last.into(),
            ],
            &challenges,
            task.block_input,
            task.block_aux,
        )
    })
}

/// The shape of `Tree` (base, sub-tree and top-tree arities).
fn shape<Tree: MerkleTreeTrait>() -> TreeShape {
    TreeShape::new(
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    )
}

/// The public sector of each of the circuit's sectors, as `FallbackPoStCompound::circuit`
/// pairs them with the vanilla sector proofs (partition `k`'s chunk of `public_inputs`'
/// sectors, its last repeated), after checking the counts: the gadget path's checks too.
///
/// # Errors
/// [`Error::InvalidInput`] when the vanilla proof's sector count or `pp`'s is not the layout's,
/// or the public inputs have no sectors for partition `k`.
pub(crate) fn public_sectors<'a, Tree: MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &'a PublicInputs<Tree>,
    vanilla: &Vanilla<Tree>,
    pp: &PublicParams,
    k: usize,
) -> Result<Vec<&'a Public<Tree>>> {
    let n = layout.challenges;
    let bad = |m: String| Error::InvalidInput(format!("partition {k}: {m}"));
    if vanilla.sectors.len() != n {
        return Err(bad(format!(
            "{} sector proofs for a circuit of {n} sectors",
            vanilla.sectors.len()
        )));
    }
    if pp.sector_count != n || n == 0 {
        return Err(bad(format!(
            "public parameters of {} sectors for a circuit of {n}",
            pp.sector_count
        )));
    }
    let chunk = public_inputs
        .sectors
        .chunks(n)
        .nth(k)
        .ok_or_else(|| {
            bad(format!(
                "{} public sectors, none for this partition of {n}",
                public_inputs.sectors.len()
            ))
        })?;
    let last = chunk.len() - 1;
    Ok((0..n).map(|i| &chunk[i.min(last)]).collect())
}

/// The leaves and paths of a sector proof, checked to have the circuit's shape: `pp`'s
/// challenge count, and paths of as many levels as a tree of `pp`'s sector size has, each
/// with its level's arity − 1 siblings (a path of another shape makes another circuit, and
/// the gadgets panic on it).
///
/// # Errors
/// A message naming the challenge and what is wrong.
pub(crate) fn sector_paths<Tree: MerkleTreeTrait>(
    pp: &PublicParams,
    proof: &Proof<Tree>,
) -> std::result::Result<Vec<Challenge>, String> {
    if proof.inclusion_proofs.len() != pp.challenge_count {
        return Err(format!(
            "{} inclusion proofs, the circuit has {} challenges",
            proof.inclusion_proofs.len(),
            pp.challenge_count
        ));
    }
    let shape = shape::<Tree>();
    let leaves = (pp.sector_size / NODE_SIZE as u64) as usize;
    let levels =
        compound_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(leaves);
    proof
        .inclusion_proofs
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let path = p.as_pairs();
            if path.len() != levels {
                return Err(format!(
                    "challenge {j}: a path of {} levels, the tree has {levels}",
                    path.len()
                ));
            }
            let (base, sub, top) = shape.split(&path);
            for (arity, part) in [(shape.base, base), (shape.sub, sub), (shape.top, top)] {
                if let Some((s, _)) = part.iter().find(|(s, _)| s.len() + 1 != arity) {
                    return Err(format!(
                        "challenge {j}: a level of {} siblings in a tree of arity {arity}",
                        s.len()
                    ));
                }
            }
            Ok((p.leaf().into(), path))
        })
        .collect()
}

/// The values and inputs of one sector (`comm`: comm_r, comm_c, comm_r_last), in the circuit's
/// order (module docs), into the sector's block of inputs and aux values.
///
/// # Errors
/// A message when the block's slices are not as long as what the routine writes (the compiled
/// circuit is not this one).
pub(crate) fn sector(
    shape: TreeShape,
    comm: [Fr; 3],
    challenges: &[Challenge],
    inputs: &mut [Fr],
    aux: &mut [Fr],
) -> std::result::Result<(), TaskError> {
    let [comm_r, comm_c, comm_r_last] = comm;
    if inputs.len() != 1 + challenges.len() {
        return Err(format!(
            "the native witness has {} inputs per sector, the compiled circuit {}",
            1 + challenges.len(),
            inputs.len()
        )
        .into());
    }
    let mut t = Tape::new(aux);

    // 1. The commitments; comm_r is the sector's first input.
    t.alloc(comm_r_last);
    t.alloc(comm_c);
    t.alloc(comm_r);
    inputs[0] = comm_r;

    // 2. H(comm_c, comm_r_last), checked against comm_r by the R1CS.
    poseidon::hash2(&mut t, comm_c, comm_r_last);

    // 3. Each challenge's leaf and path up to comm_r_last; its packed index bits an input.
    for ((leaf, path), input) in challenges.iter().zip(&mut inputs[1..]) {
        por::por_path_value_leaf(&mut t, shape, *leaf, path, poseidon::poseidon_node);
        *input = por::path_input(shape, path);
    }

    t.finish().map_err(|(got, want)| {
        format!("the native witness allocated {got} aux values, the compiled circuit has {want}")
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use bellperson::Circuit;
    use ff::Field;
    use filecoin_hashers::poseidon::{PoseidonDomain, PoseidonFunction};
    use filecoin_hashers::HashFunction;
    use filecoin_proofs::{SectorShape2KiB, SectorShape32GiB};
    use storage_proofs_core::api_version::ApiVersion;
    use storage_proofs_core::merkle::MerkleProof;
    use storage_proofs_core::sector::SectorId;
    use storage_proofs_post::fallback::{self, Sector};

    use super::*;
    use crate::circuit::native::poseidon::tests::{fr, rng};
    use crate::circuit::native::por::tests::random_path;
    use crate::circuit::native::tape::test_support::AuxRecorder;
    use crate::circuit::post;

    const GIB32: u64 = 32 << 30;

    /// A random sector of `shape` with `challenges` challenges (paths of `base_levels` base
    /// levels); comm_r = H(comm_c, comm_r_last) as in a real sector.
    fn random_sector(
        rng: &mut impl rand::RngCore,
        shape: TreeShape,
        base_levels: usize,
        challenges: usize,
    ) -> ([Fr; 3], Vec<Challenge>) {
        let (comm_c, comm_r_last) = (fr(rng), fr(rng));
        let comm_r = PoseidonFunction::hash2(&comm_c.into(), &comm_r_last.into()).into();
        let ch = (0..challenges)
            .map(|_| (fr(rng), random_path(rng, shape, base_levels)))
            .collect();
        ([comm_r, comm_c, comm_r_last], ch)
    }

    /// The gadget (`Sector::synthesize` of storage-proofs-post) on the same sector, recorded:
    /// its aux values and inputs.
    fn gadget_sector<Tree: 'static + MerkleTreeTrait>(
        comm: [Fr; 3],
        challenges: &[Challenge],
    ) -> AuxRecorder {
        let sector = Sector::<Tree> {
            comm_r: Some(comm[0]),
            comm_c: Some(comm[1]),
            comm_r_last: Some(comm[2]),
            leafs: challenges.iter().map(|(l, _)| Some(*l)).collect(),
            paths: challenges
                .iter()
                .map(|(_, p)| {
                    p.iter()
                        .map(|(s, i)| (s.iter().map(|v| Some(*v)).collect(), Some(*i)))
                        .collect::<Vec<_>>()
                        .into()
                })
                .collect(),
            id: None,
        };
        let mut cs = AuxRecorder::default();
        (&sector).synthesize(&mut cs).unwrap();
        cs
    }

    /// [`sector`] against the gadget, value for value (aux and inputs), on random sectors.
    fn check_sector<Tree: 'static + MerkleTreeTrait>(base_levels: usize, seed: u64) {
        let shape = shape::<Tree>();
        let mut rng = rng(seed);
        for challenges in [1, 10, 10] {
            let (comm, ch) = random_sector(&mut rng, shape, base_levels, challenges);
            let cs = gadget_sector::<Tree>(comm, &ch);
            let mut inputs = vec![Fr::ZERO; 1 + challenges];
            let mut aux = vec![Fr::ZERO; cs.aux.len()];
            // `sector` checks that it fills `aux` exactly.
            assert!(sector(shape, comm, &ch, &mut inputs, &mut aux).is_ok());
            let first = aux.iter().zip(&cs.aux).position(|(a, b)| a != b);
            assert_eq!(first, None, "first differing aux value of {}", aux.len());
            assert_eq!(inputs, cs.inputs);
            // The inputs are comm_r and each challenge's index.
            assert_eq!(inputs[0], comm[0]);
            for ((_, path), input) in ch.iter().zip(&inputs[1..]) {
                let index = path
                    .iter()
                    .rev()
                    .fold(0u64, |acc, (s, i)| acc * (s.len() as u64 + 1) + *i as u64);
                assert_eq!(*input, Fr::from(index));
            }
        }
    }

    #[test]
    fn sector_matches_gadget_2kib_shape() {
        // 2 KiB: 64 leaves, 2 levels of arity 8.
        check_sector::<SectorShape2KiB>(2, 1);
    }

    #[test]
    fn sector_matches_gadget_32gib_shape() {
        // 32 GiB: 9 base levels of arity 8, then the sub-tree level of arity 8.
        check_sector::<SectorShape32GiB>(9, 2);
    }

    /// The public parameters of a PoSt circuit of `sectors` × `challenges` of `sector_size`.
    fn params(sector_size: u64, sectors: usize, challenges: usize) -> PublicParams {
        fallback::PublicParams {
            sector_size,
            challenge_count: challenges,
            sector_count: sectors,
            api_version: ApiVersion::V1_2_0,
        }
    }

    /// A random partition of `pp`'s shape: public inputs of `public` sectors (fewer than the
    /// circuit's: the last is repeated) and the vanilla proof, its paths `base_levels` deep.
    fn random_partition<Tree: 'static + MerkleTreeTrait<Hasher = filecoin_hashers::poseidon::PoseidonHasher>>(
        pp: &PublicParams,
        public: usize,
        base_levels: usize,
        seed: u64,
    ) -> (PublicInputs<Tree>, Vanilla<Tree>) {
        let mut rng = rng(seed);
        let shape = shape::<Tree>();
        let d = |v: Fr| PoseidonDomain::from(v);
        let mut sectors = Vec::new();
        let mut proofs = Vec::new();
        for i in 0..pp.sector_count {
            let ([comm_r, comm_c, comm_r_last], ch) =
                random_sector(&mut rng, shape, base_levels, pp.challenge_count);
            if i < public {
                sectors.push(PublicSector {
                    id: SectorId::from(i as u64 + 1),
                    comm_r: d(comm_r),
                });
            }
            let inclusion_proofs = ch
                .into_iter()
                .map(|(leaf, path)| {
                    let path = path
                        .into_iter()
                        .map(|(s, i)| (s.into_iter().map(d).collect(), i))
                        .collect();
                    MerkleProof::from_parts(d(leaf), d(comm_r_last), path)
                })
                .collect();
            proofs.push(SectorProof {
                inclusion_proofs,
                comm_c: d(comm_c),
                comm_r_last: d(comm_r_last),
            });
        }
        let inputs = fallback::PublicInputs {
            randomness: d(fr(&mut rng)),
            prover_id: d(fr(&mut rng)),
            sectors,
            k: Some(0),
        };
        (inputs, fallback::Proof { sectors: proofs })
    }

    /// The native and gadget witness of a random partition of `pp`, equal value for value.
    fn check_partition<Tree>(pp: &PublicParams, public: usize, base_levels: usize, seed: u64)
    where
        Tree: 'static + MerkleTreeTrait<Hasher = filecoin_hashers::poseidon::PoseidonHasher>,
    {
        let layout = post::layout::<Tree>(pp).unwrap();
        let (inputs, vanilla) = random_partition::<Tree>(pp, public, base_levels, seed);
        let native = post::witness::<Tree>(&layout, &inputs, &vanilla, pp, 0, true).unwrap();
        let gadget = post::witness::<Tree>(&layout, &inputs, &vanilla, pp, 0, false).unwrap();
        assert_eq!(native.input.len(), layout.num_inputs());
        assert_eq!(native.aux.len(), layout.num_aux());
        assert_eq!(native.input, gadget.input, "inputs");
        assert_eq!(native.aux.len(), gadget.aux.len());
        let first = native.aux.iter().zip(&gadget.aux).position(|(a, b)| a != b);
        assert_eq!(first, None, "first differing aux value");
        // The constant one, then per sector comm_r (the last public one repeated) and the
        // challenges' indices.
        assert_eq!(native.input[0], Fr::ONE);
        for i in 0..pp.sector_count {
            let comm_r: Fr = inputs.sectors[i.min(public - 1)].comm_r.into();
            assert_eq!(native.input[layout.challenge_inputs(i).start], comm_r);
        }
    }

    #[test]
    fn partition_matches_gadget_2kib_window_and_winning_shapes() {
        // WindowPoSt 2 KiB: 2 sectors × 10 challenges, one public sector (repeated);
        // WinningPoSt: 66 blocks of one challenge.
        check_partition::<SectorShape2KiB>(&params(2048, 2, 10), 1, 2, 3);
        check_partition::<SectorShape2KiB>(&params(2048, 66, 1), 66, 2, 4);
    }

    #[test]
    fn partition_matches_gadget_32gib_shape() {
        // Three 32 GiB sectors of 10 challenges (a WindowPoSt partition's first three).
        let pp = params(GIB32, 3, 10);
        let layout = post::layout::<SectorShape32GiB>(&pp).unwrap();
        // The counts of the module docs.
        assert_eq!((layout.prefix.inputs, layout.prefix.aux), (1, 0));
        assert_eq!((layout.block.inputs, layout.block.aux), (11, 54_024));
        check_partition::<SectorShape32GiB>(&pp, 2, 9, 5);
    }

    #[test]
    fn malformed_vanilla_proofs_are_input_errors_on_both_paths() {
        type Tree = SectorShape32GiB;
        let pp = params(GIB32, 2, 3);
        let layout = post::layout::<Tree>(&pp).unwrap();
        let (inputs, vanilla) = random_partition::<Tree>(&pp, 2, 9, 6);
        let run = |inputs: &PublicInputs<Tree>, v: &Vanilla<Tree>, layout: &Layout, native| {
            post::witness::<Tree>(layout, inputs, v, &pp, 0, native)
        };
        for native in [true, false] {
            let input_error = |v: &Vanilla<Tree>, what: &str| {
                let e = run(&inputs, v, &layout, native).unwrap_err();
                assert!(matches!(e, Error::InvalidInput(_)), "{what}: {e}");
            };
            assert!(run(&inputs, &vanilla, &layout, native).is_ok());
            // One sector proof short.
            let mut v = vanilla.clone();
            v.sectors.pop();
            input_error(&v, "sector count");
            // A challenge short.
            let mut v = vanilla.clone();
            v.sectors[1].inclusion_proofs.pop();
            input_error(&v, "challenge count");
            // A path a level short, or with a sibling missing at a level.
            let bent = |f: fn(&mut Vec<(Vec<PoseidonDomain>, usize)>)| {
                let mut v = vanilla.clone();
                let p = &v.sectors[1].inclusion_proofs[2];
                let mut path = p.path();
                f(&mut path);
                let bent = MerkleProof::from_parts(p.leaf(), p.root(), path);
                v.sectors[1].inclusion_proofs[2] = bent;
                v
            };
            input_error(&bent(|p| _ = p.remove(0)), "levels");
            input_error(&bent(|p| _ = p[3].0.pop()), "siblings");
            input_error(&bent(|p| _ = p[9].0.pop()), "sub-tree siblings");
            input_error(&bent(|p| p[0].0.push(PoseidonDomain::default())), "a sibling too many");
            // No public sectors for the partition.
            let mut none = inputs.clone();
            none.sectors.clear();
            let e = run(&none, &vanilla, &layout, native).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{e}");
            // A layout of another circuit: a synthesis error, not a panic.
            for (di, da) in [(0, 1), (1, 0)] {
                let mut other = layout;
                other.block.inputs += di;
                other.block.aux += da;
                let e = run(&inputs, &vanilla, &other, native).unwrap_err();
                assert!(matches!(e, Error::Synthesis { .. }), "{e}");
            }
        }
    }

    #[test]
    #[ignore = "timing; run with --ignored --nocapture"]
    fn sector_witness_speed_32gib() {
        // One 32 GiB sector (10 challenges) per call: one task, so its wall time is its
        // core time.
        type Tree = SectorShape32GiB;
        let pp = params(GIB32, 1, 10);
        let layout = post::layout::<Tree>(&pp).unwrap();
        let (inputs, vanilla) = random_partition::<Tree>(&pp, 1, 9, 7);
        for native in [true, false] {
            let n = if native { 20 } else { 3 };
            let mut w = Witness::default();
            post::witness_into::<Tree>(&layout, &inputs, &vanilla, &pp, 0, native, &mut w).unwrap();
            let start = std::time::Instant::now();
            for _ in 0..n {
                post::witness_into::<Tree>(&layout, &inputs, &vanilla, &pp, 0, native, &mut w).unwrap();
            }
            let s = start.elapsed().as_secs_f64() / n as f64;
            let what = if native { "native" } else { "gadget" };
            println!(
                "32 GiB sector (10 challenges), {what}: {:.2} ms; a 2349-sector partition: {:.1} core-s",
                s * 1e3,
                s * 2349.0
            );
        }
    }
}
