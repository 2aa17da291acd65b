//! The session's warden: a small process (`mur __warden`, started once per session by the
//! one spawn function) that outlives `mur` however `mur` dies (SIGKILL, the OOM killer, a
//! crash) and then ends what the session started. `mur` holds one end of a socket pair, the
//! warden the other as its stdin, blocked in a read. When the last copy of `mur`'s end is
//! closed (the process is gone, or it exited), the read returns end-of-file and the warden,
//! in order: kills every registered delegated child by its pidfd (a pid could name another
//! process by then; a pidfd cannot), empties every registered session cgroup (SIGKILL
//! through `cgroup.kill` or by pid, until `cgroup.procs` reads empty) and removes it, writes
//! `completion.json` for every registered delegation whose child left no report
//! (`terminated`, reported by the launcher, delivered false), and exits. A session that
//! ended normally has done all of this itself already, so then the warden finds nothing.
//!
//! `mur exec` starts its warden as a fork of itself rather than an exec of the binary
//! ([`start_forked`], where that is safe: one thread, no provider key), which then names
//! itself `mur __warden` as an exec'd one is named.
//!
//! The warden has no controlling terminal (its own session) and keeps SIGTERM and SIGINT
//! blocked: a signal to `mur`'s process group never reaches it, and only a SIGKILL of the
//! warden itself stops it. It holds none of `mur`'s descriptors, and keeps `mur`'s
//! capabilities only so it can remove the cgroup `mur` made.

use super::cgroup::Cgroup;
use super::spawn;
use crate::containment::spawn::{Proc, Stdio};
use rustix::net::{
    recvmsg, sendmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The hidden subcommand that runs the warden's side.
pub const SUBCOMMAND: &str = "__warden";
/// What the warden says once its signals are blocked and it is reading.
const READY: &[u8] = b"ready\n";
/// How long `mur` waits for that word.
const START_BOUND: Duration = Duration::from_secs(10);
/// How long the warden waits for a killed delegated child to be gone before it says its
/// last words anyway.
const CHILD_GONE: Duration = Duration::from_secs(1);
/// How long the warden waits for a killed session's cgroup to empty (its killed processes
/// stay listed until the host's init reaps them, which some inits do lazily) before it
/// leaves the cgroup to the sweep of the next launch. It waits after the last words, which
/// never wait on it.
const CGROUP_BOUND: Duration = Duration::from_secs(60);
/// How long one of the last words may run.
const LAST_WORDS_BOUND: Duration = Duration::from_secs(5);
/// The longest message line the warden takes (a completion is well under this).
const MAX_LINE: usize = 64 * 1024;

/// `mur`'s end of the line to its warden.
pub struct Warden {
    line: Mutex<OwnedFd>,
    /// Never waited for: the warden outlives this process by design.
    _child: Proc,
}

static WARDEN: OnceLock<Result<Warden, String>> = OnceLock::new();

/// This process's warden, started on the first call. An error says why none runs.
pub fn get() -> Result<&'static Warden, String> {
    WARDEN.get_or_init(|| start(false)).as_ref().map_err(Clone::clone)
}

/// Start this process's warden now, unless one was started, as a fork of this process where
/// that is safe, else as [`get`] starts it; [`get`] then answers with it. A fork skips a
/// second start of `mur` (its loader, relocations, CPU probing), most of `mur exec`'s own
/// cost. Safe only while this process runs one thread (a lock another thread holds would
/// be copied held) and holds no provider key (the fork is a copy of its memory, kept for the
/// whole session): `mur` is dumpable while it holds none (`mur exec` and `mur run` make it
/// not dumpable once they hold one).
pub fn start_forked() {
    WARDEN.get_or_init(|| {
        let dumpable = rustix::process::dumpable_behavior()
            .is_ok_and(|b| b == rustix::process::DumpableBehavior::Dumpable);
        start(dumpable && super::process::single_threaded())
    });
}

/// This process's warden if one was started.
pub fn running() -> Option<&'static Warden> {
    WARDEN.get().and_then(|w| w.as_ref().ok())
}

