//! Bits and 32-bit words as the gadgets see them: what decides whether an operation allocates,
//! and the values it allocates.
//!
//! A gadget `Boolean` is a constant, a variable (`Boolean::Is`) or the negation of a variable
//! (`Boolean::Not`); its operations (bellpepper-core 0.2.1 `gadgets/boolean.rs`) allocate a new
//! variable or not depending on which of the three their operands are. [`Bit`] carries exactly
//! that and the value; [`Word`] carries the same for the 32 bits of a bellperson `UInt32`
//! (`gadgets/uint32.rs`, identical to bellpepper 0.2.1's) as three masks, so that the common
//! case (32 plain variables) is a few `u32` operations and one [`Tape::alloc_bits_masked`].

use blstrs::Scalar as Fr;

use crate::circuit::native::Tape;

/// One gadget `Boolean`: a constant, or a variable with its allocated value, seen as itself
/// (`Is`) or negated (`Not`, whose logical value is `!value`).
///
/// Mirrors bellpepper-core 0.2.1 `gadgets/boolean.rs` `Boolean` (the variable index is not
/// kept: a native routine writes values only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bit {
    /// `Boolean::Constant`: no variable.
    Constant(bool),
    /// `Boolean::Is`: a variable whose allocated value is the payload.
    Is(bool),
    /// `Boolean::Not`: the negation of a variable whose allocated value is the payload.
    Not(bool),
}

impl Bit {
    /// Allocates a boolean variable of value `v` (`AllocatedBit::alloc`, then `Boolean::from`):
    /// one aux value.
    #[inline]
    pub fn alloc(t: &mut Tape, v: bool) -> Bit {
        t.alloc_bit(v);
        Bit::Is(v)
    }

    /// The logical value (`Boolean::get_value`).
    #[inline]
    pub fn value(self) -> bool {
        match self {
            Bit::Constant(v) | Bit::Is(v) => v,
            Bit::Not(v) => !v,
        }
    }

    /// Whether it is a constant (`Boolean::is_constant`).
    #[inline]
    #[cfg(test)]
    pub fn is_constant(self) -> bool {
        matches!(self, Bit::Constant(_))
    }

    /// The negation (`Boolean::not`): never allocates.
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Bit {
        match self {
            Bit::Constant(v) => Bit::Constant(!v),
            Bit::Is(v) => Bit::Not(v),
            Bit::Not(v) => Bit::Is(v),
        }
    }

