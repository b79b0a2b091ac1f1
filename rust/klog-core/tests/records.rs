//! Record batch encode/decode: round trips, Kafka-exact layout, and corruption handling.

use klog_core::batch::*;
use klog_core::compression::XERIAL_MAGIC;
use klog_core::crc::crc32c;
use klog_core::error::CodecError;
use proptest::prelude::*;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn rec(
    ts: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> RecordIn<Vec<u8>> {
    RecordIn {
        timestamp: ts,
        key: key.map(|k| k.to_vec()),
        value: value.map(|v| v.to_vec()),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.map(|v| v.to_vec())))
            .collect(),
    }
}

fn sample_records() -> Vec<RecordIn<Vec<u8>>> {
    vec![
        rec(
            1_700_000_000_000,
            Some(b"k1"),
            Some(b"v1"),
            &[("h", Some(b"x")), ("n", None), ("e", Some(b""))],
        ),
        rec(1_700_000_000_005, None, Some(b""), &[]),
        rec(
            1_699_999_999_990,
            Some(b""),
            None,
            &[("\u{e9}t\u{e9}", Some(b"\x00\xff"))],
        ),
        rec(1_700_000_000_001, None, None, &[]),
    ]
}

fn decode_one(buf: &[u8]) -> (BatchHeader, Vec<DecodedRecord>) {
    let mut all = decode_all(buf, &DecodeOptions::default()).unwrap();
    assert_eq!(all.len(), 1);
    all.pop().unwrap()
}

#[test]
fn null_and_empty_keys_values_and_headers_round_trip_for_every_codec() {
    let records = sample_records();
    for codec in CODECS {
        let opts = EncodeOptions {
            compression: codec,
            base_offset: 42,
            ..Default::default()
        };
        let buf = encode_batch(&records, &opts).unwrap();
        let (h, got) = decode_one(&buf);
        assert_eq!(h.compression(0).unwrap(), codec);
        assert_eq!(h.records_count, 4);
        assert_eq!(h.last_offset_delta, 3);
        assert_eq!(h.base_timestamp, 1_700_000_000_000);
        assert_eq!(h.max_timestamp, 1_700_000_000_005);
        for (i, (want, got)) in records.iter().zip(&got).enumerate() {
            assert_eq!(got.offset, 42 + i as i64);
            assert_eq!(got.timestamp, want.timestamp);
            assert_eq!(got.key, want.key);
            assert_eq!(got.value, want.value);
            assert_eq!(got.headers, want.headers);
        }
    }
}

#[test]
fn header_layout_matches_kafka_offsets() {
    let opts = EncodeOptions {
        base_offset: 0x0102_0304_0506_0708,
        partition_leader_epoch: 7,
        producer_id: 1234,
        producer_epoch: 5,
        base_sequence: 99,
        is_transactional: true,
        ..Default::default()
    };
    let buf = encode_batch(&[rec(1000, Some(b"a"), Some(b"b"), &[])], &opts).unwrap();
    assert_eq!(&buf[0..8], &0x0102_0304_0506_0708i64.to_be_bytes());
    assert_eq!(
        i32::from_be_bytes(buf[8..12].try_into().unwrap()) as usize,
        buf.len() - 12
    );
    assert_eq!(&buf[12..16], &7i32.to_be_bytes());
    assert_eq!(buf[16], 2);
    assert_eq!(
        u32::from_be_bytes(buf[17..21].try_into().unwrap()),
        crc32c(&buf[21..])
    );
    assert_eq!(&buf[21..23], &0x10i16.to_be_bytes());
    assert_eq!(&buf[43..51], &1234i64.to_be_bytes());
    assert_eq!(&buf[51..53], &5i16.to_be_bytes());
    assert_eq!(&buf[53..57], &99i32.to_be_bytes());
    assert_eq!(&buf[57..61], &1i32.to_be_bytes());
    // Record: length 8 (zig-zag 16), attrs 0, ts delta 0, offset delta 0, key len 1 (zz 2) 'a',
    // value len 1 'b', 0 headers.
    assert_eq!(&buf[61..], &[16, 0, 0, 0, 2, b'a', 2, b'b', 0]);
}

