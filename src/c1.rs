//! Prover ids ([`prover_id_from_actor_id`]), and inside the crate the input: the commit-phase-1
//! (C1) output of a sealed sector and its validation (public with the feature `internals`, for
//! cuzk's own tools).
//!
//! Two encodings are accepted:
//! - the `SealCommitPhase1Output` JSON of `filecoin-proofs-api` (what lotus / Curio write):
//!   `{"registered_proof": "StackedDrg32GiBV1_1", "vanilla_proofs": {...}, "comm_r": [..32],
//!   "comm_d": [..32], "replica_id": .., "seed": [..32], "ticket": [..32]}`;
//! - the wrapper `{"SectorNum": n, "Phase1Out": "<base64 of that JSON>", "SectorSize": bytes}`.

use base64::Engine as _;
use filecoin_proofs_api::seal::SealCommitPhase1Output;
use filecoin_proofs_api::RegisteredSealProof;

use crate::error::{Error, Result};

/// A parsed C1 output, with what the wrapper (if any) said about it.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) struct C1Input {
    /// The commit-phase-1 output.
    pub output: SealCommitPhase1Output,
    /// `SectorNum` of the wrapper, when the input was wrapped.
    pub wrapper_sector_num: Option<u64>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Wrapper {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
}

fn malformed(what: &str, e: serde_json::Error) -> Error {
    let kind = if e.is_eof() { "truncated" } else { "malformed" };
    Error::MalformedInput(format!("{what} is {kind} JSON: {e}"))
}

/// Parses a C1 output (plain or wrapped), checking only its encoding and the wrapper's sector
/// size; [`validate`] checks the contents.
///
/// # Errors
/// [`Error::MalformedInput`] for bad/truncated JSON or base64; [`Error::InvalidInput`] when the
/// wrapper's `SectorSize` disagrees with the proof type inside `Phase1Out`.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) fn parse(bytes: &[u8]) -> Result<C1Input> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::MalformedInput(format!("C1 output is not UTF-8: {e}")))?
        .trim();
    if text.is_empty() {
        return Err(Error::MalformedInput("C1 output is empty".into()));
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| malformed("C1 output", e))?;
    if value.get("Phase1Out").is_some() {
        let w: Wrapper = serde_json::from_value(value).map_err(|e| malformed("C1 wrapper", e))?;
        let inner = base64::engine::general_purpose::STANDARD
            .decode(w.phase1_out.trim())
            .map_err(|e| Error::MalformedInput(format!("Phase1Out is not base64: {e}")))?;
        let output: SealCommitPhase1Output =
            serde_json::from_slice(&inner).map_err(|e| malformed("Phase1Out", e))?;
        let size = u64::from(output.registered_proof.sector_size());
        if size != w.sector_size {
            return Err(Error::InvalidInput(format!(
                "wrapper SectorSize {} disagrees with Phase1Out's proof type {:?} ({} bytes)",
                w.sector_size, output.registered_proof, size
            )));
        }
        Ok(C1Input {
            output,
            wrapper_sector_num: Some(w.sector_num),
        })
    } else {
        let output = serde_json::from_value(value).map_err(|e| malformed("C1 output", e))?;
        Ok(C1Input {
            output,
            wrapper_sector_num: None,
        })
    }
}

/// Checks a prover id's length and returns it as 32 bytes.
///
/// # Errors
/// [`Error::InvalidProverId`] when `bytes` is not exactly 32 bytes.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) fn prover_id(bytes: &[u8]) -> Result<[u8; 32]> {
    bytes.try_into().map_err(|_| Error::InvalidProverId {
        len: bytes.len(),
        text: None,
    })
}

/// The 32-byte prover id of a miner actor id, as filecoin-ffi builds it: the unsigned LEB128
/// encoding of the id (the payload of an ID address), left-aligned in 32 zero bytes.
/// E.g. actor 1000 → `e8 07 00 … 00`.
pub fn prover_id_from_actor_id(actor_id: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    let (mut v, mut i) = (actor_id, 0);
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[i] = byte;
            break;
        }
        out[i] = byte | 0x80;
        i += 1;
    }
    out
}

/// Proof types cuzk proves: StackedDrg v1, v1.1 and v1.1 synthetic-PoRep (not
/// non-interactive PoRep, whose output is an aggregate).
///
/// # Errors
/// [`Error::UnsupportedProof`] otherwise.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) fn check_supported(p: RegisteredSealProof) -> Result<()> {
    let name = format!("{p:?}");
    if p.major_version() != 1 || name.contains("NonInteractive") {
        return Err(Error::UnsupportedProof(format!(
            "{name}: cuzk proves StackedDrg V1, V1_1 and V1_1 synthetic PoRep"
        )));
    }
    Ok(())
}

