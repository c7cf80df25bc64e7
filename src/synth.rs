//! Circuit synthesis: a bellpepper circuit (the PoRep circuit of `storage-proofs-porep`) is run
//! into our own proving assignment — the R1CS evaluations `a, b, c` (one `Fr` per constraint),
//! the input and aux assignments, and the density bitmaps of the A and B queries.
//!
//! Conventions are bellperson's (so the parameters' query layout matches): the first input is the
//! constant one; after the circuit, one constraint `input_i · 0 = 0` is appended per input so
//! every input appears in A; a variable counts in a query's density when it appears with a
//! non-zero coefficient in that query's linear combination of some constraint.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;

/// A bitmap over variables with a running count of set bits.
///
/// Bit `i` set ⇔ variable `i` appears in the query (so its SRS point is used). The `i`-th set bit
/// pairs with the `i`-th point of that query's section in the parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
    count: usize,
}

impl Density {
    /// A bitmap of `len` variables, none in the query.
    pub fn with_len(len: usize) -> Self {
        Density {
            words: vec![0; len.div_ceil(64)],
            len,
            count: 0,
        }
    }

    /// Appends one variable, initially not in the query.
    pub fn push(&mut self) {
        if self.len % 64 == 0 {
            self.words.push(0);
        }
        self.len += 1;
    }

    /// Marks variable `i` as used (idempotent).
    ///
    /// # Panics
    /// If `i >= len()` (a circuit referencing an unallocated variable — a bug in the circuit).
    pub fn set(&mut self, i: usize) {
        assert!(i < self.len, "density index {i} out of range {}", self.len);
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if self.words[w] & b == 0 {
            self.words[w] |= b;
            self.count += 1;
        }
    }

    /// Whether variable `i` is used.
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Number of variables tracked.
    #[cfg(any(test, feature = "internals"))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no variable is tracked.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of used variables (set bits) = number of SRS points this query needs.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The bitmap as 64-bit words, bit `i % 64` of word `i / 64` for variable `i`
    /// (`ceil(len / 64)` words; unused high bits are zero). This is the layout the GPU reads.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// The proving assignment of one partition.
///
/// Sizes for the 2 KiB PoRep circuit: 2,687,921 constraints (domain 2^22), 40 inputs;
/// for a 32 GiB partition: 130,278,869 constraints (domain 2^27), 328 inputs, 130,169,893 aux
/// — `a`, `b`, `c` are then 3.88 GiB each.
#[derive(Clone, Debug, Default)]
pub struct Assignment {
    /// ⟨A_j, z⟩ per constraint j (Montgomery-form `Fr`, as `blstrs::Scalar` stores it).
    pub a: Vec<Fr>,
    /// ⟨B_j, z⟩ per constraint j.
    pub b: Vec<Fr>,
    /// ⟨C_j, z⟩ per constraint j.
    pub c: Vec<Fr>,
    /// Input (public) assignment; `input[0]` is the constant one.
    pub input: Vec<Fr>,
    /// Aux (private witness) assignment.
    pub aux: Vec<Fr>,
    /// Aux variables used by the A query (inputs are always used by A).
    pub a_aux_density: Density,
    /// Inputs used by the B query.
    pub b_input_density: Density,
    /// Aux variables used by the B query.
    pub b_aux_density: Density,
}

impl Assignment {
    /// Number of constraints, including the per-input constraints.
    // Read by the GPU backend only (feature `cuda`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn num_constraints(&self) -> usize {
        self.a.len()
    }

    /// log2 of the evaluation domain: the smallest power of two ≥ the number of constraints.
    #[cfg(any(test, feature = "internals"))]
    pub fn domain_log2(&self) -> u32 {
        self.a.len().max(1).next_power_of_two().trailing_zeros()
    }

    /// Runs `circuit` into a fresh assignment (bellperson's conventions, see the module docs).
    ///
    /// # Errors
    /// The circuit's own [`SynthesisError`] (e.g. an unsatisfiable or inconsistent witness).
    pub fn synthesize<C: bellperson::Circuit<Fr>>(circuit: C) -> Result<Self, SynthesisError> {
        let mut cs = Assignment::default();
        cs.alloc_input(|| "one", || Ok(Fr::ONE))?;
        circuit.synthesize(&mut cs)?;
        for i in 0..cs.input.len() {
            cs.enforce(
                || "",
                |lc| lc + Variable::new_unchecked(Index::Input(i)),
                |lc| lc,
                |lc| lc,
            );
        }
        Ok(cs)
    }

