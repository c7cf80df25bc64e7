//! A witness's aux vector packed for its upload, and expanded on the device (`cuda/zpack.cu`).
//!
//! The GPU SpMV needs z = (input, aux) on the device: 130.2 M values, 3.88 GiB at 32 GiB,
//! ~0.12 s of PCIe per partition that nothing hides when the card holds one partition's plan
//! at a time (an 80 GB card beside the resident parameters, and every capped card). A PoRep
//! witness is mostly zeros and ones (bits of the SHA-256 and Poseidon gadgets, booleans of
//! the column checks): a real 32 GiB partition has 1.70 M of its 130.17 M values neither 0
//! nor 1 (66.8 M are 0). So the host sends, per 32 values, three 32-bit words — which values
//! are not 0, which are neither 0 nor 1, how many of the latter came before — and then only
//! the values that are neither (32 B each): 103.2 MB instead of 4.17 GB there. A kernel writes
//! the dense vector back, value for value, into the device buffer the SpMV and the MSMs read.
//!
//! The packed words travel through scratch memory: the H step's first domain buffer, which the
//! SpMV overwrites next, or where aux goes up for the MSMs alone, a buffer taken from the plan's
//! room that the MSM buffers use later (dense when there is none), so no plan grows. Packing runs on the host before
//! the partition waits for a device (rayon, ~0.1 s of 16 cores at 32 GiB, off the GPU's path);
//! a vector with more than [`PackedAux::MAX_BIG_SHARE`] of other values is not packed.

use ff::Field;
use rayon::prelude::*;

use blstrs::Scalar as Fr;

use crate::error::{Error, Result};
use crate::gpu::driver::device::{DeviceSliceMut, KernelArgs, Stream};

/// Values per group of metadata words (one bit each in a 32-bit word).
const GROUP: usize = 32;
/// Metadata words per group: non-zero bits, "neither 0 nor 1" bits, rank.
const META_WORDS: usize = 3;
/// 32-bit words per value (an `Fr`: four 64-bit limbs).
const VALUE_WORDS: usize = 8;
/// Groups per rayon task of [`PackedAux::pack`] (2^17 values).
const TASK_GROUPS: usize = 4096;
/// Threads per block of the expand kernel.
const THREADS: u32 = 256;
/// Most blocks of one launch (the kernel strides over the rest).
const MAX_BLOCKS: u64 = 1 << 16;

/// An aux vector in packed form (see the module docs): `words` = the metadata (3 words per
/// 32 values, padded to a multiple of 8 words so that the values start 32-byte aligned), then
/// the values that are neither 0 nor 1 as 8 little-endian words each (Montgomery form, as
/// `blstrs::Scalar` stores them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedAux {
    len: usize,
    /// Words of metadata, padding included (where the values start).
    meta_words: usize,
    /// Values neither 0 nor 1.
    big: usize,
    words: Vec<u32>,
}

impl PackedAux {
    /// Most share of values that are neither 0 nor 1 that is packed (1/8: the packed form is
    /// then at most ~4.4 B a value, 14 % of the dense one, within the 8 B a constraint the
    /// host budget's partition estimate keeps beyond z, `engine::HOST_BYTES_WITNESS`).
    pub const MAX_BIG_SHARE: f64 = 0.125;

