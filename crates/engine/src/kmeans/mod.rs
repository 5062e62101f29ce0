//! k-means clustering (in progress).
