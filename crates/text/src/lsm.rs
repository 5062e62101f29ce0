//! Text segments in strata-lsm's runtime: [`TextSegment`] implements
//! [`strata_lsm::segment_type::SegmentType`], so publishing, merges, deletion bitmaps, segment
//! sets and crash recovery are the runtime's own code, shared with vector segments.
//!
//! The trait's per-segment `search` scores with the *global* statistics carried by its query
//! ([`Bm25Query`], prepared over every source by [`Bm25Query::prepare`] or from cached counts by
//! [`Bm25Query::with_stats`]), so per-segment top-k lists merged by score are the global top-k.
//! The glue's ordered scan should prefer [`crate::search`] over all sources at once: it shares
//! one threshold across sources and keeps `f64` scores.

use std::borrow::Cow;

use strata_engine::bitset::Bitset;
use strata_engine::format::SegmentFile;
use strata_engine::topk::Neighbor;
use strata_lsm::files::{FileError, IndexFiles};
use strata_lsm::manifest::IndexConfig;
use strata_lsm::segment_type::{BuildWork, MergeInput, OpenError, SegmentType};

use strata_lsm::follower::FollowedSegment;
use strata_lsm::memtable::Memtable as SlabMemtable;
use strata_lsm::recovery::SpanRow;
use strata_lsm::slabs::SlabMemory;

use crate::document::Document;
use crate::error::TextError;
use crate::memtable::Memtable;
use crate::scoring::Bm25Params;
use crate::search::search;
use crate::segment::{merge_segments, BuiltTextSegment, TextSegment};
use crate::source::Source;
use crate::stats::Bm25Query;

/// The BM25 parameters of a text index's configuration (kind
/// [`ConfigKind::Bm25`](strata_lsm::manifest::ConfigKind::Bm25), which the
/// manifest records; strata-lsm's `IndexConfig::from_bm25_options` makes it); an error for a
/// vector index's configuration.
///
/// The text search configuration is the glue's (tokenising happens before rows reach this
/// crate), so the configuration keeps only what scoring needs.
pub fn params_of(config: &IndexConfig) -> Result<Bm25Params, TextError> {
    let (k1, b) = config.bm25().ok_or(TextError::NotText(config.kind.name()))?;
    Bm25Params::new(k1, b)
}

/// The live rows of a slab memtable of a text index — span rows holding
/// [`crate::Document::to_words`] ([`strata_lsm::memtable::spans`]) — as a text [`Memtable`] in
/// slot order, for [`strata_lsm::flush::flush_rows`] and for scans; `None` when no row is live.
/// A row that does not decode is an error (the flush leaves the memtable SEALED and retries).
/// The caller holds the memtable, as for `for_each_live_span`.
pub fn slab_rows<M: SlabMemory + ?Sized>(memtable: &SlabMemtable<'_, M>) -> Result<Option<Memtable>, FileError> {
    let mut rows = Memtable::new();
    let mut failed = None;
    memtable.for_each_live_span(|_, tid, words| {
        if failed.is_some() {
            return;
        }
        if let Err(e) = Document::from_words(words).and_then(|doc| rows.insert(tid, &doc)) {
            failed = Some(e);
        }
    });
    match failed {
        Some(e) => Err(build_failed(&e)),
        None => Ok((!rows.is_empty()).then_some(rows)),
    }
}

fn build_failed(e: &TextError) -> FileError {
    FileError::Build { kind: "text", message: e.to_string() }
}

/// A follower (a standby, a restored copy) builds text segments of settled groups from the
/// documents it re-tokenises from its heap: span rows of [`Document::to_words`].
impl FollowedSegment for TextSegment {
    type Row = SpanRow;

    fn no_rows() -> Memtable {
        Memtable::new()
    }

    fn push_row(rows: &mut Memtable, _: usize, tid: u64, row: SpanRow) -> Result<(), FileError> {
        Document::from_words(&row.0).and_then(|doc| rows.insert(tid, &doc)).map(|_| ()).map_err(|e| build_failed(&e))
    }

    fn is_empty(rows: &Memtable) -> bool {
        rows.is_empty()
    }
}

impl SegmentType for TextSegment {
    type Config = IndexConfig;
    type Rows = Memtable;
    type Built = BuiltTextSegment;
    type Query = Bm25Query;
    type Params = ();

    fn open(file: SegmentFile) -> Result<Self, OpenError> {
        Ok(TextSegment::open(file)?)
    }

    fn ids(&self) -> &[u64] {
        TextSegment::ids(self)
    }

    fn build(
        _: &IndexFiles<Self>,
        _: &IndexConfig,
        rows: Memtable,
        work: &BuildWork,
    ) -> Result<BuiltTextSegment, FileError> {
        if work.cancel.is_requested() {
            return Err(FileError::Cancelled);
        }
        rows.to_segment().map_err(|e| build_failed(&e))
    }

    fn merge(_: &IndexConfig, inputs: Vec<MergeInput<Self>>, work: &BuildWork) -> Result<BuiltTextSegment, FileError> {
        if work.cancel.is_requested() {
            return Err(FileError::Cancelled);
        }
        let parts: Vec<(&TextSegment, Option<&Bitset>)> =
            inputs.iter().map(|i| (&i.segment, i.deleted.as_ref())).collect();
        merge_segments(&parts).map_err(|e| build_failed(&e))
    }

    fn sections(built: &BuiltTextSegment) -> Vec<(u32, Cow<'_, [u8]>)> {
        built.sections()
    }

    fn built_rows(built: &BuiltTextSegment) -> u64 {
        u64::from(built.rows())
    }

    /// Rows as segment row offsets; `distance` is the negative BM25 score (as `<@>` returns it),
    /// so ascending distance is best first. A bitmap of the wrong length yields no rows.
    fn search(&self, query: &Bm25Query, k: usize, (): &(), deleted: Option<&Bitset>) -> Vec<Neighbor> {
        let Ok(source) = Source::segment(self, deleted) else { return Vec::new() };
        search(&[source], query, k)
            .hits
            .iter()
            .map(|h| Neighbor { row: u64::from(h.row), distance: -(h.score as f32) })
            .collect()
    }
}
