//! Sans-IO codec of whole Fetch request frames (v4-v18, every version klog advertises) and of
//! their answers, for the broker's native Fetch path (`klog/broker/native_fetch.py`).
//!
//! The decoder borrows from the frame (topic names, client id, rack id are slices of it). It never
//! panics: any input it cannot read is a [`FrameError`], and the broker then hands the frame to its
//! Python path unchanged, which answers (or closes the connection) as Kafka does. The encoder writes
//! the bytes klog's Python encoder writes for the same answer (`klog/protocol/messages.py::
//! encode_response`), as a list of pieces: bytes, and the records of each partition as a region of
//! a segment file (sent with sendfile) or as bytes; tests/test_native_fetch_path.py compares the
//! two paths' answers byte for byte.

pub use crate::wire::FrameError;
use crate::wire::{put_len, put_uvarint, Reader};

/// The Fetch API key.
pub const FETCH_API_KEY: i16 = 1;
/// The first Fetch version the native path reads (Kafka 4 removed v0-3, which klog refuses).
pub const MIN_NATIVE_VERSION: i16 = 4;
/// The last Fetch version the native path reads (v17 adds the replica directory id, v18 a high
/// watermark, both tagged fields of a partition that a broker ignores as Kafka's does: read past).
pub const MAX_NATIVE_VERSION: i16 = 18;
/// Fetch versions from this one are flexible (compact strings and arrays, tagged fields).
const FIRST_FLEXIBLE_VERSION: i16 = 12;
/// Topics are named by id from this version (KIP-516).
pub const FIRST_TOPIC_ID_VERSION: i16 = 13;
/// The replica's id moved from the body to the tagged `replica_state` in this version.
const FIRST_REPLICA_STATE_VERSION: i16 = 15;
/// The request's tagged fields the decoder reads.
const TAG_CLUSTER_ID: u32 = 0;
const TAG_REPLICA_STATE: u32 = 1;

/// A topic as a request names it: by name before v13, by id from v13.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopicRef<'a> {
    Name(&'a str),
    Id([u8; 16]),
}

/// One partition a Fetch asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub partition: i32,
    pub current_leader_epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
    pub partition_max_bytes: i32,
}

/// One topic a Fetch asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchTopic<'a> {
    pub topic: TopicRef<'a>,
    pub partitions: Vec<FetchPartition>,
}

/// A topic whose partitions an incremental fetch drops from its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForgottenTopic<'a> {
    pub topic: TopicRef<'a>,
    pub partitions: Vec<i32>,
}

/// A Fetch request frame (without its size prefix), as read. Fields a version lacks hold Kafka's
/// defaults (as klog's Python decoder gives them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchFrame<'a> {
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<&'a str>,
    /// The tagged cluster id (v12+), None when absent or null.
    pub cluster_id: Option<&'a str>,
    /// The fetching replica: the body's `replica_id` before v15, the tagged `replica_state`'s from
    /// v15 (-1: a consumer).
    pub replica_id: i32,
    pub replica_epoch: i64,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic<'a>>,
    pub forgotten: Vec<ForgottenTopic<'a>>,
    pub rack_id: &'a str,
}

impl FetchFrame<'_> {
    /// Whether this version's frames are flexible.
    pub fn flexible(&self) -> bool {
        self.api_version >= FIRST_FLEXIBLE_VERSION
    }
    /// The partitions asked for, over all topics.
    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }
}