    /// Packs `aux`, or `None` when more than [`Self::MAX_BIG_SHARE`] of its values are neither
    /// 0 nor 1, when it is empty, or when it has `u32::MAX` values or more (the kernel's ranks
    /// are 32-bit).
    pub fn pack(aux: &[Fr]) -> Option<Self> {
        let len = aux.len();
        if len == 0 || len >= u32::MAX as usize {
            return None;
        }
        let groups = len.div_ceil(GROUP);
        let meta_words = (META_WORDS * groups).next_multiple_of(VALUE_WORDS);
        let mut words = vec![0u32; meta_words];
        // Pass 1: the bits of each group, ranks within the task, and each task's count of
        // other values.
        let counts: Vec<usize> = words[..META_WORDS * groups]
            .par_chunks_mut(META_WORDS * TASK_GROUPS)
            .zip(aux.par_chunks(GROUP * TASK_GROUPS))
            .map(|(m, a)| {
                let mut count = 0;
                for (g, vals) in m.chunks_mut(META_WORDS).zip(a.chunks(GROUP)) {
                    let (mut nz, mut big) = (0u32, 0u32);
                    for (i, v) in vals.iter().enumerate() {
                        if *v != Fr::ZERO {
                            nz |= 1 << i;
                            if *v != Fr::ONE {
                                big |= 1 << i;
                            }
                        }
                    }
                    g[0] = nz;
                    g[1] = big;
                    g[2] = count as u32;
                    count += big.count_ones() as usize;
                }
                count
            })
            .collect();
        let big: usize = counts.iter().sum();
        if big as f64 > Self::MAX_BIG_SHARE * len as f64 {
            return None;
        }
        words.resize(meta_words + VALUE_WORDS * big, 0);
        let (head, mut tail) = words.split_at_mut(meta_words);
        // Pass 2: ranks made global, the other values gathered in index order.
        let mut outs = Vec::with_capacity(counts.len());
        let mut offset = 0usize;
        for &c in &counts {
            let (mine, rest) = tail.split_at_mut(VALUE_WORDS * c);
            outs.push((offset, mine));
            tail = rest;
            offset += c;
        }
        head[..META_WORDS * groups]
            .par_chunks_mut(META_WORDS * TASK_GROUPS)
            .zip(aux.par_chunks(GROUP * TASK_GROUPS))
            .zip(outs.into_par_iter())
            .for_each(|((m, a), (offset, out))| {
                let mut k = 0;
                for (g, vals) in m.chunks_mut(META_WORDS).zip(a.chunks(GROUP)) {
                    g[2] += offset as u32;
                    let mut big = g[1];
                    while big != 0 {
                        let i = big.trailing_zeros() as usize;
                        big &= big - 1;
                        let limbs = blst::blst_fr::from(vals[i]).l;
                        for (j, l) in limbs.iter().enumerate() {
                            out[VALUE_WORDS * k + 2 * j] = *l as u32;
                            out[VALUE_WORDS * k + 2 * j + 1] = (*l >> 32) as u32;
                        }
                        k += 1;
                    }
                }
            });
        Some(PackedAux {
            len,
            meta_words,
            big,
            words,
        })
    }

    /// Values of the vector (the dense length).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vector is empty (never: an empty one is not packed).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Values that are neither 0 nor 1.
    pub fn big(&self) -> usize {
        self.big
    }

    /// Bytes of the packed form: what [`Self::expand`] uploads, and the scratch it needs.
    pub fn bytes(&self) -> u64 {
        4 * self.words.len() as u64
    }

    /// Words of scratch [`Self::expand`] needs.
    pub fn scratch_words(&self) -> usize {
        self.words.len()
    }

    /// The dense vector again, on the host (the reference the device expansion is checked
    /// against).
    #[cfg(any(test, feature = "internals"))]
    pub fn unpack(&self) -> Vec<Fr> {
        let vals = &self.words[self.meta_words..];
        (0..self.len)
            .map(|i| {
                let g = &self.words[META_WORDS * (i / GROUP)..][..META_WORDS];
                let bit = 1u32 << (i % GROUP);
                if g[0] & bit == 0 {
                    Fr::ZERO
                } else if g[1] & bit == 0 {
                    Fr::ONE
                } else {
                    let r = (g[2] + (g[1] & (bit - 1)).count_ones()) as usize;
                    let w = &vals[VALUE_WORDS * r..][..VALUE_WORDS];
                    let l = [0, 1, 2, 3].map(|j| w[2 * j] as u64 | (w[2 * j + 1] as u64) << 32);
                    Fr::from(blst::blst_fr { l })
                }
            })
            .collect()
    }

