//! Just enough ELF to find what an allowed binary needs to run: its `PT_INTERP` loader and
//! its `DT_NEEDED` libraries (with `DT_RUNPATH`/`DT_RPATH`). Little-endian ELF64
//! executables and shared objects only; any other file gives no dependencies. Bytes are untrusted: every read is bounds-checked and
//! the parser is fuzzed (`fuzz/fuzz_targets/elf.rs`).

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What one ELF file asks for, and the machine it is built for (`e_machine`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Needs {
    pub machine: u16,
    /// `e_type`: [`ET_EXEC`] or [`ET_DYN`].
    pub e_type: u16,
    pub interp: Option<String>,
    pub needed: Vec<String>,
    pub runpath: Vec<String>,
}

/// A string (an interpreter path, a library name, a run path) is read in pieces of this
/// many bytes until its NUL...
const STR_PIECE: usize = 4096;
/// ...up to this length (a run path of a Nix or Guix binary can name a hundred directories).
const MAX_STR: usize = 64 << 10;

/// Positional reads of an ELF file: `len` bytes at `off`, fewer at its end. The parser asks
/// only for the header, the program headers, the dynamic section and the strings it names,
/// so a file on disk is read in a few small pieces rather than whole.
struct At<'a>(&'a mut dyn FnMut(u64, usize) -> Option<Vec<u8>>);

impl At<'_> {
    fn exact<const N: usize>(&mut self, off: u64) -> Option<[u8; N]> {
        (self.0)(off, N)?.get(..N)?.try_into().ok()
    }
    fn u16(&mut self, off: u64) -> Option<u16> {
        self.exact(off).map(u16::from_le_bytes)
    }
    fn u32(&mut self, off: u64) -> Option<u32> {
        self.exact(off).map(u32::from_le_bytes)
    }
    fn u64(&mut self, off: u64) -> Option<u64> {
        self.exact(off).map(u64::from_le_bytes)
    }
    fn cstr(&mut self, off: u64) -> Option<String> {
        let mut s = Vec::new();
        while s.len() < MAX_STR {
            let piece = (self.0)(off.checked_add(s.len() as u64)?, STR_PIECE)?;
            if let Some(end) = piece.iter().position(|&c| c == 0) {
                s.extend_from_slice(&piece[..end]);
                return String::from_utf8(s).ok();
            }
            if piece.len() < STR_PIECE {
                return None;
            }
            s.extend_from_slice(&piece);
        }
        None
    }
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NEEDED: u64 = 1;
const DT_STRTAB: u64 = 5;
const DT_RPATH: u64 = 15;
const DT_RUNPATH: u64 = 29;
/// `e_type` of an executable and of a shared object (a PIE or a library): the only files a
/// loader maps. A core dump or an object file is no dependency.
pub const ET_EXEC: u16 = 2;
pub const ET_DYN: u16 = 3;
/// At most this many run-path directories (distinct) and needed names per file: a file
/// over either is no dependency (a hostile run path of thousands of `/:` entries, times
/// thousands of names, would otherwise cost millions of lookups on every spawn).
pub const MAX_RUNPATH: usize = 256;
pub const MAX_NEEDED: usize = 512;
/// At most this many bytes of names and run paths per file, kept in the parse cache: a file
/// whose strings are larger (hundreds of names each 64 KiB long) is no dependency.
pub const MAX_STRINGS: usize = 64 << 10;
/// A needed name longer than a file name can be, or a run-path entry longer than a path can
/// be, names nothing: it is skipped.
const NAME_MAX: usize = 255;
const PATH_MAX: usize = 4096;

/// This host's `e_machine`: a library built for another is skipped, as the loader does.
#[cfg(target_arch = "x86_64")]
pub const HOST_MACHINE: u16 = 62;
#[cfg(target_arch = "aarch64")]
pub const HOST_MACHINE: u16 = 183;

/// Parse `b`; `None` when it is not a well-formed little-endian ELF64 file.
pub fn parse(b: &[u8]) -> Option<Needs> {
    parse_at(&mut |off, len| {
        let start = usize::try_from(off).ok()?;
        let end = start.saturating_add(len).min(b.len());
        b.get(start..end).map(<[u8]>::to_vec)
    })
}

