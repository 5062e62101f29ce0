//! Span rows: variable-length rows (a text document's encoding) over a memtable's fixed slots.
//!
//! A span row of `n` words takes `⌈(1 + n) / dims⌉` consecutive slots
//! ([`MemtableLayout::span_slots`]). Its **head** slot carries the heap TID and, as its first
//! word, `n`; the words follow, filling the head slot and then the **continuation** slots, whose
//! TID is 0 (no heap TID is 0: item offsets start at 1). The writer reserves the whole run with
//! one `fetch_add` ([`SlabHeader::reserve_run`](crate::slabs::SlabHeader)), writes and publishes
//! the continuation slots first and the head last, so a reader that loads the head's ready bit
//! with acquire ordering sees every word. Readers visit head slots only: every reader of the
//! memtable skips TID-0 slots ([`Memtable::for_each_live`] and the rest). A run that reaches past
//! the capacity is written as continuation slots up to the capacity (so the memtable still
//! completes) and reported [`Insert::Full`]: the row goes to the next memtable whole.
//!
//! Deleted bits, pins, seals and flushes apply to span rows unchanged: a row is deleted by its
//! head's bit, and a memtable is complete when every reserved slot below the capacity is written.

use super::{Insert, Memtable, MemtableLayout};
use crate::slabs::{Bitmap, SlabMemory};
use crate::sync::Ordering;

/// A span row too long for a memtable slab of its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a row of {words} words does not fit in a memtable slab (at most {max} words); raise strata.memtable_slab_size"
)]
pub struct SpanTooLong {
    /// The row's words.
    pub words: usize,
    /// The most words a span row of the slab's layout holds.
    pub max: usize,
}

impl MemtableLayout {
    /// Slots a span row of `words` words takes (at least 1).
    pub fn span_slots(&self, words: usize) -> usize {
        (1 + words).div_ceil(self.dims.max(1))
    }

    /// The most words one span row may hold: it fills the whole memtable.
    pub fn max_span_words(&self) -> usize {
        (self.capacity * self.dims).saturating_sub(1)
    }

    /// Whether a span row of `words` words fits in a memtable of this layout.
    pub fn check_span(&self, words: usize) -> Result<(), SpanTooLong> {
        if words > self.max_span_words() {
            return Err(SpanTooLong { words, max: self.max_span_words() });
        }
        Ok(())
    }
}

