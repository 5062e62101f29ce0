//! strata-text: pg_strata's BM25 text engine, pure Rust (no PostgreSQL dependency).
//!
//! Rows arrive tokenised — the glue runs `to_tsvector` and hands over each row's lexemes with
//! their term frequencies as a [`Document`] keyed by a `u64` id (a heap TID). They enter an
//! append-only [`Memtable`]; a flush turns a memtable into an immutable [`TextSegment`]
//! ([`Memtable::to_segment`]); segments are merged with their deletion bitmaps applied
//! ([`merge_segments`]). A query is prepared against **global** statistics over every source
//! ([`Bm25Query::prepare`]) and answered by Block-Max WAND ([`search`]), which returns exactly
//! the hits of exhaustive scoring ([`search_exhaustive`]). [`TextSegment`] implements
//! strata-lsm's `SegmentType` ([`lsm`]), so text indexes use the same LSM runtime as vector
//! indexes.
//!
//! # Scoring
//!
//! Pinned to issue 17 (see [`scoring`]): `tf` = the lexeme's occurrences in the row, `dl` =
//! the row's total lexeme occurrences, `N` and `avgdl` over live rows of all sources, `df` =
//! live rows holding the lexeme,
//! `IDF = ln(1 + (N − df + 0.5)/(df + 0.5))`,
//! `score = Σ over distinct query lexemes of IDF · tf · (k1+1) / (tf + k1·(1 − b + b·dl/avgdl))`.
//!
//! Deleted rows (a segment's or memtable's deletion bitmap) are never returned and count in
//! neither `N`, `avgdl` nor `df`: a source subtracts its deleted rows and their lengths
//! (computed once per [`Source`], O(deleted rows)), and a lexeme's `df` is corrected exactly by
//! counting the deleted rows in its postings at query time — probing the list for each deleted
//! row when there are fewer deleted rows than postings, else walking the list against the
//! bitmap ([`Source::live_df`]).
//!
//! # Text segment byte layout
//!
//! A text segment is a file of strata-engine's container (`STRATSEG`: versioned header,
//! section table, 64-byte aligned sections each with a CRC-32; see `docs/segment-format.md`).
//! All integers little-endian. Sections, in file order:
//!
//! ```text
//! tag          name      content
//! 0x5458_0001  META      64 bytes: u32 layout version (1), u32 block length (128), u64 rows,
//!                        u64 total length Σdl, u64 terms, u64 postings Σdf, u64 blocks,
//!                        16 reserved zero bytes
//! 0x5458_0002  IDS       u64 per row: the caller's id (heap TID)
//! 0x5458_0003  LENS      u32 per row: dl
//! 0x5458_0004  TERMS     fst map (the `fst` crate's format): lexeme bytes → term ordinal,
//!                        ordinals 0.. in lexeme byte order
//! 0x5458_0005  TERMINFO  24 bytes per term ordinal: u32 df, u32 first block (index into
//!                        SKIPS), u64 offset of its first byte in POSTINGS, u64 its byte length
//! 0x5458_0006  SKIPS     44 bytes per block, each term's blocks contiguous:
//!                        u32 last row, u32 offset of the block from its term's first byte,
//!                        u8 row bits, u8 tf bits, u8 bound points P (1..=4), 1 reserved zero
//!                        byte, then 4 × (u32 tf, u32 dl) bound points (the first P in use,
//!                        strictly increasing in both; the rest zero)
//! 0x5458_0007  POSTINGS  each term's blocks in order, terms in ordinal order. A term's postings
//!                        are cut into blocks of 128 (the last one may be shorter):
//!                        full block: 128 row deltas bit-packed with `bitpacking`'s BitPacker4x
//!                          (`compress_sorted`, initial value = previous block's last row, 0 for
//!                          the first block; 16·row_bits bytes), then 128 values tf−1 packed
//!                          with `compress` (16·tf_bits bytes);
//!                        short last block: LEB128 row deltas (same initial value), then LEB128
//!                          tf−1 values
//! ```
//!
//! Block metadata stores `(tf, dl)` points, not a score: every posting of the block is
//! dominated by a point (`tf ≥`, `dl ≤`), and the bound — the largest
//! `IDF · tf · (k1+1) / (tf + k1·(1 − b + b·dl/avgdl))` over the points — is computed at query
//! time, so it stays valid when `avgdl`, `N` or `df` change with inserts and deletions anywhere
//! in the index. The points are the block's Pareto frontier capped at four by merging
//! neighbours into their corner ([`postings::BlockMax`]); a single point would be the classic
//! (max `tf`, min `dl`) corner, which is loose when a block mixes short and long rows. Opening a segment validates every section size, the dictionary, each term
//! record and skip entry (reading metadata only; no posting block is decoded until a query
//! lands in it); with section checksums verified ([`TextSegment::from_bytes`]) any damaged byte
//! is a typed [`TextError`].
//!
//! Design credits: the block layout (128-posting bit-packed blocks, variable-length tail
//! blocks, skip entries with block-max metadata) follows tantivy (MIT) and its `bitpacking`
//! crate; the term dictionary uses the `fst` crate. No code is copied from either.

pub mod build_chunks;
pub mod document;
pub mod error;
pub mod global;
pub mod lsm;
pub mod memtable;
pub mod postings;
pub mod ranked_scan;
pub mod scoring;
pub mod search;
pub mod segment;
pub mod slab_cache;
pub mod source;
pub mod stats;

pub use build_chunks::TextChunks;
pub use document::Document;
pub use error::TextError;
pub use global::GlobalStats;
pub use lsm::params_of;
pub use memtable::Memtable;
pub use ranked_scan::RankedScan;
pub use scoring::Bm25Params;
pub use search::{search, search_exhaustive, Hit, SearchResult, SearchStats};
pub use segment::{build_segment, merge_segments, BuiltTextSegment, TextSegment};
pub use source::Source;
pub use stats::{Bm25Query, CollectionStats, QueryTerm};