/// Step: start `mur __warden` (or, `forked`, a fork of this process running its side) with
/// its end of the socket pair as stdin, and wait for it to say it is in place.
fn start(forked: bool) -> Result<Warden, String> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let (ours, theirs) = spawn::socket_pair()?;
    let in_fork = forked.then_some(forked_main as fn() -> i32);
    let child = helper(
        &exe,
        &[SUBCOMMAND.to_string()],
        Stdio::from(theirs),
        true,
        in_fork,
    )
    .map_err(|d| d.message)?;
    rustix::net::sockopt::set_socket_timeout(&ours, rustix::net::sockopt::Timeout::Recv, Some(START_BOUND))
        .map_err(|e| format!("socket timeout: {e}"))?;
    let mut word = [0u8; READY.len()];
    let mut got = 0;
    while got < word.len() {
        match rustix::io::read(&ours, &mut word[got..]) {
            Ok(0) => return Err("the warden ended before it was in place".into()),
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("no word from the warden: {e}")),
        }
    }
    if word != READY {
        return Err("the warden said something other than ready".into());
    }
    Ok(Warden {
        line: Mutex::new(ours),
        _child: child,
    })
}

impl Warden {
    /// Empty and remove the session cgroup `murmur-<label>` if this process dies first.
    pub fn cgroup(&self, label: &str) -> Result<(), String> {
        self.send(&format!("cgroup {label}\n"), None)
    }

    /// Kill the delegated child `pid` (still unreaped: its pid is its own) if this process
    /// dies first.
    pub fn child(&self, pid: u32) -> Result<(), String> {
        let p = rustix::process::Pid::from_raw(pid as i32).ok_or("no such pid")?;
        let fd = rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty())
            .map_err(|e| format!("pidfd_open({pid}): {e}"))?;
        self.send("child\n", Some(fd.as_fd()))
    }

    /// Run `mur ARGS...` if this process dies before [`Warden::forget`] of `key`, after
    /// the kills (the runtime's report of work it can no longer watch). `key` is one word.
    pub fn last_words(&self, key: &str, args: &[String]) -> Result<(), String> {
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err("the key of last words is one word".into());
        }
        let v = serde_json::to_string(args).map_err(|e| e.to_string())?;
        self.send(&format!("last {key} {v}\n"), None)
    }

    /// Kill the process group `pgid` (a call's, where no cgroup holds it) if this process
    /// dies before [`Warden::ungroup`] of it.
    pub fn group(&self, pgid: i32) -> Result<(), String> {
        self.send(&format!("group {pgid}\n"), None)
    }

    /// The group `pgid` ended (its leader is about to be reaped, which frees its id).
    pub fn ungroup(&self, pgid: i32) -> Result<(), String> {
        self.send(&format!("ungroup {pgid}\n"), None)
    }

    /// The last words of `key` are no longer needed (their work was done).
    pub fn forget(&self, key: &str) -> Result<(), String> {
        self.send(&format!("forget {key}\n"), None)
    }

    fn send(&self, text: &str, fd: Option<BorrowedFd<'_>>) -> Result<(), String> {
        let line = self.line.lock().unwrap_or_else(|p| p.into_inner());
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds = fd.map(|f| [f]);
        if let Some(f) = &fds {
            if !control.push(SendAncillaryMessage::ScmRights(f)) {
                return Err("no room for the descriptor".into());
            }
        }
        let n = sendmsg(
            &*line,
            &[IoSlice::new(text.as_bytes())],
            &mut control,
            SendFlags::NOSIGNAL,
        )
        .map_err(|e| format!("the warden's line: {e}"))?;
        if n != text.len() {
            return Err("the warden's line took part of a message".into());
        }
        Ok(())
    }
}

/// What the warden was told to end.
#[derive(Default)]
struct Charge {
    cgroups: Vec<String>,
    /// The process groups of the calls running where no cgroup holds them.
    groups: Vec<i32>,
    children: Vec<OwnedFd>,
    /// `(key, arguments)`.
    last: Vec<(String, Vec<String>)>,
}