impl<'a> Reader<'a> {
    fn topic(&mut self, version: i16, flexible: bool, field: &'static str) -> Result<TopicRef<'a>, FrameError> {
        if version >= FIRST_TOPIC_ID_VERSION {
            Ok(TopicRef::Id(self.uuid(field)?))
        } else {
            Ok(TopicRef::Name(self.string(flexible, field)?))
        }
    }
}

/// Read a Fetch request frame (the bytes after the size prefix: header, then body). Versions
/// outside [`MIN_NATIVE_VERSION`]..=`max_version` (and other API keys) are [`FrameError::NotServed`].
pub fn decode_fetch_frame(frame: &[u8], max_version: i16) -> Result<FetchFrame<'_>, FrameError> {
    let mut r = Reader::new(frame);
    let api_key = r.i16("api_key")?;
    let api_version = r.i16("api_version")?;
    if api_key != FETCH_API_KEY || api_version < MIN_NATIVE_VERSION || api_version > max_version.min(MAX_NATIVE_VERSION) {
        return Err(FrameError::NotServed);
    }
    let v = api_version;
    let flexible = v >= FIRST_FLEXIBLE_VERSION;
    let correlation_id = r.i32("correlation_id")?;
    let client_id = r.nullable_string(false, "client_id")?;
    if flexible {
        r.skip_tagged_fields("request header tagged fields")?;
    }
    let mut replica_id = -1;
    let mut replica_epoch = -1;
    if v < FIRST_REPLICA_STATE_VERSION {
        replica_id = r.i32("replica_id")?;
    }
    let max_wait_ms = r.i32("max_wait_ms")?;
    let min_bytes = r.i32("min_bytes")?;
    let max_bytes = r.i32("max_bytes")?;
    let isolation_level = r.i8("isolation_level")?;
    let (mut session_id, mut session_epoch) = (0, -1);
    if v >= 7 {
        session_id = r.i32("session_id")?;
        session_epoch = r.i32("session_epoch")?;
    }
    // a topic takes at least 2 bytes (an empty name or half an id, an empty array), a partition 16
    let topic_count = r.array_len(flexible, 2, "topics")?;
    let mut topics = Vec::with_capacity(topic_count);
    for _ in 0..topic_count {
        let topic = r.topic(v, flexible, "topics.topic")?;
        let count = r.array_len(flexible, 16, "topics.partitions")?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            let partition = r.i32("partitions.partition")?;
            let current_leader_epoch = if v >= 9 { r.i32("partitions.current_leader_epoch")? } else { -1 };
            let fetch_offset = r.i64("partitions.fetch_offset")?;
            let last_fetched_epoch = if v >= 12 { r.i32("partitions.last_fetched_epoch")? } else { -1 };
            let log_start_offset = if v >= 5 { r.i64("partitions.log_start_offset")? } else { -1 };
            let partition_max_bytes = r.i32("partitions.partition_max_bytes")?;
            if flexible {
                r.skip_tagged_fields("partitions tagged fields")?;
            }
            partitions.push(FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset,
                last_fetched_epoch,
                log_start_offset,
                partition_max_bytes,
            });
        }
        if flexible {
            r.skip_tagged_fields("topics tagged fields")?;
        }
        topics.push(FetchTopic { topic, partitions });
    }
    let mut forgotten = Vec::new();
    if v >= 7 {
        let count = r.array_len(flexible, 2, "forgotten_topics_data")?;
        forgotten.reserve(count);
        for _ in 0..count {
            let topic = r.topic(v, flexible, "forgotten_topics_data.topic")?;
            let n = r.array_len(flexible, 4, "forgotten_topics_data.partitions")?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                partitions.push(r.i32("forgotten_topics_data.partitions")?);
            }
            if flexible {
                r.skip_tagged_fields("forgotten_topics_data tagged fields")?;
            }
            forgotten.push(ForgottenTopic { topic, partitions });
        }
    }
    let rack_id = if v >= 11 { r.string(flexible, "rack_id")? } else { "" };
    let mut cluster_id = None;
    if flexible {
        let count = r.uvarint("request tagged fields")?;
        let mut last_tag: Option<u32> = None;
        for _ in 0..count {
            let tag = r.uvarint("request tagged fields")?;
            if last_tag.is_some_and(|last| tag <= last) {
                return Err(FrameError::Invalid("request tagged fields"));
            }
            last_tag = Some(tag);
            let size = r.uvarint("request tagged fields")? as usize;
            let body = r.take(size, "request tagged fields")?;
            let mut t = Reader::new(body);
            match tag {
                TAG_CLUSTER_ID => {
                    cluster_id = t.nullable_string(true, "cluster_id")?;
                }
                TAG_REPLICA_STATE if v >= FIRST_REPLICA_STATE_VERSION => {
                    replica_id = t.i32("replica_state.replica_id")?;
                    replica_epoch = t.i64("replica_state.replica_epoch")?;
                    t.skip_tagged_fields("replica_state tagged fields")?;
                }
                _ => continue,
            }
            if t.remaining() != 0 {
                return Err(FrameError::Invalid("request tagged fields"));
            }
        }
    }
    if r.remaining() != 0 {
        return Err(FrameError::TrailingBytes(r.remaining()));
    }
    if names_a_partition_twice(&topics) {
        // Kafka reads it once, at its first place with its last entry: the Python path does
        return Err(FrameError::NotServed);
    }
    Ok(FetchFrame {
        api_version,
        correlation_id,
        client_id,
        cluster_id,
        replica_id,
        replica_epoch,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack_id,
    })
}

