//! Witness generation in parallel, one task per challenge.
//!
//! A PoRep partition is a shared prefix (replica id and its bits, comm_d, comm_r, comm_c,
//! comm_r_last and the check comm_r = H(comm_c, comm_r_last)) followed by one block per
//! challenge that only reads the prefix's variables. Each task synthesizes the circuit of *one*
//! challenge — the prefix again (cheap), then its block — into a witness-only constraint system
//! (`WitnessWriter`: `enforce` does nothing, no linear combination is built) that writes every
//! value straight into that challenge's slice of the partition's input and aux vectors, so the
//! variables get the indices of the full circuit. The tasks run on the process-wide rayon pool,
//! shared by every partition and every concurrent call.
//!
//! Nothing here is trusted: the assignment is checked against the recorded R1CS (a∘b = c on
//! every constraint) and the public inputs before any MSM.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;
use rayon::prelude::*;

use super::Layout;
use crate::error::{Error, Result};

/// The witness z = (inputs ‖ aux) of one partition, in the full circuit's variable order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Witness {
    /// Inputs; `input[0]` is the constant one.
    pub input: Vec<Fr>,
    /// Aux variables.
    pub aux: Vec<Fr>,
}

/// A witness-only constraint system writing into one challenge's slices (see the module docs).
pub(crate) struct WitnessWriter<'a> {
    prefix: Option<(&'a mut [Fr], &'a mut [Fr])>,
    block_input: &'a mut [Fr],
    block_aux: &'a mut [Fr],
    prefix_inputs: usize,
    prefix_aux: usize,
    inputs: usize,
    aux: usize,
}

impl WitnessWriter<'_> {
    /// Writes the value of variable `slot` (numbered as in the full circuit): into the prefix
    /// slice (task 0 only; the other tasks replay the prefix and drop its values) or into this
    /// challenge's block. Inlined into `alloc`: it runs once per variable (1.3 M times per 2 KiB
    /// challenge), so it is kept to one compare on the block path.
    #[inline(always)]
    fn put(
        slot: usize,
        split: usize,
        prefix: Option<&mut [Fr]>,
        block: &mut [Fr],
        v: Fr,
    ) -> std::result::Result<(), SynthesisError> {
        match slot.checked_sub(split) {
            // More variables than the compiled layout has: not the recorded circuit.
            Some(j) => *block.get_mut(j).ok_or(SynthesisError::Unsatisfiable)? = v,
            None => {
                if let Some(p) = prefix {
                    p[slot] = v;
                }
            }
        }
        Ok(())
    }
}

