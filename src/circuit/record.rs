//! Recording a circuit's R1CS: a constraint system that keeps every constraint's three linear
//! combinations as CSR rows and never evaluates a witness (the circuit is the blank one, as for
//! parameter generation).
//!
//! It also notes where the circuit's top-level `challenge_<i>` namespaces begin and end (the
//! namespaces `storage-proofs-porep`'s `StackedCircuit` opens for each challenge), which is what
//! splits a PoRep partition into a shared prefix and per-challenge blocks.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;

use super::csr::{CoeffTable, CsrBuilder};

/// Bit set on a recorded column that is an aux variable (cleared at assembly, where the column
/// becomes `num_inputs + aux index`).
pub(crate) const AUX_TAG: u32 = 1 << 31;

/// Variables and constraints allocated so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Inputs, the constant one included.
    pub inputs: usize,
    /// Aux variables.
    pub aux: usize,
    /// Constraints.
    pub constraints: usize,
}

/// A recorded circuit: its matrices (columns tagged with [`AUX_TAG`]), its coefficient table, and
/// the counts at the start and end of each top-level `challenge_<i>` namespace.
pub(crate) struct Recording {
    pub(crate) a: CsrBuilder,
    pub(crate) b: CsrBuilder,
    pub(crate) c: CsrBuilder,
    pub(crate) coeffs: CoeffTable,
    pub(crate) challenges: Vec<(Counts, Counts)>,
    pub(crate) end: Counts,
}

/// The recording constraint system.
pub(crate) struct Recorder {
    rec: Recording,
    now: Counts,
    depth: usize,
    open: Option<Counts>,
    too_big: bool,
}

impl Recorder {
    /// Records `circuit` (the constant-one input is allocated first, as bellperson does; the
    /// per-input constraints bellperson appends are not recorded here).
    ///
    /// # Errors
    /// The circuit's own error; [`SynthesisError::Unsatisfiable`] when a matrix outgrows the
    /// 32-bit CSR offsets or a variable index the 31-bit columns.
    pub(crate) fn record<C: bellperson::Circuit<Fr>>(
        circuit: C,
    ) -> Result<Recording, SynthesisError> {
        let mut r = Recorder {
            rec: Recording {
                a: CsrBuilder::new(),
                b: CsrBuilder::new(),
                c: CsrBuilder::new(),
                coeffs: CoeffTable::default(),
                challenges: Vec::new(),
                end: Counts::default(),
            },
            now: Counts::default(),
            depth: 0,
            open: None,
            too_big: false,
        };
        r.alloc_input(|| "one", || Ok(Fr::ONE))?;
        circuit.synthesize(&mut r)?;
        if r.too_big || r.now.aux >= AUX_TAG as usize || r.now.inputs >= AUX_TAG as usize {
            return Err(SynthesisError::Unsatisfiable);
        }
        r.rec.end = r.now;
        Ok(r.rec)
    }

    fn row(b: &mut CsrBuilder, coeffs: &mut CoeffTable, lc: &LinearCombination<Fr>) -> bool {
        for (&i, v) in lc.iter_inputs() {
            if !bool::from(v.is_zero()) {
                b.push(i as u32, coeffs.intern(*v));
            }
        }
        for (&i, v) in lc.iter_aux() {
            if !bool::from(v.is_zero()) {
                b.push(i as u32 | AUX_TAG, coeffs.intern(*v));
            }
        }
        b.end_row()
    }
}

impl ConstraintSystem<Fr> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.now.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.now.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.now.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(self.now.inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        let r = &mut self.rec;
        let ok = Self::row(&mut r.a, &mut r.coeffs, &a(LinearCombination::zero()))
            & Self::row(&mut r.b, &mut r.coeffs, &b(LinearCombination::zero()))
            & Self::row(&mut r.c, &mut r.coeffs, &c(LinearCombination::zero()));
        self.too_big |= !ok;
        self.now.constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        if self.depth == 0 && name().into().starts_with("challenge_") {
            self.open = Some(self.now);
        }
        self.depth += 1;
    }

    fn pop_namespace(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == 0 {
            if let Some(start) = self.open.take() {
                self.rec.challenges.push((start, self.now));
            }
        }
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
