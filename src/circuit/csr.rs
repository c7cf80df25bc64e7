//! One R1CS matrix in compressed sparse row (CSR) form, with deduplicated coefficients, and its
//! sparse matrix–vector product (SpMV) with the witness on the CPU.
//!
//! Row `j` of a matrix is the linear combination of constraint `j` in that query (A, B or C):
//! entries `row_ptr[j] .. row_ptr[j + 1]` of `col` / `coeff`. A column is a variable of
//! z = (inputs ‖ aux): column `i < num_inputs` is input `i`, column `num_inputs + k` is aux `k`.
//! `coeff[e]` indexes the circuit's [`CoeffTable`]; index 0 is always 1 and index 1 always −1,
//! the two values that make up nearly every entry of the PoRep circuits, so the product adds or
//! subtracts without a multiplication there.

use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use rayon::prelude::*;
use std::collections::HashMap;

/// Index of the coefficient 1 in every [`CoeffTable`].
pub const COEFF_ONE: u32 = 0;
/// Index of the coefficient −1 in every [`CoeffTable`].
pub const COEFF_MINUS_ONE: u32 = 1;

/// The distinct non-zero coefficients of a circuit's matrices (Montgomery-form `Fr`, as
/// `blstrs::Scalar` stores them). Entry 0 is 1, entry 1 is −1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoeffTable {
    values: Vec<Fr>,
    index: HashMap<[u8; 32], u32>,
}

impl Default for CoeffTable {
    fn default() -> Self {
        let mut t = CoeffTable {
            values: Vec::new(),
            index: HashMap::new(),
        };
        t.intern(Fr::ONE);
        t.intern(-Fr::ONE);
        t
    }
}

impl CoeffTable {
    /// The index of `v`, adding it when new.
    pub fn intern(&mut self, v: Fr) -> u32 {
        let key = v.to_repr();
        if let Some(&i) = self.index.get(&key) {
            return i;
        }
        let i = self.values.len() as u32;
        self.values.push(v);
        self.index.insert(key, i);
        i
    }

    /// The coefficients, by index.
    pub fn values(&self) -> &[Fr] {
        &self.values
    }

    /// Number of distinct coefficients.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Never true (1 and −1 are always present); for clippy's `len` convention.
    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Rebuilds a table from its values (as read from a cache file).
    ///
    /// Returns `None` unless entry 0 is 1, entry 1 is −1 and all values are distinct and
    /// non-zero.
    pub fn from_values(values: Vec<Fr>) -> Option<Self> {
        if values.len() < 2 || values[0] != Fr::ONE || values[1] != -Fr::ONE {
            return None;
        }
        let mut index = HashMap::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            if bool::from(v.is_zero()) || index.insert(v.to_repr(), i as u32).is_some() {
                return None;
            }
        }
        Some(CoeffTable { values, index })
    }
}

/// One matrix of the R1CS in CSR form (see the module docs for the layout).
///
/// Sizes: 4 bytes per row (`row_ptr`) and 8 per non-zero (`col` + `coeff`); the 2 KiB PoRep
/// circuit has ~2.7 M rows, a 32 GiB partition 130.3 M rows and ~309 M (A), ~130 M (B),
/// ~283 M (C) non-zeros.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Csr {
    /// `rows + 1` offsets into `col` / `coeff`, non-decreasing, `row_ptr[0] = 0`.
    pub row_ptr: Vec<u32>,
    /// Column (variable of z) of each non-zero.
    pub col: Vec<u32>,
    /// Coefficient index (into the circuit's [`CoeffTable`]) of each non-zero.
    pub coeff: Vec<u32>,
}

impl Csr {
    /// An empty matrix with no rows.
    pub fn new() -> Self {
        Csr {
            row_ptr: vec![0],
            col: Vec::new(),
            coeff: Vec::new(),
        }
    }

    /// Number of rows (constraints).
    pub fn rows(&self) -> usize {
        self.row_ptr.len().saturating_sub(1)
    }

    /// Number of stored non-zeros.
    pub fn nnz(&self) -> usize {
        self.col.len()
    }

    /// Bytes the matrix takes in memory (and on the device).
    pub fn bytes(&self) -> u64 {
        4 * (self.row_ptr.len() + self.col.len() + self.coeff.len()) as u64
    }

    /// Checks the structure: offsets start at 0, never decrease and end at `nnz`; every column
    /// `< num_vars`; every coefficient index `< num_coeffs`.
    pub fn is_well_formed(&self, num_vars: usize, num_coeffs: usize) -> bool {
        self.row_ptr.first() == Some(&0)
            && self.row_ptr.last().map(|&e| e as usize) == Some(self.col.len())
            && self.col.len() == self.coeff.len()
            && self.row_ptr.windows(2).all(|w| w[0] <= w[1])
            && self.col.par_iter().all(|&c| (c as usize) < num_vars)
            && self.coeff.par_iter().all(|&k| (k as usize) < num_coeffs)
    }

