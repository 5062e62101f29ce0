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
    fn explicit_length_must_cover_the_occurrences() {
        assert!(Document::with_length([("a", 3)], 5).is_ok());
        assert!(matches!(Document::with_length([("a", 3)], 2), Err(TextError::LengthTooSmall { .. })));
        assert!(matches!(Document::new([("", 1)]), Err(TextError::EmptyLexeme)));
    }
}
