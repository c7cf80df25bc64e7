//! Checking parameter files against the official digest list (`FIL_PROOFS_VERIFY_PRODUCTION_PARAMS`).
//!
//! filecoin-proofs ships the list of the official Groth16 files of the trusted setup: its
//! `parameters.json`, one entry per file name (`.params` and `.vk`) with a `digest`. When
//! `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` is true, filecoin-proofs checks each file it loads
//! against that list; [`check_official`] is cuzk's same check:
//!
//! - the file's name must be in the list;
//! - its digest must be the listed one: the BLAKE2b-512 hash (default parameters, no key) of
//!   the whole file, as lowercase hex, cut to its first 32 hex digits (the first 16 bytes) —
//!   what filecoin-proofs computes (`storage-proofs-core`, `verify_production_entry`).
//!
//! Hashing runs at roughly 1 GB/s on one core, ~45 s for the 44 GiB file of a 32 GiB sector, so
//! each result (success or mismatch) is kept for the life of the process, keyed by path, file
//! size and modification time: a file is hashed once, not per proof, and again only when it was
//! replaced.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use crate::error::{Error, Result};

/// filecoin-proofs' `parameters.json`, copied unchanged from the filecoin-proofs 19.1.0 crate
/// package (`filecoin-proofs-19.1.0/parameters.json` on crates.io): the official digests of the
/// trusted-setup files, facts of the network.
const OFFICIAL_LIST: &str = include_str!("../data/filecoin-proofs-parameters.json");

/// Number of hex digits of a listed digest (16 bytes of the BLAKE2b-512 hash).
pub const DIGEST_HEX_LEN: usize = 32;

/// One entry of the official list (other fields of the entries are not needed).
#[derive(serde::Deserialize)]
struct Entry {
    digest: String,
}

/// The official list: file name → digest (32 lowercase hex digits).
fn official() -> &'static HashMap<String, String> {
    static LIST: OnceLock<HashMap<String, String>> = OnceLock::new();
    LIST.get_or_init(|| {
        let entries: HashMap<String, Entry> = serde_json::from_str(OFFICIAL_LIST)
            .expect("data/filecoin-proofs-parameters.json is valid (checked by a unit test)");
        entries
            .into_iter()
            .map(|(name, e)| (name, e.digest))
            .collect()
    })
}

/// The official digest of the file named `file_name` (e.g.
/// `v28-stacked-proof-of-replication-…-<id>.params`), if the list has it.
pub fn official_digest(file_name: &str) -> Option<&'static str> {
    official().get(file_name).map(String::as_str)
}

/// filecoin-proofs' digest of `path`: BLAKE2b-512 of the whole file, the first
/// [`DIGEST_HEX_LEN`] hex digits.
///
/// # Errors
/// The I/O error of opening or reading the file.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let mut state = blake2b_simd::Params::new().to_state();
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        state.update(&buf[..n]);
    }
    Ok(state.finalize().to_hex()[..DIGEST_HEX_LEN].to_string())
}

/// (size in bytes, modification time) of a file: with the path, the key of a cached result.
type Stamp = (u64, SystemTime);
/// One slot per path: the stamp of the file that was checked and the outcome (`Err`: the reason).
type Slot = Arc<Mutex<Option<(Stamp, std::result::Result<(), String>)>>>;

