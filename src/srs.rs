//! Groth16 parameters (the SRS): locating the `.params` file of a PoRep circuit, checking its
//! header and length, and decoding it once (read by one thread into reused 64 MiB buffers, points
//! decoded in parallel in file order) into a handle that every partition and every later call
//! shares.
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
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, OnceLock};

#[cfg(any(test, feature = "internals"))]
use bellperson::groth16::Parameters;
use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, VerifyingKey};
use blstrs::{Bls12, G1Affine, G2Affine};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;
use storage_proofs_update::constants::TreeRHasher;

use crate::error::{Error, Result};
use crate::synth::Assignment;

/// Bytes of an uncompressed G1 point.
pub const G1_BYTES: usize = 96;
/// Bytes of an uncompressed G2 point.
pub const G2_BYTES: usize = 192;

/// A set of the five Groth16 queries (bits in the parameter file's order: H, L, A, B_G1,
/// B_G2). A cold load decodes them in that order ([`Srs::load_with_vk_then`]); a
/// split partition computes each query's MSM once its section is in ([`crate::prover::Part`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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

    /// The queries in either set.
    pub const fn or(self, q: Queries) -> Queries {
        Queries(self.0 | q.0)
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
    /// Reads the section headers of `file` (`total` bytes long) and checks that the file is
    /// exactly as long as they say (neither truncated nor with trailing bytes).
    ///
    /// # Errors
    /// A human-readable reason naming the section and the byte counts, or the read error.
    pub fn read(file: &File, total: usize) -> std::result::Result<Layout, String> {
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
            let mut hdr = [0u8; 4];
            file.read_exact_at(&mut hdr, (start + fixed) as u64)
                .map_err(|e| format!("cannot read the {name} header: {e}"))?;
            let n = u32::from_be_bytes(hdr) as usize;
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

/// Bytes of the file read and decoded per step: large enough that 16 threads each decode tens of
/// thousands of points per step, small enough that the reader stays a few steps ahead of the
/// decoders in little memory. 64 MiB rounded down to whole G2 points, which are whole G1
/// points too (0.7 M G1 or 0.35 M G2 points; ~50 ms of a 1.3 GB/s disk).
const WINDOW_BYTES: usize = (64 << 20) / G2_BYTES * G2_BYTES;

/// Windows the reader may hold read ahead of the one being decoded (256 MiB). With the one it
/// reads into and the one being decoded, the load holds `WINDOWS_AHEAD + 2` buffers.
const WINDOWS_AHEAD: usize = 4;

/// Flag bits of a point's first byte that an uncompressed encoding must leave clear (the ZCash
/// serialization BLS12-381 libraries share: 0x80 compressed, 0x20 the sort flag of y; 0x40, the
/// point at infinity, is left to the decoding). blst reads a point with 0x80 set as compressed,
/// rebuilding y from x: a flipped bit there would pass the on-curve check.
const FLAGS_NOT_UNCOMPRESSED: u8 = 0x80 | 0x20;

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
        if repr[0] & FLAGS_NOT_UNCOMPRESSED != 0 {
            return Err("a G1 point has its compression or sort flag set");
        }
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
        if repr[0] & FLAGS_NOT_UNCOMPRESSED != 0 {
            return Err("a G2 point has its compression or sort flag set");
        }
        let p: Option<G2Affine> = G2Affine::from_uncompressed_unchecked(repr).into();
        match p {
            Some(p) if !bool::from(p.is_identity()) => Ok(p),
            Some(_) => Err("a G2 point is the point at infinity"),
            None => Err("a G2 point is not on the curve"),
        }
    }
}

/// One window of a parameter file as the reader hands it over: `buf[..len]` holds the bytes at
/// file offset `at`. `buf` is one of the load's reused buffers ([`WINDOW_BYTES`] long).
struct Window {
    at: usize,
    len: usize,
    buf: Vec<u8>,
}

