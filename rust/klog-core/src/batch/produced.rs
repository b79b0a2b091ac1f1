//! The batch of one Produce partition, read once for everything the broker does with it.
//!
//! [`accept_produced_batch`] applies the rules Kafka's `ProduceRequest.validateRecords` and the
//! broker's size check make of a partition's records (one magic-2 batch, zstd only from Produce
//! v7, at most the topic's `max.message.bytes`), then, unless record validation is switched off,
//! [`validate_parsed_batch`] (Kafka's LogValidator rules). What it returns, a [`ProducedBatch`],
//! carries the header fields the idempotent-producer check, the append and the response need:
//! the log appends it ([`crate::storage::partition_log::PartitionLog::append_produced`]) without
//! parsing the header again, and nobody reads the header bytes a second time.

use super::header::*;
use super::validate::{validate_parsed_batch, ProducePolicy, Rejection};
use crate::error::{CodecError, CodecResult};

/// What a Produce request asks of a partition's records besides the batch's own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceRequestRules {
    /// The request's version: zstd is refused before v7; the refusals name it.
    pub version: i16,
    /// The topic's `max.message.bytes`.
    pub max_message_bytes: i64,
}

/// A produced batch that passed the produce checks, with its header as they read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducedBatch {
    header: BatchHeader,
    /// The header bytes the checks read: the append writes these (with its offsets and epoch),
    /// so a caller's buffer changed since cannot put a header nobody checked on disk.
    header_bytes: [u8; RECORD_BATCH_OVERHEAD],
    /// When the checks walked the records and the header claims another max timestamp than
    /// their largest, or LogAppendTime on a CreateTime topic: the max timestamp the batch is
    /// stored with instead, as CreateTime (see [`super::validate::Validated::max_timestamp`]).
    max_timestamp_to_store: Option<i64>,
}

/// Kafka's `RecordBatch.NO_SEQUENCE`.
pub const NO_SEQUENCE: i32 = -1;
/// Sequence numbers wrap to 0 after `i32::MAX` (Kafka's `DefaultRecordBatch.incrementSequence`).
const SEQUENCE_MODULUS: i64 = 1 << 31;

impl ProducedBatch {
    pub fn header(&self) -> &BatchHeader {
        &self.header
    }

    pub fn header_bytes(&self) -> &[u8; RECORD_BATCH_OVERHEAD] {
        &self.header_bytes
    }

    /// The max timestamp the batch must be stored with, as CreateTime, in place of its header's:
    /// Kafka's LogValidator sets a CreateTime topic's batch to its records' largest timestamp;
    /// None: the header is right (or the records were not walked).
    pub fn max_timestamp_to_store(&self) -> Option<i64> {
        self.max_timestamp_to_store
    }

    /// The whole batch's size in bytes (the partition's records are exactly this batch).
    pub fn size(&self) -> usize {
        self.header.size()
    }

    /// The sequence number of the batch's last record, `NO_SEQUENCE` without a base sequence.
    pub fn last_sequence(&self) -> i32 {
        let h = &self.header;
        if h.base_sequence < 0 {
            return h.base_sequence;
        }
        ((h.base_sequence as i64 + h.last_offset_delta as i64) % SEQUENCE_MODULUS) as i32
    }

    /// `buffer` as the batch the checks accepted: an error when it is no longer that batch (a
    /// mutable buffer resized or its header rewritten since; its records are covered by the CRC,
    /// which the append verifies).
    pub fn bytes<'a>(&self, buffer: &'a [u8]) -> CodecResult<&'a [u8]> {
        if buffer.len() != self.size() || buffer[..RECORD_BATCH_OVERHEAD] != self.header_bytes {
            return Err(CodecError::invalid(
                "batch",
                0,
                format!("the {} bytes are not the batch of {} bytes that was validated", buffer.len(), self.size()),
            ));
        }
        Ok(buffer)
    }

    /// Check the CRC of `buffer`, this batch.
    pub fn verify_crc(&self, buffer: &[u8]) -> CodecResult<()> {
        verify_crc(self.bytes(buffer)?, &self.header, 0)
    }
}

/// Check and read the batch of one Produce partition (`batch`: the partition's whole records).
/// With `policy` the records are validated too ([`validate_parsed_batch`]; `OverBudget` when
/// `work_budget` is not enough to decide); without it only the request's rules and the header
/// are (`klog.produce.record.validation.enable=false`: the append checks counts and the CRC).
pub fn accept_produced_batch(
    batch: &[u8],
    rules: &ProduceRequestRules,
    policy: Option<&ProducePolicy>,
    work_budget: Option<usize>,
) -> Result<ProducedBatch, Rejection> {
    let mut produced = check_request_rules(batch, rules)?;
    if let Some(policy) = policy {
        let validated = validate_parsed_batch(batch, &produced.header, policy, work_budget)?;
        let h = &produced.header;
        produced.max_timestamp_to_store =
            validated.max_timestamp.filter(|&ts| ts != h.max_timestamp || h.is_log_append_time());
    }
    Ok(produced)
}

