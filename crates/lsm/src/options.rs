//! The `WITH (...)` options of `CREATE INDEX … USING strata`: their defaults, ranges and
//! validation, resolved into an [`IndexConfig`] by [`IndexConfig::from_options`].
//!
//! | option | values | default |
//! |---|---|---|
//! | `kind` | `hnsw`, `ivf`, `flat` | `hnsw` |
//! | `bits` | `flat`: 0 (exact) or 1, 2, 4 (quantized + rerank); `ivf`: 1, 2, 4 | flat 0, ivf 4 |
//! | `m` | HNSW neighbours per node, 2–128 | 16 |
//! | `ef_construction` | HNSW build candidate list, 4–4096 (≥ m) | 64 |
//! | `lists` | IVF lists per segment, 0 = about √rows | 0 |
//! | `memtable_rows` | vectors per memtable, 64–10,000,000 | 100,000 |
//! | `rerank` | where exact distances come from: `index` (segments keep the vectors) or `heap` (IVF only: segments keep only codes, scans read the candidates' rows) | `index` |
//! | `max_nnz` | `sparsevec` only: the most non-zero elements per row; giving it (or a column of more than 16,000 dimensions) stores rows packed (`1 + 2 · max_nnz` words; kinds `flat` and `hnsw`); a row with more is refused | 256 when packed |
//! | `max_array_elements` | distinct elements per row an array filter column (`int[]`, `text[]` key column after the vector) keeps, 1–1024; a row with more is refused | 32 |
//!
//! The error messages are the ones `CREATE INDEX` reports (pg_regress checks them).

use strata_engine::filter::{FilterSchema, FilterSpec};
use strata_engine::metric::Metric;
use strata_engine::segment::IndexKind;
use strata_engine::store::ColumnType;
#[cfg(test)]
use strata_engine::store::ElementKind;
use thiserror::Error;

use crate::manifest::IndexConfig;

/// An integer option: its name, default and accepted range (PostgreSQL's reloptions check the
/// range too, with the same wording).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntOption {
    /// The option's name.
    pub name: &'static str,
    /// What it sets (the reloption's description).
    pub description: &'static str,
    /// Its value when not given.
    pub default: i32,
    /// The smallest value accepted.
    pub min: i32,
    /// The largest value accepted.
    pub max: i32,
}

impl IntOption {
    /// `value`, or the default when `None`; an error when out of range.
    fn resolve(&self, value: Option<i32>) -> Result<i32, OptionError> {
        match value {
            None => Ok(self.default),
            Some(value) if (self.min..=self.max).contains(&value) => Ok(value),
            Some(value) => Err(OptionError::OutOfBounds { option: self.name, value }),
        }
    }
}

/// `bits`: bits per dimension of quantized codes. Its registered default (-1) means "not given";
/// the default then depends on the kind ([`DEFAULT_IVF_BITS`], flat: 0).
pub const BITS: IntOption =
    IntOption { name: "bits", description: "bits per dimension of quantized codes", default: -1, min: -1, max: 4 };
/// `m`: HNSW neighbours per node.
pub const M: IntOption =
    IntOption { name: "m", description: "HNSW neighbours per node", default: 16, min: 2, max: 128 };
/// `ef_construction`: HNSW build candidate list size.
pub const EF_CONSTRUCTION: IntOption = IntOption {
    name: "ef_construction",
    description: "HNSW build candidate list size",
    default: 64,
    min: 4,
    max: 4096,
};
/// `lists`: IVF lists per segment (0: about √rows).
pub const LISTS: IntOption = IntOption {
    name: "lists",
    description: "IVF lists per segment (0: about sqrt(rows))",
    default: 0,
    min: 0,
    max: 1 << 20,
};
/// `memtable_rows`: vectors per memtable.
pub const MEMTABLE_ROWS: IntOption = IntOption {
    name: "memtable_rows",
    description: "vectors per memtable",
    default: 100_000,
    min: 64,
    max: 10_000_000,
};
/// `max_array_elements`: the most distinct elements an array filter column keeps per row.
pub const MAX_ARRAY_ELEMENTS: IntOption = IntOption {
    name: "max_array_elements",
    description: "most distinct elements per row of an array filter column",
    default: strata_engine::filter::row::DEFAULT_ARRAY_SLOTS as i32,
    min: 1,
    max: strata_engine::filter::row::MAX_ARRAY_SLOTS as i32,
};
/// `max_nnz`: the most non-zero elements a row of a packed `sparsevec` index holds (0: not
/// given). Giving it, or a `sparsevec` column of more than 16,000 dimensions, stores rows packed.
pub const MAX_NNZ: IntOption = IntOption {
    name: "max_nnz",
    description: "most non-zero elements per row of a packed sparsevec index (0: 256 when packed)",
    default: 0,
    min: 0,
    max: MAX_PACKED_NNZ as i32,
};
/// The most non-zero elements a packed sparse row may hold (its `1 + 2 · nnz` words stay within a
/// segment's 16,000 dimensions).
pub const MAX_PACKED_NNZ: usize = (strata_engine::MAX_DIMENSIONS - 1) / 2;
/// The capacity of packed sparse rows when `max_nnz` is not given.
pub const DEFAULT_MAX_NNZ: usize = 256;
/// Every integer option.
pub const INT_OPTIONS: [IntOption; 7] = [BITS, M, EF_CONSTRUCTION, LISTS, MEMTABLE_ROWS, MAX_ARRAY_ELEMENTS, MAX_NNZ];

