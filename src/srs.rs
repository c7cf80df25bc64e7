//! Groth16 parameters (the SRS): locating the `.params` file of a PoRep circuit, checking its
//! header and length, and decoding it once (memory-mapped, read ahead, points decoded in parallel
//! in file order) into a handle that every partition and every later call shares.
//!
//! File layout (bellperson's, all integers big-endian, points uncompressed):
//!
//! | section | contents |
//! |---|---|
//! | vk | α₁ (G1), β₁ (G1), β₂ (G2), γ₂ (G2), δ₁ (G1), δ₂ (G2), `u32` n, IC: n × G1 |
//! | H | `u32` n, n × G1 — one per power of τ below domain size − 1 |
//! | L | `u32` n, n × G1 — one per aux variable |
//! | A | `u32` n, n × G1 — inputs, then aux variables of the A density |
//! | B_G1 | `u32` n, n × G1 — inputs and aux variables of the B density |
//! | B_G2 | `u32` n, n × G2 — same variables as B_G1 |
//!
//! A G1 point takes 96 bytes, a G2 point 192 bytes. A 32 GiB PoRep file is 44.1 GiB, a 2 KiB
//! one 1.1 GB.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

#[cfg(any(test, feature = "internals"))]
use bellperson::groth16::Parameters;
use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::synth::Assignment;

/// Bytes of an uncompressed G1 point.
pub const G1_BYTES: usize = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_BYTES: usize = 192;

/// A set of the five Groth16 queries (bits in the parameter file's order: H, L, A, B_G1,
/// B_G2). A cold load decodes them in that order ([`Srs::load_with_vk_then`]); a
/// split partition computes each query's MSM once its section is in ([`crate::prover::Part`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Queries(u8);

impl Queries {
    /// No query.
    pub const NONE: Queries = Queries(0);
    /// The H query (the quotient's coefficients; `domain − 1` points).
    pub const H: Queries = Queries(1);
    /// The L query (one point per aux variable).
    pub const L: Queries = Queries(1 << 1);
    /// The A query (inputs, then the aux variables of the A density).
    pub const A: Queries = Queries(1 << 2);
    /// The B query in G1.
    pub const B_G1: Queries = Queries(1 << 3);
    /// The B query in G2.
    pub const B_G2: Queries = Queries(1 << 4);
    /// L, A, B_G1 and B_G2: the MSMs over z alone.
    pub const REST: Queries = Queries(0b11110);
    /// All five.
    pub const ALL: Queries = Queries(0b11111);

    /// The first `n` queries in file order (`n` ≥ 5: all five): what a load has decoded after
    /// `n` sections.
    pub fn first(n: usize) -> Queries {
        Queries(((1u32 << n.min(5)) - 1) as u8)
    }

    /// Whether every query of `q` is in this set.
    pub fn contains(self, q: Queries) -> bool {
        self.0 & q.0 == q.0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The queries in both sets.
    pub fn and(self, q: Queries) -> Queries {
        Queries(self.0 & q.0)
    }

    /// The queries of this set not in `q`.
    pub fn without(self, q: Queries) -> Queries {
        Queries(self.0 & !q.0)
    }

    /// The position in file order (0 = H … 4 = B_G2) of the first query of the set.
    pub fn first_index(self) -> Option<usize> {
        (!self.is_empty()).then(|| self.0.trailing_zeros() as usize)
    }
}

impl std::fmt::Display for Queries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = ["H", "L", "A", "B_G1", "B_G2"];
        let set: Vec<&str> = (0..5)
            .filter(|i| self.0 & (1 << i) != 0)
            .map(|i| names[i])
            .collect();
        write!(f, "{}", set.join("+"))
    }
}

/// Decoded Groth16 parameters of one circuit. Cheap to share and to clone (`Arc` inside: a
/// clone shares the point vectors and the prepared key).
#[derive(Clone)]
pub struct Srs {
    /// File the parameters came from.
    pub path: PathBuf,
    /// Verifying key (from the head of the `.params` file; equal to the `.vk` file's when loaded
    /// by [`Srs::load_with_vk`]).
    pub vk: VerifyingKey<Bls12>,
    /// The verifying key prepared for pairing checks: the `.vk` file's when loaded by
    /// [`Srs::load_with_vk`] (the key filecoin-proofs' `verify_seal` uses), else the
    /// `.params` file's.
    pub pvk: Arc<PreparedVerifyingKey<Bls12>>,
    /// H query: `domain_size − 1` points.
    pub h: Arc<Vec<G1Affine>>,
    /// L query: one point per aux variable.
    pub l: Arc<Vec<G1Affine>>,
    /// A query: all inputs, then the aux variables of the A density.
    pub a: Arc<Vec<G1Affine>>,
    /// B query in G1: inputs and aux variables of the B density.
    pub b_g1: Arc<Vec<G1Affine>>,
    /// B query in G2: same variables as `b_g1`.
    pub b_g2: Arc<Vec<G2Affine>>,
}

