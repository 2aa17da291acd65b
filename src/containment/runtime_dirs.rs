//! What a contained child may read besides its workdir and the closure of its allowed
//! binaries: read only, never execute. Four sources, each only as present on this host:
//!
//! - **Interpreter runtimes**, derived from each allowed binary that is a recognised
//!   interpreter (`python3*`, `node`, `perl`, `ruby`): its standard library and package
//!   directories, relative to the prefix its binary lives in (`<prefix>/bin/python3.11` →
//!   `<prefix>/lib/python3.11`, ...), plus the host's shared-library directories
//!   ([`LIBRARY_DIRS`]) that its C extensions link against (`import ssl` needs libssl).
//! - **Declared** `capabilities.shell.interpreter_runtime` directories (W-SEC-009 names
//!   them at every launch); ReadDir only with `list_dir: true`.
//! - **The TLS trust store** ([`TRUST_STORE`]), when `capabilities.network.allow` is not
//!   empty.
//! - **Time zone and locale data, OpenSSL's configuration** ([`GENERAL`]), for every
//!   contained child.
//!
//! Under `sealed` the composed root already shows the system directories and the `/etc`
//! allow-list read-only, so only what it does not show is returned, plus the interpreter
//! and declared directories, which the root rebinds without `noexec` so that C extensions
//! can be mapped (see `audit/threat-model.md`). Under `advisory` nothing is restricted and
//! nothing is returned (the warnings still are).
//!
//! The host's directory facts live here too, for both the grants and the sealed root:
//! the system directories ([`SYSTEM_DIRS`]), the `/etc` allow-list ([`ETC_ALLOWED`]) and
//! what the composed root shows without a grant ([`shows`]).

use super::class::Class;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::Capabilities;
use std::path::{Path, PathBuf};

/// What [`read_grants`] opens to a contained child.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReadGrants {
    /// Canonical, existing paths: read beneath each (ReadFile), and list directories
    /// (ReadDir). Never execute. Pass as `Spawn::read_dirs`.
    pub paths: Vec<PathBuf>,
    /// Canonical directories declared with `list_dir: false`: read files beneath, no
    /// listing. Pass as `Spawn::read_unlisted`.
    pub unlisted: Vec<PathBuf>,
    /// W-SEC-009 for each `interpreter_runtime` entry, to print at launch.
    pub warnings: Vec<Diagnostic>,
}

/// The host's shared-library directories (as present): read under `scoped` when an
/// interpreter is allowed, mappable (not `noexec`) under `sealed`. `/lib` and `/usr/lib`
/// themselves are not among them: they hold whole program trees (`git-core`, `gcc`,
/// `openssh`), not only libraries.
pub const LIBRARY_DIRS: &[&str] = super::elf::ARCH_LIB_DIRS;
/// The host's TLS trust store and OpenSSL's configuration, across distributions. Not
/// `/etc/ssl` or `/etc/pki/tls` whole: their `private` directories hold keys.
pub const TRUST_STORE: &[&str] = &[
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
    "/etc/ca-certificates",
    "/etc/ca-certificates.conf",
    "/etc/pki/tls/certs",
    "/etc/pki/tls/cert.pem",
    "/etc/pki/tls/openssl.cnf",
    "/etc/pki/ca-trust/extracted",
    "/var/lib/ca-certificates",
    "/usr/lib/ssl",
];

/// Read by nearly every program and secret in none: the local time zone (glibc reads
/// `/etc/localtime`, a link into `zoneinfo`, at the first `localtime`), the zone database
/// (`TZ=...`, Python's `zoneinfo`), and compiled locales (a child given `LANG` through
/// `env.allow` loads `locale-archive`).
/// Also OpenSSL's configuration: a program linked with OpenSSL reads it when the library
/// initialises, and some (node) refuse to start when it exists but cannot be read; it holds
/// algorithm policy (and, on Fedora, includes the system crypto policy), no secret.
pub const GENERAL: &[&str] = &[
    "/etc/localtime",
    "/usr/share/zoneinfo",
    "/usr/lib/locale",
    "/etc/ssl/openssl.cnf",
    "/etc/pki/tls/openssl.cnf",
    "/etc/crypto-policies",
];

#[cfg(target_arch = "x86_64")]
const TRIPLE: &str = "x86_64-linux-gnu";
#[cfg(target_arch = "aarch64")]
const TRIPLE: &str = "aarch64-linux-gnu";