    /// `a XOR b` (`Boolean::xor`): with a constant operand, the other operand or its negation
    /// (no allocation); otherwise one variable, the XOR of the two allocated values, seen as
    /// `Is` when both operands are `Is` or both `Not`, as `Not` otherwise.
    #[inline]
    #[cfg(test)]
    pub fn xor(t: &mut Tape, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::Constant(false), x) | (x, Bit::Constant(false)) => x,
            (Bit::Constant(true), x) | (x, Bit::Constant(true)) => x.not(),
            (Bit::Is(x), Bit::Not(y)) | (Bit::Not(x), Bit::Is(y)) => {
                t.alloc_bit(x ^ y);
                Bit::Not(x ^ y)
            }
            (Bit::Is(x), Bit::Is(y)) | (Bit::Not(x), Bit::Not(y)) => {
                t.alloc_bit(x ^ y);
                Bit::Is(x ^ y)
            }
        }
    }

    /// `a AND b` (`Boolean::and`): constant `false` with a `false` operand, the other operand
    /// with a `true` one (no allocation); otherwise one variable of value `a ∧ b` (logical
    /// values: `AllocatedBit::and`, `and_not` or `nor` by the operands' negations), `Is`.
    #[inline]
    pub fn and(t: &mut Tape, a: Bit, b: Bit) -> Bit {
        match (a, b) {
            (Bit::Constant(false), _) | (_, Bit::Constant(false)) => Bit::Constant(false),
            (Bit::Constant(true), x) | (x, Bit::Constant(true)) => x,
            _ => Bit::alloc(t, a.value() & b.value()),
        }
    }

    /// SHA-256's `Ch(a, b, c) = (a ∧ b) ⊕ (¬a ∧ c)` (`Boolean::sha256_ch`), with all its
    /// special cases: all constants give a constant; `a = false` gives `c`; `b` or `c`
    /// constant reduce to one [`Bit::and`]; otherwise (`a` constant `true` included) one
    /// variable of value `Ch`, `Is`.
    pub fn sha256_ch(t: &mut Tape, a: Bit, b: Bit, c: Bit) -> Bit {
        let ch = (a.value() & b.value()) ^ (!a.value() & c.value());
        match (a, b, c) {
            (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(ch),
            (Bit::Constant(false), _, c) => c,
            (a, Bit::Constant(false), c) => Bit::and(t, a.not(), c),
            (a, b, Bit::Constant(false)) => Bit::and(t, a, b),
            (a, b, Bit::Constant(true)) => Bit::and(t, a, b.not()).not(),
            (a, Bit::Constant(true), c) => Bit::and(t, a.not(), c.not()).not(),
            _ => Bit::alloc(t, ch),
        }
    }

    /// SHA-256's `Maj(a, b, c) = (a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c)` (`Boolean::sha256_maj`), with
    /// all its special cases: all constants give a constant; one constant operand reduces to
    /// one [`Bit::and`] (of the other two, negated for a `true` constant, then negated);
    /// otherwise two variables, in this order: `Maj` (the result, `Is`), then `b ∧ c` (the
    /// gadget's helper `Boolean::and(b, c)`).
    pub fn sha256_maj(t: &mut Tape, a: Bit, b: Bit, c: Bit) -> Bit {
        let (x, y, z) = (a.value(), b.value(), c.value());
        let maj = (x & y) ^ (x & z) ^ (y & z);
        match (a, b, c) {
            (Bit::Constant(_), Bit::Constant(_), Bit::Constant(_)) => Bit::Constant(maj),
            (Bit::Constant(false), b, c) => Bit::and(t, b, c),
            (a, Bit::Constant(false), c) => Bit::and(t, a, c),
            (a, b, Bit::Constant(false)) => Bit::and(t, a, b),
            (a, b, Bit::Constant(true)) => Bit::and(t, a.not(), b.not()).not(),
            (a, Bit::Constant(true), c) => Bit::and(t, a.not(), c.not()).not(),
            (Bit::Constant(true), b, c) => Bit::and(t, b.not(), c.not()).not(),
            _ => {
                t.alloc_bit(maj);
                t.alloc_bit(y & z);
                Bit::Is(maj)
            }
        }
    }
}

/// The 32 `Boolean`s of a bellperson `UInt32` (bellperson 0.27 `gadgets/uint32.rs`, the same
/// code as bellpepper 0.2.1's), bit `i` of each mask describing `bits[i]` (least significant
/// first, as the gadget stores them).
///
/// Invariant: `not & constant == 0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// Logical values (`UInt32::value`; bit `i` = `bits[i].get_value()`).
    pub value: u32,
    /// Bits that are `Boolean::Constant`.
    pub constant: u32,
    /// Bits that are `Boolean::Not` (the other non-constant bits are `Boolean::Is`).
    pub not: u32,
}

impl Word {
    /// A constant word (`UInt32::constant`).
    #[inline]
    pub const fn constant(value: u32) -> Word {
        Word {
            value,
            constant: u32::MAX,
            not: 0,
        }
    }

    /// 32 plain variables of logical value `value` (the result of an allocating operation).
    #[inline]
    const fn variables(value: u32) -> Word {
        Word {
            value,
            constant: 0,
            not: 0,
        }
    }

    /// Bit `i` (`bits[i]`, least significant first).
    #[inline]
    pub fn bit(&self, i: u32) -> Bit {
        let v = self.value >> i & 1 == 1;
        if self.constant >> i & 1 == 1 {
            Bit::Constant(v)
        } else if self.not >> i & 1 == 1 {
            Bit::Not(!v)
        } else {
            Bit::Is(v)
        }
    }

