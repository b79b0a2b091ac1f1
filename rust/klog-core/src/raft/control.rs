//! Kafka's KRaft control records, encoded by hand from Kafka's message schemas
//! (`LeaderChangeMessage.json`, `VotersRecord.json`, `SnapshotHeaderRecord.json`,
//! `SnapshotFooterRecord.json`; all flexible version 0). A control batch holds one record
//! whose key is `[version int16 = 0][type int16]` and whose value is the message.
//!
//! klog keeps what Raft needs and Kafka's schemas lack in tagged fields with tags far above
//! Kafka's (Kafka's readers keep unknown tags aside and print nothing for them):
//! the raw raft-rs conf change in a VotersRecord, the raft index and end offset in a snapshot
//! header.

use crate::batch::header::BatchHeader;
use crate::batch::records::{encode_batch, open_batch, parse_control_key, DecodeOptions, EncodeOptions, RecordIn};
use crate::error::{CodecError, CodecResult};

pub const CONTROL_LEADER_CHANGE: i16 = 2;
pub const CONTROL_SNAPSHOT_HEADER: i16 = 3;
pub const CONTROL_SNAPSHOT_FOOTER: i16 = 4;
pub const CONTROL_KRAFT_VOTERS: i16 = 6;

/// Tagged field of a VotersRecord carrying a raft-rs `ConfChange` (v1) protobuf.
pub const TAG_CONF_CHANGE_V1: u64 = 10_000;
/// Tagged field of a VotersRecord carrying a raft-rs `ConfChangeV2` protobuf.
pub const TAG_CONF_CHANGE_V2: u64 = 10_001;
/// Tagged field of a SnapshotHeaderRecord: raft index (u64 BE) then log end offset (i64 BE).
pub const TAG_SNAPSHOT_POSITION: u64 = 10_002;
/// Range of KRaft protocol versions a klog voter declares (Kafka's kraft.version 0-1).
const KRAFT_VERSION_RANGE: (i16, i16) = (0, 1);

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_uvarint(buf: &[u8], pos: &mut usize, field: &'static str) -> CodecResult<u64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or(CodecError::Truncated { field, offset: *pos, needed: 1, available: 0 })?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(CodecError::invalid(field, *pos, "unsigned varint longer than 10 bytes"))
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize, field: &'static str) -> CodecResult<&'a [u8]> {
    let avail = buf.len().saturating_sub(*pos);
    if avail < n {
        return Err(CodecError::Truncated { field, offset: *pos, needed: n, available: avail });
    }
    let s = &buf[*pos..*pos + n];
    *pos += n;
    Ok(s)
}

fn put_tagged(out: &mut Vec<u8>, tags: &[(u64, &[u8])]) {
    put_uvarint(out, tags.len() as u64);
    for (tag, data) in tags {
        put_uvarint(out, *tag);
        put_uvarint(out, data.len() as u64);
        out.extend_from_slice(data);
    }
}

/// Read a tagged-field section; returns the fields whose tags are in `wanted`.
fn get_tagged<'a>(buf: &'a [u8], pos: &mut usize, wanted: &[u64]) -> CodecResult<Vec<(u64, &'a [u8])>> {
    let n = get_uvarint(buf, pos, "tagged_fields.count")?;
    let mut found = Vec::new();
    for _ in 0..n {
        let tag = get_uvarint(buf, pos, "tagged_fields.tag")?;
        let len = get_uvarint(buf, pos, "tagged_fields.size")? as usize;
        let data = take(buf, pos, len, "tagged_fields.data")?;
        if wanted.contains(&tag) {
            found.push((tag, data));
        }
    }
    Ok(found)
}

fn voter_ids_array(out: &mut Vec<u8>, ids: &[i32]) {
    put_uvarint(out, ids.len() as u64 + 1);
    for id in ids {
        out.extend_from_slice(&id.to_be_bytes());
        put_uvarint(out, 0);
    }
}

