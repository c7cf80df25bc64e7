//! The on-disk cache of compiled circuits: one versioned file per proof type, keyed by a digest
//! of the circuit's shape, checked whole before use.
//!
//! File layout (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `CUZKR1CS` |
//! | 4, 4 | format version ([`FORMAT_VERSION`]), 0 |
//! | 32 | key: digest of the circuit shape ([`key`]) |
//! | 7 × 8 | layout: prefix inputs, aux, constraints; block inputs, aux, constraints; challenges |
//! | 8 + 32·k | k coefficients (canonical `Fr` bytes) |
//! | 3 × (16 + 4·(rows + 1) + 8·nnz) | A, B, C: rows, nnz, row_ptr, col, coeff |
//! | 32 | checksum: SHA-256 over the SHA-256 of each 64 MiB chunk of everything before it |
//!
//! A missing file is built and written; a file that is truncated, corrupted (checksum), of
//! another format version or key (stale), or structurally invalid is rebuilt with a warning and
//! replaced — never trusted. A directory that cannot be written leaves the circuit in memory
//! (warning); the proof goes on.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use blstrs::Scalar as Fr;
use ff::PrimeField;
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::{CoeffTable, CompiledCircuit, Counts, Csr, Layout};
use crate::error::Result;

/// Version of the file layout; a file of another version is stale.
pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"CUZKR1CS";
const CHUNK: usize = 64 << 20;
const HEADER: usize = 8 + 8 + 32 + 7 * 8 + 8;