/// [`parse`] over positional reads (`read(off, len)`: up to `len` bytes at `off`).
fn parse_at(read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>) -> Option<Needs> {
    let mut b = At(read);
    let ident: [u8; 6] = b.exact(0)?;
    if ident[..4] != *b"\x7fELF" || ident[4] != 2 || ident[5] != 1 {
        return None;
    }
    let e_type = b.u16(0x10)?;
    if !matches!(e_type, ET_EXEC | ET_DYN) {
        return None;
    }
    let phoff = b.u64(0x20)?;
    let phentsize = u64::from(b.u16(0x36)?);
    let phnum = u64::from(b.u16(0x38)?);
    if phentsize < 56 || phnum > 512 {
        return None;
    }
    let mut needs = Needs {
        machine: b.u16(0x12)?,
        e_type,
        ..Needs::default()
    };
    let mut loads = Vec::new();
    let mut dynamic = None;
    for i in 0..phnum {
        let ph = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let kind = b.u32(ph)?;
        let offset = b.u64(ph.checked_add(8)?)?;
        let vaddr = b.u64(ph.checked_add(16)?)?;
        let filesz = b.u64(ph.checked_add(32)?)?;
        match kind {
            PT_INTERP => needs.interp = b.cstr(offset),
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
    let count = (dyn_size / 16).min(4096);
    for i in 0..count {
        let at = dyn_off.checked_add(i * 16)?;
        let (tag, val) = (b.u64(at)?, b.u64(at.checked_add(8)?)?);
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
    let mut kept = 0usize;
    for (tag, val) in entries {
        let Some(s) = strtab.checked_add(val).and_then(|o| b.cstr(o)) else {
            continue;
        };
        match tag {
            DT_NEEDED if s.len() > NAME_MAX || needs.needed.contains(&s) => {}
            DT_NEEDED if needs.needed.len() >= MAX_NEEDED => return None,
            DT_NEEDED => {
                kept += s.len();
                needs.needed.push(s);
            }
            _ => {
                let usable =
                    |p: &&str| p.len() <= PATH_MAX && (p.starts_with('/') || origin_relative(p).is_some());
                for dir in s.split(':').filter(usable) {
                    if !needs.runpath.iter().any(|d| d == dir) {
                        kept += dir.len();
                        if needs.runpath.len() >= MAX_RUNPATH {
                            return None;
                        }
                        needs.runpath.push(dir.to_string());
                    }
                }
            }
        }
        if kept > MAX_STRINGS {
            return None;
        }
    }
    Some(needs)
}

/// What follows `$ORIGIN` (or `${ORIGIN}`) in a run-path entry that starts with it: the
/// loader puts the directory of the file in its place.
fn origin_relative(entry: &str) -> Option<&str> {
    let rest = entry
        .strip_prefix("$ORIGIN")
        .or_else(|| entry.strip_prefix("${ORIGIN}"))?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
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

/// Every directory a library is looked for in, in order (`/usr/local/lib` as Debian's
/// `ld.so.conf.d/libc.conf` adds it).
pub fn lib_dirs() -> impl Iterator<Item = &'static str> {
    ARCH_LIB_DIRS
        .iter()
        .copied()
        .chain(["/lib", "/usr/lib", "/usr/local/lib"])
}
/// One file of a closure: the identity (device, inode) of the file that was read, and
/// whether the kernel executes it (a binary and a loader: read + execute) or only the
/// loader maps it (a library: read, never `execve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    pub dev: u64,
    pub ino: u64,
    pub exec: bool,
}

/// A closure: each file's canonical path and how it is granted.
pub type Closure = BTreeMap<PathBuf, Granted>;

/// How a file entered the closure.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Named by the caller (a `shell.allow` binary): granted even when it is not ELF (a
    /// script), executed.
    Binary,
    /// A file's `PT_INTERP`: executed by the kernel's `execve` of the binary.
    Loader,
    /// A `DT_NEEDED` library: mapped by the loader, never executed.
    Library,
}

/// The most files one closure holds; a spawn whose allowed binaries need more is refused.
pub const MAX_FILES: usize = 1024;

/// `binaries`, their loaders and their library closures, canonicalised. Names that cannot
/// be found are skipped: the program then fails to start, which is a refusal, not an
/// escape. Only regular files are kept (a binary swapped for a directory, or a symlink to
/// one, would grant the whole tree): a binary when it is an ELF executable for this host
/// or a script (`#!`), its loader and libraries when they are ELF executables or shared
/// objects for this host (no loader could map anything else, and the names are the
/// binary's to choose: a run path of `/home/u/.ssh` and a library named `id_ed25519` would
/// otherwise grant that key). Only a binary's own `PT_INTERP` is followed (the kernel
/// honours no other), and a library is granted for mapping only: a run path naming
/// `/usr/bin` and a library named `python3` must not make `python3` executable. Each file's
/// identity is the one read here, which whoever grants it checks again on the descriptor it
/// grants through. The binaries are taken first, then their dependencies breadth-first.
pub fn closure<'a>(binaries: impl IntoIterator<Item = &'a Path>) -> Result<Closure, String> {
    let mut seen = Closure::new();
    let mut todo: std::collections::VecDeque<(PathBuf, Role)> = binaries
        .into_iter()
        .map(|b| (b.to_path_buf(), Role::Binary))
        .collect();
    while let Some((p, role)) = todo.pop_front() {
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if let Some(g) = seen.get_mut(&real) {
            g.exec |= role != Role::Library;
            continue;
        }
        // Not a regular file, or not a file this role may be: nothing is granted (a binary
        // then fails to start).
        let Some((kind, (dev, ino), executable)) = needs_of(&real) else {
            continue;
        };
        // The kernel runs nothing without an execute bit: a file swapped in for a binary
        // (a key, a core dump) is not granted.
        if role == Role::Binary && !executable {
            continue;
        }
        let loadable = |n: &Needs| n.machine == HOST_MACHINE && n.e_type == ET_DYN;
        let needs: Option<&Needs> = match (&*kind, role) {
            // A binary built for another machine is granted; nothing of it is followed.
            (Kind::Elf(n), Role::Binary) => (n.machine == HOST_MACHINE).then_some(n),
            // A loader is a shared object that needs no loader of its own.
            (Kind::Elf(n), Role::Loader) if loadable(n) && n.interp.is_none() => Some(n),
            (Kind::Elf(n), Role::Library) if loadable(n) => Some(n),
            (Kind::OtherElf | Kind::Script | Kind::Unreadable, Role::Binary) => None,
            _ => continue,
        };
        if seen.len() >= MAX_FILES {
            return Err(format!(
                "the allowed binaries with their loaders and libraries are more than {MAX_FILES} files"
            ));
        }
        let exec = role != Role::Library;
        let Some(needs) = needs else {
            seen.insert(real, Granted { dev, ino, exec });
            continue;
        };
        if role == Role::Binary {
            if let Some(i) = needs.interp.as_ref().filter(|i| i.starts_with('/')) {
                todo.push_back((PathBuf::from(i), Role::Loader));
            }
        }
        let origin = real.parent().unwrap_or(Path::new("/"));
        let mut dirs: Vec<PathBuf> = needs
            .runpath
            .iter()
            .map(|d| match origin_relative(d) {
                Some(rest) => origin.join(rest.trim_start_matches('/')),
                None => PathBuf::from(d),
            })
            .collect();
        dirs.extend(lib_dirs().map(PathBuf::from));
        for lib in &needs.needed {
            if lib.contains('/') {
                continue;
            }
            // The first candidate the loader could map, as it searches.
            let found = dirs
                .iter()
                .filter_map(|d| std::fs::canonicalize(d.join(lib)).ok())
                .find(
                    |c| matches!(needs_of(c), Some((k, _, _)) if matches!(&*k, Kind::Elf(n) if loadable(n))),
                );
            if let Some(f) = found {
                todo.push_back((f, Role::Library));
            }
        }
        seen.insert(real, Granted { dev, ino, exec });
    }
    Ok(seen)
}

