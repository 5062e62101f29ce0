//! The `META` section: what a segment holds and how it was built.
//!
//! Layout (64 bytes, little-endian):
//!
//! ```text
//! offset size field
//!      0    1 kind: 0 flat, 1 quantized flat, 2 IVF, 3 HNSW (4, BM25, names text indexes,
//!               whose segments have their own META; a vector segment never holds it)
//!      1    1 metric: 0 L2, 1 inner product, 2 cosine, 3 L1, 4 Hamming, 5 Jaccard
//!      2    1 element type of the VECTORS section: 0 f32, 1 f16, 2 packed sparse rows (flat
//!               and HNSW only), 3 packed bit rows (flat, IVF and HNSW; Hamming or Jaccard)
//!      3    1 bits per dimension of quantized codes (0 when not quantized, as in IVF segments
//!               of packed bit rows)
//!      4    4 dimensions (u32)
//!      8    8 rows (u64)
//!     16    4 kind parameter A: IVF lists, HNSW M (u32; 0 otherwise)
//!     20    4 kind parameter B: HNSW ef_construction (u32; 0 otherwise)
//!     24    8 build seed (u64)
//!     32    1 flags: bit 0 = no VECTORS section (the caller holds the exact vectors; the
//!               segment answers with estimated distances), other bits zero
//!     33   31 reserved, zero
//! ```
//!
//! The kind, metric and element bytes are the discriminants of [`KindCode`], [`Metric`] and
//! [`ElementKind`].

use serde::{Deserialize, Serialize};

use crate::metric::Metric;
use crate::store::ElementKind;

/// Bytes in the META section.
pub const META_BYTES: usize = 64;

/// The index kind of a vector segment, with its build parameters (text indexes are
/// strata-lsm's `ConfigKind::Bm25`; code 4 is theirs wherever kinds are stored as bytes).
///
/// Its serde form is the one manifests use: `{"kind":"flat"}`, `{"kind":"quantized_flat","bits":4}`,
/// `{"kind":"ivf","lists":0,"bits":4}`, `{"kind":"hnsw","m":16,"ef_construction":64}`. In a
/// manifest, IVF `lists = 0` means "about √rows, chosen per segment"; a segment's META always
/// holds the lists it was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum IndexKind {
    /// Exact scan over the stored vectors.
    Flat,
    /// Scan over quantized codes, then exact rerank.
    QuantizedFlat {
        /// Bits per dimension (1, 2 or 4).
        bits: u8,
    },
    /// Inverted file: k-means lists of quantized codes, exact rerank.
    Ivf {
        /// Number of lists (clusters).
        lists: u32,
        /// Bits per dimension of the codes.
        bits: u8,
    },
    /// Hierarchical navigable small-world graph.
    Hnsw {
        /// Neighbours per node on upper layers (2·M on layer 0).
        m: u32,
        /// Candidate list size while building.
        ef_construction: u32,
    },
}

/// The kind of an [`IndexKind`] without its parameters. The discriminant is the kind's code
/// wherever it is stored as a byte (a segment's META section, shared memory, the fuzz targets'
/// structured form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum KindCode {
    /// [`IndexKind::Flat`].
    Flat = 0,
    /// [`IndexKind::QuantizedFlat`].
    QuantizedFlat = 1,
    /// [`IndexKind::Ivf`].
    Ivf = 2,
    /// [`IndexKind::Hnsw`].
    Hnsw = 3,
}

crate::try_from_code!(KindCode, "segment kind");

impl KindCode {
    /// Every kind, in code order.
    pub const ALL: [KindCode; 4] = [KindCode::Flat, KindCode::QuantizedFlat, KindCode::Ivf, KindCode::Hnsw];

    /// The name used in manifests and reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Flat => "flat",
            Self::QuantizedFlat => "quantized_flat",
            Self::Ivf => "ivf",
            Self::Hnsw => "hnsw",
        }
    }
}

