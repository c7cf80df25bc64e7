//! Groth16 proving: the MSM results of a backend (CPU or GPU, one trait) are assembled into the
//! proof (A, B, C), serialized in bellperson's format, and verified.
//!
//! Construction: Groth, "On the Size of Pairing-based Non-interactive Arguments" (EUROCRYPT
//! 2016), with bellperson's query layout and blinding:
//!
//! - A = α + Σ aᵢ·Aᵢ + r·δ  (G1)
//! - B = β + Σ bᵢ·Bᵢ + s·δ  (G2; also in G1 for C)
//! - C = s·A_Σ + r·B1_Σ + r·s·δ + s·α + r·β + Σ hᵢ·Hᵢ + Σ auxᵢ·Lᵢ  (G1)
//!
//! where A_Σ, B1_Σ are the query sums, so that C = s·A + r·B₁ − r·s·δ + H + L.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod gpu;

/// The trait's old name, inside the crate only, while `engine.rs` still uses it (the lead's file:
/// its `use crate::prover::{self, Backend, …}` and `dyn Backend` become `ProverBackend`, then this
/// line goes).
pub use cpu::CpuBackend;

use bellperson::groth16::{Proof, VerifyingKey};
use std::sync::Arc;

use blstrs::{Bls12, G1Projective, G2Projective, Scalar as Fr};
use group::prime::PrimeCurveAffine;
use group::Curve;

use crate::circuit::{CompiledCircuit, Witness};
use crate::config::Priority;
use crate::error::{Error, Result};
use crate::progress::{Reporter, Timings};
use crate::srs::{Queries, Srs};
use crate::synth::Assignment;

/// Bytes of one serialized partition proof (compressed A ‖ B ‖ C: 48 + 96 + 48).
pub const PROOF_BYTES: usize = 192;

/// The five multi-scalar multiplications of one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    /// Σ hᵢ·Hᵢ over the n − 1 coefficients of the quotient polynomial.
    pub h: G1Projective,
    /// Σ auxᵢ·Lᵢ over all aux variables.
    pub l: G1Projective,
    /// A query sum (inputs, and aux of the A density).
    pub a: G1Projective,
    /// B query sum in G1.
    pub b_g1: G1Projective,
    /// B query sum in G2.
    pub b_g2: G2Projective,
}

/// Which of a partition's MSMs one backend call computes. A cold proof's partitions run in
/// parts (`engine`, [`crate::HAhead`]): the H side as soon as the parameter file's H section is
/// decoded — the file's first, 13 of its 47 GB at 32 GiB —, then each of the other four MSMs
/// as soon as its own section is in, so that the device works while the disk reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Part {
    /// All five MSMs (and, on the compiled path, a, b, c and the R1CS check first).
    #[default]
    All,
    /// The H side only: a, b, c (compiled path) and the R1CS check, the H step, the H MSM. Only
    /// the H query of the parameters is read (the others may still be empty); the returned
    /// [`MsmResults`] holds H, the other sums are the identity.
    HOnly,
    /// Some of the other four MSMs (those of the set, within [`Queries::REST`]), which need
    /// only z, after an earlier [`Part::HOnly`] call on the same witness: no SpMV, no H step,
    /// no R1CS check (it ran in that call, in front of the H MSM), on the device or, after a
    /// fallback, on the CPU. Only the set's queries of the parameters are read; the returned
    /// [`MsmResults`] holds their sums and the identity for the others (H included), so that
    /// the parts of a partition add up ([`MsmResults::add`]) to its one-pass results.
    Rest(Queries),
}

impl Part {
    /// Whether this part computes a, b, c and the H side.
    pub fn h_side(self) -> bool {
        !matches!(self, Part::Rest(_))
    }

    /// The queries whose MSMs this part computes.
    pub fn queries(self) -> Queries {
        match self {
            Part::All => Queries::ALL,
            Part::HOnly => Queries::H,
            Part::Rest(q) => q.and(Queries::REST),
        }
    }

    /// Whether this part computes some of the L, A, B MSMs.
    pub fn rest(self) -> bool {
        !self.queries().and(Queries::REST).is_empty()
    }
}

