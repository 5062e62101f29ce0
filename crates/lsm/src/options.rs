//! The `WITH (...)` options of `CREATE INDEX … USING strata`: their defaults, ranges and
//! validation, resolved into an [`IndexConfig`] by [`IndexConfig::from_options`].
//!
//! | option | values | default |
//! |---|---|---|
//! | `kind` | `hnsw`, `ivf`, `flat` | `hnsw` |
//! | `bits` | `flat`: 0 (exact) or 1, 2, 4 (quantized + rerank); `ivf`: 1, 2, 4 (not on `bit` columns, whose lists keep the packed bits) | flat 0, ivf 4 (`bit`: none) |
//! | `m` | HNSW neighbours per node, 2–128 | 16 |
//! | `ef_construction` | HNSW build candidate list, 4–4096 (≥ m) | 64 |
//! | `lists` | IVF lists per segment, 0 = about √rows | 0 |
//! | `memtable_rows` | vectors per memtable, 64–10,000,000 | 100,000 |
//! | `rerank` | where exact distances come from: `index` (segments keep the vectors) or `heap` (IVF only, not on `bit` columns: segments keep only codes, scans read the candidates' rows) | `index` |
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
    pub fn resolve(&self, value: Option<i32>) -> Result<i32, OptionError> {
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
#[derive(Debug, Clone, PartialEq, Error)]
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
    /// A real option outside its range ([`crate::text_options::RealOption`]).
    #[error("value {value} out of bounds for option \"{option}\" ({min} to {max})", min = range_of(option).0, max = range_of(option).1)]
    RealOutOfBounds {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: f64,
    },
    /// A real option finer than thousandths (stored exactly as thousandths).
    #[error("option \"{option}\" takes at most three decimals, not {value}")]
    TooManyDecimals {
        /// The option's name.
        option: &'static str,
        /// The value given.
        value: f64,
    },
    /// `rerank = 'heap'` with a kind other than IVF.
    #[error("rerank = 'heap' applies to kind = 'ivf' only, not kind = '{}'", .0.name())]
    HeapRerankNotIvf(KindOption),
    /// `bits` with `kind = 'hnsw'`.
    #[error("option \"bits\" does not apply to kind = 'hnsw'")]
    BitsWithHnsw,
    /// An option of another kind given in the `WITH` clause (`m` or `ef_construction` without
    /// `kind = 'hnsw'`, `lists` without `kind = 'ivf'`).
    #[error("option \"{option}\" does not apply to kind = '{}'", .kind.name())]
    NotForKind {
        /// The option's name.
        option: &'static str,
        /// The index's kind.
        kind: KindOption,
    },
    /// `bits` not 1, 2 or 4 with `kind = 'ivf'`.
    #[error("option \"bits\" must be 1, 2 or 4 for kind = 'ivf', not {0}")]
    IvfBits(i32),
    /// `bits` not 0, 1, 2 or 4 with `kind = 'flat'`.
    #[error("option \"bits\" must be 0, 1, 2 or 4 for kind = 'flat', not {0}")]
    FlatBits(i32),
    /// A metric the kind's segments cannot order by (L1 with IVF or quantized codes; Hamming or
    /// Jaccard with quantized flat codes). The message names the kinds that can.
    #[error("kind = '{kind}'{bits} does not support the {operator} distance ({name}); use {kinds}", kinds = kinds_for(name))]
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
    /// `bits` on an IVF index of a `bit` column, whose lists keep the packed bits (no codes).
    #[error("option \"bits\" does not apply to kind = 'ivf' on bit columns: their lists keep the packed bits")]
    BitsOnBitColumn,
    /// `rerank = 'heap'` on a `bit` column: its IVF segments keep the packed bits, which are
    /// their own codes.
    #[error("rerank = 'heap' does not apply to bit columns: their IVF lists keep the packed bits")]
    HeapRerankOnBitColumn,
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

/// The kinds that order by the metric named `name` ([`OptionError::MetricNotSupported`]): IVF
/// orders `bit` columns by Hamming and Jaccard distance (their lists keep the packed bits), but
/// nothing orders by L1 with codes.
fn kinds_for(name: &str) -> &'static str {
    match name {
        "Hamming" | "Jaccard" => "kind = 'hnsw', kind = 'ivf' or kind = 'flat' without bits",
        _ => "kind = 'hnsw' or kind = 'flat' without bits",
    }
}

/// The range of real option `option` ([`crate::text_options`]).
fn range_of(option: &str) -> (f64, f64) {
    let real = [crate::text_options::K1, crate::text_options::B].into_iter().find(|o| o.name == option);
    real.map_or((f64::NAN, f64::NAN), |o| (o.min, o.max))
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

impl IndexOptions {
    /// Checks that each option `given` names (the `WITH` clause's option names, as written)
    /// applies to the kind these options choose: `m` and `ef_construction` to `hnsw`, `lists` to
    /// `ivf`; the others to every kind or checked by [`IndexOptions::resolve`]. An unknown kind
    /// is [`IndexOptions::resolve`]'s error, not this one's.
    pub fn check_given<'a>(&self, given: impl IntoIterator<Item = &'a str>) -> Result<(), OptionError> {
        let Ok(kind) = self.kind.as_deref().map_or(Ok(KindOption::DEFAULT), KindOption::parse) else {
            return Ok(());
        };
        for name in given {
            let applies = match name {
                "m" => Some((M.name, kind == KindOption::Hnsw)),
                "ef_construction" => Some((EF_CONSTRUCTION.name, kind == KindOption::Hnsw)),
                "lists" => Some((LISTS.name, kind == KindOption::Ivf)),
                _ => None,
            };
            if let Some((option, false)) = applies {
                return Err(OptionError::NotForKind { option, kind });
            }
        }
        Ok(())
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
        // IVF over a bit column keeps the packed bits in its lists: exact distances, no codes.
        let kind = match kind {
            IndexKind::Ivf { lists, .. } if column == ColumnType::Bit => {
                if options.bits.is_some_and(|bits| bits != BITS.default) {
                    return Err(OptionError::BitsOnBitColumn);
                }
                if rerank_from_heap {
                    return Err(OptionError::HeapRerankOnBitColumn);
                }
                IndexKind::Ivf { lists, bits: 0 }
            }
            other => other,
        };
        if !metric.quantizable() {
            let refused = match kind {
                IndexKind::Ivf { .. } if column == ColumnType::Bit => None,
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
            kind: kind.into(),
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
mod tests;
