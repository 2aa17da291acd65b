//! `murmur.lock`, beside a capsule's manifest: every artifact the capsule resolves pinned by
//! name, version and the sha256 of its archive bytes (the hash of the `.sha256` sidecar, the
//! roost's approval and `/spawn`). Pure: parsed, checked and rendered here; read and
//! written by the runtime through `fsx`.
//!
//! ```yaml
//! lock_version: 1
//! artifacts:
//!   - name: murmur-driver-openai
//!     resolved_version: 1.0.0
//!     sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//! ```

use serde::Deserialize;

/// The lock's name beside the default manifest (`murmur.yaml`).
pub const LOCK_FILE: &str = "murmur.lock";
/// The one `lock_version` this runtime reads and writes.
pub const LOCK_VERSION: u32 = 1;
/// The largest lock read, bytes.
pub const MAX_LOCK_BYTES: u64 = 1 << 20;
/// The most entries one lock may hold.
pub const MAX_PINS: usize = 4096;

/// The lock's file name for the manifest file `manifest_file`: its name with `.yaml` or
/// `.yml` replaced by `.lock` (`murmur.yaml` → `murmur.lock`, `anthropic.yaml` →
/// `anthropic.lock`), so two manifests in one directory keep locks of their own (but
/// `a.yaml`, `a.yml` and `a` would share `a.lock`).
pub fn file_name_for(manifest_file: &std::path::Path) -> String {
    let Some(name) = manifest_file.file_name().map(|n| n.to_string_lossy()) else {
        return LOCK_FILE.to_string();
    };
    let stem = name
        .strip_suffix(".yaml")
        .or_else(|| name.strip_suffix(".yml"))
        .unwrap_or(&name);
    if stem.is_empty() {
        LOCK_FILE.to_string()
    } else {
        format!("{stem}.lock")
    }
}

/// One artifact pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub name: String,
    pub version: String,
    /// 64 lowercase hex digits.
    pub sha256: String,
}

/// A lock: its pins, sorted by name, one per name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lock {
    pins: Vec<Pin>,
}

