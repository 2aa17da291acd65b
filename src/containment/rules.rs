//! The landlock ruleset of a `scoped` child, built in the parent from paths it opens itself;
//! the child only calls `restrict_self`. Everything the ruleset handles is denied unless a
//! rule below grants it.

use super::elf::Closure;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use std::path::{Path, PathBuf};

/// The `landlock` crate's ABI value for the number the kernel reported (a newer kernel's
/// number is taken as the newest ABI this crate knows).
pub fn abi(n: u32) -> ABI {
    match n {
        0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        3 => ABI::V3,
        4 => ABI::V4,
        5 => ABI::V5,
        6 => ABI::V6,
        _ => ABI::V7,
    }
}

/// The lowest ABI `scoped` accepts: from ABI 6 landlock scopes signals (`kill`, `tgkill`,
/// `rt_sigqueueinfo`, `pidfd_send_signal`, `F_SETOWN`) and abstract unix sockets to the
/// child's domain; `scoped` has no PID namespace, so below it a child could signal every
/// process of its uid. (From ABI 3 landlock also mediates `truncate(2)`, which the seccomp
/// filter leaves allowed.)
pub const MIN_ABI: u32 = 6;

/// What one contained child may touch.
pub struct Grants<'a> {
    pub workdir: &'a Path,
    pub workdir_exec: bool,
    /// Each allowed binary with its loader and library closure, one file each: read +
    /// execute for the binaries and loaders, read for the libraries (the loader maps them;
    /// landlock's execute right is `execve`'s alone). Each rule is made through a descriptor
    /// checked to be the file the closure read.
    pub exec_files: &'a Closure,
    /// Read-only grants: read files beneath each, list it when it is a directory. Never
    /// execute.
    pub read: &'a [PathBuf],
    /// Read files beneath each directory, without listing it. Never execute.
    pub read_unlisted: &'a [PathBuf],
    /// No network namespace: TCP bind and connect are refused (landlock ABI 4 and up).
    pub closed_network: bool,
}

/// The rights on the workdir (and a sealed child's private `/tmp`): everything the ABI
/// handles except making devices, sockets and FIFOs, and execute unless `workdir_exec`. A
/// FIFO in the workdir would block whoever opens it later (the runtime reading a file the
/// command left there) until a writer appears.
pub fn workdir_rights(abi_n: u32, workdir_exec: bool) -> BitFlags<AccessFs> {
    let mut rights: BitFlags<AccessFs> = AccessFs::from_all(abi(abi_n));
    for never in [
        AccessFs::Execute,
        AccessFs::MakeChar,
        AccessFs::MakeBlock,
        AccessFs::MakeSock,
        AccessFs::MakeFifo,
    ] {
        rights.remove(never);
    }
    if abi_n >= 5 {
        rights.remove(AccessFs::IoctlDev);
    }
    if workdir_exec {
        rights |= AccessFs::Execute;
    }
    rights
}

/// Read-only rights on a directory tree (a sealed child's `/etc` allow-list).
pub fn read_rights() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// Build the ruleset at `abi_n` (a hard requirement: any error aborts the spawn).
pub fn ruleset(abi_n: u32, g: &Grants<'_>) -> Result<RulesetCreated, String> {
    let abi = abi(abi_n);
    let all = AccessFs::from_all(abi);
    let err = |what: &str, e: &dyn std::fmt::Display| format!("landlock {what}: {e}");
    let mut attr = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| err("handle_access", &e))?;
    if g.closed_network {
        if abi_n < 4 {
            return Err(format!(
                "landlock ABI {abi_n} cannot refuse TCP (ABI 4 can): a closed network needs it"
            ));
        }
        // Handled and never granted: every TCP bind and connect is refused.
        attr = attr
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| err("handle_access (network)", &e))?;
    }
    if abi_n >= 6 {
        // Signals and abstract unix sockets stay inside the domain (always, as `scoped`
        // and `sealed` require ABI 6: `MIN_ABI`).
        attr = attr
            .scope(Scope::Signal | Scope::AbstractUnixSocket)
            .map_err(|e| err("scope", &e))?;
    }
    let mut set = attr.create().map_err(|e| err("create", &e))?;
    let workdir = workdir_rights(abi_n, g.workdir_exec);
    let file_rights = |rights: BitFlags<AccessFs>| rights & all;
    for (path, granted) in g.exec_files {
        let rights = if granted.exec {
            AccessFs::Execute | AccessFs::ReadFile
        } else {
            AccessFs::ReadFile.into()
        };
        let fd = super::elf::open_checked(path, granted).map_err(|e| err("rule", &e))?;
        set = set
            .add_rule(PathBeneath::new(fd, file_rights(rights)))
            .map_err(|e| err(&format!("rule for {}", path.display()), &e))?;
    }
    let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, bool)> = vec![(g.workdir.to_path_buf(), workdir, true)];
    // Read grants: ReadDir is added below only where the opened path is a directory (a
    // directory right on a file is refused by add_rule). Missing paths shrink the grant.
    for r in g.read {
        rules.push((r.clone(), file_rights(read_rights()), false));
    }
    for r in g.read_unlisted {
        rules.push((r.clone(), file_rights(AccessFs::ReadFile.into()), false));
    }
    let dev_null = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    rules.push(("/dev/null".into(), file_rights(dev_null), false));
    rules.push(("/dev/zero".into(), file_rights(AccessFs::ReadFile.into()), false));
    rules.push((
        "/dev/urandom".into(),
        file_rights(AccessFs::ReadFile.into()),
        false,
    ));
    rules.push((
        "/etc/ld.so.cache".into(),
        file_rights(AccessFs::ReadFile.into()),
        false,
    ));
    for (path, rights, required) in rules {
        match PathFd::new(&path) {
            Ok(fd) => {
                let is_dir = rustix::fs::fstat(&fd).is_ok_and(|st| {
                    rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
                });
                let rights = if is_dir {
                    rights
                } else {
                    rights & !BitFlags::from(AccessFs::ReadDir)
                };
                set = set
                    .add_rule(PathBeneath::new(fd, rights))
                    .map_err(|e| err(&format!("rule for {}", path.display()), &e))?;
            }
            Err(e) if required => return Err(err(&format!("open {}", path.display()), &e)),
            Err(_) => {}
        }
    }
    Ok(set)
}