impl MsmResults {
    /// The results of a [`Part::HOnly`] call: `h`, and the identity for the other four.
    pub fn h_only(h: G1Projective) -> Self {
        MsmResults {
            h,
            ..MsmResults::identity()
        }
    }

    /// All five sums the identity (the results of no MSM).
    pub fn identity() -> Self {
        use group::Group;
        MsmResults {
            h: G1Projective::identity(),
            l: G1Projective::identity(),
            a: G1Projective::identity(),
            b_g1: G1Projective::identity(),
            b_g2: G2Projective::identity(),
        }
    }

    /// The sums of both, query by query: the results of a partition computed in parts.
    pub fn add(&self, o: &MsmResults) -> MsmResults {
        MsmResults {
            h: self.h + o.h,
            l: self.l + o.l,
            a: self.a + o.a,
            b_g1: self.b_g1 + o.b_g1,
            b_g2: self.b_g2 + o.b_g2,
        }
    }
}

/// Per-partition context a backend reports into.
pub struct PartitionCtx<'a> {
    /// Partition index.
    pub partition: usize,
    /// The MSMs to compute ([`Part::All`] unless the engine splits a cold partition).
    pub part: Part,
    /// The call's priority ([`crate::ProveOptions::priority`]): the GPU backend queues the
    /// partition with it in its scheduler (the CPU backend runs calls side by side).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub priority: Priority,
    /// Progress reporter (log + callback).
    pub reporter: &'a Reporter,
    /// Where stage timings are recorded.
    pub timings: &'a mut Timings,
    /// CUDA device that ran the partition (GPU backend).
    pub device: Option<usize>,
    /// Allocator tier that ran (GPU backend).
    pub tier: Option<String>,
    /// Host memory for a, b, c beyond the partition's permit, when that permit counted only
    /// the witness ([`ProverBackend::abc_on_host`] was false): taken if they are computed on the host
    /// after all. `None`: nothing to take (already counted, or no budget involved).
    // Read by the GPU backend only (feature `cuda`).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub host_top_up: Option<crate::budget::HostTopUp>,
    /// Set by a backend when a device copy from the partition's host buffers (its witness)
    /// may still be running after it returned: a stage timed out during an upload and the
    /// device was retired with the copy pending. The engine then neither reuses nor frees
    /// them ([`crate::gpu::memory::hostpool::PooledBuf::retire`]).
    pub host_buffers_busy: bool,
    /// The witness's aux in packed form, made by the GPU backend for the partition's first
    /// part and reused by its later ones (the witness does not change between them), so that
    /// a part after the H side is queued without packing again.
    #[cfg(feature = "cuda")]
    pub packed_aux: Option<std::sync::Arc<crate::gpu::kernels::zpack::PackedAux>>,
}

impl<'a> PartitionCtx<'a> {
    /// The context of partition `partition` before a backend ran it (no device, tier or
    /// host top-up yet; [`Priority::Normal`]).
    pub fn new(partition: usize, reporter: &'a Reporter, timings: &'a mut Timings) -> Self {
        PartitionCtx {
            partition,
            part: Part::All,
            priority: Priority::Normal,
            reporter,
            timings,
            device: None,
            tier: None,
            host_top_up: None,
            host_buffers_busy: false,
            #[cfg(feature = "cuda")]
            packed_aux: None,
        }
    }
}

/// A prover backend: computes the H polynomial and the MSMs of one partition ([`CpuBackend`], the
/// GPU one). Not [`crate::Backend`], the configuration's choice of where partitions run.
pub trait ProverBackend: Send + Sync {
    /// `"cpu"` or `"gpu"`.
    fn name(&self) -> &'static str;

    /// Whether a compiled partition's a, b, c end up in host memory (the CPU SpMV), which sizes
    /// the partition's host-memory permit (`engine::partition_host_bytes`): always on the CPU
    /// backend; on the GPU backend unless the GPU SpMV is on and every device can hold the
    /// circuit's matrices, z and the H step's three domain buffers.
    fn abc_on_host(&self, cc: &CompiledCircuit) -> bool {
        let _ = cc;
        true
    }

