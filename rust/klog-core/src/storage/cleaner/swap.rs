//! The file side of swapping a cleaned segment in (Kafka's `.cleaned` / `.swap` protocol; see
//! `PartitionLog::swap_in_cleaned`) and what opening a log does with an interrupted swap
//! (Kafka's `LogLoader`):
//!
//! - every `*.cleaned` file is deleted: the swap had not begun (rolled back);
//! - `*.swap` files at or above the lowest base offset with a `.cleaned` file, and index `.swap`
//!   files without their `.log.swap`, belong to a swap that had not reached its commit point (the
//!   `.log` is renamed last): deleted (rolled back);
//! - a `<base>.log.swap` is a committed swap: the segments it replaces (every segment whose base
//!   offset lies in [base, the swap's next offset)) are deleted and the `.swap` files take their
//!   final names (completed).
//!
//! The cleaner keeps the last batch of every cleaned segment (empty if need be), so a committed
//! swap's next offset is exactly the end of the segments it replaced.
//!
//! Completing a `.swap` found here is right only if nothing was written over its offsets since
//! it was renamed. A swap that fails in a running log makes sure of that: before its commit point
//! it renames its files back to `.cleaned` and fsyncs the dir before the log takes another write;
//! if that fails, or the failure came after the commit point, the log is closed and its dir taken
//! offline until this runs at the next start (`PartitionLog::swap_in_cleaned`).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io;
use std::path::Path;

use crate::batch::header::BatchHeader;

use super::super::error::{IoContext, StorageResult};
use super::super::events::warn;
use super::super::fileio::{fsync_dir, pread_exact};
use super::super::segment::{parse_segment_file_name, segment_file_name, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};

pub const CLEANED_SUFFIX: &str = ".cleaned";
pub const SWAP_SUFFIX: &str = ".swap";

/// Rename `<base><file_suffix><from>` to `<base><file_suffix><to>` (a missing file is skipped);
/// true if a file was renamed.
pub fn rename_suffix(dir: &Path, base: i64, file_suffix: &str, from: &str, to: &str) -> StorageResult<bool> {
    let name = segment_file_name(base, file_suffix);
    let src = dir.join(format!("{name}{from}"));
    #[cfg(test)]
    if fail_rename(dir, &format!("{name}{from}")) {
        return Err(io::Error::from_raw_os_error(5)).ctx("rename", &src);
    }
    match fs::rename(&src, dir.join(format!("{name}{to}"))) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).ctx("rename", &src),
    }
}

/// Tests: (directory, end of a source file name): the next rename in that directory of a file
/// whose name ends so fails with EIO, once (a failure no obstacle on disk can make, such as one
/// of a swap's rollback). A global list: the cleaner's threads see it too.
#[cfg(test)]
pub static FAIL_RENAMES: std::sync::Mutex<Vec<(std::path::PathBuf, &'static str)>> = std::sync::Mutex::new(Vec::new());

#[cfg(test)]
fn fail_rename(dir: &Path, name: &str) -> bool {
    let mut failing = FAIL_RENAMES.lock().unwrap_or_else(|p| p.into_inner());
    match failing.iter().position(|(d, end)| d == dir && name.ends_with(end)) {
        Some(i) => {
            failing.remove(i);
            true
        }
        None => false,
    }
}

/// Path of a segment file with an extra suffix (`.cleaned`, `.swap`).
pub fn suffixed(dir: &Path, base: i64, file_suffix: &str, extra: &str) -> std::path::PathBuf {
    dir.join(format!("{}{extra}", segment_file_name(base, file_suffix)))
}

/// (base offset, segment file suffix) of `<20 digits><.log|.index|.timeindex><extra>`.
fn parse_suffixed(name: &str, extra: &str) -> Option<(i64, &'static str)> {
    let stem = name.strip_suffix(extra)?;
    [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX]
        .into_iter()
        .find_map(|s| parse_segment_file_name(stem, s).map(|b| (b, s)))
}

/// Offset after the last batch of a `.log` file (its base offset if empty); the walk stops at
/// the first header that does not parse (recovery checks the data itself afterwards).
fn next_offset_of(path: &Path, base: i64) -> StorageResult<i64> {
    let f = File::open(path).ctx("open", path)?;
    let len = f.metadata().ctx("stat", path)?.len();
    let (mut pos, mut next) = (0u64, base);
    let mut head = [0u8; crate::batch::header::RECORD_BATCH_OVERHEAD];
    while pos + head.len() as u64 <= len {
        if pread_exact(&f, &mut head, pos).is_err() {
            break;
        }
        let Ok(h) = BatchHeader::parse(&head, pos as usize) else { break };
        if pos + h.size() as u64 > len {
            break;
        }
        next = h.next_offset();
        pos += h.size() as u64;
    }
    Ok(next)
}

/// Resolve every interrupted swap in a partition directory (see the module docs).
pub fn finish_interrupted_swaps(dir: &Path) -> StorageResult<()> {
    let mut cleaned: Vec<(i64, String)> = Vec::new();
    let mut swaps: BTreeMap<i64, Vec<&'static str>> = BTreeMap::new();
    let mut segment_files: Vec<(i64, String)> = Vec::new();
    for entry in fs::read_dir(dir).ctx("list", dir)? {
        let entry = entry.ctx("list", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some((b, _)) = parse_suffixed(name, CLEANED_SUFFIX) {
            cleaned.push((b, name.to_owned()));
        } else if let Some((b, s)) = parse_suffixed(name, SWAP_SUFFIX) {
            swaps.entry(b).or_default().push(s);
        } else if let Some((b, _)) = parse_suffixed(name, "") {
            segment_files.push((b, name.to_owned()));
        }
    }
    if cleaned.is_empty() && swaps.is_empty() {
        return Ok(());
    }
    let min_cleaned = cleaned.iter().map(|(b, _)| *b).min().unwrap_or(i64::MAX);
    for (_, name) in &cleaned {
        let p = dir.join(name);
        fs::remove_file(&p).ctx("delete", &p)?;
    }
    if !cleaned.is_empty() {
        warn(format!("{}: rolled back an interrupted log cleaner swap (deleted its .cleaned files)", dir.display()));
    }
    for (base, suffixes) in swaps {
        let committed = base < min_cleaned && suffixes.contains(&LOG_SUFFIX);
        if !committed {
            for s in suffixes {
                let p = suffixed(dir, base, s, SWAP_SUFFIX);
                fs::remove_file(&p).ctx("delete", &p)?;
            }
            warn(format!("{}: rolled back an uncommitted log cleaner swap at offset {base}", dir.display()));
            continue;
        }
        let next = next_offset_of(&suffixed(dir, base, LOG_SUFFIX, SWAP_SUFFIX), base)?;
        let mut replaced = 0;
        for (b, name) in &segment_files {
            if *b >= base && *b < next.max(base + 1) {
                let p = dir.join(name);
                match fs::remove_file(&p) {
                    Ok(()) => replaced += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e).ctx("delete", &p),
                }
            }
        }
        for s in [LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            rename_suffix(dir, base, s, SWAP_SUFFIX, "")?;
        }
        warn(format!(
            "{}: completed an interrupted log cleaner swap at offset {base} (offsets up to {next}; {replaced} old segment files removed)",
            dir.display()
        ));
    }
    fsync_dir(dir).ctx("fsync", dir)?;
    Ok(())
}
