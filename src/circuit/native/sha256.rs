//! Native SHA-256 witness routines: the aux values of bellperson's SHA-256 gadget and of the
//! PoRep circuit pieces built on it (the labels' `create_label_circuit`, the comm_d Merkle
//! path's node hash), in the gadgets' allocation order.
//!
//! SHA-256 itself is FIPS 180-4 (§5.1.1 padding, §6.2.2 compression); the *allocations* are
//! those of bellperson 0.27 `gadgets/sha256.rs` (the same code as bellpepper 0.2.1's), which
//! the functions here mirror step by step:
//!
//! * message schedule, `t = 16..64`: `σ0` = two XORs (32 variables each, fewer where an
//!   operand bit is constant), `σ1` likewise, then `W[t]` = one 4-operand addition
//!   (34 variables);
//! * each of the 64 rounds, in this order: the deferred addition of `e` (6 operands, 35
//!   variables; none in round 0, where `e` is the chaining value), `Σ1` (two XORs), `Ch`
//!   (32), the deferred addition of `a` (7 operands, 35; none in round 0), `Σ0` (two XORs),
//!   `Maj` (64: per bit `Maj` then the helper `b ∧ c`);
//! * the new chaining value: `h0` = the deferred `a` plus `H0` (8 operands), `h1..h3` two
//!   operands (33 each), `h4` = the deferred `e` plus `H4` (7 operands), `h5..h7`.
//!
//! An addition allocates the bits of its largest possible sum, carries included; with only
//! constant operands it allocates nothing. Constant and negated bits change what XOR, `Ch` and
//! `Maj` allocate: see [`bits`].

pub mod bits;

use blstrs::Scalar as Fr;

#[cfg(test)]
pub use bits::fr_bits_le;
pub use bits::{num_to_bits_le, reverse_bit_numbering, uint64_alloc, Bit, Sum, UInt64, Word};

use crate::circuit::native::Tape;

/// FIPS 180-4 §4.2.2: the 64 round constants `K`.
#[allow(clippy::unreadable_literal)]
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// FIPS 180-4 §5.3.3: the initial hash value `H(0)` (constant words in the gadget).
#[allow(clippy::unreadable_literal)]
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Parents hashed into a label (storage-proofs-porep `stacked::vanilla::TOTAL_PARENTS`).
pub const TOTAL_PARENTS: usize = 37;

/// `a` or `e` of a round: a word, or a sum not yet computed (the gadget's `Maybe`).
#[derive(Clone, Copy)]
enum Maybe {
    Concrete(Word),
    Deferred(Sum),
}

impl Maybe {
    /// `Maybe::compute`: a concrete word as it is (`others` ignored, as in the gadget), a
    /// deferred sum with `others` added, resolved.
    #[inline]
    fn compute(self, t: &mut Tape, others: &[Word]) -> Word {
        match self {
            Maybe::Concrete(w) => w,
            Maybe::Deferred(mut s) => {
                for w in others {
                    s.add(w);
                }
                s.resolve(t)
            }
        }
    }
}

