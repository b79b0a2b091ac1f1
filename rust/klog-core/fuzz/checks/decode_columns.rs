//! The columnar decoder (the consumer's and the Spark source's fast path) on arbitrary input:
//! never panics, and agrees with the row decoder on how many records there are.
use klog_core::batch::{decode_all, DecodeOptions};
use klog_core::columnar::{decode_columns, ColumnarOptions};

pub fn check(input: &[u8]) {
    let data = super::common::reseal(input);
    let decode = DecodeOptions { max_decompressed_size: 1 << 20, ..DecodeOptions::fetch() };
    let opts = ColumnarOptions { decode, skip_control: false, min_offset: i64::MIN };
    if let Ok(cols) = decode_columns(&data, &opts) {
        if let Ok(rows) = decode_all(&data, &decode) {
            let n: usize = rows.iter().map(|(_, r)| r.len()).sum();
            assert_eq!(cols.num_rows(), n);
        }
    }
}