    /// Sets bit `i` to `b` (the bit must have been clear in all three masks).
    #[inline]
    fn set_bit(&mut self, i: u32, b: Bit) {
        let m = 1u32 << i;
        match b {
            Bit::Constant(v) => {
                self.constant |= m;
                self.value |= m * v as u32;
            }
            Bit::Is(v) => self.value |= m * v as u32,
            Bit::Not(v) => {
                self.not |= m;
                self.value |= m * !v as u32;
            }
        }
    }

    /// The word of 32 bits, most significant first (`UInt32::from_bits_be`).
    ///
    /// # Panics
    /// If `bits.len() != 32`.
    pub fn from_bits_be(bits: &[Bit]) -> Word {
        assert_eq!(bits.len(), 32);
        let mut w = Word {
            value: 0,
            constant: 0,
            not: 0,
        };
        for (j, &b) in bits.iter().enumerate() {
            w.set_bit(31 - j as u32, b);
        }
        w
    }

    /// Appends the 32 bits, most significant first (`UInt32::into_bits_be`).
    pub fn extend_bits_be(&self, out: &mut Vec<Bit>) {
        out.extend((0..32).rev().map(|i| self.bit(i)));
    }

    /// The 32 bits, most significant first (`UInt32::into_bits_be`).
    #[cfg(test)]
    pub fn into_bits_be(self) -> Vec<Bit> {
        let mut out = Vec::with_capacity(32);
        self.extend_bits_be(&mut out);
        out
    }

    /// Rotation right by `by` (`UInt32::rotr`): no allocation.
    #[inline]
    pub fn rotr(&self, by: u32) -> Word {
        Word {
            value: self.value.rotate_right(by),
            constant: self.constant.rotate_right(by),
            not: self.not.rotate_right(by),
        }
    }

    /// Logical shift right by `by < 32` (`UInt32::shr`): the vacated bits are constant
    /// `false`; no allocation.
    #[inline]
    pub fn shr(&self, by: u32) -> Word {
        debug_assert!(by < 32);
        Word {
            value: self.value >> by,
            constant: self.constant >> by | !(u32::MAX >> by),
            not: self.not >> by,
        }
    }

    /// Bitwise XOR (`UInt32::xor`, i.e. `Bit::xor` on each bit, least significant first):
    /// one variable (the XOR of the allocated values) per bit where neither operand is
    /// constant.
    #[inline]
    pub fn xor(&self, t: &mut Tape, other: &Word) -> Word {
        let (a, b) = (self, other);
        let constant = a.constant & b.constant;
        let both_var = !(a.constant | b.constant);
        // Allocated value = allocated(a) ^ allocated(b) = (va ^ na) ^ (vb ^ nb).
        t.alloc_bits_masked(a.value ^ a.not ^ b.value ^ b.not, both_var);
        // Negated: both variables — one negated; one constant — the variable is negated iff
        // it was, XOR the constant is `true` (`not` is zero on constant bits).
        let not = (a.not ^ b.not ^ (a.value & a.constant) ^ (b.value & b.constant)) & !constant;
        Word {
            value: a.value ^ b.value,
            constant,
            not,
        }
    }

    /// SHA-256's `Ch` on each bit (`UInt32::sha256_ch`): one variable per bit when no operand
    /// is constant (a few `u32` operations), [`Bit::sha256_ch`] bit by bit otherwise.
    #[inline]
    pub fn sha256_ch(t: &mut Tape, a: &Word, b: &Word, c: &Word) -> Word {
        let ch = (a.value & b.value) ^ (!a.value & c.value);
        if a.constant | b.constant | c.constant == 0 {
            t.alloc_bits_masked(ch, u32::MAX);
            return Word::variables(ch);
        }
        Word::triop_slow(t, a, b, c, Bit::sha256_ch)
    }