    /// Uploads the packed words into `scratch` (synchronous: the data is on the device when
    /// the copy returns) and queues the expansion into `dst` (exactly [`Self::len`] values) on
    /// `stream`. `scratch` must not overlap `dst`, and nothing may read it as its own type
    /// before it is overwritten (the caller's scratch is the H step's domain buffer, which the
    /// SpMV writes next on the same stream).
    ///
    /// # Errors
    /// [`Error::Internal`] for a `dst` of another length, a `scratch` shorter than
    /// [`Self::scratch_words`] or buffers on another device; copy and launch errors.
    pub fn expand(
        &self,
        stream: &Stream,
        mut scratch: DeviceSliceMut<'_, u32>,
        dst: &mut DeviceSliceMut<'_, Fr>,
    ) -> Result<()> {
        if dst.len() != self.len || scratch.len() < self.words.len() {
            return Err(Error::internal(format!(
                "packed aux of {} values ({} words) into {} values with {} words of scratch",
                self.len,
                self.words.len(),
                dst.len(),
                scratch.len()
            )));
        }
        let dev = stream.device();
        let ords = [scratch.device().ordinal(), dst.device().ordinal()];
        if ords.iter().any(|&o| o != dev.ordinal()) {
            return Err(Error::internal(format!(
                "packed aux buffers on devices {ords:?}, stream on device {}",
                dev.ordinal()
            )));
        }
        let mut used = scratch.slice_mut(..self.words.len())?;
        used.copy_from_host(&self.words)?;
        let meta = used.device_ptr();
        let vals = meta + 4 * self.meta_words as u64;
        let k = dev.kernel("cuzk_zpack_expand")?;
        let blocks = (self.len as u64)
            .div_ceil(THREADS as u64)
            .min(MAX_BLOCKS) as u32;
        let mut args = KernelArgs::new();
        args.push_ptr(dst.device_ptr())
            .push_ptr(meta)
            .push_ptr(vals)
            .push_u64(self.len as u64);
        // SAFETY: matches cuzk_zpack_expand(Fr* dst, const u32* meta, const Fr* vals, u64 n);
        // dst holds n values; meta holds 3 * ceil(n / 32) words followed (at meta_words, a
        // multiple of 8 words: 32-byte aligned) by the `big` values the ranks index, all in
        // `used`; both borrows outlive this call, and the caller's stream order keeps them
        // alive until the kernel has run (scratch and dst are freed after the stream's
        // later work is synchronised).
        unsafe { stream.launch(&k, "cuzk_zpack_expand", blocks, THREADS, 0, &mut args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    fn mix(n: usize, big_share: f64, seed: u64) -> Vec<Fr> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let u: f64 = rng.gen();
                if u < big_share {
                    Fr::random(&mut rng)
                } else if u < big_share + (1.0 - big_share) / 2.0 {
                    Fr::ONE
                } else {
                    Fr::ZERO
                }
            })
            .collect()
    }

    #[test]
    fn pack_then_unpack_gives_the_vector_back() {
        // Lengths around the group and task sizes, including partial groups and tasks.
        for (n, seed) in [(1, 1), (31, 2), (32, 3), (33, 4), (131_071, 5), (300_001, 6)] {
            let aux = mix(n, 0.04, seed);
            let p = PackedAux::pack(&aux).expect("a PoRep-like mix packs");
            assert_eq!(p.len(), n);
            let want = aux.iter().filter(|v| **v != Fr::ZERO && **v != Fr::ONE).count();
            assert_eq!(p.big(), want);
            assert_eq!(p.unpack(), aux, "n = {n}");
            assert_eq!(p.meta_words % VALUE_WORDS, 0);
        }
    }

    #[test]
    fn a_porep_like_mix_packs_to_a_twentieth() {
        let aux = mix(1 << 20, 0.035, 7);
        let p = PackedAux::pack(&aux).unwrap();
        let dense = 32 * aux.len() as u64;
        assert!(p.bytes() * 10 < dense, "{} of {dense} bytes", p.bytes());
    }

    #[test]
    fn vectors_of_mostly_other_values_are_not_packed() {
        assert!(PackedAux::pack(&mix(10_000, 0.5, 8)).is_none());
        assert!(PackedAux::pack(&mix(100_000, 0.15, 9)).is_none());
        // At the largest share packed: at most ~4.4 B a value.
        let p = PackedAux::pack(&mix(100_000, 0.12, 10)).unwrap();
        assert!(p.bytes() <= 100_000 * 44 / 10, "{} bytes", p.bytes());
        assert!(PackedAux::pack(&[]).is_none());
        // All zeros and ones: only metadata.
        let p = PackedAux::pack(&vec![Fr::ONE; 100]).unwrap();
        assert_eq!((p.big(), p.unpack()), (0, vec![Fr::ONE; 100]));
    }
}
