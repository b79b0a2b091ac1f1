//! Kafka's text checkpoint files. Offsets checkpoints at the log dir root
//! (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`):
//! `0\n<count>\n` then `<topic> <partition> <offset>` lines. Per partition,
//! `leader-epoch-checkpoint`: `0\n<count>\n` then `<epoch> <start offset>` lines.
//! Written atomically (temp file, fsync, rename, fsync dir).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;

use super::error::{IoContext, StorageError, StorageResult};
use super::fileio::{write_atomically, write_atomically_with};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const CHECKPOINT_VERSION: i32 = 0;

fn render<I: IntoIterator<Item = String>>(lines: I, count: usize) -> String {
    let mut s = format!("{CHECKPOINT_VERSION}\n{count}\n");
    for l in lines {
        s.push_str(&l);
        s.push('\n');
    }
    s
}

/// Parse a checkpoint into its entry lines split on spaces, each with `fields` fields.
fn parse(path: &Path, text: &str, fields: usize) -> StorageResult<Vec<Vec<String>>> {
    let bad = |line: usize, why: String| StorageError::corrupt(path, line as u64, format!("line {line}: {why}"));
    let mut lines = text.lines();
    // An empty file holds no entries (Kafka's CheckpointFile reads it so; its log cleaner writes one before its
    // first clean).
    let Some(version) = lines.next() else {
        return Ok(Vec::new());
    };
    if version.trim() != CHECKPOINT_VERSION.to_string() {
        return Err(bad(1, format!("unsupported version {version:?}")));
    }
    let count: usize = lines
        .next()
        .and_then(|c| c.trim().parse().ok())
        .ok_or_else(|| bad(2, "missing or invalid entry count".into()))?;
    // The count is the file's claim: room for at most the lines that are there.
    let mut out = Vec::with_capacity(count.min(text.len() / 2));
    for (i, l) in lines.enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let parts: Vec<String> = l.split_whitespace().map(str::to_owned).collect();
        if parts.len() != fields {
            return Err(bad(i + 3, format!("expected {fields} fields, got {:?}", l)));
        }
        out.push(parts);
    }
    if out.len() != count {
        return Err(bad(2, format!("count says {count} entries, file has {}", out.len())));
    }
    Ok(out)
}

fn read_text(path: &Path) -> StorageResult<Option<String>> {
    match fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).ctx("read checkpoint", path),
    }
}

/// Read `topic partition offset` entries; a missing file is empty.
pub fn read_offsets(path: &Path) -> StorageResult<HashMap<(String, i32), i64>> {
    let Some(text) = read_text(path)? else {
        return Ok(HashMap::new());
    };
    let mut m = HashMap::new();
    for (i, parts) in parse(path, &text, 3)?.into_iter().enumerate() {
        let p: i32 = parts[1]
            .parse()
            .map_err(|_| StorageError::corrupt(path, i as u64 + 3, format!("bad partition {:?}", parts[1])))?;
        let o: i64 = parts[2]
            .parse()
            .map_err(|_| StorageError::corrupt(path, i as u64 + 3, format!("bad offset {:?}", parts[2])))?;
        m.insert((parts[0].clone(), p), o);
    }
    Ok(m)
}

pub fn write_offsets(path: &Path, entries: &[(String, i32, i64)]) -> StorageResult<()> {
    let text = render(entries.iter().map(|(t, p, o)| format!("{t} {p} {o}")), entries.len());
    write_atomically(path, text.as_bytes()).ctx("write checkpoint", path)
}

/// Read `epoch start_offset` entries; a missing file is empty.
pub fn read_epochs(path: &Path) -> StorageResult<Vec<(i32, i64)>> {
    let Some(text) = read_text(path)? else {
        return Ok(Vec::new());
    };
    let mut v = Vec::new();
    for (i, parts) in parse(path, &text, 2)?.into_iter().enumerate() {
        let e: i32 = parts[0]
            .parse()
            .map_err(|_| StorageError::corrupt(path, i as u64 + 3, format!("bad epoch {:?}", parts[0])))?;
        let o: i64 = parts[1]
            .parse()
            .map_err(|_| StorageError::corrupt(path, i as u64 + 3, format!("bad offset {:?}", parts[1])))?;
        v.push((e, o));
    }
    Ok(v)
}

pub fn write_epochs(path: &Path, entries: &[(i32, i64)]) -> StorageResult<()> {
    write_epochs_with(path, entries, true)
}

/// `write_epochs`, fsynced only if `durable`.
pub fn write_epochs_with(path: &Path, entries: &[(i32, i64)], durable: bool) -> StorageResult<()> {
    let text = render(entries.iter().map(|(e, o)| format!("{e} {o}")), entries.len());
    write_atomically_with(path, text.as_bytes(), durable).ctx("write checkpoint", path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_checkpoint_round_trips_in_kafka_text_format() {
        let dir = std::env::temp_dir().join(format!("klog-ckpt-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join(RECOVERY_POINT_CHECKPOINT);
        write_offsets(&p, &[("orders".into(), 0, 42), ("a-b".into(), 3, 7)]).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\norders 0 42\na-b 3 7\n");
        let m = read_offsets(&p).unwrap();
        assert_eq!(m[&("orders".to_string(), 0)], 42);
        assert_eq!(m[&("a-b".to_string(), 3)], 7);
        fs::write(&p, "0\n3\norders 0 42\n").unwrap();
        assert!(read_offsets(&p).unwrap_err().to_string().contains("count says 3"));
        // A forged count is an error, not an allocation of that many entries (was: capacity overflow panic).
        fs::write(&p, "0\n99999999999999999\norders 0 42\n").unwrap();
        assert!(read_offsets(&p).unwrap_err().to_string().contains("count says 99999999999999999"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_checkpoint_file_holds_no_entries_as_kafka_reads_it() {
        // Kafka's log cleaner leaves an empty cleaner-offset-checkpoint before its first clean
        let dir = std::env::temp_dir().join(format!("klog-ckpt-empty-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("cleaner-offset-checkpoint");
        fs::write(&p, "").unwrap();
        assert!(read_offsets(&p).unwrap().is_empty());
        assert!(read_epochs(&p).unwrap().is_empty());
        fs::write(&p, "\n").unwrap();   // a line that is there but blank is still no version
        assert!(read_offsets(&p).unwrap_err().to_string().contains("unsupported version"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