/// The reader thread of a load: reads `sections` (byte ranges, in file order) window by window
/// with `pread` into buffers taken from `free` (at most `WINDOWS_AHEAD + 2`, allocated on first
/// need) and sends them, in order, to `full`, which holds at most [`WINDOWS_AHEAD`] of them.
/// Before each read it asks the kernel for the window after it (`POSIX_FADV_WILLNEED`), so the
/// disk has two windows to fetch while this thread copies one out of the page cache.
/// A read error is sent in place of the window (then the thread ends); it also ends when the
/// decoders hang up (a bad point, or done).
///
/// Plain reads, not a memory map: a file truncated while it is read gives an error here, not a
/// `SIGBUS`, and the process never maps the 47 GB file of a 32 GiB sector beside its decoded copy.
fn read_windows(
    file: &File,
    sections: &[Range<usize>],
    full: SyncSender<std::io::Result<Window>>,
    free: Receiver<Vec<u8>>,
) {
    let mut made = 0;
    let windows = sections.iter().flat_map(|r| {
        r.clone()
            .step_by(WINDOW_BYTES)
            .map(move |at| (at, WINDOW_BYTES.min(r.end - at)))
    });
    let mut windows = windows.peekable();
    while let Some((at, len)) = windows.next() {
        let mut buf = match free.try_recv() {
            Ok(buf) => buf,
            Err(_) if made < WINDOWS_AHEAD + 2 => {
                made += 1;
                vec![0u8; WINDOW_BYTES]
            }
            Err(_) => match free.recv() {
                Ok(buf) => buf,
                Err(_) => return,
            },
        };
        if let Some(&(next, next_len)) = windows.peek() {
            advise(file, next, next_len, Advice::WillNeed);
        }
        let read = file
            .read_exact_at(&mut buf[..len], at as u64)
            .map(|()| Window { at, len, buf });
        let failed = read.is_err();
        if full.send(read).is_err() || failed {
            return;
        }
    }
}

/// Read-ahead advice for a file range (`posix_fadvise`).
#[derive(Clone, Copy)]
enum Advice {
    /// The file is read front to back: a larger kernel read-ahead.
    Sequential,
    /// The range will be read soon: start reading it now.
    WillNeed,
}

/// Gives the kernel `advice` for `file[at..at + len]` (`len` 0: to the end). Advice is only a
/// hint: its error is ignored (the reads then wait for the disk); off Linux, none is given.
#[cfg(target_os = "linux")]
fn advise(file: &File, at: usize, len: usize, advice: Advice) {
    use std::os::fd::AsRawFd;
    let advice = match advice {
        Advice::Sequential => libc::POSIX_FADV_SEQUENTIAL,
        Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
    };
    // SAFETY: `posix_fadvise` reads no memory of ours; the descriptor is open (borrowed from
    // `file` for the call), and the kernel checks the offsets.
    let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), at as i64, len as i64, advice) };
}

/// [`advise`] off Linux: no advice.
#[cfg(not(target_os = "linux"))]
fn advise(_file: &File, _at: usize, _len: usize, _advice: Advice) {}

/// Decodes the points of the section at file bytes `range` into a vector of exactly
/// `range.len() / P::BYTES` points, from the windows the reader sends on `windows` (in file
/// order): each window's points are decoded by the rayon pool and written in place into the
/// vector's spare capacity (an indexed `par_extend`: no per-thread lists, no sequential
/// concatenation, the output's pages first touched by the decoders); its buffer then goes back
/// to the reader on `free`. The first bad point's reason is kept; decoding stops after its
/// window.
fn decode_section<P: FilePoint>(
    range: Range<usize>,
    windows: &Receiver<std::io::Result<Window>>,
    free: &Sender<Vec<u8>>,
) -> std::result::Result<Vec<P>, String> {
    let n = range.len() / P::BYTES;
    let mut out: Vec<P> = Vec::new();
    out.try_reserve_exact(n).map_err(|_| {
        format!(
            "{n} points ({} bytes decoded) do not fit in host memory",
            n * std::mem::size_of::<P>()
        )
    })?;
    let bad: OnceLock<&'static str> = OnceLock::new();
    let mut at = range.start;
    while at < range.end {
        let w = match windows.recv() {
            Ok(Ok(w)) => w,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(format!(
                    "the file ended before byte {} while it was read (truncated during the load?)",
                    at + WINDOW_BYTES.min(range.end - at)
                ))
            }
            Ok(Err(e)) => return Err(format!("cannot read at byte {at}: {e}")),
            Err(_) => return Err("the parameter reader stopped early".into()),
        };
        debug_assert_eq!((w.at, w.len), (at, WINDOW_BYTES.min(range.end - at)));
        out.par_extend(w.buf[..w.len].par_chunks_exact(P::BYTES).map(|c| {
            P::decode(c).unwrap_or_else(|reason| {
                let _ = bad.set(reason);
                P::placeholder()
            })
        }));
        at += w.len;
        let _ = free.send(w.buf);
        if let Some(reason) = bad.get() {
            return Err((*reason).to_string());
        }
    }
    debug_assert_eq!(out.len(), n);
    Ok(out)
}