    /// Computes the MSM results of `asg` against `srs`: those of `ctx.part` ([`Part`]; with
    /// [`Part::Rest`], `asg` needs no a, b, c and `srs` only the set's queries; with
    /// [`Part::HOnly`], `srs` its H query only). The backend may take `a`, `b`, `c` out of the
    /// assignment (they are not needed afterwards).
    ///
    /// # Errors
    /// Device and memory errors (GPU); [`Error::InvalidInput`] for inconsistent sizes.
    fn compute(
        &self,
        asg: &mut Assignment,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults>;

    /// Readies the decoded queries of `srs` for this backend, during a cold load as each
    /// section of the parameter file is decoded (`srs` then holds the sections so far; the
    /// others are empty) and again with the whole set: the GPU backend page-locks each query
    /// once, so that the pinning overlaps the disk instead of following it. The default (the
    /// CPU backend): nothing.
    fn prepare_params(&self, srs: &Srs) {
        let _ = srs;
    }

    /// Lets go of what [`ProverBackend::prepare_params`] readied for the parameters at `path`
    /// (their load failed after some sections were handed out, or the engine evicted them:
    /// [`crate::srs_cache`]). The default: nothing.
    fn forget_params(&self, path: &std::path::Path) {
        let _ = path;
    }

    /// How many partitions this backend runs at once (the GPU: devices × workers per device),
    /// which sizes the engine's gate of partitions in flight ([`crate::pipeline`]); `None`
    /// (the default, the CPU backend): no gate, the host budget alone decides.
    fn parallel_partitions(&self) -> Option<usize> {
        None
    }

    /// Whether the engine should run each compiled partition of `cc` in two parts — its H side
    /// ([`Part::HOnly`]), then its L, A and B MSMs ([`Part::Rest`]) — so that the backend can
    /// batch the second parts of several partitions over one streamed upload of the bases
    /// (the GPU backend: where no device can keep the parameters resident, unless
    /// `Tuning::msm_batch` is 1). Default: no.
    fn split_for_shared_bases(&self, cc: &CompiledCircuit) -> bool {
        let _ = cc;
        false
    }

    /// How the engine's pool of witness buffers ([`crate::gpu::memory::hostpool::HostPool`]) serves
    /// this backend: the registry that page-locks them (`None`: plain pageable `Vec`s) and the
    /// most idle buffers kept between partitions (0: each is freed after its partition). The
    /// default (the CPU backend): `(None, 0)`, as plain `Vec`s behave.
    fn host_pool_config(&self) -> (Option<crate::gpu::memory::pinned::PinnedRegistry>, usize) {
        (None, 0)
    }

    /// The compiled path: a = A·z, b = B·z, c = C·z of witness `w` by the matrices of `cc`, the
    /// R1CS check a∘b = c ([`Error::Synthesis`] naming the first failing constraint, before any
    /// MSM), then what [`ProverBackend::compute`] does. The default runs the SpMV and the check on the
    /// CPU (timed as [`Stage::Spmv`](crate::progress::Stage::Spmv)); a backend that can do them
    /// on its device overrides it, so that only z crosses to the device.
    ///
    /// `w`'s vectors are borrowed, not consumed: on return — success or error — `w` holds the
    /// same allocations again (a pooled, page-locked buffer goes back to its pool), and no
    /// device copy from them is still running unless `ctx.host_buffers_busy` says so.
    ///
    /// # Errors
    /// As [`ProverBackend::compute`], plus [`Error::Synthesis`] for an unsatisfied witness and
    /// [`Error::Internal`] for a witness of the wrong size.
    fn compute_compiled(
        &self,
        w: &mut Witness,
        cc: &Arc<CompiledCircuit>,
        srs: &Arc<Srs>,
        ctx: &mut PartitionCtx<'_>,
    ) -> Result<MsmResults> {
        cc.check_witness(w)?;
        let p = Some(ctx.partition);
        // z moves into the assignment under the guard first (back into `w` on every path, a
        // panic included), then a, b, c are computed in place.
        let asg = Assignment {
            input: std::mem::take(&mut w.input),
            aux: std::mem::take(&mut w.aux),
            ..Assignment::default()
        };
        let mut lent = LentAssignment { w, asg };
        if ctx.part.h_side() {
            ctx.reporter
                .time(ctx.timings, p, crate::progress::Stage::Spmv, || {
                    cc.evaluate_in_place(&mut lent.asg)
                })?;
            check_satisfied(&lent.asg, ctx.partition)?;
        } else {
            // L, A, B need z and the densities only (a, b, c stay empty).
            lent.asg.a_aux_density = cc.a_aux_density.clone();
            lent.asg.b_input_density = cc.b_input_density.clone();
            lent.asg.b_aux_density = cc.b_aux_density.clone();
        }
        self.compute(&mut lent.asg, srs, ctx)
    }
}

/// The proving assignment of a borrowed witness ([`ProverBackend::compute_compiled`]): its `input`
/// and `aux` are the witness's vectors, moved back into the witness when this drops — on
/// success, on error and while unwinding — so a pooled buffer lent to a backend is never freed
/// inside it (the engine's guard of the buffer releases its registration first).
pub(crate) struct LentAssignment<'w> {
    /// Where the vectors go back.
    pub(crate) w: &'w mut Witness,
    /// The assignment.
    pub(crate) asg: Assignment,
}

