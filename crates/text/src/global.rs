//! BM25 statistics gathered over several indexes (the shards of a distributed table) and carried
//! inside a query's text, so that every shard scores a row as one index over all the rows would.
//!
//! A shard reports, for one query, its live rows, their total length and each query lexeme's
//! live `df` ([`GlobalStats`] of one shard); the coordinator sums the reports ([`GlobalStats::merge`])
//! and prefixes the query text with the sum ([`GlobalStats::to_header`]). A shard that reads such a
//! text ([`GlobalStats::split`]) prepares the query with the carried statistics
//! ([`GlobalStats::prepare`]) instead of its own: `N`, `avgdl` and every `df` are then those of
//! the union of the shards, and so is every score (BM25 is a function of `tf`, `dl`, `N`,
//! `avgdl` and `df` only).
//!
//! The header is plain text so that it survives a query's deparsing into SQL:
//! `{strata-bm25 v1 config=HEX k1=F b=F docs=N len=N df=HEX:N,HEX:N} query text`, with the text
//! search configuration's name and each lexeme hex-encoded (UTF-8 bytes) and `k1`, `b` written
//! as Rust's shortest round-trip decimal. A text that does not start with a well-formed header
//! is a plain query.

use crate::error::TextError;
use crate::scoring::Bm25Params;
use crate::stats::{distinct_lexemes, Bm25Query, CollectionStats};

const PREFIX: &str = "{strata-bm25 v1 ";

/// Collection statistics for one query: of one index, or summed over several.
///
/// Guarantees: `dfs` is sorted by lexeme with no duplicates; `config`, `k1` and `b` are those of
/// every index the statistics came from ([`GlobalStats::merge`] refuses a mix).
#[derive(Debug, Clone, PartialEq)]
pub struct GlobalStats {
    /// The text search configuration the rows and the query are tokenised with (its name).
    pub config: String,
    /// BM25's parameters.
    pub params: Bm25Params,
    /// Live rows and their total length.
    pub stats: CollectionStats,
    /// Each query lexeme's live document frequency, by lexeme.
    pub dfs: Vec<(String, u64)>,
}

