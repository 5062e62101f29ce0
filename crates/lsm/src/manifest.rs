//! The manifest: the durable list of an index's segments.
//!
//! One manifest per index, in the index's directory, stored as a one-section segment-format file
//! (so it is checksummed and written crash-safely: temp file, fsync, rename, fsync directory).
//! The section holds JSON (small, human-readable with `jq`, versioned by `format`).
//!
//! Invariants:
//! - every segment listed exists on disk as `{id}.seg` and its deletion bitmap, when
//!   `deletion_generation > 0`, as `{id}.del.{deletion_generation}`;
//! - files not listed (left over from a crash between writing a file and publishing the manifest,
//!   or superseded by a newer generation) are garbage and may be deleted;
//! - `generation` increases with every published change, so readers can cache by it.

use serde::{Deserialize, Serialize};
use strata_engine::filter::FilterSchema;
use strata_engine::format::FormatError;
use strata_engine::metric::Metric;
use strata_engine::segment::IndexKind;
use strata_engine::store::ElementKind;
use thiserror::Error;

pub use crate::config_kind::ConfigKind;
use crate::directory::{read_file, write_file, Directory};

/// The manifest format this code writes.
pub const MANIFEST_FORMAT: u32 = 1;
/// File name of the manifest inside an index directory.
pub const MANIFEST_FILE: &str = "manifest";
/// Section tag of the manifest JSON.
pub const TAG_MANIFEST: u32 = 0x4D41_4E31;

/// Errors reading or writing a manifest.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// The container is damaged or unreadable.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The JSON does not describe a manifest.
    #[error("manifest is not valid: {0}")]
    Invalid(String),
}

impl ManifestError {
    /// Whether a store renamed the new manifest into place but could not sync its directory
    /// ([`FormatError::Unsynced`]): every reader sees the new manifest, which may not be durable.
    pub fn is_unsynced(&self) -> bool {
        matches!(self, Self::Format(FormatError::Unsynced { .. }))
    }
}

/// How an index is configured (fixed at CREATE INDEX; see [`IndexConfig::from_options`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexConfig {
    /// Dimensions of every vector.
    pub dims: u32,
    /// The distance metric (`l2`, `ip` or `cosine` in the JSON).
    pub metric: Metric,
    /// Stored element type (`f32` or `f16`).
    pub element: ElementKind,
    /// Segment kind and its parameters: a vector kind (IVF `lists = 0` means "about √rows,
    /// chosen per segment", see [`IndexConfig::index_kind`]) or BM25 text segments.
    pub kind: ConfigKind,
    /// Vectors per memtable.
    pub memtable_rows: u32,
    /// Whether segments leave their vectors out and scans compute exact distances from the
    /// table's rows (IVF only; absent in manifests written before the option existed).
    #[serde(default)]
    pub rerank_from_heap: bool,
    /// The filter columns: the index's key columns after the vector, whose values memtable rows
    /// and segments keep so that scans filter before computing distances (absent in manifests of
    /// indexes without them, and in those written before they existed).
    #[serde(default, skip_serializing_if = "FilterSchema::is_empty")]
    pub filters: FilterSchema,
}

impl IndexConfig {
    /// Words of one memtable row: the stored vector (`dims` `f32`s) followed by the encoded filter
    /// values ([`FilterSchema::row_words`], as `f32` bit patterns).
    pub fn row_words(&self) -> usize {
        self.dims as usize + self.filters.row_words()
    }

    /// The engine index kind of a vector index ([`ConfigKind::vector`]).
    ///
    /// # Panics
    /// For a text index, which builds no vector segments (its callers are vector paths only).
    pub fn vector_kind(&self) -> IndexKind {
        self.kind.vector().expect("a vector index")
    }

    /// The engine index kind for a vector segment of `rows` rows (IVF lists default to about
    /// √rows).
    ///
    /// # Panics
    /// For a text index, as [`IndexConfig::vector_kind`].
    pub fn index_kind(&self, rows: usize) -> IndexKind {
        match self.vector_kind() {
            IndexKind::Ivf { lists, bits } => {
                let lists = if lists == 0 { ((rows as f64).sqrt().round() as u32).max(1) } else { lists };
                IndexKind::Ivf { lists: lists.min(rows.max(1) as u32), bits }
            }
            other => other,
        }
    }
}

/// File name of segment `id` in its index directory.
pub fn segment_file_name(id: u64) -> String {
    format!("{id}.seg")
}

/// File name of generation `generation` of segment `id`'s deletion bitmap.
pub fn deletion_file_name(id: u64, generation: u64) -> String {
    format!("{id}.del.{generation}")
}