/// `mur __warden`: the warden's side. Its stdin is the line from `mur`.
pub fn main() -> i32 {
    serve(false)
}

/// The warden's side in a fork of `mur` ([`start_forked`]).
fn forked_main() -> i32 {
    serve(true)
}

/// Block the signals, (in a fork) ignore SIGPIPE and take the warden's name as an exec'd
/// warden has both, say ready, listen, end.
fn serve(forked: bool) -> i32 {
    if crate::signals::block_termination().is_err() {
        return 1;
    }
    if forked {
        crate::signals::ignore_sigpipe();
        name_as_warden();
    }
    let line = std::io::stdin().as_fd().try_clone_to_owned();
    let Ok(line) = line else { return 1 };
    if rustix::io::write(&line, READY).is_err() {
        return 1;
    }
    let charge = listen(&line);
    end(charge);
    0
}

/// Step: take messages until end-of-file (or an error, which ends the line the same way).
fn listen(line: &OwnedFd) -> Charge {
    let mut charge = Charge::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    loop {
        let mut buf = [0u8; 8192];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = match recvmsg(
            line,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(g) => g,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
        };
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(r) = m {
                fds.extend(r);
            }
        }
        if got.bytes == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..got.bytes]);
        while let Some(i) = pending.iter().position(|b| *b == b'\n') {
            let msg: Vec<u8> = pending.drain(..=i).collect();
            take(&msg[..i], &mut fds, &mut charge);
        }
        if pending.len() > MAX_LINE {
            pending.clear();
        }
    }
    charge
}

/// One message: `cgroup LABEL`, `group PGID`, `ungroup PGID`, `child` (with its pidfd),
/// `last KEY JSON-ARRAY`, `forget KEY`.
fn take(msg: &[u8], fds: &mut Vec<OwnedFd>, charge: &mut Charge) {
    let text = String::from_utf8_lossy(msg);
    let pgid = |t: &str| t.parse::<i32>().ok().filter(|g| *g > 1);
    if let Some(label) = text.strip_prefix("cgroup ") {
        charge.cgroups.push(label.to_string());
    } else if let Some(g) = text.strip_prefix("group ").and_then(pgid) {
        charge.groups.push(g);
    } else if let Some(g) = text.strip_prefix("ungroup ").and_then(pgid) {
        if let Some(i) = charge.groups.iter().position(|x| *x == g) {
            charge.groups.swap_remove(i);
        }
    } else if text == "child" {
        if !fds.is_empty() {
            charge.children.push(fds.remove(0));
        }
    } else if let Some((key, json)) = text.strip_prefix("last ").and_then(|r| r.split_once(' ')) {
        if let Ok(args) = serde_json::from_str(json) {
            charge.last.push((key.to_string(), args));
        }
    } else if let Some(key) = text.strip_prefix("forget ") {
        charge.last.retain(|(k, _)| k != key);
    }
}

