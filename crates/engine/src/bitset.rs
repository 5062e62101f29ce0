//! A dense, fixed-length bitset over row offsets: the form of filter ("allowed rows") and deletion
//! bitmaps that segment searches take.
//!
//! Dense because segments are searched by row offset `0..len`: a membership test is one shift and
//! mask, and the on-disk form of a deletion bitmap is simply its little-endian words.

/// A fixed-length set of row offsets `0..len`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bitset {
    words: Vec<u64>,
    len: usize,
}

impl Bitset {
    /// An empty set over `len` rows.
    pub fn new(len: usize) -> Self {
        Self { words: vec![0; len.div_ceil(64)], len }
    }

    /// A set holding every row `0..len`.
    pub fn full(len: usize) -> Self {
        let mut set = Self { words: vec![u64::MAX; len.div_ceil(64)], len };
        set.clear_tail();
        set
    }

    /// Builds a set over `len` rows from little-endian words (as stored on disk); bits at or
    /// beyond `len` are ignored. Returns `None` when `words` is too short for `len`.
    pub fn from_words(words: Vec<u64>, len: usize) -> Option<Self> {
        if words.len() < len.div_ceil(64) {
            return None;
        }
        let mut set = Self { words, len };
        set.words.truncate(len.div_ceil(64));
        set.clear_tail();
        Some(set)
    }

    fn clear_tail(&mut self) {
        let rem = self.len % 64;
        if rem != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << rem) - 1;
            }
        }
    }

    /// The number of rows the set ranges over (not the number of members).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set ranges over no rows.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `row` is a member; rows beyond `len` are never members.
    #[inline]
    pub fn contains(&self, row: usize) -> bool {
        row < self.len && (self.words[row / 64] >> (row % 64)) & 1 == 1
    }

    /// Adds `row`.
    ///
    /// # Panics
    /// When `row >= len`.
    #[inline]
    pub fn insert(&mut self, row: usize) {
        assert!(row < self.len, "row {row} outside a bitset of {} rows", self.len);
        self.words[row / 64] |= 1 << (row % 64);
    }

    /// Removes `row` (no effect when absent or out of range).
    #[inline]
    pub fn remove(&mut self, row: usize) {
        if row < self.len {
            self.words[row / 64] &= !(1 << (row % 64));
        }
    }

    /// The number of members.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(index, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(index * 64 + bit)
            })
        })
    }

    /// The backing words, little-endian bit order within each word (bit `i % 64` of word `i / 64`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// In-place union with `other` (which must range over the same rows).
    pub fn union_with(&mut self, other: &Bitset) {
        assert_eq!(self.len, other.len, "bitsets over different row ranges");
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }
}

/// Which rows a search may return: those in `filter` (all rows when `None`) and not in `deleted`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RowPredicate<'a> {
    /// Allowed rows; `None` allows every row.
    pub filter: Option<&'a Bitset>,
    /// Deleted rows, never returned.
    pub deleted: Option<&'a Bitset>,
}

impl RowPredicate<'_> {
    /// Whether `row` may be returned.
    #[inline]
    pub fn accepts(&self, row: usize) -> bool {
        self.filter.is_none_or(|f| f.contains(row)) && !self.deleted.is_some_and(|d| d.contains(row))
    }

    /// Whether every row is accepted (no filter, nothing deleted).
    pub fn accepts_all(&self) -> bool {
        self.filter.is_none() && self.deleted.is_none_or(|d| d.count() == 0)
    }

    /// The number of accepted rows among `0..len`.
    pub fn count_accepted(&self, len: usize) -> usize {
        match (self.filter, self.deleted) {
            (None, None) => len,
            (None, Some(deleted)) => len - deleted.iter().filter(|&r| r < len).count(),
            (Some(filter), _) => filter.iter().filter(|&r| r < len && self.accepts(r)).count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn behaves_like_a_sorted_set(len in 0usize..300, members in prop::collection::btree_set(0usize..300, 0..100)) {
            let mut set = Bitset::new(len);
            let expected: Vec<usize> = members.iter().copied().filter(|&m| m < len).collect();
            for &m in &expected {
                set.insert(m);
            }
            prop_assert_eq!(set.iter().collect::<Vec<_>>(), expected.clone());
            prop_assert_eq!(set.count(), expected.len());
            for row in 0..len + 5 {
                prop_assert_eq!(set.contains(row), expected.contains(&row));
            }
            let round_trip = Bitset::from_words(set.words().to_vec(), len).unwrap();
            prop_assert_eq!(round_trip, set);
        }
    }

    #[test]
    fn full_and_predicates() {
        let full = Bitset::full(130);
        assert_eq!(full.count(), 130);
        assert!(!full.contains(130));
        let mut deleted = Bitset::new(130);
        deleted.insert(5);
        let mut filter = Bitset::new(130);
        filter.insert(5);
        filter.insert(6);
        let predicate = RowPredicate { filter: Some(&filter), deleted: Some(&deleted) };
        assert!(!predicate.accepts(5) && predicate.accepts(6) && !predicate.accepts(7));
        assert_eq!(predicate.count_accepted(130), 1);
        assert_eq!(RowPredicate { filter: None, deleted: Some(&deleted) }.count_accepted(130), 129);
        assert!(Bitset::from_words(vec![u64::MAX], 65).is_none());
        assert_eq!(Bitset::from_words(vec![u64::MAX, u64::MAX], 65).unwrap().count(), 65);
    }
}
