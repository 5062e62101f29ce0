//! What an index's segments are ([`ConfigKind`]): vector segments of one engine kind
//! ([`IndexKind`], which knows nothing of text), or BM25 text segments (strata-text).
//!
//! The stored forms are those of the time when the engine's kind had a BM25 variant, so every
//! manifest and shared-memory directory written then still reads:
//!
//! - in a manifest (JSON), the engine kind's object (`{"kind":"hnsw","m":16,…}`), or
//!   `{"kind":"bm25","k1_milli":1200,"b_milli":750}`;
//! - as plain numbers (shared memory, [`crate::packed_config`]), the engine's [`KindParts`] with
//!   code [`BM25_CODE`] (4, the byte after the engine's codes) for BM25, `a` = k1 × 1000 and
//!   `b` = b × 1000.

use serde::{Deserialize, Serialize};
use strata_engine::segment::{IndexKind, KindCode, KindParts};
use strata_engine::UnknownCode;

/// The kind code byte of a BM25 index in [`ConfigKind::parts`]' stored form.
pub const BM25_CODE: u8 = 4;

/// What an index's segments are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "Stored", into = "Stored")]
pub enum ConfigKind {
    /// Vector segments of this engine kind.
    Vector(IndexKind),
    /// BM25 text segments: the scoring parameters in thousandths, so that they are exact in
    /// every stored form (`k1 = 1.2` is 1200).
    Bm25 {
        /// BM25 `k1` × 1000.
        k1_milli: u32,
        /// BM25 `b` × 1000.
        b_milli: u32,
    },
}

impl From<IndexKind> for ConfigKind {
    fn from(kind: IndexKind) -> Self {
        Self::Vector(kind)
    }
}

impl ConfigKind {
    /// The engine kind of a vector index; `None` for a text index.
    pub fn vector(&self) -> Option<IndexKind> {
        match *self {
            Self::Vector(kind) => Some(kind),
            Self::Bm25 { .. } => None,
        }
    }

    /// Whether the index holds text segments.
    pub fn is_text(&self) -> bool {
        matches!(self, Self::Bm25 { .. })
    }

    /// The name used in manifests and reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Vector(kind) => kind.name(),
            Self::Bm25 { .. } => "bm25",
        }
    }

    /// The kind as plain numbers: its code byte and parameters ([`ConfigKind::from_parts`]
    /// reverses it).
    pub fn parts(&self) -> (u8, u8, u32, u32) {
        match *self {
            Self::Vector(kind) => {
                let KindParts { code, bits, a, b } = kind.parts();
                (code as u8, bits, a, b)
            }
            Self::Bm25 { k1_milli, b_milli } => (BM25_CODE, 0, k1_milli, b_milli),
        }
    }

    /// The kind [`ConfigKind::parts`] described (numbers the kind does not use are ignored).
    /// An error for a code that names no kind.
    pub fn from_parts(code: u8, bits: u8, a: u32, b: u32) -> Result<Self, UnknownCode> {
        if code == BM25_CODE {
            return Ok(Self::Bm25 { k1_milli: a, b_milli: b });
        }
        let code = KindCode::try_from(code)?;
        Ok(Self::Vector(IndexKind::from_parts(KindParts { code, bits, a, b })))
    }
}

/// The stored (JSON) form: the engine kind's own object, or the BM25 object.
#[derive(Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Stored {
    Vector(IndexKind),
    Text(TextStored),
}

/// `{"kind":"bm25","k1_milli":…,"b_milli":…}`.
#[derive(Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum TextStored {
    Bm25 { k1_milli: u32, b_milli: u32 },
}

impl From<Stored> for ConfigKind {
    fn from(stored: Stored) -> Self {
        match stored {
            Stored::Vector(kind) => Self::Vector(kind),
            Stored::Text(TextStored::Bm25 { k1_milli, b_milli }) => Self::Bm25 { k1_milli, b_milli },
        }
    }
}

impl From<ConfigKind> for Stored {
    fn from(kind: ConfigKind) -> Self {
        match kind {
            ConfigKind::Vector(kind) => Self::Vector(kind),
            ConfigKind::Bm25 { k1_milli, b_milli } => Self::Text(TextStored::Bm25 { k1_milli, b_milli }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of every kind is what manifests written before the split hold, byte for byte,
    /// and reads back as the same kind.
    #[test]
    fn stored_json_is_unchanged_and_round_trips() {
        let cases = [
            (ConfigKind::Vector(IndexKind::Flat), r#"{"kind":"flat"}"#),
            (ConfigKind::Vector(IndexKind::QuantizedFlat { bits: 4 }), r#"{"kind":"quantized_flat","bits":4}"#),
            (ConfigKind::Vector(IndexKind::Ivf { lists: 0, bits: 4 }), r#"{"kind":"ivf","lists":0,"bits":4}"#),
            (
                ConfigKind::Vector(IndexKind::Hnsw { m: 16, ef_construction: 64 }),
                r#"{"kind":"hnsw","m":16,"ef_construction":64}"#,
            ),
            (ConfigKind::Bm25 { k1_milli: 1200, b_milli: 750 }, r#"{"kind":"bm25","k1_milli":1200,"b_milli":750}"#),
        ];
        for (kind, json) in cases {
            assert_eq!(serde_json::to_string(&kind).unwrap(), json);
            assert_eq!(serde_json::from_str::<ConfigKind>(json).unwrap(), kind, "{json}");
        }
        assert!(serde_json::from_str::<ConfigKind>(r#"{"kind":"lsh"}"#).is_err());
        assert!(serde_json::from_str::<ConfigKind>(r#"{"kind":"bm25","k1_milli":1200}"#).is_err());
    }

    /// The plain numbers keep the engine's codes for vector kinds and code 4 for BM25.
    #[test]
    fn parts_round_trip_with_bm25_as_code_4() {
        let kinds = [
            ConfigKind::Vector(IndexKind::Flat),
            ConfigKind::Vector(IndexKind::QuantizedFlat { bits: 2 }),
            ConfigKind::Vector(IndexKind::Ivf { lists: 7, bits: 1 }),
            ConfigKind::Vector(IndexKind::Hnsw { m: 12, ef_construction: 80 }),
            ConfigKind::Bm25 { k1_milli: 900, b_milli: 400 },
        ];
        for kind in kinds {
            let (code, bits, a, b) = kind.parts();
            assert_eq!(ConfigKind::from_parts(code, bits, a, b), Ok(kind));
        }
        assert_eq!(ConfigKind::Bm25 { k1_milli: 900, b_milli: 400 }.parts(), (4, 0, 900, 400));
        assert_eq!(ConfigKind::Vector(IndexKind::Hnsw { m: 12, ef_construction: 80 }).parts(), (3, 0, 12, 80));
        assert_eq!(ConfigKind::from_parts(5, 0, 0, 0).unwrap_err().to_string(), "unknown segment kind 5");
    }
}