/// The identity of the regular file at `real` (canonical) when it is `want`'s, opened
/// `O_PATH` without following a last symlink: the descriptor a grant is made through, so a
/// path swapped after the closure was read grants nothing it did not check.
pub fn open_checked(real: &Path, want: &Granted) -> Result<OwnedFd, String> {
    let (handle, st) =
        regular_handle(real).ok_or_else(|| format!("{} is no longer a regular file", real.display()))?;
    if (st.st_dev, st.st_ino) != (want.dev, want.ino) {
        return Err(format!(
            "{} changed while the spawn was prepared (another file is at that path)",
            real.display()
        ));
    }
    Ok(handle)
}

/// What a regular file is, for the closure.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// A little-endian ELF64 executable or shared object, and what it needs.
    Elf(Needs),
    /// Another ELF file (32-bit, big-endian, a core dump, an object file): a binary may be
    /// one (it then runs or fails on its own), a dependency never.
    OtherElf,
    /// A script (`#!`): run by an interpreter, which must be allowed itself.
    Script,
    /// A file with an execute bit that cannot be opened for reading (mode 0711): the
    /// kernel runs it, so a binary may be one; nothing of it can be read.
    Unreadable,
    Other,
}

/// What the regular file `real` is, with its device and inode and whether it has an
/// execute bit, as the opened descriptor says, read once per process for each file version (path, device, inode, size, mtime,
/// change time, as the opened descriptor says): every contained spawn computes the closure
/// of every allowed binary.
/// `None` when `real` is not a regular file: a directory, a FIFO, a device or a symlink is
/// never opened for reading, let alone granted. A file changed in place with identical
/// metadata could give stale answers; the worst outcome is a program that fails to start
/// (a missing grant) or a library's read/execute grant kept.
fn needs_of(real: &Path) -> Option<(Arc<Kind>, (u64, u64), bool)> {
    use std::collections::HashMap;
    use std::os::unix::fs::FileExt;
    use std::sync::{Mutex, OnceLock};
    // The status fields' types differ between architectures; i128 holds each of them.
    type Key = (PathBuf, [i128; 7]);
    static CACHE: OnceLock<Mutex<HashMap<Key, Arc<Kind>>>> = OnceLock::new();
    let (handle, st) = regular_handle(real)?;
    let ident = (st.st_dev, st.st_ino);
    let executable = st.st_mode & 0o111 != 0;
    let key = (
        real.to_path_buf(),
        [
            i128::from(st.st_dev),
            i128::from(st.st_ino),
            i128::from(st.st_size),
            i128::from(st.st_mtime),
            i128::from(st.st_mtime_nsec),
            i128::from(st.st_ctime),
            i128::from(st.st_ctime_nsec),
        ],
    );
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    if let Some(hit) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Some((Arc::clone(hit), ident, executable));
    }
    let Some(file) = reopen(&handle, &st) else {
        // Not cached: its mode or this process's rights may change.
        let kind = if executable { Kind::Unreadable } else { Kind::Other };
        return Some((Arc::new(kind), ident, executable));
    };
    let kind = Arc::new(match parse_by_reads(&mut |buf, off| file.read_at(buf, off)) {
        Some(needs) => Kind::Elf(needs),
        None => {
            let mut head = [0u8; 4];
            let got = file.read_at(&mut head, 0).unwrap_or(0);
            match &head[..got] {
                [0x7f, b'E', b'L', b'F'] => Kind::OtherElf,
                [b'#', b'!', ..] => Kind::Script,
                _ => Kind::Other,
            }
        }
    });
    let mut c = cache.lock().unwrap_or_else(|p| p.into_inner());
    if c.len() > 4096 {
        c.clear();
    }
    c.insert(key, Arc::clone(&kind));
    Some((kind, ident, executable))
}

