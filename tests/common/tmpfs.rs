//! A small tmpfs mounted for one test (a disk that fills), unmounted when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of a fixed size mounted at a directory of the test's own.
pub struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mount a tmpfs of `size` (`mount -o size=…`, e.g. `1m`) with mode 0700 at `dir`
    /// (created). Only a refusal to mount (not root, no permission) is an `Err`, with the
    /// words of `mount`; any other failure fails the test here.
    pub fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}"));
        if out.status.success() {
            return Ok(Tmpfs(dir.to_path_buf()));
        }
        let why = String::from_utf8_lossy(&out.stderr).into_owned();
        let refused = [
            "permission denied",
            "not permitted",
            "only root",
            "must be superuser",
        ]
        .iter()
        .any(|w| why.to_lowercase().contains(w));
        assert!(refused, "mount failed for a reason other than a refusal: {why}");
        Err(why)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}
