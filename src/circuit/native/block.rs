//! One challenge block of the PoRep circuit, natively: the composition of the native gadgets
//! in the order of `storage-proofs-porep` `stacked::circuit::params::Proof::synthesize`
//! (19.1), and the partition driver that runs it one challenge per task.
//!
//! Per challenge, in allocation order (the circuit's own):
//! 1. the data leaf, and its path in tree D (binary, SHA-256 nodes) — one input, the packed
//!    path bits (= the challenge);
//! 2. for each of the 6 DRG and then 8 expander parents: its column (one value per layer), the
//!    column's Poseidon hash, and its path in tree C — one input each;
//! 3. the challenge as 64 allocated bits — one input, their packing;
//! 4. per layer `1..=L`: the bits of each parent's label (6 DRG parents on layer 1, 6 + 8
//!    after), then the label: SHA-256 over the replica id, layer, node and the 37 expanded
//!    parents, packed into a field element;
//! 5. the encoding (last label + data leaf) and its path in tree R — one input;
//! 6. the Poseidon hash of the challenged node's labels and its path in tree C — one input.
//!
//! The prefix (replica id, commitments, comm_r = H(comm_c, comm_r_last)) is a few hundred
//! values: it is written by the gadgets themselves (`witness::write_prefix`).

use blstrs::Scalar as Fr;
use filecoin_proofs::DefaultPieceHasher;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait, MerkleTreeTrait};
use storage_proofs_porep::stacked::{self, StackedCircuit};

use super::por::TreeShape;
use super::sha256::{self, Bit};
use super::{column, por, poseidon, Tape};
use crate::circuit::witness::{self, Task, TaskError, Witness};
use crate::circuit::Layout;
use crate::error::{Error, Result};
use ff::Field;
use sha2::digest::typenum::Unsigned;

type Vanilla<Tree> = stacked::Proof<Tree, DefaultPieceHasher>;
type TreeProof<Tree> = MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// DRG parents per node (the base graph's degree) and expander parents, in every PoRep proof
/// type of filecoin-proofs v1.1.
const DRG_PARENTS: usize = 6;
const EXP_PARENTS: usize = 8;
/// Parents hashed per label: 37 (the labeling's repetition of the 14, or 6 on layer 1).
const LABEL_PARENTS: usize = 37;

/// The native witness of partition `k` (see the module docs) into `w`, with the driver and
/// buffer rules of [`witness::generate_into`]; the values equal the gadget path's
/// ([`crate::circuit::porep::witness_into`]) — tested on every sector size we have.
///
/// # Errors
/// [`Error::InvalidInput`] when the vanilla proofs do not have the circuit's shape (counts,
/// missing path values, inconsistent commitments); [`Error::Synthesis`] when the native
/// routine allocates another number of values than the compiled layout (it does not mirror
/// the recorded circuit).
pub fn witness_into<Tree: 'static + MerkleTreeTrait>(
    layout: &Layout,
    public_inputs: &crate::circuit::porep::PublicInputs<Tree>,
    vanilla: &[Vanilla<Tree>],
    pp: &crate::circuit::porep::PublicParams<Tree>,
    k: usize,
    w: &mut Witness,
) -> Result<()> {
    if vanilla.len() != layout.challenges {
        return Err(Error::InvalidInput(format!(
            "partition {k}: {} vanilla proofs for {} challenges",
            vanilla.len(),
            layout.challenges
        )));
    }
    let bad = |m: &str| Error::InvalidInput(format!("partition {k}: {m}"));
    let tau = public_inputs
        .tau
        .as_ref()
        .ok_or_else(|| bad("no comm_d / comm_r"))?;
    let first = vanilla.first().ok_or_else(|| bad("no vanilla proofs"))?;
    let (comm_r_last, comm_c) = (first.comm_r_last(), first.comm_c());
    if vanilla
        .iter()
        .any(|p| p.comm_r_last() != comm_r_last || p.comm_c() != comm_c)
    {
        return Err(bad("inconsistent comm_c / comm_r_last"));
    }
    let replica_id: Fr = public_inputs.replica_id.into();
    // The prefix's `reverse_bit_numbering(to_bits_le(replica_id))`: variables there, whose
    // values the blocks read (allocated on a scratch tape here; the prefix writes its own).
    let replica_bits = {
        let mut scratch = vec![Fr::ZERO; 256];
        sha256::reverse_bit_numbering(sha256::num_to_bits_le(
            &mut Tape::new(&mut scratch),
            &replica_id,
        ))
    };
    let layers = pp.num_layers;
    witness::generate_tasks_into(layout, k, w, |i, task: &mut Task<'_>| {
        if let Some((input, aux)) = task.prefix.take() {
            witness::write_prefix(layout, input, aux, |cs| {
                StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
                    cs,
                    Some(public_inputs.replica_id),
                    Some(tau.comm_d),
                    Some(tau.comm_r),
                    Some(comm_r_last),
                    Some(comm_c),
                    Vec::new(),
                )
            })?;
        }
        challenge::<Tree>(
            &vanilla[i],
            &replica_bits,
            layers,
            task.block_input,
            task.block_aux,
        )
    })
}

/// The levels of a Merkle path, `(siblings, index in the node)` from the leaf up, as the
/// circuit's `AuthPath` takes them (`MerkleProofTrait::as_options`).
fn levels<P: MerkleProofTrait>(p: &P) -> std::result::Result<Vec<(Vec<Fr>, usize)>, String> {
    p.as_options()
        .into_iter()
        .map(|(hashes, index)| {
            let hashes = hashes.into_iter().collect::<Option<Vec<Fr>>>();
            match (hashes, index) {
                (Some(h), Some(i)) => Ok((h, i)),
                _ => Err("a Merkle path without values".to_string()),
            }
        })
        .collect()
}

