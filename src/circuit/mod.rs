//! The compiled circuit: a proof type's R1CS recorded once from the `storage-proofs-porep`
//! circuit itself, as CSR matrices A, B, C with deduplicated coefficients, its input/aux layout
//! (a shared prefix and one block per challenge), and the A/B density bitmaps.
//!
//! With it, synthesizing a partition is (1) the witness z alone, generated one challenge per
//! task in parallel ([`witness::generate`]), then (2) a = A·z, b = B·z, c = C·z by sparse
//! matrix–vector products ([`CompiledCircuit::evaluate`] on the CPU; the GPU backend can do the
//! same on the device), then (3) the R1CS check a∘b = c before any MSM — which is what makes a
//! fast witness routine safe: a witness the recorded constraints do not accept is an error.
//!
//! Recording: the blank circuit of *one* block (the prefix, then one block: a PoRep challenge,
//! a PoSt sector; [`record::Blocks`]) is recorded ([`record`]); the blocks of a blank circuit
//! are the same code on the same (empty) data, so the partition's matrices are the prefix's
//! rows, then the block's rows once per block with the block's variables shifted to that
//! block's range, then bellperson's one constraint `input_i · 0 = 0` per input. Tests compare this with recording the full
//! circuit and, on real sectors, the resulting a, b, c and densities with the reference
//! synthesis ([`crate::synth::Assignment::synthesize`]). A circuit whose blocks read
//! different prefix variables (SnapDeals: each challenge its own bits of the prefix's digests)
//! is recorded whole instead ([`CompiledCircuit::compile_whole`]: its blocks are still found
//! and checked, but not repeated), and its witness made by one synthesis per partition.
//!
//! Sizes (non-zeros per matrix; 8 bytes each in memory and on disk):
//! 2 KiB — see BENCHMARKS.md; a 32 GiB partition — A ~309 M, B ~130 M, C ~283 M (Curio's cuzk
//! reports these for the same circuit).

pub mod cache;
pub mod csr;
pub mod native;
pub mod porep;
pub mod post;
pub mod record;
pub mod snap;
pub mod witness;

#[cfg(any(test, feature = "internals"))]
use std::ops::Range;

use blstrs::Scalar as Fr;
use rayon::prelude::*;

pub use csr::{CoeffTable, Csr};
pub use record::{Blocks, Counts};
pub use witness::Witness;

use crate::error::{Error, Result};
use crate::synth::{Assignment, Density};
use record::{Recorder, AUX_TAG};

/// Where the variables and constraints of a partition lie: the shared prefix (the constant one,
/// replica id, comm_d, comm_r, comm_c, comm_r_last, …), then `challenges` blocks of equal size.
/// After the blocks come the per-input constraints (one per input, bellperson's convention).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Counts of the prefix (inputs include the constant one).
    pub prefix: Counts,
    /// Counts of one challenge block.
    pub block: Counts,
    /// Number of blocks per partition: PoRep challenges (2 for 2 KiB … 512 MiB, 18 for
    /// 32/64 GiB), PoSt sectors (WindowPoSt: 2 for 2 KiB, 2349 for 32 GiB; WinningPoSt: 66,
    /// one per challenge) or SnapDeals challenges (10 for 2 KiB and 8 MiB, 86 from 512 MiB).
    pub challenges: usize,
}

impl Layout {
    /// Inputs of the partition, the constant one included.
    pub fn num_inputs(&self) -> usize {
        self.prefix.inputs + self.challenges * self.block.inputs
    }

    /// Aux variables of the partition.
    pub fn num_aux(&self) -> usize {
        self.prefix.aux + self.challenges * self.block.aux
    }

    /// Constraints, the per-input constraints included (= rows of A, B, C).
    pub fn num_constraints(&self) -> usize {
        self.prefix.constraints + self.challenges * self.block.constraints + self.num_inputs()
    }

    /// Aux variables of challenge `i`.
    #[cfg(any(test, feature = "internals"))]
    pub fn challenge_aux(&self, i: usize) -> Range<usize> {
        let s = self.prefix.aux + i * self.block.aux;
        s..s + self.block.aux
    }