/// A file name that [`segment_file_name`] or [`deletion_file_name`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexFileName {
    /// `{id}.seg`.
    Segment {
        /// The segment's id.
        id: u64,
    },
    /// `{id}.del.{generation}`.
    Deletions {
        /// The segment's id.
        id: u64,
        /// The bitmap's generation.
        generation: u64,
    },
}

impl IndexFileName {
    /// Parses `name`; `None` for any other name (the manifest, temporary files, foreign files).
    pub fn parse(name: &str) -> Option<Self> {
        let (id, rest) = name.split_once('.')?;
        let id = id.parse::<u64>().ok()?;
        if rest == "seg" {
            return Some(Self::Segment { id });
        }
        let generation = rest.strip_prefix("del.")?.parse::<u64>().ok()?;
        Some(Self::Deletions { id, generation })
    }

    /// The id of the segment the file belongs to.
    pub fn segment_id(self) -> u64 {
        match self {
            Self::Segment { id } | Self::Deletions { id, .. } => id,
        }
    }
}

/// One published segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    /// The segment's id (its file is `{id}.seg`). A segment flushed from one memtable takes the
    /// memtable's SegmentID; a merged segment takes a fresh id.
    pub id: u64,
    /// The memtable SegmentIDs whose rows this segment holds.
    pub covers: Vec<u64>,
    /// Rows in the segment file.
    pub rows: u64,
    /// Rows marked deleted in its current deletion bitmap.
    pub deleted: u64,
    /// Generation of its deletion bitmap file (0: none, nothing deleted).
    pub deletion_generation: u64,
    /// Size of the segment file in bytes.
    pub bytes: u64,
}

impl SegmentEntry {
    /// File name of the segment.
    pub fn file_name(&self) -> String {
        segment_file_name(self.id)
    }

    /// File name of the current deletion bitmap, if any.
    pub fn deletion_file_name(&self) -> Option<String> {
        (self.deletion_generation > 0).then(|| deletion_file_name(self.id, self.deletion_generation))
    }

    /// Fraction of rows deleted.
    pub fn deleted_fraction(&self) -> f64 {
        if self.rows == 0 {
            0.0
        } else {
            self.deleted as f64 / self.rows as f64
        }
    }
}

/// The configuration a manifest records for its index (fixed at CREATE INDEX), validated when
/// a manifest is read. Each segment type has its own ([`crate::segment_type::SegmentType::Config`]).
pub trait ManifestConfig: Copy + std::fmt::Debug + PartialEq + Serialize + serde::de::DeserializeOwned {
    /// Why this configuration cannot be an index's (`Err` text), checked on every read.
    fn validate(&self) -> Result<(), String>;
}

impl ManifestConfig for IndexConfig {
    fn validate(&self) -> Result<(), String> {
        if self.dims == 0 || self.dims as usize > strata_engine::MAX_DIMENSIONS {
            return Err(format!("invalid dimensions {}", self.dims));
        }
        Ok(())
    }
}

/// The durable state of one index's segment set; `C` is its segment type's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest<C = IndexConfig> {
    /// Format version ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// Increases with every published change.
    pub generation: u64,
    /// Index configuration.
    pub config: C,
    /// The next id to hand out to a memtable or merged segment (ids are never reused).
    pub next_id: u64,
    /// Published segments, oldest first.
    pub segments: Vec<SegmentEntry>,
    /// On a node that derives its index from the membership log (a standby): per group it holds,
    /// the `vacuum_gen` its rows reflect (`strata_lsm::membership`). Empty on a primary.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub group_generations: std::collections::BTreeMap<u64, u64>,
}

impl<C: ManifestConfig> Manifest<C> {
    /// An empty manifest for a new index.
    pub fn new(config: C) -> Self {
        Self {
            format: MANIFEST_FORMAT,
            generation: 1,
            config,
            next_id: 1,
            segments: Vec::new(),
            group_generations: std::collections::BTreeMap::new(),
        }
    }