/// The inclusion proof of a vanilla column proof (a field the crate does not expose: read back
/// through its serde form, which filecoin-proofs' C1 output already uses).
fn column_levels<Tree: 'static + MerkleTreeTrait>(
    cp: &stacked::ColumnProof<TreeProof<Tree>>,
) -> std::result::Result<Vec<(Vec<Fr>, usize)>, String> {
    let v = serde_json::to_value(cp).map_err(|e| format!("column proof: {e}"))?;
    let p = v
        .get("inclusion_proof")
        .cloned()
        .ok_or("a column proof without its inclusion proof")?;
    let proof: TreeProof<Tree> =
        serde_json::from_value(p).map_err(|e| format!("column inclusion proof: {e}"))?;
    levels(&proof)
}

/// The values (and inputs) of one challenge block, in the circuit's order (module docs).
fn challenge<Tree: 'static + MerkleTreeTrait>(
    p: &Vanilla<Tree>,
    replica_bits: &[Bit],
    layers: usize,
    inputs: &mut [Fr],
    aux: &mut [Fr],
) -> std::result::Result<(), TaskError> {
    let rc = &p.replica_column_proofs;
    if rc.drg_parents.len() != DRG_PARENTS || rc.exp_parents.len() != EXP_PARENTS {
        return Err(TaskError::Error(Error::InvalidInput(format!(
            "{} DRG and {} expander parents, the circuit has {DRG_PARENTS} and {EXP_PARENTS}",
            rc.drg_parents.len(),
            rc.exp_parents.len()
        ))));
    }
    let mut t = Tape::new(aux);
    let mut packed = Vec::with_capacity(inputs.len());
    let shape = TreeShape::new(
        Tree::Arity::to_usize(),
        Tree::SubTreeArity::to_usize(),
        Tree::TopTreeArity::to_usize(),
    );
    let sha_node =
        |t: &mut Tape<'_>, c: &[Fr], _: usize| sha256::hash_multi_leaf2(t, &[c[0], c[1]]);

    // 1. Data leaf and its path in tree D.
    let data_leaf: Fr = p.comm_d_proofs.leaf().into();
    t.alloc(data_leaf);
    let d = levels(&p.comm_d_proofs)?;
    por::por_path(&mut t, TreeShape::BINARY, data_leaf, &d, sha_node);
    packed.push(por::path_input(TreeShape::BINARY, &d));

    // 2. Parent columns, their hashes and paths in tree C.
    let mut columns: Vec<Vec<Fr>> = Vec::with_capacity(DRG_PARENTS + EXP_PARENTS);
    for cp in rc.drg_parents.iter().chain(&rc.exp_parents) {
        let rows = (1..=layers)
            .map(|l| cp.get_node_at_layer(l).map(|&d| d.into()))
            .collect::<std::result::Result<Vec<Fr>, _>>()
            .map_err(|e| format!("parent column: {e:#}"))?;
        let path = column_levels::<Tree>(cp)?;
        column::column_opening(&mut t, shape, &rows, &path);
        packed.push(por::path_input(shape, &path));
        columns.push(rows);
    }

    // 3. The challenge's 64 bits.
    let node = p.comm_d_proofs.path_index() as u64;
    let node_bits = sha256::uint64_alloc(&mut t, node);
    packed.push(Fr::from(node));

    // 4. The labels of the challenged node, layer by layer.
    let label_bits =
        |t: &mut Tape<'_>, v: &Fr| sha256::reverse_bit_numbering(sha256::num_to_bits_le(t, v));
    let mut labels = Vec::with_capacity(layers);
    for layer in 1..=layers {
        let mut parents: Vec<Vec<Bit>> = Vec::with_capacity(DRG_PARENTS + EXP_PARENTS);
        for col in &columns[..DRG_PARENTS] {
            parents.push(label_bits(&mut t, &col[layer - 1]));
        }
        if layer > 1 {
            for col in &columns[DRG_PARENTS..] {
                parents.push(label_bits(&mut t, &col[layer - 2]));
            }
        }
        let mut expanded: Vec<&[Bit]> = Vec::with_capacity(LABEL_PARENTS);
        while expanded.len() < LABEL_PARENTS {
            let take = (LABEL_PARENTS - expanded.len()).min(parents.len());
            expanded.extend(parents[..take].iter().map(|b| &b[..]));
        }
        labels.push(sha256::create_label(
            &mut t,
            replica_bits,
            &expanded,
            layer as u32,
            &node_bits,
        ));
    }

    // 5. The encoding (key = last label) and its path in tree R.
    let key = *labels
        .last()
        .ok_or_else(|| "a circuit without layers".to_string())?;
    let encoded = column::encode(&mut t, key, data_leaf);
    let r = levels(&p.comm_r_last_proof)?;
    por::por_path(&mut t, shape, encoded, &r, poseidon::poseidon_node);
    packed.push(por::path_input(shape, &r));

    // 6. The challenged node's column hash and its path in tree C.
    let hash = column::column_hash(&mut t, &labels);
    let c = column_levels::<Tree>(&rc.c_x)?;
    por::por_path(&mut t, shape, hash, &c, poseidon::poseidon_node);
    packed.push(por::path_input(shape, &c));

    t.finish().map_err(|(got, want)| {
        format!("the native witness allocated {got} aux values, the compiled circuit has {want}")
    })?;
    if packed.len() != inputs.len() {
        return Err(format!(
            "the native witness has {} inputs per challenge, the compiled circuit {}",
            packed.len(),
            inputs.len()
        )
        .into());
    }
    inputs.copy_from_slice(&packed);
    Ok(())
}
