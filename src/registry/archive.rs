//! The `.mur.zip` archive: a hardened reader and a deterministic writer for the subset of
//! zip that artifacts use (stored or deflate entries, no zip64, no encryption, one disk).
//!
//! The reader checks everything before it inflates anything: entry count, every name (no
//! `..`, absolute paths, backslashes, empty components or duplicates), declared sizes against
//! the per-entry and total caps, and that each entry's bytes lie inside the archive. Inflation
//! stops at the declared size, so an entry that lies about its size fails instead of growing.

use super::crc32::crc32;
use std::collections::HashSet;
use std::fmt;

const LOCAL_SIG: u32 = 0x0403_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const END_SIG: u32 = 0x0605_4b50;
const END_LEN: usize = 22;
const METHOD_STORED: u16 = 0;
const METHOD_DEFLATE: u16 = 8;
/// General-purpose flag bits: 0 encrypted, 6 strong encryption, 13 masked headers.
const FLAG_ENCRYPTED: u16 = 0x0001 | 0x0040 | 0x2000;
/// Bit 11: names are UTF-8.
const FLAG_UTF8: u16 = 0x0800;

/// Reader limits.
#[derive(Debug, Clone, Copy)]
pub struct ArchiveLimits {
    pub max_entries: usize,
    pub max_entry_bytes: u64,
    pub max_total_bytes: u64,
}

impl Default for ArchiveLimits {
    fn default() -> ArchiveLimits {
        ArchiveLimits {
            max_entries: 4096,
            max_entry_bytes: 500 << 20,
            max_total_bytes: 500 << 20,
        }
    }
}

/// Why an archive was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// Not a zip we accept (truncated, inconsistent, zip64, multi-disk, encrypted...).
    Malformed(String),
    /// An entry name that could escape or confuse extraction.
    BadName(String),
    /// The same name twice.
    Duplicate(String),
    /// More entries than allowed.
    TooManyEntries(usize),
    /// Declared or actual inflated size beyond a cap.
    TooLarge(String),
    /// The entry's bytes do not match its CRC or its declared size.
    Corrupt(String),
    /// No entry of that name.
    Missing(String),
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::Malformed(why) => write!(f, "not a valid .mur.zip: {why}"),
            ArchiveError::BadName(n) => write!(
                f,
                "archive entry name '{}' is not a safe relative path",
                n.escape_debug()
            ),
            ArchiveError::Duplicate(n) => write!(f, "archive entry '{n}' appears twice"),
            ArchiveError::TooManyEntries(n) => write!(f, "archive has {n} entries, more than allowed"),
            ArchiveError::TooLarge(why) => write!(f, "archive too large when inflated: {why}"),
            ArchiveError::Corrupt(n) => write!(f, "archive entry '{n}' is corrupt (size or CRC mismatch)"),
            ArchiveError::Missing(n) => write!(f, "archive has no entry '{n}'"),
        }
    }
}

impl std::error::Error for ArchiveError {}

fn malformed(why: &str) -> ArchiveError {
    ArchiveError::Malformed(why.to_string())
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, ArchiveError> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| malformed("truncated header"))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, ArchiveError> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| malformed("truncated header"))
}

/// One entry as the central directory describes it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    method: u16,
    crc: u32,
    compressed: usize,
    pub size: u64,
    data_at: usize,
}

/// An opened archive: the index is checked, entries are inflated on demand.
pub struct Archive<'a> {
    bytes: &'a [u8],
    entries: Vec<Entry>,
}

/// A safe relative entry name: UTF-8, no NUL, no backslash, not absolute, no empty, `.` or
/// `..` component, no drive prefix.
pub fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 1024
        && !name.contains(['\\', '\0', ':'])
        && !name.starts_with('/')
        && name.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