    /// Inputs of challenge `i`.
    #[cfg(any(test, feature = "internals"))]
    pub fn challenge_inputs(&self, i: usize) -> Range<usize> {
        let s = self.prefix.inputs + i * self.block.inputs;
        s..s + self.block.inputs
    }

    /// Constraints of challenge `i`.
    #[cfg(any(test, feature = "internals"))]
    pub fn challenge_constraints(&self, i: usize) -> Range<usize> {
        let s = self.prefix.constraints + i * self.block.constraints;
        s..s + self.block.constraints
    }
}

/// A proof type's compiled circuit (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompiledCircuit {
    /// Variable and constraint layout.
    pub layout: Layout,
    /// The A matrix (`num_constraints` rows; columns are variables of z = inputs ‖ aux).
    pub a: Csr,
    /// The B matrix.
    pub b: Csr,
    /// The C matrix.
    pub c: Csr,
    /// Distinct coefficients of A, B, C.
    pub coeffs: CoeffTable,
    /// Aux variables used by the A query.
    pub a_aux_density: Density,
    /// Inputs used by the B query.
    pub b_input_density: Density,
    /// Aux variables used by the B query.
    pub b_aux_density: Density,
}

impl CompiledCircuit {
    /// Compiles a partition of `challenges` blocks from the blank circuit of one block
    /// (`one_challenge`: the prefix and a single block where `blocks` says, no values).
    ///
    /// # Errors
    /// [`Error::Internal`] when the circuit does not have the expected shape (no or more than one
    /// block namespace, variables after it) or outgrows the 32-bit CSR.
    pub fn compile<C: bellperson::Circuit<Fr>>(
        one_challenge: C,
        blocks: Blocks,
        challenges: usize,
    ) -> Result<Self> {
        let rec = Recorder::record(one_challenge, blocks)
            .map_err(|e| Error::Internal(format!("recording the circuit: {e}")))?;
        let layout = layout_of_recording(&rec, challenges)?;
        let assemble = |m: &Csr, input_rows: bool| assemble(&layout, m, input_rows);
        let (a, (b, c)) = rayon::join(
            || assemble(&rec.a.m, true),
            || rayon::join(|| assemble(&rec.b.m, false), || assemble(&rec.c.m, false)),
        );
        Self::from_parts(layout, a?, b?, c?, rec.coeffs)
    }

    /// Compiles a partition from its whole blank circuit (`circuit`: every block, no values),
    /// for circuits whose blocks read different prefix variables (the SnapDeals circuit: each
    /// challenge its own bits of the prefix's challenge digests), so that one recorded block
    /// cannot stand for the others. The layout is the recorded one (`challenges` blocks, checked
    /// to be of one size and to follow the prefix in order, [`Blocks`]); the matrices are the
    /// recording's as they are, plus bellperson's per-input constraints. Costs a synthesis of
    /// the whole blank circuit (~1 µs per constraint on one core) and the matrices once.
    ///
    /// # Errors
    /// [`Error::Internal`] when the circuit does not have that shape or outgrows the 32-bit CSR.
    pub fn compile_whole<C: bellperson::Circuit<Fr>>(
        circuit: C,
        blocks: Blocks,
        challenges: usize,
    ) -> Result<Self> {
        let rec = Recorder::record(circuit, blocks)
            .map_err(|e| Error::Internal(format!("recording the circuit: {e}")))?;
        let layout = layout_of_whole_recording(&rec, challenges)?;
        let whole = |m: Csr, input_rows: bool| whole_matrix(m, &layout, input_rows);
        let (a, (b, c)) = rayon::join(
            || whole(rec.a.m, true),
            || rayon::join(|| whole(rec.b.m, false), || whole(rec.c.m, false)),
        );
        Self::from_parts(layout, a?, b?, c?, rec.coeffs)
    }

