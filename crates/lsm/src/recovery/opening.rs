//! What opening an index decides on its first use since the server started, and on a later use
//! once the node has been promoted, as pure functions of the node's and the index's state.
//!
//! An index's files are either this node's own (the node marker is present: crash recovery
//! reconciles them with the status pages, [`super::plan`]) or not known to be (a standby that
//! replays the primary's WAL, a restored base backup, files inherited from another node): then
//! the index is derived from the replayed membership log and the heap, scan by scan, as a
//! standby's absorber does, and once the node accepts writes the derivation is finished and the
//! marker written. An unlogged index has no WAL to derive from: its files are its own or lost.

/// How an index is brought up to date when it is opened for the first time since the server
/// started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Reconcile this node's own files with the status pages (crash recovery), then settle the
    /// memtables known to be flushed.
    Recover,
    /// Derive the index from the replayed membership log and the heap; `finish_now` when the node
    /// accepts writes (a primary that inherited the files), so the derivation is completed and
    /// the node marker written before the first use returns.
    Derive {
        /// Complete the derivation at once (the node is not in recovery).
        finish_now: bool,
    },
}

/// The index's files are missing (no manifest) on first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingFiles {
    /// Create empty files and derive the index from the membership log and the heap, which hold
    /// all of it (a standby that replayed CREATE INDEX, a restore of a backup taken before it).
    Create,
    /// Nothing can rebuild them (an unlogged index has no WAL): the index must be rebuilt by
    /// REINDEX.
    Refuse,
}

/// The way to open an index whose manifest exists: `logged` (a permanent index, whose status
/// pages and membership log are WAL-logged), `in_recovery` (the node replays WAL: a standby or
/// a recovering primary), `node_marker` (the index directory holds this node's marker).
///
/// Guarantees: a logged index is derived whenever the node replays WAL or the files are not
/// this node's own, and derived to completion at once exactly when the node accepts writes; an
/// unlogged index is always recovered from its own files.
pub fn choose(logged: bool, in_recovery: bool, node_marker: bool) -> Opening {
    if logged && (in_recovery || !node_marker) {
        Opening::Derive { finish_now: !in_recovery }
    } else {
        Opening::Recover
    }
}

/// What to do when an index's manifest is missing on first use.
pub fn on_missing_files(logged: bool) -> MissingFiles {
    if logged {
        MissingFiles::Create
    } else {
        MissingFiles::Refuse
    }
}

/// Whether a use of an index already registered on this node must first finish its derivation:
/// it was derived while the node replayed WAL (`derived`) and the node has been promoted since
/// (`in_recovery` is false).
pub fn finishes_promotion(derived: bool, in_recovery: bool) -> bool {
    derived && !in_recovery
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_recovers_its_own_files_and_derives_inherited_ones_at_once() {
        assert_eq!(choose(true, false, true), Opening::Recover);
        assert_eq!(choose(true, false, false), Opening::Derive { finish_now: true });
    }

    #[test]
    fn a_node_in_recovery_derives_every_logged_index_and_finishes_none() {
        for marker in [false, true] {
            assert_eq!(choose(true, true, marker), Opening::Derive { finish_now: false });
        }
    }

    #[test]
    fn an_unlogged_index_is_recovered_from_its_files_or_refused_without_them() {
        for (in_recovery, marker) in [(false, false), (false, true), (true, false), (true, true)] {
            assert_eq!(choose(false, in_recovery, marker), Opening::Recover);
        }
        assert_eq!(on_missing_files(false), MissingFiles::Refuse);
        assert_eq!(on_missing_files(true), MissingFiles::Create);
    }

    #[test]
    fn only_a_derived_index_on_a_promoted_node_finishes_on_use() {
        assert!(finishes_promotion(true, false));
        assert!(!finishes_promotion(true, true));
        assert!(!finishes_promotion(false, false));
        assert!(!finishes_promotion(false, true));
    }
}