impl Srs {
    /// Loads and decodes a `.params` file: header/length check ([`Layout::read`]), then the
    /// sections in file order, 64 MiB windows read by a reader thread a few windows ahead of the
    /// decoders (four; plain `pread`s with kernel read-ahead advice) and decoded in
    /// parallel straight into their vectors (on-curve checked; subgroup checks skipped, as
    /// filecoin-proofs does for cached parameters): a cold load runs at the disk's speed when
    /// the cores keep up, and holds 384 MiB of file bytes at most. Cold at 32 GiB on 16 cores,
    /// 1.10 GB/s against 0.96 GB/s for the memory-mapped loader it replaced (BENCHMARKS.md,
    /// *W2*); warm, 0.49 GB/s on 2 cores against its 0.58 (the `params_load` bench: the copy out
    /// of the page cache takes one of the two cores).
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
        let invalid = invalid_at(path);
        let Head {
            file,
            layout,
            vk,
            file_vk,
        } = Head::read(path, vk_path)?;
        let [h, l, a, b1] = layout.g1.clone();
        let pvk = Arc::new(prepare_verifying_key(file_vk.as_ref().unwrap_or(&vk)));
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
        // The sections in file order, one window at a time, read by a thread ahead of the
        // decoders.
        advise(&file, 0, 0, Advice::Sequential);
        let sections = [h.clone(), l.clone(), a.clone(), b1.clone(), layout.b_g2.clone()];
        let (full_tx, full) = sync_channel(WINDOWS_AHEAD);
        let (free, free_rx) = channel();
        std::thread::scope(|scope| {
            scope.spawn(|| read_windows(&file, &sections, full_tx, free_rx));
            // `full` and `free` are dropped when this returns: a reader still running ends then.
            let (full, free) = (full, free);
            let t = std::time::Instant::now();
            let g1 = |name: &str, r: Range<usize>| {
                let v = decode_section::<G1Affine>(r, &full, &free);
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
            so_far.b_g2 = Arc::new(decode_section::<G2Affine>(layout.b_g2.clone(), &full, &free)?);
            on_section(&so_far);
            Ok(())
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

/// What a load reads before the point sections: the `.params` file opened, its layout and
/// verifying key, and the `.vk` file's key (equal to it) when one was given.
struct Head {
    file: File,
    layout: Layout,
    vk: VerifyingKey<Bls12>,
    file_vk: Option<VerifyingKey<Bls12>>,
}

impl Head {
    /// Opens the `.params` file at `path`, checks its layout ([`Layout::read`]) and reads its
    /// verifying key; with `vk_path`, reads that `.vk` file and checks that the two keys are
    /// equal. Reads a few kilobytes, whatever the file's size.
    fn read(path: &Path, vk_path: Option<&Path>) -> Result<Head> {
        let invalid = invalid_at(path);
        let (file, len) = open_regular(path)?;
        let total = usize::try_from(len).map_err(|_| invalid(format!("{len} bytes: too large")))?;
        let layout = Layout::read(&file, total).map_err(invalid)?;
        let mut vk_bytes = vec![0u8; layout.vk.len()];
        file.read_exact_at(&mut vk_bytes, layout.vk.start as u64)
            .map_err(|e| invalid(format!("cannot read the verifying key: {e}")))?;
        let vk = VerifyingKey::<Bls12>::read(&vk_bytes[..])
            .map_err(|e| invalid(format!("bad verifying key: {e}")))?;
        let file_vk = vk_path.map(read_vk_file).transpose()?;
        if let (Some(vk_path), Some(expected)) = (vk_path, &file_vk) {
            if vk != *expected {
                return Err(invalid(format!(
                    "its verifying key differs from the one in {} (the key filecoin-proofs' \
                     verify_seal uses): the .params and .vk files are not of the same setup",
                    vk_path.display()
                )));
            }
        }
        Ok(Head {
            file,
            layout,
            vk,
            file_vk,
        })
    }
}

/// Checks the `.params` file at `path` and the `.vk` file at `vk_path` as a load
/// ([`Srs::load_with_vk`]) does before it decodes any point: both there and regular files, the
/// `.params` file's section headers and length ([`Layout::read`]), the two verifying keys
/// readable and equal. Reads a few kilobytes, whatever the files' sizes: what a command runs
/// before its heavy work, so that a missing or cut parameter file fails at once.
///
/// # Errors
/// As [`Srs::load_with_vk`] for these checks: [`Error::ParametersNotFound`] naming the missing
/// file, [`Error::ParametersInvalid`] naming a bad one (the points themselves are checked by the
/// load only).
#[cfg(any(test, feature = "internals"))]
pub fn check_files(path: &Path, vk_path: &Path) -> Result<()> {
    Head::read(path, Some(vk_path)).map(|_| ())
}

/// The [`Error::ParametersInvalid`] of the file at `path`, for a reason.
fn invalid_at(path: &Path) -> impl Fn(String) -> Error + Copy + '_ {
    move |reason| Error::ParametersInvalid {
        path: path.to_path_buf(),
        reason,
    }
}

/// Largest `.vk` file read: 16 MiB (a verifying key of ~170,000 public inputs; PoRep's have
/// 328 and take 32 KB).
const MAX_VK_BYTES: u64 = 16 << 20;

/// Opens the parameter or verifying-key file `path` for reading and returns it with its length,
/// after checking (symbolic links followed) that it is a regular file: a FIFO would block the
/// open until a writer came, a device or `/proc` file has no meaningful length.
///
/// # Errors
/// [`Error::ParametersNotFound`] if it does not exist; [`Error::ParametersInvalid`] naming it if
/// it is not a regular file or cannot be opened.
fn open_regular(path: &Path) -> Result<(File, u64)> {
    let invalid = invalid_at(path);
    let not_found = |e: std::io::Error, what: &str| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ParametersNotFound {
            path: path.to_path_buf(),
            given_dir: None,
        },
        _ => invalid(format!("cannot {what}: {e}")),
    };
    let meta = std::fs::metadata(path).map_err(|e| not_found(e, "stat"))?;
    if !meta.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let kind = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "a socket or other special file"
        };
        return Err(invalid(format!("not a regular file: {kind}")));
    }
    let file = File::open(path).map_err(|e| not_found(e, "open"))?;
    Ok((file, meta.len()))
}

