//! IVF index (in progress).
