//! [`Document`]: one row's lexemes with their term frequencies, as the glue hands them over
//! (PostgreSQL's `to_tsvector` output: each lexeme with its number of positions).

use crate::error::TextError;

/// One document, normalised: distinct lexemes in byte order, each with a term frequency ≥ 1,
/// and a length `dl` ≥ the sum of the term frequencies.
///
/// Guarantees: [`Document::terms`] is sorted by lexeme, has no duplicates and no zero
/// frequencies; duplicate lexemes given to a constructor are summed, zero frequencies dropped.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Document {
    terms: Vec<(String, u32)>,
    length: u32,
}

impl Document {
    /// A document whose length is the total number of lexeme occurrences (the sum of the term
    /// frequencies), as the scoring pins `dl`.
    pub fn new<S: Into<String>>(terms: impl IntoIterator<Item = (S, u32)>) -> Result<Self, TextError> {
        let terms = normalise(terms)?;
        let occurrences: u64 = terms.iter().map(|t| u64::from(t.1)).sum();
        let length = u32::try_from(occurrences).map_err(|_| TextError::TooLarge("document length"))?;
        Ok(Self { terms, length })
    }

    /// A document with an explicit length (for a caller that counts `dl` differently, e.g. with
    /// stop words); refused when `length` is below the sum of the term frequencies.
    pub fn with_length<S: Into<String>>(
        terms: impl IntoIterator<Item = (S, u32)>,
        length: u32,
    ) -> Result<Self, TextError> {
        let terms = normalise(terms)?;
        let occurrences: u64 = terms.iter().map(|t| u64::from(t.1)).sum();
        if u64::from(length) < occurrences {
            return Err(TextError::LengthTooSmall { length: u64::from(length), occurrences });
        }
        Ok(Self { terms, length })
    }

    /// A document from a list of tokens, each occurrence once (tests, examples).
    pub fn from_tokens<S: AsRef<str>>(tokens: impl IntoIterator<Item = S>) -> Result<Self, TextError> {
        Self::new(tokens.into_iter().map(|t| (t.as_ref().to_owned(), 1)))
    }

    /// Distinct lexemes in byte order with their term frequencies (each ≥ 1).
    pub fn terms(&self) -> &[(String, u32)] {
        &self.terms
    }

    /// The document length `dl`.
    pub fn length(&self) -> u32 {
        self.length
    }
}

impl Document {
    /// The length of [`Document::to_words`]'s row, without making it.
    pub fn word_count(&self) -> usize {
        2 + self.terms.iter().map(|(t, _)| 2 + t.len().div_ceil(4)).sum::<usize>()
    }

    /// The document as memtable row words (a span row of strata-lsm's memtables):
    /// `dl`, the number of lexemes, then per lexeme in byte order its `tf`, its byte length
    /// and its bytes packed four per word, little-endian, the last word zero-padded.
    /// [`Document::from_words`] gives back an equal document.
    pub fn to_words(&self) -> Vec<u32> {
        let bytes: usize = self.terms.iter().map(|(t, _)| t.len().div_ceil(4)).sum();
        let mut words = Vec::with_capacity(2 + 2 * self.terms.len() + bytes);
        words.push(self.length);
        words.push(u32::try_from(self.terms.len()).expect("lexeme counts fit in u32"));
        for (term, tf) in &self.terms {
            words.push(*tf);
            words.push(u32::try_from(term.len()).expect("lexemes are shorter than 4 GiB"));
            words.extend(term.as_bytes().chunks(4).map(|chunk| {
                let mut word = [0u8; 4];
                word[..chunk.len()].copy_from_slice(chunk);
                u32::from_le_bytes(word)
            }));
        }
        words
    }