/// Bits per dimension of IVF codes when `bits` is not given.
pub const DEFAULT_IVF_BITS: u8 = 4;

/// The values of the `kind` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindOption {
    /// `hnsw` (the default).
    Hnsw,
    /// `ivf`.
    Ivf,
    /// `flat` (exact, or quantized with `bits`).
    Flat,
}

impl KindOption {
    /// The default kind.
    pub const DEFAULT: Self = Self::Hnsw;

    /// Parses the option's value.
    pub fn parse(value: &str) -> Result<Self, OptionError> {
        match value {
            "hnsw" => Ok(Self::Hnsw),
            "ivf" => Ok(Self::Ivf),
            "flat" => Ok(Self::Flat),
            other => Err(OptionError::UnknownKind(other.to_owned())),
        }
    }

    /// The option's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Hnsw => "hnsw",
            Self::Ivf => "ivf",
            Self::Flat => "flat",
        }
    }
}

/// Which access method an index belongs to: `strata`, or the companion extension
/// `pg_strata_pgvector`'s `hnsw` / `ivfflat` (same options; only the default `kind` differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Flavor {
    /// `USING strata`.
    Strata = 0,
    /// `USING hnsw` (pgvector's name): kind `hnsw` unless `kind` is given.
    Hnsw = 1,
    /// `USING ivfflat` (pgvector's name): kind `ivf` unless `kind` is given.
    Ivfflat = 2,
}

impl Flavor {
    /// Every flavor, each at its own position (`flavor as usize`).
    pub const ALL: [Self; 3] = [Self::Strata, Self::Hnsw, Self::Ivfflat];

    /// The segment kind an index of this access method gets when `kind` is not given.
    pub fn default_kind(self) -> KindOption {
        match self {
            Self::Strata => KindOption::DEFAULT,
            Self::Hnsw => KindOption::Hnsw,
            Self::Ivfflat => KindOption::Ivf,
        }
    }

    /// The access method's name.
    pub fn access_method(self) -> &'static str {
        match self {
            Self::Strata => "strata",
            Self::Hnsw => "hnsw",
            Self::Ivfflat => "ivfflat",
        }
    }
}

/// The values of the `rerank` option: where exact distances come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RerankOption {
    /// `index` (the default): segments keep the vectors.
    Index,
    /// `heap` (IVF only): segments keep only codes; scans read the candidates' rows.
    Heap,
}

impl RerankOption {
    /// The default.
    pub const DEFAULT: Self = Self::Index;

    /// Parses the option's value.
    pub fn parse(value: &str) -> Result<Self, OptionError> {
        match value {
            "index" => Ok(Self::Index),
            "heap" => Ok(Self::Heap),
            other => Err(OptionError::UnknownRerank(other.to_owned())),
        }
    }

    /// The option's value.
    pub fn name(self) -> &'static str {
        match self {
            Self::Index => "index",
            Self::Heap => "heap",
        }
    }
}

/// The options as given (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexOptions {
    /// `kind`.
    pub kind: Option<String>,
    /// `bits`.
    pub bits: Option<i32>,
    /// `m`.
    pub m: Option<i32>,
    /// `ef_construction`.
    pub ef_construction: Option<i32>,
    /// `lists`.
    pub lists: Option<i32>,
    /// `memtable_rows`.
    pub memtable_rows: Option<i32>,
    /// `rerank`.
    pub rerank: Option<String>,
    /// `max_array_elements`.
    pub max_array_elements: Option<i32>,
    /// `max_nnz`.
    pub max_nnz: Option<i32>,
}

/// What the options decide, with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedOptions {
    /// The segment kind with its parameters (IVF `lists = 0`: about √rows per segment).
    pub kind: IndexKind,
    /// Vectors per memtable.
    pub memtable_rows: u32,
    /// `rerank = 'heap'`: segments keep only codes; scans rerank from the table.
    pub rerank_from_heap: bool,
}

