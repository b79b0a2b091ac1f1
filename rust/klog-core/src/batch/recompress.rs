//! Broker-side recompression of a produced batch to its topic's `compression.type`, as Kafka's
//! `LogValidator` does when the producer's codec differs from the topic's.
//!
//! The records section is decompressed (bounded) and compressed again with the topic's codec;
//! the header keeps every field the producer set (producer id, epoch, base sequence, the
//! transactional bit, timestamps, counts) and gets the new codec in its attributes, the new
//! length and a CRC computed over the new bytes. The records themselves are not rewritten: the
//! produce checks already require offset deltas 0, 1, 2, ..., which is what Kafka's rebuilt batch
//! holds. The base offset is the log's to assign when it appends. Control batches are never
//! recompressed (Kafka writes them uncompressed whatever the topic says). The producer's CRC is
//! verified first, so a corrupted batch is refused (CORRUPT_MESSAGE) instead of being given a
//! fresh, valid CRC.

use super::header::*;
use super::produced::ProducedBatch;
use super::validate::Rejection;
use crate::compression::{compress_into, decompress, is_over_limit_reason};
use crate::crc::crc32c;
use crate::error::CodecError;

/// A topic's `compression.type` resolved to a codec (`producer` is `None`: keep the batch as sent)
/// and its level (`compression.gzip.level`/`compression.zstd.level`; `None` = the codec's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetCodec {
    pub codec: Compression,
    pub level: Option<i32>,
}

/// Whether a batch with header `h` must be recompressed to `target` before it is appended:
/// its codec differs and it is not a control batch.
pub fn needs_recompression(h: &BatchHeader, target: &TargetCodec) -> bool {
    !h.is_control() && h.attributes & ATTR_COMPRESSION_MASK != target.codec as i16
}

/// The batch `batch` (header `h`, `batch.len() == h.size()`) recompressed to `target`.
/// `max_decompressed_bytes` bounds the records section once decompressed (beyond it: CORRUPT_MESSAGE,
/// as the validator answers); `work_budget`, when smaller, makes a larger batch answer `OverBudget`
/// (recompress again without a budget, off the event loop).
pub fn recompress_batch(
    batch: &[u8],
    h: &BatchHeader,
    target: &TargetCodec,
    max_decompressed_bytes: usize,
    work_budget: Option<usize>,
) -> Result<Vec<u8>, Rejection> {
    let corrupt = |e: CodecError| Rejection::Corrupt(e.to_string());
    if batch.len() != h.size() || batch.len() < RECORD_BATCH_OVERHEAD {
        return Err(Rejection::Corrupt(format!(
            "record batch declares {} bytes but {} were sent",
            h.size(),
            batch.len()
        )));
    }
    let source = h.compression(0).map_err(corrupt)?;
    let records = &batch[RECORD_BATCH_OVERHEAD..];
    let budget = work_budget.filter(|b| *b < max_decompressed_bytes);
    if source == Compression::None && budget.is_some_and(|b| records.len() > b) {
        return Err(Rejection::OverBudget);
    }
    verify_crc(batch, h, 0).map_err(corrupt)?;
    let limit = budget.unwrap_or(max_decompressed_bytes);
    let plain = match source {
        Compression::None => None,
        codec => Some(decompress(codec, records, limit, 0).map_err(|e| match &e {
            CodecError::Compression { reason, .. } if budget.is_some() && is_over_limit_reason(reason) => {
                Rejection::OverBudget
            }
            _ => corrupt(e),
        })?),
    };
    let plain = plain.as_deref().unwrap_or(records);
    let mut out = Vec::with_capacity(RECORD_BATCH_OVERHEAD + plain.len() / 2 + 64);
    out.extend_from_slice(&batch[..RECORD_BATCH_OVERHEAD]);
    compress_into(target.codec, plain, target.level, &mut out).map_err(corrupt)?;
    let length = out.len() - LOG_OVERHEAD;
    if length > MAX_BATCH_SIZE {
        return Err(Rejection::TooLarge(format!("the recompressed batch of {} bytes is too large", out.len())));
    }
    let attributes = (h.attributes & !ATTR_COMPRESSION_MASK) | target.codec as i16;
    out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&(length as i32).to_be_bytes());
    out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    let crc = crc32c(&out[ATTRIBUTES_OFFSET..]);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(out)
}

