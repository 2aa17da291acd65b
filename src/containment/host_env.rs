//! What every runtime child starts from, whoever starts it (`mur exec`, a capsule's shell
//! and native tools): which host variables it may never see, where an allowed binary is,
//! and the session's process ceiling.

use std::path::{Path, PathBuf};

/// Names a child never sees, whatever `env.allow` says.
pub fn credential_shaped(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "API_KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE_KEY",
    ]
    .iter()
    .any(|w| n.contains(w))
        || n.starts_with("AWS_")
        || n.starts_with("DOCKER_")
        || n == "KUBECONFIG"
}

/// Find a bare `name` on `path` (the launch-time PATH).
pub fn resolve_binary(name: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// The identity variables every guest and child sees, set by the runtime.
pub const IDENTITY_VARS: [&str; 4] = [
    "MURMUR_CAPSULE_NAME",
    "MURMUR_CAPSULE_VERSION",
    "MURMUR_SESSION_ID",
    "MURMUR_CAPSULE_URL",
];

/// The identity variables' values, in [`IDENTITY_VARS`] order.
pub fn identity(name: &str, version: &str, session_id: &str, url: &str) -> Vec<(String, String)> {
    IDENTITY_VARS
        .iter()
        .zip([name, version, session_id, url])
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The session's process ceiling.
pub const PIDS_MAX: u64 = 256;
