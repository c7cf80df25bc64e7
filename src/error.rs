//! The crate's one error type, [`Error`], and its stable numeric codes.

use std::path::PathBuf;

/// Why a device was taken out of service (the `fault` of [`Error::Cuda`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DeviceFault {
    /// A sticky driver error (illegal address, launch failure, uncorrectable ECC, …): the CUDA
    /// context is poisoned (see `gpu::driver::fault::STICKY_CODES`).
    Sticky,
    /// A kernel or copy did not finish within the stage timeout (`CUZK_STAGE_TIMEOUT`).
    Timeout,
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error cuzk can return. Messages carry the numbers a user needs to act.
///
/// Every fallible function of cuzk returns [`Result<T>`]. Each variant maps to a stable code
/// ([`Error::code`]) that the C ABI ([`crate::ffi`]) returns unchanged, grouped by origin:
///
/// | range | origin |
/// |---|---|
/// | 100–199 | input (C1 JSON, sector id, prover id, configuration / environment values) |
/// | 200–299 | parameters (Groth16 `.params` / `.vk` files) |
/// | 300–399 | device (no GPU, unsupported GPU, CUDA driver errors) |
/// | 400–499 | out of memory (device or host) |
/// | 500–599 | proving (synthesis, self-verification, cancellation) |
/// | 900–999 | internal (I/O, panics, bugs) |
///
/// Non-exhaustive: later versions may add variants (a new code within its group), so a `match`
/// outside cuzk needs a wildcard arm; [`Error::code`] gives the group of any variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- input: 100-199 ----
    /// The input does not decode: a C1 output that is not JSON of the expected shape (or the
    /// wrapper's base64 is bad), a PoSt vanilla proof that is not filecoin-proofs-api's bincode
    /// of the proof type's shape.
    #[error("malformed input: {0}")]
    MalformedInput(String),
    /// The input decodes but is inconsistent: a C1 output's partition count or wrapper sector
    /// size; PoSt vanilla proofs that do not verify against their randomness, or a proof type of
    /// another kind, randomness that is not 32 bytes.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The prover id must be exactly 32 bytes; given as text (the CLI's `--prover-id`), an
    /// actor id (`f0NNNN`, `t0NNNN`, the bare number) or 64 hex digits.
    #[error("{}", prover_id_message(*.len, .text.as_deref()))]
    InvalidProverId {
        /// Length of what was passed: bytes, or characters of the text form.
        len: usize,
        /// The text form that was passed, when the prover id came as text (`None`: bytes).
        text: Option<String>,
    },
    /// The registered proof (of a C1 output, or a PoSt proof type) is not one cuzk can prove.
    #[error("unsupported proof type: {0}")]
    UnsupportedProof(String),
    /// A configuration value (option or environment variable) could not be used.
    #[error("invalid configuration {name}={value:?}: {reason}")]
    InvalidConfig {
        /// Option or environment variable name.
        name: String,
        /// The offending value.
        value: String,
        /// What was expected.
        reason: String,
    },

    // ---- parameters: 200-299 ----
    /// A parameter or verifying-key file is missing. The hint names the parameter directory
    /// when it was given explicitly (`given_dir`), else the ways to set one.
    #[error("Groth16 parameters not found at {path} ({})", parameters_hint(.given_dir.as_deref()))]
    ParametersNotFound {
        /// Path that was looked up.
        path: PathBuf,
        /// The parameter directory the caller gave explicitly (e.g. the CLI's `--params`), if
        /// known; `None`: the hint suggests `FIL_PROOFS_PARAMETER_CACHE`.
        given_dir: Option<PathBuf>,
    },
    /// A parameter file exists but is truncated, corrupt or for another circuit.
    #[error("bad Groth16 parameter file {path}: {reason}")]
    ParametersInvalid {
        /// File that was read.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    // ---- device: 300-399 ----
    /// The GPU backend was requested but no usable CUDA device exists (or the crate was built
    /// without the `cuda` feature).
    #[error("no usable GPU: {0}")]
    NoDevice(String),
    /// A device exists but cannot run our kernels (compute capability not in the fatbin).
    #[error("device {device} unsupported: {reason}")]
    DeviceUnsupported {
        /// CUDA device ordinal.
        device: usize,
        /// Why.
        reason: String,
    },
    /// A CUDA driver call failed. With `fault: Some(_)` the device's context is unusable (a
    /// sticky error, or a stage that did not finish within its timeout): the device has been
    /// retired for the rest of the process and gets no more work.
    #[error("CUDA error on device {device} in {call}: {message}")]
    Cuda {
        /// CUDA device ordinal.
        device: usize,
        /// The driver call or kernel that failed.
        call: String,
        /// Driver's message / code.
        message: String,
        /// Why the device cannot be used any more, if it cannot (see [`DeviceFault`]).
        fault: Option<DeviceFault>,
    },

    // ---- out of memory: 400-499 ----
    /// Not even the streaming tier fits in the device memory left after the 512 MiB margin.
    #[error("out of device memory on device {device}: needs {needed} bytes, {free} bytes free after the safety margin")]
    OutOfDeviceMemory {
        /// CUDA device ordinal.
        device: usize,
        /// Bytes the smallest tier needs.
        needed: u64,
        /// Bytes available to this process after the margin and other reservations.
        free: u64,
    },
    /// The host-memory budget does not allow even one partition.
    #[error("out of host memory: needs {needed} bytes, budget {budget} bytes")]
    OutOfHostMemory {
        /// Bytes one partition needs.
        needed: u64,
        /// Configured budget.
        budget: u64,
    },

    // ---- proving: 500-599 ----
    /// Circuit synthesis failed (the inputs — a C1 output, vanilla proofs — do not satisfy the
    /// circuit, or are inconsistent).
    #[error("synthesis of partition {partition} failed: {message}")]
    Synthesis {
        /// Partition index.
        partition: usize,
        /// bellpepper's message.
        message: String,
    },
    /// The produced proof did not verify: never returned as success.
    #[error("proof of partition {partition} failed self-verification")]
    VerificationFailed {
        /// Partition index (or `usize::MAX` when the whole multi-proof failed).
        partition: usize,
    },
    /// The call was cancelled through its [`crate::CancelToken`] before it finished: no proof.
    #[error("cancelled")]
    Cancelled,

    // ---- internal: 900-999 ----
    /// I/O error outside parameter files.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A panic was caught at the API or C boundary.
    #[error("internal panic: {0}")]
    Panic(String),
    /// Anything else that indicates a bug in cuzk or a dependency.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// Stable numeric code of this error (see the table of [`Error`]). Never 0 (0 is success in C).
    pub fn code(&self) -> i32 {
        match self {
            Error::MalformedInput(_) => 100,
            Error::InvalidInput(_) => 101,
            Error::InvalidProverId { .. } => 102,
            Error::UnsupportedProof(_) => 103,
            Error::InvalidConfig { .. } => 104,
            Error::ParametersNotFound { .. } => 200,
            Error::ParametersInvalid { .. } => 201,
            Error::NoDevice(_) => 300,
            Error::DeviceUnsupported { .. } => 301,
            Error::Cuda { .. } => 302,
            Error::OutOfDeviceMemory { .. } => 400,
            Error::OutOfHostMemory { .. } => 401,
            Error::Synthesis { .. } => 500,
            Error::VerificationFailed { .. } => 501,
            Error::Cancelled => 502,
            Error::Io(_) => 900,
            Error::Panic(_) => 901,
            Error::Internal(_) => 902,
        }
    }

    /// This error, with `dir` as the explicitly given parameter directory of an
    /// [`Error::ParametersNotFound`] (its hint then names `dir` instead of
    /// `FIL_PROOFS_PARAMETER_CACHE`); other errors, and `dir: None`, unchanged.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn with_parameter_dir(self, dir: Option<&std::path::Path>) -> Self {
        match (self, dir) {
            (Error::ParametersNotFound { path, .. }, Some(d)) => Error::ParametersNotFound {
                path,
                given_dir: Some(d.to_path_buf()),
            },
            (e, _) => e,
        }
    }

    /// Builds an [`Error::Internal`] from anything printable (used for dependency errors that
    /// indicate a bug rather than bad input).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn internal(e: impl std::fmt::Display) -> Self {
        Error::Internal(e.to_string())
    }

    /// Converts a panic payload (from `catch_unwind`) into [`Error::Panic`], keeping the message
    /// of `&str` and `String` payloads.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn from_panic(payload: Box<dyn std::any::Any + Send>) -> Self {
        let msg = if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else {
            "non-string panic payload".to_string()
        };
        Error::Panic(msg)
    }
}