impl ConstraintSystem<Fr> for WitnessWriter<'_> {
    type Root = Self;

    #[inline(always)]
    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let i = self.aux;
        let prefix = self.prefix.as_mut().map(|(_, a)| &mut **a);
        Self::put(i, self.prefix_aux, prefix, self.block_aux, v)?;
        self.aux = i + 1;
        Ok(Variable::new_unchecked(Index::Aux(i)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> std::result::Result<Variable, SynthesisError>
    where
        F: FnOnce() -> std::result::Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = f()?;
        let i = self.inputs;
        let prefix = self.prefix.as_mut().map(|(p, _)| &mut **p);
        Self::put(i, self.prefix_inputs, prefix, self.block_input, v)?;
        self.inputs = i + 1;
        Ok(Variable::new_unchecked(Index::Input(i)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

/// Generates the witness of one partition: `make(i)` builds the circuit of challenge `i` alone
/// (prefix + block `i`); the tasks run in parallel on the rayon pool.
///
/// Output: `layout.num_inputs()` inputs and `layout.num_aux()` aux values (a 32 GiB partition:
/// 328 and 130,169,893, 4.2 GB), in new vectors ([`generate_into`] writes into given ones).
///
/// # Errors
/// [`Error::Synthesis`] naming the challenge when its circuit fails (e.g. a missing value), or
/// when it allocates a different number of variables than the compiled layout (the circuit is
/// not the recorded one).
#[cfg(any(test, feature = "internals"))]
pub fn generate<C, F>(layout: &Layout, partition: usize, make: F) -> Result<Witness>
where
    C: bellperson::Circuit<Fr>,
    F: Fn(usize) -> Result<C> + Sync,
{
    let mut w = Witness::default();
    generate_into(layout, partition, make, &mut w)?;
    Ok(w)
}

/// Makes `v` hold exactly `n` initialised values without moving an allocation it already has:
/// a vector without capacity gets a new zeroed one; one with capacity ≥ `n` is truncated, or
/// extended with zeros in parallel (its values are otherwise left: the witness tasks overwrite
/// every slot).
///
/// # Errors
/// [`Error::Internal`] when `v` has capacity but less than `n` (growing it would reallocate a
/// buffer that may be page-locked), or if its address moved all the same.
fn size_in_place(v: &mut Vec<Fr>, n: usize, what: &str) -> Result<()> {
    if v.capacity() == 0 {
        *v = vec![Fr::ZERO; n];
        return Ok(());
    }
    if v.capacity() < n {
        return Err(Error::Internal(format!(
            "witness {what} buffer holds {} values, the circuit has {n}",
            v.capacity()
        )));
    }
    let ptr = v.as_ptr();
    if v.len() >= n {
        v.truncate(n);
    } else {
        let more = n - v.len();
        v.par_extend(rayon::iter::repeat_n(Fr::ZERO, more));
    }
    if v.as_ptr() != ptr {
        return Err(Error::Internal(format!(
            "witness {what} buffer moved while sized to {n} values"
        )));
    }
    Ok(())
}

/// [`generate`] into `w`'s vectors: each is made to hold exactly the layout's count **in its
/// own allocation** when it has one (a pooled, page-locked buffer of
/// [`crate::gpu::memory::hostpool`] keeps its address, so its registration still covers it); a
/// vector without capacity gets a new one. Every slot is written by the tasks (each allocates
/// exactly its block's variables, checked), so a reused buffer is not cleared first: on success the
/// values equal [`generate`]'s whatever the buffer held.
///
/// # Errors
/// As [`generate`]; [`Error::Internal`] when a vector has capacity but less than the layout's
/// count (it is left as it was).
pub fn generate_into<C, F>(
    layout: &Layout,
    partition: usize,
    make: F,
    w: &mut Witness,
) -> Result<()>
where
    C: bellperson::Circuit<Fr>,
    F: Fn(usize) -> Result<C> + Sync,
{
    let (p, b) = (layout.prefix, layout.block);
    generate_tasks_into(layout, partition, w, |i, task| {
        let circuit = make(i)?;
        let mut cs = WitnessWriter {
            prefix: task.prefix.take(),
            block_input: task.block_input,
            block_aux: task.block_aux,
            prefix_inputs: p.inputs,
            prefix_aux: p.aux,
            inputs: 0,
            aux: 0,
        };
        cs.alloc_input(|| "one", || Ok(Fr::ONE))
            .map_err(|e| e.to_string())?;
        circuit.synthesize(&mut cs).map_err(|e| {
            format!(
                "{e} (after {} inputs and {} aux variables)",
                cs.inputs, cs.aux
            )
        })?;
        let want = (p.inputs + b.inputs, p.aux + b.aux);
        if (cs.inputs, cs.aux) != want {
            return Err(format!(
                "allocated {} inputs and {} aux variables, the compiled circuit has {} and {}",
                cs.inputs, cs.aux, want.0, want.1
            )
            .into());
        }
        Ok(())
    })
}

/// The witness of a partition whose blocks cannot be synthesized one at a time (a circuit
/// compiled whole, [`super::CompiledCircuit::compile_whole`]): `circuit`, the partition's full
/// circuit, synthesized once on this thread into `w`'s vectors (sized in place as
/// [`generate_into`] does). Partitions run in parallel, not the blocks of one.
///
/// # Errors
/// [`Error::Synthesis`] when the circuit fails or allocates another number of variables than
/// the layout has (not the recorded circuit); [`Error::Internal`] when a vector of `w` has
/// capacity but too little.
pub fn generate_whole_into<C: bellperson::Circuit<Fr>>(
    layout: &Layout,
    partition: usize,
    circuit: C,
    w: &mut Witness,
) -> Result<()> {
    for (v, n, what) in [
        (&mut w.input, layout.num_inputs(), "input"),
        (&mut w.aux, layout.num_aux(), "aux"),
    ] {
        size_in_place(v, n, what)?;
    }
    let (inputs, aux) = (layout.num_inputs(), layout.num_aux());
    let mut cs = WitnessWriter {
        prefix: Some((&mut w.input[..], &mut w.aux[..])),
        block_input: &mut [],
        block_aux: &mut [],
        prefix_inputs: inputs,
        prefix_aux: aux,
        inputs: 0,
        aux: 0,
    };
    let synthesis = |message: String| Error::Synthesis { partition, message };
    cs.alloc_input(|| "one", || Ok(Fr::ONE))
        .map_err(|e| synthesis(e.to_string()))?;
    circuit.synthesize(&mut cs).map_err(|e| {
        synthesis(format!(
            "witness: {e} (after {} inputs and {} aux variables)",
            cs.inputs, cs.aux
        ))
    })?;
    if (cs.inputs, cs.aux) != (inputs, aux) {
        return Err(synthesis(format!(
            "witness: allocated {} inputs and {} aux variables, the compiled circuit has {inputs} \
             and {aux}",
            cs.inputs, cs.aux
        )));
    }
    Ok(())
}

/// The slices one witness task writes: the prefix (task 0 only), then its challenge block.
pub struct Task<'a> {
    /// The prefix's inputs and aux values, `Some` for the task of challenge 0 alone.
    pub prefix: Option<(&'a mut [Fr], &'a mut [Fr])>,
    /// This challenge block's inputs (`layout.block.inputs` values).
    pub block_input: &'a mut [Fr],
    /// This challenge block's aux values (`layout.block.aux` values).
    pub block_aux: &'a mut [Fr],
}

/// A witness task's failure: a message (wrapped into [`Error::Synthesis`] naming the
/// partition and challenge) or an error that is passed on as it is.
pub enum TaskError {
    /// Becomes [`Error::Synthesis`] with the partition and challenge.
    Message(String),
    /// Returned unchanged (e.g. [`Error::InvalidInput`] for an inconsistent vanilla proof).
    Error(Error),
}

impl From<String> for TaskError {
    fn from(m: String) -> Self {
        TaskError::Message(m)
    }
}

impl From<Error> for TaskError {
    fn from(e: Error) -> Self {
        TaskError::Error(e)
    }
}

/// Sizes `w` to the layout as [`generate_into`] does, then runs `task(i, slices)` for every
/// challenge `i` in parallel on the rayon pool: the one driver of the gadget path
/// ([`generate_into`]) and the native path ([`super::native`]). `task` must write every value
/// of its slices (and of the prefix, when it gets it).
///
/// # Errors
/// As [`generate_into`]; a task's [`TaskError`].
pub fn generate_tasks_into<F>(
    layout: &Layout,
    partition: usize,
    w: &mut Witness,
    task: F,
) -> Result<()>
where
    F: Fn(usize, &mut Task<'_>) -> std::result::Result<(), TaskError> + Sync,
{
    let (p, b) = (layout.prefix, layout.block);
    for (v, n, what) in [
        (&w.input, layout.num_inputs(), "input"),
        (&w.aux, layout.num_aux(), "aux"),
    ] {
        if v.capacity() != 0 && v.capacity() < n {
            return Err(Error::Internal(format!(
                "witness {what} buffer holds {} values, the circuit has {n}",
                v.capacity()
            )));
        }
    }
    size_in_place(&mut w.input, layout.num_inputs(), "input")?;
    size_in_place(&mut w.aux, layout.num_aux(), "aux")?;
    let (prefix_in, blocks_in) = w.input.split_at_mut(p.inputs);
    let (prefix_aux, blocks_aux) = w.aux.split_at_mut(p.aux);
    let mut prefix = Some((prefix_in, prefix_aux));
    // Zero-length blocks still need one slice each for `zip`.
    let chunk = |len: usize| len.max(1);
    let mut tasks: Vec<(usize, Task<'_>)> = blocks_in
        .chunks_mut(chunk(b.inputs))
        .chain(std::iter::repeat_with(|| &mut [][..]))
        .zip(
            blocks_aux
                .chunks_mut(chunk(b.aux))
                .chain(std::iter::repeat_with(|| &mut [][..])),
        )
        .take(layout.challenges)
        .enumerate()
        .map(|(i, (bi, ba))| {
            let t = Task {
                prefix: if i == 0 { prefix.take() } else { None },
                block_input: bi,
                block_aux: ba,
            };
            (i, t)
        })
        .collect();
    tasks.par_iter_mut().try_for_each(|(i, t)| -> Result<()> {
        task(*i, t).map_err(|e| match e {
            TaskError::Message(m) => Error::Synthesis {
                partition,
                message: format!("witness of challenge {i}: {m}"),
            },
            TaskError::Error(e) => e,
        })
    })
}

/// Writes the prefix of a partition (`input`: its `layout.prefix.inputs` values, the constant
/// one first; `aux`: its `layout.prefix.aux` values) by running `synthesize` — the circuit with
/// no challenge — into a witness-only constraint system: the native path's prefix, which is
/// the gadgets' own (a few hundred values: the replica id and its bits, the commitments, one
/// Poseidon hash).
///
/// # Errors
/// The gadget's error, or a message when it allocates another number of prefix variables than
/// the layout has.
pub(crate) fn write_prefix<F>(
    layout: &Layout,
    input: &mut [Fr],
    aux: &mut [Fr],
    synthesize: F,
) -> std::result::Result<(), String>
where
    F: FnOnce(&mut WitnessWriter<'_>) -> std::result::Result<(), SynthesisError>,
{
    let p = layout.prefix;
    let mut cs = WitnessWriter {
        prefix: Some((input, aux)),
        block_input: &mut [],
        block_aux: &mut [],
        prefix_inputs: p.inputs,
        prefix_aux: p.aux,
        inputs: 0,
        aux: 0,
    };
    cs.alloc_input(|| "one", || Ok(Fr::ONE))
        .map_err(|e| e.to_string())?;
    synthesize(&mut cs).map_err(|e| format!("prefix: {e}"))?;
    if (cs.inputs, cs.aux) != (p.inputs, p.aux) {
        return Err(format!(
            "the prefix allocated {} inputs and {} aux variables, the compiled circuit has {} and {}",
            cs.inputs, cs.aux, p.inputs, p.aux
        ));
    }
    Ok(())
}
