//! Cooperative cancellation of long builds.
//!
//! A [`Cancel`] token is handed to a build (segment builds, HNSW graph construction, k-means);
//! the build polls it between small units of work (one inserted row, one Lloyd iteration, one
//! chunk of encoded rows) and returns a `Cancelled` error soon after [`Cancel::request`] is
//! called from any thread. The caller that owns the build (a PostgreSQL backend handling
//! `pg_cancel_backend`, the index service handling SIGTERM) requests cancellation and then joins
//! the build's thread, which ends within one unit of work.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A shareable cancellation flag; the default token can never be cancelled.
///
/// Guarantees: once [`Cancel::request`] returns, every clone's [`Cancel::is_requested`] returns
/// `true` (on every thread); a token made with [`Cancel::default`] never reports a request.
#[derive(Clone, Default)]
pub struct Cancel(Option<Arc<AtomicBool>>);

/// The error a cancelled build returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the build was cancelled")]
pub struct Cancelled;

impl Cancel {
    /// A token that can be cancelled with [`Cancel::request`].
    pub fn new() -> Self {
        Self(Some(Arc::new(AtomicBool::new(false))))
    }

    /// Asks every holder of this token (and its clones) to stop. No effect on a default token.
    pub fn request(&self) {
        if let Some(flag) = &self.0 {
            flag.store(true, Ordering::Release);
        }
    }

    /// Whether cancellation was requested.
    pub fn is_requested(&self) -> bool {
        self.0.as_ref().is_some_and(|flag| flag.load(Ordering::Acquire))
    }

    /// `Err(Cancelled)` once cancellation was requested.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_requested() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Cancel").field(&self.is_requested()).finish()
    }
}

/// Tokens compare equal whatever their state: two parameter sets that differ only in their
/// token describe the same build.
impl PartialEq for Cancel {
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

impl Eq for Cancel {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reaches_every_clone_and_the_default_token_never_cancels() {
        let token = Cancel::new();
        let clone = token.clone();
        assert!(clone.check().is_ok());
        std::thread::spawn(move || token.request()).join().unwrap();
        assert_eq!(clone.check(), Err(Cancelled));
        let never = Cancel::default();
        never.request();
        assert!(!never.is_requested());
    }
}
