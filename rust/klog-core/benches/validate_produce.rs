//! The cost of validating 1 MB uncompressed produce batches of 10 B and 100 B values (keyless,
//! one timestamp, no headers: what `benches/bench_broker.py::test_produce_validation_cost`
//! sends), per batch and per record, against a CRC-32C of the same bytes (which the append
//! computes anyway). A figure, not a check: `cargo bench -p klog-core --bench validate_produce`.

use std::hint::black_box;
use std::time::Instant;

use klog_core::batch::validate::{validate_produce_batch, ProducePolicy};
use klog_core::batch::{encode_batch, EncodeOptions, RecordIn, ATTRIBUTES_OFFSET};
use klog_core::crc::crc32c;

const NOW: i64 = 1_700_000_000_000;
/// Single runs timed; the fastest counts (the machine is shared: it is the least disturbed).
const RUNS: usize = 400;

fn fastest(f: &dyn Fn()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..RUNS {
        let started = Instant::now();
        f();
        best = best.min(started.elapsed().as_secs_f64());
    }
    best
}

fn main() {
    let policy = ProducePolicy { now_ms: NOW, verify_crc: false, ..Default::default() };
    for value_size in [10usize, 100] {
        let n = 1_000_000 / (value_size + 10);
        let records: Vec<RecordIn<Vec<u8>>> = (0..n)
            .map(|i| RecordIn { timestamp: NOW, key: None, value: Some(vec![(i % 251) as u8; value_size]), headers: Vec::new() })
            .collect();
        let batch = encode_batch(&records, &EncodeOptions::default()).unwrap();
        let walk = fastest(&|| {
            black_box(validate_produce_batch(black_box(&batch), &policy, None).unwrap());
        });
        let crc = fastest(&|| {
            black_box(crc32c(black_box(&batch[ATTRIBUTES_OFFSET..])));
        });
        println!(
            "{value_size} B values, {n} records, {} bytes: validation {:.3} ms ({:.2} ns a record), crc32c {:.3} ms",
            batch.len(),
            walk * 1e3,
            walk * 1e9 / n as f64,
            crc * 1e3
        );
    }
}
