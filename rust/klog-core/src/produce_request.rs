//! Sans-IO codec of whole Produce request frames (v3-v13) and of their answers, for the broker's
//! native Produce path (`klog/broker/native_produce.py`).
//!
//! The decoder borrows from the frame: topic names, client id and each partition's records are
//! slices of it. It never panics: any input it cannot read is a [`FrameError`], and the broker
//! then hands the frame to its Python path unchanged, which answers (or closes the connection)
//! as Kafka does. The encoder writes the bytes klog's Python encoder writes for the same answer
//! (`klog/protocol/messages.py::encode_response`); tests/test_native_produce_path.py compares
//! them byte for byte.


/// The Produce API key.
pub const PRODUCE_API_KEY: i16 = 0;
/// The first Produce version the native path serves (Kafka 4 removed v0-2, which klog refuses).
pub const MIN_NATIVE_VERSION: i16 = 3;
/// The last Produce version the native path serves (v12 has v11's layout: it only says the producer speaks
/// transaction protocol v2, which the broker's transaction check reads; v13 names topics by id).
pub const MAX_NATIVE_VERSION: i16 = 13;
/// Topics are named by id, not by name, from this version (KIP-516).
pub const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// Produce versions from this one are flexible (compact strings and arrays, tagged fields).
pub(crate) const FIRST_FLEXIBLE_VERSION: i16 = 9;
/// Each array entry takes at least this many bytes (a frame cannot hold more entries than bytes
/// anyway); it bounds the memory a forged count can ask for.
const MIN_ARRAY_ENTRY_BYTES: usize = 1;

pub use crate::wire::FrameError;
use crate::wire::{put_len, put_nullable_string, put_string, Reader};

/// One partition's data in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionData<'a> {
    pub index: i32,
    /// The partition's records (None: null).
    pub records: Option<&'a [u8]>,
}

/// One topic's data in a Produce request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicData<'a> {
    /// The topic's name ("" from v13, which names it by `topic_id`).
    pub name: &'a str,
    /// The topic's id from v13 (zeros before).
    pub topic_id: [u8; 16],
    pub partitions: Vec<PartitionData<'a>>,
}

/// A Produce request frame (without its size prefix), as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceFrame<'a> {
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
    pub transactional_id: Option<&'a str>,
    pub acks: i16,
    pub timeout_ms: i32,
    pub topics: Vec<TopicData<'a>>,
}

impl ProduceFrame<'_> {
    /// Whether this version's frames are flexible.
    pub fn flexible(&self) -> bool {
        self.api_version >= FIRST_FLEXIBLE_VERSION
    }
}

/// Read a Produce request frame (the bytes after the size prefix: header, then body). Versions
/// outside [`MIN_NATIVE_VERSION`]..=`max_version` (and other API keys) are [`FrameError::NotServed`].
pub fn decode_produce_frame(frame: &[u8], max_version: i16) -> Result<ProduceFrame<'_>, FrameError> {
    let mut r = Reader::new(frame);
    let api_key = r.i16("api_key")?;
    let api_version = r.i16("api_version")?;
    if api_key != PRODUCE_API_KEY
        || api_version < MIN_NATIVE_VERSION
        || api_version > max_version.min(MAX_NATIVE_VERSION)
    {
        return Err(FrameError::NotServed);
    }
    let flexible = api_version >= FIRST_FLEXIBLE_VERSION;
    let correlation_id = r.i32("correlation_id")?;
    // the header's client id is a classic nullable string in every header version
    let client_id = r.nullable_string(false, "client_id")?;
    if flexible {
        r.skip_tagged_fields("request header tagged fields")?;
    }
    let transactional_id = r.nullable_string(flexible, "transactional_id")?;
    let acks = r.i16("acks")?;
    let timeout_ms = r.i32("timeout_ms")?;
    let topic_count = r.array_len(flexible, MIN_ARRAY_ENTRY_BYTES, "topic_data")?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let (name, topic_id) = if api_version >= FIRST_TOPIC_ID_VERSION {
            ("", r.uuid("topic_data.topic_id")?)
        } else {
            (r.string(flexible, "topic_data.name")?, [0; 16])
        };
        let partition_count = r.array_len(flexible, MIN_ARRAY_ENTRY_BYTES, "partition_data")?;
        let mut partitions = Vec::with_capacity(partition_count);
        for _ in 0..partition_count {
            let index = r.i32("partition_data.index")?;
            let records = r.nullable_bytes(flexible, "partition_data.records")?;
            if flexible {
                r.skip_tagged_fields("partition_data tagged fields")?;
            }
            partitions.push(PartitionData { index, records });
        }
        if flexible {
            r.skip_tagged_fields("topic_data tagged fields")?;
        }
        topics.push(TopicData { name, topic_id, partitions });
    }
    if flexible {
        r.skip_tagged_fields("request tagged fields")?;
    }
    if r.remaining() != 0 {
        return Err(FrameError::TrailingBytes(r.remaining()));
    }
    if names_a_partition_twice(&topics) {
        return Err(FrameError::NotServed);
    }
    Ok(ProduceFrame { api_version, correlation_id, client_id, transactional_id, acks, timeout_ms, topics })
}