/// An [`IndexKind`] as the plain numbers META (and shared memory) store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KindParts {
    /// The kind.
    pub code: KindCode,
    /// Bits per dimension of quantized codes (0 when not quantized).
    pub bits: u8,
    /// Parameter A: IVF lists, HNSW M (0 otherwise).
    pub a: u32,
    /// Parameter B: HNSW ef_construction (0 otherwise).
    pub b: u32,
}

impl IndexKind {
    /// The kind without its parameters.
    pub fn code(&self) -> KindCode {
        match self {
            Self::Flat => KindCode::Flat,
            Self::QuantizedFlat { .. } => KindCode::QuantizedFlat,
            Self::Ivf { .. } => KindCode::Ivf,
            Self::Hnsw { .. } => KindCode::Hnsw,
        }
    }

    /// The name used in manifests and reports.
    pub fn name(&self) -> &'static str {
        self.code().name()
    }

    /// The kind as plain numbers ([`IndexKind::from_parts`] reverses it).
    pub fn parts(&self) -> KindParts {
        let code = self.code();
        let (bits, a, b) = match *self {
            Self::Flat => (0, 0, 0),
            Self::QuantizedFlat { bits } => (bits, 0, 0),
            Self::Ivf { lists, bits } => (bits, lists, 0),
            Self::Hnsw { m, ef_construction } => (0, m, ef_construction),
        };
        KindParts { code, bits, a, b }
    }

    /// The kind [`IndexKind::parts`] described (numbers the kind does not use are ignored).
    pub fn from_parts(parts: KindParts) -> Self {
        let KindParts { code, bits, a, b } = parts;
        match code {
            KindCode::Flat => Self::Flat,
            KindCode::QuantizedFlat => Self::QuantizedFlat { bits },
            KindCode::Ivf => Self::Ivf { lists: a, bits },
            KindCode::Hnsw => Self::Hnsw { m: a, ef_construction: b },
        }
    }
}

/// Everything in the META section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentMeta {
    /// The index kind and its parameters.
    pub kind: IndexKind,
    /// The distance metric.
    pub metric: Metric,
    /// The element type of stored vectors.
    pub element: ElementKind,
    /// Dimensions per vector.
    pub dims: u32,
    /// Rows (vectors) in the segment.
    pub rows: u64,
    /// The seed the build used (rotations, k-means, graph levels).
    pub seed: u64,
    /// Whether the file holds the VECTORS section. Without it (IVF only) searches return
    /// estimated distances and the caller computes exact ones from its own copy of the vectors.
    pub vectors_stored: bool,
}

/// META flag: the segment has no VECTORS section.
const FLAG_NO_VECTORS: u8 = 1;

impl SegmentMeta {
    /// Serialises to the 64-byte META section.
    pub fn encode(&self) -> [u8; META_BYTES] {
        let mut out = [0u8; META_BYTES];
        let KindParts { code, bits, a, b } = self.kind.parts();
        out[0] = code as u8;
        out[1] = self.metric as u8;
        out[2] = self.element as u8;
        out[3] = bits;
        out[4..8].copy_from_slice(&self.dims.to_le_bytes());
        out[8..16].copy_from_slice(&self.rows.to_le_bytes());
        out[16..20].copy_from_slice(&a.to_le_bytes());
        out[20..24].copy_from_slice(&b.to_le_bytes());
        out[24..32].copy_from_slice(&self.seed.to_le_bytes());
        out[32] = if self.vectors_stored { 0 } else { FLAG_NO_VECTORS };
        out
    }