/// LeaderChangeMessage v0.
pub fn leader_change_value(leader_id: i32, voters: &[i32], granting: &[i32]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + 5 * (voters.len() + granting.len()));
    v.extend_from_slice(&0i16.to_be_bytes());
    v.extend_from_slice(&leader_id.to_be_bytes());
    voter_ids_array(&mut v, voters);
    voter_ids_array(&mut v, granting);
    put_uvarint(&mut v, 0);
    v
}

/// The conf change a VotersRecord carries in klog's tagged field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarriedConfChange {
    pub v2: bool,
    pub data: Vec<u8>,
}

/// VotersRecord v0 listing `voters` (no directory ids or endpoints: klog's voters are
/// named by `controller.quorum.voters`), with the raw conf change in a tagged field.
pub fn voters_value(voters: &[i32], change: Option<&CarriedConfChange>) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + 24 * voters.len());
    v.extend_from_slice(&0i16.to_be_bytes());
    put_uvarint(&mut v, voters.len() as u64 + 1);
    for id in voters {
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(&[0u8; 16]); // VoterUuid: none
        put_uvarint(&mut v, 1); // Endpoints: empty
        v.extend_from_slice(&KRAFT_VERSION_RANGE.0.to_be_bytes());
        v.extend_from_slice(&KRAFT_VERSION_RANGE.1.to_be_bytes());
        put_uvarint(&mut v, 0); // KRaftVersionFeature's tagged fields
        put_uvarint(&mut v, 0); // Voter's tagged fields
    }
    match change {
        Some(c) => put_tagged(&mut v, &[(if c.v2 { TAG_CONF_CHANGE_V2 } else { TAG_CONF_CHANGE_V1 }, &c.data)]),
        None => put_uvarint(&mut v, 0),
    }
    v
}

/// Parse a VotersRecord v0 value: the voter ids and klog's carried conf change, if any.
pub fn parse_voters_value(value: &[u8]) -> CodecResult<(Vec<i32>, Option<CarriedConfChange>)> {
    let mut pos = 0;
    let version = i16::from_be_bytes(take(value, &mut pos, 2, "VotersRecord.Version")?.try_into().unwrap_or([0; 2]));
    if version != 0 {
        return Err(CodecError::invalid("VotersRecord.Version", 0, format!("unsupported version {version}")));
    }
    let n = get_uvarint(value, &mut pos, "VotersRecord.Voters")?;
    if n == 0 {
        return Err(CodecError::invalid("VotersRecord.Voters", pos, "null voters array"));
    }
    let mut voters = Vec::with_capacity((n - 1).min(1024) as usize);
    for _ in 0..n - 1 {
        let id = i32::from_be_bytes(take(value, &mut pos, 4, "Voter.VoterId")?.try_into().unwrap_or([0; 4]));
        take(value, &mut pos, 16, "Voter.VoterUuid")?;
        let endpoints = get_uvarint(value, &mut pos, "Voter.Endpoints")?;
        for _ in 0..endpoints.saturating_sub(1) {
            for field in ["Endpoint.Name", "Endpoint.Host"] {
                let len = get_uvarint(value, &mut pos, "Endpoint.string")?;
                take(value, &mut pos, len.saturating_sub(1) as usize, field)?;
            }
            take(value, &mut pos, 2, "Endpoint.Port")?;
            get_tagged(value, &mut pos, &[])?;
        }
        take(value, &mut pos, 4, "Voter.KRaftVersionFeature")?;
        get_tagged(value, &mut pos, &[])?;
        get_tagged(value, &mut pos, &[])?;
        voters.push(id);
    }
    let tags = get_tagged(value, &mut pos, &[TAG_CONF_CHANGE_V1, TAG_CONF_CHANGE_V2])?;
    let change = tags.first().map(|(t, d)| CarriedConfChange { v2: *t == TAG_CONF_CHANGE_V2, data: d.to_vec() });
    Ok((voters, change))
}

/// SnapshotHeaderRecord v0 with klog's position tag.
pub fn snapshot_header_value(last_contained_timestamp: i64, raft_index: u64, end_offset: i64) -> Vec<u8> {
    let mut v = Vec::with_capacity(32);
    v.extend_from_slice(&0i16.to_be_bytes());
    v.extend_from_slice(&last_contained_timestamp.to_be_bytes());
    let mut pos = Vec::with_capacity(16);
    pos.extend_from_slice(&raft_index.to_be_bytes());
    pos.extend_from_slice(&end_offset.to_be_bytes());
    put_tagged(&mut v, &[(TAG_SNAPSHOT_POSITION, &pos)]);
    v
}

