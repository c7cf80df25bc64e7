//! The witness tape: the aux values of one challenge block, written in the gadgets' allocation
//! order by the native witness routines.
//!
//! A native routine mirrors one gadget of the circuit (bellpepper's SHA-256, neptune's Poseidon,
//! storage-proofs' Merkle paths, …): wherever the gadget calls `cs.alloc`, the routine calls
//! [`Tape::alloc`] with the same value, in the same order. It never builds a linear combination
//! and never records a constraint: the values are checked afterwards against the recorded R1CS
//! (a∘b = c on every row), and a test compares them value for value with the gadget path.

use blstrs::Scalar as Fr;
use ff::Field;

/// The values of a boolean variable, indexed by the bit: a load, not a branch (witness bits are
/// random, a branch on them mispredicts half the time).
const BIT_VALUES: [Fr; 2] = [Fr::ZERO, Fr::ONE];

/// The aux slice of one challenge block and a cursor into it.
///
/// Writes past the end are counted, not stored (no panic on the hot path): [`Tape::finish`]
/// turns any difference from the slice's length into an error.
pub struct Tape<'a> {
    aux: &'a mut [Fr],
    n: usize,
}

impl<'a> Tape<'a> {
    /// A tape over `aux`, the cursor at its start.
    pub fn new(aux: &'a mut [Fr]) -> Self {
        Tape { aux, n: 0 }
    }

    /// Appends one aux value (the gadget's `cs.alloc`).
    #[inline(always)]
    pub fn alloc(&mut self, v: Fr) {
        if let Some(slot) = self.aux.get_mut(self.n) {
            *slot = v;
        }
        self.n += 1;
    }

    /// Appends one boolean aux value: `Fr::ONE` or `Fr::ZERO` (an `AllocatedBit`).
    #[inline(always)]
    pub fn alloc_bit(&mut self, b: bool) {
        self.alloc(BIT_VALUES[b as usize]);
    }

    /// Appends the 32 bits of `word`, least significant first, where `mask` has a one: the
    /// allocations of a `UInt32` operation whose result bits `i` with `mask >> i & 1` are new
    /// variables (the others constants, or copies of operand bits).
    #[inline(always)]
    pub fn alloc_bits_masked(&mut self, word: u32, mask: u32) {
        let k = mask.count_ones() as usize;
        match self.aux.get_mut(self.n..self.n + k) {
            // One bounds check for the word; the common case (all 32 bits) unrolls.
            Some(dst) if mask == u32::MAX => {
                for (i, slot) in dst.iter_mut().enumerate() {
                    *slot = BIT_VALUES[(word >> i & 1) as usize];
                }
                self.n += k;
            }
            Some(dst) => {
                let mut m = mask;
                for slot in dst {
                    *slot = BIT_VALUES[(word >> m.trailing_zeros() & 1) as usize];
                    m &= m - 1;
                }
                self.n += k;
            }
            // Past the end: counted by `alloc`, not stored.
            None => {
                let mut m = mask;
                while m != 0 {
                    self.alloc_bit(word >> m.trailing_zeros() & 1 == 1);
                    m &= m - 1;
                }
            }
        }
    }

    /// Values allocated so far (those past the end of the slice included).
    #[inline(always)]
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether nothing was allocated yet.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Ends the tape: the number of values written, which must be the slice's length.
    ///
    /// # Errors
    /// `(allocated, expected)` when the routine allocated more or fewer values than the slice
    /// holds (the native routine does not mirror the recorded circuit).
    pub fn finish(self) -> std::result::Result<usize, (usize, usize)> {
        if self.n == self.aux.len() {
            Ok(self.n)
        } else {
            Err((self.n, self.aux.len()))
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    //! A constraint system that records the aux values of a gadget in allocation order, for the
    //! native routines' value-for-value tests.
    use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
    use blstrs::Scalar as Fr;

    /// Records every `alloc` value (and counts inputs); `enforce` does nothing.
    #[derive(Default)]
    pub struct AuxRecorder {
        /// Aux values in allocation order.
        pub aux: Vec<Fr>,
        /// Input values in allocation order (the constant one not included).
        pub inputs: Vec<Fr>,
    }

    impl ConstraintSystem<Fr> for AuxRecorder {
        type Root = Self;
        fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Fr, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.aux.push(f()?);
            Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
        }
        fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Fr, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.inputs.push(f()?);
            Ok(Variable::new_unchecked(Index::Input(self.inputs.len())))
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
}
