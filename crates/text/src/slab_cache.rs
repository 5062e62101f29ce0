//! A backend's decoded copies of a text index's slab memtables, for scans.
//!
//! A text memtable in shared memory holds span rows of [`Document::to_words`]
//! ([`strata_lsm::memtable::spans`]). Searching it needs postings; decoding every row on every
//! query would cost O(rows) per query, so each backend keeps a [`MemtableCache`]: per memtable
//! (keyed by slab and SegmentID, so a slab reused by another memtable is never mistaken for the
//! old one) a text [`Memtable`] of the rows decoded so far, extended on each round with the run
//! of finished slots after them (`ready_through`), the way strata-lsm's `CodesCache` keeps
//! vector codes. Rows finished after a slot some writer still holds (a writer preempted between
//! reserve and ready) are decoded for that round only, into a tail memtable, so a round sees
//! every finished row and the cache never holds a row twice or skips one.
//!
//! Deleted bits are read at each round (VACUUM may mark rows after they were decoded): every
//! memtable of a round comes with its deletion bitmap.

use std::collections::HashMap;

use strata_engine::bitset::Bitset;
use strata_lsm::memtable::Memtable as SlabMemtable;
use strata_lsm::slabs::SlabMemory;

use crate::document::Document;
use crate::error::TextError;
use crate::memtable::Memtable;

/// The decoded rows of one memtable: row `i` came from slot `slots[i]`; slots before `covered`
/// are decoded (or hold no row).
#[derive(Debug, Default)]
struct Decoded {
    rows: Memtable,
    slots: Vec<u32>,
    covered: usize,
}

impl Decoded {
    /// Decodes the span rows with heads in `from..to` into `self`.
    fn extend<M: SlabMemory + ?Sized>(
        &mut self,
        memtable: &SlabMemtable<'_, M>,
        from: usize,
        to: usize,
    ) -> Result<(), TextError> {
        let mut failed = None;
        memtable.for_each_span_in(from..to, |slot, tid, words| {
            if failed.is_some() {
                return;
            }
            match Document::from_words(words).and_then(|doc| self.rows.insert(tid, &doc)) {
                Ok(_) => self.slots.push(u32::try_from(slot).expect("slots fit in u32")),
                Err(e) => failed = Some(e),
            }
        });
        self.covered = to;
        failed.map_or(Ok(()), Err)
    }

    /// The rows deleted now (`None` when none is).
    fn deleted<M: SlabMemory + ?Sized>(&self, memtable: &SlabMemtable<'_, M>) -> Option<Bitset> {
        let mut deleted: Option<Bitset> = None;
        for (row, &slot) in self.slots.iter().enumerate() {
            if memtable.is_deleted(slot as usize) {
                deleted.get_or_insert_with(|| Bitset::new(self.slots.len())).insert(row);
            }
        }
        deleted
    }
}

/// One round's view of one memtable: its cached rows, the rows finished past a gap (decoded
/// for this round only), and the deletion bitmap of each.
#[derive(Debug)]
pub struct RoundMemtable<'c> {
    /// The cached rows and those deleted now.
    pub cached: (&'c Memtable, Option<Bitset>),
    /// Rows finished after a slot still being written, and those deleted now (`None` when
    /// there are none).
    pub tail: Option<(Memtable, Option<Bitset>)>,
}

/// One backend's decoded memtables of one text index (see the module docs).
#[derive(Debug, Default)]
pub struct MemtableCache {
    entries: HashMap<(usize, u64), Decoded>,
}

impl MemtableCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The rows of each of `memtables` (a scan's snapshot, which holds them) for one round:
    /// every finished row, once, with the rows deleted now. Memtables no longer in the snapshot
    /// are dropped from the cache. A row that does not decode is an error.
    pub fn for_round<M: SlabMemory + ?Sized>(
        &mut self,
        memtables: &[SlabMemtable<'_, M>],
    ) -> Result<Vec<RoundMemtable<'_>>, TextError> {
        let keys: Vec<(usize, u64)> = memtables.iter().map(|m| (m.slab(), m.segment_id())).collect();
        self.entries.retain(|key, _| keys.contains(key));
        let mut tails = Vec::with_capacity(memtables.len());
        for (memtable, key) in memtables.iter().zip(&keys) {
            let decoded = self.entries.entry(*key).or_default();
            let finished = memtable.ready_through(decoded.covered);
            decoded.extend(memtable, decoded.covered, finished)?;
            let filled = memtable.header().filled();
            let tail = if filled > finished {
                let mut tail = Decoded::default();
                tail.extend(memtable, finished, filled)?;
                (!tail.rows.is_empty()).then(|| {
                    let deleted = tail.deleted(memtable);
                    (tail.rows, deleted)
                })
            } else {
                None
            };
            tails.push(tail);
        }
        Ok(memtables
            .iter()
            .zip(&keys)
            .zip(tails)
            .map(|((memtable, key), tail)| {
                let decoded = &self.entries[key];
                RoundMemtable { cached: (&decoded.rows, decoded.deleted(memtable)), tail }
            })
            .collect())
    }

    /// Memtables cached now.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no memtable is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