#[test]
fn rewriting_base_offset_and_leader_epoch_keeps_the_crc_valid() {
    let mut buf = encode_batch(&sample_records(), &EncodeOptions::default()).unwrap();
    set_base_offset(&mut buf, 1_000_000);
    set_partition_leader_epoch(&mut buf, 12);
    let (h, recs) = decode_one(&buf);
    assert_eq!(h.base_offset, 1_000_000);
    assert_eq!(h.partition_leader_epoch, 12);
    assert_eq!(recs[3].offset, 1_000_003);
}

#[test]
fn log_append_time_batches_report_max_timestamp_for_every_record() {
    let mut buf = encode_batch(&sample_records(), &EncodeOptions::default()).unwrap();
    set_log_append_time(&mut buf, 5_000);
    let (h, recs) = decode_one(&buf);
    assert!(h.is_log_append_time());
    assert!(recs.iter().all(|r| r.timestamp == 5_000));
}

#[test]
fn control_batches_are_recognised_and_their_key_parsed() {
    let (key, value) = end_txn_marker(CONTROL_TYPE_COMMIT, 3);
    let opts = EncodeOptions {
        is_control: true,
        is_transactional: true,
        producer_id: 9,
        producer_epoch: 1,
        ..Default::default()
    };
    let buf = encode_batch(
        &[RecordIn::<&[u8]> {
            timestamp: 1,
            key: Some(&key),
            value: Some(&value),
            headers: vec![],
        }],
        &opts,
    )
    .unwrap();
    let b = open_batch(&buf, 0, &DecodeOptions::default()).unwrap();
    assert!(b.is_control() && b.is_transactional());
    assert_eq!(b.validate_records().unwrap(), Some(CONTROL_TYPE_COMMIT));

    // A control batch whose key is too short is rejected.
    let bad = encode_batch(
        &[RecordIn::<&[u8]> {
            timestamp: 1,
            key: Some(&key[..3]),
            value: None,
            headers: vec![],
        }],
        &opts,
    )
    .unwrap();
    let err = open_batch(&bad, 0, &DecodeOptions::default())
        .unwrap()
        .validate_records()
        .unwrap_err();
    assert!(err.to_string().contains("control_record.key"), "{err}");
}