    /// Counts of scalar classes in `aux` restricted to a density (or all when `None`):
    /// `(zeros, ones, others)`. The PoRep witness is mostly 0/1; the GPU MSM uses this split.
    #[cfg(any(test, feature = "internals"))]
    pub fn aux_split(&self, density: Option<&Density>) -> (usize, usize, usize) {
        let (mut z, mut o, mut r) = (0, 0, 0);
        for (i, v) in self.aux.iter().enumerate() {
            if density.is_some_and(|d| !d.get(i)) {
                continue;
            }
            if bool::from(v.is_zero()) {
                z += 1
            } else if *v == Fr::ONE {
                o += 1
            } else {
                r += 1
            }
        }
        (z, o, r)
    }
}

/// Evaluates `lc` on the assignment, marking used variables in the given densities.
fn eval(
    lc: &LinearCombination<Fr>,
    mut input_density: Option<&mut Density>,
    mut aux_density: Option<&mut Density>,
    input: &[Fr],
    aux: &[Fr],
) -> Fr {
    let mut acc = Fr::ZERO;
    for (index, coeff) in lc.iter_inputs() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += if *coeff == Fr::ONE {
            input[*index]
        } else {
            input[*index] * coeff
        };
        if let Some(d) = input_density.as_deref_mut() {
            d.set(*index);
        }
    }
    for (index, coeff) in lc.iter_aux() {
        if bool::from(coeff.is_zero()) {
            continue;
        }
        acc += if *coeff == Fr::ONE {
            aux[*index]
        } else {
            aux[*index] * coeff
        };
        if let Some(d) = aux_density.as_deref_mut() {
            d.set(*index);
        }
    }
    acc
}

impl ConstraintSystem<Fr> for Assignment {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.a_aux_density.push();
        self.b_aux_density.push();
        Ok(Variable::new_unchecked(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.input.push(f()?);
        self.b_input_density.push();
        Ok(Variable::new_unchecked(Index::Input(self.input.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        let va = eval(
            &la,
            None,
            Some(&mut self.a_aux_density),
            &self.input,
            &self.aux,
        );
        let vb = eval(
            &lb,
            Some(&mut self.b_input_density),
            Some(&mut self.b_aux_density),
            &self.input,
            &self.aux,
        );
        let vc = eval(&lc, None, None, &self.input, &self.aux);
        self.a.push(va);
        self.b.push(vb);
        self.c.push(vc);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// x * y = z with x, y private and z public; plus x appears in B only via a zero coefficient.
    struct Mul(u64, u64);
    impl bellperson::Circuit<Fr> for Mul {
        fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Fr::from(self.0)))?;
            let y = cs.alloc(|| "y", || Ok(Fr::from(self.1)))?;
            let z = cs.alloc_input(|| "z", || Ok(Fr::from(self.0 * self.1)))?;
            cs.enforce(
                || "mul",
                |lc| lc + x,
                |lc| lc + y + (Fr::ZERO, x),
                |lc| lc + z,
            );
            Ok(())
        }
    }

    #[test]
    fn assignment_of_a_product() {
        let asg = Assignment::synthesize(Mul(3, 5)).unwrap();
        // one user constraint + 2 input constraints (one, z)
        assert_eq!(asg.num_constraints(), 3);
        assert_eq!(asg.domain_log2(), 2);
        assert_eq!(asg.input, vec![Fr::ONE, Fr::from(15)]);
        assert_eq!(asg.aux, vec![Fr::from(3), Fr::from(5)]);
        assert_eq!(asg.a, vec![Fr::from(3), Fr::ONE, Fr::from(15)]);
        assert_eq!(asg.b, vec![Fr::from(5), Fr::ZERO, Fr::ZERO]);
        assert_eq!(asg.c, vec![Fr::from(15), Fr::ZERO, Fr::ZERO]);
        // x in A; y (not x: zero coefficient) in B; no input in B
        assert!(asg.a_aux_density.get(0) && !asg.a_aux_density.get(1));
        assert!(!asg.b_aux_density.get(0) && asg.b_aux_density.get(1));
        assert_eq!(asg.b_input_density.count(), 0);
        assert_eq!(asg.aux_split(None), (0, 0, 2));
    }

    #[test]
    fn density_bits_and_counts() {
        let mut d = Density::default();
        for _ in 0..130 {
            d.push();
        }
        d.set(0);
        d.set(64);
        d.set(64);
        d.set(129);
        assert_eq!(d.count(), 3);
        assert_eq!(d.len(), 130);
        assert_eq!(d.words(), &[1, 1, 2]);
        assert!(d.get(129) && !d.get(128) && !d.get(500));
    }
}
