//! Recording a circuit's R1CS: a constraint system that keeps every constraint's three linear
//! combinations as CSR rows and never evaluates a witness (the circuit is the blank one, as for
//! parameter generation).
//!
//! It also notes where the circuit's repeated blocks begin and end: the namespaces whose name
//! starts with [`Blocks::name_prefix`] at nesting depth [`Blocks::depth`] — `challenge_<i>` at
//! the top level for `storage-proofs-porep`'s `StackedCircuit`, `sector_<i>` inside its
//! `outer namespace` for `storage-proofs-post`'s `FallbackPoStCircuit`. That is what splits a
//! partition into a shared prefix and per-block ranges.

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

/// Where a circuit's repeated blocks are: the namespaces named `name_prefix…` opened at
/// nesting depth `depth` (0: the top level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// Start of the block namespaces' names.
    pub name_prefix: &'static str,
    /// Namespaces open around a block namespace.
    pub depth: usize,
}

impl Blocks {
    /// PoRep (`StackedCircuit`): one top-level `challenge_<i>` namespace per challenge.
    pub const POREP: Blocks = Blocks {
        name_prefix: "challenge_",
        depth: 0,
    };
    /// PoSt (`FallbackPoStCircuit`): one `sector_<i>` namespace per sector, inside the
    /// circuit's `outer namespace`.
    pub const POST: Blocks = Blocks {
        name_prefix: "sector_",
        depth: 1,
    };
}

/// A recorded circuit: its matrices (columns tagged with [`AUX_TAG`]), its coefficient table, and
/// the counts at the start and end of each block namespace ([`Blocks`]).
pub(crate) struct Recording {
    pub(crate) a: CsrBuilder,
    pub(crate) b: CsrBuilder,
    pub(crate) c: CsrBuilder,
    pub(crate) coeffs: CoeffTable,
    pub(crate) blocks: Vec<(Counts, Counts)>,
    pub(crate) end: Counts,
}

/// The recording constraint system.
pub(crate) struct Recorder {
    rec: Recording,
    now: Counts,
    blocks: Blocks,
    depth: usize,
    open: Option<Counts>,
    too_big: bool,
}

impl Recorder {
    /// Records `circuit`, noting its `blocks` (the constant-one input is allocated first, as
    /// bellperson does; the per-input constraints bellperson appends are not recorded here).
    ///
    /// # Errors
    /// The circuit's own error; [`SynthesisError::Unsatisfiable`] when a matrix outgrows the
    /// 32-bit CSR offsets or a variable index the 31-bit columns.
    pub(crate) fn record<C: bellperson::Circuit<Fr>>(
        circuit: C,
        blocks: Blocks,
    ) -> Result<Recording, SynthesisError> {
        let mut r = Recorder {
            rec: Recording {
                a: CsrBuilder::new(),
                b: CsrBuilder::new(),
                c: CsrBuilder::new(),
                coeffs: CoeffTable::default(),
                blocks: Vec::new(),
                end: Counts::default(),
            },
            now: Counts::default(),
            blocks,
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
        if self.depth == self.blocks.depth && name().into().starts_with(self.blocks.name_prefix) {
            self.open = Some(self.now);
        }
        self.depth += 1;
    }

    fn pop_namespace(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == self.blocks.depth {
            if let Some(start) = self.open.take() {
                self.rec.blocks.push((start, self.now));
            }
        }
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
