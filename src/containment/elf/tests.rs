//! The ELF parser and the closure of allowed binaries, on built files and the host's own.

use super::*;

#[test]
fn a_system_binary_needs_its_loader_and_libc() {
    let set = closure([Path::new("/bin/ls")]).unwrap();
    let ls = std::fs::canonicalize("/bin/ls").unwrap();
    let find = |part: &str| {
        set.iter()
            .find(|(p, _)| p.display().to_string().contains(part))
            .map(|(_, g)| *g)
            .unwrap_or_else(|| panic!("{part}: {set:?}"))
    };
    // The binary and its loader are executed by the kernel; libc is only mapped.
    assert!(set[&ls].exec, "{set:?}");
    assert!(find("ld-linux").exec, "{set:?}");
    assert!(!find("libc.so").exec, "{set:?}");
    let st = rustix::fs::stat(&ls).unwrap();
    assert_eq!((set[&ls].dev, set[&ls].ino), (st.st_dev, st.st_ino));
    // A binary named beside another's library makes that library executable too.
    let libc = set
        .keys()
        .find(|p| p.display().to_string().contains("libc.so"))
        .unwrap();
    let both = closure([Path::new("/bin/ls"), libc.as_path()]).unwrap();
    assert!(both[libc].exec, "{both:?}");
    assert_eq!(both.len(), set.len());
}

/// A little-endian ELF64 file whose one load segment is the whole file, with the
/// loader, run path and needed names given.
fn elf_with(interp: Option<&str>, runpath: &str, needed: &[&str]) -> Vec<u8> {
    let phnum = 2 + usize::from(interp.is_some());
    let dyn_off = 64 + phnum * 56;
    let entries = 2 + needed.len() + 1;
    let str_off = dyn_off + entries * 16;
    let mut strtab = vec![0u8];
    let rp = strtab.len();
    strtab.extend_from_slice(runpath.as_bytes());
    strtab.push(0);
    let interp_at = interp.map(|i| {
        let at = strtab.len();
        strtab.extend_from_slice(i.as_bytes());
        strtab.push(0);
        at
    });
    let mut names = Vec::new();
    for n in needed {
        names.push(strtab.len());
        strtab.extend_from_slice(n.as_bytes());
        strtab.push(0);
    }
    let total = (str_off + strtab.len()) as u64;
    let mut b = vec![0u8; 64];
    b[..6].copy_from_slice(b"\x7fELF\x02\x01");
    b[6] = 1;
    b[0x10..0x12].copy_from_slice(&3u16.to_le_bytes());
    b[0x12..0x14].copy_from_slice(&HOST_MACHINE.to_le_bytes());
    b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
    b[0x34..0x36].copy_from_slice(&64u16.to_le_bytes());
    b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
    b[0x38..0x3a].copy_from_slice(&(phnum as u16).to_le_bytes());
    let phdr = |kind: u32, off: u64, size: u64| {
        let mut p = vec![0u8; 56];
        p[..4].copy_from_slice(&kind.to_le_bytes());
        p[8..16].copy_from_slice(&off.to_le_bytes());
        p[16..24].copy_from_slice(&off.to_le_bytes());
        p[32..40].copy_from_slice(&size.to_le_bytes());
        p[40..48].copy_from_slice(&size.to_le_bytes());
        p
    };
    b.extend(phdr(PT_LOAD, 0, total));
    b.extend(phdr(PT_DYNAMIC, dyn_off as u64, (entries * 16) as u64));
    if let (Some(i), Some(at)) = (interp, interp_at) {
        b.extend(phdr(PT_INTERP, (str_off + at) as u64, (i.len() + 1) as u64));
    }
    let mut entry = |tag: u64, val: u64| {
        b.extend_from_slice(&tag.to_le_bytes());
        b.extend_from_slice(&val.to_le_bytes());
    };
    entry(DT_STRTAB, str_off as u64);
    entry(DT_RUNPATH, rp as u64);
    for n in names {
        entry(DT_NEEDED, n as u64);
    }
    entry(0, 0);
    b.extend(strtab);
    b
}

