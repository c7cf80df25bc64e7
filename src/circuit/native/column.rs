//! Native column openings and encoding of the stacked (SDR) PoRep circuit.
//!
//! Mirrors, in `storage-proofs-porep-19.1.0/src/stacked/circuit/`: `column.rs`
//! (`Column::alloc`, `AllocatedColumn::hash`), `hash.rs` (`hash_single_column`),
//! `column_proof.rs` (`ColumnProof::alloc`) and the body of `Proof::synthesize`'s parent loops
//! in `params.rs`; and `storage-proofs-core-19.1.0/src/gadgets/encode.rs` (`encode`).
//!
//! `ColumnProof::alloc` allocates the column's rows only: the inclusion path is handed back and
//! allocated by `enforce_inclusion` after the column hash. One parent's opening in
//! `Proof::synthesize` is therefore: rows ([`column_alloc`]), column hash ([`column_hash`]),
//! inclusion path of the hash in tree C ([`super::por::por_path`]); [`column_opening`] does the
//! three.

use blstrs::Scalar as Fr;

use super::por::{por_path, TreeShape};
use super::poseidon::{constants, poseidon_hash, poseidon_node};
use super::tape::Tape;

/// Allocates the rows of a column, one value per layer in layer order (`Column::alloc`, i.e.
/// all of `ColumnProof::alloc`).
pub fn column_alloc(t: &mut Tape<'_>, rows: &[Fr]) {
    for &r in rows {
        t.alloc(r);
    }
}

/// The column hash of already-allocated `rows` (`AllocatedColumn::hash` →
/// `hash_single_column`): Poseidon of arity 2 (2 layers: `POSEIDON_CONSTANTS_2`) or 11 (11
/// layers: `POSEIDON_CONSTANTS_11`), allocating what [`poseidon_hash`] does; returns the hash.
///
/// # Panics
/// On another number of rows (as `hash_single_column` does).
pub fn column_hash(t: &mut Tape<'_>, rows: &[Fr]) -> Fr {
    match rows.len() {
        2 | 11 => poseidon_hash(t, rows, constants(rows.len())),
        n => panic!("unsupported column size: {n}"),
    }
}

/// One parent column opening of `Proof::synthesize` (a `drg_parent_i` or `exp_parent_i`):
/// [`column_alloc`] of the rows, [`column_hash`], then the inclusion path of that hash in tree
/// C of `shape` ([`por_path`] with the Poseidon node hash); returns the computed root, which
/// the R1CS check compares with comm_c (no allocation). The same sequence without
/// [`column_alloc`] is the challenged node's own column (`c_x_column_hash`, `c_x_inclusion`:
/// its rows are the labels, allocated by the labeling).
pub fn column_opening<S: AsRef<[Fr]>>(
    t: &mut Tape<'_>,
    shape: TreeShape,
    rows: &[Fr],
    path: &[(S, usize)],
) -> Fr {
    column_alloc(t, rows);
    let h = column_hash(t, rows);
    por_path(t, shape, h, path, poseidon_node)
}

/// `encode(key, value)` (`storage_proofs_core::gadgets::encode::encode` →
/// `constraint::add`): allocates and returns `key + value` (1 value). In `Proof::synthesize`
/// the key is the last layer's label and the value the data leaf; the encoded node then
/// starts the comm_r_last inclusion path.
pub fn encode(t: &mut Tape<'_>, key: Fr, value: Fr) -> Fr {
    let v = key + value;
    t.alloc(v);
    v
}

#[cfg(test)]
mod tests {
    use bellperson::gadgets::num::AllocatedNum;
    use bellperson::ConstraintSystem;
    use ff::Field;
    use filecoin_hashers::poseidon::{PoseidonFunction, PoseidonHasher};
    use filecoin_hashers::{HashFunction, PoseidonArity};
    use storage_proofs_porep::stacked::Column as VanillaColumn;

    use super::*;
    use crate::circuit::native::por::tests::{gadget_inclusion, random_path};
    use crate::circuit::native::poseidon::tests::{
        alloc_nums, assert_tape_matches, fr, rng, U0, U11, U2, U8,
    };
    use crate::circuit::native::tape::test_support::AuxRecorder;

    /// A column's rows and its inclusion path.
    type Opening = (Vec<Fr>, Vec<(Vec<Fr>, usize)>);

