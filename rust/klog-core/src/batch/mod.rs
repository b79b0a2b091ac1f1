//! Kafka record batch, magic v2.
//!
//! `header` parses and validates the fixed 61-byte header and rewrites the fields the broker
//! owns (base offset, partition leader epoch) in place. Record-level encode/decode lives in
//! `records`; produce-time validation of a client's batch (Kafka's LogValidator) in `validate`;
//! the produce request's own checks and the header fields the broker reads from them, once, in
//! `produced`.

pub mod header;
pub mod produced;
pub mod recompress;
pub mod records;
pub mod validate;

pub use header::*;
pub use records::*;
