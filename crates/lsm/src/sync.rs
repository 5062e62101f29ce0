//! The atomics of the memtable protocol and the slab lifecycle: slab headers, the ready and
//! deleted bitmaps of memtables, and each index's active-slab marker.
//!
//! They are std's, or shuttle's when the `shuttle` feature is on (this crate's own tests turn it
//! on), so that shuttle schedules every access and explores the interleavings of writers, sealers,
//! flushers and scans. Shuttle's atomics work only inside a `shuttle::check_*` run: with the
//! feature on, every test that touches a slab runs inside one.
//!
//! With std's atomics every type here has the size and alignment of its integer, so that the
//! extension can place them in shared memory, where all-zero bytes are a valid value.

#[cfg(feature = "shuttle")]
pub use shuttle::sync::atomic::{AtomicU32, AtomicU64};
pub use std::sync::atomic::Ordering;
#[cfg(not(feature = "shuttle"))]
pub use std::sync::atomic::{AtomicU32, AtomicU64};