/// Why options (or the indexed column) do not make an index.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OptionError {
    /// A `bit` column longer than packed bit rows hold ([`strata_engine::bit_rows::MAX_BITS`]);
    /// pgvector's message, naming the access method.
    #[error("column cannot have more than {max} dimensions for {access_method} index", max = strata_engine::bit_rows::MAX_BITS)]
    TooManyBits {
        /// The column's bits.
        bits: u32,
        /// The access method's name (`strata`, or the companion's `hnsw` / `ivfflat`).
        access_method: &'static str,
    },
    /// `max_nnz` on an index that does not store packed sparse rows.
    #[error("option \"max_nnz\" applies to sparsevec indexes only")]
    MaxNnzNotSparse,
    /// A packed sparse index of a kind that cannot hold packed rows.
    #[error("kind = '{0}' cannot index packed sparsevec rows (more than 16000 dimensions, or max_nnz given); use kind = 'flat' or kind = 'hnsw'")]
    PackedSparseKind(&'static str),
    /// The indexed column's type has no dimensions (`vector` without a typmod).
    #[error("column does not have dimensions")]
    NoDimensions,
    /// More dimensions than an index supports.
    #[error("column has {0} dimensions, more than the {max} an index supports", max = strata_engine::MAX_DIMENSIONS)]
    TooManyDimensions(u32),
    /// `kind` is not `hnsw`, `ivf` or `flat`.
    #[error("invalid value for strata option \"kind\": \"{0}\" (expected hnsw, ivf or flat)")]
    UnknownKind(String),
    /// `rerank` is not `index` or `heap`.
    #[error("invalid value for strata option \"rerank\": \"{0}\" (expected index or heap)")]
    UnknownRerank(String),
    /// An integer option outside its range.
    #[error("value {value} out of bounds for option \"{option}\"")]
    OutOfBounds {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: i32,
    },
    /// `rerank = 'heap'` with a kind other than IVF.
    #[error("rerank = 'heap' applies to kind = 'ivf' only, not kind = '{}'", .0.name())]
    HeapRerankNotIvf(KindOption),
    /// `bits` with `kind = 'hnsw'`.
    #[error("option \"bits\" does not apply to kind = 'hnsw'")]
    BitsWithHnsw,
    /// `bits` not 1, 2 or 4 with `kind = 'ivf'`.
    #[error("option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not {0}")]
    IvfBits(i32),
    /// `bits` not 0, 1, 2 or 4 with `kind = 'flat'`.
    #[error("option \"bits\" must be 0, 1, 2 or 4 for kind = 'flat', not {0}")]
    FlatBits(i32),
    /// A metric the kind's segments cannot order by (L1, Hamming or Jaccard with quantized codes).
    #[error("kind = '{kind}'{bits} does not support the {operator} distance ({name}); use kind = 'hnsw' or kind = 'flat' without bits")]
    MetricNotSupported {
        /// The kind's option value.
        kind: &'static str,
        /// `" with bits"` for quantized flat segments, else empty.
        bits: &'static str,
        /// The metric's SQL operator.
        operator: &'static str,
        /// The metric's name (`L1`, `Hamming`, `Jaccard`).
        name: &'static str,
    },
    /// An opclass pairing a column type with a metric it has no meaning for (not declared by
    /// pg_strata's SQL; a hand-made opclass).
    #[error("the {operator} distance is not supported for {column} columns")]
    MetricForColumn {
        /// The column's SQL type.
        column: &'static str,
        /// The metric's SQL operator.
        operator: &'static str,
    },
    /// The index's filter columns do not form a schema (too many columns).
    #[error("{0}")]
    FilterColumns(strata_engine::filter::RowError),
    /// `ef_construction` below `m`.
    #[error("ef_construction ({ef_construction}) must be at least m ({m})")]
    EfConstructionBelowM {
        /// `m`.
        m: i32,
        /// `ef_construction`.
        ef_construction: i32,
    },
}

impl OptionError {
    /// This error as the access method named `access_method` reports it (pgvector's messages name
    /// it).
    #[must_use]
    pub fn for_access_method(self, access_method: &'static str) -> Self {
        match self {
            Self::TooManyBits { bits, .. } => Self::TooManyBits { bits, access_method },
            other => other,
        }
    }
}

impl IndexOptions {
    /// The options of an index of access method `flavor` created without a `WITH` clause.
    pub fn without_clause(flavor: Flavor) -> Self {
        Self { kind: Some(flavor.default_kind().name().to_owned()), ..Self::default() }
    }

    /// The options as PostgreSQL's reloptions store them: the string options (`None`: not given)
    /// and every integer option in [`INT_OPTIONS`] order, integer options not given holding their
    /// registered defaults (`bits` = -1 stands for "not given").
    pub fn stored(kind: Option<String>, ints: [i32; INT_OPTIONS.len()], rerank: Option<String>) -> Self {
        let [bits, m, ef_construction, lists, memtable_rows, max_array_elements, max_nnz] = ints.map(Some);
        Self { kind, bits, m, ef_construction, lists, memtable_rows, rerank, max_array_elements, max_nnz }
    }