    /// Parses a META section; `Err` names what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() != META_BYTES {
            return Err(format!("META section has {} bytes, expected {META_BYTES}", bytes.len()));
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let code = KindCode::try_from(bytes[0]).map_err(|e| e.to_string())?;
        let kind = IndexKind::from_parts(KindParts { code, bits: bytes[3], a: u32_at(16), b: u32_at(20) });
        let metric = Metric::try_from(bytes[1]).map_err(|e| e.to_string())?;
        let element = ElementKind::try_from(bytes[2]).map_err(|e| e.to_string())?;
        let dims = u32_at(4);
        if dims == 0 || dims as usize > crate::MAX_DIMENSIONS {
            return Err(format!("invalid dimension count {dims}"));
        }
        if bytes[32] & !FLAG_NO_VECTORS != 0 || bytes[33..].iter().any(|&b| b != 0) {
            return Err("reserved META bytes are not zero".into());
        }
        if element == ElementKind::SparseF32
            && (!matches!(kind.code(), KindCode::Flat | KindCode::Hnsw)
                || crate::sparse_rows::capacity_of(dims as usize).is_none())
        {
            return Err(format!("packed sparse rows in a {} segment of {dims} words", kind.name()));
        }
        if element == ElementKind::Bits
            && (!matches!(kind.code(), KindCode::Flat | KindCode::Ivf | KindCode::Hnsw)
                || !matches!(metric, Metric::Hamming | Metric::Jaccard))
        {
            return Err(format!("packed bit rows in a {} segment ordered by {metric:?}", kind.name()));
        }
        let vectors_stored = bytes[32] & FLAG_NO_VECTORS == 0;
        if element == ElementKind::Bits && !vectors_stored {
            return Err("packed bit rows must be stored: they are their own codes".into());
        }
        if !vectors_stored && kind.code() != KindCode::Ivf {
            return Err(format!("a {} segment must store its vectors", kind.name()));
        }
        Ok(Self { kind, metric, element, dims, rows: u64_at(8), seed: u64_at(24), vectors_stored })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_codes_names_and_parts_round_trip() {
        for (kind, code, name) in [
            (IndexKind::Flat, KindCode::Flat, "flat"),
            (IndexKind::QuantizedFlat { bits: 2 }, KindCode::QuantizedFlat, "quantized_flat"),
            (IndexKind::Ivf { lists: 316, bits: 4 }, KindCode::Ivf, "ivf"),
            (IndexKind::Hnsw { m: 16, ef_construction: 64 }, KindCode::Hnsw, "hnsw"),
        ] {
            assert_eq!((kind.code(), kind.name()), (code, name));
            assert_eq!(IndexKind::from_parts(kind.parts()), kind);
        }
    }

    #[test]
    fn meta_round_trips_and_rejects_garbage() {
        for kind in [
            IndexKind::Flat,
            IndexKind::QuantizedFlat { bits: 4 },
            IndexKind::Ivf { lists: 316, bits: 2 },
            IndexKind::Hnsw { m: 16, ef_construction: 64 },
        ] {
            let meta = SegmentMeta {
                kind,
                metric: Metric::Cosine,
                element: ElementKind::F16,
                dims: 384,
                rows: 1234,
                seed: 7,
                vectors_stored: true,
            };
            assert_eq!(SegmentMeta::decode(&meta.encode()).unwrap(), meta);
            let compact = SegmentMeta { vectors_stored: false, ..meta };
            let decoded = SegmentMeta::decode(&compact.encode());
            if matches!(kind, IndexKind::Ivf { .. }) {
                assert_eq!(decoded.unwrap(), compact);
            } else {
                assert!(decoded.unwrap_err().contains("must store its vectors"));
            }
        }
        let mut bad = SegmentMeta {
            kind: IndexKind::Flat,
            metric: Metric::L2,
            element: ElementKind::F32,
            dims: 3,
            rows: 1,
            seed: 0,
            vectors_stored: true,
        }
        .encode();
        bad[0] = 9;
        assert_eq!(SegmentMeta::decode(&bad).unwrap_err(), "unknown segment kind 9");
        assert!(SegmentMeta::decode(&bad[..10]).is_err());
        bad[0] = 0;
        bad[32] = 2;
        assert!(SegmentMeta::decode(&bad).unwrap_err().contains("reserved"));
    }
}