    /// SHA-256's `Maj` on each bit (`UInt32::sha256_maj`): when no operand is constant, two
    /// variables per bit, `Maj` then `b ∧ c`, bit after bit; [`Bit::sha256_maj`] bit by bit
    /// otherwise.
    #[inline]
    pub fn sha256_maj(t: &mut Tape, a: &Word, b: &Word, c: &Word) -> Word {
        let maj = (a.value & b.value) ^ (a.value & c.value) ^ (b.value & c.value);
        if a.constant | b.constant | c.constant == 0 {
            // Bit 2i: Maj_i, bit 2i + 1: (b ∧ c)_i.
            let z = spread(maj) | spread(b.value & c.value) << 1;
            t.alloc_bits_masked(z as u32, u32::MAX);
            t.alloc_bits_masked((z >> 32) as u32, u32::MAX);
            return Word::variables(maj);
        }
        Word::triop_slow(t, a, b, c, Bit::sha256_maj)
    }

    /// `UInt32::triop` bit by bit, least significant first.
    #[cold]
    fn triop_slow(
        t: &mut Tape,
        a: &Word,
        b: &Word,
        c: &Word,
        f: fn(&mut Tape, Bit, Bit, Bit) -> Bit,
    ) -> Word {
        let mut w = Word {
            value: 0,
            constant: 0,
            not: 0,
        };
        for i in 0..32 {
            w.set_bit(i, f(t, a.bit(i), b.bit(i), c.bit(i)));
        }
        w
    }

    /// Modular sum of 2 to 10 words (`UInt32::addmany`); see [`Sum`].
    ///
    /// # Panics
    /// If `operands.len()` is not in `2..=10` (the gadget's bounds).
    #[inline]
    pub fn addmany(t: &mut Tape, operands: &[Word]) -> Word {
        let mut s = Sum::default();
        for w in operands {
            s.add(w);
        }
        s.resolve(t)
    }
}

/// Bit `i` of `x` at bit `2i`, zeros between.
#[inline(always)]
fn spread(x: u32) -> u64 {
    let mut x = u64::from(x);
    x = (x | x << 16) & 0x0000_ffff_0000_ffff;
    x = (x | x << 8) & 0x00ff_00ff_00ff_00ff;
    x = (x | x << 4) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | x << 2) & 0x3333_3333_3333_3333;
    (x | x << 1) & 0x5555_5555_5555_5555
}

/// The operands of a pending `UInt32::addmany`, reduced to what decides its allocations: their
/// count, their sum (as `u64`) and whether every bit of every operand is constant.
///
/// bellperson's SHA-256 defers the additions of `a` and `e` (its `Maybe::Deferred`, a list of
/// operands); the sum of a list does not depend on its order, nor does the gadget's output.
#[derive(Clone, Copy, Debug)]
pub struct Sum {
    sum: u64,
    n: u32,
    all_constant: bool,
}

impl Default for Sum {
    fn default() -> Self {
        Sum {
            sum: 0,
            n: 0,
            all_constant: true,
        }
    }
}

impl Sum {
    /// Adds one operand.
    #[inline]
    pub fn add(&mut self, w: &Word) {
        self.sum += u64::from(w.value);
        self.n += 1;
        self.all_constant &= w.constant == u32::MAX;
    }

    /// The gadget's addition: with all operands constant, the constant `sum mod 2^32` (no
    /// allocation); otherwise one variable per bit of the largest possible sum
    /// `n·(2^32 − 1)` (33 to 36 bits), least significant first, valued by the actual sum
    /// (carry bits included), and the low 32 as the result (plain variables).
    ///
    /// # Panics
    /// If fewer than 2 or more than 10 operands were added (the gadget's bounds).
    #[inline]
    pub fn resolve(self, t: &mut Tape) -> Word {
        assert!((2..=10).contains(&self.n), "addmany of {} operands", self.n);
        if self.all_constant {
            return Word::constant(self.sum as u32);
        }
        let max = u64::from(self.n) * u64::from(u32::MAX);
        let nbits = 64 - max.leading_zeros();
        t.alloc_bits_masked(self.sum as u32, u32::MAX);
        t.alloc_bits_masked((self.sum >> 32) as u32, (1u32 << (nbits - 32)) - 1);
        Word::variables(self.sum as u32)
    }
}