/// The existing [`LIBRARY_DIRS`], canonical, without duplicates or nested entries.
pub fn library_dirs() -> Vec<PathBuf> {
    outermost(
        LIBRARY_DIRS
            .iter()
            .filter_map(|d| existing(Path::new(d)))
            .collect(),
    )
}

/// The recognised interpreters.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Interpreter {
    /// With its `X.Y` version when the binary's name carries it.
    Python(Option<String>),
    Node,
    Perl,
    Ruby,
}

fn versioned(rest: &str) -> bool {
    rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn recognise(name: &str) -> Option<Interpreter> {
    if let Some(rest) = name.strip_prefix("python") {
        if !versioned(rest) {
            return None;
        }
        let v = rest.contains('.').then(|| rest.to_string());
        return Some(Interpreter::Python(v));
    }
    if name == "node" || name == "nodejs" {
        return Some(Interpreter::Node);
    }
    if let Some(rest) = name.strip_prefix("perl") {
        return versioned(rest).then_some(Interpreter::Perl);
    }
    if let Some(rest) = name.strip_prefix("ruby") {
        return versioned(rest).then_some(Interpreter::Ruby);
    }
    None
}

/// The candidate runtime directories of interpreter `i` installed under `prefix` (the
/// directory holding its `bin`); existence is checked by the caller.
fn candidates(i: &Interpreter, prefix: &Path) -> Vec<PathBuf> {
    let system = prefix == Path::new("/usr");
    let p = |s: &str| prefix.join(s);
    let mut out = Vec::new();
    match i {
        Interpreter::Python(version) => {
            let versions: Vec<String> = match version {
                Some(v) => vec![format!("python{v}")],
                // An unversioned name: every `python3.*` of the prefix.
                None => ["lib", "lib64"]
                    .iter()
                    .filter_map(|l| std::fs::read_dir(p(l)).ok())
                    .flatten()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.starts_with("python3."))
                    .collect(),
            };
            for v in &versions {
                out.push(p(&format!("lib/{v}")));
                out.push(p(&format!("lib64/{v}")));
                if system {
                    // Debian's site directory and its `sitecustomize.py` target.
                    out.push(PathBuf::from(format!("/usr/local/lib/{v}")));
                    out.push(PathBuf::from(format!("/etc/{v}")));
                }
            }
            out.push(p("lib/python3/dist-packages"));
        }
        Interpreter::Node => {
            out.push(p("lib/node_modules"));
            out.push(p("lib/nodejs"));
            out.push(p("share/nodejs"));
            out.push(p(&format!("lib/{TRIPLE}/nodejs")));
        }
        Interpreter::Perl => {
            for d in ["share/perl", "share/perl5", "lib/perl5", "lib64/perl5"] {
                out.push(p(d));
            }
            for d in ["perl", "perl5", "perl-base"] {
                out.push(p(&format!("lib/{TRIPLE}/{d}")));
            }
            if system {
                out.push(PathBuf::from("/etc/perl"));
                out.push(PathBuf::from("/usr/local/share/perl"));
                out.push(PathBuf::from(format!("/usr/local/lib/{TRIPLE}/perl")));
            } else if prefix != Path::new("/usr/local") {
                // A private build (perlbrew, plenv): `<prefix>/lib/<version>`, `site_perl`.
                out.push(p("lib"));
            }
        }
        Interpreter::Ruby => {
            out.push(p("lib/ruby"));
            out.push(p("lib64/ruby"));
            out.push(p(&format!("lib/{TRIPLE}/ruby")));
            out.push(p("share/rubygems-integration"));
            if system {
                out.push(PathBuf::from("/var/lib/gems"));
            }
        }
    }
    out
}

/// The runtime directories of `binary` when it is a recognised interpreter (existing,
/// canonical), or None when it is not one.
fn interpreter_dirs(binary: &Path) -> Option<Vec<PathBuf>> {
    let real = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_path_buf());
    let name = real.file_name()?.to_str()?;
    let interpreter = recognise(name)?;
    let bin = real.parent()?;
    let prefix = match bin.parent() {
        Some(pre) if bin.file_name().is_some_and(|n| n == "bin" || n == "sbin") => {
            if pre == Path::new("/") {
                PathBuf::from("/usr")
            } else {
                pre.to_path_buf()
            }
        }
        _ => return Some(Vec::new()),
    };
    Some(
        candidates(&interpreter, &prefix)
            .iter()
            .filter_map(|c| existing(c))
            .collect(),
    )
}

/// `p` canonicalised, if it exists.
fn existing(p: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(p).ok()
}

