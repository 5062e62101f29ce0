//! Distance metrics supported by indexes and the SQL distance operators.

use crate::kernels;

/// A distance metric. Smaller is always nearer, so every metric sorts ascending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Squared Euclidean distance internally; SQL `<->` returns its square root (same order).
    L2,
    /// Negative inner product (SQL `<#>`), so that larger similarity sorts first.
    InnerProduct,
    /// Cosine distance `1 - cos(a, b)` (SQL `<=>`), in `[0, 2]`; `NaN` when either vector is zero.
    Cosine,
}

impl Metric {
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
        }
    }

    /// Converts an ordering distance from [`Metric::distance`] to the value the SQL operator returns.
    #[inline]
    pub fn sql_distance(self, ordering_distance: f32) -> f64 {
        match self {
            Metric::L2 => f64::from(ordering_distance.max(0.0)).sqrt(),
            Metric::InnerProduct | Metric::Cosine => f64::from(ordering_distance),
        }
    }

    /// The SQL operator that orders by this metric.
    pub fn operator(self) -> &'static str {
        match self {
            Metric::L2 => "<->",
            Metric::InnerProduct => "<#>",
            Metric::Cosine => "<=>",
        }
    }
}