impl Drop for LentAssignment<'_> {
    fn drop(&mut self) {
        self.w.input = std::mem::take(&mut self.asg.input);
        self.w.aux = std::mem::take(&mut self.asg.aux);
    }
}

/// Assembles the Groth16 proof from the MSM results and the blinding factors `r`, `s`.
///
/// # Errors
/// [`Error::ParametersInvalid`]-like internal error if δ is the identity (broken parameters).
pub fn assemble(vk: &VerifyingKey<Bls12>, m: &MsmResults, r: Fr, s: Fr) -> Result<Proof<Bls12>> {
    if bool::from(vk.delta_g1.is_identity()) || bool::from(vk.delta_g2.is_identity()) {
        return Err(Error::Internal("verifying key has δ at infinity".into()));
    }
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let g_a = delta_g1 * r + vk.alpha_g1 + m.a;
    let g_b = G2Projective::from(vk.delta_g2) * s + vk.beta_g2 + m.b_g2;
    let g_c = delta_g1 * (r * s)
        + G1Projective::from(vk.alpha_g1) * s
        + G1Projective::from(vk.beta_g1) * r
        + m.a * s
        + m.b_g1 * r
        + m.h
        + m.l;
    Ok(Proof {
        a: g_a.to_affine(),
        b: g_b.to_affine(),
        c: g_c.to_affine(),
    })
}

/// Serializes a proof in bellperson's format (192 bytes).
pub fn proof_to_bytes(p: &Proof<Bls12>) -> [u8; PROOF_BYTES] {
    let mut out = [0u8; PROOF_BYTES];
    let mut v = Vec::with_capacity(PROOF_BYTES);
    p.write(&mut v).expect("writing to a Vec cannot fail");
    out.copy_from_slice(&v);
    out
}

/// One pass of a streamed MSM: scalars `s..e`, the density words covering them (when the MSM
/// has a density) and the bases `points` their set bits use (`points[k]` pairs with the k-th set
/// bit overall, as in bellperson's layout).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub struct MsmPass {
    /// First scalar of the pass.
    pub s: usize,
    /// One past the last scalar of the pass.
    pub e: usize,
    /// The bases the pass uses.
    pub points: std::ops::Range<usize>,
    /// The density words covering `s..e` (`s / 64 .. ceil(e / 64)`), with a density.
    pub words: Option<std::ops::Range<usize>>,
}