/// The 64 `Boolean`s of a storage-proofs `UInt64` (storage-proofs-core 19.1.0
/// `gadgets/uint64.rs`), least significant first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UInt64 {
    bits: [Bit; 64],
}

impl UInt64 {
    /// Allocates 64 boolean variables, least significant bit first (`UInt64::alloc`): 64 aux
    /// values.
    pub fn alloc(t: &mut Tape, v: u64) -> UInt64 {
        UInt64 {
            bits: std::array::from_fn(|i| Bit::alloc(t, v >> i & 1 == 1)),
        }
    }

    /// A constant (`UInt64::constant`): no allocation.
    #[cfg(test)]
    pub fn constant(v: u64) -> UInt64 {
        UInt64 {
            bits: std::array::from_fn(|i| Bit::Constant(v >> i & 1 == 1)),
        }
    }

    /// The value (`UInt64::get_value`).
    #[cfg(test)]
    pub fn value(&self) -> u64 {
        self.bits
            .iter()
            .rev()
            .fold(0, |v, b| v << 1 | u64::from(b.value()))
    }

    /// The bits, least significant first (`UInt64::to_bits_le`).
    #[cfg(test)]
    pub fn bits_le(&self) -> &[Bit; 64] {
        &self.bits
    }

    /// The bits, most significant first (`UInt64::to_bits_be`).
    pub fn to_bits_be(self) -> Vec<Bit> {
        self.bits.iter().rev().copied().collect()
    }
}

/// `UInt64::alloc(cs, Some(v))` (storage-proofs-core 19.1.0 `gadgets/uint64.rs`): 64 aux
/// values, the bits of `v` least significant first. PoRep allocates the challenge this way.
pub fn uint64_alloc(t: &mut Tape, v: u64) -> UInt64 {
    UInt64::alloc(t, v)
}

/// `AllocatedNum::to_bits_le` (bellpepper-core 0.2.1 `gadgets/num.rs`, through
/// `boolean::field_into_allocated_bits_le`): the 255 (`Fr::NUM_BITS`) low bits of the
/// canonical value, least significant first, each one allocated variable (`Is`): 255 aux
/// values. Not the strict variant (`to_bits_le_strict`, which allocates more).
pub fn num_to_bits_le(t: &mut Tape, v: &Fr) -> Vec<Bit> {
    let bytes = v.to_bytes_le();
    for (j, w) in bytes.chunks_exact(4).enumerate() {
        let w = u32::from_le_bytes(w.try_into().expect("4 bytes"));
        t.alloc_bits_masked(w, if j < 7 { u32::MAX } else { u32::MAX >> 1 });
    }
    bits_of_le_bytes(&bytes)
}

/// The bits [`num_to_bits_le`] returns, without allocating them: for bits allocated in
/// another block of the witness, e.g. the replica id's `to_bits_le`, allocated once in the
/// circuit's prefix and used by every challenge's labels.
#[cfg(test)]
pub fn fr_bits_le(v: &Fr) -> Vec<Bit> {
    bits_of_le_bytes(&v.to_bytes_le())
}

/// The 255 low bits of a little-endian value, least significant first, as variables.
fn bits_of_le_bytes(bytes: &[u8; 32]) -> Vec<Bit> {
    (0..255)
        .map(|i| Bit::Is(bytes[i / 8] >> (i % 8) & 1 == 1))
        .collect()
}

/// `reverse_bit_numbering` (storage-proofs-core 19.1.0 `util.rs`): pads with constant `false`
/// to a whole number of bytes, then reverses the bit order within each byte. No allocation.
pub fn reverse_bit_numbering(mut bits: Vec<Bit>) -> Vec<Bit> {
    while bits.len() % 8 != 0 {
        bits.push(Bit::Constant(false));
    }
    for chunk in bits.chunks_exact_mut(8) {
        chunk.reverse();
    }
    bits
}