    /// Serialises to JSON bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a manifest always serialises")
    }

    /// Parses and validates JSON bytes.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ManifestError> {
        let manifest: Self = serde_json::from_slice(bytes).map_err(|e| ManifestError::Invalid(e.to_string()))?;
        manifest.validate()?;
        Ok(manifest)
    }

    fn validate(&self) -> Result<(), ManifestError> {
        if self.format != MANIFEST_FORMAT {
            return Err(ManifestError::Invalid(format!("unsupported manifest format {}", self.format)));
        }
        self.config.validate().map_err(ManifestError::Invalid)?;
        let mut ids: Vec<u64> = self.segments.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err(ManifestError::Invalid("duplicate segment id".into()));
        }
        if let Some(bad) = self.segments.iter().find(|s| s.id >= self.next_id || s.deleted > s.rows) {
            return Err(ManifestError::Invalid(format!("inconsistent segment entry {}", bad.id)));
        }
        if self.segments.iter().try_fold(0u64, |total, s| total.checked_add(s.rows)).is_none() {
            return Err(ManifestError::Invalid("the segments' row counts overflow".into()));
        }
        Ok(())
    }

    /// Reads the manifest of `dir`; `Ok(None)` when the index has no manifest yet.
    pub fn load(dir: &dyn Directory) -> Result<Option<Self>, ManifestError> {
        let exists = dir
            .exists(MANIFEST_FILE)
            .map_err(|source| FormatError::Io { path: dir.describe(MANIFEST_FILE), source })?;
        if !exists {
            return Ok(None);
        }
        let file = read_file(dir, MANIFEST_FILE, true)?;
        Ok(Some(Self::from_json(file.require(TAG_MANIFEST)?)?))
    }

    /// Writes the manifest of `dir` crash-safely ([`write_file`]).
    pub fn store(&self, dir: &dyn Directory) -> Result<(), ManifestError> {
        write_file(dir, MANIFEST_FILE, &[(TAG_MANIFEST, &self.to_json())])?;
        Ok(())
    }

    /// Total live rows (rows minus deleted) across segments. Exact for a manifest that passed
    /// validation (every one read from disk: its rows sum within `u64` and no segment has more
    /// deleted rows than rows); saturates otherwise instead of overflowing.
    pub fn live_rows(&self) -> u64 {
        self.segments.iter().fold(0u64, |total, s| total.saturating_add(s.rows.saturating_sub(s.deleted)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> IndexConfig {
        IndexConfig {
            dims: 384,
            metric: Metric::Cosine,
            element: ElementKind::F32,
            kind: IndexKind::Hnsw { m: 16, ef_construction: 64 }.into(),
            memtable_rows: 10_000,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        }
    }

    #[test]
    fn round_trips_on_disk() {
        let path = std::env::temp_dir().join(format!("strata-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&path).unwrap();
        let dir = crate::directory::fs::FsDirectory::new(&path);
        assert!(Manifest::<IndexConfig>::load(&dir).unwrap().is_none());
        let mut manifest = Manifest::new(config());
        manifest.next_id = 5;
        manifest.segments.push(SegmentEntry {
            id: 3,
            covers: vec![3],
            rows: 100,
            deleted: 7,
            deletion_generation: 2,
            bytes: 4096,
        });
        manifest.store(&dir).unwrap();
        assert_eq!(Manifest::<IndexConfig>::load(&dir).unwrap().unwrap(), manifest);
        assert_eq!(manifest.live_rows(), 93);
        assert_eq!(manifest.segments[0].file_name(), "3.seg");
        assert_eq!(manifest.segments[0].deletion_file_name().unwrap(), "3.del.2");
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn rejects_inconsistent_manifests() {
        let mut manifest = Manifest::new(config());
        manifest.segments.push(SegmentEntry {
            id: 3,
            covers: vec![3],
            rows: 1,
            deleted: 0,
            deletion_generation: 0,
            bytes: 1,
        });
        assert!(Manifest::<IndexConfig>::from_json(&manifest.to_json()).is_err(), "id beyond next_id");
        manifest.next_id = 4;
        assert!(Manifest::<IndexConfig>::from_json(&manifest.to_json()).is_ok());
        manifest.segments.push(manifest.segments[0].clone());
        assert!(Manifest::<IndexConfig>::from_json(&manifest.to_json()).is_err(), "duplicate id");
        assert!(Manifest::<IndexConfig>::from_json(b"{not json").is_err());
    }

    #[test]
    fn rejects_row_counts_that_overflow_and_counts_live_rows_without_overflowing() {
        let mut manifest = Manifest::new(config());
        manifest.next_id = 9;
        for id in [3, 4] {
            manifest.segments.push(SegmentEntry {
                id,
                covers: vec![id],
                rows: u64::MAX / 2 + 1,
                deleted: 0,
                deletion_generation: 0,
                bytes: 1,
            });
        }
        let error = Manifest::<IndexConfig>::from_json(&manifest.to_json()).unwrap_err();
        assert!(error.to_string().contains("overflow"), "{error}");
        assert_eq!(manifest.live_rows(), u64::MAX, "saturates on a manifest that skipped validation");
        manifest.segments[1].rows = u64::MAX / 2;
        assert_eq!(Manifest::<IndexConfig>::from_json(&manifest.to_json()).unwrap().live_rows(), u64::MAX);
    }

    #[test]
    fn ivf_lists_default_to_square_root() {
        let mut c = config();
        c.kind = IndexKind::Ivf { lists: 0, bits: 4 }.into();
        assert_eq!(c.index_kind(10_000), IndexKind::Ivf { lists: 100, bits: 4 });
        assert_eq!(c.index_kind(3), IndexKind::Ivf { lists: 2, bits: 4 });
    }

    /// A manifest exactly as pg_strata wrote it (an IVF index with `rerank = 'heap'` and
    /// `lists = 0`, taken from a test cluster, shortened to two segments) parses and serialises
    /// back to the same bytes.
    const REAL_MANIFEST: &str = r#"{
  "format": 1,
  "generation": 203,
  "config": {
    "dims": 16,
    "metric": "l2",
    "element": "f32",
    "kind": {
      "kind": "ivf",
      "lists": 0,
      "bits": 4
    },
    "memtable_rows": 64,
    "rerank_from_heap": true
  },
  "next_id": 259,
  "segments": [
    {
      "id": 1,
      "covers": [],
      "rows": 2000,
      "deleted": 615,
      "deletion_generation": 1,
      "bytes": 58368
    },
    {
      "id": 5,
      "covers": [
        2
      ],
      "rows": 64,
      "deleted": 0,
      "deletion_generation": 0,
      "bytes": 2688
    }
  ]
}"#;

    #[test]
    fn reads_and_writes_todays_json() {
        let manifest = Manifest::<IndexConfig>::from_json(REAL_MANIFEST.as_bytes()).unwrap();
        assert_eq!(
            manifest.config,
            IndexConfig {
                dims: 16,
                metric: Metric::L2,
                element: ElementKind::F32,
                kind: IndexKind::Ivf { lists: 0, bits: 4 }.into(),
                memtable_rows: 64,
                rerank_from_heap: true,
                filters: strata_engine::filter::FilterSchema::default(),
            }
        );
        assert_eq!(manifest.segments[1].covers, [2]);
        assert_eq!(String::from_utf8(manifest.to_json()).unwrap(), REAL_MANIFEST);
    }

    #[test]
    fn config_json_names_every_metric_element_and_kind() {
        fn json<T: Serialize>(value: &T) -> String {
            serde_json::to_string(value).unwrap()
        }
        for (metric, name) in [(Metric::L2, "l2"), (Metric::InnerProduct, "ip"), (Metric::Cosine, "cosine")] {
            assert_eq!(json(&metric), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<Metric>(&json(&metric)).unwrap(), metric);
        }
        for (element, name) in [(ElementKind::F32, "f32"), (ElementKind::F16, "f16")] {
            assert_eq!(json(&element), format!("\"{name}\""));
            assert_eq!(serde_json::from_str::<ElementKind>(&json(&element)).unwrap(), element);
        }
        for (kind, text) in [
            (IndexKind::Flat, r#"{"kind":"flat"}"#),
            (IndexKind::QuantizedFlat { bits: 4 }, r#"{"kind":"quantized_flat","bits":4}"#),
            (IndexKind::Ivf { lists: 0, bits: 4 }, r#"{"kind":"ivf","lists":0,"bits":4}"#),
            (IndexKind::Hnsw { m: 16, ef_construction: 64 }, r#"{"kind":"hnsw","m":16,"ef_construction":64}"#),
        ] {
            assert_eq!(json(&kind), text);
            assert_eq!(serde_json::from_str::<IndexKind>(text).unwrap(), kind);
        }
        // Manifests written before `rerank` existed have no rerank_from_heap.
        let old = r#"{"dims":3,"metric":"cosine","element":"f16","kind":{"kind":"flat"},"memtable_rows":200}"#;
        let config: IndexConfig = serde_json::from_str(old).unwrap();
        assert_eq!((config.metric, config.element, config.rerank_from_heap), (Metric::Cosine, ElementKind::F16, false));
    }

    #[test]
    fn file_names_parse_back() {
        assert_eq!(segment_file_name(12), "12.seg");
        assert_eq!(deletion_file_name(12, 3), "12.del.3");
        assert_eq!(IndexFileName::parse("12.seg"), Some(IndexFileName::Segment { id: 12 }));
        assert_eq!(IndexFileName::parse("12.del.3"), Some(IndexFileName::Deletions { id: 12, generation: 3 }));
        assert_eq!(IndexFileName::parse("12.del.3").map(IndexFileName::segment_id), Some(12));
        for other in [MANIFEST_FILE, "12.seg.tmp", "x.seg", "12.del.x", "12.del.", "12", "12.segx", ".seg"] {
            assert_eq!(IndexFileName::parse(other), None, "{other}");
        }
    }
}
