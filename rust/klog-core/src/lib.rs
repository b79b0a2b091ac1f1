//! klog's native core, free of Python: everything here is testable with `cargo test`
//! and fuzzable without an interpreter. The PyO3 crate `klog-py` is a thin shell over it.

pub mod batch;
pub mod compression;
pub mod crc;
pub mod error;
pub mod groups;
pub mod storage;
pub mod varint;
pub mod murmur2;
pub mod columnar;
pub mod producer_batch;
pub mod produce_request;
pub mod wire;
pub mod fetch_request;
pub mod raft;
pub mod columnar_encode;
#[cfg(target_os = "linux")]
pub mod socket_writer;
pub mod front;
pub mod tls;
pub mod tls_p521;