/// Step: `mur` is gone. Kill every call's group, every child and everything in the
/// session's cgroups, wait for
/// the children, say the last words, then empty and remove the cgroups.
fn end(charge: Charge) {
    for &g in &charge.groups {
        if let Some(p) = rustix::process::Pid::from_raw(g) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
    }
    for child in &charge.children {
        let _ = rustix::process::pidfd_send_signal(child, rustix::process::Signal::KILL);
    }
    let cgroups: Vec<Cgroup> = charge.cgroups.iter().filter_map(|l| Cgroup::adopt(l)).collect();
    for cg in &cgroups {
        cg.kill_now();
    }
    let deadline = Instant::now() + CHILD_GONE;
    for child in &charge.children {
        wait_gone(child, deadline);
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    for (_, args) in &charge.last {
        say(&exe, args);
    }
    for cg in cgroups {
        cg.end(CGROUP_BOUND);
    }
}

/// Wait until the process of `pidfd` has ended (its pidfd reads as readable), or `deadline`.
fn wait_gone(pidfd: &OwnedFd, deadline: Instant) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let left = deadline.saturating_duration_since(Instant::now());
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let t = Timespec {
        tv_sec: left.as_secs() as i64,
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    let _ = poll(&mut fds, Some(&t));
}

/// Run `exe args` (advisory, like the warden itself) and wait for it, at most
/// `LAST_WORDS_BOUND`.
fn say(exe: &Path, args: &[String]) {
    let Ok(mut child) = helper(exe, args, Stdio::null(), false, None) else {
        return;
    };
    let until = Instant::now() + LAST_WORDS_BOUND;
    while Instant::now() < until {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// `exe args` (or, `in_fork`, that function in a fork of this process) as a helper of the
/// warden's kind: advisory, its own session, in no session cgroup, only `stdin` open. With
/// `runtime` it keeps `mur`'s capabilities (the warden must be able to remove a cgroup `mur`
/// made); the parent-death SIGTERM that comes with it finds the warden with SIGTERM blocked.
fn helper(
    exe: &Path,
    args: &[String],
    stdin: Stdio,
    runtime: bool,
    in_fork: Option<fn() -> i32>,
) -> Result<Proc, crate::diag::Diagnostic> {
    // The one variable it reads: where the session cgroups it may have to empty are.
    let env: Vec<(String, String)> = std::env::var(super::cgroup::PARENT_VAR)
        .map(|v| vec![(super::cgroup::PARENT_VAR.to_string(), v)])
        .unwrap_or_default();
    spawn::spawn(spawn::Spawn {
        unix_sockets: true,
        runtime,
        stdin,
        env: &env,
        in_fork,
        ..spawn::Spawn::own_helper(exe, args)
    })
}

/// A fork of `mur` shows `mur`'s command line (a `mur exec`'s holds its command's
/// arguments): the warden writes its own over it (`ARGV0 __warden`, the rest zeroed), so
/// `ps`, and anything that finds a session's processes by their command line, tells the
/// warden from the `mur` it guards, as with an exec'd warden. Best effort: a warden works
/// unnamed.
fn name_as_warden() {
    let Some((start, end)) = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|st| arg_area(&st))
    else {
        return;
    };
    let Ok(len) = usize::try_from(end - start) else {
        return;
    };
    let Ok(cmdline) = std::fs::read("/proc/self/cmdline") else {
        return;
    };
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let mut name = argv0.to_vec();
    name.push(0);
    name.extend_from_slice(SUBCOMMAND.as_bytes());
    if name.len() >= len {
        return;
    }
    name.resize(len, 0);
    use std::os::unix::fs::FileExt;
    if let Ok(mem) = std::fs::OpenOptions::new().write(true).open("/proc/self/mem") {
        let _ = mem.write_all_at(&name, start);
    }
}

/// `(arg_start, arg_end)`, fields 48 and 49 of `stat` (the text of `/proc/self/stat`): where
/// the command line is in the process's memory.
fn arg_area(stat: &str) -> Option<(u64, u64)> {
    // The name (field 2) is in parentheses and may hold anything; field 3 follows the last.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(48 - 3);
    let start: u64 = fields.next()?.parse().ok()?;
    let end: u64 = fields.next()?.parse().ok()?;
    (start > 0 && end > start).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_area_is_fields_48_and_49_of_stat() {
        let rest: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        let stat = format!("77 (a) b) (c) {}\n", rest.join(" "));
        assert_eq!(arg_area(&stat), Some((48, 49)));
        // Shown as 0 to a reader without access: nothing to write.
        let zeroed = stat.replace(" 48 49 ", " 0 0 ");
        assert_eq!(arg_area(&zeroed), None);
        assert_eq!(arg_area("77 (a) S 1 2"), None);
        assert_eq!(arg_area(""), None);
        let own = std::fs::read_to_string("/proc/self/stat").unwrap();
        assert!(arg_area(&own).is_some_and(|(s, e)| e > s));
    }
}