    /// Decodes [`Document::to_words`]'s row; every inconsistency (truncation, trailing words, a
    /// lexeme that is empty, not UTF-8, out of order or repeated, a zero `tf`, a length below the
    /// occurrences) is a typed error, never a panic.
    pub fn from_words(words: &[u32]) -> Result<Self, TextError> {
        let mut rest = words;
        let mut next = |what: &'static str| -> Result<u32, TextError> {
            let (&first, tail) = rest.split_first().ok_or(TextError::CorruptRow(what))?;
            rest = tail;
            Ok(first)
        };
        let length = next("truncated before the length")?;
        let count = next("truncated before the lexeme count")? as usize;
        let mut terms: Vec<(String, u32)> = Vec::with_capacity(count.min(words.len()));
        for _ in 0..count {
            let tf = next("truncated before a term frequency")?;
            let bytes = next("truncated before a lexeme length")? as usize;
            let mut term = Vec::with_capacity(bytes.min(4 * words.len()));
            for _ in 0..bytes.div_ceil(4) {
                term.extend_from_slice(&next("truncated inside a lexeme")?.to_le_bytes());
            }
            if term[bytes..].iter().any(|&b| b != 0) {
                return Err(TextError::CorruptRow("non-zero padding after a lexeme"));
            }
            term.truncate(bytes);
            let term = String::from_utf8(term).map_err(|_| TextError::CorruptRow("a lexeme is not UTF-8"))?;
            if tf == 0 || term.is_empty() || terms.last().is_some_and(|(last, _)| *last >= term) {
                return Err(TextError::CorruptRow("lexemes out of order, repeated, empty or with tf 0"));
            }
            terms.push((term, tf));
        }
        if !rest.is_empty() {
            return Err(TextError::CorruptRow("words after the last lexeme"));
        }
        Self::with_length(terms, length)
    }
}

fn normalise<S: Into<String>>(terms: impl IntoIterator<Item = (S, u32)>) -> Result<Vec<(String, u32)>, TextError> {
    let mut terms: Vec<(String, u32)> = terms.into_iter().map(|(t, f)| (t.into(), f)).filter(|t| t.1 > 0).collect();
    if terms.iter().any(|t| t.0.is_empty()) {
        return Err(TextError::EmptyLexeme);
    }
    terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out: Vec<(String, u32)> = Vec::with_capacity(terms.len());
    for (term, tf) in terms {
        match out.last_mut() {
            Some(last) if last.0 == term => {
                last.1 = last.1.checked_add(tf).ok_or(TextError::TooLarge("term frequency"))?;
            }
            _ => out.push((term, tf)),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_summed_and_zeros_dropped() {
        let doc = Document::new([("b", 2), ("a", 1), ("b", 3), ("c", 0)]).unwrap();
        assert_eq!(doc.terms(), &[("a".to_owned(), 1), ("b".to_owned(), 5)]);
        assert_eq!(doc.length(), 6);
    }

    #[test]
    fn row_words_round_trip_and_damage_is_an_error() {
        let doc = Document::with_length([("replication", 2), ("lag", 1), ("é", 1), ("abcd", 3)], 9).unwrap();
        assert_eq!(doc.word_count(), doc.to_words().len());
        assert_eq!(Document::new::<&str>([]).unwrap().word_count(), 2);
        let words = doc.to_words();
        assert_eq!(Document::from_words(&words).unwrap(), doc);
        assert_eq!(Document::from_words(&Document::default().to_words()).unwrap(), Document::default());
        for cut in 0..words.len() {
            assert!(matches!(Document::from_words(&words[..cut]), Err(TextError::CorruptRow(_))), "cut {cut}");
        }
        let mut longer = words.clone();
        longer.push(0);
        assert!(Document::from_words(&longer).is_err());
        let mut short = words.clone();
        short[0] = 1;
        assert!(matches!(Document::from_words(&short), Err(TextError::LengthTooSmall { .. })));
        let mut zero_tf = words.clone();
        zero_tf[2] = 0;
        assert!(Document::from_words(&zero_tf).is_err());
        let mut huge_count = words;
        huge_count[1] = u32::MAX;
        assert!(Document::from_words(&huge_count).is_err());
    }

    #[test]
    fn explicit_length_must_cover_the_occurrences() {
        assert!(Document::with_length([("a", 3)], 5).is_ok());
        assert!(matches!(Document::with_length([("a", 3)], 2), Err(TextError::LengthTooSmall { .. })));
        assert!(matches!(Document::new([("", 1)]), Err(TextError::EmptyLexeme)));
    }
}