#[test]
fn a_dependency_that_is_not_elf_gets_no_grant() {
    let dir = std::env::temp_dir().join(format!("murmur-elf-closure-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = std::fs::canonicalize(&dir).unwrap();
    std::fs::write(dir.join("id_ed25519"), b"-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    let lib_bytes = elf_with(None, "/nowhere", &[]);
    std::fs::write(dir.join("libreal.so"), &lib_bytes).unwrap();
    let bin = dir.join("hostile");
    let elf = elf_with(None, dir.to_str().unwrap(), &["id_ed25519", "libreal.so"]);
    let needs = parse(&elf).unwrap();
    assert_eq!(needs.needed, ["id_ed25519", "libreal.so"]);
    assert_eq!(needs.runpath, [dir.display().to_string()]);
    std::fs::write(&bin, &elf).unwrap();
    executable(&[&bin]);
    let got = closure([bin.as_path()]).unwrap();
    assert!(got[&bin].exec, "{got:?}");
    assert!(
        got.get(&dir.join("libreal.so")).is_some_and(|g| !g.exec),
        "an ELF library on the run path is granted for mapping only: {got:?}"
    );
    assert!(!got.contains_key(&dir.join("id_ed25519")), "{got:?}");
    // A grant is made through a descriptor on the file that was read: the same path
    // holding another file afterwards is refused.
    let lib = dir.join("libreal.so");
    assert!(open_checked(&lib, &got[&lib]).is_ok());
    // (Made before the old one goes, so its inode number cannot be the old one's.)
    std::fs::write(dir.join("other"), &lib_bytes).unwrap();
    std::fs::rename(dir.join("other"), &lib).unwrap();
    let err = open_checked(&lib, &got[&lib]).unwrap_err();
    assert!(err.contains("changed while the spawn was prepared"), "{err}");
    std::fs::remove_file(&lib).unwrap();
    std::fs::create_dir(&lib).unwrap();
    let err = open_checked(&lib, &got[&lib]).unwrap_err();
    assert!(err.contains("is no longer a regular file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_loader_that_is_a_fifo_is_not_opened_and_a_binary_that_is_no_regular_file_gets_nothing() {
    let dir = std::env::temp_dir().join(format!("murmur-elf-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = std::fs::canonicalize(&dir).unwrap();
    let fifo = dir.join("loader");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let bin = dir.join("hostile");
    std::fs::write(&bin, elf_with(Some(fifo.to_str().unwrap()), "/nowhere", &[])).unwrap();
    executable(&[&bin]);
    assert_eq!(
        parse(&std::fs::read(&bin).unwrap()).unwrap().interp.as_deref(),
        fifo.to_str()
    );
    // Opening the FIFO for reading would block this thread until a writer came.
    let (tx, rx) = std::sync::mpsc::channel();
    let b = bin.clone();
    std::thread::spawn(move || {
        let _ = tx.send(closure([b.as_path()]).unwrap());
    });
    let got = rx.recv_timeout(std::time::Duration::from_secs(10));
    use std::os::unix::fs::OpenOptionsExt;
    let writer = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let got = got.expect("the closure returned (the FIFO was not opened)");
    drop(writer);
    assert_eq!(got.keys().collect::<Vec<_>>(), [&bin]);
    // A directory, or a symlink to one, in the binary's place grants nothing.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    assert_eq!(closure([dir.as_path()]), Ok(Closure::new()));
    assert_eq!(closure([link.as_path()]), Ok(Closure::new()));
    assert_eq!(closure([fifo.as_path()]), Ok(Closure::new()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Give each file an execute bit (mode 0755).
fn executable(files: &[&Path]) {
    use std::os::unix::fs::PermissionsExt;
    for f in files {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A fresh directory for one test, canonical.
fn scratch(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("murmur-elf-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(&dir).unwrap()
}

#[test]
fn only_a_binarys_own_absolute_loader_is_executable_and_only_loadable_elf_is_granted() {
    let dir = scratch("roles");
    let d = dir.to_str().unwrap();
    // A library naming a "loader": the kernel honours no library's PT_INTERP.
    let target = dir.join("python3");
    std::fs::write(&target, elf_with(None, "/nowhere", &[])).unwrap();
    std::fs::write(
        dir.join("libsneaky.so"),
        elf_with(Some(target.to_str().unwrap()), "/nowhere", &[]),
    )
    .unwrap();
    // A core dump (ET_CORE) on the run path, named as a library.
    let mut core = elf_with(None, "/nowhere", &[]);
    core[0x10..0x12].copy_from_slice(&4u16.to_le_bytes());
    std::fs::write(dir.join("libcore.so"), &core).unwrap();
    // A library built for another machine first on the run path, the right one after.
    std::fs::create_dir_all(dir.join("other-arch")).unwrap();
    let mut foreign = elf_with(None, "/nowhere", &[]);
    foreign[0x12..0x14].copy_from_slice(&(HOST_MACHINE ^ 1).to_le_bytes());
    std::fs::write(dir.join("other-arch/libarch.so"), &foreign).unwrap();
    std::fs::write(dir.join("libarch.so"), elf_with(None, "/nowhere", &[])).unwrap();
    let runpath = format!("{d}/other-arch:{d}");
    let bin = dir.join("bin");
    std::fs::write(
        &bin,
        elf_with(
            Some("relative/ld.so"),
            &runpath,
            &["libsneaky.so", "libcore.so", "libarch.so"],
        ),
    )
    .unwrap();
    // A script may be a binary (its interpreter is allowed on its own); a key may not.
    let script = dir.join("tool");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let key = dir.join("key");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    // (Even with an execute bit, a file that is neither ELF nor a script is no binary.)
    executable(&[&bin, &script, &key]);
    let got = closure([bin.as_path(), script.as_path(), key.as_path()]).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mut names: Vec<(String, bool)> = got
        .iter()
        .map(|(p, g)| (p.strip_prefix(&dir).unwrap().display().to_string(), g.exec))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("bin".to_string(), true),
            ("libarch.so".to_string(), false),
            ("libsneaky.so".to_string(), false),
            ("tool".to_string(), true),
        ]
    );
}

#[test]
fn loaders_and_libraries_are_shared_objects_origin_is_expanded_and_any_elf_binary_runs() {
    let dir = scratch("kinds");
    let d = dir.to_str().unwrap();
    // A "loader" that needs a loader itself (an executable such as python3) is none.
    let fake_loader = dir.join("fake-ld.so");
    std::fs::write(
        &fake_loader,
        elf_with(Some("/lib64/ld-linux-x86-64.so.2"), "/nowhere", &[]),
    )
    .unwrap();
    let bin = dir.join("bin");
    std::fs::write(
        &bin,
        elf_with(
            Some(fake_loader.to_str().unwrap()),
            "$ORIGIN/sub",
            &["libexec.so", "liborigin.so"],
        ),
    )
    .unwrap();
    // An executable (ET_EXEC) named as a library is no library; one beside the binary,
    // found through $ORIGIN, is.
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let mut exec_type = elf_with(None, "/nowhere", &[]);
    exec_type[0x10..0x12].copy_from_slice(&ET_EXEC.to_le_bytes());
    std::fs::write(dir.join("sub/libexec.so"), &exec_type).unwrap();
    std::fs::write(dir.join("sub/liborigin.so"), elf_with(None, "/nowhere", &[])).unwrap();
    // A 32-bit ELF binary is a binary (it runs or fails on its own).
    let elf32 = dir.join("elf32");
    std::fs::write(&elf32, b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0\x02\0\x03\0").unwrap();
    executable(&[&bin, &elf32]);
    // An ELF file without an execute bit (a core dump swapped in) is no binary.
    let core = dir.join("core");
    std::fs::write(&core, b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x04\0\x3e\0").unwrap();
    let got = closure([bin.as_path(), elf32.as_path(), core.as_path()]).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let mut names: Vec<(String, bool)> = got
        .iter()
        .map(|(p, g)| (p.strip_prefix(d).unwrap().display().to_string(), g.exec))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("bin".to_string(), true),
            ("elf32".to_string(), true),
            ("sub/liborigin.so".to_string(), false),
        ]
    );
    // The strings a file may keep are bounded; names too long for a file are skipped.
    let long = "l".repeat(NAME_MAX + 1);
    assert_eq!(
        parse(&elf_with(None, "/nowhere", &[&long, "libc.so.6"]))
            .unwrap()
            .needed,
        ["libc.so.6"]
    );
    let names: Vec<String> = (0..MAX_NEEDED).map(|i| format!("{i:0>250}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    const { assert!(MAX_NEEDED * 250 > MAX_STRINGS) };
    assert!(parse(&elf_with(None, "/nowhere", &names)).is_none());
}

#[test]
fn run_paths_and_needed_names_are_capped_and_a_closure_too_big_is_refused() {
    // Thousands of entries of one directory are one directory.
    let same = vec!["/usr/lib"; 5000].join(":");
    assert_eq!(parse(&elf_with(None, &same, &[])).unwrap().runpath, ["/usr/lib"]);
    let many: Vec<String> = (0..=MAX_RUNPATH).map(|i| format!("/d{i}")).collect();
    assert!(parse(&elf_with(None, &many.join(":"), &[])).is_none());
    assert!(parse(&elf_with(None, &many[1..].join(":"), &[])).is_some());
    let names: Vec<String> = (0..=MAX_NEEDED).map(|i| format!("lib{i}.so")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert!(parse(&elf_with(None, "/nowhere", &names)).is_none());
    assert!(parse(&elf_with(None, "/nowhere", &names[1..])).is_some());
    let dir = scratch("cap");
    let files: Vec<PathBuf> = (0..=MAX_FILES).map(|i| dir.join(format!("b{i}"))).collect();
    let bytes = elf_with(None, "/nowhere", &[]);
    for f in &files {
        std::fs::write(f, &bytes).unwrap();
        executable(&[f]);
    }
    let err = closure(files.iter().map(PathBuf::as_path)).unwrap_err();
    let fits = closure(files[1..].iter().map(PathBuf::as_path)).map(|c| c.len());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        err,
        format!("the allowed binaries with their loaders and libraries are more than {MAX_FILES} files")
    );
    assert_eq!(fits, Ok(MAX_FILES));
}

#[test]
fn a_file_read_in_pieces_gives_what_its_whole_bytes_give() {
    let mut files: Vec<PathBuf> = vec![
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/tiny")),
        std::env::current_exe().unwrap(),
    ];
    files.extend(closure([Path::new("/bin/ls")]).unwrap().into_keys());
    assert!(files.len() >= 4, "{files:?}");
    for f in files {
        let whole = parse(&std::fs::read(&f).unwrap());
        assert!(whole.is_some(), "{}", f.display());
        assert_eq!(
            needs_of(&f).map(|(n, _, _)| (*n).clone()),
            whole.map(Kind::Elf),
            "{}",
            f.display()
        );
    }
}

#[test]
fn a_string_longer_than_a_read_piece_is_read_whole_up_to_its_cap() {
    let long: String = (0..1000).map(|i| format!("/nix/store/d{i:05}:")).collect();
    assert!(long.len() > 3 * STR_PIECE && long.len() < MAX_STR);
    let mut b = vec![b'x'; 100];
    b.extend_from_slice(long.as_bytes());
    b.push(0);
    b.extend_from_slice(&vec![b'y'; MAX_STR + 10]);
    let mut read = |off: u64, len: usize| {
        let start = (off as usize).min(b.len());
        Some(b[start..(start + len).min(b.len())].to_vec())
    };
    let mut at = At(&mut read);
    assert_eq!(at.cstr(100).as_deref(), Some(long.as_str()));
    // No NUL within the cap, or none before the end: no string.
    assert_eq!(at.cstr(100 + long.len() as u64 + 1), None);
    assert_eq!(at.cstr(100 + long.len() as u64 + 2 + MAX_STR as u64), None);
}

#[test]
fn offsets_near_the_top_of_the_address_space_are_refused_not_overflowed() {
    // Found by the fuzzer: a load segment and a string table whose offsets add past
    // u64::MAX.
    let mut b = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/tiny")).unwrap();
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let phnum = u16::from_le_bytes(b[0x38..0x3a].try_into().unwrap()) as usize;
    for i in 0..phnum {
        let ph = phoff + i * 56;
        if u32::from_le_bytes(b[ph..ph + 4].try_into().unwrap()) == PT_LOAD {
            b[ph + 8..ph + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        }
    }
    let _ = parse(&b);
    assert!(
        parse(&std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds/elf/tiny")).unwrap()).is_some()
    );
}

#[test]
fn garbage_is_not_elf() {
    assert_eq!(parse(b""), None);
    assert_eq!(parse(b"\x7fELF\x02\x01"), None);
    assert_eq!(parse(&[0u8; 100]), None);
}