/// How a resolved artifact disagrees with the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The lock has no entry for it.
    Missing,
    /// The lock pins another version.
    Version { locked: String },
    /// Same version, other bytes.
    Bytes { locked: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    lock_version: u32,
    #[serde(default)]
    artifacts: Vec<EntryShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryShape {
    name: String,
    resolved_version: String,
    sha256: String,
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A name or version as the lock may hold it: printable ASCII without whitespace, at most
/// 255 bytes (a `scope/name` is at most 201; the registry decides what resolves, this only
/// keeps the file's text sane).
fn is_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s.chars().all(|c| c.is_ascii_graphic())
}

impl Lock {
    /// Parse a lock's text; what is wrong is named (the entry by its number, 1-based).
    pub fn parse(text: &str) -> Result<Lock, String> {
        if text.len() as u64 > MAX_LOCK_BYTES {
            return Err(format!("larger than {MAX_LOCK_BYTES} bytes"));
        }
        // A lock is written by `mur run` or `mur lock` and has no anchors nor aliases (no
        // name, version or hash holds `&` or `*`): refused before YAML expands one into
        // more memory than the file's bound suggests.
        if text.contains(['&', '*']) {
            return Err("not a lock: YAML anchors and aliases are not allowed in one".into());
        }
        let shape: FileShape = serde_yaml::from_str(text)
            .map_err(|e| format!("not a lock: {e} (rewrite it with `mur lock`)"))?;
        if shape.lock_version != LOCK_VERSION {
            return Err(format!(
                "lock_version {} (this runtime reads {LOCK_VERSION})",
                shape.lock_version
            ));
        }
        if shape.artifacts.len() > MAX_PINS {
            return Err(format!("more than {MAX_PINS} artifacts"));
        }
        let mut lock = Lock::default();
        for (i, e) in shape.artifacts.into_iter().enumerate() {
            let n = i + 1;
            if !is_word(&e.name) || !is_word(&e.resolved_version) {
                return Err(format!("artifact {n}: a name or version that is not one"));
            }
            if !is_sha256(&e.sha256) {
                return Err(format!(
                    "artifact {n} ({}): sha256 is not 64 lowercase hex digits",
                    e.name
                ));
            }
            if lock.get(&e.name).is_some() {
                return Err(format!("artifact {n}: {} is pinned twice", e.name));
            }
            lock.set(Pin {
                name: e.name,
                version: e.resolved_version,
                sha256: e.sha256,
            });
        }
        Ok(lock)
    }

    pub fn pins(&self) -> &[Pin] {
        &self.pins
    }

    pub fn get(&self, name: &str) -> Option<&Pin> {
        self.pins
            .binary_search_by(|p| p.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.pins[i])
    }

    /// Pin `p`, replacing the pin of its name.
    pub fn set(&mut self, p: Pin) {
        match self.pins.binary_search_by(|q| q.name.cmp(&p.name)) {
            Ok(i) => self.pins[i] = p,
            Err(i) => self.pins.insert(i, p),
        }
    }

    /// Whether `name@version` with archive hash `sha256` is what the lock pins.
    pub fn check(&self, name: &str, version: &str, sha256: &str) -> Result<(), Mismatch> {
        let p = self.get(name).ok_or(Mismatch::Missing)?;
        if p.version != version {
            return Err(Mismatch::Version {
                locked: p.version.clone(),
            });
        }
        if p.sha256 != sha256 {
            return Err(Mismatch::Bytes {
                locked: p.sha256.clone(),
            });
        }
        Ok(())
    }

    /// The lock's text, when it reads back as this lock (a name or version the parser would
    /// refuse is an error here, so no run writes a lock that no later run can read).
    pub fn to_text(&self) -> Result<String, String> {
        let text = self.render();
        match Lock::parse(&text) {
            Ok(back) if &back == self => Ok(text),
            Ok(_) => Err("the lock does not read back as written".into()),
            Err(why) => Err(format!("the lock would not read back: {why}")),
        }
    }

    /// The lock's text (names and versions are words: they need no quoting but a version
    /// that YAML would read as a number, which is quoted).
    pub fn render(&self) -> String {
        let mut out = format!(
            "# The artifacts this capsule's manifest names, pinned by content: written by `mur run`\n# when absent, verified on every launch, rewritten on purpose with `mur lock`.\nlock_version: {LOCK_VERSION}\nartifacts:"
        );
        if self.pins.is_empty() {
            out.push_str(" []");
        }
        out.push('\n');
        for p in &self.pins {
            out.push_str(&format!(
                "  - name: {}\n    resolved_version: {}\n    sha256: {}\n",
                quoted(&p.name),
                quoted(&p.version),
                p.sha256
            ));
        }
        out
    }
}

/// `s` as a YAML scalar that reads back as the same string.
fn quoted(s: &str) -> String {
    let plain =
        matches!(serde_yaml::from_str::<serde_yaml::Value>(s), Ok(serde_yaml::Value::String(t)) if t == s);
    if plain && !s.contains(['#', ':', '\'', '"']) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    const B: &str = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752";

    fn pin(name: &str, version: &str, sha: &str) -> Pin {
        Pin {
            name: name.into(),
            version: version.into(),
            sha256: sha.into(),
        }
    }

    #[test]
    fn a_lock_renders_and_parses_back_and_checks_name_version_and_bytes() {
        let mut l = Lock::default();
        l.set(pin("tools/zeta", "2.0", B));
        l.set(pin("murmur-driver-openai", "1.0.0", A));
        l.set(pin("odd'name", "1", A));
        let text = l.render();
        assert!(text.contains("lock_version: 1\n"), "{text}");
        assert_eq!(Lock::parse(&text).unwrap(), l, "{text}");
        assert_eq!(l.pins()[0].name, "murmur-driver-openai", "sorted by name");
        assert_eq!(l.check("murmur-driver-openai", "1.0.0", A), Ok(()));
        assert_eq!(
            l.check("murmur-driver-openai", "1.0.1", A),
            Err(Mismatch::Version {
                locked: "1.0.0".into()
            })
        );
        assert_eq!(
            l.check("murmur-driver-openai", "1.0.0", B),
            Err(Mismatch::Bytes { locked: A.into() })
        );
        assert_eq!(l.check("other", "1.0.0", A), Err(Mismatch::Missing));
        assert_eq!(Lock::parse(&Lock::default().render()).unwrap(), Lock::default());
    }

    #[test]
    fn each_manifest_has_a_lock_of_its_own_name() {
        use std::path::Path;
        assert_eq!(file_name_for(Path::new("murmur.yaml")), "murmur.lock");
        assert_eq!(
            file_name_for(Path::new("examples/agent/anthropic.yaml")),
            "anthropic.lock"
        );
        assert_eq!(file_name_for(Path::new("a/b.yml")), "b.lock");
        assert_eq!(file_name_for(Path::new("capsule")), "capsule.lock");
        assert_eq!(file_name_for(Path::new(".yaml")), "murmur.lock");
        assert_eq!(file_name_for(Path::new("/")), "murmur.lock");
    }

    #[test]
    fn a_bad_lock_is_refused_with_what_is_wrong() {
        let entry = |name: &str, version: &str, sha: &str| {
            format!("lock_version: 1\nartifacts:\n  - name: {name}\n    resolved_version: {version}\n    sha256: {sha}\n")
        };
        for (text, says) in [
            ("", "not a lock"),
            ("lock_version: 2\nartifacts: []\n", "lock_version 2"),
            ("lock_version: 1\nextra: 1\n", "not a lock"),
            (&entry("a", "1.0.0", "abc"), "sha256 is not 64"),
            (&entry("a", "1.0.0", &A.to_uppercase()), "sha256 is not 64"),
            (&entry("'a b'", "1.0.0", A), "not one"),
            (&format!("{}  - name: a\n    resolved_version: 2\n    sha256: {B}\n", entry("a", "1", A)), "pinned twice"),
            (&format!("lock_version: 1\nartifacts:\n  - name: a\n    resolved_version: 1\n    sha256: {A}\n    extra: x\n"), "not a lock"),
        ] {
            let e = Lock::parse(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        assert!(Lock::parse(&"#".repeat(2 << 20))
            .unwrap_err()
            .contains("larger than"));
        let bomb = format!(
            "lock_version: 1\nartifacts: [&e {{name: a, resolved_version: '1', sha256: {A}}}, *e, *e]\n"
        );
        assert!(Lock::parse(&bomb).unwrap_err().contains("anchors and aliases"));
    }

    #[test]
    fn the_longest_scoped_name_is_written_and_read_back_and_one_that_would_not_is_refused() {
        let mut l = Lock::default();
        let scoped = format!("{}/{}", "s".repeat(100), "n".repeat(100));
        l.set(pin(&scoped, "1.0.0", A));
        assert_eq!(Lock::parse(&l.to_text().unwrap()).unwrap(), l);
        l.set(pin("has space", "1.0.0", A));
        assert!(l.to_text().unwrap_err().contains("would not read back"));
    }
}
