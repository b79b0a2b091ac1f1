//! Every codec's bounded decompression on arbitrary bytes: an error or at most `limit` bytes.
use klog_core::batch::Compression;
use klog_core::compression::decompress;

const LIMIT: usize = 1 << 20;

pub fn check(input: &[u8]) {
    let Some((&which, data)) = input.split_first() else { return };
    let codec = match which % 4 {
        0 => Compression::Gzip,
        1 => Compression::Snappy,
        2 => Compression::Lz4,
        _ => Compression::Zstd,
    };
    if let Ok(out) = decompress(codec, data, LIMIT, 0) {
        assert!(out.len() <= LIMIT);
    }
}