/// Whether some partition is named more than once (in one topic entry or in two entries of the topic).
fn names_a_partition_twice(topics: &[FetchTopic<'_>]) -> bool {
    let count: usize = topics.iter().map(|t| t.partitions.len()).sum();
    if count < 2 {
        return false;
    }
    let mut seen = std::collections::HashSet::with_capacity(count);
    !topics.iter().all(|t| t.partitions.iter().all(|p| seen.insert((t.topic, p.partition))))
}

/// A piece of an encoded Fetch response: bytes, or the records a partition answers with, which
/// the caller sends as they are (a region of a segment file, sent by sendfile or copied).
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<R> {
    Bytes(Vec<u8>),
    Records(R),
}

/// One partition's answer (no error: the native path leaves every error to the Python path, and the
/// encoder writes the caller's code of no error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionAnswer<R> {
    pub index: i32,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer id, first offset) of each aborted transaction; None: null (read_uncommitted).
    pub aborted: Option<Vec<(i64, i64)>>,
    /// The records (whole batches) and their length; None: an empty records field.
    pub records: Option<(R, u64)>,
}

/// One topic of the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicAnswer<'a, R> {
    pub topic: TopicRef<'a>,
    pub partitions: Vec<PartitionAnswer<R>>,
}

/// The whole response frame answering `version`'s request `correlation_id`: pieces in wire order,
/// the first holding the size prefix. Throttle time 0 (the native path is not taken under a
/// quota), `none` (Kafka's code of no error, from the broker's one table) as the top-level and
/// every partition's error code, no tagged fields (diverging epochs, leader hints, node endpoints
/// are the Python path's).
pub fn encode_fetch_response<R>(
    version: i16,
    correlation_id: i32,
    none: i16,
    session_id: i32,
    topics: Vec<TopicAnswer<'_, R>>,
) -> Vec<Piece<R>> {
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let mut pieces = Vec::new();
    let mut out = Vec::with_capacity(64 + topics.iter().map(|t| 32 + 64 * t.partitions.len()).sum::<usize>());
    let mut size: u64 = 0;
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&correlation_id.to_be_bytes());
    if flexible {
        out.push(0); // response header v1: no tagged fields
    }
    out.extend_from_slice(&0i32.to_be_bytes()); // throttle_time_ms
    if version >= 7 {
        out.extend_from_slice(&none.to_be_bytes()); // error_code
        out.extend_from_slice(&session_id.to_be_bytes());
    }
    put_len(&mut out, flexible, topics.len());
    for t in topics {
        match t.topic {
            TopicRef::Name(name) => {
                if flexible {
                    put_uvarint(&mut out, name.len() as u32 + 1);
                } else {
                    out.extend_from_slice(&(name.len() as i16).to_be_bytes());
                }
                out.extend_from_slice(name.as_bytes());
            }
            TopicRef::Id(id) => out.extend_from_slice(&id),
        }
        put_len(&mut out, flexible, t.partitions.len());
        for p in t.partitions {
            out.extend_from_slice(&p.index.to_be_bytes());
            out.extend_from_slice(&none.to_be_bytes());
            out.extend_from_slice(&p.high_watermark.to_be_bytes());
            out.extend_from_slice(&p.last_stable_offset.to_be_bytes());
            if version >= 5 {
                out.extend_from_slice(&p.log_start_offset.to_be_bytes());
            }
            match &p.aborted {
                None if flexible => out.push(0),
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(aborted) => {
                    put_len(&mut out, flexible, aborted.len());
                    for (producer_id, first_offset) in aborted {
                        out.extend_from_slice(&producer_id.to_be_bytes());
                        out.extend_from_slice(&first_offset.to_be_bytes());
                        if flexible {
                            out.push(0);
                        }
                    }
                }
            }
            if version >= 11 {
                out.extend_from_slice(&(-1i32).to_be_bytes()); // preferred_read_replica
            }
            match p.records {
                None => put_len(&mut out, flexible, 0),
                Some((records, length)) => {
                    put_len(&mut out, flexible, length as usize);
                    size += out.len() as u64 + length;
                    pieces.push(Piece::Bytes(std::mem::take(&mut out)));
                    pieces.push(Piece::Records(records));
                }
            }
            if flexible {
                out.push(0);
            }
        }
        if flexible {
            out.push(0);
        }
    }
    if flexible {
        out.push(0); // no node_endpoints
    }
    size += out.len() as u64;
    pieces.push(Piece::Bytes(out));
    let body = (size - 4) as u32;
    if let Some(Piece::Bytes(first)) = pieces.first_mut() {
        first[0..4].copy_from_slice(&body.to_be_bytes());
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::put_string;
    use proptest::prelude::*;

    /// A Fetch frame of one topic ("t" or id 7...7), partition 2 from offset 5, forgetting
    /// partition 3 (v7+), rack "r" (v11+), replica `replica` (in the tagged state from v15).
    fn frame(version: i16, replica: i32) -> Vec<u8> {
        let flexible = version >= FIRST_FLEXIBLE_VERSION;
        let mut f = Vec::new();
        f.extend_from_slice(&FETCH_API_KEY.to_be_bytes());
        f.extend_from_slice(&version.to_be_bytes());
        f.extend_from_slice(&7i32.to_be_bytes());
        f.extend_from_slice(&3i16.to_be_bytes());
        f.extend_from_slice(b"cli");
        if flexible {
            f.push(0);
        }
        if version < FIRST_REPLICA_STATE_VERSION {
            f.extend_from_slice(&replica.to_be_bytes());
        }
        f.extend_from_slice(&500i32.to_be_bytes());
        f.extend_from_slice(&1i32.to_be_bytes());
        f.extend_from_slice(&65536i32.to_be_bytes());
        f.push(1);
        if version >= 7 {
            f.extend_from_slice(&11i32.to_be_bytes());
            f.extend_from_slice(&2i32.to_be_bytes());
        }
        put_len(&mut f, flexible, 1);
        if version >= FIRST_TOPIC_ID_VERSION {
            f.extend_from_slice(&[7u8; 16]);
        } else {
            put_string(&mut f, flexible, "t");
        }
        put_len(&mut f, flexible, 1);
        f.extend_from_slice(&2i32.to_be_bytes());
        if version >= 9 {
            f.extend_from_slice(&4i32.to_be_bytes());
        }
        f.extend_from_slice(&5i64.to_be_bytes());
        if version >= 12 {
            f.extend_from_slice(&3i32.to_be_bytes());
        }
        if version >= 5 {
            f.extend_from_slice(&1i64.to_be_bytes());
        }
        f.extend_from_slice(&1024i32.to_be_bytes());
        if flexible {
            f.extend_from_slice(&[0, 0]);
        }
        if version >= 7 {
            put_len(&mut f, flexible, 1);
            if version >= FIRST_TOPIC_ID_VERSION {
                f.extend_from_slice(&[7u8; 16]);
            } else {
                put_string(&mut f, flexible, "t");
            }
            put_len(&mut f, flexible, 1);
            f.extend_from_slice(&3i32.to_be_bytes());
            if flexible {
                f.push(0);
            }
        }
        if version >= 11 {
            put_string(&mut f, flexible, "r");
        }
        if flexible {
            if version >= FIRST_REPLICA_STATE_VERSION {
                f.push(2);
                f.push(TAG_CLUSTER_ID as u8);
                f.push(3);
                put_string(&mut f, true, "ab");
                f.push(TAG_REPLICA_STATE as u8);
                f.push(13);
                f.extend_from_slice(&replica.to_be_bytes());
                f.extend_from_slice(&9i64.to_be_bytes());
                f.push(0);
            } else {
                f.push(0);
            }
        }
        f
    }

    fn partition(partition: i32) -> FetchPartition {
        FetchPartition { partition, current_leader_epoch: -1, fetch_offset: 0, last_fetched_epoch: -1,
                         log_start_offset: -1, partition_max_bytes: 1 }
    }

    #[test]
    fn a_partition_named_twice_is_found_in_one_topic_entry_or_across_two() {
        let topic = |name, partitions: &[i32]| FetchTopic {
            topic: TopicRef::Name(name),
            partitions: partitions.iter().map(|&p| partition(p)).collect(),
        };
        assert!(!names_a_partition_twice(&[topic("a", &[0, 1]), topic("b", &[0])]));
        assert!(names_a_partition_twice(&[topic("a", &[0, 1, 0])]));
        assert!(names_a_partition_twice(&[topic("a", &[1]), topic("b", &[0]), topic("a", &[1])]));
        assert!(!names_a_partition_twice(&[]));
    }

    #[test]
    fn every_version_decodes_its_fields() {
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            let bytes = frame(version, 1);
            let f = decode_fetch_frame(&bytes, MAX_NATIVE_VERSION).unwrap();
            assert_eq!((f.api_version, f.correlation_id, f.client_id), (version, 7, Some("cli")));
            assert_eq!((f.max_wait_ms, f.min_bytes, f.max_bytes, f.isolation_level), (500, 1, 65536, 1));
            assert_eq!(f.replica_id, 1);
            assert_eq!(f.replica_epoch, if version >= 15 { 9 } else { -1 });
            assert_eq!(f.cluster_id, if version >= 15 { Some("ab") } else { None });
            assert_eq!((f.session_id, f.session_epoch), if version >= 7 { (11, 2) } else { (0, -1) });
            let topic = if version >= 13 { TopicRef::Id([7; 16]) } else { TopicRef::Name("t") };
            let expected = FetchPartition {
                partition: 2,
                current_leader_epoch: if version >= 9 { 4 } else { -1 },
                fetch_offset: 5,
                last_fetched_epoch: if version >= 12 { 3 } else { -1 },
                log_start_offset: if version >= 5 { 1 } else { -1 },
                partition_max_bytes: 1024,
            };
            assert_eq!(f.topics, vec![FetchTopic { topic, partitions: vec![expected] }]);
            let forgotten = if version >= 7 { vec![ForgottenTopic { topic, partitions: vec![3] }] } else { vec![] };
            assert_eq!(f.forgotten, forgotten);
            assert_eq!(f.rack_id, if version >= 11 { "r" } else { "" });
        }
    }

    #[test]
    fn versions_not_served_other_apis_and_trailing_bytes_are_refused() {
        assert_eq!(decode_fetch_frame(&frame(3, -1), MAX_NATIVE_VERSION), Err(FrameError::NotServed));
        assert_eq!(decode_fetch_frame(&frame(13, -1), 12), Err(FrameError::NotServed));
        let mut other = frame(12, -1);
        other[1] = 0; // Produce
        assert_eq!(decode_fetch_frame(&other, MAX_NATIVE_VERSION), Err(FrameError::NotServed));
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            let mut bytes = frame(version, -1);
            bytes.push(0);
            assert_eq!(decode_fetch_frame(&bytes, MAX_NATIVE_VERSION), Err(FrameError::TrailingBytes(1)));
        }
    }

    #[test]
    fn a_forged_topic_count_is_refused_before_allocating() {
        let mut bytes = frame(4, -1);
        // topics' count sits after the header (2+2+4+2+3) and replica, wait, min, max (16), isolation (1)
        let at = 2 + 2 + 4 + 2 + 3 + 16 + 1;
        bytes[at..at + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(decode_fetch_frame(&bytes, MAX_NATIVE_VERSION), Err(FrameError::Truncated("topics")));
    }

    #[test]
    fn the_response_size_prefix_counts_every_piece() {
        for version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION {
            let topic = if version >= 13 { TopicRef::Id([1; 16]) } else { TopicRef::Name("t") };
            let empty = PartitionAnswer {
                index: 0,
                high_watermark: 3,
                last_stable_offset: 3,
                log_start_offset: 0,
                aborted: None,
                records: None,
            };
            let full = PartitionAnswer { index: 1, aborted: Some(vec![(4, 5)]), records: Some(("r", 100)), ..empty.clone() };
            let pieces = encode_fetch_response(version, 9, i16::default(), 0, vec![TopicAnswer { topic, partitions: vec![empty, full] }]);
            assert_eq!(pieces.len(), 3);
            let total: usize = pieces
                .iter()
                .map(|p| match p {
                    Piece::Bytes(b) => b.len(),
                    Piece::Records(_) => 100,
                })
                .sum();
            let Piece::Bytes(first) = &pieces[0] else { panic!("first piece") };
            assert_eq!(i32::from_be_bytes(first[0..4].try_into().unwrap()) as usize, total - 4);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_fetch_frame(&bytes, MAX_NATIVE_VERSION);
        }

        #[test]
        fn any_mutation_of_a_valid_frame_never_panics(
            version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION, replica in -1i32..3,
            at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<prop::sample::Index>(),
        ) {
            let mut bytes = frame(version, replica);
            let i = at.index(bytes.len());
            bytes[i] = byte;
            let n = cut.index(bytes.len() + 1);
            let _ = decode_fetch_frame(&bytes[..n], MAX_NATIVE_VERSION);
            let _ = decode_fetch_frame(&bytes, MAX_NATIVE_VERSION);
        }

        #[test]
        fn every_truncation_of_a_valid_frame_is_an_error(
            version in MIN_NATIVE_VERSION..=MAX_NATIVE_VERSION, replica in -1i32..3, cut in any::<prop::sample::Index>(),
        ) {
            let bytes = frame(version, replica);
            let n = cut.index(bytes.len());
            prop_assert!(decode_fetch_frame(&bytes[..n], MAX_NATIVE_VERSION).is_err());
        }
    }
}
