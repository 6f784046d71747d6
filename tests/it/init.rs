//! Integration tests: init.
