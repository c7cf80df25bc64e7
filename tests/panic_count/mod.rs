//! A panic counter for the input-check tests (`tests/*_vanilla_fields.rs`), each alone in its
//! test binary so that no other test's panics are counted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Installs a panic hook that counts every panic of the process (on any thread) before the
/// default hook prints it; returns the count.
pub fn count_panics() -> Arc<AtomicUsize> {
    let panics = Arc::new(AtomicUsize::new(0));
    let seen = panics.clone();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        seen.fetch_add(1, Ordering::SeqCst);
        default_hook(info);
    }));
    panics
}
