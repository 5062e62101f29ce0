//! HNSW graph index (in progress).