/// Splits an MSM over `n` scalars into passes of about `chunk` scalars (rounded up to a multiple
/// of 64 so density words split cleanly). With a density, passes whose scalars are all outside
/// it are dropped. Used by the GPU backend when bases stream from host memory.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn msm_passes(n: usize, density: Option<&crate::synth::Density>, chunk: usize) -> Vec<MsmPass> {
    let chunk = chunk.div_ceil(64).max(1) * 64;
    let mut out = Vec::new();
    let mut used = 0usize;
    for s in (0..n).step_by(chunk) {
        let e = (s + chunk).min(n);
        match density {
            None => out.push(MsmPass {
                s,
                e,
                points: s..e,
                words: None,
            }),
            Some(d) => {
                let words = s / 64..e.div_ceil(64);
                let ones: usize = d.words()[words.clone()]
                    .iter()
                    .map(|w| w.count_ones() as usize)
                    .sum();
                if ones > 0 {
                    out.push(MsmPass {
                        s,
                        e,
                        points: used..used + ones,
                        words: Some(words),
                    });
                }
                used += ones;
            }
        }
    }
    out
}

/// Checks that the assignment satisfies every constraint (aⱼ·bⱼ = cⱼ), in parallel.
/// Cheap next to the MSMs; catches an inconsistent C1 output before the heavy work.
///
/// # Errors
/// [`Error::Synthesis`] naming the first unsatisfied constraint.
pub fn check_satisfied(asg: &Assignment, partition: usize) -> Result<()> {
    use rayon::prelude::*;
    let bad = asg
        .a
        .par_iter()
        .zip(asg.b.par_iter())
        .zip(asg.c.par_iter())
        .with_min_len(1 << 14)
        .position_first(|((a, b), c)| *a * b != *c);
    match bad {
        None => Ok(()),
        Some(j) => Err(unsatisfied(partition, j, asg.a.len())),
    }
}

