//! Recording a circuit's R1CS: a constraint system that keeps every constraint's three linear
//! combinations as CSR rows and never evaluates a witness (the circuit is the blank one, as for
//! parameter generation).
//!
//! It also notes where the circuit's repeated blocks begin and end: the namespaces at nesting
//! depth [`Blocks::depth`] whose name carries [`Blocks::marker`] followed by the block's index —
//! `challenge_<i>` at the top level for `storage-proofs-porep`'s `StackedCircuit`, `sector_<i>`
//! inside its `outer namespace` for `storage-proofs-post`'s `FallbackPoStCircuit`, and the
//! several top-level namespaces `… (c_index=<i>…)` of one challenge for `storage-proofs-update`'s
//! `EmptySectorUpdateCircuit` (consecutive namespaces of one index make one block). That is
//! what splits a partition into a shared prefix and per-block ranges.

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

/// Where a circuit's repeated blocks are: the namespaces opened at nesting depth `depth` (0:
/// the top level) whose name holds `marker` immediately followed by the block's index in
/// decimal (at the start of the name when `marker_starts_name`, anywhere in it otherwise). A
/// block is the run of consecutive such namespaces with one index, from the start of its first
/// to the end of its last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    /// The text before a block's index in its namespaces' names.
    pub marker: &'static str,
    /// Whether `marker` must start the name (else it may be anywhere in it).
    pub marker_starts_name: bool,
    /// Namespaces open around a block namespace.
    pub depth: usize,
}

impl Blocks {
    /// PoRep (`StackedCircuit`): one top-level `challenge_<i>` namespace per challenge.
    pub const POREP: Blocks = Blocks {
        marker: "challenge_",
        marker_starts_name: true,
        depth: 0,
    };
    /// PoSt (`FallbackPoStCircuit`): one `sector_<i>` namespace per sector, inside the
    /// circuit's `outer namespace`.
    pub const POST: Blocks = Blocks {
        marker: "sector_",
        marker_starts_name: true,
        depth: 1,
    };
    /// SnapDeals (`EmptySectorUpdateCircuit`): per challenge, consecutive top-level namespaces
    /// named `… (c_index=<i>)` or `… (c_index=<i>, …)` (its high bits, rho, leaves, Merkle
    /// paths, the apex-leaf selection).
    pub const SNAP: Blocks = Blocks {
        marker: "(c_index=",
        marker_starts_name: false,
        depth: 0,
    };

    /// The block index that the namespace `name` carries, if it is a block namespace.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        let at = if self.marker_starts_name {
            name.starts_with(self.marker).then_some(0)?
        } else {
            name.find(self.marker)?
        };
        let rest = &name[at + self.marker.len()..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..digits].parse().ok()
    }
}

/// One recorded block: its index (from its namespaces' names) and the counts at its start and
/// end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordedBlock {
    pub(crate) index: usize,
    pub(crate) start: Counts,
    pub(crate) end: Counts,
}

/// A recorded circuit: its matrices (columns tagged with [`AUX_TAG`]), its coefficient table, and
/// its blocks in the order they were opened ([`Blocks`]).
pub(crate) struct Recording {
    pub(crate) a: CsrBuilder,
    pub(crate) b: CsrBuilder,
    pub(crate) c: CsrBuilder,
    pub(crate) coeffs: CoeffTable,
    pub(crate) blocks: Vec<RecordedBlock>,
    pub(crate) end: Counts,
}

/// The recording constraint system.
pub(crate) struct Recorder {
    rec: Recording,
    now: Counts,
    blocks: Blocks,
    depth: usize,
    /// The block being recorded (its end: that of its last namespace so far).
    open: Option<RecordedBlock>,
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
        r.close_block();
        if r.too_big || r.now.aux >= AUX_TAG as usize || r.now.inputs >= AUX_TAG as usize {
            return Err(SynthesisError::Unsatisfiable);
        }
        r.rec.end = r.now;
        Ok(r.rec)
    }

    /// Ends the open block, if any, at the end of its last namespace.
    fn close_block(&mut self) {
        if let Some(b) = self.open.take() {
            self.rec.blocks.push(b);
        }
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
        if self.depth == self.blocks.depth {
            let index = self.blocks.index_of(&name().into());
            if index.is_none() || index != self.open.map(|b| b.index) {
                self.close_block();
            }
            if let (Some(index), None) = (index, self.open) {
                self.open = Some(RecordedBlock {
                    index,
                    start: self.now,
                    end: self.now,
                });
            }
        }
        self.depth += 1;
    }

    fn pop_namespace(&mut self) {
        self.depth = self.depth.saturating_sub(1);
        if self.depth == self.blocks.depth {
            if let Some(b) = self.open.as_mut() {
                b.end = self.now;
            }
        }
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_namespaces_carry_their_index() {
        assert_eq!(Blocks::POREP.index_of("challenge_17"), Some(17));
        assert_eq!(Blocks::POREP.index_of("challenge_"), None);
        assert_eq!(Blocks::POREP.index_of("a challenge_1"), None);
        assert_eq!(Blocks::POST.index_of("sector_2349"), Some(2349));
        assert_eq!(Blocks::SNAP.index_of("rho (c_index=85)"), Some(85));
        assert_eq!(
            Blocks::SNAP.index_of("path_r_old sibling (c_index=3, tree_row=1, sibling_index=6)"),
            Some(3)
        );
        assert_eq!(Blocks::SNAP.index_of("gen_challenge_bits"), None);
        assert_eq!(Blocks::SNAP.index_of("apex_leaf_3"), None);
    }
}