    /// `hash_single_column` of the gadget: `poseidon_hash::<U2>(…, POSEIDON_CONSTANTS_2)` or
    /// `::<U11>(…, POSEIDON_CONSTANTS_11)` — the same calls as `hash_multi_leaf_circuit::<A>`
    /// (`A::PARAMETERS()` is that static). storage-proofs-porep keeps the function private.
    fn gadget_column_hash<CS: ConstraintSystem<Fr>>(
        cs: &mut CS,
        rows: &[AllocatedNum<Fr>],
    ) -> AllocatedNum<Fr> {
        match rows.len() {
            2 => PoseidonFunction::hash_multi_leaf_circuit::<U2, _>(cs, rows, 0),
            11 => PoseidonFunction::hash_multi_leaf_circuit::<U11, _>(cs, rows, 0),
            n => panic!("{n}"),
        }
        .unwrap()
    }

    /// Parent openings as `Proof::synthesize` runs them (`ColumnProof::alloc` = `Column::alloc`:
    /// one `AllocatedNum` per row; `hash_single_column`; `enforce_inclusion` against the
    /// prefix's comm_c), several in a row into one constraint system, against
    /// [`column_opening`].
    fn check_openings<U, V, W>(shape: TreeShape, layers: usize, base_levels: usize, seed: u64)
    where
        U: 'static + PoseidonArity,
        V: 'static + PoseidonArity,
        W: 'static + PoseidonArity,
    {
        let mut rng = rng(seed);
        let comm_c = fr(&mut rng);
        let openings: Vec<Opening> = (0..3)
            .map(|_| {
                let rows = (0..layers).map(|_| fr(&mut rng)).collect();
                (rows, random_path(&mut rng, shape, base_levels))
            })
            .collect();

        let mut cs = AuxRecorder::default();
        let comm_c = alloc_nums(&mut cs, &[comm_c]).remove(0); // allocated in the prefix
        let mut hashes = Vec::new();
        for (rows, path) in &openings {
            let nums = alloc_nums(&mut cs, rows);
            let h = gadget_column_hash(&mut cs, &nums);
            hashes.push(h.get_value().unwrap());
            gadget_inclusion::<U, V, W, _>(&mut cs, &h, &comm_c, path);
        }
        let mut roots = Vec::new();
        assert_tape_matches(&cs.aux[1..], |t| {
            for (rows, path) in &openings {
                roots.push(column_opening(t, shape, rows, path));
            }
        });
        assert_eq!(roots.last(), cs.aux.last());
        assert_eq!(cs.inputs.len(), openings.len());
        // The column hashes are the vanilla ones (neptune's out-of-circuit `Poseidon::hash`).
        for ((rows, _), h) in openings.iter().zip(hashes) {
            let domains = rows.iter().map(|&r| r.into()).collect();
            assert_eq!(
                VanillaColumn::<PoseidonHasher>::new(0, domains)
                    .unwrap()
                    .hash(),
                h
            );
        }
    }

    #[test]
    fn column_openings_match_gadget_2_layers() {
        // 2 KiB / 8 MiB / 512 MiB sectors: 2 layers, trees (8, 0, 0).
        check_openings::<U8, U0, U0>(TreeShape::OCT, 2, 2, 1);
    }

    #[test]
    fn column_openings_match_gadget_11_layers() {
        // 32 GiB (8, 8, 0) and 64 GiB (8, 8, 2), 11 layers.
        check_openings::<U8, U8, U0>(TreeShape::OCT_SUB8, 11, 9, 2);
        check_openings::<U8, U8, U2>(TreeShape::OCT_SUB8_TOP2, 11, 9, 3);
    }

    #[test]
    fn encode_matches_gadget() {
        let mut rng = rng(5);
        let (k, v) = (fr(&mut rng), fr(&mut rng));
        let mut cs = AuxRecorder::default();
        let n = alloc_nums(&mut cs, &[k, v]);
        let e = storage_proofs_core::gadgets::encode::encode(&mut cs, &n[0], &n[1]).unwrap();
        let mut out = Fr::ZERO;
        assert_tape_matches(&cs.aux[2..], |t| out = encode(t, k, v));
        assert_eq!(Some(out), e.get_value());
        assert_eq!(cs.aux.len(), 3);
    }
}
