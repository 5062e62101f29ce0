//! How the index service's background work reports: LOG lines prefixed with the service's name,
//! naming an index by its OID and storage key (the service has no database connection to look
//! names up).

use std::sync::atomic::Ordering;

use crate::access::state::IndexHandle;

/// Writes a LOG line prefixed with the service's name.
pub fn log(message: &str) {
    pgrx::log!("pg_strata index service: {message}");
}

/// How an index is named in log lines: its OID and storage key.
pub fn describe(handle: &IndexHandle) -> String {
    format!(
        "{} (database {}, relfilenode {})",
        handle.shared().relid.load(Ordering::Acquire),
        handle.key.db,
        handle.key.relnode
    )
}