impl std::fmt::Debug for Srs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Srs")
            .field("path", &self.path)
            .field("ic", &self.vk.ic.len())
            .field("h", &self.h.len())
            .field("l", &self.l.len())
            .field("a", &self.a.len())
            .field("b_g1", &self.b_g1.len())
            .field("b_g2", &self.b_g2.len())
            .finish()
    }
}

/// Byte ranges of the point sections of a parameter file (after its 4-byte length headers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Verifying key bytes.
    pub vk: Range<usize>,
    /// H, L, A, B_G1 point bytes (G1).
    pub g1: [Range<usize>; 4],
    /// B_G2 point bytes (G2).
    pub b_g2: Range<usize>,
}

impl Layout {
    /// Reads the section headers of `bytes` and checks that the file is exactly as long as they
    /// say (neither truncated nor with trailing bytes).
    ///
    /// # Errors
    /// A human-readable reason naming the section and the byte counts.
    pub fn parse(bytes: &[u8]) -> std::result::Result<Layout, String> {
        let total = bytes.len();
        if total == 0 {
            return Err("file is empty (0 bytes)".into());
        }
        let mut off = 0usize;
        let mut take = |name: &str,
                        fixed: usize,
                        elem: usize|
         -> std::result::Result<Range<usize>, String> {
            let start = off;
            let need_hdr = start + fixed + 4;
            if need_hdr > total {
                return Err(format!(
                    "truncated in the {name} header: needs {need_hdr} bytes, file has {total}"
                ));
            }
            let n = u32::from_be_bytes(bytes[start + fixed..need_hdr].try_into().expect("4 bytes"))
                as usize;
            let end = need_hdr
                .checked_add(n.checked_mul(elem).ok_or("section length overflows")?)
                .ok_or("section length overflows")?;
            if end > total {
                return Err(format!(
                    "truncated in section {name}: {n} points need bytes up to {end}, file has {total}"
                ));
            }
            off = end;
            Ok(if fixed > 0 { start..end } else { need_hdr..end })
        };
        let vk = take("vk", 3 * G1_BYTES + 3 * G2_BYTES, G1_BYTES)?;
        let h = take("H", 0, G1_BYTES)?;
        let l = take("L", 0, G1_BYTES)?;
        let a = take("A", 0, G1_BYTES)?;
        let b1 = take("B_G1", 0, G1_BYTES)?;
        let b2 = take("B_G2", 0, G2_BYTES)?;
        if off != total {
            return Err(format!(
                "{} trailing bytes after the B_G2 section",
                total - off
            ));
        }
        Ok(Layout {
            vk,
            g1: [h, l, a, b1],
            b_g2: b2,
        })
    }
}

/// Bytes of the file decoded per parallel step: large enough that 16 threads each decode tens of
/// thousands of points per step, small enough that the read-ahead below stays a few steps ahead
/// of the decoders (64 MiB: 0.7 M G1 or 0.35 M G2 points; ~55 ms of a 1.2 GB/s disk).
const WINDOW_BYTES: usize = 64 << 20;

/// Steps of read-ahead: the prefetch thread asks the kernel for the bytes of at most this many
/// windows past the one being decoded (256 MiB in flight keeps a disk queue full).
const WINDOWS_AHEAD: usize = 4;

/// One uncompressed curve point of a `.params` section: its size and its decoding (on-curve
/// checked, subgroup check skipped, the identity refused).
trait FilePoint: Sized + Copy + Send + Sync {
    /// Bytes of the uncompressed encoding.
    const BYTES: usize;
    /// A valid point, written where a bad one was found (the load then fails).
    fn placeholder() -> Self;
    /// Decodes `bytes` (exactly [`FilePoint::BYTES`] long).
    fn decode(bytes: &[u8]) -> std::result::Result<Self, &'static str>;
}

