//! Distance metrics supported by indexes and the SQL distance operators.

use serde::{Deserialize, Serialize};

use crate::kernels;

/// A distance metric. Smaller is always nearer, so every metric sorts ascending.
///
/// The discriminant is the metric's code wherever it is stored as a byte (a segment's META
/// section, shared memory, opclass support codes); the serde name is the one manifests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Metric {
    /// Squared Euclidean distance internally; SQL `<->` returns its square root (same order).
    #[serde(rename = "l2")]
    L2 = 0,
    /// Negative inner product (SQL `<#>`), so that larger similarity sorts first.
    #[serde(rename = "ip")]
    InnerProduct = 1,
    /// Cosine distance `1 - cos(a, b)` (SQL `<=>`), in `[0, 2]`; `NaN` when either vector is zero.
    #[serde(rename = "cosine")]
    Cosine = 2,
    /// Manhattan (taxicab) distance `Σ|aᵢ − bᵢ|` (SQL `<+>`). Only exact segment kinds (flat
    /// without quantization, HNSW) support it: quantized codes estimate inner products.
    #[serde(rename = "l1")]
    L1 = 3,
    /// Hamming distance between bit strings (SQL `<~>` on `bit`), over rows that hold each bit
    /// as an element `0` or `1`: there it is exactly `Σ|aᵢ − bᵢ|`, so the L1 kernels compute it
    /// (exactly: sums of ones below 2²⁴); over packed bit rows ([`crate::bit_rows`]) a popcount.
    /// No quantized codes: flat without bits, HNSW, and IVF of packed bit rows, whose lists keep
    /// the bits ([`crate::ivf::BitIvf`]).
    #[serde(rename = "hamming")]
    Hamming = 4,
    /// Jaccard distance between bit strings (SQL `<%>` on `bit`), over rows of `0`/`1` elements:
    /// `1 − a·b / (a·a + b·b − a·b)`, and `1` when no bit is set in both (pgvector's
    /// `jaccard_distance`). Segment kinds as for Hamming.
    #[serde(rename = "jaccard")]
    Jaccard = 5,
}

crate::try_from_code!(Metric, "metric");

impl Metric {
    /// Every metric, in code order.
    pub const ALL: [Metric; 6] =
        [Metric::L2, Metric::InnerProduct, Metric::Cosine, Metric::L1, Metric::Hamming, Metric::Jaccard];

    /// Whether quantized codes (`flat` with bits, IVF of numeric rows) can estimate this metric:
    /// they estimate inner products (and L2 from them), which says nothing about L1, Hamming or
    /// Jaccard. (IVF of packed bit rows has no codes: it orders by Hamming and Jaccard exactly.)
    pub fn quantizable(self) -> bool {
        !matches!(self, Metric::L1 | Metric::Hamming | Metric::Jaccard)
    }

    /// The ordering distance between `a` and `b` for this metric (both of equal length).
    ///
    /// For [`Metric::L2`] this is the *squared* distance: monotone in the true distance and
    /// cheaper to compute; use [`Metric::sql_distance`] to get the value SQL operators return.
    #[inline]
    pub fn distance(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            Metric::L2 => kernels::l2_squared(a, b),
            Metric::InnerProduct => -kernels::dot(a, b),
            Metric::Cosine => kernels::cosine_distance(a, b),
            Metric::L1 | Metric::Hamming => kernels::l1(a, b),
            Metric::Jaccard => jaccard_from(kernels::dot_and_norms(a, b)),
        }
    }

    /// Converts an ordering distance from [`Metric::distance`] to the value the SQL operator returns.
    #[inline]
    pub fn sql_distance(self, ordering_distance: f32) -> f64 {
        match self {
            Metric::L2 => f64::from(ordering_distance.max(0.0)).sqrt(),
            Metric::InnerProduct | Metric::Cosine | Metric::L1 | Metric::Hamming | Metric::Jaccard => {
                f64::from(ordering_distance)
            }
        }
    }

    /// The SQL operator that orders by this metric.
    pub fn operator(self) -> &'static str {
        match self {
            Metric::L2 => "<->",
            Metric::InnerProduct => "<#>",
            Metric::Cosine => "<=>",
            Metric::L1 => "<+>",
            Metric::Hamming => "<~>",
            Metric::Jaccard => "<%>",
        }
    }
}

/// Jaccard distance of two `0`/`1` rows from their dot product (set bits in both) and squared
/// norms (set bits in each): `1 − both / (in_a + in_b − both)`, `1` when `both` is zero.
#[inline]
pub fn jaccard_from(sums: kernels::DotAndNorms) -> f32 {
    if sums.dot <= 0.0 {
        return 1.0;
    }
    1.0 - sums.dot / (sums.norm_a + sums.norm_b - sums.dot)
}