#[test]
fn snappy_batches_are_xerial_framed_and_raw_snappy_is_read_too() {
    let records = sample_records();
    let buf = encode_batch(
        &records,
        &EncodeOptions {
            compression: Compression::Snappy,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(&buf[61..69], &XERIAL_MAGIC);
    // Re-encode the same records section as raw snappy (librdkafka style).
    let plain = encode_batch(&records, &EncodeOptions::default()).unwrap();
    let raw = snap::raw::Encoder::new()
        .compress_vec(&plain[61..])
        .unwrap();
    let mut b = plain[..61].to_vec();
    b.extend_from_slice(&raw);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    b[21..23].copy_from_slice(&2i16.to_be_bytes());
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    let (_, got) = decode_one(&b);
    assert_eq!(got.len(), 4);
    assert_eq!(got[0].value.as_deref(), Some(&b"v1"[..]));
}

/// Rewrite the CRC so that a deliberately broken field reaches the check behind the CRC.
fn fix_crc(b: &mut [u8]) {
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

#[test]
fn each_header_validation_names_its_field_and_offset() {
    let good = encode_batch(&sample_records(), &EncodeOptions::default()).unwrap();
    let two: Vec<u8> = [good.clone(), good.clone()].concat();
    let at = good.len(); // errors in the second batch must report its position

    let check = |buf: &[u8], field: &str, offset: usize| {
        let err = decode_all(buf, &DecodeOptions::default()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(field), "expected {field} in {msg}");
        assert_eq!(err.offset(), offset, "{msg}");
    };

    let mut b = two.clone();
    b[at + 16] = 1;
    check(&b, "batch.magic", at + 16);

    let mut b = two.clone();
    b[at + 70] ^= 0x55;
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(
        matches!(err, CodecError::CrcMismatch { offset, .. } if offset == at),
        "{err}"
    );

    let mut b = two.clone();
    b[at + 23..at + 27].copy_from_slice(&5i32.to_be_bytes());
    fix_crc(&mut b[at..]);
    check(&b, "batch.records_count", at + 57);

    let mut b = two.clone();
    b[at + 21..at + 23].copy_from_slice(&7i16.to_be_bytes());
    fix_crc(&mut b[at..]);
    check(&b, "attributes.compression", at + 21);

    let mut b = two.clone();
    b[at + 8..at + 12].copy_from_slice(&10i32.to_be_bytes());
    check(&b, "batch.length", at + 8);

    // Truncated second batch: strict mode errors, fetch mode ignores it.
    let cut = &two[..two.len() - 5];
    check(cut, "batch", at);
    let fetched = decode_all(cut, &DecodeOptions::fetch()).unwrap();
    assert_eq!(fetched.len(), 1);
    assert_eq!(
        decode_all(&two[..at + 7], &DecodeOptions::fetch())
            .unwrap()
            .len(),
        1
    );
    check(&two[..at + 7], "batch.length", at);
}

#[test]
fn record_level_corruption_is_reported_at_the_record() {
    let good = encode_batch(
        &[rec(1, Some(b"key"), Some(b"value"), &[("h", Some(b"v"))])],
        &EncodeOptions::default(),
    )
    .unwrap();
    // Record starts at 61: length varint (1 byte), attrs, ts delta, offset delta, key len @65.
    let mut b = good.clone();
    b[65] = 0x7e; // key length 63: runs past the record
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("record.key"), "{err}");
    assert_eq!(err.offset(), 66);

    let mut b = good.clone();
    b[61] += 2; // record length one larger than its fields
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("record"), "{err}");

    let mut b = good.clone();
    b[64] = 2; // offset delta 1 for the first record
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("record.offset_delta"), "{err}");
    assert_eq!(err.offset(), 61);

    // Trailing bytes after the last record.
    let mut b = good.clone();
    b.push(0);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("batch.records"), "{err}");
    assert_eq!(err.offset(), b.len() - 1);
}

#[test]
fn corruption_inside_compressed_records_names_field_and_decompressed_position() {
    let records = vec![rec(1, Some(b"key"), Some(b"value"), &[])];
    let plain = encode_batch(&records, &EncodeOptions::default()).unwrap();
    let mut section = plain[61..].to_vec();
    section[4] = 0x7e; // key length too large
    let comp = klog_core::compression::compress(Compression::Zstd, &section).unwrap();
    let mut b = plain[..61].to_vec();
    b.extend_from_slice(&comp);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    b[21..23].copy_from_slice(&4i16.to_be_bytes());
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("record.key")
            && msg.contains("zstd-decompressed")
            && msg.contains("at byte 5"),
        "{msg}"
    );
    assert_eq!(err.offset(), 61);
}

#[test]
fn compacted_batches_need_allow_compacted() {
    // Records with offset deltas 0 and 2, LastOffsetDelta 2, count 2: what the cleaner writes.
    let mut w = BatchWriter::new(EncodeOptions::default());
    w.append::<&[u8], &[u8]>(1, Some(b"a"), Some(b"1"), &[])
        .unwrap();
    w.append::<&[u8], &[u8]>(1, Some(b"b"), Some(b"2"), &[])
        .unwrap();
    let mut b = w.finish().unwrap();
    // Second record starts at 61 + 1 + its length; its offset delta is its 4th byte.
    let second = 61 + 1 + (b[61] as usize / 2);
    b[second + 3] = 4; // zig-zag 2
    b[23..27].copy_from_slice(&2i32.to_be_bytes());
    fix_crc(&mut b);
    assert!(decode_all(&b, &DecodeOptions::default()).is_err());
    let opts = DecodeOptions {
        allow_compacted: true,
        ..Default::default()
    };
    let got = decode_all(&b, &opts).unwrap();
    assert_eq!(
        got[0].1.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 2]
    );
}