impl FilePoint for G1Affine {
    const BYTES: usize = G1_BYTES;
    fn placeholder() -> Self {
        G1Affine::generator()
    }
    fn decode(bytes: &[u8]) -> std::result::Result<Self, &'static str> {
        let repr: &[u8; G1_BYTES] = bytes.try_into().expect("chunks_exact");
        let p: Option<G1Affine> = G1Affine::from_uncompressed_unchecked(repr).into();
        match p {
            Some(p) if !bool::from(p.is_identity()) => Ok(p),
            Some(_) => Err("a G1 point is the point at infinity"),
            None => Err("a G1 point is not on the curve"),
        }
    }
}

impl FilePoint for G2Affine {
    const BYTES: usize = G2_BYTES;
    fn placeholder() -> Self {
        G2Affine::generator()
    }
    fn decode(bytes: &[u8]) -> std::result::Result<Self, &'static str> {
        let repr: &[u8; G2_BYTES] = bytes.try_into().expect("chunks_exact");
        let p: Option<G2Affine> = G2Affine::from_uncompressed_unchecked(repr).into();
        match p {
            Some(p) if !bool::from(p.is_identity()) => Ok(p),
            Some(_) => Err("a G2 point is the point at infinity"),
            None => Err("a G2 point is not on the curve"),
        }
    }
}

/// Decodes the points of `map[range]` into a vector of exactly `range.len() / P::BYTES` points,
/// window by window in file order: each window's points are decoded by the rayon pool and
/// written in place into the vector's spare capacity (an indexed `par_extend`: no per-thread
/// lists, no sequential concatenation, the output's pages first touched by the decoders).
/// The first bad point's reason is kept; decoding stops after its window.
///
/// `decoded` is advanced to the file offset decoded so far (read by the prefetch thread).
fn decode_section<P: FilePoint>(
    map: &memmap2::Mmap,
    range: Range<usize>,
    decoded: &AtomicUsize,
) -> std::result::Result<Vec<P>, String> {
    let n = range.len() / P::BYTES;
    let mut out: Vec<P> = Vec::with_capacity(n);
    let bad: OnceLock<&'static str> = OnceLock::new();
    let step = (WINDOW_BYTES / P::BYTES) * P::BYTES;
    let mut at = range.start;
    while at < range.end {
        let end = (at + step).min(range.end);
        out.par_extend(map[at..end].par_chunks_exact(P::BYTES).map(|c| {
            P::decode(c).unwrap_or_else(|reason| {
                let _ = bad.set(reason);
                P::placeholder()
            })
        }));
        decoded.store(end, Ordering::Release);
        release_window(map, at, end - at);
        if let Some(reason) = bad.get() {
            return Err((*reason).to_string());
        }
        at = end;
    }
    debug_assert_eq!(out.len(), n);
    Ok(out)
}

/// Unmaps the decoded window `map[at..at + len]` from the process (`madvise(MADV_DONTNEED)`):
/// its file pages stay in the page cache (a later load still finds them) but are no longer
/// mapped, so the process's resident set does not grow by the whole 47 GB file of a 32 GiB
/// sector beside its decoded copy, and the kernel reclaims those pages cheaply (no page-table
/// walk) when the proof's other buffers need the memory during the load.
fn release_window(map: &memmap2::Mmap, at: usize, len: usize) {
    // SAFETY: the mapping is a read-only shared mapping of a file (`Mmap::map`): after
    // MADV_DONTNEED a later access faults the same bytes back in from the file, so no slice of
    // it (the layout parse and verifying key above read only its head, before decoding) sees
    // other contents; nothing reads this window again. Advice is a hint: its error is ignored.
    let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len) };
}