/// (raft index, end offset) from a SnapshotHeaderRecord written by klog.
pub fn parse_snapshot_header_value(value: &[u8]) -> CodecResult<(u64, i64)> {
    let mut pos = 10;
    take(value, &mut 0, 10, "SnapshotHeaderRecord")?;
    let tags = get_tagged(value, &mut pos, &[TAG_SNAPSHOT_POSITION])?;
    match tags.first() {
        Some((_, d)) if d.len() == 16 => Ok((
            u64::from_be_bytes(d[..8].try_into().unwrap_or([0; 8])),
            i64::from_be_bytes(d[8..].try_into().unwrap_or([0; 8])),
        )),
        _ => Err(CodecError::invalid("SnapshotHeaderRecord", pos, "no klog snapshot position tag")),
    }
}

/// SnapshotFooterRecord v0.
pub fn snapshot_footer_value() -> Vec<u8> {
    let mut v = 0i16.to_be_bytes().to_vec();
    put_uvarint(&mut v, 0);
    v
}

/// One control batch holding one control record of `control_type` with `value`.
pub fn control_batch(control_type: i16, value: &[u8], base_offset: i64, epoch: i32, timestamp: i64) -> CodecResult<Vec<u8>> {
    let mut key = [0u8; 4];
    key[2..].copy_from_slice(&control_type.to_be_bytes());
    let rec = RecordIn { timestamp, key: Some(&key[..]), value: Some(value), headers: Vec::new() };
    let opts = EncodeOptions { base_offset, partition_leader_epoch: epoch, is_control: true, ..EncodeOptions::default() };
    encode_batch(&[rec], &opts)
}

/// The control type and value of a control batch's (first) record.
pub fn control_record(batch: &[u8]) -> CodecResult<(i16, Vec<u8>)> {
    let view = open_batch(batch, 0, &DecodeOptions::default())?;
    let rec = view
        .records()
        .next()
        .ok_or_else(|| CodecError::invalid("control_batch.records", 0, "control batch without records"))??;
    let (_, t) = parse_control_key(rec.key, 0)?;
    Ok((t, rec.value.unwrap_or_default().to_vec()))
}

/// The header of a buffer that must hold exactly one batch.
pub fn single_batch_header(batch: &[u8]) -> CodecResult<BatchHeader> {
    let h = BatchHeader::parse(batch, 0)?;
    if h.size() != batch.len() {
        return Err(CodecError::invalid(
            "entry.batch",
            0,
            format!("an entry must be exactly one record batch: batch of {} bytes in {} bytes", h.size(), batch.len()),
        ));
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voters_value_round_trips_with_carried_conf_change() {
        let cc = CarriedConfChange { v2: true, data: vec![1, 2, 3] };
        let v = voters_value(&[1, 2, 3], Some(&cc));
        assert_eq!(parse_voters_value(&v).unwrap(), (vec![1, 2, 3], Some(cc)));
        assert_eq!(parse_voters_value(&voters_value(&[4], None)).unwrap(), (vec![4], None));
    }

    #[test]
    fn snapshot_header_carries_index_and_end_offset() {
        let v = snapshot_header_value(7, 42, 1234);
        assert_eq!(parse_snapshot_header_value(&v).unwrap(), (42, 1234));
    }

    #[test]
    fn control_batch_is_read_back_with_its_type() {
        let b = control_batch(CONTROL_LEADER_CHANGE, &leader_change_value(2, &[1, 2, 3], &[2]), 5, 3, 0).unwrap();
        let h = single_batch_header(&b).unwrap();
        assert!(h.is_control());
        assert_eq!((h.base_offset, h.partition_leader_epoch), (5, 3));
        assert_eq!(control_record(&b).unwrap().0, CONTROL_LEADER_CHANGE);
    }
}
