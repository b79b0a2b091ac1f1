//! A temporary directory for the storage unit tests, removed when dropped.

use std::fs;
use std::path::PathBuf;

pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `<tmp>/klog-<name>-<pid>`, emptied first.
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("klog-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