impl<M: SlabMemory + ?Sized> Memtable<'_, M> {
    /// Appends span row `(tid, words)` (see the module docs). The caller may append, as for
    /// [`Memtable::insert`], `tid` is not 0 and the row fits ([`MemtableLayout::check_span`]).
    pub(crate) fn insert_span(&self, tid: u64, words: &[u32]) -> Insert {
        assert_ne!(tid, 0, "TID 0 marks continuation slots");
        let (dims, capacity) = (self.layout.dims, self.layout.capacity);
        assert!(self.layout.check_span(words.len()).is_ok(), "a span row longer than the memtable");
        let span = self.layout.span_slots(words.len());
        let first = self.header().reserve_run(span);
        if first >= capacity {
            return Insert::Full;
        }
        if first + span > capacity {
            // The slots up to the capacity are this writer's: publish them as continuation slots
            // so the memtable completes; the row goes to the next memtable.
            let zeros = vec![0.0; dims];
            for slot in first..capacity {
                self.write_reserved(slot, 0, &zeros);
            }
            return Insert::Full;
        }
        let mut row = vec![0.0f32; span * dims];
        row[0] = f32::from_bits(u32::try_from(words.len()).expect("checked against the capacity"));
        for (cell, &word) in row[1..].iter_mut().zip(words) {
            *cell = f32::from_bits(word);
        }
        // Continuation slots first, the head last: the head's ready bit publishes the whole row.
        for k in 1..span {
            self.write_reserved(first + k, 0, &row[k * dims..(k + 1) * dims]);
        }
        self.write_reserved(first, tid, &row[..dims]);
        Insert::Done
    }

    /// Calls `visit(slot, tid, words)` for every live span row (head slot ready and not marked
    /// deleted), in slot order. The caller holds the memtable, as for [`Memtable::for_each_live`].
    pub fn for_each_live_span(&self, mut visit: impl FnMut(usize, u64, &[u32])) {
        let mut words: Vec<u32> = Vec::new();
        self.for_each_live_slot(|slot, tid, head| {
            self.read_span(slot, head, &mut words);
            visit(slot, tid, &words);
        });
    }

    /// Calls `visit(slot, tid, words)` for every span row whose head slot is in `slots` and
    /// ready, deleted or not, in slot order (a backend's cache of decoded rows applies deleted
    /// bits at query time, [`Memtable::is_deleted`]). The caller holds the memtable.
    pub fn for_each_span_in(&self, slots: std::ops::Range<usize>, mut visit: impl FnMut(usize, u64, &[u32])) {
        let end = slots.end.min(self.header().filled()).min(self.layout.capacity);
        let mut words: Vec<u32> = Vec::new();
        for slot in slots.start..end {
            let ready = self.word(Bitmap::Ready, slot / 64).load(Ordering::Acquire) & (1 << (slot % 64)) != 0;
            if !ready {
                continue;
            }
            // SAFETY: the slot's ready bit was loaded set with acquire ordering, so its row is
            // completely written and not written again while the caller holds the memtable;
            // slot < capacity.
            let (tid, head) = unsafe { self.memory.read_row(self.slab, &self.layout, slot) };
            if tid != 0 {
                self.read_span(slot, head, &mut words);
                visit(slot, tid, &words);
            }
        }
    }

    /// The first slot of every row of an ABSORBING memtable of span rows, in slot order: entry
    /// `i` is list position `i`'s head slot, or the one-slot TID-0 placeholder the follower wrote
    /// for it ([`AbsorbingMemtable::insert_placeholder`](crate::slabs::AbsorbingMemtable)). Only
    /// the follower appends to such a memtable, one whole row at a time under its index's manifest
    /// lock, so every reserved slot is written and no row is cut at the capacity; the caller
    /// holds that lock or the memtable.
    pub(crate) fn span_heads(&self) -> Vec<usize> {
        let filled = self.header().filled().min(self.layout.capacity);
        let mut heads = Vec::new();
        let mut slot = 0;
        while slot < filled {
            heads.push(slot);
            // SAFETY: every slot below `filled` of an ABSORBING memtable is written (its only
            // writer finishes each row before it returns, and the caller excludes it: the
            // manifest lock or a hold), and the slab is not reused while the caller holds it;
            // slot < capacity.
            let (tid, head) = unsafe { self.memory.read_row(self.slab, &self.layout, slot) };
            slot += if tid == 0 { 1 } else { self.layout.span_slots(head[0].to_bits() as usize) };
        }
        heads
    }

    /// Whether VACUUM has marked the row in `slot` deleted. The caller holds the memtable.
    pub fn is_deleted(&self, slot: usize) -> bool {
        slot < self.layout.capacity
            && self.word(Bitmap::Deleted, slot / 64).load(Ordering::Acquire) & (1 << (slot % 64)) != 0
    }

    /// The words of the span row whose ready head slot `slot` holds `head`, into `words`.
    fn read_span(&self, slot: usize, head: &[f32], words: &mut Vec<u32>) {
        let count = head[0].to_bits() as usize;
        let span = self.layout.span_slots(count);
        assert!(slot + span <= self.layout.capacity, "span row {slot} runs past its memtable");
        words.clear();
        words.extend(head[1..].iter().map(|w| w.to_bits()));
        for continuation in slot + 1..slot + span {
            // SAFETY: the head's ready bit was loaded set with acquire ordering and the writer
            // wrote every continuation slot of the row before it released that bit, so these
            // rows are completely written; the caller's hold keeps the slab from reuse, and
            // `continuation < capacity` (asserted above).
            let (_, row) = unsafe { self.memory.read_row(self.slab, &self.layout, continuation) };
            words.extend(row.iter().map(|w| w.to_bits()));
        }
        words.truncate(count);
    }
}