fn cache() -> &'static Mutex<HashMap<PathBuf, Slot>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Slot>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Checks that the parameter or verifying-key file at `path` is an official one: its file name
/// is in filecoin-proofs' list and its digest is the listed one (see the module docs). The
/// outcome is cached for the process by (path, size, mtime); concurrent callers for one path
/// wait for a single hash.
///
/// # Errors
/// [`Error::ParametersNotFound`] when the file does not exist; [`Error::ParametersInvalid`]
/// naming the file when it cannot be read, its name is not in the list, or its digest differs
/// (the message gives both digests).
pub fn check_official(path: &Path) -> Result<()> {
    let invalid = |reason: String| Error::ParametersInvalid {
        path: path.to_path_buf(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::ParametersNotFound {
            path: path.to_path_buf(),
            given_dir: None,
        },
        _ => invalid(format!("cannot stat: {e}")),
    })?;
    let stamp: Stamp = (
        meta.len(),
        meta.modified()
            .map_err(|e| invalid(format!("no modification time: {e}")))?,
    );
    let slot = {
        let mut map = cache()
            .lock()
            .map_err(|_| Error::internal("digest cache poisoned"))?;
        map.entry(path.to_path_buf()).or_default().clone()
    };
    let mut slot = slot
        .lock()
        .map_err(|_| Error::internal("digest slot poisoned"))?;
    if let Some((s, outcome)) = slot.as_ref() {
        if *s == stamp {
            return outcome.clone().map_err(invalid);
        }
    }
    let outcome = check_uncached(path, stamp.0);
    *slot = Some((stamp, outcome.clone()));
    outcome.map_err(invalid)
}

/// The check of [`check_official`] without the cache; `Err` is the reason.
fn check_uncached(path: &Path, len: u64) -> std::result::Result<(), String> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the path has no UTF-8 file name")?;
    let Some(want) = official_digest(name) else {
        return Err(format!(
            "FIL_PROOFS_VERIFY_PRODUCTION_PARAMS is set and {name} is not in filecoin-proofs' \
             list of official parameter files"
        ));
    };
    let t = Instant::now();
    log::info!(
        "checking the digest of {} ({:.2} GB) against the official list",
        path.display(),
        len as f64 / 1e9
    );
    let have = file_digest(path).map_err(|e| format!("cannot read: {e}"))?;
    log::info!(
        "digest of {} checked in {:.1} s",
        path.display(),
        t.elapsed().as_secs_f64()
    );
    if have != want {
        return Err(format!(
            "FIL_PROOFS_VERIFY_PRODUCTION_PARAMS is set and the file is not the official one: \
             digest {have}, official {want}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_official_list_parses() {
        let list = official();
        assert_eq!(list.len(), 44);
        for (name, digest) in list {
            assert!(name.ends_with(".params") || name.ends_with(".vk"), "{name}");
            assert_eq!(digest.len(), DIGEST_HEX_LEN, "{name}");
            assert!(digest.bytes().all(|c| c.is_ascii_hexdigit()), "{name}");
        }
    }

    #[test]
    fn digest_is_truncated_blake2b_512() {
        let dir = std::env::temp_dir().join(format!("cuzk-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x");
        std::fs::write(&p, b"abc").unwrap();
        // BLAKE2b-512("abc"), RFC 7693 appendix A, first 16 bytes.
        assert_eq!(file_digest(&p).unwrap(), "ba80a53f981c4d0d6a2797b69f12f6e9");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unlisted_or_wrong_files_are_201_and_cached_until_changed() {
        let dir = std::env::temp_dir().join(format!("cuzk-digest-c-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Not in the list.
        let p = dir.join("not-official.params");
        std::fs::write(&p, b"x").unwrap();
        let e = check_official(&p).unwrap_err();
        assert_eq!(e.code(), 201, "{e}");
        assert!(e.to_string().contains("not-official.params"), "{e}");
        // A listed name with other contents.
        let name = official().keys().find(|n| n.ends_with(".vk")).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, b"not the key").unwrap();
        let e = check_official(&p).unwrap_err();
        assert_eq!(e.code(), 201, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(name.as_str()) && msg.contains("official"),
            "{msg}"
        );
        // Cached: the same (path, size, mtime) gives the same outcome without hashing.
        assert_eq!(check_official(&p).unwrap_err().to_string(), msg);
        // Missing.
        let e = check_official(&dir.join("absent.vk")).unwrap_err();
        assert_eq!(e.code(), 200, "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
