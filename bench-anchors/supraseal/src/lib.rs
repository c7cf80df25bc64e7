//! What the anchor binaries share.

/// The value after `name` in `args` (`--flag VALUE`), if both are there.
pub fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}