    /// Applies defaults and checks the options on their own (what `CREATE INDEX` can check before
    /// it knows the column).
    pub fn resolve(&self) -> Result<ResolvedOptions, OptionError> {
        let kind = self.kind.as_deref().map_or(Ok(KindOption::DEFAULT), KindOption::parse)?;
        let rerank = self.rerank.as_deref().map_or(Ok(RerankOption::DEFAULT), RerankOption::parse)?;
        let rerank_from_heap = rerank == RerankOption::Heap;
        if rerank_from_heap && kind != KindOption::Ivf {
            return Err(OptionError::HeapRerankNotIvf(kind));
        }
        let given_bits =
            self.bits.filter(|&bits| bits != BITS.default).map(|bits| BITS.resolve(Some(bits))).transpose()?;
        let (m, ef_construction) = (M.resolve(self.m)?, EF_CONSTRUCTION.resolve(self.ef_construction)?);
        let lists = LISTS.resolve(self.lists)? as u32;
        let memtable_rows = MEMTABLE_ROWS.resolve(self.memtable_rows)? as u32;
        let kind = match kind {
            KindOption::Hnsw => {
                if given_bits.is_some() {
                    return Err(OptionError::BitsWithHnsw);
                }
                if ef_construction < m {
                    return Err(OptionError::EfConstructionBelowM { m, ef_construction });
                }
                IndexKind::Hnsw { m: m as u32, ef_construction: ef_construction as u32 }
            }
            KindOption::Ivf => match given_bits {
                None => IndexKind::Ivf { lists, bits: DEFAULT_IVF_BITS },
                Some(bits @ (1 | 2 | 4)) => IndexKind::Ivf { lists, bits: bits as u8 },
                Some(other) => return Err(OptionError::IvfBits(other)),
            },
            KindOption::Flat => match given_bits {
                None | Some(0) => IndexKind::Flat,
                Some(bits @ (1 | 2 | 4)) => IndexKind::QuantizedFlat { bits: bits as u8 },
                Some(other) => return Err(OptionError::FlatBits(other)),
            },
        };
        Ok(ResolvedOptions { kind, memtable_rows, rerank_from_heap })
    }
}

impl IndexConfig {
    /// The configuration of an index on a column of `dims` dimensions (bits of a `bit` column)
    /// of type `column`, ordered by `metric` (both from the opclass), with `options`: defaults
    /// applied, everything checked. Rows are stored as `column`'s [`ColumnType::stored_as`].
    pub fn from_options(
        dims: u32,
        metric: Metric,
        column: ColumnType,
        options: &IndexOptions,
    ) -> Result<Self, OptionError> {
        let mut element = column.stored_as();
        if !column.allows(metric) {
            return Err(OptionError::MetricForColumn { column: column.sql_name(), operator: metric.operator() });
        }
        if dims == 0 {
            return Err(OptionError::NoDimensions);
        }
        let max_nnz = MAX_NNZ.resolve(options.max_nnz)? as usize;
        let packed = column == ColumnType::Sparsevec && (max_nnz > 0 || dims as usize > strata_engine::MAX_DIMENSIONS);
        if max_nnz > 0 && column != ColumnType::Sparsevec {
            return Err(OptionError::MaxNnzNotSparse);
        }
        let ResolvedOptions { kind, memtable_rows, rerank_from_heap } = options.resolve()?;
        if column == ColumnType::Bit && dims > strata_engine::bit_rows::MAX_BITS {
            return Err(OptionError::TooManyBits { bits: dims, access_method: "strata" });
        }
        let dims = if column == ColumnType::Bit {
            strata_engine::bit_rows::row_words(dims) as u32
        } else if packed {
            if !matches!(kind, IndexKind::Flat | IndexKind::Hnsw { .. }) {
                return Err(OptionError::PackedSparseKind(match kind {
                    IndexKind::Ivf { .. } => "ivf",
                    _ => "flat' with 'bits",
                }));
            }
            element = strata_engine::store::ElementKind::SparseF32;
            strata_engine::sparse_rows::row_words(if max_nnz > 0 { max_nnz } else { DEFAULT_MAX_NNZ }) as u32
        } else {
            dims
        };
        if dims as usize > strata_engine::MAX_DIMENSIONS {
            return Err(OptionError::TooManyDimensions(dims));
        }
        if !metric.quantizable() {
            let refused = match kind {
                IndexKind::Ivf { .. } => Some(("ivf", "")),
                IndexKind::QuantizedFlat { .. } => Some(("flat", " with bits")),
                IndexKind::Flat | IndexKind::Hnsw { .. } => None,
            };
            if let Some((kind, bits)) = refused {
                let name = match metric {
                    Metric::Hamming => "Hamming",
                    Metric::Jaccard => "Jaccard",
                    _ => "L1",
                };
                return Err(OptionError::MetricNotSupported { kind, bits, operator: metric.operator(), name });
            }
        }
        Ok(Self {
            dims,
            metric,
            element,
            kind,
            memtable_rows,
            rerank_from_heap,
            filters: strata_engine::filter::FilterSchema::default(),
        })
    }