    /// Builds the circuit from its matrices (computing the densities), checking every structural
    /// invariant — what a cache file is checked with before it is used.
    ///
    /// # Errors
    /// [`Error::Internal`] naming the first broken invariant.
    pub fn from_parts(layout: Layout, a: Csr, b: Csr, c: Csr, coeffs: CoeffTable) -> Result<Self> {
        let (rows, vars) = (
            layout.num_constraints(),
            layout.num_inputs() + layout.num_aux(),
        );
        for (name, m) in [("A", &a), ("B", &b), ("C", &c)] {
            if m.rows() != rows || !m.is_well_formed(vars, coeffs.len()) {
                return Err(Error::Internal(format!(
                    "compiled circuit: matrix {name} is malformed ({} rows, {} expected)",
                    m.rows(),
                    rows
                )));
            }
        }
        let ni = layout.num_inputs();
        let density = |m: &Csr, inputs: bool| -> Density {
            let len = if inputs { ni } else { layout.num_aux() };
            let mut d = Density::with_len(len);
            for &col in &m.col {
                let col = col as usize;
                match (inputs, col < ni) {
                    (true, true) => d.set(col),
                    (false, false) => d.set(col - ni),
                    _ => {}
                }
            }
            d
        };
        let (a_aux_density, (b_input_density, b_aux_density)) = rayon::join(
            || density(&a, false),
            || rayon::join(|| density(&b, true), || density(&b, false)),
        );
        Ok(CompiledCircuit {
            layout,
            a,
            b,
            c,
            coeffs,
            a_aux_density,
            b_input_density,
            b_aux_density,
        })
    }

    /// The counts the parameters must match ([`crate::srs::Srs::check_counts`]).
    pub fn shape_counts(&self) -> crate::srs::ShapeCounts {
        crate::srs::ShapeCounts {
            inputs: self.layout.num_inputs(),
            aux: self.layout.num_aux(),
            constraints: self.layout.num_constraints(),
            a_aux: self.a_aux_density.count(),
            b_inputs: self.b_input_density.count(),
            b_aux: self.b_aux_density.count(),
        }
    }

    /// Bytes of the three matrices and the coefficient table (in memory, and on a device).
    pub fn matrix_bytes(&self) -> u64 {
        self.a.bytes() + self.b.bytes() + self.c.bytes() + 32 * self.coeffs.len() as u64
    }

    /// Checks that `w` has the layout's numbers of inputs and aux values (before a caller
    /// moves its vectors anywhere: [`CompiledCircuit::evaluate`] drops a witness it rejects).
    ///
    /// # Errors
    /// [`Error::Internal`] naming both shapes.
    pub fn check_witness(&self, w: &Witness) -> Result<()> {
        self.check_z(&w.input, &w.aux)
    }

    /// [`CompiledCircuit::check_witness`] on z's two vectors.
    fn check_z(&self, input: &[Fr], aux: &[Fr]) -> Result<()> {
        if input.len() != self.layout.num_inputs() || aux.len() != self.layout.num_aux() {
            return Err(Error::Internal(format!(
                "witness of {} inputs and {} aux for a circuit of {} and {}",
                input.len(),
                aux.len(),
                self.layout.num_inputs(),
                self.layout.num_aux()
            )));
        }
        Ok(())
    }

    /// a = A·z, b = B·z, c = C·z on the CPU (rayon), into the proving assignment the backends
    /// take, with the circuit's densities. Takes the witness (its vectors move into the result).
    ///
    /// # Errors
    /// [`Error::Internal`] when the witness does not have the layout's sizes.
    pub fn evaluate(&self, w: Witness) -> Result<Assignment> {
        let mut asg = Assignment {
            input: w.input,
            aux: w.aux,
            ..Assignment::default()
        };
        self.evaluate_in_place(&mut asg)?;
        Ok(asg)
    }

    /// [`CompiledCircuit::evaluate`] on an assignment that already holds z (`asg.input`,
    /// `asg.aux`, only read): sets `asg.a`, `asg.b`, `asg.c` and the densities. z never moves,
    /// so a pooled, page-locked aux stays with its owner on every path (an error or a panic
    /// included).
    ///
    /// # Errors
    /// [`Error::Internal`] when z does not have the layout's sizes (`asg` is left as it was).
    pub fn evaluate_in_place(&self, asg: &mut Assignment) -> Result<()> {
        self.check_z(&asg.input, &asg.aux)?;
        let (input, aux) = (&asg.input, &asg.aux);
        let (a, (b, c)) = rayon::join(
            || self.a.spmv(&self.coeffs, input, aux),
            || {
                rayon::join(
                    || self.b.spmv(&self.coeffs, input, aux),
                    || self.c.spmv(&self.coeffs, input, aux),
                )
            },
        );
        (asg.a, asg.b, asg.c) = (a, b, c);
        asg.a_aux_density = self.a_aux_density.clone();
        asg.b_input_density = self.b_input_density.clone();
        asg.b_aux_density = self.b_aux_density.clone();
        Ok(())
    }
}