impl<'a> Archive<'a> {
    /// Check the archive's index against `limits`.
    pub fn open(bytes: &'a [u8], limits: &ArchiveLimits) -> Result<Archive<'a>, ArchiveError> {
        if bytes.len() < END_LEN {
            return Err(malformed("too short"));
        }
        // The end record is the last 22 bytes plus its comment; find it exactly.
        let earliest = bytes.len().saturating_sub(END_LEN + u16::MAX as usize);
        let end = (earliest..=bytes.len() - END_LEN)
            .rev()
            .find(|&at| {
                u32_at(bytes, at).ok() == Some(END_SIG)
                    && u16_at(bytes, at + 20).is_ok_and(|c| at + END_LEN + c as usize == bytes.len())
            })
            .ok_or_else(|| malformed("no end of central directory record"))?;
        let (disk, cd_disk) = (u16_at(bytes, end + 4)?, u16_at(bytes, end + 6)?);
        let (here, total) = (u16_at(bytes, end + 8)?, u16_at(bytes, end + 10)?);
        let cd_size = u32_at(bytes, end + 12)? as usize;
        let cd_at = u32_at(bytes, end + 16)? as usize;
        if disk != 0 || cd_disk != 0 || here != total {
            return Err(malformed("multi-disk archives are not supported"));
        }
        if total == u16::MAX || cd_at == u32::MAX as usize || cd_size == u32::MAX as usize {
            return Err(malformed("zip64 archives are not supported"));
        }
        let count = usize::from(total);
        if count > limits.max_entries {
            return Err(ArchiveError::TooManyEntries(count));
        }
        if cd_at.checked_add(cd_size).is_none_or(|e| e > end) {
            return Err(malformed("central directory outside the archive"));
        }
        let mut entries = Vec::with_capacity(count);
        let mut names = HashSet::with_capacity(count);
        let mut total_size: u64 = 0;
        let mut at = cd_at;
        for _ in 0..count {
            if u32_at(bytes, at)? != CENTRAL_SIG || at + 46 > cd_at + cd_size {
                return Err(malformed("bad central directory entry"));
            }
            let flags = u16_at(bytes, at + 8)?;
            let method = u16_at(bytes, at + 10)?;
            let crc = u32_at(bytes, at + 16)?;
            let compressed = u32_at(bytes, at + 20)?;
            let size = u32_at(bytes, at + 24)?;
            let name_len = usize::from(u16_at(bytes, at + 28)?);
            let extra_len = usize::from(u16_at(bytes, at + 30)?);
            let comment_len = usize::from(u16_at(bytes, at + 32)?);
            let local_at = u32_at(bytes, at + 42)? as usize;
            let next = at + 46 + name_len + extra_len + comment_len;
            if next > cd_at + cd_size {
                return Err(malformed("central directory entry overruns the directory"));
            }
            let raw_name = &bytes[at + 46..at + 46 + name_len];
            let name = std::str::from_utf8(raw_name)
                .map_err(|_| ArchiveError::BadName(String::from_utf8_lossy(raw_name).into_owned()))?
                .to_string();
            if flags & FLAG_ENCRYPTED != 0 {
                return Err(malformed("encrypted entries are not supported"));
            }
            if method != METHOD_STORED && method != METHOD_DEFLATE {
                return Err(malformed(&format!(
                    "entry '{name}' uses compression method {method}"
                )));
            }
            if compressed == u32::MAX || size == u32::MAX || local_at == u32::MAX as usize {
                return Err(malformed("zip64 entries are not supported"));
            }
            if !safe_name(&name) {
                return Err(ArchiveError::BadName(name));
            }
            if !names.insert(name.clone()) {
                return Err(ArchiveError::Duplicate(name));
            }
            let size = u64::from(size);
            if size > limits.max_entry_bytes {
                return Err(ArchiveError::TooLarge(format!(
                    "entry '{name}' declares {size} bytes"
                )));
            }
            total_size += size;
            if total_size > limits.max_total_bytes {
                return Err(ArchiveError::TooLarge(format!(
                    "entries declare more than {} bytes",
                    limits.max_total_bytes
                )));
            }
            // The local header must agree on the name; its data must end before the directory.
            if u32_at(bytes, local_at)? != LOCAL_SIG {
                return Err(malformed(&format!("entry '{name}' has no local header")));
            }
            let local_name_len = usize::from(u16_at(bytes, local_at + 26)?);
            let local_extra_len = usize::from(u16_at(bytes, local_at + 28)?);
            let data_at = local_at + 30 + local_name_len + local_extra_len;
            if bytes.get(local_at + 30..local_at + 30 + local_name_len) != Some(raw_name) {
                return Err(malformed(&format!(
                    "entry '{name}' has mismatched local and central names"
                )));
            }
            let compressed = compressed as usize;
            if data_at.checked_add(compressed).is_none_or(|e| e > cd_at) {
                return Err(malformed(&format!(
                    "entry '{name}' data lies outside the archive"
                )));
            }
            if method == METHOD_STORED && compressed as u64 != size {
                return Err(ArchiveError::Corrupt(name));
            }
            entries.push(Entry {
                name,
                method,
                crc,
                compressed,
                size,
                data_at,
            });
            at = next;
        }
        Ok(Archive { bytes, entries })
    }

    /// The entries in archive order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether an entry of this name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.name == name)
    }

    /// Inflate every entry once (each bounded by its declared size) and check every CRC.
    pub fn verify(&self) -> Result<(), ArchiveError> {
        self.entries.iter().try_for_each(|e| self.read(&e.name).map(drop))
    }