/// The bytes the log stores for a produced batch (`batch`, accepted as `produced`) that Kafka's
/// LogValidator would not store as sent: recompressed to the topic's codec (`target`, see
/// [`recompress_batch`]) and/or given its records' largest timestamp as its max timestamp
/// ([`ProducedBatch::max_timestamp_to_store`]; a header claiming another, or LogAppendTime on a
/// CreateTime topic, is rewritten as Kafka's `setMaxTimestamp(CREATE_TIME, max)` does, so
/// retention, time-based rolls and ListOffsets see the records' time).
/// `None`: the batch is stored as sent. The producer's CRC is verified before either rewrite.
pub fn rewrite_produced_batch(
    batch: &[u8],
    produced: &ProducedBatch,
    target: Option<&TargetCodec>,
    max_decompressed_bytes: usize,
    work_budget: Option<usize>,
) -> Result<Option<Vec<u8>>, Rejection> {
    let h = produced.header();
    let max_timestamp = produced.max_timestamp_to_store();
    let mut out = match target {
        Some(target) if needs_recompression(h, target) => {
            recompress_batch(batch, h, target, max_decompressed_bytes, work_budget)?
        }
        _ if max_timestamp.is_some() => {
            verify_crc(batch, h, 0).map_err(|e| Rejection::Corrupt(e.to_string()))?;
            batch.to_vec()
        }
        _ => return Ok(None),
    };
    if let Some(ts) = max_timestamp {
        let attributes = read_i16(&out, ATTRIBUTES_OFFSET) & !ATTR_TIMESTAMP_TYPE;
        out[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
        out[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8].copy_from_slice(&ts.to_be_bytes());
        let crc = crc32c(&out[ATTRIBUTES_OFFSET..]);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::records::{decode_all, BatchWriter, DecodeOptions, EncodeOptions};
    use crate::compression::DEFAULT_MAX_DECOMPRESSED_SIZE;
    use proptest::prelude::*;

    const CODECS: [Compression; 5] =
        [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

    fn target(codec: Compression) -> TargetCodec {
        TargetCodec { codec, level: None }
    }

    fn encode(values: &[Vec<u8>], o: EncodeOptions) -> Vec<u8> {
        let mut w = BatchWriter::new(o);
        for (i, v) in values.iter().enumerate() {
            let key = format!("key-{i}");
            w.append::<&[u8], &[u8]>(1_000 + i as i64, Some(key.as_bytes()), Some(v), &[(b"h", Some(b"v"))])
                .unwrap();
        }
        w.finish().unwrap()
    }

    fn recompress(b: &[u8], codec: Compression) -> Result<Vec<u8>, Rejection> {
        let h = BatchHeader::parse(b, 0).unwrap();
        recompress_batch(b, &h, &target(codec), DEFAULT_MAX_DECOMPRESSED_SIZE, None)
    }

    fn records(b: &[u8]) -> Vec<(BatchHeader, Vec<crate::batch::records::DecodedRecord>)> {
        decode_all(b, &DecodeOptions::default()).unwrap()
    }

    /// A header claiming another max timestamp than its records' largest is stored with theirs
    /// (and a CRC over it), recompressed or not; a right one is stored as sent.
    #[test]
    fn a_header_claiming_another_max_timestamp_is_stored_with_the_records_largest() {
        use crate::batch::produced::{accept_produced_batch, ProduceRequestRules};
        use crate::batch::validate::ProducePolicy;
        let rules = ProduceRequestRules { version: 9, max_message_bytes: i64::MAX };
        let values = vec![b"x".repeat(50); 5];
        for codec in CODECS {
            let right = encode(&values, EncodeOptions { compression: codec, ..Default::default() });
            let produced = accept_produced_batch(&right, &rules, Some(&ProducePolicy::default()), None).unwrap();
            assert_eq!(rewrite_produced_batch(&right, &produced, None, DEFAULT_MAX_DECOMPRESSED_SIZE, None), Ok(None));
            for claimed in [-1, 1, 5_000] {
                let b = encode(&values, EncodeOptions { compression: codec, max_timestamp: Some(claimed), ..Default::default() });
                let produced = accept_produced_batch(&b, &rules, Some(&ProducePolicy::default()), None).unwrap();
                for to in [None, Some(target(Compression::Zstd))] {
                    let out = rewrite_produced_batch(&b, &produced, to.as_ref(), DEFAULT_MAX_DECOMPRESSED_SIZE, None)
                        .unwrap()
                        .unwrap();
                    let (h, recs) = records(&out).remove(0);
                    assert_eq!(h.max_timestamp, 1_004, "{codec:?} {claimed} {to:?}");
                    assert_eq!(recs, records(&b).remove(0).1);
                }
            }
        }
    }

    #[test]
    fn every_codec_pair_keeps_the_records_and_the_producer_fields_and_carries_the_new_codec() {
        let values: Vec<Vec<u8>> = (0..50).map(|i| format!("value {i} ").repeat(20).into_bytes()).collect();
        for from in CODECS {
            for to in CODECS {
                let o = EncodeOptions {
                    compression: from,
                    producer_id: 42,
                    producer_epoch: 3,
                    base_sequence: 17,
                    is_transactional: true,
                    ..Default::default()
                };
                let b = encode(&values, o);
                let out = recompress(&b, to).unwrap();
                let h = validate_batch(&out, 0).expect("a valid batch with a CRC over its new bytes");
                let before = BatchHeader::parse(&b, 0).unwrap();
                assert_eq!(h.compression(0).unwrap(), to, "{from:?} -> {to:?}");
                assert_eq!(
                    (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional()),
                    (42, 3, 17, true)
                );
                assert_eq!(
                    (h.records_count, h.last_offset_delta, h.base_timestamp, h.max_timestamp),
                    (before.records_count, before.last_offset_delta, before.base_timestamp, before.max_timestamp)
                );
                assert_eq!(records(&out)[0].1, records(&b)[0].1);
            }
        }
    }

    #[test]
    fn only_a_differing_codec_of_a_data_batch_is_recompressed() {
        let b = encode(&[b"v".to_vec()], EncodeOptions { compression: Compression::Lz4, ..Default::default() });
        let h = BatchHeader::parse(&b, 0).unwrap();
        assert!(!needs_recompression(&h, &target(Compression::Lz4)));
        assert!(needs_recompression(&h, &target(Compression::Zstd)));
        let control = encode(&[b"v".to_vec()], EncodeOptions { is_control: true, ..Default::default() });
        let h = BatchHeader::parse(&control, 0).unwrap();
        assert!(!needs_recompression(&h, &target(Compression::Gzip)));
    }

    #[test]
    fn a_batch_with_a_wrong_crc_is_corrupt_not_given_a_new_crc() {
        let mut b = encode(&[b"value".to_vec()], EncodeOptions::default());
        *b.last_mut().unwrap() ^= 1;
        assert!(matches!(recompress(&b, Compression::Gzip), Err(Rejection::Corrupt(_))));
    }

    #[test]
    fn a_truncated_compressed_section_is_corrupt() {
        for codec in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
            let mut b = encode(&[b"value".repeat(100)], EncodeOptions { compression: codec, ..Default::default() });
            b.truncate(RECORD_BATCH_OVERHEAD + (b.len() - RECORD_BATCH_OVERHEAD) / 2);
            let length = (b.len() - LOG_OVERHEAD) as i32;
            b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
            let crc = crc32c(&b[ATTRIBUTES_OFFSET..]);
            b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            let to = if codec == Compression::Gzip { Compression::Zstd } else { Compression::Gzip };
            assert!(matches!(recompress(&b, to), Err(Rejection::Corrupt(_))), "{codec:?}");
        }
    }

    #[test]
    fn a_section_over_the_decompression_bound_is_corrupt_and_over_the_work_budget_is_deferred() {
        let b = encode(&[vec![b'x'; 100_000]], EncodeOptions { compression: Compression::Zstd, ..Default::default() });
        let h = BatchHeader::parse(&b, 0).unwrap();
        let t = target(Compression::Gzip);
        assert!(matches!(recompress_batch(&b, &h, &t, 10_000, None), Err(Rejection::Corrupt(_))));
        assert_eq!(recompress_batch(&b, &h, &t, 1 << 20, Some(10_000)), Err(Rejection::OverBudget));
        assert!(recompress_batch(&b, &h, &t, 1 << 20, Some(1 << 19)).is_ok());
        let plain = encode(&[vec![b'x'; 100_000]], EncodeOptions::default());
        let h = BatchHeader::parse(&plain, 0).unwrap();
        assert_eq!(recompress_batch(&plain, &h, &t, 1 << 20, Some(10_000)), Err(Rejection::OverBudget));
    }

    #[test]
    fn the_codec_level_is_applied() {
        // text with some entropy: zstd level 19 finds more than level 1
        let mut seed = 7u64;
        let words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"];
        let text: Vec<u8> = (0..20_000)
            .flat_map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("{} {} ", words[(seed >> 33) as usize % words.len()], (seed >> 40) % 1000).into_bytes()
            })
            .collect();
        let b = encode(&[text], EncodeOptions::default());
        let h = BatchHeader::parse(&b, 0).unwrap();
        let at = |level| {
            recompress_batch(&b, &h, &TargetCodec { codec: Compression::Zstd, level: Some(level) },
                             DEFAULT_MAX_DECOMPRESSED_SIZE, None).unwrap()
        };
        let (fast, best) = (at(1), at(19));
        assert!(best.len() < fast.len(), "level 19: {} bytes, level 1: {}", best.len(), fast.len());
        assert_eq!(records(&fast)[0].1, records(&best)[0].1);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_after_a_valid_header_never_panic(
            body in proptest::collection::vec(any::<u8>(), 0..400),
            from in 0usize..5, to in 0usize..5,
        ) {
            let mut b = encode(&[b"v".to_vec()], EncodeOptions { compression: CODECS[from], ..Default::default() });
            b.truncate(RECORD_BATCH_OVERHEAD);
            b.extend_from_slice(&body);
            let length = (b.len() - LOG_OVERHEAD) as i32;
            b[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
            let crc = crc32c(&b[ATTRIBUTES_OFFSET..]);
            b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            let h = BatchHeader::parse(&b, 0).unwrap();
            let _ = recompress_batch(&b, &h, &target(CODECS[to]), 1 << 16, Some(1 << 12));
        }

        #[test]
        fn records_survive_any_codec_pair(
            values in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20),
            from in 0usize..5, to in 0usize..5,
        ) {
            let b = encode(&values, EncodeOptions { compression: CODECS[from], ..Default::default() });
            let out = recompress(&b, CODECS[to]).unwrap();
            prop_assert_eq!(records(&out)[0].1.clone(), records(&b)[0].1.clone());
        }
    }
}