    /// This configuration with filter columns of `types` (the index's key columns after the
    /// vector, in order), array columns keeping `max_array_elements` distinct elements per row.
    pub fn with_filter_columns(
        mut self,
        types: &[strata_engine::filter::ColumnType],
        options: &IndexOptions,
    ) -> Result<Self, OptionError> {
        let slots = MAX_ARRAY_ELEMENTS.resolve(options.max_array_elements)? as u16;
        let specs: Vec<FilterSpec> =
            types.iter().map(|&ty| FilterSpec { ty, slots: if ty.is_array() { slots } else { 0 } }).collect();
        self.filters = FilterSchema::new(&specs).map_err(OptionError::FilterColumns)?;
        Ok(self)
    }
}

/// The code support function 1 of a strata opclass returns: the metric's code (low 4 bits) and
/// the column type's code (bits 4–7), the engine enums' `u8` codes. The index reads its metric
/// and column type from it. (`vector` and `halfvec` have their element types' codes, so the codes
/// of indexes made before `bit` and `sparsevec` were indexable read back unchanged.)
pub const fn opclass_code(metric: Metric, column: ColumnType) -> i32 {
    (metric as i32) | ((column as i32) << 4)
}

/// The code support function 1 of every filter-column opclass returns (`strata_int4_ops`,
/// `strata_text_ops`, `strata_array_ops`, …): no [`opclass_code`] has bit 12 set.
pub const FILTER_OPCLASS_CODE: i32 = 1 << 12;

/// What an index column's opclass says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpclassRole {
    /// The vector column: ordered by `metric`, of SQL type `column`.
    Vector {
        /// The metric.
        metric: Metric,
        /// The column's SQL type.
        column: ColumnType,
    },
    /// A filter column.
    Filter,
}

/// The role of an index column whose opclass support function 1 returned `code`.
pub fn opclass_role(code: i32) -> Result<OpclassRole, strata_engine::UnknownCode> {
    if code == FILTER_OPCLASS_CODE {
        return Ok(OpclassRole::Filter);
    }
    let (metric, column) = decode_opclass_code(code)?;
    Ok(OpclassRole::Vector { metric, column })
}