    /// y = M·z on the CPU (rayon over rows): `y[j] = Σ coeffs[coeff[e]] · z[col[e]]` over row
    /// `j`'s entries, with z = (`input` ‖ `aux`).
    ///
    /// # Panics
    /// If a column is out of range of z (a malformed matrix; [`Csr::is_well_formed`] checks).
    pub fn spmv(&self, coeffs: &CoeffTable, input: &[Fr], aux: &[Fr]) -> Vec<Fr> {
        let mut y = vec![Fr::ZERO; self.rows()];
        self.spmv_into(coeffs, input, aux, &mut y);
        y
    }

    /// [`Csr::spmv`] into a caller's buffer of `rows()` elements.
    pub fn spmv_into(&self, coeffs: &CoeffTable, input: &[Fr], aux: &[Fr], y: &mut [Fr]) {
        assert_eq!(y.len(), self.rows(), "SpMV output length");
        let ni = input.len();
        let values = coeffs.values();
        let z = |c: u32| -> Fr {
            let c = c as usize;
            if c < ni {
                input[c]
            } else {
                aux[c - ni]
            }
        };
        y.par_iter_mut()
            .enumerate()
            .with_min_len(1 << 12)
            .for_each(|(j, out)| {
                let (s, e) = (self.row_ptr[j] as usize, self.row_ptr[j + 1] as usize);
                let mut acc = Fr::ZERO;
                for k in s..e {
                    let v = z(self.col[k]);
                    match self.coeff[k] {
                        COEFF_ONE => acc += v,
                        COEFF_MINUS_ONE => acc -= v,
                        i => acc += v * values[i as usize],
                    }
                }
                *out = acc;
            });
    }
}

/// Builds a [`Csr`] row by row.
#[derive(Clone, Debug)]
pub(crate) struct CsrBuilder {
    pub(crate) m: Csr,
}

impl CsrBuilder {
    pub(crate) fn new() -> Self {
        CsrBuilder { m: Csr::new() }
    }

    /// Appends one non-zero to the current row.
    pub(crate) fn push(&mut self, col: u32, coeff: u32) {
        self.m.col.push(col);
        self.m.coeff.push(coeff);
    }

    /// Closes the current row.
    ///
    /// Returns `false` when the number of non-zeros no longer fits the 32-bit offsets.
    pub(crate) fn end_row(&mut self) -> bool {
        match u32::try_from(self.m.col.len()) {
            Ok(n) => {
                self.m.row_ptr.push(n);
                true
            }
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficient_table_keeps_one_and_minus_one_first() {
        let mut t = CoeffTable::default();
        assert_eq!(t.intern(Fr::ONE), COEFF_ONE);
        assert_eq!(t.intern(-Fr::ONE), COEFF_MINUS_ONE);
        assert_eq!(t.intern(Fr::from(2)), 2);
        assert_eq!(t.intern(Fr::from(2)), 2);
        assert_eq!(t.len(), 3);
        let back = CoeffTable::from_values(t.values().to_vec()).unwrap();
        assert_eq!(back, t);
        assert!(CoeffTable::from_values(vec![Fr::ONE, Fr::ONE]).is_none());
        assert!(CoeffTable::from_values(vec![-Fr::ONE, Fr::ONE]).is_none());
        assert!(CoeffTable::from_values(vec![Fr::ONE, -Fr::ONE, Fr::ZERO]).is_none());
    }

    #[test]
    fn spmv_equals_the_dense_product() {
        // 3 inputs, 4 aux; rows: [1·z0 + 2·z4], [], [−z6 + 5·z1 − z2], [z3].
        let mut t = CoeffTable::default();
        let two = t.intern(Fr::from(2));
        let five = t.intern(Fr::from(5));
        let mut b = CsrBuilder::new();
        b.push(0, COEFF_ONE);
        b.push(4, two);
        assert!(b.end_row());
        assert!(b.end_row());
        b.push(6, COEFF_MINUS_ONE);
        b.push(1, five);
        b.push(2, COEFF_MINUS_ONE);
        assert!(b.end_row());
        b.push(3, COEFF_ONE);
        assert!(b.end_row());
        let m = b.m;
        assert_eq!((m.rows(), m.nnz()), (4, 6));
        assert!(m.is_well_formed(7, t.len()));
        assert!(!m.is_well_formed(6, t.len()));
        let input = [Fr::ONE, Fr::from(7), Fr::from(11)];
        let aux = [Fr::from(13), Fr::from(17), Fr::from(19), Fr::from(23)];
        let y = m.spmv(&t, &input, &aux);
        let want = [
            Fr::ONE + Fr::from(2) * Fr::from(17),
            Fr::ZERO,
            -Fr::from(23) + Fr::from(35) - Fr::from(11),
            Fr::from(13),
        ];
        assert_eq!(y, want);
    }
}