/// The message of [`Error::InvalidProverId`].
fn prover_id_message(len: usize, text: Option<&str>) -> String {
    match text {
        None => format!("prover id must be 32 bytes, got {len}"),
        Some(t) => format!(
            "invalid prover id {t:?} ({len} characters): expected an f0 actor id such as f01000 \
             (also t0NNNN, or the bare actor number) or 64 hex digits (the 32 bytes)"
        ),
    }
}

/// The hint of [`Error::ParametersNotFound`].
fn parameters_hint(given_dir: Option<&std::path::Path>) -> String {
    match given_dir {
        Some(d) => format!(
            "the parameter directory given is {}: put the .params and .vk files there, or give \
             another directory",
            d.display()
        ),
        None => "set FIL_PROOFS_PARAMETER_CACHE or pass a parameter directory".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One value of every variant (tests of the codes here and in the C ABI).
    pub(crate) fn all_errors() -> Vec<Error> {
        vec![
            Error::MalformedInput(String::new()),
            Error::InvalidInput(String::new()),
            Error::InvalidProverId { len: 3, text: None },
            Error::UnsupportedProof(String::new()),
            Error::InvalidConfig {
                name: "X".into(),
                value: "y".into(),
                reason: "z".into(),
            },
            Error::ParametersNotFound {
                path: "p".into(),
                given_dir: None,
            },
            Error::ParametersInvalid {
                path: "p".into(),
                reason: "r".into(),
            },
            Error::NoDevice(String::new()),
            Error::DeviceUnsupported {
                device: 0,
                reason: String::new(),
            },
            Error::Cuda {
                device: 0,
                call: String::new(),
                message: String::new(),
                fault: None,
            },
            Error::OutOfDeviceMemory {
                device: 0,
                needed: 1,
                free: 0,
            },
            Error::OutOfHostMemory {
                needed: 1,
                budget: 0,
            },
            Error::Synthesis {
                partition: 0,
                message: String::new(),
            },
            Error::VerificationFailed { partition: 0 },
            Error::Cancelled,
            Error::Io(std::io::Error::other("x")),
            Error::Panic(String::new()),
            Error::Internal(String::new()),
        ]
    }

    /// README.md's table of status codes lists every variant once, with its code, its C name
    /// (`CUZK_STATUS_` + the variant in upper snake case, as `include/cuzk.h` spells it) and the
    /// `cuzk` command's exit status for it, plus the success row.
    #[test]
    fn readme_status_table_matches_the_codes() {
        let readme = include_str!("../README.md");
        let start = readme
            .find("<!-- status-codes:")
            .expect("README.md has the status-code table");
        let end = start
            + readme[start..]
                .find("<!-- /status-codes -->")
                .expect("the table's end marker");
        let rows: Vec<(i32, String, String, i32)> = readme[start..end]
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| code"))
            .map(|l| {
                let c: Vec<&str> = l.split('|').map(|c| c.trim().trim_matches('`')).collect();
                let num = |s: &str| s.parse::<i32>().unwrap_or_else(|e| panic!("{l}: {e}"));
                (num(c[1]), c[2].to_string(), c[3].to_string(), num(c[5]))
            })
            .collect();
        let upper_snake = |name: &str| {
            let mut out = String::new();
            for (i, ch) in name.chars().enumerate() {
                if ch.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(ch.to_ascii_uppercase());
            }
            out
        };
        let mut want = vec![(0, "OK".to_string(), "—".to_string(), 0)];
        for e in all_errors() {
            let debug = format!("{e:?}");
            let name = debug
                .split(|c: char| !c.is_ascii_alphanumeric())
                .next()
                .unwrap()
                .to_string();
            let code = e.code();
            want.push((
                code,
                upper_snake(&name),
                name,
                (code / 100) * 10 + code % 100,
            ));
        }
        want.sort_by_key(|w| w.0);
        assert_eq!(
            rows, want,
            "README.md's status codes (in code order) against src/error.rs"
        );
    }

    #[test]
    fn codes_are_grouped_and_distinct() {
        let all = all_errors();
        let codes: std::collections::BTreeSet<i32> = all.iter().map(Error::code).collect();
        assert_eq!(codes.len(), all.len());
        assert_eq!(
            Error::InvalidProverId { len: 3, text: None }.code() / 100,
            1
        );
        assert_eq!(
            Error::ParametersNotFound {
                path: "p".into(),
                given_dir: None
            }
            .code()
                / 100,
            2
        );
        assert_eq!(
            Error::OutOfDeviceMemory {
                device: 0,
                needed: 1,
                free: 0
            }
            .code()
                / 100,
            4
        );
        assert_eq!(Error::Panic(String::new()).code() / 100, 9);
    }

    #[test]
    fn prover_id_messages_say_what_was_given_and_what_is_expected() {
        let e = Error::InvalidProverId {
            len: 31,
            text: None,
        };
        assert_eq!(e.to_string(), "prover id must be 32 bytes, got 31");
        let e = Error::InvalidProverId {
            len: 5,
            text: Some("f0abc".into()),
        };
        assert_eq!(e.code(), 102);
        assert_eq!(
            e.to_string(),
            "invalid prover id \"f0abc\" (5 characters): expected an f0 actor id such as f01000 \
             (also t0NNNN, or the bare actor number) or 64 hex digits (the 32 bytes)"
        );
    }

    #[test]
    fn a_given_parameter_directory_is_named_in_the_hint() {
        let missing = || Error::ParametersNotFound {
            path: "/p/x.params".into(),
            given_dir: None,
        };
        assert_eq!(
            missing().to_string(),
            "Groth16 parameters not found at /p/x.params (set FIL_PROOFS_PARAMETER_CACHE or pass \
             a parameter directory)"
        );
        let e = missing().with_parameter_dir(Some(std::path::Path::new("/p")));
        assert_eq!(e.code(), 200);
        let m = e.to_string();
        assert_eq!(
            m,
            "Groth16 parameters not found at /p/x.params (the parameter directory given is /p: \
             put the .params and .vk files there, or give another directory)"
        );
        assert!(!m.contains("FIL_PROOFS_PARAMETER_CACHE"), "{m}");
        // Without a directory, and for other errors: unchanged.
        assert!(missing()
            .with_parameter_dir(None)
            .to_string()
            .contains("FIL_PROOFS_PARAMETER_CACHE"));
        assert_eq!(
            Error::Internal("x".into())
                .with_parameter_dir(Some(std::path::Path::new("/p")))
                .to_string(),
            "internal error: x"
        );
    }

    #[test]
    fn panic_payloads_keep_their_message() {
        let e = Error::from_panic(Box::new("boom"));
        assert_eq!(e.to_string(), "internal panic: boom");
        let e = Error::from_panic(Box::new(String::from("bang 7")));
        assert_eq!(e.to_string(), "internal panic: bang 7");
    }
}