/// Read-ahead for a file decoded front to back: asks the kernel (`madvise(MADV_WILLNEED)`) for
/// each window of `map[from..]` once the decoders are within [`WINDOWS_AHEAD`] windows of it, so
/// the disk reads ahead of the decoders instead of each page fault waiting for it. Runs on its
/// own thread (the call can block while the request queue is full); returns when the end is
/// reached or `stop` is set. Advice is only a hint: an error leaves the faults to read the file.
fn prefetch(map: &memmap2::Mmap, from: usize, decoded: &AtomicUsize, stop: &AtomicBool) {
    let mut next = from;
    while next < map.len() && !stop.load(Ordering::Acquire) {
        if next >= decoded.load(Ordering::Acquire) + WINDOWS_AHEAD * WINDOW_BYTES {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let len = WINDOW_BYTES.min(map.len() - next);
        let _ = map.advise_range(memmap2::Advice::WillNeed, next, len);
        next += len;
    }
}

impl Srs {
    /// Loads and decodes a `.params` file: mmap, header/length check ([`Layout::parse`]), then
    /// the sections in file order, 64 MiB windows decoded in parallel straight into their
    /// vectors (on-curve checked; subgroup checks skipped, as filecoin-proofs does for cached
    /// parameters) while a prefetch thread keeps the kernel reading a few windows ahead: a cold
    /// load runs at the disk's speed when the cores keep up. Each decoded window is unmapped at
    /// once (`madvise(MADV_DONTNEED)`; its pages stay in the page cache): the file is never
    /// mapped whole beside its decoded copy. Warm, 0.44 GB/s on 2 cores (the `params_load`
    /// bench; 0.32 GB/s before the windows).
    ///
    /// # Errors
    /// [`Error::ParametersNotFound`] if the file does not exist; [`Error::ParametersInvalid`] if it
    /// is empty, truncated, has trailing bytes or bad points.
    #[cfg(any(test, feature = "internals"))]
    pub fn load(path: &Path) -> Result<Srs> {
        Srs::load_inner(path, None, &mut |_| {})
    }

    /// [`Srs::load`], and checks the parameters' verifying key against the separate `.vk` file
    /// at `vk_path` (the key filecoin-proofs' `verify_seal` verifies with); [`Srs::pvk`] is then
    /// prepared from the `.vk` file. The `.params` file's layout is checked first, then the two
    /// keys are compared, before any point of the large sections is decoded.
    ///
    /// # Errors
    /// Those of [`Srs::load`] for `path`; then [`Error::ParametersNotFound`] naming `vk_path`
    /// when it does not exist; [`Error::ParametersInvalid`] naming `vk_path` when it is not a
    /// verifying key, and naming both files when the keys differ.
    #[cfg(any(test, feature = "internals"))]
    pub fn load_with_vk(path: &Path, vk_path: &Path) -> Result<Srs> {
        Srs::load_inner(path, Some(vk_path), &mut |_| {})
    }

    /// [`Srs::load_with_vk`], calling `on_section` on the loading thread after each of the
    /// five sections is decoded (H, L, A, B_G1, B_G2, in file order) with the parameters so
    /// far: the same vectors the result will hold (shared, not copied), the sections not yet
    /// decoded empty. A cold 32 GiB load hands out H after ~13 of its 47 GB: the engine starts
    /// the partitions' H side then ([`crate::HAhead`]). `on_section` should return quickly (it
    /// holds up the decoding).
    ///
    /// # Errors
    /// As [`Srs::load_with_vk`]; sections handed out before a later bad one stay valid points.
    pub fn load_with_vk_then(
        path: &Path,
        vk_path: &Path,
        on_section: &mut dyn FnMut(&Srs),
    ) -> Result<Srs> {
        Srs::load_inner(path, Some(vk_path), on_section)
    }

    /// [`Srs::load`]; with `vk_path`, the verifying key at the head of the file must equal the
    /// one of that `.vk` file, which then gives [`Srs::pvk`]. `on_section` as in
    /// [`Srs::load_with_vk_then`].
    fn load_inner(
        path: &Path,
        vk_path: Option<&Path>,
        on_section: &mut dyn FnMut(&Srs),
    ) -> Result<Srs> {
        let invalid = |reason: String| Error::ParametersInvalid {
            path: path.to_path_buf(),
            reason,
        };
        let file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::ParametersNotFound {
                path: path.to_path_buf(),
                given_dir: None,
            },
            _ => invalid(format!("cannot open: {e}")),
        })?;
        let len = file
            .metadata()
            .map_err(|e| invalid(format!("cannot stat: {e}")))?
            .len();
        if len == 0 {
            return Err(invalid("file is empty (0 bytes)".into()));
        }
        // SAFETY: the mapping is read-only and dropped before returning; parameter files are not
        // modified while in use (filecoin-proofs writes them once, atomically, under a lock).
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| invalid(format!("cannot mmap: {e}")))?;
        let bytes: &[u8] = &map;
        let layout = Layout::parse(bytes).map_err(invalid)?;
        let vk = VerifyingKey::<Bls12>::read(&bytes[layout.vk.clone()])
            .map_err(|e| invalid(format!("bad verifying key: {e}")))?;
        let file_vk = vk_path
            .map(|p| read_vk_file(p).map(|k| (p, k)))
            .transpose()?;
        if let Some((vk_path, expected)) = &file_vk {
            if vk != *expected {
                return Err(invalid(format!(
                    "its verifying key differs from the one in {} (the key filecoin-proofs' \
                     verify_seal uses): the .params and .vk files are not of the same setup",
                    vk_path.display()
                )));
            }
        }
        let [h, l, a, b1] = layout.g1.clone();
        let pvk = Arc::new(prepare_verifying_key(
            file_vk.as_ref().map_or(&vk, |(_, k)| k),
        ));
        // What the load has decoded so far, handed to `on_section` after each section.
        let mut so_far = Srs {
            path: path.to_path_buf(),
            vk: vk.clone(),
            pvk,
            h: Arc::default(),
            l: Arc::default(),
            a: Arc::default(),
            b_g1: Arc::default(),
            b_g2: Arc::default(),
        };
        // The sections in file order, one window at a time, with the read-ahead beside them.
        let _ = map.advise(memmap2::Advice::Sequential);
        let first = h.start;
        let decoded = AtomicUsize::new(first);
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            scope.spawn(|| prefetch(&map, first, &decoded, &stop));
            let sections = (|| {
                let t = std::time::Instant::now();
                let g1 = |name: &str, r: Range<usize>| {
                    let v = decode_section::<G1Affine>(&map, r, &decoded);
                    log::debug!(
                        "parameters: {name} decoded, {:.1} s since the first",
                        t.elapsed().as_secs_f64()
                    );
                    v.map(Arc::new)
                };
                so_far.h = g1("H", h)?;
                on_section(&so_far);
                so_far.l = g1("L", l)?;
                on_section(&so_far);
                so_far.a = g1("A", a)?;
                on_section(&so_far);
                so_far.b_g1 = g1("B_G1", b1)?;
                on_section(&so_far);
                so_far.b_g2 = Arc::new(decode_section::<G2Affine>(
                    &map,
                    layout.b_g2.clone(),
                    &decoded,
                )?);
                on_section(&so_far);
                Ok(())
            })();
            stop.store(true, Ordering::Release);
            sections
        })
        .map_err(invalid)?;
        Ok(so_far)
    }

    /// Checks that these parameters belong to the circuit of `asg` (sizes of every query).
    ///
    /// # Errors
    /// [`Error::ParametersInvalid`] naming the first query whose size differs — e.g. the C1 of
    /// one sector size against the parameters of another.
    pub fn check_shape(&self, asg: &Assignment) -> Result<()> {
        self.check_counts(&ShapeCounts {
            inputs: asg.input.len(),
            aux: asg.aux.len(),
            constraints: asg.a.len(),
            a_aux: asg.a_aux_density.count(),
            b_inputs: asg.b_input_density.count(),
            b_aux: asg.b_aux_density.count(),
        })
    }

    /// [`Srs::check_shape`] from the counts alone (the compiled circuit knows them before any
    /// witness exists).
    ///
    /// # Errors
    /// As [`Srs::check_shape`].
    pub fn check_counts(&self, s: &ShapeCounts) -> Result<()> {
        self.check_counts_of(s, Queries::ALL)
    }

    /// [`Srs::check_counts`] for the verifying key and the queries of `queries` only (those a
    /// cold load has decoded so far; the others may be empty).
    ///
    /// # Errors
    /// As [`Srs::check_counts`].
    pub fn check_counts_of(&self, s: &ShapeCounts, queries: Queries) -> Result<()> {
        let n = s.constraints.max(1).next_power_of_two();
        let checks = [
            ("IC (inputs)", self.vk.ic.len(), s.inputs, Queries::NONE),
            ("H", self.h.len(), n - 1, Queries::H),
            ("L (aux)", self.l.len(), s.aux, Queries::L),
            ("A", self.a.len(), s.inputs + s.a_aux, Queries::A),
            ("B_G1", self.b_g1.len(), s.b_inputs + s.b_aux, Queries::B_G1),
            ("B_G2", self.b_g2.len(), s.b_inputs + s.b_aux, Queries::B_G2),
        ];
        for (name, have, want, query) in checks {
            if have != want && queries.contains(query) {
                return Err(Error::ParametersInvalid {
                    path: self.path.clone(),
                    reason: format!(
                        "not the parameters of this circuit: query {name} has {have} points, the circuit needs {want}"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The same parameters as bellperson's in-memory [`Parameters`] (shares the point vectors).
    #[cfg(any(test, feature = "internals"))]
    pub fn to_bellperson(&self) -> Parameters<Bls12> {
        Parameters {
            vk: self.vk.clone(),
            h: self.h.clone(),
            l: self.l.clone(),
            a: self.a.clone(),
            b_g1: self.b_g1.clone(),
            b_g2: self.b_g2.clone(),
        }
    }

    /// Whether all five queries are here (not a cold load's sections so far, whose later
    /// queries are still empty).
    pub fn is_complete(&self) -> bool {
        ![&self.h, &self.l, &self.a, &self.b_g1].iter().any(|q| q.is_empty()) && !self.b_g2.is_empty()
    }

    /// Host memory held by the decoded points, in bytes.
    pub fn size_bytes(&self) -> u64 {
        let g1 = self.h.len() + self.l.len() + self.a.len() + self.b_g1.len();
        (g1 * std::mem::size_of::<G1Affine>() + self.b_g2.len() * std::mem::size_of::<G2Affine>())
            as u64
    }
}

/// The counts a circuit's parameters must match: variables, constraints and query densities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShapeCounts {
    /// Inputs, the constant one included (= IC points).
    pub inputs: usize,
    /// Aux variables (= L points).
    pub aux: usize,
    /// Constraints, the per-input ones included (H has `2^ceil(log2) − 1` points).
    pub constraints: usize,
    /// Aux variables in the A query.
    pub a_aux: usize,
    /// Inputs in the B query.
    pub b_inputs: usize,
    /// Aux variables in the B query.
    pub b_aux: usize,
}

/// Reads a verifying-key file (`.vk`: bellperson's `VerifyingKey::write` format, as
/// filecoin-proofs stores it next to the `.params` file).
///
/// # Errors
/// [`Error::ParametersNotFound`] if the file does not exist; [`Error::ParametersInvalid`] naming
/// it if it cannot be read, is not a verifying key, or has trailing bytes.
pub fn read_vk_file(path: &Path) -> Result<VerifyingKey<Bls12>> {
    let invalid = |reason: String| Error::ParametersInvalid {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ParametersNotFound {
            path: path.to_path_buf(),
            given_dir: None,
        },
        _ => invalid(format!("cannot read: {e}")),
    })?;
    let mut rest: &[u8] = &bytes;
    let vk = VerifyingKey::<Bls12>::read(&mut rest)
        .map_err(|e| invalid(format!("not a verifying key: {e}")))?;
    if !rest.is_empty() {
        return Err(invalid(format!(
            "{} trailing bytes after the verifying key",
            rest.len()
        )));
    }
    Ok(vk)
}

/// [`porep_param_paths`] of a registered PoRep proof type (its v1.1 public parameters).
///
/// # Errors
/// [`Error::UnsupportedProof`] for a proof type whose public parameters filecoin-proofs cannot
/// build (e.g. non-interactive PoRep).
#[cfg(any(test, feature = "internals"))]
pub fn porep_param_paths_of(
    proof: filecoin_proofs_api::RegisteredSealProof,
    dir: &Path,
) -> Result<(PathBuf, PathBuf)> {
    fn of<Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait>(
        proof: filecoin_proofs_api::RegisteredSealProof,
        dir: &Path,
    ) -> Result<(PathBuf, PathBuf)> {
        let pp = filecoin_proofs::parameters::public_params::<Tree>(&proof.as_v1_config())
            .map_err(|e| Error::UnsupportedProof(format!("{proof:?}: {e:#}")))?;
        Ok(porep_param_paths::<Tree>(dir, &pp))
    }
    filecoin_proofs::with_shape!(u64::from(proof.sector_size()), of, proof, dir,)
}

/// Paths of the `.params` and `.vk` files of a PoRep circuit in `dir`, under the standard v28
/// names of filecoin-proofs (`v28-stacked-proof-of-replication-<tree>-<hasher>-<sha256 of the
/// public parameters' identifier>.params`).
pub fn porep_param_paths<Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait>(
    dir: &Path,
    public_params: &storage_proofs_porep::stacked::PublicParams<Tree>,
) -> (PathBuf, PathBuf) {
    use storage_proofs_core::parameter_cache::{CacheableParameters, VERSION};
    use storage_proofs_porep::stacked::{StackedCircuit, StackedCompound};
    type G = filecoin_proofs::DefaultPieceHasher;
    let id = <StackedCompound<Tree, G> as CacheableParameters<
        StackedCircuit<Tree, G>,
        storage_proofs_porep::stacked::PublicParams<Tree>,
    >>::cache_identifier(public_params);
    (
        dir.join(format!("v{VERSION}-{id}.params")),
        dir.join(format!("v{VERSION}-{id}.vk")),
    )
}
