//! The set of memtables an index's status pages may still list, kept in shared memory so the
//! index service can decide without reading pages which segments it may merge.
//!
//! Lock-free for readers; writers are serialised by the caller (the index's metadata page lock).
//! The type is `#[repr(C)]` and made only of atomics, so it can live in shared memory.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of a [`ListedSet`].
pub const LISTED_SLOTS: usize = 64;

/// The memtable ids an index's status pages may still list, readable without a lock.
///
/// Written only under the index's metadata page lock (registration adds, a durable release
/// removes). Ids that do not fit in the slots are summarised by `overflow`, the smallest of them
/// (`u64::MAX` when none): every id ≥ `overflow` counts as listed. Writers add to the slots
/// before raising `overflow` and zero a slot only after the release is durable; readers load
/// `overflow` first, so a reader can only err towards "listed".
#[repr(C)]
pub struct ListedSet {
    ids: [AtomicU64; LISTED_SLOTS],
    overflow: AtomicU64,
}

impl ListedSet {
    /// Everything counts as listed (before recovery has read the status pages).
    pub fn reset_all_listed(&self) {
        for id in &self.ids {
            id.store(0, Ordering::Release);
        }
        self.overflow.store(0, Ordering::Release);
    }

    /// Nothing is listed (a freshly built index).
    pub fn reset_empty(&self) {
        for id in &self.ids {
            id.store(0, Ordering::Release);
        }
        self.overflow.store(u64::MAX, Ordering::Release);
    }

    /// Records that memtable `id` (> 0) is registered.
    pub fn add(&self, id: u64) {
        if self.ids.iter().any(|slot| slot.load(Ordering::Acquire) == id) {
            return;
        }
        match self.ids.iter().find(|slot| slot.load(Ordering::Acquire) == 0) {
            Some(slot) => slot.store(id, Ordering::Release),
            None => {
                self.overflow.fetch_min(id, Ordering::AcqRel);
            }
        }
    }

    /// Makes the set equal to `remaining` (the array page after a durable release).
    pub fn sync(&self, remaining: &[u64]) {
        let mut spill = u64::MAX;
        for &id in remaining {
            if self.ids.iter().any(|slot| slot.load(Ordering::Acquire) == id) {
                continue;
            }
            match self.ids.iter().find(|slot| slot.load(Ordering::Acquire) == 0) {
                Some(slot) => slot.store(id, Ordering::Release),
                None => spill = spill.min(id),
            }
        }
        for slot in &self.ids {
            let id = slot.load(Ordering::Acquire);
            if id != 0 && !remaining.contains(&id) {
                slot.store(0, Ordering::Release);
            }
        }
        self.overflow.store(spill, Ordering::Release);
    }

    /// The smallest memtable id that may still be listed (`u64::MAX` when none): no id below it
    /// is listed. Errs low, as [`ListedSet::contains`] errs towards "listed".
    pub fn smallest(&self) -> u64 {
        let overflow = self.overflow.load(Ordering::Acquire);
        self.ids.iter().map(|slot| slot.load(Ordering::Acquire)).filter(|&id| id != 0).fold(overflow, u64::min)
    }

    /// Whether memtable `id` may still be listed.
    pub fn contains(&self, id: u64) -> bool {
        id >= self.overflow.load(Ordering::Acquire) || self.ids.iter().any(|slot| slot.load(Ordering::Acquire) == id)
    }
}

impl Default for ListedSet {
    /// Everything counts as listed.
    fn default() -> Self {
        Self { ids: std::array::from_fn(|_| AtomicU64::new(0)), overflow: AtomicU64::new(0) }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn resets_add_and_sync() {
        let set = ListedSet::default();
        assert!(set.contains(1) && set.contains(1000), "before recovery everything is listed");
        set.reset_empty();
        assert!(!set.contains(1));
        set.add(7);
        set.add(7);
        assert!(set.contains(7) && !set.contains(8));
        set.sync(&[9]);
        assert!(!set.contains(7) && set.contains(9));
        set.reset_all_listed();
        assert!(set.contains(3));
    }

    #[test]
    fn overflow_counts_every_larger_id_as_listed() {
        let set = ListedSet::default();
        set.reset_empty();
        for id in 1..=LISTED_SLOTS as u64 + 3 {
            set.add(id);
        }
        assert!(set.contains(LISTED_SLOTS as u64 + 1) && set.contains(u64::MAX - 1));
        set.sync(&[LISTED_SLOTS as u64 + 2]);
        assert!(set.contains(LISTED_SLOTS as u64 + 2));
        assert!(!set.contains(1), "released ids leave the slots");
        // Slots are freed only after the survivors were placed (readers must never miss one), so
        // the overflowing id still summarises every larger id until the next sync places it.
        set.sync(&[LISTED_SLOTS as u64 + 2]);
        assert!(set.contains(LISTED_SLOTS as u64 + 2) && !set.contains(LISTED_SLOTS as u64 + 3));
    }

    proptest! {
        /// After any sequence of adds and syncs, every id the model says is listed is contained
        /// (the set may only err towards "listed"), and with no overflow it is exact.
        #[test]
        fn never_forgets_a_listed_id(ops in prop::collection::vec((any::<bool>(), prop::collection::vec(1u64..120, 0..80)), 1..20)) {
            let set = ListedSet::default();
            set.reset_empty();
            let mut model = std::collections::BTreeSet::new();
            for (is_sync, ids) in ops {
                if is_sync {
                    model = ids.iter().copied().collect();
                    let remaining: Vec<u64> = model.iter().copied().collect();
                    set.sync(&remaining);
                } else {
                    for &id in &ids {
                        set.add(id);
                        model.insert(id);
                    }
                }
                for id in 1..120 {
                    if model.contains(&id) {
                        prop_assert!(set.contains(id));
                    } else if model.len() <= LISTED_SLOTS {
                        prop_assert!(!set.contains(id) || set.overflow.load(Ordering::Acquire) <= id);
                    }
                }
            }
        }
    }
}
