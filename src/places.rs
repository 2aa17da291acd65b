//! Where `mur` keeps things on the host, in one place for every command: the session
//! records, the local registry and the compile cache. Each is read from the environment
//! at the edge; nothing here touches the filesystem.

use std::path::PathBuf;

fn var(k: &str) -> Option<PathBuf> {
    std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The file in a session's records directory that holds its authenticated door's tokens
/// (mode 0600), written by the door and read by `mur token`.
pub const DOOR_TOKENS_FILE: &str = "door-tokens.json";

/// Where a session's records go: `$MURMUR_RECORDS_DIR/<session_id>`, else
/// `$HOME/.murmur/records/<session_id>`. Never inside a workdir: a guest's preopen and a
/// contained child's writable tree are the workdir, and records there could be rewritten.
pub fn records_root() -> Option<PathBuf> {
    var("MURMUR_RECORDS_DIR").or_else(|| var("HOME").map(|h| h.join(".murmur/records")))
}

/// The local registry: `$HOME/.murmur/artifacts` (`/.murmur/artifacts` without a home).
pub fn registry_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    home.join(".murmur").join("artifacts")
}

/// Where compiled components live: `$MURMUR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/murmur/compiled`, else `$HOME/.cache/murmur/compiled`.
pub fn cache_dir() -> Option<PathBuf> {
    var("MURMUR_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("murmur/compiled")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/murmur/compiled")))
}
