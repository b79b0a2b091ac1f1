//! Kafka's `partition.metadata` (KIP-516): the id of the topic a partition directory belongs to,
//! `version: 0\ntopic_id: <id>` (the id in Kafka's base64 form). Kafka writes it before a new log's
//! first append and, in KRaft, treats a log without it (or naming another id than the metadata's)
//! as a stray replica that it renames out of the way: a data dir klog wrote must carry it for a
//! Kafka broker started on it to keep its data.

use std::fs;
use std::io;
use std::path::Path;

use super::error::{IoContext, StorageError, StorageResult};
use super::fileio::write_atomically;

pub const PARTITION_METADATA_FILE: &str = "partition.metadata";
const VERSION: &str = "0";
/// A Kafka Uuid in base64 (URL alphabet, no padding): 16 bytes in 22 characters.
const TOPIC_ID_CHARS: usize = 22;

fn check_topic_id(topic_id: &str) -> StorageResult<()> {
    let base64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if topic_id.len() != TOPIC_ID_CHARS || !topic_id.chars().all(base64url) {
        return Err(StorageError::InvalidArgument(format!("not a topic id in Kafka's base64 form: {topic_id:?}")));
    }
    Ok(())
}

/// The topic id `dir`'s `partition.metadata` names; None without the file.
pub fn read_topic_id(dir: &Path) -> StorageResult<Option<String>> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).ctx("read", &path),
    };
    let (mut version, mut topic_id) = (None, None);
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        match line.split_once(':').map(|(k, v)| (k.trim(), v.trim())) {
            Some(("version", v)) => version = Some(v),
            Some(("topic_id", t)) => topic_id = Some(t),
            _ => return Err(StorageError::corrupt(&path, i as u64 + 1, format!("line {}: {line:?}", i + 1))),
        }
    }
    if version != Some(VERSION) {
        return Err(StorageError::corrupt(&path, 1, format!("unsupported version {version:?}")));
    }
    let topic_id = topic_id.ok_or_else(|| StorageError::corrupt(&path, 2, "no topic_id"))?;
    check_topic_id(topic_id).map_err(|e| StorageError::corrupt(&path, 2, e.to_string()))?;
    Ok(Some(topic_id.to_owned()))
}

/// Write `dir`'s `partition.metadata` naming `topic_id` (atomically, fsynced), as Kafka's broker does.
pub fn write_topic_id(dir: &Path, topic_id: &str) -> StorageResult<()> {
    check_topic_id(topic_id)?;
    let path = dir.join(PARTITION_METADATA_FILE);
    write_atomically(&path, format!("version: {VERSION}\ntopic_id: {topic_id}").as_bytes()).ctx("write", &path)
}

/// Kafka's `UnifiedLog.assignTopicId`: record `topic_id` in `dir` unless its `partition.metadata`
/// already names it; a directory naming another topic id holds another topic's log (an error).
pub fn assign_topic_id(dir: &Path, topic_id: &str) -> StorageResult<()> {
    check_topic_id(topic_id)?;
    match read_topic_id(dir)? {
        Some(existing) if existing == topic_id => Ok(()),
        Some(existing) => Err(StorageError::InvalidArgument(format!(
            "{} holds a log of topic id {existing}, not {topic_id} (its {PARTITION_METADATA_FILE})",
            dir.display()
        ))),
        None => write_topic_id(dir, topic_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "6QrWTEmTQu62c6GbZvtrvQ";

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("klog-pm-{name}-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_file_is_written_byte_for_byte_as_kafka_writes_it_and_read_back() {
        let dir = temp_dir("write");
        assert_eq!(read_topic_id(&dir).unwrap(), None);
        assign_topic_id(&dir, ID).unwrap();
        // Kafka 4.3.1's file: no newline after the id
        assert_eq!(fs::read_to_string(dir.join(PARTITION_METADATA_FILE)).unwrap(), format!("version: 0\ntopic_id: {ID}"));
        assert_eq!(read_topic_id(&dir).unwrap().as_deref(), Some(ID));
        assign_topic_id(&dir, ID).unwrap(); // the same id again: nothing to do
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_of_another_topic_id_is_refused() {
        let dir = temp_dir("other");
        write_topic_id(&dir, ID).unwrap();
        let err = assign_topic_id(&dir, "AAAAAAAAAAAAAAAAAAAAAA").unwrap_err().to_string();
        assert!(err.contains(&format!("topic id {ID}, not AAAAAAAAAAAAAAAAAAAAAA")), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_file_or_a_bad_id_is_a_clear_error() {
        let dir = temp_dir("bad");
        fs::write(dir.join(PARTITION_METADATA_FILE), "version: 1\ntopic_id: 6QrWTEmTQu62c6GbZvtrvQ\n").unwrap();
        assert!(read_topic_id(&dir).unwrap_err().to_string().contains("unsupported version"));
        fs::write(dir.join(PARTITION_METADATA_FILE), "version: 0\n").unwrap();
        assert!(read_topic_id(&dir).unwrap_err().to_string().contains("no topic_id"));
        fs::write(dir.join(PARTITION_METADATA_FILE), "garbage").unwrap();
        assert!(read_topic_id(&dir).unwrap_err().to_string().contains("line 1"));
        assert!(write_topic_id(&dir, "short").unwrap_err().to_string().contains("not a topic id"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
