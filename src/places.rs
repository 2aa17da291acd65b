//! Where `mur` keeps things on the host, in one place for every command: the session
//! records, the local registry, the compile cache and the files the registry commands read
//! (config, credentials, CA bundle) and the spend ledger's directory. Each is read from the environment
//! at the edge; nothing here touches the filesystem.

use std::path::PathBuf;

fn var(k: &str) -> Option<PathBuf> {
    std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// The file in a session's records directory that holds its authenticated door's tokens
/// (mode 0600), written by the door and read by `mur token`.
pub const DOOR_TOKENS_FILE: &str = "door-tokens.json";

/// The file in a session's records directory that says what the session is now (capsule,
/// class, door, parent, state, tasks), replaced whole by the session on each change and read
/// by `mur ps`, `mur stop`, `mur cancel` and `mur watch`.
pub const SESSION_FILE: &str = "session.json";

/// The unix socket in a session's records directory (0600, in the 0700 directory) on which
/// the session takes `stop`: the channel `mur stop` reaches it through.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The one request the control socket takes (a line), and the session's answer to it.
pub const CONTROL_STOP: &str = "stop";
pub const CONTROL_STOPPING: &str = "stopping";

/// Where a session's records go: `$MURMUR_RECORDS_DIR/<session_id>`, else
/// `$HOME/.murmur/records/<session_id>`. Never inside a workdir: a guest's preopen and a
/// contained child's writable tree are the workdir, and records there could be rewritten.
pub fn records_root() -> Option<PathBuf> {
    var("MURMUR_RECORDS_DIR").or_else(|| var("HOME").map(|h| h.join(".murmur/records")))
}

/// The user's spend directory, where the per-user spend ledger lives (`crate::spend`):
/// `$MURMUR_SPEND_DIR`, else `$HOME/.murmur/spend`. Outside every workdir: no guest or
/// contained child can write it.
pub fn spend_dir() -> Option<PathBuf> {
    var("MURMUR_SPEND_DIR").or_else(|| var("HOME").map(|h| h.join(".murmur/spend")))
}

/// The local registry: `$HOME/.murmur/artifacts` (`/.murmur/artifacts` without a home).
pub fn registry_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    home.join(".murmur").join("artifacts")
}

/// The system registry a package installs the drivers' and hooks' archives into, read when an
/// artifact is absent from the user's registry (never when it is present but fails its check):
/// `$MURMUR_SYSTEM_REGISTRY` when set to an absolute path (set but empty or relative: none),
/// else `/usr/share/murmur/artifacts`.
/// Same layout as the user's registry; `mur` only reads it.
pub fn system_registry_root() -> Option<PathBuf> {
    match std::env::var_os("MURMUR_SYSTEM_REGISTRY") {
        Some(v) if v.is_empty() => None,
        // A relative path would name a different registry in every working directory.
        Some(v) => Some(PathBuf::from(v)).filter(|p| p.is_absolute()),
        None => Some(PathBuf::from(SYSTEM_REGISTRY)),
    }
}

/// Where the Debian package (`scripts/deb.sh`) puts the archives it carries.
pub const SYSTEM_REGISTRY: &str = "/usr/share/murmur/artifacts";

/// Where compiled components live: `$MURMUR_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/murmur/compiled`, else `$HOME/.cache/murmur/compiled`.
pub fn cache_dir() -> Option<PathBuf> {
    var("MURMUR_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("murmur/compiled")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/murmur/compiled")))
}

/// The operator's own config (`registry.sources`): `$XDG_CONFIG_HOME/murmur/config.yaml`,
/// else `$HOME/.config/murmur/config.yaml`.
pub fn user_config_file() -> Option<PathBuf> {
    var("XDG_CONFIG_HOME")
        .map(|d| d.join("murmur/config.yaml"))
        .or_else(|| var("HOME").map(|h| h.join(".config/murmur/config.yaml")))
}

/// A project's config, beside its manifest: `<dir>/.murmur/config.yaml`.
pub const PROJECT_CONFIG: &str = ".murmur/config.yaml";

/// The registry credentials container tools keep: `$REGISTRY_AUTH_FILE`, else
/// `$DOCKER_CONFIG/config.json`, else `$HOME/.docker/config.json`.
pub fn registry_auth_file() -> Option<PathBuf> {
    var("REGISTRY_AUTH_FILE")
        .or_else(|| var("DOCKER_CONFIG").map(|d| d.join("config.json")))
        .or_else(|| var("HOME").map(|h| h.join(".docker/config.json")))
}

/// The CA bundles HTTPS is checked against, in order: `$MURMUR_CA_FILE` alone when set,
/// else the system's usual bundle paths (the first that exists is taken).
pub fn ca_files() -> Vec<PathBuf> {
    match var("MURMUR_CA_FILE") {
        Some(f) => vec![f],
        None => [
            "/etc/ssl/certs/ca-certificates.crt",
            "/etc/pki/tls/certs/ca-bundle.crt",
            "/etc/ssl/cert.pem",
        ]
        .iter()
        .map(PathBuf::from)
        .collect(),
    }
}
