//! Vector quantization (in progress).