/// The metric and column type of an opclass code ([`opclass_code`] reversed).
pub fn decode_opclass_code(code: i32) -> Result<(Metric, ColumnType), strata_engine::UnknownCode> {
    let column =
        u8::try_from(code >> 4).map_err(|_| strata_engine::UnknownCode { what: "opclass code", code: 0xFF })?;
    Ok((Metric::try_from((code & 0xF) as u8)?, ColumnType::try_from(column)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_opclasses_are_told_apart() {
        assert_eq!(opclass_role(FILTER_OPCLASS_CODE), Ok(OpclassRole::Filter));
        let code = opclass_code(Metric::Cosine, ColumnType::Vector);
        assert_eq!(opclass_role(code), Ok(OpclassRole::Vector { metric: Metric::Cosine, column: ColumnType::Vector }));
        assert!(opclass_role(FILTER_OPCLASS_CODE + 1).is_err(), "bit 12 names no vector opclass");
    }

    #[test]
    fn opclass_codes_round_trip() {
        for metric in Metric::ALL {
            for column in ColumnType::ALL {
                assert_eq!(decode_opclass_code(opclass_code(metric, column)), Ok((metric, column)));
            }
        }
        // Codes of indexes made when the code held an element type (only f32 and f16 existed then)
        // read back as the same types.
        for element in [ElementKind::F32, ElementKind::F16] {
            let code = (Metric::Cosine as i32) | ((element as i32) << 4);
            assert_eq!(decode_opclass_code(code), Ok((Metric::Cosine, ColumnType::of_element(element))));
        }
        assert!(decode_opclass_code(0xF).is_err(), "no metric has code 15");
        assert!(decode_opclass_code(0xF0).is_err(), "no column type has code 15");
    }

    #[test]
    fn each_access_method_defaults_to_its_kind_and_stored_options_resolve_like_given_ones() {
        let kinds = Flavor::ALL.map(|flavor| kind(&IndexOptions::without_clause(flavor)));
        assert_eq!(
            kinds,
            [
                IndexKind::Hnsw { m: 16, ef_construction: 64 },
                IndexKind::Hnsw { m: 16, ef_construction: 64 },
                IndexKind::Ivf { lists: 0, bits: 4 }
            ]
        );
        for (at, flavor) in Flavor::ALL.into_iter().enumerate() {
            assert_eq!(flavor as usize, at);
        }
        let defaults = INT_OPTIONS.map(|o| o.default);
        assert_eq!(IndexOptions::stored(None, defaults, None).resolve(), IndexOptions::default().resolve());
        let stored = IndexOptions::stored(Some("flat".into()), [2, 16, 64, 0, 500, 32, 0], Some("index".into()));
        let given = IndexOptions { bits: Some(2), memtable_rows: Some(500), ..with_kind("flat") };
        assert_eq!(stored.resolve(), given.resolve());
        assert_eq!(stored.resolve().unwrap().kind, IndexKind::QuantizedFlat { bits: 2 });
        let bad = IndexOptions::stored(None, [-1, 16, 8, 0, 500, 32, 0], None);
        assert_eq!(bad.resolve(), Err(OptionError::EfConstructionBelowM { m: 16, ef_construction: 8 }));
    }

    fn config(options: &IndexOptions) -> Result<IndexConfig, String> {
        IndexConfig::from_options(3, Metric::Cosine, ColumnType::Halfvec, options).map_err(|e| e.to_string())
    }

    fn kind(options: &IndexOptions) -> IndexKind {
        options.resolve().unwrap().kind
    }

    fn with_kind(name: &str) -> IndexOptions {
        IndexOptions { kind: Some(name.into()), ..IndexOptions::default() }
    }

    #[test]
    fn defaults() {
        let config = config(&IndexOptions::default()).unwrap();
        assert_eq!(
            config,
            IndexConfig {
                dims: 3,
                metric: Metric::Cosine,
                element: ElementKind::F16,
                kind: IndexKind::Hnsw { m: 16, ef_construction: 64 },
                memtable_rows: 100_000,
                rerank_from_heap: false,
                filters: strata_engine::filter::FilterSchema::default(),
            }
        );
        assert_eq!(kind(&with_kind("ivf")), IndexKind::Ivf { lists: 0, bits: 4 });
        assert_eq!(kind(&with_kind("flat")), IndexKind::Flat);
        // PostgreSQL hands over the registered defaults of options not given.
        let registered = IndexOptions {
            kind: Some("hnsw".into()),
            bits: Some(BITS.default),
            m: Some(M.default),
            ef_construction: Some(EF_CONSTRUCTION.default),
            lists: Some(LISTS.default),
            memtable_rows: Some(MEMTABLE_ROWS.default),
            rerank: Some("index".into()),
            max_array_elements: Some(MAX_ARRAY_ELEMENTS.default),
            max_nnz: Some(MAX_NNZ.default),
        };
        assert_eq!(registered.resolve(), IndexOptions::default().resolve());
        for kind in ["ivf", "flat"] {
            let registered = IndexOptions { kind: Some(kind.into()), ..registered.clone() };
            assert_eq!(registered.resolve(), with_kind(kind).resolve());
        }
    }

    /// `sparsevec` beyond 16,000 dimensions, or with `max_nnz`, stores packed rows (flat and hnsw
    /// only); `max_nnz` means nothing for other columns.
    #[test]
    fn wide_sparsevec_indexes_store_packed_rows() {
        use strata_engine::store::ElementKind;
        let splade =
            IndexConfig::from_options(30_522, Metric::InnerProduct, ColumnType::Sparsevec, &IndexOptions::default())
                .unwrap();
        assert_eq!((splade.element, splade.dims), (ElementKind::SparseF32, 1 + 2 * 256));
        let wider = IndexOptions { max_nnz: Some(1000), ..with_kind("flat") };
        let config = IndexConfig::from_options(30_522, Metric::Cosine, ColumnType::Sparsevec, &wider).unwrap();
        assert_eq!((config.element, config.dims, config.kind), (ElementKind::SparseF32, 2001, IndexKind::Flat));
        let narrow = IndexOptions { max_nnz: Some(8), ..IndexOptions::default() };
        assert_eq!(IndexConfig::from_options(100, Metric::L2, ColumnType::Sparsevec, &narrow).unwrap().dims, 17);
        assert_eq!(
            IndexConfig::from_options(100, Metric::L2, ColumnType::Sparsevec, &IndexOptions::default())
                .unwrap()
                .element,
            ElementKind::F32,
            "densified when it fits and max_nnz is not given"
        );
        let ivf = IndexConfig::from_options(30_522, Metric::L2, ColumnType::Sparsevec, &with_kind("ivf")).unwrap_err();
        assert_eq!(ivf, OptionError::PackedSparseKind("ivf"));
        assert_eq!(
            IndexConfig::from_options(3, Metric::L2, ColumnType::Vector, &narrow).unwrap_err(),
            OptionError::MaxNnzNotSparse
        );
        let too_many = IndexOptions { max_nnz: Some(8000), ..IndexOptions::default() };
        assert!(IndexConfig::from_options(30_522, Metric::L2, ColumnType::Sparsevec, &too_many).is_err());
    }

    #[test]
    fn filter_columns_take_the_array_option() {
        use strata_engine::filter::ColumnType as Filter;
        let base = config(&IndexOptions::default()).unwrap();
        let types = [Filter::Int8, Filter::TextArray];
        let config = base.with_filter_columns(&types, &IndexOptions::default()).unwrap();
        let slots: Vec<(Filter, u16)> = config.filters.columns().iter().map(|s| (s.ty, s.slots)).collect();
        assert_eq!(slots, vec![(Filter::Int8, 0), (Filter::TextArray, 32)]);
        assert_eq!(config.row_words(), 3 + 1 + 2 + 65);
        let options = IndexOptions { max_array_elements: Some(4), ..IndexOptions::default() };
        assert_eq!(base.with_filter_columns(&types, &options).unwrap().filters.columns()[1].slots, 4);
        let options = IndexOptions { max_array_elements: Some(0), ..IndexOptions::default() };
        assert_eq!(
            base.with_filter_columns(&types, &options).unwrap_err().to_string(),
            "value 0 out of bounds for option \"max_array_elements\""
        );
        let too_many = base.with_filter_columns(&[Filter::Int4; 32], &IndexOptions::default()).unwrap_err();
        assert_eq!(too_many.to_string(), "an index can have at most 31 filter columns, not 32");
        assert_eq!(base.with_filter_columns(&[], &IndexOptions::default()).unwrap(), base);
    }

    #[test]
    fn values_given() {
        let ivf = IndexOptions {
            kind: Some("ivf".into()),
            bits: Some(2),
            lists: Some(100),
            memtable_rows: Some(64),
            rerank: Some("heap".into()),
            ..IndexOptions::default()
        };
        assert_eq!(
            ivf.resolve().unwrap(),
            ResolvedOptions { kind: IndexKind::Ivf { lists: 100, bits: 2 }, memtable_rows: 64, rerank_from_heap: true }
        );
        let flat = |bits| IndexOptions { bits: Some(bits), ..with_kind("flat") };
        assert_eq!(kind(&flat(0)), IndexKind::Flat);
        for bits in [1, 2, 4] {
            assert_eq!(kind(&flat(bits)), IndexKind::QuantizedFlat { bits: bits as u8 });
        }
        let hnsw = IndexOptions { m: Some(8), ef_construction: Some(8), ..IndexOptions::default() };
        assert_eq!(kind(&hnsw), IndexKind::Hnsw { m: 8, ef_construction: 8 });
        let rerank_index = IndexOptions { rerank: Some("index".into()), ..with_kind("flat") };
        assert!(!rerank_index.resolve().unwrap().rerank_from_heap);
    }

    /// Every error, with the message `CREATE INDEX` reports (tests/regress/expected/06_index.out).
    #[test]
    fn errors() {
        let cases = [
            (with_kind("bogus"), "invalid value for strata option \"kind\": \"bogus\" (expected hnsw, ivf or flat)"),
            (
                IndexOptions { rerank: Some("disk".into()), ..IndexOptions::default() },
                "invalid value for strata option \"rerank\": \"disk\" (expected index or heap)",
            ),
            (
                IndexOptions { rerank: Some("heap".into()), ..with_kind("hnsw") },
                "rerank = 'heap' applies to kind = 'ivf' only, not kind = 'hnsw'",
            ),
            (
                IndexOptions { rerank: Some("heap".into()), ..with_kind("flat") },
                "rerank = 'heap' applies to kind = 'ivf' only, not kind = 'flat'",
            ),
            (
                IndexOptions { bits: Some(4), ..IndexOptions::default() },
                "option \"bits\" does not apply to kind = 'hnsw'",
            ),
            (
                IndexOptions { bits: Some(3), ..with_kind("ivf") },
                "option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not 3",
            ),
            (
                IndexOptions { bits: Some(0), ..with_kind("ivf") },
                "option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not 0",
            ),
            (
                IndexOptions { bits: Some(3), ..with_kind("flat") },
                "option \"bits\" must be 0, 1, 2 or 4 for kind = 'flat', not 3",
            ),
            (
                IndexOptions { m: Some(16), ef_construction: Some(8), ..IndexOptions::default() },
                "ef_construction (8) must be at least m (16)",
            ),
            (IndexOptions { m: Some(1000), ..IndexOptions::default() }, "value 1000 out of bounds for option \"m\""),
            (
                IndexOptions { memtable_rows: Some(1), ..IndexOptions::default() },
                "value 1 out of bounds for option \"memtable_rows\"",
            ),
            (
                IndexOptions { ef_construction: Some(5000), ..IndexOptions::default() },
                "value 5000 out of bounds for option \"ef_construction\"",
            ),
            (IndexOptions { lists: Some(-1), ..with_kind("ivf") }, "value -1 out of bounds for option \"lists\""),
            (IndexOptions { bits: Some(8), ..with_kind("flat") }, "value 8 out of bounds for option \"bits\""),
        ];
        for (options, message) in cases {
            assert_eq!(config(&options).unwrap_err(), message, "{options:?}");
        }
        let no_dims = IndexConfig::from_options(0, Metric::L2, ColumnType::Vector, &IndexOptions::default());
        assert_eq!(no_dims.unwrap_err().to_string(), "column does not have dimensions");
        let too_many = IndexConfig::from_options(16_001, Metric::L2, ColumnType::Vector, &IndexOptions::default());
        assert_eq!(too_many.unwrap_err(), OptionError::TooManyDimensions(16_001));
    }

    #[test]
    fn l1_only_with_exact_kinds() {
        let l1 = |options: &IndexOptions| IndexConfig::from_options(3, Metric::L1, ColumnType::Vector, options);
        assert!(matches!(l1(&IndexOptions::default()).unwrap().kind, IndexKind::Hnsw { .. }));
        assert_eq!(l1(&with_kind("flat")).unwrap().kind, IndexKind::Flat);
        assert_eq!(
            l1(&with_kind("ivf")).unwrap_err().to_string(),
            "kind = 'ivf' does not support the <+> distance (L1); use kind = 'hnsw' or kind = 'flat' without bits"
        );
        let quantized = IndexOptions { bits: Some(4), ..with_kind("flat") };
        assert_eq!(
            l1(&quantized).unwrap_err(),
            OptionError::MetricNotSupported { kind: "flat", bits: " with bits", operator: "<+>", name: "L1" }
        );
        for metric in [Metric::L2, Metric::InnerProduct, Metric::Cosine] {
            assert!(IndexConfig::from_options(3, metric, ColumnType::Vector, &quantized).is_ok());
            assert!(IndexConfig::from_options(3, metric, ColumnType::Sparsevec, &quantized).is_ok());
        }
    }

    #[test]
    fn bit_columns_take_hamming_and_jaccard_on_exact_kinds_only() {
        for metric in [Metric::Hamming, Metric::Jaccard] {
            let config = IndexConfig::from_options(64, metric, ColumnType::Bit, &with_kind("flat")).unwrap();
            assert_eq!(
                (config.element, config.kind, config.dims),
                (ElementKind::Bits, IndexKind::Flat, 3),
                "packed: length + 2 words"
            );
            assert!(matches!(
                IndexConfig::from_options(64, metric, ColumnType::Bit, &IndexOptions::default()).unwrap().kind,
                IndexKind::Hnsw { .. }
            ));
            assert!(matches!(
                IndexConfig::from_options(64, metric, ColumnType::Bit, &with_kind("ivf")),
                Err(OptionError::MetricNotSupported { kind: "ivf", .. })
            ));
            assert_eq!(
                IndexConfig::from_options(64, metric, ColumnType::Vector, &with_kind("flat")).unwrap_err(),
                OptionError::MetricForColumn { column: "vector", operator: metric.operator() }
            );
        }
        assert!(IndexConfig::from_options(64, Metric::L2, ColumnType::Bit, &with_kind("flat")).is_err());
        let longest =
            IndexConfig::from_options(64_000, Metric::Hamming, ColumnType::Bit, &IndexOptions::default()).unwrap();
        assert_eq!(longest.dims, 2001);
        let too_long =
            IndexConfig::from_options(64_001, Metric::Hamming, ColumnType::Bit, &IndexOptions::default()).unwrap_err();
        assert_eq!(too_long.to_string(), "column cannot have more than 64000 dimensions for strata index");
        assert_eq!(
            too_long.for_access_method("hnsw").to_string(),
            "column cannot have more than 64000 dimensions for hnsw index",
            "pgvector's message"
        );
        let sparse =
            IndexConfig::from_options(1000, Metric::InnerProduct, ColumnType::Sparsevec, &with_kind("flat")).unwrap();
        assert_eq!(sparse.element, ElementKind::F32);
    }

    #[test]
    fn option_names_parse_back() {
        for kind in [KindOption::Hnsw, KindOption::Ivf, KindOption::Flat] {
            assert_eq!(KindOption::parse(kind.name()), Ok(kind));
        }
        for rerank in [RerankOption::Index, RerankOption::Heap] {
            assert_eq!(RerankOption::parse(rerank.name()), Ok(rerank));
        }
        assert!(INT_OPTIONS.iter().all(|o| (o.min..=o.max).contains(&o.default)));
    }
}