/// Validates a C1 output against the sector id and prover id before any heavy work: proof type,
/// non-zero commitments and seed, partition count, the wrapper's sector number, and that the
/// replica id was derived from this prover id, sector id, ticket and comm_d (so a proof is never
/// made for the wrong sector).
///
/// # Errors
/// [`Error::InvalidInput`] / [`Error::UnsupportedProof`] naming the problem.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) fn validate(c1: &C1Input, sector_id: u64, prover_id: &[u8; 32]) -> Result<()> {
    let o = &c1.output;
    check_supported(o.registered_proof)?;
    if let Some(n) = c1.wrapper_sector_num {
        if n != sector_id {
            return Err(Error::InvalidInput(format!(
                "wrapper SectorNum {n} differs from the sector id {sector_id} passed"
            )));
        }
    }
    for (name, v) in [
        ("comm_r", &o.comm_r),
        ("comm_d", &o.comm_d),
        ("seed", &o.seed),
    ] {
        if v.iter().all(|b| *b == 0) {
            return Err(Error::InvalidInput(format!("{name} is all zeros")));
        }
    }
    let want = usize::from(o.registered_proof.partitions());
    let have = vanilla_partitions(&o.vanilla_proofs);
    if have.0 != want || have.1 {
        return Err(Error::InvalidInput(format!(
            "{:?} needs {want} partitions of vanilla proofs, the C1 output has {}{}",
            o.registered_proof,
            have.0,
            if have.1 { " (some empty)" } else { "" }
        )));
    }
    let vanilla_size = vanilla_sector_size(&o.vanilla_proofs);
    if vanilla_size != u64::from(o.registered_proof.sector_size()) {
        return Err(Error::InvalidInput(format!(
            "the C1 output says {:?} but its vanilla proofs are for {vanilla_size}-byte sectors",
            o.registered_proof
        )));
    }
    let config = o.registered_proof.as_v1_config();
    let comm_d: filecoin_proofs::DefaultPieceDomain =
        filecoin_proofs::as_safe_commitment(&o.comm_d, "comm_d")
            .map_err(|e| Error::InvalidInput(format!("{e:#}")))?;
    let replica_id = storage_proofs_porep::stacked::generate_replica_id::<
        filecoin_proofs::DefaultTreeHasher,
        _,
    >(prover_id, sector_id, &o.ticket, comm_d, &config.porep_id);
    if replica_id != o.replica_id {
        return Err(Error::InvalidInput(format!(
            "the C1 output's replica id was not derived from prover id {}, sector id {sector_id} and the porep id of {:?}: wrong prover id, sector number or proof type?",
            hex(prover_id),
            o.registered_proof
        )));
    }
    Ok(())
}

/// Number of partitions and whether any is empty.
fn vanilla_partitions(v: &filecoin_proofs_api::seal::VanillaSealProof) -> (usize, bool) {
    use filecoin_proofs_api::seal::VanillaSealProof::*;
    fn count<T>(p: &[Vec<T>]) -> (usize, bool) {
        (p.len(), p.iter().any(|x| x.is_empty()))
    }
    match v {
        StackedDrg2KiBV1(p) => count(p),
        StackedDrg8MiBV1(p) => count(p),
        StackedDrg512MiBV1(p) => count(p),
        StackedDrg32GiBV1(p) => count(p),
        StackedDrg64GiBV1(p) => count(p),
    }
}

/// Sector size (bytes) of the vanilla proofs' variant.
fn vanilla_sector_size(v: &filecoin_proofs_api::seal::VanillaSealProof) -> u64 {
    use filecoin_proofs_api::seal::VanillaSealProof::*;
    match v {
        StackedDrg2KiBV1(_) => 2 << 10,
        StackedDrg8MiBV1(_) => 8 << 20,
        StackedDrg512MiBV1(_) => 512 << 20,
        StackedDrg32GiBV1(_) => 32 << 30,
        StackedDrg64GiBV1(_) => 64 << 30,
    }
}

/// Lower-case hex of bytes.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prover_ids_are_leb128() {
        assert_eq!(prover_id_from_actor_id(0)[..2], [0, 0]);
        assert_eq!(prover_id_from_actor_id(1000)[..3], [0xe8, 0x07, 0]);
        assert_eq!(prover_id_from_actor_id(127)[..2], [0x7f, 0]);
        assert_eq!(prover_id_from_actor_id(128)[..3], [0x80, 0x01, 0]);
        let max = prover_id_from_actor_id(u64::MAX);
        assert_eq!(
            max[..10],
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert!(max[10..].iter().all(|b| *b == 0));
    }

    #[test]
    fn prover_id_length_is_checked() {
        assert_eq!(prover_id(&[1u8; 32]).unwrap(), [1u8; 32]);
        let e = prover_id(&[1u8; 31]).unwrap_err();
        assert!(matches!(
            e,
            Error::InvalidProverId {
                len: 31,
                text: None
            }
        ));
        assert_eq!(e.code(), 102);
    }

    #[test]
    fn malformed_inputs_are_typed() {
        for (input, needle) in [
            (&b""[..], "empty"),
            (b"{", "truncated"),
            (b"[1,2]", "malformed"),
            (b"{\"registered_proof\": 7}", "malformed"),
            (b"\xff\xfe", "UTF-8"),
            (
                b"{\"SectorNum\": 1, \"Phase1Out\": \"***\", \"SectorSize\": 2048}",
                "base64",
            ),
            (
                b"{\"SectorNum\": 1, \"Phase1Out\": \"e30=\", \"SectorSize\": 2048}",
                "Phase1Out",
            ),
        ] {
            let e = parse(input).unwrap_err();
            assert_eq!(e.code(), 100, "{e}");
            assert!(
                e.to_string().contains(needle),
                "{e} should mention {needle}"
            );
        }
    }
}