fn hex(text: &str) -> String {
    use std::fmt::Write as _;
    text.bytes().fold(String::with_capacity(2 * text.len()), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

impl GlobalStats {
    /// Statistics of one index for `lexemes` (duplicates count once): `dfs[i]` is the live `df`
    /// of `lexemes[i]`.
    pub fn new(
        config: &str,
        params: Bm25Params,
        stats: CollectionStats,
        lexemes: &[&str],
        dfs: &[u64],
    ) -> Result<Self, TextError> {
        if lexemes.len() != dfs.len() {
            return Err(TextError::Corrupt(format!(
                "{} lexemes with {} document frequencies",
                lexemes.len(),
                dfs.len()
            )));
        }
        let mut pairs: Vec<(String, u64)> =
            lexemes.iter().zip(dfs).filter(|(l, _)| !l.is_empty()).map(|(l, &df)| ((*l).to_owned(), df)).collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Ok(Self { config: config.to_owned(), params, stats, dfs: pairs })
    }

    /// The statistics of a query prepared against one index's sources.
    pub fn of_query(config: &str, query: &Bm25Query) -> Self {
        Self {
            config: config.to_owned(),
            params: query.params(),
            stats: query.stats(),
            dfs: query.terms().iter().map(|t| (t.lexeme.clone(), t.df)).collect(),
        }
    }

    /// The sum of `parts` (one per shard): rows, lengths and each lexeme's `df` added. Refuses
    /// parts with different configurations or parameters, and an empty list.
    pub fn merge(parts: &[GlobalStats]) -> Result<Self, TextError> {
        let first = parts.first().ok_or_else(|| TextError::Corrupt("no statistics to merge".into()))?;
        let mut out = GlobalStats { dfs: Vec::new(), stats: CollectionStats::default(), ..first.clone() };
        let mut dfs: std::collections::BTreeMap<String, u64> = std::collections::BTreeMap::new();
        for part in parts {
            if part.config != first.config || part.params != first.params {
                return Err(TextError::Corrupt(format!(
                    "shards disagree on the text configuration or BM25 parameters ({} k1={} b={} vs {} k1={} b={})",
                    first.config,
                    first.params.k1(),
                    first.params.b(),
                    part.config,
                    part.params.k1(),
                    part.params.b()
                )));
            }
            out.stats.add(part.stats);
            for (lexeme, df) in &part.dfs {
                *dfs.entry(lexeme.clone()).or_default() += df;
            }
        }
        out.dfs = dfs.into_iter().collect();
        Ok(out)
    }

    /// The header that [`GlobalStats::split`] reads back, ending in `"} "`.
    pub fn to_header(&self) -> String {
        let dfs: Vec<String> = self.dfs.iter().map(|(l, df)| format!("{}:{df}", hex(l))).collect();
        format!(
            "{PREFIX}config={} k1={} b={} docs={} len={} df={}}} ",
            hex(&self.config),
            self.params.k1(),
            self.params.b(),
            self.stats.docs,
            self.stats.total_len,
            dfs.join(",")
        )
    }

    /// Splits a query text into its header's statistics and the query proper; `None` when the
    /// text does not start with a well-formed header (a plain query).
    pub fn split(text: &str) -> Option<(GlobalStats, &str)> {
        let rest = text.strip_prefix(PREFIX)?;
        let end = rest.find('}')?;
        let (fields, query) = (&rest[..end], &rest[end + 1..]);
        let query = query.strip_prefix(' ').unwrap_or(query);
        let mut config = None;
        let (mut k1, mut b, mut docs, mut len, mut dfs) = (None, None, None, None, None);
        for field in fields.split(' ') {
            let (key, value) = field.split_once('=')?;
            match key {
                "config" => config = Some(unhex(value)?),
                "k1" => k1 = Some(value.parse::<f64>().ok()?),
                "b" => b = Some(value.parse::<f64>().ok()?),
                "docs" => docs = Some(value.parse::<u64>().ok()?),
                "len" => len = Some(value.parse::<u64>().ok()?),
                "df" => {
                    let mut pairs = Vec::new();
                    for pair in value.split(',').filter(|p| !p.is_empty()) {
                        let (lexeme, df) = pair.split_once(':')?;
                        pairs.push((unhex(lexeme)?, df.parse::<u64>().ok()?));
                    }
                    dfs = Some(pairs);
                }
                _ => return None,
            }
        }
        let params = Bm25Params::new(k1?, b?).ok()?;
        let stats = CollectionStats { docs: docs?, total_len: len? };
        let mut dfs = dfs?;
        dfs.sort_by(|a, b| a.0.cmp(&b.0));
        dfs.dedup_by(|a, b| a.0 == b.0);
        Some((GlobalStats { config: config?, params, stats, dfs }, query))
    }

    /// The query `lexemes` prepared with these statistics. A lexeme the statistics do not list
    /// is an error: they were gathered for another query.
    pub fn prepare<S: AsRef<str>>(&self, lexemes: impl IntoIterator<Item = S>) -> Result<Bm25Query, TextError> {
        let lexemes = distinct_lexemes(lexemes);
        let mut dfs = Vec::with_capacity(lexemes.len());
        for lexeme in &lexemes {
            let at = self
                .dfs
                .binary_search_by(|(l, _)| l.as_str().cmp(lexeme))
                .map_err(|_| TextError::Corrupt(format!("the carried statistics lack the lexeme {lexeme:?}")))?;
            dfs.push(self.dfs[at].1);
        }
        let refs: Vec<&str> = lexemes.iter().map(String::as_str).collect();
        Bm25Query::with_stats(&refs, &dfs, self.stats, self.params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::Memtable;
    use crate::Document;

    fn doc(words: &[&str]) -> Document {
        Document::from_tokens(words.iter().copied()).unwrap()
    }

    fn score(q: &Bm25Query, d: &Document) -> f64 {
        q.score_document(d)
    }

    fn corpus() -> Vec<Document> {
        let words = ["replic", "lag", "postgr", "vector", "index", "search", "shard", "node", "wal", "standbi"];
        (0..200u32)
            .map(|i| {
                let n = 1 + (i as usize * 7) % 9;
                let picked: Vec<&str> = (0..n).map(|j| words[(i as usize * 3 + j * j) % words.len()]).collect();
                doc(&picked)
            })
            .collect()
    }

    #[test]
    fn header_round_trips_odd_lexemes_and_parameters() {
        let params = Bm25Params::new(1.2, 0.75).unwrap();
        let stats = CollectionStats { docs: 100_000, total_len: 532_123 };
        let g =
            GlobalStats::new("public.my config", params, stats, &["lag", "r}é p,l:i=c", "lag"], &[5, 7, 5]).unwrap();
        let text = format!("{}what }} is {{this", g.to_header());
        let (back, query) = GlobalStats::split(&text).unwrap();
        assert_eq!(back, g);
        assert_eq!(query, "what } is {this");
        assert!(GlobalStats::split("replication lag").is_none());
        assert!(GlobalStats::split("{strata-bm25 v1 config=zz} q").is_none());
        assert!(GlobalStats::split("{strata-bm25 v1 config=61 k1=1 b=2 docs=1 len=1 df=} q").is_none(), "b > 1");
    }

    /// The oracle: scores of a query prepared with statistics merged from shards equal the
    /// scores of the same query prepared over one memtable holding every row.
    #[test]
    fn merged_shard_statistics_score_like_one_index() {
        let docs = corpus();
        let params = Bm25Params::new(1.2, 0.75).unwrap();
        let query = ["lag", "shard", "nowhere", "lag"];
        let mut whole = Memtable::new();
        let mut shards = [Memtable::new(), Memtable::new(), Memtable::new()];
        for (i, d) in docs.iter().enumerate() {
            whole.insert(i as u64, d).unwrap();
            shards[i % 3].insert(i as u64, d).unwrap();
        }
        let one = Bm25Query::prepare(&[crate::Source::memtable(&whole, None).unwrap()], query, params);
        let parts: Vec<GlobalStats> = shards
            .iter()
            .map(|m| {
                let q = Bm25Query::prepare(&[crate::Source::memtable(m, None).unwrap()], query, params);
                let header = GlobalStats::of_query("english", &q).to_header();
                GlobalStats::split(&format!("{header}x")).unwrap().0
            })
            .collect();
        let merged = GlobalStats::merge(&parts).unwrap();
        let distributed = merged.prepare(query).unwrap();
        assert_eq!(distributed.terms(), one.terms());
        assert_eq!(distributed.stats(), one.stats());
        for d in &docs {
            let a = score(&one, d);
            let b = score(&distributed, d);
            assert_eq!(a.to_bits(), b.to_bits());
        }
        // A shard's own statistics give other scores (what per-shard statistics get wrong).
        let local = Bm25Query::prepare(&[crate::Source::memtable(&shards[0], None).unwrap()], query, params);
        assert_ne!(local.terms()[0].idf.to_bits(), one.terms()[0].idf.to_bits());
    }

    #[test]
    fn merge_refuses_mixed_configurations_and_missing_lexemes() {
        let p = Bm25Params::new(1.2, 0.75).unwrap();
        let s = CollectionStats { docs: 1, total_len: 1 };
        let a = GlobalStats::new("english", p, s, &["a"], &[1]).unwrap();
        let b = GlobalStats::new("simple", p, s, &["a"], &[1]).unwrap();
        assert!(GlobalStats::merge(&[a.clone(), b]).is_err());
        assert!(GlobalStats::merge(&[]).is_err());
        assert!(a.prepare(["b"]).is_err());
        let merged = GlobalStats::merge(&[a.clone(), a]).unwrap();
        assert_eq!(merged.stats, CollectionStats { docs: 2, total_len: 2 });
        assert_eq!(merged.dfs, vec![("a".to_owned(), 2)]);
    }
}