/// Reads a verifying-key file (`.vk`: bellperson's `VerifyingKey::write` format, as
/// filecoin-proofs stores it next to the `.params` file).
///
/// # Errors
/// [`Error::ParametersNotFound`] if the file does not exist; [`Error::ParametersInvalid`] naming
/// it if it cannot be read, is not a verifying key, or has trailing bytes.
pub fn read_vk_file(path: &Path) -> Result<VerifyingKey<Bls12>> {
    let invalid = invalid_at(path);
    let (file, len) = open_regular(path)?;
    if len > MAX_VK_BYTES {
        return Err(invalid(format!(
            "{len} bytes: not a verifying key (at most {MAX_VK_BYTES} bytes)"
        )));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_VK_BYTES + 1), &mut bytes)
        .map_err(|e| invalid(format!("cannot read: {e}")))?;
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

/// The Groth16 parameter set of one circuit, named apart from any proof: what the daemon's
/// `PreloadSRS` / `EvictSRS` and `cuzk serve --preload` name ([`crate::Engine::preload_params`],
/// [`crate::Engine::evict_params`]).
#[cfg(any(test, feature = "internals"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamSet {
    /// PoRep C2 of a seal proof type (the parameters of its sector size).
    Porep(filecoin_proofs_api::RegisteredSealProof),
    /// WindowPoSt or WinningPoSt of a PoSt proof type (its `typ()` tells them apart).
    Post(filecoin_proofs_api::RegisteredPoStProof),
    /// SnapDeals of an update proof type.
    Snap(filecoin_proofs_api::RegisteredUpdateProof),
}

