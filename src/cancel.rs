//! Cancellation of a proof in progress: [`CancelToken`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A shared cancellation flag (cheap to clone: clones share the flag). Once set it stays set.
///
/// Shared between the caller and one or more proving calls (through
/// [`crate::ProveOptions::cancel`]). Setting it makes the engine stop the call at its next
/// checkpoint — before a partition takes its place among the partitions in flight, after it got
/// one, after its witness and before its GPU work, before its epilogue — and return
/// [`crate::Error::Cancelled`]. Work already submitted to a device finishes first (a kernel is
/// not interrupted), so a 32 GiB partition stops within about one GPU section (~2 s on an H200)
/// of the request; partitions not yet started never start. A cancelled call returns no proof.
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requests cancellation of every call holding this token (or a clone of it).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// `Err(Error::Cancelled)` once cancellation was requested (a checkpoint of the engine).
    pub(crate) fn check(token: Option<&CancelToken>) -> crate::Result<()> {
        match token {
            Some(t) if t.is_cancelled() => Err(crate::Error::Cancelled),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_check_reports_it() {
        let t = CancelToken::new();
        let u = t.clone();
        assert!(!u.is_cancelled());
        assert!(CancelToken::check(Some(&u)).is_ok());
        assert!(CancelToken::check(None).is_ok());
        t.cancel();
        assert!(u.is_cancelled());
        assert!(matches!(
            CancelToken::check(Some(&u)),
            Err(crate::Error::Cancelled)
        ));
    }
}