/// Sorted, deduplicated, and without entries below another entry.
fn outermost(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort();
    v.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in v {
        if !out.iter().any(|o| p.starts_with(o)) {
            out.push(p);
        }
    }
    out
}

/// Everything a contained child of `class` may read beyond its workdir and its binaries'
/// closure, for a capsule allowed `allowed_binaries` (resolved paths) with `caps`.
pub fn read_grants(class: Class, allowed_binaries: &[PathBuf], caps: &Capabilities) -> ReadGrants {
    let mut warnings = Vec::new();
    let mut declared = Vec::new();
    let mut unlisted = Vec::new();
    for (i, entry) in caps.interpreter_runtime.iter().enumerate() {
        let mut opened = Vec::new();
        let mut absent = Vec::new();
        for d in &entry.dirs {
            match existing(&d.path) {
                Some(real) => {
                    opened.push(format!(
                        "{} ({})",
                        d.path.display(),
                        if d.list_dir {
                            "read, list"
                        } else {
                            "read, no listing"
                        }
                    ));
                    if d.list_dir {
                        declared.push(real);
                    } else {
                        unlisted.push(real);
                    }
                }
                None => absent.push(d.path.display().to_string()),
            }
        }
        let mut message = format!(
            "capabilities.shell.interpreter_runtime opens host directories to every contained child (for '{}'), read-only and never executable: {}",
            entry.binary,
            if opened.is_empty() { "nothing".to_string() } else { opened.join(", ") }
        );
        if !absent.is_empty() {
            message.push_str(&format!(
                "; absent on this host, not granted: {}",
                absent.join(", ")
            ));
        }
        warnings.push(
            Diagnostic::new(
                code::SEC_INTERPRETER_RUNTIME,
                format!("capabilities.shell.interpreter_runtime[{i}]"),
                message,
            )
            .with_hint("these paths couple the capsule to this host's layout; the runtime derives python3, node, perl and ruby directories itself"),
        );
    }
    if class == Class::Advisory {
        return ReadGrants {
            warnings,
            ..ReadGrants::default()
        };
    }
    let mut interpreters = Vec::new();
    let mut any_interpreter = false;
    for b in allowed_binaries {
        if let Some(dirs) = interpreter_dirs(b) {
            any_interpreter = true;
            interpreters.extend(dirs);
        }
    }
    // What the composed root of `sealed` already shows needs no grant there.
    let needed = |p: &PathBuf| class != Class::Sealed || !shows(p);
    let mut shared: Vec<PathBuf> = GENERAL.iter().filter_map(|g| existing(Path::new(g))).collect();
    if any_interpreter {
        shared.extend(library_dirs());
    }
    if !caps.network_allow.is_empty() {
        shared.extend(TRUST_STORE.iter().filter_map(|t| existing(Path::new(t))));
    }
    shared.retain(needed);
    let mut paths = interpreters;
    paths.extend(declared);
    paths.extend(shared);
    let paths = outermost(paths);
    let mut unlisted = outermost(unlisted);
    unlisted.retain(|u| !paths.iter().any(|p| u.starts_with(p)));
    ReadGrants {
        paths,
        unlisted,
        warnings,
    }
}

/// The host's system directories, shown read-only, `nosuid`, `nodev` and `noexec` (usrmerge
/// symlinks recreated as symlinks).
pub const SYSTEM_DIRS: [&str; 7] = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
/// The `/etc` entries shown read-only (the rest of `/etc` is absent). Only the trust store
/// of `/etc/ssl` (`certs`, `openssl.cnf`): `/etc/ssl/private` holds private keys.
pub const ETC_ALLOWED: [&str; 11] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "resolv.conf",
    "hosts",
    "nsswitch.conf",
    "localtime",
    "host.conf",
];

/// The system directories that are real directories here (not usrmerge symlinks).
pub fn system_dirs() -> Vec<PathBuf> {
    SYSTEM_DIRS
        .iter()
        .map(|d| Path::new("/").join(d))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect()
}

/// Whether the composed root shows host path `p` (canonical) without any grant: below a
/// system directory or an `/etc` allow-list entry. What it shows below a system directory
/// is `noexec`, except the library directories ([`LIBRARY_DIRS`]).
pub fn shows(p: &Path) -> bool {
    let etc = Path::new("/etc");
    SYSTEM_DIRS.iter().any(|d| {
        let host = Path::new("/").join(d);
        host.is_dir() && p.starts_with(std::fs::canonicalize(&host).unwrap_or(host))
    }) || ETC_ALLOWED.iter().any(|e| p.starts_with(etc.join(e)))
}

#[cfg(test)]
mod tests;