#[cfg(any(test, feature = "internals"))]
impl ParamSet {
    /// The proof kind whose calls use the set.
    pub fn kind(self) -> crate::ProofKind {
        match self {
            ParamSet::Porep(_) => crate::ProofKind::PorepC2,
            ParamSet::Post(p) if p.typ() == filecoin_proofs::PoStType::Winning => {
                crate::ProofKind::WinningPost
            }
            ParamSet::Post(_) => crate::ProofKind::WindowPost,
            ParamSet::Snap(_) => crate::ProofKind::SnapDeals,
        }
    }

    /// Sector size of the proof type, bytes.
    pub fn sector_size(self) -> u64 {
        match self {
            ParamSet::Porep(p) => u64::from(p.sector_size()),
            ParamSet::Post(p) => u64::from(p.sector_size()),
            ParamSet::Snap(p) => u64::from(p.sector_size()),
        }
    }

    /// The set's `.params` file in `dir` (its `.vk` beside it), under filecoin-proofs' v28 name.
    ///
    /// # Errors
    /// [`Error::UnsupportedProof`] for a PoRep proof type whose public parameters
    /// filecoin-proofs cannot build; [`Error::Internal`] for a PoSt one's.
    pub fn params_path(self, dir: &Path) -> Result<PathBuf> {
        match self {
            ParamSet::Porep(p) => porep_param_paths_of(p, dir).map(|(params, _)| params),
            ParamSet::Post(p) => crate::post::param_path(p, dir),
            ParamSet::Snap(p) => Ok(crate::snap::param_path(p, dir)),
        }
    }
}

/// Paths of the `.params` and `.vk` files of a PoSt circuit (WindowPoSt or WinningPoSt: `pp`
/// tells them apart) in `dir`, under the standard v28 names of filecoin-proofs
/// (`v28-proof-of-spacetime-fallback-<tree>-<sha256 of the public parameters' identifier>`).
pub fn post_param_paths<Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait>(
    dir: &Path,
    public_params: &storage_proofs_post::fallback::PublicParams,
) -> (PathBuf, PathBuf) {
    use storage_proofs_core::parameter_cache::{CacheableParameters, VERSION};
    use storage_proofs_post::fallback::{FallbackPoStCircuit, FallbackPoStCompound, PublicParams};
    let id = <FallbackPoStCompound<Tree> as CacheableParameters<
        FallbackPoStCircuit<Tree>,
        PublicParams,
    >>::cache_identifier(public_params);
    (
        dir.join(format!("v{VERSION}-{id}.params")),
        dir.join(format!("v{VERSION}-{id}.vk")),
    )
}

/// Paths of the `.params` and `.vk` files of the SnapDeals circuit of `public_params` in `dir`,
/// under the standard v28 names of filecoin-proofs (`v28-empty-sector-update-merkletree-
/// poseidon_hasher-8-<sub>-<top>-<sha256 of the public parameters' identifier>.params`: the
/// files its `get_empty_sector_update_params` looks up).
pub fn snap_param_paths<Tree>(
    dir: &Path,
    public_params: &storage_proofs_update::PublicParams,
) -> (PathBuf, PathBuf)
where
    Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait<Hasher = TreeRHasher>,
{
    use storage_proofs_core::parameter_cache::{CacheableParameters, VERSION};
    use storage_proofs_update::{EmptySectorUpdateCircuit, EmptySectorUpdateCompound, PublicParams};
    let id = <EmptySectorUpdateCompound<Tree> as CacheableParameters<
        EmptySectorUpdateCircuit<Tree>,
        PublicParams,
    >>::cache_identifier(public_params);
    (
        dir.join(format!("v{VERSION}-{id}.params")),
        dir.join(format!("v{VERSION}-{id}.vk")),
    )
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