/// The error of an R1CS check that found constraint `j` of `n` unsatisfied in `partition` (the
/// CPU check [`check_satisfied`] and the GPU backend's device check word it alike).
pub fn unsatisfied(partition: usize, j: usize, n: usize) -> Error {
    Error::Synthesis {
        partition,
        message: format!("the inputs do not satisfy the circuit (constraint {j} of {n})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Density;
    use group::Group;

    /// Parameters of the right sizes for `cc` (distinct multiples of the generators: not a real
    /// setup, enough for MSM results to compare).
    fn toy_srs(cc: &CompiledCircuit) -> Arc<Srs> {
        use blstrs::{G1Affine, G2Affine};
        let k = cc.shape_counts();
        let domain = cc.layout.num_constraints().next_power_of_two();
        let g1 = |n: usize, off: u64| -> Arc<Vec<G1Affine>> {
            Arc::new(
                (0..n as u64)
                    .map(|i| (G1Projective::generator() * Fr::from(off + i)).to_affine())
                    .collect(),
            )
        };
        let b_g2 = (0..(k.b_inputs + k.b_aux) as u64)
            .map(|i| (G2Projective::generator() * Fr::from(500 + i)).to_affine())
            .collect();
        let vk = VerifyingKey::<Bls12> {
            alpha_g1: G1Affine::generator(),
            beta_g1: G1Affine::generator(),
            beta_g2: G2Affine::generator(),
            gamma_g2: G2Affine::generator(),
            delta_g1: G1Affine::generator(),
            delta_g2: G2Affine::generator(),
            ic: vec![G1Affine::generator(); k.inputs],
        };
        Arc::new(Srs {
            path: "toy.params".into(),
            pvk: Arc::new(bellperson::groth16::prepare_verifying_key(&vk)),
            vk,
            h: g1(domain - 1, 2),
            l: g1(k.aux, 100),
            a: g1(k.inputs + k.a_aux, 200),
            b_g1: g1(k.b_inputs + k.b_aux, 300),
            b_g2: Arc::new(b_g2),
        })
    }

    /// The toy circuit's values for challenge `i` (x = 5, c = 7, 11, 13).
    fn toy_values(i: usize) -> Result<crate::circuit::tests::Toy> {
        Ok(crate::circuit::tests::Toy {
            x: Some(5),
            c: vec![[7, 11, 13][i]],
        })
    }

    /// The toy circuit compiled (one block, three challenges), its witness and parameters of
    /// its sizes.
    fn toy() -> (Arc<CompiledCircuit>, Witness, Arc<Srs>) {
        let cc = Arc::new(
            CompiledCircuit::compile(
                crate::circuit::tests::blank(1),
                crate::circuit::Blocks::POREP,
                3,
            ).unwrap(),
        );
        let fresh = crate::circuit::witness::generate(&cc.layout, 0, toy_values).unwrap();
        let srs = toy_srs(&cc);
        (cc, fresh, srs)
    }

    #[test]
    fn the_compiled_path_gives_a_lent_pooled_buffer_back_on_every_outcome() {
        use crate::circuit::witness;
        use crate::gpu::memory::hostpool::HostPool;
        use crate::gpu::memory::pinned::{FakePinner, PinnedRegistry};
        use ff::Field;

        let (cc, fresh, srs) = toy();
        let make = toy_values;
        let reporter = Reporter::new(None);
        let mut t = Timings::default();
        let mut asg = cc.evaluate(fresh.clone()).unwrap();
        let want = CpuBackend
            .compute(&mut asg, &srs, &mut PartitionCtx::new(0, &reporter, &mut t))
            .unwrap();
        // L is Σ auxᵢ·Lᵢ: checked naively.
        let l: G1Projective = srs
            .l
            .iter()
            .zip(&fresh.aux)
            .map(|(p, s)| G1Projective::from(p) * s)
            .sum();
        assert_eq!(want.l, l);

        let f = Arc::new(FakePinner::new());
        let pool = HostPool::new(Some(PinnedRegistry::new(f.clone())), 1, None);
        let mut buf = pool.take(cc.layout.num_aux()).unwrap();
        let mut w = Witness {
            aux: buf.lend(),
            ..Witness::default()
        };
        witness::generate_into(&cc.layout, 0, make, &mut w).unwrap();
        let mut ctx = PartitionCtx::new(0, &reporter, &mut t);
        let got = CpuBackend
            .compute_compiled(&mut w, &cc, &srs, &mut ctx)
            .unwrap();
        assert!(!ctx.host_buffers_busy);
        assert_eq!(got, want, "same results as the assignment's own vectors");
        assert_eq!(w, fresh, "the vectors are back, unchanged");
        assert_eq!(w.aux.as_ptr() as usize, buf.ptr());
        let refused = |w: &mut Witness, t: &mut Timings| {
            CpuBackend
                .compute_compiled(w, &cc, &srs, &mut PartitionCtx::new(0, &reporter, t))
                .unwrap_err()
        };
        // Unsatisfied: the typed error, and the vectors are back all the same.
        w.aux[7] += Fr::ONE;
        let e = refused(&mut w, &mut t);
        assert!(matches!(e, Error::Synthesis { partition: 0, .. }), "{e}");
        assert_eq!((w.input.len(), w.aux.len()), (5, 11));
        assert_eq!(w.aux.as_ptr() as usize, buf.ptr());
        // The wrong size: refused before anything moves.
        w.aux.truncate(3);
        let e = refused(&mut w, &mut t);
        assert!(matches!(e, Error::Internal(_)), "{e}");
        assert_eq!((w.aux.len(), w.aux.as_ptr() as usize), (3, buf.ptr()));
        assert!(buf.restore(std::mem::take(&mut w.aux)));
        drop(buf);
        assert_eq!((pool.idle_buffers(), f.register_calls()), (1, 1));
    }

    #[test]
    fn parts_on_the_sections_so_far_add_up_to_the_one_pass_results() {
        let (cc, fresh, srs) = toy();
        let reporter = Reporter::new(None);
        let mut t = Timings::default();
        let mut run = |part: Part, srs: &Arc<Srs>| {
            let mut w = fresh.clone();
            let mut ctx = PartitionCtx::new(0, &reporter, &mut t);
            ctx.part = part;
            let r = CpuBackend.compute_compiled(&mut w, &cc, srs, &mut ctx);
            assert_eq!(w, fresh, "the witness is back");
            r.unwrap()
        };
        let one = run(Part::All, &srs);
        // A cold load's parameters after `n` sections: the later queries still empty.
        let so_far = |n: usize| {
            let mut s = (*srs).clone();
            let empty = |k: usize| n <= k;
            if empty(1) {
                s.l = Arc::default();
            }
            if empty(2) {
                s.a = Arc::default();
            }
            if empty(3) {
                s.b_g1 = Arc::default();
            }
            if empty(4) {
                s.b_g2 = Arc::default();
            }
            Arc::new(s)
        };
        let counts = cc.shape_counts();
        assert!(so_far(2).check_counts_of(&counts, Queries::first(2)).is_ok());
        assert!(so_far(2).check_counts(&counts).is_err());
        let id = MsmResults::identity();
        let h = run(Part::HOnly, &so_far(1));
        assert_eq!(h, MsmResults::h_only(one.h));
        let l = run(Part::Rest(Queries::L), &so_far(2));
        assert_eq!(l, MsmResults { l: one.l, ..id });
        let a_b1 = Queries::REST.without(Queries::L).without(Queries::B_G2);
        let ab = run(Part::Rest(a_b1), &so_far(4));
        assert_eq!(
            ab,
            MsmResults {
                a: one.a,
                b_g1: one.b_g1,
                ..id
            }
        );
        let b2 = run(Part::Rest(Queries::B_G2), &so_far(5));
        assert_eq!(b2, MsmResults { b_g2: one.b_g2, ..id });
        assert_eq!(h.add(&l).add(&ab).add(&b2), one);
        assert_ne!(one.a, id.a, "the toy's sums are not the identity");
        assert_eq!(format!("{a_b1}"), "A+B_G1");
        assert_eq!(Queries::first(1), Queries::H);
        assert_eq!(Queries::first(9), Queries::ALL);
        assert_eq!(Queries::REST.first_index(), Some(1));
        assert_eq!(Queries::NONE.first_index(), None);
    }

    fn density(len: usize, bit: impl Fn(usize) -> bool) -> Density {
        let mut d = Density::default();
        for i in 0..len {
            d.push();
            if bit(i) {
                d.set(i);
            }
        }
        d
    }

    #[test]
    fn passes_without_density_cover_every_scalar_once() {
        // chunk 100 rounds up to 128.
        let p = msm_passes(1000, None, 100);
        assert_eq!(p.len(), 8);
        assert_eq!((p[0].s, p[0].e, p[0].points.clone()), (0, 128, 0..128));
        assert_eq!(
            (p[7].s, p[7].e, p[7].points.clone()),
            (896, 1000, 896..1000)
        );
        assert!(p.windows(2).all(|w| w[0].e == w[1].s));
        assert!(p.iter().all(|x| x.words.is_none()));
        assert!(msm_passes(0, None, 64).is_empty());
        assert_eq!(msm_passes(5, None, 0).len(), 1); // chunk 0 → one word's worth
    }

    #[test]
    fn passes_with_density_pair_each_set_bit_with_its_point() {
        // Bits set at i % 3 == 0 and in 200..260 (a dense run); nothing in 700..1000, so the
        // passes there are dropped.
        let n = 1000;
        let d = density(n, |i| i < 700 && (i % 3 == 0 || (200..260).contains(&i)));
        let set: Vec<usize> = (0..n).filter(|&i| d.get(i)).collect();
        let passes = msm_passes(n, Some(&d), 128);
        assert!(passes.iter().all(|p| p.s < 700), "empty passes are dropped");
        let mut seen = Vec::new();
        for p in &passes {
            let w = p.words.clone().unwrap();
            assert_eq!(w, p.s / 64..p.e.div_ceil(64));
            // The k-th set bit of the pass's words (within s..e) uses points[p.points.start + k].
            let in_pass: Vec<usize> = (p.s..p.e).filter(|&i| d.get(i)).collect();
            assert_eq!(in_pass.len(), p.points.len());
            for (k, &i) in in_pass.iter().enumerate() {
                let point = p.points.start + k;
                assert_eq!(
                    set[point], i,
                    "point {point} belongs to variable {}",
                    set[point]
                );
            }
            seen.extend(in_pass);
        }
        assert_eq!(seen, set, "every set bit in exactly one pass, in order");
        assert_eq!(passes.last().unwrap().points.end, d.count());
    }
}
