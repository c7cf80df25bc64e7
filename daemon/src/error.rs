//! The daemon's one error type and its gRPC status codes.

use tonic::{Code, Status};

/// Every error a request can get. Each maps to one gRPC status ([`DaemonError::code`]); engine
/// errors keep cuzk's stable numeric code in the message (`cuzk error N: ...`).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// The request is malformed or inconsistent (INVALID_ARGUMENT).
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// A proof kind, proof type or operation cuzk does not implement (UNIMPLEMENTED).
    #[error("not implemented by cuzk: {0}")]
    Unimplemented(String),
    /// No job has this id (NOT_FOUND): never submitted, or finished and no longer kept.
    #[error("no job {0:?} (unknown, or finished longer ago than the daemon keeps results)")]
    JobNotFound(String),
    /// The queue holds its maximum of pending jobs (RESOURCE_EXHAUSTED).
    #[error("queue full: {pending} jobs pending, the limit (--max-queue) is {limit}")]
    QueueFull {
        /// Jobs pending now.
        pending: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The daemon's state does not allow the request now (FAILED_PRECONDITION), e.g. `EvictSRS`
    /// of parameters a running proof uses: retry once the state changed.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The daemon is shutting down and takes no new work (UNAVAILABLE; retry elsewhere or later).
    #[error("cuzk daemon is shutting down: {0}")]
    ShuttingDown(String),
    /// The engine failed; the status code follows the error's class (see [`engine_code`]).
    #[error("cuzk error {}: {0}", .0.code())]
    Engine(#[from] cuzk::Error),
    /// A bug in the daemon (INTERNAL).
    #[error("internal daemon error: {0}")]
    Internal(String),
}

impl DaemonError {
    /// The gRPC status code of this error.
    pub fn code(&self) -> Code {
        match self {
            DaemonError::InvalidArgument(_) => Code::InvalidArgument,
            DaemonError::Unimplemented(_) => Code::Unimplemented,
            DaemonError::JobNotFound(_) => Code::NotFound,
            DaemonError::QueueFull { .. } => Code::ResourceExhausted,
            DaemonError::FailedPrecondition(_) => Code::FailedPrecondition,
            DaemonError::ShuttingDown(_) => Code::Unavailable,
            DaemonError::Engine(e) => engine_code(e),
            DaemonError::Internal(_) => Code::Internal,
        }
    }
}

impl From<DaemonError> for Status {
    fn from(e: DaemonError) -> Status {
        Status::new(e.code(), e.to_string())
    }
}

/// The gRPC status code of an engine error, by the range of its stable code
/// ([`cuzk::Error::code`]): input errors (1xx) INVALID_ARGUMENT, except an unsupported proof
/// type (103) UNIMPLEMENTED; parameter files (2xx) FAILED_PRECONDITION (the operator must fix the
/// parameter directory); devices (3xx) UNAVAILABLE; memory (4xx) RESOURCE_EXHAUSTED; proving
/// (5xx) and internal (9xx) INTERNAL, except a cancelled call (502) CANCELLED.
pub fn engine_code(e: &cuzk::Error) -> Code {
    match e.code() {
        103 => Code::Unimplemented,
        502 => Code::Cancelled,
        100..=199 => Code::InvalidArgument,
        200..=299 => Code::FailedPrecondition,
        300..=399 => Code::Unavailable,
        400..=499 => Code::ResourceExhausted,
        _ => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_errors_map_by_class_and_keep_their_code() {
        let cases = [
            (
                cuzk::Error::MalformedInput("x".into()),
                Code::InvalidArgument,
                100,
            ),
            (
                cuzk::Error::UnsupportedProof("NI".into()),
                Code::Unimplemented,
                103,
            ),
            (
                cuzk::Error::ParametersNotFound {
                    path: "/p/x.params".into(),
                    given_dir: None,
                },
                Code::FailedPrecondition,
                200,
            ),
            (cuzk::Error::NoDevice("none".into()), Code::Unavailable, 300),
            (
                cuzk::Error::OutOfHostMemory {
                    needed: 2,
                    budget: 1,
                },
                Code::ResourceExhausted,
                401,
            ),
            (
                cuzk::Error::VerificationFailed { partition: 0 },
                Code::Internal,
                501,
            ),
            (cuzk::Error::Cancelled, Code::Cancelled, 502),
            (cuzk::Error::Panic("boom".into()), Code::Internal, 901),
        ];
        for (e, code, n) in cases {
            let s = Status::from(DaemonError::from(e));
            assert_eq!(s.code(), code, "{}", s.message());
            assert!(
                s.message().starts_with(&format!("cuzk error {n}: ")),
                "{}",
                s.message()
            );
        }
    }

    #[test]
    fn daemon_errors_have_their_codes() {
        assert_eq!(
            Status::from(DaemonError::QueueFull {
                pending: 3,
                limit: 3
            })
            .code(),
            Code::ResourceExhausted
        );
        assert_eq!(
            DaemonError::ShuttingDown("x".into()).code(),
            Code::Unavailable
        );
        assert_eq!(DaemonError::JobNotFound("j".into()).code(), Code::NotFound);
        assert_eq!(
            DaemonError::FailedPrecondition("in use".into()).code(),
            Code::FailedPrecondition
        );
    }
}
