//! Shared helpers for the end-to-end test binary in `it/`.