/// An `O_PATH` handle on `real` (which runs no device's open and blocks on no FIFO) and its
/// status, when it is a regular file.
fn regular_handle(real: &Path) -> Option<(OwnedFd, rustix::fs::Stat)> {
    use rustix::fs::{self as rfs, FileType, Mode, OFlags};
    let handle = rfs::open(
        real,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rfs::fstat(&handle).ok()?;
    (FileType::from_raw_mode(st.st_mode) == FileType::RegularFile).then_some((handle, st))
}

/// The inode `handle` names (status `st`), opened for reading through it: no path is
/// resolved again.
fn reopen(handle: &OwnedFd, st: &rustix::fs::Stat) -> Option<std::fs::File> {
    use rustix::fs::{self as rfs, Mode, OFlags};
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let fd = rfs::open(
        proc.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let again = rfs::fstat(&fd).ok()?;
    ((again.st_dev, again.st_ino) == (st.st_dev, st.st_ino)).then(|| std::fs::File::from(fd))
}

/// [`parse`] over positional reads (`read_at(buf, off)`, as `pread`). The last window read
/// (at least 8 KiB) answers the reads that fall inside it, as the program headers, the
/// dynamic entries and the pieces of a string each do; a file is read in a few pieces.
pub fn parse_by_reads(read_at: &mut dyn FnMut(&mut [u8], u64) -> std::io::Result<usize>) -> Option<Needs> {
    const WINDOW: usize = 8 << 10;
    // The window's offset, its bytes, and whether they end at the file's end.
    let mut window: Option<(u64, Vec<u8>, bool)> = None;
    parse_at(&mut |off, len| {
        if let Some((start, held, at_end)) = &window {
            if let Some(skip) = off.checked_sub(*start).and_then(|s| usize::try_from(s).ok()) {
                let end = skip.checked_add(len)?;
                if end <= held.len() || (*at_end && skip <= held.len()) {
                    return Some(held[skip..end.min(held.len())].to_vec());
                }
            }
        }
        let want = len.max(WINDOW);
        let mut buf = vec![0u8; want];
        let mut got = 0;
        while got < want {
            match read_at(&mut buf[got..], off.checked_add(got as u64)?) {
                Ok(0) => break,
                Ok(n) => got += n.min(want - got),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        buf.truncate(got);
        let answer = buf[..len.min(got)].to_vec();
        window = Some((off, buf, got < want));
        Some(answer)
    })
}

#[cfg(test)]
mod tests;