/// Kafka's `LegacyRecord.RECORD_OVERHEAD_V0`: the smallest length field a batch may have.
const LEGACY_RECORD_OVERHEAD_V0: i32 = 14;

/// Kafka's `ProduceRequest.validateRecords` and the broker's `max.message.bytes` check, in
/// Kafka's order, then the header.

fn check_request_rules(batch: &[u8], rules: &ProduceRequestRules) -> Result<ProducedBatch, Rejection> {
    let version = rules.version;
    let size = batch.len();
    let magic_2_only = || {
        Rejection::invalid(format!(
            "Produce requests with version {version} are only allowed to contain record batches with magic version 2"
        ))
    };
    // the first batch as Kafka's ByteBufferLogInputStream cuts it: fewer bytes than the log overhead, than the
    // header up to the magic or than the batch's length field says hold no batch at all; a length below the
    // smallest legacy record or a magic no Kafka wrote is corrupt
    let no_batch = || {
        Rejection::invalid(format!(
            "Produce requests with version {version} must have at least one record batch per partition"
        ))
    };
    if size < LOG_OVERHEAD {
        return Err(no_batch());
    }
    let length = read_i32(batch, LENGTH_OFFSET);
    if length < LEGACY_RECORD_OVERHEAD_V0 {
        return Err(Rejection::Corrupt(format!(
            "Record size {length} is less than the minimum record overhead ({LEGACY_RECORD_OVERHEAD_V0})"
        )));
    }
    if size <= MAGIC_OFFSET {
        return Err(no_batch());
    }
    let magic = batch[MAGIC_OFFSET] as i8;
    if !(0..=MAGIC_V2).contains(&magic) {
        return Err(Rejection::Corrupt(format!("Invalid magic found in record: {magic}")));
    }
    let batch_size = length as i64 + LOG_OVERHEAD as i64;
    if batch_size > size as i64 {
        return Err(no_batch());
    }
    if magic != MAGIC_V2 {
        return Err(magic_2_only());
    }
    if batch_size < RECORD_BATCH_OVERHEAD as i64 {
        return Err(Rejection::Corrupt(format!(
            "Record batch is corrupt (the size {batch_size} is smaller than the minimum allowed overhead {RECORD_BATCH_OVERHEAD})"
        )));
    }
    let header_bytes: [u8; RECORD_BATCH_OVERHEAD] =
        batch[..RECORD_BATCH_OVERHEAD].try_into().expect("the header is RECORD_BATCH_OVERHEAD bytes");
    let attributes = read_i16(&header_bytes, ATTRIBUTES_OFFSET);
    if version < 7 && attributes & ATTR_COMPRESSION_MASK == Compression::Zstd as i16 {
        return Err(Rejection::UnsupportedCompression(
            "Produce requests with version lower than 7 may not use ZStandard compression".into(),
        ));
    }
    if batch_size != size as i64 {
        return Err(Rejection::invalid(format!(
            "Produce requests with version {version} are only allowed to contain exactly one record batch per partition"
        )));
    }
    if batch_size > rules.max_message_bytes {
        return Err(Rejection::TooLarge(format!(
            "The record batch is {batch_size} bytes, larger than the topic's max.message.bytes {}",
            rules.max_message_bytes
        )));
    }
    let header = BatchHeader::parse(batch, 0).map_err(|e| Rejection::Corrupt(e.to_string()))?;
    Ok(ProducedBatch { header, header_bytes, max_timestamp_to_store: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::records::{write_batch_header, BatchWriter, EncodeOptions};

    const RULES: ProduceRequestRules = ProduceRequestRules { version: 9, max_message_bytes: 1 << 20 };

    fn encode(records: usize, o: EncodeOptions) -> Vec<u8> {
        let mut w = BatchWriter::new(o);
        for i in 0..records {
            w.append::<&[u8], &[u8]>(1_000 + i as i64, Some(b"k"), Some(b"value"), &[]).unwrap();
        }
        w.finish().unwrap()
    }

    fn batch(records: usize, compression: Compression) -> Vec<u8> {
        encode(records, EncodeOptions { compression, ..Default::default() })
    }

    fn idempotent(records: usize, compression: Compression, producer_id: i64, producer_epoch: i16,
                  base_sequence: i32) -> Vec<u8> {
        encode(records, EncodeOptions { compression, producer_id, producer_epoch, base_sequence, ..Default::default() })
    }

    fn refusal(b: &[u8], rules: &ProduceRequestRules) -> (String, String) {
        let kind = |r: &Rejection| match r {
            Rejection::Corrupt(_) => "corrupt",
            Rejection::InvalidRecord { .. } => "invalid_record",
            Rejection::InvalidTimestamp { .. } => "invalid_timestamp",
            Rejection::UnsupportedCompression(_) => "unsupported_compression",
            Rejection::TooLarge(_) => "too_large",
            Rejection::OverBudget => "over_budget",
        };
        let r = accept_produced_batch(b, rules, Some(&ProducePolicy::default()), None).unwrap_err();
        (kind(&r).to_string(), r.message().to_string())
    }

    #[test]
    fn the_header_fields_are_read_once_for_the_producer_check_the_append_and_the_response() {
        let b = idempotent(3, Compression::Lz4, 77, 5, 40);
        let p = accept_produced_batch(&b, &RULES, Some(&ProducePolicy::default()), None).unwrap();
        let h = p.header();
        assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence, p.last_sequence()), (77, 5, 40, 42));
        assert_eq!((h.records_count, h.last_offset_delta, h.max_timestamp), (3, 2, 1_002));
        assert_eq!((h.compression(0).unwrap(), h.is_transactional(), p.size()), (Compression::Lz4, false, b.len()));
        assert_eq!(p.header_bytes()[..], b[..RECORD_BATCH_OVERHEAD]);
    }

    #[test]
    fn the_last_sequence_wraps_after_the_largest_int32_and_stays_unset_without_a_base_sequence() {
        let b = idempotent(3, Compression::None, 7, 0, i32::MAX - 1);
        assert_eq!(accept_produced_batch(&b, &RULES, None, None).unwrap().last_sequence(), 0);
        let b = batch(3, Compression::None);
        assert_eq!(accept_produced_batch(&b, &RULES, None, None).unwrap().last_sequence(), NO_SEQUENCE);
    }

    #[test]
    fn the_request_rules_refuse_with_kafkas_codes_and_messages() {
        let good = batch(2, Compression::None);
        let invalid = |m: &str| ("invalid_record".to_string(), m.to_string());
        assert_eq!(refusal(&[], &RULES), invalid("Produce requests with version 9 must have at least one record batch per partition"));
        let none = invalid("Produce requests with version 9 must have at least one record batch per partition");
        // Kafka's batch iterator: too few bytes for the length field, the magic or the length hold no batch
        for cut in [11, 16, 30, good.len() - 1] {
            assert_eq!(refusal(&good[..cut], &RULES), none, "{cut} bytes");
        }
        let mut short = good.clone();
        short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&13i32.to_be_bytes());
        assert_eq!(refusal(&short, &RULES), ("corrupt".into(), "Record size 13 is less than the minimum record overhead (14)".into()));
        short[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&40i32.to_be_bytes());
        assert_eq!(
            refusal(&short, &RULES),
            ("corrupt".into(), "Record batch is corrupt (the size 52 is smaller than the minimum allowed overhead 61)".into())
        );
        let mut magic_3 = good.clone();
        magic_3[MAGIC_OFFSET] = 3;
        assert_eq!(refusal(&magic_3, &RULES), ("corrupt".into(), "Invalid magic found in record: 3".into()));
        let mut old_magic = good.clone();
        old_magic[MAGIC_OFFSET] = 1;
        let magic_2 = invalid("Produce requests with version 9 are only allowed to contain record batches with magic version 2");
        assert_eq!(refusal(&old_magic, &RULES), magic_2);
        assert_eq!(refusal(&old_magic[..30], &RULES), none);
        let zstd = batch(2, Compression::Zstd);
        assert_eq!(
            refusal(&zstd, &ProduceRequestRules { version: 6, ..RULES }),
            ("unsupported_compression".into(), "Produce requests with version lower than 7 may not use ZStandard compression".into())
        );
        assert!(accept_produced_batch(&zstd, &ProduceRequestRules { version: 7, ..RULES }, None, None).is_ok());
        assert_eq!(
            refusal(&[good.clone(), good.clone()].concat(), &RULES),
            invalid("Produce requests with version 9 are only allowed to contain exactly one record batch per partition")
        );
        let limit = ProduceRequestRules { max_message_bytes: good.len() as i64 - 1, ..RULES };
        assert_eq!(
            refusal(&good, &limit),
            ("too_large".into(), format!("The record batch is {} bytes, larger than the topic's max.message.bytes {}", good.len(), good.len() - 1))
        );
    }

    #[test]
    fn without_a_policy_only_the_request_rules_and_the_header_are_checked() {
        let mut forged = vec![0u8; RECORD_BATCH_OVERHEAD + 5];
        // nine records promised, five bytes of them
        write_batch_header(&mut forged, &EncodeOptions::default(), 9, 0, 0).unwrap();
        assert!(accept_produced_batch(&forged, &RULES, None, None).is_ok());
        assert_eq!(refusal(&forged, &RULES).0, "invalid_record");
    }

    #[test]
    fn a_buffer_changed_since_it_was_checked_is_not_taken_for_the_checked_batch() {
        let b = batch(2, Compression::None);
        let p = accept_produced_batch(&b, &RULES, None, None).unwrap();
        assert!(p.bytes(&b).is_ok() && p.verify_crc(&b).is_ok());
        let mut longer = b.clone();
        longer[LENGTH_OFFSET + 3] += 1;
        longer.push(0);
        assert!(p.bytes(&longer).is_err());
        let mut body_changed = b.clone();
        *body_changed.last_mut().unwrap() ^= 1;
        assert!(p.bytes(&body_changed).is_ok());
        assert!(matches!(p.verify_crc(&body_changed), Err(CodecError::CrcMismatch { .. })));
    }
}