/// The layout of a partition of `challenges` blocks from the recording of one block.
fn layout_of_recording(rec: &record::Recording, challenges: usize) -> Result<Layout> {
    let [b] = rec.blocks[..] else {
        return Err(Error::Internal(format!(
            "the circuit of one block opened {} blocks",
            rec.blocks.len()
        )));
    };
    if b.end != rec.end || challenges == 0 {
        return Err(Error::Internal(
            "the circuit allocates variables after its blocks".into(),
        ));
    }
    Ok(Layout {
        prefix: b.start,
        block: counts_between(b.start, b.end),
        challenges,
    })
}

/// What was allocated from `start` to `end`.
fn counts_between(start: Counts, end: Counts) -> Counts {
    Counts {
        inputs: end.inputs - start.inputs,
        aux: end.aux - start.aux,
        constraints: end.constraints - start.constraints,
    }
}

/// The layout of a whole recorded partition of `challenges` blocks: the blocks must be
/// numbered 0, 1, … in order, follow each other with nothing between them, end the circuit,
/// and allocate the same numbers of variables and constraints.
fn layout_of_whole_recording(rec: &record::Recording, challenges: usize) -> Result<Layout> {
    let shape_error = |what: String| Err(Error::Internal(format!("recorded circuit: {what}")));
    if rec.blocks.len() != challenges || challenges == 0 {
        return shape_error(format!(
            "{} blocks, expected {challenges}",
            rec.blocks.len()
        ));
    }
    let first = rec.blocks[0];
    let block = counts_between(first.start, first.end);
    let mut at = first.start;
    for (i, b) in rec.blocks.iter().enumerate() {
        if b.index != i {
            return shape_error(format!("block {} where block {i} was expected", b.index));
        }
        if b.start != at {
            return shape_error(format!("variables or constraints before block {i}"));
        }
        if counts_between(b.start, b.end) != block {
            return shape_error(format!("block {i} is not the size of block 0"));
        }
        at = b.end;
    }
    if at != rec.end {
        return shape_error("variables or constraints after the blocks".into());
    }
    Ok(Layout {
        prefix: first.start,
        block,
        challenges,
    })
}

/// The layout [`CompiledCircuit::compile`] would give, without assembling the matrices.
///
/// # Errors
/// As [`CompiledCircuit::compile`].
#[cfg(any(test, feature = "internals"))]
pub fn layout_of<C: bellperson::Circuit<Fr>>(
    one_challenge: C,
    blocks: Blocks,
    challenges: usize,
) -> Result<Layout> {
    let rec = Recorder::record(one_challenge, blocks)
        .map_err(|e| Error::Internal(format!("recording the circuit: {e}")))?;
    layout_of_recording(&rec, challenges)
}

/// The layout [`CompiledCircuit::compile_whole`] would give, without assembling the matrices.
///
/// # Errors
/// As [`CompiledCircuit::compile_whole`].
#[cfg(any(test, feature = "internals"))]
pub fn layout_of_whole<C: bellperson::Circuit<Fr>>(
    circuit: C,
    blocks: Blocks,
    challenges: usize,
) -> Result<Layout> {
    let rec = Recorder::record(circuit, blocks)
        .map_err(|e| Error::Internal(format!("recording the circuit: {e}")))?;
    layout_of_whole_recording(&rec, challenges)
}

/// The partition's matrix from the recording `m` of the whole partition (columns tagged with
/// [`AUX_TAG`], laid out as `l`): aux columns moved after the inputs, then (for A) one row
/// `input_i` per input, empty rows for B and C.
fn whole_matrix(mut m: Csr, l: &Layout, input_rows: bool) -> Result<Csr> {
    let ni = l.num_inputs();
    let total = m.nnz() + if input_rows { ni } else { 0 };
    if total > u32::MAX as usize || ni + l.num_aux() >= AUX_TAG as usize {
        return Err(Error::Internal(format!(
            "compiled circuit: {total} non-zeros do not fit 32-bit CSR offsets"
        )));
    }
    let ni32 = ni as u32;
    m.col.par_iter_mut().for_each(|c| {
        if *c & AUX_TAG != 0 {
            *c = ni32 + (*c & !AUX_TAG);
        }
    });
    // The per-input constraints: input_i · 0 = 0.
    let mut n = m.nnz() as u32;
    m.row_ptr.reserve(ni);
    for i in 0..ni32 {
        if input_rows {
            m.col.push(i);
            m.coeff.push(csr::COEFF_ONE);
            n += 1;
        }
        m.row_ptr.push(n);
    }
    Ok(m)
}