    /// Inflate one entry, stopping at its declared size, and check its CRC.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, ArchiveError> {
        let e = self
            .entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| ArchiveError::Missing(name.to_string()))?;
        let raw = &self.bytes[e.data_at..e.data_at + e.compressed];
        let size = e.size as usize;
        let data = match e.method {
            METHOD_STORED => raw.to_vec(),
            _ => match miniz_oxide::inflate::decompress_to_vec_with_limit(raw, size) {
                Ok(d) => d,
                Err(err) if err.status == miniz_oxide::inflate::TINFLStatus::HasMoreOutput => {
                    return Err(ArchiveError::TooLarge(format!(
                        "entry '{name}' inflates beyond its declared {size} bytes"
                    )))
                }
                Err(_) => return Err(ArchiveError::Corrupt(name.to_string())),
            },
        };
        if data.len() != size || crc32(&data) != e.crc {
            return Err(ArchiveError::Corrupt(name.to_string()));
        }
        Ok(data)
    }
}

/// Write a deflate zip of `files` in the given order. Deterministic: fixed timestamps, no
/// extra fields, so the same inputs give the same bytes (and the same sha256).
pub fn write(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, ArchiveError> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let mut seen = HashSet::new();
    if files.len() >= usize::from(u16::MAX) {
        return Err(ArchiveError::TooManyEntries(files.len()));
    }
    for (name, data) in files {
        if !safe_name(name) {
            return Err(ArchiveError::BadName(name.clone()));
        }
        if !seen.insert(name.as_str()) {
            return Err(ArchiveError::Duplicate(name.clone()));
        }
        let packed = miniz_oxide::deflate::compress_to_vec(data, 6);
        let too_big = |n: usize| u32::try_from(n).ok().filter(|&n| n != u32::MAX).is_none();
        if too_big(data.len()) || too_big(packed.len()) || too_big(out.len()) {
            return Err(ArchiveError::TooLarge(format!("entry '{name}' needs zip64")));
        }
        let crc = crc32(data);
        let offset = out.len() as u32;
        // DOS date 1980-01-01, time 00:00.
        let (time, date) = (0u16, 0x0021u16);
        let mut common = Vec::new();
        common.extend_from_slice(&20u16.to_le_bytes()); // version needed
        common.extend_from_slice(&FLAG_UTF8.to_le_bytes());
        common.extend_from_slice(&METHOD_DEFLATE.to_le_bytes());
        common.extend_from_slice(&time.to_le_bytes());
        common.extend_from_slice(&date.to_le_bytes());
        common.extend_from_slice(&crc.to_le_bytes());
        common.extend_from_slice(&(packed.len() as u32).to_le_bytes());
        common.extend_from_slice(&(data.len() as u32).to_le_bytes());
        common.extend_from_slice(&(name.len() as u16).to_le_bytes());
        common.extend_from_slice(&0u16.to_le_bytes()); // extra length

        out.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        out.extend_from_slice(&common);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&packed);

        central.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        central.extend_from_slice(&0x031eu16.to_le_bytes()); // made by: unix, 3.0
        central.extend_from_slice(&common);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment length
        central.extend_from_slice(&0u16.to_le_bytes()); // disk number
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&(0o100644u32 << 16).to_le_bytes()); // external: regular 0644
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_at = out.len() as u32;
    let count = files.len() as u16;
    out.extend_from_slice(&central);
    out.extend_from_slice(&END_SIG.to_le_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_at.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<(String, Vec<u8>)> {
        vec![
            ("murmur.yaml".into(), b"name: a\nversion: 0.1.0\n".to_vec()),
            ("dir/skill.md".into(), vec![b'x'; 10_000]),
        ]
    }

    #[test]
    fn round_trip_in_order_and_deterministic() {
        let bytes = write(&files()).unwrap();
        assert_eq!(bytes, write(&files()).unwrap());
        let a = Archive::open(&bytes, &ArchiveLimits::default()).unwrap();
        let names: Vec<_> = a.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["murmur.yaml", "dir/skill.md"]);
        assert_eq!(a.read("dir/skill.md").unwrap(), vec![b'x'; 10_000]);
        assert_eq!(a.read("nope"), Err(ArchiveError::Missing("nope".into())));
    }

    #[test]
    fn names() {
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a\\b",
            "a//b",
            "./a",
            "C:/x",
            "a/",
        ] {
            assert!(!safe_name(bad), "{bad}");
        }
        assert!(safe_name("a/b.c"));
        assert_eq!(
            write(&[("../x".into(), vec![])]),
            Err(ArchiveError::BadName("../x".into()))
        );
    }

    #[test]
    fn caps_and_corruption() {
        let bytes = write(&files()).unwrap();
        let small = ArchiveLimits {
            max_total_bytes: 5000,
            ..ArchiveLimits::default()
        };
        assert!(matches!(
            Archive::open(&bytes, &small),
            Err(ArchiveError::TooLarge(_))
        ));
        let few = ArchiveLimits {
            max_entries: 1,
            ..ArchiveLimits::default()
        };
        assert_eq!(
            Archive::open(&bytes, &few).err(),
            Some(ArchiveError::TooManyEntries(2))
        );
        assert!(Archive::open(&bytes[..bytes.len() - 1], &ArchiveLimits::default()).is_err());
        assert!(Archive::open(b"PK\x05\x06", &ArchiveLimits::default()).is_err());
    }
}