/// A partition named twice, in one topic entry or in two entries of its topic: the Python path's, which keys the
/// request's partitions as Kafka's `KafkaApis.handleProduceRequest` does (appended once, the last entry's records).
fn names_a_partition_twice(topics: &[TopicData<'_>]) -> bool {
    if topics.len() == 1 && topics[0].partitions.len() < 2 {
        return false;
    }
    let mut named: Vec<(&str, [u8; 16], i32)> =
        topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.name, t.topic_id, p.index))).collect();
    named.sort_unstable();
    named.windows(2).any(|w| w[0] == w[1])
}

/// One partition's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionAnswer {
    pub index: i32,
    pub error_code: i16,
    pub base_offset: i64,
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
}

/// A topic as a response names it: by name before v13, by id from v13.
pub type TopicKey<'a> = (&'a str, [u8; 16]);

/// The whole response frame (with its size prefix) answering `version`'s request
/// `correlation_id`: the topics in request order, each with its partitions' answers, no record
/// errors, no leader hints, throttle time 0 (the native path is not taken while a quota throttles).
pub fn encode_produce_response(version: i16, correlation_id: i32, topics: &[(TopicKey<'_>, Vec<PartitionAnswer>)]) -> Vec<u8> {
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let mut out = Vec::with_capacity(64 + topics.iter().map(|((n, _), p)| n.len() + 16 + 48 * p.len()).sum::<usize>());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        out.push(0); // response header v1: no tagged fields
    }
    put_len(&mut out, flexible, topics.len());
    for ((name, topic_id), partitions) in topics {
        if version >= FIRST_TOPIC_ID_VERSION {
            out.extend_from_slice(topic_id);
        } else {
            put_string(&mut out, flexible, name);
        }
        put_len(&mut out, flexible, partitions.len());
        for p in partitions {
            out.extend_from_slice(&p.index.to_be_bytes());
            out.extend_from_slice(&p.error_code.to_be_bytes());
            out.extend_from_slice(&p.base_offset.to_be_bytes());
            out.extend_from_slice(&p.log_append_time_ms.to_be_bytes());
            if version >= 5 {
                out.extend_from_slice(&p.log_start_offset.to_be_bytes());
            }
            if version >= 8 {
                put_len(&mut out, flexible, 0); // record_errors
                put_nullable_string(&mut out, flexible, p.error_message.as_deref());
            }
            if flexible {
                out.push(0);
            }
        }
        if flexible {
            out.push(0);
        }
    }
    out.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
    if flexible {
        out.push(0);
    }
    let size = (out.len() - 4) as i32;
    out[0..4].copy_from_slice(&size.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(version: i16, records: &[u8]) -> Vec<u8> {
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut f = Vec::new();
        f.extend_from_slice(&PRODUCE_API_KEY.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        put_nullable_string(&mut f, false, Some("cli"));
        if flexible {
            f.push(0);
        }
        put_nullable_string(&mut f, flexible, None);
        f.extend_from_slice(&1i16.to_be_bytes());
        f.extend_from_slice(&30000i32.to_be_bytes());
        put_len(&mut f, flexible, 1);
        if version >= FIRST_TOPIC_ID_VERSION {
            f.extend_from_slice(&[7; 16]);
        } else {
            put_string(&mut f, flexible, "t");
        }
        put_len(&mut f, flexible, 1);
        f.extend_from_slice(&2i32.to_be_bytes());
        put_len(&mut f, flexible, records.len());
        f.extend_from_slice(records);
        if flexible {
            f.extend_from_slice(&[0, 0, 0]);
        }
        f
    }

    #[test]
    fn every_served_version_decodes_its_fields() {
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            let bytes = frame(version, b"abc");
            let f = decode_produce_frame(&bytes, MAX_NATIVE_VERSION).unwrap();
            assert_eq!((f.api_version, f.correlation_id, f.client_id, f.acks, f.timeout_ms), (version, 7, Some("cli"), 1, 30000));
            assert_eq!(f.transactional_id, None);
            let (name, topic_id) = if version >= FIRST_TOPIC_ID_VERSION { ("", [7; 16]) } else { ("t", [0; 16]) };
            let partitions = vec![PartitionData { index: 2, records: Some(&b"abc"[..]) }];
            assert_eq!(f.topics, vec![TopicData { name, topic_id, partitions }]);
        }
    }

    #[test]
    fn versions_not_served_and_trailing_bytes_are_refused() {
        assert_eq!(decode_produce_frame(&frame(2, b""), MAX_NATIVE_VERSION), Err(FrameError::NotServed));
        assert_eq!(decode_produce_frame(&frame(9, b""), 8), Err(FrameError::NotServed));
        let mut bytes = frame(3, b"x");
        bytes.push(1);
        assert_eq!(decode_produce_frame(&bytes, MAX_NATIVE_VERSION), Err(FrameError::TrailingBytes(1)));
    }

    #[test]
    fn a_partition_named_twice_is_not_served() {
        let records = Some(&b"x"[..]);
        let topic = |name, indexes: &[i32]| TopicData {
            name,
            topic_id: [0; 16],
            partitions: indexes.iter().map(|&index| PartitionData { index, records }).collect(),
        };
        assert!(!names_a_partition_twice(&[topic("a", &[0, 1]), topic("b", &[0])]));
        assert!(names_a_partition_twice(&[topic("a", &[0, 1, 0])]));
        assert!(names_a_partition_twice(&[topic("a", &[1]), topic("b", &[0]), topic("a", &[1])]));
        // v13: topics named by id, all with the name ""
        let by_id = |id: u8, indexes: &[i32]| TopicData { topic_id: [id; 16], ..topic("", indexes) };
        assert!(!names_a_partition_twice(&[by_id(1, &[0]), by_id(2, &[0])]));
        assert!(names_a_partition_twice(&[by_id(1, &[0]), by_id(2, &[0]), by_id(1, &[0])]));
    }

    #[test]
    fn a_forged_array_count_is_refused_before_allocating() {
        let mut bytes = frame(3, b"x");
        // topic_data's count sits after header (2+2+4+2+3), transactional id (2), acks (2), timeout (4)
        let at = 2 + 2 + 4 + 2 + 3 + 2 + 2 + 4;
        bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_produce_frame(&bytes, MAX_NATIVE_VERSION), Err(FrameError::Truncated("topic_data")));
    }

    #[test]
    fn the_response_size_prefix_counts_the_rest() {
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            let answer = PartitionAnswer {
                index: 0,
                error_code: i16::default(),
                base_offset: 5,
                log_append_time_ms: -1,
                log_start_offset: 0,
                error_message: None,
            };
            let bytes = encode_produce_response(version, 9, &[(("t", [3; 16]), vec![answer])]);
            assert_eq!(i32::from_be_bytes(bytes[0..4].try_into().unwrap()) as usize, bytes.len() - 4);
            // the topic: its name before v13, its id from v13 (after the header: size, correlation id, tags)
            let at = if version >= FIRST_FLEXIBLE_VERSION { 4 + 4 + 1 + 1 } else { 4 + 4 + 4 };
            let topic: &[u8] = if version >= FIRST_TOPIC_ID_VERSION {
                &[3; 16]
            } else if version >= FIRST_FLEXIBLE_VERSION {
                b"\x02t"
            } else {
                b"\x00\x01t"
            };
            assert_eq!(&bytes[at..at + topic.len()], topic, "v{version}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_produce_frame(&bytes, MAX_NATIVE_VERSION);
        }

        #[test]
        fn any_mutation_of_a_valid_frame_never_panics(
            version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION,
            records in proptest::collection::vec(any::<u8>(), 0..64),
            at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = frame(version, &records);
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let n = cut.index(bytes.len() + 1);
            let _ = decode_produce_frame(&bytes[..n], MAX_NATIVE_VERSION);
            let _ = decode_produce_frame(&bytes, MAX_NATIVE_VERSION);
        }

        #[test]
        fn every_truncation_of_a_valid_frame_is_an_error(
            version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION,
            records in proptest::collection::vec(any::<u8>(), 0..64),
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = frame(version, &records);
            let n = cut.index(bytes.len());
            prop_assert!(decode_produce_frame(&bytes[..n], MAX_NATIVE_VERSION).is_err());
        }
    }
}