/// The partition's matrix from the one-challenge recording `m` (columns tagged with
/// [`AUX_TAG`]): prefix rows, the block's rows once per challenge with its variables shifted,
/// then (for A) one row `input_i` per input, empty rows for B and C.
fn assemble(l: &Layout, m: &Csr, input_rows: bool) -> Result<Csr> {
    let (p, b) = (l.prefix, l.block);
    let ni = l.num_inputs();
    let prefix_nnz = m.row_ptr[p.constraints] as usize;
    let block_nnz = m.nnz() - prefix_nnz;
    let total = prefix_nnz + l.challenges * block_nnz + if input_rows { ni } else { 0 };
    if total > u32::MAX as usize || ni + l.num_aux() >= AUX_TAG as usize {
        return Err(Error::Internal(format!(
            "compiled circuit: {total} non-zeros do not fit 32-bit CSR offsets"
        )));
    }
    // Global column of a recorded column, for challenge `i` (prefix variables are shared).
    let map = |col: u32, i: usize| -> u32 {
        let (aux, k) = (col & AUX_TAG != 0, (col & !AUX_TAG) as usize);
        let g = match aux {
            false if k < p.inputs => k,
            false => p.inputs + i * b.inputs + (k - p.inputs),
            true if k < p.aux => ni + k,
            true => ni + p.aux + i * b.aux + (k - p.aux),
        };
        g as u32
    };
    let mut col = vec![0u32; total];
    let mut coeff = vec![0u32; total];
    let mut row_ptr = Vec::with_capacity(l.num_constraints() + 1);
    row_ptr.extend_from_slice(&m.row_ptr[..=p.constraints]);
    for i in 0..l.challenges {
        let base = (prefix_nnz + i * block_nnz) as u32;
        row_ptr.extend(
            m.row_ptr[p.constraints + 1..]
                .iter()
                .map(|&r| base + (r - prefix_nnz as u32)),
        );
    }
    let (pc, bc) = col.split_at_mut(prefix_nnz);
    let (pk, bk) = coeff.split_at_mut(prefix_nnz);
    pc.par_iter_mut()
        .zip(&m.col[..prefix_nnz])
        .for_each(|(d, &s)| *d = map(s, 0));
    pk.copy_from_slice(&m.coeff[..prefix_nnz]);
    if block_nnz > 0 {
        bc.par_chunks_mut(block_nnz)
            .zip(bk.par_chunks_mut(block_nnz))
            .take(l.challenges)
            .enumerate()
            .for_each(|(i, (dc, dk))| {
                for (d, &s) in dc.iter_mut().zip(&m.col[prefix_nnz..]) {
                    *d = map(s, i);
                }
                dk.copy_from_slice(&m.coeff[prefix_nnz..]);
            });
    }
    // The per-input constraints: input_i · 0 = 0.
    let mut n = (prefix_nnz + l.challenges * block_nnz) as u32;
    for i in 0..ni {
        if input_rows {
            col[n as usize] = i as u32;
            coeff[n as usize] = csr::COEFF_ONE;
            n += 1;
        }
        row_ptr.push(n);
    }
    Ok(Csr {
        row_ptr,
        col,
        coeff,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use bellperson::{Circuit, ConstraintSystem, SynthesisError};
    use ff::Field;

    /// A circuit shaped like the PoRep one: a prefix (x public, x² private), then `n` challenge
    /// namespaces each proving y_i = (x + c_i + 7)·x² with c_i private and y_i public.
    #[derive(Clone)]
    pub(crate) struct Toy {
        pub(crate) x: Option<u64>,
        pub(crate) c: Vec<u64>,
    }

    impl Circuit<Fr> for Toy {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let xv = self.x.map(Fr::from);
            let x = cs.alloc(|| "x", || xv.ok_or(SynthesisError::AssignmentMissing))?;
            let xi = cs.alloc_input(|| "x in", || xv.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(
                || "x = x in",
                |lc| lc + x,
                |lc| lc + CS::one(),
                |lc| lc + xi,
            );
            let sq = xv.map(|v| v * v);
            let x2 = cs.alloc(|| "x2", || sq.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| "x2", |lc| lc + x, |lc| lc + x, |lc| lc + x2);
            for (i, c) in self.c.iter().enumerate() {
                let mut cs = cs.namespace(|| format!("challenge_{i}"));
                let cf = self.x.map(|_| Fr::from(*c));
                let cv = cs.alloc(|| "c", || cf.ok_or(SynthesisError::AssignmentMissing))?;
                let t = xv.zip(cf).map(|(v, c)| v + c + Fr::from(7));
                let y = t.zip(sq).map(|(t, s)| t * s);
                let tv = cs.alloc(|| "t", || t.ok_or(SynthesisError::AssignmentMissing))?;
                cs.enforce(
                    || "t = x + c + 7",
                    |lc| lc + x + cv + (Fr::from(7), CS::one()),
                    |lc| lc + CS::one(),
                    |lc| lc + tv,
                );
                let yv = cs.alloc(|| "y", || y.ok_or(SynthesisError::AssignmentMissing))?;
                let yi =
                    cs.alloc_input(|| "y in", || y.ok_or(SynthesisError::AssignmentMissing))?;
                cs.enforce(
                    || "y = t x2",
                    |lc| lc + tv,
                    |lc| lc + (Fr::from(3), x2) - (Fr::from(2), x2),
                    |lc| lc + yv,
                );
                cs.enforce(
                    || "y = y in",
                    |lc| lc + yv - yi,
                    |lc| lc + CS::one(),
                    |lc| lc,
                );
            }
            Ok(())
        }
    }

    pub(crate) fn blank(n: usize) -> Toy {
        Toy {
            x: None,
            c: vec![0; n],
        }
    }

    #[test]
    fn layout_of_the_toy_circuit() {
        let cc = CompiledCircuit::compile(blank(1), Blocks::POREP, 3).unwrap();
        let l = cc.layout;
        assert_eq!(
            l.prefix,
            Counts {
                inputs: 2,
                aux: 2,
                constraints: 2
            }
        );
        assert_eq!(
            l.block,
            Counts {
                inputs: 1,
                aux: 3,
                constraints: 3
            }
        );
        assert_eq!(
            (l.num_inputs(), l.num_aux(), l.num_constraints()),
            (5, 11, 16)
        );
        assert_eq!(l.challenge_aux(2), 8..11);
        assert_eq!(l.challenge_inputs(1), 3..4);
        assert_eq!(l.challenge_constraints(1), 5..8);
        assert!(CompiledCircuit::compile(blank(2), Blocks::POREP, 3).is_err(), "two blocks");
        assert!(CompiledCircuit::compile(blank(0), Blocks::POREP, 3).is_err(), "no block");
    }

    #[test]
    fn compiled_matrices_equal_the_full_recording_and_the_reference() {
        let n = 3;
        let cc = CompiledCircuit::compile(blank(1), Blocks::POREP, n).unwrap();
        let real = Toy {
            x: Some(5),
            c: vec![7, 11, 13],
        };
        let reference = Assignment::synthesize(real.clone()).unwrap();
        let w = witness::generate(&cc.layout, 0, |i| {
            Ok(Toy {
                x: real.x,
                c: vec![real.c[i]],
            })
        })
        .unwrap();
        assert_eq!(w.input, reference.input);
        assert_eq!(w.aux, reference.aux);
        let asg = cc.evaluate(w).unwrap();
        assert_eq!(asg.a, reference.a);
        assert_eq!(asg.b, reference.b);
        assert_eq!(asg.c, reference.c);
        assert_eq!(asg.a_aux_density, reference.a_aux_density);
        assert_eq!(asg.b_input_density, reference.b_input_density);
        assert_eq!(asg.b_aux_density, reference.b_aux_density);
        crate::prover::check_satisfied(&asg, 0).unwrap();
        // A wrong witness is caught by the R1CS check.
        let bad = witness::generate(&cc.layout, 0, |i| {
            Ok(Toy {
                x: real.x,
                c: vec![real.c[i]],
            })
        })
        .map(|mut w| {
            w.aux[7] += Fr::ONE; // y of challenge 1
            w
        })
        .unwrap();
        let e = crate::prover::check_satisfied(&cc.evaluate(bad).unwrap(), 0).unwrap_err();
        assert_eq!(e.code(), 500);
        assert!(e.to_string().contains("constraint 6 "), "{e}");
    }

    #[test]
    fn a_whole_recording_equals_the_repeated_block() {
        let n = 4;
        let repeated = CompiledCircuit::compile(blank(1), Blocks::POREP, n).unwrap();
        let whole = CompiledCircuit::compile_whole(blank(n), Blocks::POREP, n).unwrap();
        assert_eq!(whole, repeated);
        // Another number of blocks than recorded is a shape error.
        let e = CompiledCircuit::compile_whole(blank(n), Blocks::POREP, n + 1).unwrap_err();
        assert!(e.to_string().contains("4 blocks, expected 5"), "{e}");
        // The witness of the whole circuit in one synthesis equals the per-block one.
        let real = Toy {
            x: Some(5),
            c: vec![7, 11, 13, 17],
        };
        let per_block = witness::generate(&repeated.layout, 0, |i| {
            Ok(Toy {
                x: real.x,
                c: vec![real.c[i]],
            })
        })
        .unwrap();
        let mut w = Witness::default();
        witness::generate_whole_into(&whole.layout, 0, real.clone(), &mut w).unwrap();
        assert_eq!(w, per_block);
        let e = witness::generate_whole_into(&whole.layout, 2, blank(n), &mut w).unwrap_err();
        assert!(e.to_string().contains("partition 2"), "{e}");
        let e = witness::generate_whole_into(
            &whole.layout,
            0,
            Toy {
                x: Some(5),
                c: vec![1; 5],
            },
            &mut Witness::default(),
        )
        .unwrap_err();
        assert_eq!(e.code(), 500, "{e}");
    }

    /// A circuit whose blocks are namespaces `step (c_index=<i>)` and `check (c_index=<i>, …)`
    /// with something between two blocks when `gap`.
    struct Split {
        n: usize,
        gap: bool,
    }

    impl Circuit<Fr> for Split {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc_input(|| "x", || Ok(Fr::ONE))?;
            for i in 0..self.n {
                let y = cs
                    .namespace(|| format!("y (c_index={i})"))
                    .alloc(|| "y", || Ok(Fr::ONE))?;
                cs.namespace(|| format!("check (c_index={i}, k=0)"))
                    .enforce(|| "y = x", |lc| lc + y, |lc| lc + CS::one(), |lc| lc + x);
                if self.gap && i == 1 {
                    cs.alloc(|| "between", || Ok(Fr::ONE))?;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn a_block_is_the_run_of_its_namespaces() {
        let cc = CompiledCircuit::compile_whole(Split { n: 3, gap: false }, Blocks::SNAP, 3)
            .unwrap();
        let l = cc.layout;
        assert_eq!((l.prefix.inputs, l.prefix.aux, l.prefix.constraints), (2, 0, 0));
        assert_eq!((l.block.inputs, l.block.aux, l.block.constraints), (0, 1, 1));
        let e = CompiledCircuit::compile_whole(Split { n: 3, gap: true }, Blocks::SNAP, 3)
            .unwrap_err();
        assert!(e.to_string().contains("before block 2"), "{e}");
    }

    #[test]
    fn resident_size_function_counts_every_vector_the_upload_copies() {
        use crate::gpu::memory::layout::{align_up, circuit_device_bytes, csr_buffers};
        let cc = CompiledCircuit::compile(blank(1), Blocks::POREP, 5).unwrap();
        // gpu::kernels::spmv::DeviceCircuit::upload allocates one device buffer per vector, 4 B per
        // index and 32 B per coefficient, each counted aligned by its arena
        let vecs = |m: &Csr| [m.row_ptr.len(), m.col.len(), m.coeff.len()];
        let mut uploaded = align_up(32 * cc.coeffs.len() as u64);
        for m in [&cc.a, &cc.b, &cc.c] {
            let lens = vecs(m);
            assert_eq!(
                csr_buffers(m.rows() as u64, m.nnz() as u64),
                lens.map(|l| align_up(4 * l as u64))
            );
            uploaded += lens.iter().map(|&l| align_up(4 * l as u64)).sum::<u64>();
        }
        let rows = cc.layout.num_constraints() as u64;
        let nnz = [cc.a.nnz(), cc.b.nnz(), cc.c.nnz()].map(|n| n as u64);
        assert_eq!(
            circuit_device_bytes(rows, nnz, cc.coeffs.len() as u64),
            uploaded
        );
        // B and C of the toy have no per-input entries but A has: the sizes differ per matrix
        assert!(cc.a.nnz() > cc.c.nnz());
    }

    #[test]
    fn a_witness_written_into_used_buffers_keeps_them_and_equals_a_fresh_one() {
        use crate::gpu::memory::hostpool::HostPool;
        use crate::gpu::memory::pinned::{FakePinner, PinState, PinnedRegistry};
        let cc = CompiledCircuit::compile(blank(1), Blocks::POREP, 3).unwrap();
        let l = cc.layout;
        let make = |i: usize| {
            Ok(Toy {
                x: Some(5),
                c: vec![[7, 11, 13][i]],
            })
        };
        let fresh = witness::generate(&l, 0, make).unwrap();
        assert_eq!((fresh.input.len(), fresh.aux.len()), (5, 11));
        // Longer than needed and full of another partition's values (truncated in place), and
        // empty with room (extended in place).
        let mut w = Witness {
            input: Vec::with_capacity(8),
            aux: vec![Fr::from(99); 20],
        };
        let ptrs = (w.input.as_ptr(), w.aux.as_ptr());
        witness::generate_into(&l, 0, make, &mut w).unwrap();
        assert_eq!(w, fresh);
        assert_eq!((w.input.as_ptr(), w.aux.as_ptr()), ptrs);
        assert_eq!((w.input.capacity(), w.aux.capacity()), (8, 20));
        // Too little room: an error, the buffer untouched (never reallocated).
        let mut small = Witness {
            input: Vec::with_capacity(5),
            aux: vec![Fr::ONE; 10],
        };
        let e = witness::generate_into(&l, 0, make, &mut small).unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{e}");
        assert!(e.to_string().contains("holds 10 values"), "{e}");
        assert_eq!((small.input.len(), small.aux), (0, vec![Fr::ONE; 10]));
        // From the pool: written in the registered range, which the upload's pin then shares.
        let f = std::sync::Arc::new(FakePinner::new());
        let reg = PinnedRegistry::new(f.clone());
        let pool = HostPool::new(Some(reg.clone()), 1, None);
        for round in 0..3 {
            let mut buf = pool.take(l.num_aux()).unwrap();
            let mut w = Witness {
                aux: buf.lend(),
                ..Witness::default()
            };
            witness::generate_into(&l, 0, make, &mut w).unwrap();
            assert_eq!(w, fresh, "round {round}");
            assert_eq!(w.aux.as_ptr() as usize, buf.ptr());
            let up = reg.pin_slice(&w.aux);
            assert_eq!(up.state(), &PinState::Pinned { shared: true });
            drop(up);
            assert!(buf.restore(std::mem::take(&mut w.aux)));
        }
        assert_eq!(f.register_calls(), 1);
        assert_eq!(pool.stats().reused, 2);
    }

    #[test]
    fn a_witness_of_another_shape_is_an_error() {
        let cc = CompiledCircuit::compile(blank(1), Blocks::POREP, 2).unwrap();
        let e = witness::generate(&cc.layout, 4, |_| {
            Ok(Toy {
                x: Some(1),
                c: vec![1, 2],
            })
        })
        .unwrap_err();
        assert_eq!(e.code(), 500);
        assert!(e.to_string().contains("partition 4"), "{e}");
        let e = witness::generate(&cc.layout, 0, |_| Ok(blank(1))).unwrap_err();
        assert!(
            e.to_string().contains("assignment missing") || e.to_string().contains("challenge 0"),
            "{e}"
        );
    }
}
