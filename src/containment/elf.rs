//! Just enough ELF to find what an allowed binary needs to run: its `PT_INTERP` loader and
//! its `DT_NEEDED` libraries (with `DT_RUNPATH`/`DT_RPATH`). Little-endian ELF64 only; any
//! other file gives no dependencies. Bytes are untrusted: every read is bounds-checked and
//! the parser is fuzzed (`fuzz/fuzz_targets/elf.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What one ELF file asks for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    pub interp: Option<String>,
    pub needed: Vec<String>,
    pub runpath: Vec<String>,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(off..off.checked_add(2)?)?.try_into().ok()?,
    ))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(off..off.checked_add(4)?)?.try_into().ok()?,
    ))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(off..off.checked_add(8)?)?.try_into().ok()?,
    ))
}
fn cstr_at(b: &[u8], off: usize) -> Option<String> {
    let rest = b.get(off..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    String::from_utf8(rest[..end].to_vec()).ok()
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;

/// Parse `b`; `None` when it is not a well-formed little-endian ELF64 file.
pub fn parse(b: &[u8]) -> Option<Needs> {
    if b.get(..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
        return None;
    }
    let phoff = usize::try_from(u64_at(b, 0x20)?).ok()?;
    let phentsize = usize::from(u16_at(b, 0x36)?);
    let phnum = usize::from(u16_at(b, 0x38)?);
    if phentsize < 56 || phnum > 512 {
        return None;
    }
    let mut needs = Needs::default();
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let kind = u32_at(b, ph)?;
        let offset = u64_at(b, ph.checked_add(8)?)?;
        let vaddr = u64_at(b, ph.checked_add(16)?)?;
        let filesz = u64_at(b, ph.checked_add(32)?)?;
        match kind {
            PT_INTERP => needs.interp = cstr_at(b, usize::try_from(offset).ok()?),
            PT_LOAD => loads.push((vaddr, offset, filesz)),
            PT_DYNAMIC => dynamic = Some((offset, filesz)),
            _ => {}
        }
    }
    let Some((dyn_off, dyn_size)) = dynamic else {
        return Some(needs);
    };
    let mut entries = Vec::new();
    let mut strtab_vaddr = None;
    let count = usize::try_from(dyn_size / 16).ok()?.min(4096);
    for i in 0..count {
        let at = usize::try_from(dyn_off).ok()?.checked_add(i * 16)?;
        let (tag, val) = (u64_at(b, at)?, u64_at(b, at.checked_add(8)?)?);
        match tag {
            0 => break,
            DT_STRTAB => strtab_vaddr = Some(val),
            DT_NEEDED | DT_RPATH | DT_RUNPATH => entries.push((tag, val)),
            _ => {}
        }
    }
    let strtab = strtab_vaddr.and_then(|v| {
        loads
            .iter()
            .find(|(vaddr, _, size)| v >= *vaddr && v - vaddr < *size)
            .and_then(|(vaddr, off, _)| (v - vaddr).checked_add(*off))
    })?;
    for (tag, val) in entries {
        let Some(s) = strtab
            .checked_add(val)
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| cstr_at(b, o))
        else {
            continue;
        };
        match tag {
            DT_NEEDED => needs.needed.push(s),
            _ => needs
                .runpath
                .extend(s.split(':').filter(|p| p.starts_with('/')).map(str::to_string)),
        }
    }
    Some(needs)
}

/// The per-architecture library directories (as Debian and others lay them out), searched
/// after a file's own run path, then `/lib` and `/usr/lib` ([`lib_dirs`]).
pub const ARCH_LIB_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
];

/// Every directory a library is looked for in, in order.
pub fn lib_dirs() -> impl Iterator<Item = &'static str> {
    ARCH_LIB_DIRS.iter().copied().chain(["/lib", "/usr/lib"])
}
/// `binary`, its loader and its library closure, canonicalised. Names that cannot be found
/// are skipped: the program then fails to start, which is a refusal, not an escape.
pub fn closure(binary: &Path) -> BTreeSet<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![binary.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if !seen.insert(real.clone()) || seen.len() > 256 {
            continue;
        }
        let Some(needs) = needs_of(&real) else { continue };
        if let Some(i) = &needs.interp {
            todo.push(PathBuf::from(i));
        }
        let mut dirs: Vec<&str> = needs.runpath.iter().map(String::as_str).collect();
        for d in lib_dirs() {
            dirs.push(d);
        }
        for lib in &needs.needed {
            if lib.contains('/') {
                continue;
            }
            let found = dirs.iter().map(|d| Path::new(d).join(lib)).find(|c| c.is_file());
            if let Some(f) = found {
                todo.push(f);
            }
        }
    }
    seen
}

/// What `real` needs, parsed once per process for each file version (path, device,
/// inode, size, mtime): every contained spawn computes the closure of every allowed binary,
/// and reading libc or an interpreter whole each time cost most of a spawn. A file changed
/// in place with identical metadata could give stale answers; the worst outcome is a
/// program that fails to start (a missing grant) or a library's read/execute grant kept.
fn needs_of(real: &Path) -> Option<Needs> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    use std::sync::{Mutex, OnceLock};
    type Key = (PathBuf, u64, u64, u64, i64, i64);
    static CACHE: OnceLock<Mutex<HashMap<Key, Option<Needs>>>> = OnceLock::new();
    let m = std::fs::metadata(real).ok()?;
    let key = (
        real.to_path_buf(),
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
    );
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return hit.clone();
    }
    let needs = read_head(real).ok().and_then(|b| parse(&b));
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if c.len() > 4096 {
        c.clear();
    }
    c.insert(key, needs.clone());
    needs
}

fn read_head(p: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(p)?.take(64 << 20).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_binary_needs_its_loader_and_libc() {
        let set = closure(Path::new("/bin/ls"));
        let names: Vec<String> = set.iter().map(|p| p.display().to_string()).collect();
        assert!(names.iter().any(|n| n.contains("ld-linux")), "{names:?}");
        assert!(names.iter().any(|n| n.contains("libc.so")), "{names:?}");
    }

    #[test]
    fn offsets_near_the_top_of_the_address_space_are_refused_not_overflowed() {
        // Found by the fuzzer: a load segment and a string table whose offsets add past
        // u64::MAX.
        let mut b = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/tiny")).unwrap();
        let phoff = u64_at(&b, 0x20).unwrap() as usize;
        let phnum = u16_at(&b, 0x38).unwrap() as usize;
        for i in 0..phnum {
            let ph = phoff + i * 56;
            if u32_at(&b, ph) == Some(PT_LOAD) {
                b[ph + 8..ph + 16].copy_from_slice(&u64::MAX.to_le_bytes());
            }
        }
        let _ = parse(&b);
        assert!(
            parse(&std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/tiny")).unwrap())
                .is_some()
        );
    }

    #[test]
    fn garbage_is_not_elf() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"\x7fELF\x02\x01"), None);
        assert_eq!(parse(&[0u8; 100]), None);
    }
}
