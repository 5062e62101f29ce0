//! # strata-lsm
//!
//! The log-structured layer between PostgreSQL and the segment engine, as pure Rust:
//!
//! - [`directory`]: the `Directory` trait every file goes through, its durability contract,
//!   the crash-safe `write_file`, the real file system and a fault-injecting in-memory directory;
//! - [`explain`]: the scan and recovery counters `EXPLAIN (ANALYZE)` shows, and their lines;
//! - [`segment_type`]: the one trait the runtime needs from a kind of segment (build, merge,
//!   search, one TID per row); [`vector`]: vector segments as one;
//! - [`files`]: an index's files (segments, deletion bitmaps, manifest) and the publishing
//!   protocol; [`segment_set`]: the open segments of one manifest generation;
//! - [`flush`]: a sealed memtable into a published segment, FLUSHED in the same lock hold;
//!   [`flush_schedule`]: which memtable next, backoff and failure episodes; [`clock`]: the
//!   time background work reads (a manual clock in tests);
//! - [`settings`]: the `strata.*` parameters (names, defaults, ranges) and pgvector's names as
//!   their aliases;
//! - [`service_timing`]: how long the index service sleeps between rounds, how often it sweeps,
//!   and its shutdown deadline;
//! - [`merge`]: merges and rebuilds in three steps (prepare under the manifest lock, build on
//!   any thread, finish with deletions carried over by TID);
//! - [`merge_runner`]: one merge in flight, backoff of failing indexes, failure episodes and the
//!   bounded wait for a build at shutdown;
//! - [`vacuum`]: dead rows leave memtables (deleted bits) and segments (published bitmaps);
//! - [`garbage`]: which files of an index directory are unlisted garbage, deleted after a grace
//!   period;
//! - [`rows`]: a row's vector in stored form, and CREATE INDEX's chunks of rows;
//! - [`retry`]: exponential backoff and failure episodes for background work that fails;
//! - [`listed`]: the lock-free set of memtables the status pages may still list;
//! - [`membership`]: the status pages as the index's replicated membership log (groups of TIDs,
//!   settled by flushes, zeroed by VACUUM) and how any node derives its index from it, by position;
//!   [`follower`]: one pass of a node deriving its index (reads the log, executes the steps over
//!   slabs, heap rows and files, records the groups' generations);
//! - [`manifest`]: the durable description of an index's segment set (which segments exist, what
//!   they cover, their deletion generations), encoded as a small checksummed file;
//! - [`registry`]: registering an index in the shared directory and finding it again;
//! - [`workers`]: the per-database workers the index service launches (one per database, relaunch
//!   pause), the settlers' trigger, and which of a worker's failing keys are due;
//! - [`writer`]: a writer's active memtable (pin, allocate and register, wait, report a stuck
//!   index) and recovery's wait for free slabs, with their time limits;
//! - [`index_slot`]: one index's entry in the shared index directory (key, configuration,
//!   failure states, recovery counters) as plain shared-memory-safe data;
//! - [`page_cache`]: segment files read into the page cache in the background after a restart;
//! - [`packed_config`]: an index's configuration as fixed-layout plain data for shared memory;
//! - [`options`]: the `WITH (...)` options of a strata index, their defaults and validation,
//!   resolved into the manifest's configuration by `IndexConfig::from_options`;
//! - [`memtable`]: the lock-free append protocol of memtables (reserve a slot, write, set its
//!   ready bit; readers skip unready slots; deletion bits) over the byte layout of a slab;
//! - [`slabs`]: the slab lifecycle (free, allocating, active, sealed, flushing, flushed,
//!   recovering), writer pins, scan reader counts and every transition with its precondition,
//!   over traits for the shared region and the directory lock, tested with shuttle;
//! - [`sync`]: the atomics those two use (std's, or shuttle's in the interleaving tests);
//! - [`policy`]: when to merge small segments and rebuild segments with many deletions, as pure
//!   `choose` functions over segment statistics;
//! - [`stats`]: the rows of `strata_index_stats` and when waiting for background work reports a
//!   failure;
//! - [`status`]: the byte layout of the WAL-logged status pages (metadata, memtable array, TID
//!   catalog, TID lists, free list) as pure functions over page images, and their operations
//!   (register, append, settle, VACUUM, read for recovery and for derivation) over the
//!   `PageStore` trait pg_strata implements with buffers and GenericXLog;
//! - [`dead_rows`]: rows the executor found dead before VACUUM, skipped by later searches of
//!   the process that found them;
//! - [`scan`]: the progressive scan of ordered index scans (rounds of growing depth, heap-rerank
//!   pools, exhaustion, the tuple cap) over candidate-source and reranker traits; one round over
//!   vector segments and memtables (`scan::round`); the planner's cost of a scan;
//! - [`threads`]: helper threads created with every signal blocked, joined before an unwinding
//!   caller goes on, and the search pool;
//! - [`recovery`]: what to do after a crash, as a pure function of the recovered status pages
//!   and the segments on disk, and its execution on the files (`recovery::repair`).
//!
//! Nothing here touches PostgreSQL; everything is tested with `cargo test`.

pub mod build_rows;
pub mod clock;
pub mod config_kind;
pub mod dead_rows;
pub mod directory;
pub mod explain;
pub mod files;
pub mod flush;
pub mod flush_schedule;
pub mod follower;
pub mod garbage;
pub mod index_slot;
pub mod listed;
pub mod manifest;
pub mod membership;
pub mod memtable;
pub mod merge;
pub mod merge_runner;
pub mod options;
pub mod packed_config;
pub mod page_cache;
pub mod policy;
pub mod recovery;
pub mod registry;
pub mod retry;
pub mod rows;
pub mod scan;
pub mod segment_set;
pub mod segment_type;
pub mod service_timing;
pub mod settings;
pub mod stats;
pub mod status;
pub mod text_options;
pub mod vector;
pub mod workers;

// The memtable protocol and the slab lifecycle (`memtable` above holds the protocol too).
pub mod slabs;
pub mod sync;
pub mod threads;
pub mod vacuum;
pub mod writer;

#[cfg(all(test, feature = "shuttle"))]
mod runtime_model;
