//! Integration tests: recover.