/// The compression function on one 512-bit block of 16 words and the chaining value `cur`
/// (bellperson `gadgets/sha256.rs` `sha256_compression_function`; FIPS 180-4 §6.2.2): its
/// aux values (see the module docs), and the next chaining value.
pub fn sha256_compression(t: &mut Tape, block: &[Word; 16], cur: &[Word; 8]) -> [Word; 8] {
    let mut w = [Word::constant(0); 64];
    w[..16].copy_from_slice(block);
    for i in 16..64 {
        let x = w[i - 15];
        let s0 = x.rotr(7).xor(t, &x.rotr(18)).xor(t, &x.shr(3));
        let y = w[i - 2];
        let s1 = y.rotr(17).xor(t, &y.rotr(19)).xor(t, &y.shr(10));
        w[i] = Word::addmany(t, &[w[i - 16], s0, w[i - 7], s1]);
    }

    let mut a = Maybe::Concrete(cur[0]);
    let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *cur;
    let mut e = Maybe::Concrete(cur[4]);
    for (&k, &wi) in K.iter().zip(w.iter()) {
        let new_e = e.compute(t, &[]);
        let s1 = new_e
            .rotr(6)
            .xor(t, &new_e.rotr(11))
            .xor(t, &new_e.rotr(25));
        let ch = Word::sha256_ch(t, &new_e, &f, &g);
        // temp1 = h + Σ1 + Ch + K[i] + W[i], deferred.
        let mut temp1 = Sum::default();
        for x in [h, s1, ch, Word::constant(k), wi] {
            temp1.add(&x);
        }

        let new_a = a.compute(t, &[]);
        let s0 = new_a
            .rotr(2)
            .xor(t, &new_a.rotr(13))
            .xor(t, &new_a.rotr(22));
        let maj = Word::sha256_maj(t, &new_a, &b, &c);

        h = g;
        g = f;
        f = new_e;
        let mut new_e_sum = temp1;
        new_e_sum.add(&d);
        e = Maybe::Deferred(new_e_sum);
        d = c;
        c = b;
        b = new_a;
        let mut new_a_sum = temp1;
        new_a_sum.add(&s0);
        new_a_sum.add(&maj);
        a = Maybe::Deferred(new_a_sum);
    }

    let h0 = a.compute(t, &[cur[0]]);
    let h1 = Word::addmany(t, &[cur[1], b]);
    let h2 = Word::addmany(t, &[cur[2], c]);
    let h3 = Word::addmany(t, &[cur[3], d]);
    let h4 = e.compute(t, &[cur[4]]);
    let h5 = Word::addmany(t, &[cur[5], f]);
    let h6 = Word::addmany(t, &[cur[6], g]);
    let h7 = Word::addmany(t, &[cur[7], h]);
    [h0, h1, h2, h3, h4, h5, h6, h7]
}

/// SHA-256 of `input` (bellperson `gadgets/sha256.rs` `sha256`; FIPS 180-4 §5.1.1, §6.2):
/// pads with constant bits (a `1`, `0`s, the 64-bit big-endian bit length), then compresses
/// each 512-bit block from the constant IV. Returns the 8 digest words (their
/// `Word::into_bits_be` concatenated are the gadget's 256 output bits).
///
/// `input` is the message's bits, in the gadget's order (each byte most significant bit
/// first). Allocates nothing itself; its compressions allocate (see the module docs).
///
/// # Panics
/// If `input.len()` is not a multiple of 8 (the gadget's assertion).
pub fn sha256_words(t: &mut Tape, input: &[Bit]) -> [Word; 8] {
    assert!(input.len() % 8 == 0, "sha256 of {} bits", input.len());
    let mut padded = Vec::with_capacity((input.len() + 64 + 1).div_ceil(512) * 512);
    padded.extend_from_slice(input);
    padded.push(Bit::Constant(true));
    while (padded.len() + 64) % 512 != 0 {
        padded.push(Bit::Constant(false));
    }
    let len = input.len() as u64;
    padded.extend((0..64).rev().map(|i| Bit::Constant(len >> i & 1 == 1)));

    let mut cur = IV.map(Word::constant);
    for block in padded.chunks_exact(512) {
        let words: [Word; 16] = std::array::from_fn(|j| Word::from_bits_be(&block[32 * j..][..32]));
        cur = sha256_compression(t, &words, &cur);
    }
    cur
}

/// SHA-256 of `input` as the gadget returns it: 256 bits, most significant first within each
/// digest word (bellperson `gadgets/sha256.rs` `sha256`). See [`sha256_words`].
///
/// # Panics
/// If `input.len()` is not a multiple of 8.
#[cfg(test)]
pub fn sha256(t: &mut Tape, input: &[Bit]) -> Vec<Bit> {
    let mut out = Vec::with_capacity(256);
    for w in sha256_words(t, input) {
        w.extend_bits_be(&mut out);
    }
    out
}