/// Digest naming a circuit shape: SHA-256 over [`FORMAT_VERSION`], cuzk's version and the
/// given parts (each length-prefixed) — for PoRep the proof type, porep id, API version and
/// the graph and challenge parameters.
pub fn key(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(FORMAT_VERSION.to_le_bytes());
    for p in [env!("CARGO_PKG_VERSION").as_bytes()].iter().chain(parts) {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

/// How [`load_or_build`] got the circuit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Read from the cache file.
    Loaded,
    /// Built (no usable file), then written to the cache file.
    Built,
    /// Built; not written (no cache directory, or it could not be written: the reason).
    BuiltInMemory(String),
}

/// The compiled circuit named `name` / `key`: from `dir` when a valid file is there, else from
/// `build()` (then written to `dir`).
///
/// # Errors
/// Only `build`'s: cache problems are warnings.
pub fn load_or_build(
    dir: Option<&Path>,
    name: &str,
    key: &[u8; 32],
    build: impl FnOnce() -> Result<CompiledCircuit>,
) -> Result<(CompiledCircuit, Outcome)> {
    let path = dir.map(|d| file_path(d, name, key));
    if let Some(p) = &path {
        match load(p, key) {
            Ok(cc) => return Ok((cc, Outcome::Loaded)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("compiled circuit cache {}: {e}; rebuilding it", p.display()),
        }
    }
    let cc = build()?;
    let outcome = match &path {
        None => Outcome::BuiltInMemory("no cache directory".into()),
        Some(p) => match store(p, key, &cc) {
            Ok(()) => Outcome::Built,
            Err(e) => {
                log::warn!(
                    "compiled circuit cache {}: cannot write ({e}); keeping the circuit in memory",
                    p.display()
                );
                Outcome::BuiltInMemory(e.to_string())
            }
        },
    };
    Ok((cc, outcome))
}

/// The cache file of `name` / `key` in `dir`.
pub fn file_path(dir: &Path, name: &str, key: &[u8; 32]) -> PathBuf {
    let k: String = key[..8].iter().map(|b| format!("{b:02x}")).collect();
    dir.join(format!("{name}-{k}.r1cs"))
}

/// Writes `cc` to `path` (through a temporary file renamed into place).
///
/// # Errors
/// I/O errors (directory not writable, disk full).
pub fn store(path: &Path, key: &[u8; 32], cc: &CompiledCircuit) -> io::Result<()> {
    if let Some(d) = path.parent() {
        fs::create_dir_all(d)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let r = (|| {
        let f = fs::File::create(&tmp)?;
        let mut w = Hashing::new(io::BufWriter::with_capacity(1 << 20, f));
        w.write_all(MAGIC)?;
        w.write_all(&FORMAT_VERSION.to_le_bytes())?;
        w.write_all(&0u32.to_le_bytes())?;
        w.write_all(key)?;
        let l = &cc.layout;
        for v in [
            l.prefix.inputs,
            l.prefix.aux,
            l.prefix.constraints,
            l.block.inputs,
            l.block.aux,
            l.block.constraints,
            l.challenges,
        ] {
            w.write_all(&(v as u64).to_le_bytes())?;
        }
        w.write_all(&(cc.coeffs.len() as u64).to_le_bytes())?;
        for v in cc.coeffs.values() {
            w.write_all(&v.to_repr())?;
        }
        for m in [&cc.a, &cc.b, &cc.c] {
            w.write_all(&(m.rows() as u64).to_le_bytes())?;
            w.write_all(&(m.nnz() as u64).to_le_bytes())?;
            for v in [&m.row_ptr, &m.col, &m.coeff] {
                write_u32s(&mut w, v)?;
            }
        }
        let (mut inner, sum) = w.finish();
        inner.write_all(&sum)?;
        inner.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    match r {
        Ok(()) => fs::rename(&tmp, path),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Reads and checks the file at `path` (see the module docs).
///
/// # Errors
/// `NotFound` when there is no file; `InvalidData` with the reason for a truncated, corrupted,
/// stale or malformed one.
pub fn load(path: &Path, key: &[u8; 32]) -> io::Result<CompiledCircuit> {
    let data = fs::read(path)?;
    let bad = |m: String| io::Error::new(io::ErrorKind::InvalidData, m);
    if data.len() < HEADER + 32 || &data[..8] != MAGIC {
        return Err(bad(format!(
            "not a compiled-circuit file ({} bytes)",
            data.len()
        )));
    }
    let version = u32::from_le_bytes(data[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(bad(format!(
            "stale: format version {version}, this build writes {FORMAT_VERSION}"
        )));
    }
    if &data[16..48] != key {
        return Err(bad(
            "stale: made for another circuit shape (key differs)".into()
        ));
    }
    let (body, sum) = data.split_at(data.len() - 32);
    if checksum(body) != sum {
        return Err(bad("corrupted or truncated: checksum mismatch".into()));
    }
    let mut r = Reader { b: body, at: 48 };
    let mut u = || r.u64().ok_or_else(|| bad("truncated header".into()));
    let (pi, pa, pc, bi, ba, bc, ch) = (u()?, u()?, u()?, u()?, u()?, u()?, u()?);
    let layout = Layout {
        prefix: Counts {
            inputs: pi,
            aux: pa,
            constraints: pc,
        },
        block: Counts {
            inputs: bi,
            aux: ba,
            constraints: bc,
        },
        challenges: ch,
    };
    let k = r.u64().ok_or_else(|| bad("truncated".into()))?;
    let raw = r
        .take(
            k.checked_mul(32)
                .ok_or_else(|| bad("bad coefficient count".into()))?,
        )
        .ok_or_else(|| bad("truncated coefficients".into()))?;
    let values: Option<Vec<Fr>> = raw
        .chunks_exact(32)
        .map(|c| Option::from(Fr::from_repr(c.try_into().unwrap())))
        .collect();
    let coeffs = values
        .and_then(CoeffTable::from_values)
        .ok_or_else(|| bad("invalid coefficient table".into()))?;
    let mut m = || -> io::Result<Csr> {
        let (rows, nnz) = (
            r.u64().ok_or_else(|| bad("truncated".into()))?,
            r.u64().ok_or_else(|| bad("truncated".into()))?,
        );
        let mut arr = |n: usize| r.u32s(n).ok_or_else(|| bad("truncated matrix".into()));
        Ok(Csr {
            row_ptr: arr(rows.saturating_add(1))?,
            col: arr(nnz)?,
            coeff: arr(nnz)?,
        })
    };
    let (a, b, c) = (m()?, m()?, m()?);
    if r.at != body.len() {
        return Err(bad(format!("{} trailing bytes", body.len() - r.at)));
    }
    CompiledCircuit::from_parts(layout, a, b, c, coeffs).map_err(|e| bad(e.to_string()))
}

fn checksum(body: &[u8]) -> [u8; 32] {
    let sums: Vec<[u8; 32]> = body
        .par_chunks(CHUNK)
        .map(|c| Sha256::digest(c).into())
        .collect();
    let mut h = Sha256::new();
    for s in &sums {
        h.update(s);
    }
    h.finalize().into()
}

fn write_u32s(w: &mut impl Write, v: &[u32]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4 << 16);
    for c in v.chunks(1 << 16) {
        buf.clear();
        for x in c {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.b.get(self.at..end)?;
        self.at = end;
        Some(s)
    }
    fn u64(&mut self) -> Option<usize> {
        let v = u64::from_le_bytes(self.take(8)?.try_into().ok()?);
        usize::try_from(v).ok()
    }
    fn u32s(&mut self, n: usize) -> Option<Vec<u32>> {
        let raw = self.take(n.checked_mul(4)?)?;
        Some(
            raw.par_chunks_exact(4)
                .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
        )
    }
}

/// A writer that computes the file checksum (see [`checksum`]) of what passes through it.
struct Hashing<W> {
    inner: W,
    chunk: Sha256,
    in_chunk: usize,
    sums: Sha256,
}

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            chunk: Sha256::new(),
            in_chunk: 0,
            sums: Sha256::new(),
        }
    }

    fn finish(mut self) -> (W, [u8; 32]) {
        if self.in_chunk > 0 {
            let c = std::mem::take(&mut self.chunk).finalize();
            self.sums.update(c);
        }
        (self.inner, self.sums.finalize().into())
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(CHUNK - self.in_chunk);
        let n = self.inner.write(&buf[..n])?;
        self.chunk.update(&buf[..n]);
        self.in_chunk += n;
        if self.in_chunk == CHUNK {
            let c = std::mem::take(&mut self.chunk).finalize();
            self.sums.update(c);
            self.in_chunk = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::csr::CsrBuilder;

    fn small() -> CompiledCircuit {
        let mut t = CoeffTable::default();
        let two = t.intern(Fr::from(2));
        let mut a = CsrBuilder::new();
        let mut b = CsrBuilder::new();
        let mut c = CsrBuilder::new();
        // 2 inputs, 3 aux, 2 user rows + 2 input rows.
        a.push(2, two);
        b.push(3, 0);
        c.push(4, 1);
        for m in [&mut a, &mut b, &mut c] {
            assert!(m.end_row());
            assert!(m.end_row());
        }
        for i in 0..2 {
            a.push(i, 0);
            for m in [&mut a, &mut b, &mut c] {
                assert!(m.end_row());
            }
        }
        let layout = Layout {
            prefix: Counts {
                inputs: 2,
                aux: 1,
                constraints: 0,
            },
            block: Counts {
                inputs: 0,
                aux: 1,
                constraints: 1,
            },
            challenges: 2,
        };
        CompiledCircuit::from_parts(layout, a.m, b.m, c.m, t).unwrap()
    }

    #[test]
    fn round_trip_and_every_damage_is_detected() {
        let dir = std::env::temp_dir().join(format!("cuzk-r1cs-test-{}", std::process::id()));
        let k = key(&[b"test"]);
        let cc = small();
        let (got, o) = load_or_build(Some(&dir), "t", &k, || Ok(cc.clone())).unwrap();
        assert_eq!((got, o), (cc.clone(), Outcome::Built));
        let (got, o) = load_or_build(Some(&dir), "t", &k, || panic!("must load")).unwrap();
        assert_eq!((got, o), (cc.clone(), Outcome::Loaded));
        let path = file_path(&dir, "t", &k);
        let good = fs::read(&path).unwrap();
        // Truncated, one flipped byte anywhere, another key, another version: all rejected.
        let mut cases: Vec<(Vec<u8>, &str)> = vec![(good[..good.len() - 1].to_vec(), "checksum")];
        for at in [
            0usize,
            9,
            20,
            60,
            HEADER + 5,
            good.len() - 40,
            good.len() - 1,
        ] {
            let mut d = good.clone();
            d[at] ^= 1;
            cases.push((d, ""));
        }
        for (damaged, want) in cases {
            fs::write(&path, &damaged).unwrap();
            let e = load(&path, &k).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidData);
            assert!(e.to_string().contains(want), "{e}");
            // ... and load_or_build rebuilds and rewrites it.
            let (got, o) = load_or_build(Some(&dir), "t", &k, || Ok(cc.clone())).unwrap();
            assert_eq!((got, o), (cc.clone(), Outcome::Built));
            assert_eq!(fs::read(&path).unwrap(), good);
        }
        let e = load(&path, &key(&[b"other"])).unwrap_err();
        assert!(e.to_string().contains("stale"), "{e}");
        // A directory that cannot be written: the circuit stays in memory.
        let file_not_dir = dir.join("plain-file");
        fs::write(&file_not_dir, b"x").unwrap();
        let (got, o) = load_or_build(Some(&file_not_dir), "t", &k, || Ok(cc.clone())).unwrap();
        assert_eq!(got, cc);
        assert!(matches!(o, Outcome::BuiltInMemory(_)), "{o:?}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
