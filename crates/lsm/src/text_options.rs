//! The `WITH (...)` options of `CREATE INDEX … USING bm25`, resolved into an [`IndexConfig`] of
//! kind [`ConfigKind::Bm25`](crate::manifest::ConfigKind::Bm25) by [`IndexConfig::from_bm25_options`].
//!
//! | option | values | default |
//! |---|---|---|
//! | `text_config` | a text search configuration (`regconfig`); rows and queries are tokenised by `to_tsvector(text_config, …)` | `english` |
//! | `k1` | BM25 term-frequency saturation, 0–100, at most three decimals | 1.2 |
//! | `b` | BM25 length normalisation, 0–1, at most three decimals | 0.75 |
//! | `memtable_slots` | 64-byte memtable slots per memtable, 64–10,000,000; a row takes `⌈(3 + 2·lexemes + lexeme bytes / 4) / 16⌉` | 100,000 |
//!
//! The text search configuration is the glue's (PostgreSQL resolves it; tokenising happens
//! before rows reach the engine); the configuration records only what the engine needs.

use strata_engine::metric::Metric;
use strata_engine::store::ElementKind;

use crate::manifest::{ConfigKind, IndexConfig};
use crate::options::{IntOption, OptionError};

/// Words per memtable slot of a text index: a row ([`crate::memtable::spans`]) spans as many
/// slots as its words need.
pub const TEXT_SLOT_WORDS: u32 = 16;

/// A real-valued option: its name, default and accepted range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RealOption {
    /// The option's name.
    pub name: &'static str,
    /// What it sets (the reloption's description).
    pub description: &'static str,
    /// Its value when not given.
    pub default: f64,
    /// The smallest value accepted.
    pub min: f64,
    /// The largest value accepted.
    pub max: f64,
}

impl RealOption {
    /// `value` (or the default) in thousandths; an error when out of range or finer than 0.001.
    fn resolve_milli(&self, value: Option<f64>) -> Result<u32, OptionError> {
        let value = value.unwrap_or(self.default);
        if !(self.min..=self.max).contains(&value) {
            return Err(OptionError::RealOutOfBounds { option: self.name, value });
        }
        let milli = (value * 1000.0).round();
        if (value * 1000.0 - milli).abs() > 1e-6 {
            return Err(OptionError::TooManyDecimals { option: self.name, value });
        }
        Ok(milli as u32)
    }
}

/// `k1`: BM25 term-frequency saturation.
pub const K1: RealOption =
    RealOption { name: "k1", description: "BM25 term-frequency saturation", default: 1.2, min: 0.0, max: 100.0 };
/// `b`: BM25 length normalisation.
pub const B: RealOption =
    RealOption { name: "b", description: "BM25 length normalisation", default: 0.75, min: 0.0, max: 1.0 };
/// `memtable_slots`: 64-byte slots per memtable of a text index.
pub const MEMTABLE_SLOTS: IntOption = IntOption {
    name: "memtable_slots",
    description: "64-byte slots per memtable of a bm25 index",
    default: 100_000,
    min: 64,
    max: 10_000_000,
};
/// The text search configuration when `text_config` is not given.
pub const DEFAULT_TEXT_CONFIG: &str = "english";

/// The options of a bm25 index as given (`None`: not given, the default applies).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bm25Options {
    /// `text_config`.
    pub text_config: Option<String>,
    /// `k1`.
    pub k1: Option<f64>,
    /// `b`.
    pub b: Option<f64>,
    /// `memtable_slots`.
    pub memtable_slots: Option<i32>,
}

impl Bm25Options {
    /// The text search configuration rows and queries are tokenised with.
    pub fn text_config(&self) -> &str {
        self.text_config.as_deref().unwrap_or(DEFAULT_TEXT_CONFIG)
    }
}

impl IndexConfig {
    /// The configuration of a bm25 index with `options`: defaults applied, everything checked.
    /// `dims` is [`TEXT_SLOT_WORDS`] (words per memtable slot); `metric` and `element` are unused
    /// by text indexes and fixed (L2, f32) so that every stored form is one value.
    pub fn from_bm25_options(options: &Bm25Options) -> Result<Self, OptionError> {
        let kind = ConfigKind::Bm25 { k1_milli: K1.resolve_milli(options.k1)?, b_milli: B.resolve_milli(options.b)? };
        let memtable_rows = MEMTABLE_SLOTS.resolve(options.memtable_slots)? as u32;
        Ok(Self {
            dims: TEXT_SLOT_WORDS,
            metric: Metric::L2,
            element: ElementKind::F32,
            kind,
            memtable_rows,
            rerank_from_heap: false,
            filters: strata_engine::filter::FilterSchema::default(),
        })
    }

    /// BM25's `(k1, b)` of a text index; `None` for a vector index.
    pub fn bm25(&self) -> Option<(f64, f64)> {
        match self.kind {
            ConfigKind::Bm25 { k1_milli, b_milli } => Some((f64::from(k1_milli) / 1000.0, f64::from(b_milli) / 1000.0)),
            ConfigKind::Vector(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_pg_textsearch_s_and_exact() {
        let config = IndexConfig::from_bm25_options(&Bm25Options::default()).unwrap();
        assert_eq!(config.kind, ConfigKind::Bm25 { k1_milli: 1200, b_milli: 750 });
        assert_eq!(config.bm25(), Some((1.2, 0.75)));
        assert_eq!(config.row_words(), TEXT_SLOT_WORDS as usize);
        assert_eq!(config.memtable_rows, 100_000);
        assert_eq!(Bm25Options::default().text_config(), "english");
    }

    #[test]
    fn values_are_checked() {
        let with = |k1, b| IndexConfig::from_bm25_options(&Bm25Options { k1, b, ..Bm25Options::default() });
        assert_eq!(with(Some(2.0), Some(0.0)).unwrap().bm25(), Some((2.0, 0.0)));
        assert_eq!(with(Some(0.125), Some(1.0)).unwrap().bm25(), Some((0.125, 1.0)));
        assert_eq!(
            with(Some(-1.0), None).unwrap_err().to_string(),
            "value -1 out of bounds for option \"k1\" (0 to 100)"
        );
        assert_eq!(with(None, Some(1.5)).unwrap_err().to_string(), "value 1.5 out of bounds for option \"b\" (0 to 1)");
        assert_eq!(
            with(Some(1.2345), None).unwrap_err().to_string(),
            "option \"k1\" takes at most three decimals, not 1.2345"
        );
        let slots = Bm25Options { memtable_slots: Some(10), ..Bm25Options::default() };
        assert!(IndexConfig::from_bm25_options(&slots).is_err());
    }
}