#[test]
fn decompression_bombs_are_refused() {
    let big = vec![0u8; 4 << 20];
    let records = vec![rec(1, None, Some(&big), &[])];
    for codec in &CODECS[1..] {
        let buf = encode_batch(
            &records,
            &EncodeOptions {
                compression: *codec,
                ..Default::default()
            },
        )
        .unwrap();
        let opts = DecodeOptions {
            max_decompressed_size: 1 << 20,
            ..Default::default()
        };
        let err = decode_all(&buf, &opts).unwrap_err();
        assert!(err.to_string().contains("limit"), "{codec:?}: {err}");
    }
}

#[test]
fn forged_record_counts_are_refused_before_allocating() {
    let mut b = encode_batch(&[rec(1, None, None, &[])], &EncodeOptions::default()).unwrap();
    b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    b[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    fix_crc(&mut b);
    let err = decode_all(&b, &DecodeOptions::default()).unwrap_err();
    assert!(err.to_string().contains("cannot fit"), "{err}");
}

#[test]
fn empty_batches_cannot_be_encoded() {
    let none: Vec<RecordIn<Vec<u8>>> = vec![];
    assert!(encode_batch(&none, &EncodeOptions::default()).is_err());
}

fn arb_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::of(prop::collection::vec(any::<u8>(), 0..40))
}

fn arb_record() -> impl Strategy<Value = RecordIn<Vec<u8>>> {
    (
        any::<i64>(),
        arb_bytes(),
        arb_bytes(),
        prop::collection::vec(("[a-z\u{e9}]{0,6}", arb_bytes()), 0..4),
    )
        .prop_map(|(timestamp, key, value, headers)| RecordIn {
            timestamp,
            key,
            value,
            headers: headers
                .into_iter()
                .map(|(k, v)| (k.into_bytes(), v))
                .collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn any_records_round_trip(records in prop::collection::vec(arb_record(), 1..20),
                              codec in 0usize..5, base_offset in 0i64..i64::MAX / 2) {
        let opts = EncodeOptions { compression: CODECS[codec], base_offset, ..Default::default() };
        let buf = encode_batch(&records, &opts).unwrap();
        let (_, got) = decode_one(&buf);
        prop_assert_eq!(got.len(), records.len());
        for (i, (w, g)) in records.iter().zip(&got).enumerate() {
            prop_assert_eq!(g.offset, base_offset + i as i64);
            prop_assert_eq!(g.timestamp, w.timestamp);
            prop_assert_eq!(&g.key, &w.key);
            prop_assert_eq!(&g.value, &w.value);
            prop_assert_eq!(&g.headers, &w.headers);
        }
    }

    #[test]
    fn mutated_or_truncated_batches_error_and_never_panic(records in prop::collection::vec(arb_record(), 1..6),
                                                          codec in 0usize..5,
                                                          flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
                                                          cut in any::<prop::sample::Index>(),
                                                          recrc in any::<bool>()) {
        let opts = EncodeOptions { compression: CODECS[codec], ..Default::default() };
        let buf = encode_batch(&records, &opts).unwrap();
        let mut m = buf.clone();
        for (i, x) in &flips { let i = i.index(m.len()); m[i] ^= x; }
        if recrc && m.len() >= 61 { fix_crc(&mut m); }
        // Any outcome but a panic is acceptable for mutations that keep the batch valid
        // (e.g. flipped key bytes under a fixed CRC); unchanged CRC must catch the rest.
        let r = decode_all(&m, &DecodeOptions::default());
        if !recrc && m[17..] != buf[17..] {
            prop_assert!(r.is_err());
        }
        if let Err(e) = r { prop_assert!(e.offset() <= m.len()); }
        let t = &buf[..1 + cut.index(buf.len() - 1)];
        prop_assert!(decode_all(t, &DecodeOptions::default()).is_err());
        prop_assert_eq!(decode_all(t, &DecodeOptions::fetch()).unwrap().len(), 0);
    }
}