/// The digest packed into one field element and allocated: the little-endian integer of the
/// 32 digest bytes truncated to 254 (`Fr::CAPACITY`) bits. One aux value.
///
/// Mirrors both `create_label_circuit`'s `reverse_bit_numbering` + `multipack::pack_bits` and
/// filecoin-hashers' `Sha256Function::hash_circuit` (bytes' bits reversed, `take(CAPACITY)`,
/// `pack_bits`): the same value.
pub fn pack_digest(t: &mut Tape, digest: &[Word; 8]) -> Fr {
    let mut bytes = [0u8; 32];
    for (chunk, w) in bytes.chunks_exact_mut(4).zip(digest) {
        chunk.copy_from_slice(&w.value.to_be_bytes());
    }
    bytes[31] &= 0x3f;
    let v = Fr::from_bytes_le(&bytes).expect("below 2^254, canonical");
    t.alloc(v);
    v
}

/// One PoRep label (storage-proofs-porep 19.1.0 `stacked/circuit/create_label.rs`
/// `create_label_circuit`): SHA-256 of `replica_id ‖ layer ‖ node ‖ parents` laid out as the
/// gadget does, packed by [`pack_digest`]. Returns the label (the gadget's `AllocatedNum`).
///
/// Shapes: `replica_id` 32 to 256 bits, padded with constant `false` to 256 (the circuit
/// passes 256: `reverse_bit_numbering(to_bits_le(replica_id))`); the layer index as 32
/// constant bits, most significant first (`UInt32::constant(layer).into_bits_be()`); `node`'s
/// 64 bits most significant first (`UInt64::to_bits_be`), then constant `false` to 512 bits;
/// each of the [`TOTAL_PARENTS`] parents padded with constant `false` to a multiple of 256
/// bits (the circuit passes 256: `reverse_bit_numbering(to_bits_le(parent))`). The message is
/// 39·256 bits, 20 blocks padded.
///
/// Allocates only the hash and the packed label (521 749 values in the circuit's shapes); the caller allocates
/// the inputs: the replica id bits, the challenge `UInt64`, and per layer each parent's
/// `to_bits_le` (255 values) before the label.
///
/// # Panics
/// If `replica_id` is not 32 to 256 bits or `parents.len() != TOTAL_PARENTS` (the gadget's
/// assertions), or a parent is not a whole number of bytes.
pub fn create_label<P: AsRef<[Bit]>>(
    t: &mut Tape,
    replica_id: &[Bit],
    parents: &[P],
    layer: u32,
    node: &UInt64,
) -> Fr {
    assert!(replica_id.len() >= 32, "replica id is too small");
    assert!(replica_id.len() <= 256, "replica id is too large");
    assert_eq!(parents.len(), TOTAL_PARENTS, "invalid sized parents");

    let mut msg = Vec::with_capacity((2 + TOTAL_PARENTS) * 256);
    msg.extend_from_slice(replica_id);
    msg.resize(256, Bit::Constant(false));
    Word::constant(layer).extend_bits_be(&mut msg);
    msg.extend(node.to_bits_be());
    msg.resize(512, Bit::Constant(false));
    for p in parents {
        msg.extend_from_slice(p.as_ref());
        msg.resize(msg.len().div_ceil(256) * 256, Bit::Constant(false));
    }
    assert_eq!(msg.len(), (2 + TOTAL_PARENTS) * 256);

    let digest = sha256_words(t, &msg);
    pack_digest(t, &digest)
}

/// The SHA-256 node hash of two field elements (filecoin-hashers 14.1.0 `sha256.rs`
/// `Sha256Function::hash_multi_leaf_circuit::<U2>`, the comm_d Merkle path's
/// `SubPath::synthesize` hash; `hash2_circuit` allocates the same): each leaf's
/// `to_bits_le` (255 values; see [`num_to_bits_le`]), padded to 256 bits and bit-reversed per
/// byte, SHA-256 of the 512 bits (2 blocks), packed by [`pack_digest`]. Returns the hash.
///
/// Allocates 2·255 bits, the hash, the packed value; the caller allocates the leaves
/// themselves (the Merkle path's `insert` outputs) before.
pub fn hash_multi_leaf2(t: &mut Tape, leaves: &[Fr; 2]) -> Fr {
    let mut msg = Vec::with_capacity(512);
    for leaf in leaves {
        msg.extend(reverse_bit_numbering(num_to_bits_le(t, leaf)));
    }
    let digest = sha256_words(t, &msg);
    pack_digest(t, &digest)
}

#[cfg(test)]
mod tests;
