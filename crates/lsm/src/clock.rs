//! [`Clock`]: where background work reads the time, so that backoff and failure episodes are
//! tested without sleeping.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A monotonic clock.
pub trait Clock {
    /// Now; never earlier than a previous call's answer.
    fn now(&self) -> Instant;
}

/// The process's monotonic clock ([`Instant::now`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock(Mutex<Instant>);

impl Default for ManualClock {
    fn default() -> Self {
        Self(Mutex::new(Instant::now()))
    }
}

impl ManualClock {
    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
