//! Shell and native tool calls: each a child started by the one containment spawn function
//! under the session's achieved class, in the accessible workdir, with a cleared
//! environment, a time limit, and its output captured up to a budget per stream for the
//! model while the whole of it (up to [`SAVE_CAP`]) is saved in the records directory
//! (`logs/shell-N.stdout`, `.stderr`, made when the stream's first byte comes).

use super::starts::Starts;
use super::tools::CallError;
use crate::agent::words;
use crate::containment::child_policy::{ChildPolicy, LiveCall, Stdios};
use crate::containment::spawn::{Proc, Stdio};
use crate::fsx::Dir;
use crate::runtime::records::{Health, Watched};
use rustix::process::Pid;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of each stream the model sees.
pub const SHOW_CAP: usize = 16 << 10;
/// Bytes of each stream saved in the records.
pub const SAVE_CAP: u64 = 16 << 20;
/// The binaries whose command line is one `-c` body rather than split words.
pub const SHELLS: [&str; 4] = ["bash", "sh", "dash", "zsh"];

/// Everything a tool child is started with, fixed for the session: the session's one
/// child policy, the time limit of a call and the running task's cancel flag.
pub struct Runner {
    pub policy: ChildPolicy,
    pub time_limit: Duration,
    /// The running task's cancel flag: a call in progress when it is set is killed (checked
    /// every [`CANCEL_TICK`] on the session's own thread, so it never touches the next task).
    pub cancel: Arc<std::sync::atomic::AtomicBool>,
    /// Where a failed write of a call's saved output is reported.
    pub health: Health,
    /// Whether the session's calls could start their containment.
    pub starts: Starts,
}

/// How often a running call looks at its task's cancel flag.
pub const CANCEL_TICK: Duration = Duration::from_millis(50);

/// How one call went.
#[derive(Debug)]
pub struct Ran {
    /// The text the model gets.
    pub text: String,
    /// None: killed by a signal, or never started.
    pub exit_code: Option<i32>,
    /// A spawn or I/O failure (a non-zero exit is data, not an error).
    pub is_error: bool,
    pub truncated: bool,
    /// The streams cut at [`SAVE_CAP`] in the records: each name and its bytes in all.
    pub cut_at_cap: Vec<(&'static str, u64)>,
    pub duration: Duration,
    /// Why a call that never ran did not (its spawn's code and hint kept).
    pub error: Option<CallError>,
}

impl Ran {
    /// A call that never ran (spawn or I/O failure): an error result.
    fn failed(shown_line: &str, why: CallError, started: Instant) -> Ran {
        Ran {
            text: format!("{shown_line}\nerror: {}", why.message),
            error: Some(why),
            exit_code: None,
            is_error: true,
            truncated: false,
            cut_at_cap: Vec::new(),
            duration: started.elapsed(),
        }
    }
}

/// A capped capture of one stream: the head for the model, the rest to the records.
struct Capture {
    shown: Vec<u8>,
    total: u64,
}

/// How long a call's output may still arrive after its command ended (or was killed).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// One output stream of a call: its pipe until EOF, the first [`SHOW_CAP`] bytes kept for
/// the model, up to [`SAVE_CAP`] saved in the records.
struct Stream<'r> {
    pipe: Option<OwnedFd>,
    save: Save<'r>,
    capture: Capture,
}

/// Where a stream's bytes are saved: its records file is made when the first byte comes,
/// so a silent stream (most of `true`'s, `test`'s, `mkdir`'s) costs no file.
enum Save<'r> {
    /// Not yet made: the records directory and the file's name in it.
    Later(&'r Dir, String, Watched),
    Open(std::fs::File, Watched),
    /// Not saved (it could not be made or written: reported once through its watch).
    Off,
}

impl Save<'_> {
    /// Write `bytes` to the records file, made now if this is the first write; a failure
    /// is reported and ends the saving.
    fn write(&mut self, bytes: &[u8]) {
        if let Save::Later(records, rel, watched) = self {
            *self = match records.create_new(rel) {
                Ok(f) => Save::Open(f, watched.clone()),
                Err(e) => {
                    watched.failed(&e);
                    Save::Off
                }
            };
        }
        if let Save::Open(f, watched) = self {
            if let Err(e) = f.write_all(bytes) {
                watched.failed(&e);
                *self = Save::Off;
            }
        }
    }
}

impl<'r> Stream<'r> {
    fn new(pipe: Option<OwnedFd>, save: Save<'r>) -> Stream<'r> {
        Stream {
            pipe,
            save,
            capture: Capture {
                shown: Vec::new(),
                total: 0,
            },
        }
    }

    /// Read what the pipe has (it was ready); at EOF or on an error the pipe is closed.
    fn read_some(&mut self, buf: &mut [u8]) {
        let Some(pipe) = &self.pipe else {
            return;
        };
        let n = match rustix::io::read(pipe, &mut *buf) {
            Ok(0) => {
                self.pipe = None;
                return;
            }
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) | Err(rustix::io::Errno::AGAIN) => return,
            Err(_) => {
                self.pipe = None;
                return;
            }
        };
        let c = &mut self.capture;
        if c.shown.len() < SHOW_CAP {
            let take = n.min(SHOW_CAP - c.shown.len());
            c.shown.extend_from_slice(&buf[..take]);
        }
        if c.total < SAVE_CAP {
            let take = n.min((SAVE_CAP - c.total) as usize);
            self.save.write(&buf[..take]);
        }
        c.total += n as u64;
    }
}

/// A running call, watched on the calling thread: both output pipes and the command's exit
/// (a pidfd, readable once it has exited and before it is reaped) in one `poll`.
struct Watch<'r> {
    streams: [Stream<'r>; 2],
    exit: Option<OwnedFd>,
    group: Option<Pid>,
    buf: Vec<u8>,
}

impl Watch<'_> {
    /// Poll the open pipes and the exit for at most `timeout`, reading what is ready.
    /// Whether the command has exited: decided by `waitid(WNOWAIT)`, which leaves it a
    /// zombie (its group id is still its own); the pidfd only wakes the poll.
    fn turn(&mut self, timeout: Duration) -> bool {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        // Without a pidfd (none could be opened) the exit is looked at every 10 ms.
        let timeout = if self.exit.is_none() && self.group.is_some() {
            timeout.min(Duration::from_millis(10))
        } else {
            timeout
        };
        let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        let [out, err] = &mut self.streams;
        let mut ready = [false; 2];
        let polled = {
            let mut fds: [Option<PollFd<'_>>; 3] = [
                out.pipe.as_ref().map(|p| PollFd::new(p, PollFlags::IN)),
                err.pipe.as_ref().map(|p| PollFd::new(p, PollFlags::IN)),
                self.exit.as_ref().map(|e| PollFd::new(e, PollFlags::IN)),
            ];
            let mut set: Vec<PollFd<'_>> = Vec::new();
            set.extend(fds.iter_mut().flat_map(|f| f.take()));
            let polled = poll(&mut set, Some(&ts));
            let mut it = set.iter();
            for (i, open) in [out.pipe.is_some(), err.pipe.is_some()].into_iter().enumerate() {
                if open {
                    ready[i] = it.next().is_some_and(|f| !f.revents().is_empty());
                }
            }
            polled
        };
        if let Err(e) = polled {
            // Never a busy loop on a poll that keeps failing.
            if e != rustix::io::Errno::INTR {
                std::thread::sleep(timeout.min(Duration::from_millis(10)));
            }
        }
        if ready[0] {
            out.read_some(&mut self.buf);
        }
        if ready[1] {
            err.read_some(&mut self.buf);
        }
        let Some(p) = self.group else {
            // Nothing to wait for (the drain, or a pid that was never a process's).
            return true;
        };
        use rustix::process::{waitid, WaitId, WaitIdOptions};
        let opts = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
        match waitid(WaitId::Pid(p), opts) {
            Ok(Some(_)) => true,
            Ok(None) | Err(rustix::io::Errno::INTR) => false,
            // Not waitable (reaped elsewhere): over, and its pid may already be another's,
            // so no group is killed through it.
            Err(_) => {
                self.group = None;
                true
            }
        }
    }

    /// Until the command exits, or at most `within`. Whether it did.
    fn exited_within(&mut self, within: Duration) -> bool {
        let until = Instant::now() + within;
        loop {
            if self.turn(until.saturating_duration_since(Instant::now())) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
        }
    }

    /// The rest of the output, until both pipes end or [`DRAIN_GRACE`] passed (a
    /// descendant that keeps a pipe open cannot hold the session).
    fn drain(mut self) -> (Capture, Capture) {
        self.exit = None;
        self.group = None;
        let until = Instant::now() + DRAIN_GRACE;
        while self.streams.iter().any(|s| s.pipe.is_some()) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            self.turn(left);
        }
        let [out, err] = self.streams;
        (out.capture, err.capture)
    }
}

impl Runner {
    /// Whether `name` is a `shell.allow` binary.
    pub fn allows(&self, name: &str) -> bool {
        self.policy.allowed.iter().any(|(n, _)| n == name)
    }

    /// The arguments for `binary` given the model's command line.
    pub fn argv(binary: &str, command: &str) -> Result<Vec<String>, String> {
        if SHELLS.contains(&binary) {
            return Ok(vec!["-c".into(), command.to_string()]);
        }
        let mut w = words::split(command)?;
        if w.first().is_some_and(|first| first == binary) {
            w.remove(0);
        }
        Ok(w)
    }

    /// Run `binary` (a `shell.allow` name) with the model's `command`; `seq` names the
    /// records files.
    pub fn shell(&mut self, binary: &str, command: &str, records: &Dir, seq: u32) -> Ran {
        let started = Instant::now();
        let shown_line = if SHELLS.contains(&binary) || !command.trim_start().starts_with(binary) {
            format!("$ {binary} {command}")
        } else {
            format!("$ {}", command.trim_start())
        };
        let fail = |why: String| Ran::failed(&shown_line, CallError::text(why), started);
        let Some(program) = self.policy.resolved(binary).map(Path::to_path_buf) else {
            return fail(format!("'{binary}' is allowed but not found on PATH"));
        };
        let args = match Runner::argv(binary, command) {
            Ok(a) => a,
            Err(e) => return fail(format!("cannot split the command line: {e}")),
        };
        self.run(
            &program,
            &args,
            None,
            records,
            &format!("shell-{seq}"),
            &shown_line,
            started,
        )
    }

    /// Run a staged native tool with `input` on its stdin.
    pub fn native(&mut self, name: &str, program: &Path, input: &[u8], records: &Dir, seq: u32) -> Ran {
        let started = Instant::now();
        self.run(
            program,
            &[],
            Some(input),
            records,
            &format!("tool-{seq}"),
            &format!("$ {name} < input.json"),
            started,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        program: &Path,
        args: &[String],
        stdin: Option<&[u8]>,
        records: &Dir,
        label: &str,
        shown_line: &str,
        started: Instant,
    ) -> Ran {
        if self.cancel.load(Ordering::SeqCst) {
            let why = CallError::text("not run: the task was canceled");
            return Ran::failed(shown_line, why, started);
        }
        let stdio = Stdios {
            stdin: if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            },
            stdout: Stdio::piped(),
            stderr: Stdio::piped(),
        };
        let mut child = match self.policy.spawn(program, args, stdio) {
            Ok(c) => {
                self.starts.started();
                c
            }
            Err(d) => {
                self.starts.failed(&d);
                return Ran::failed(shown_line, d.into(), started);
            }
        };
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        let group = rustix::process::Pid::from_raw(child.id() as i32);
        let save = |stream: &str| {
            let rel = format!("logs/{label}.{stream}");
            let watched = self.health.watch(&rel);
            Save::Later(records, rel, watched)
        };
        let mut watch = Watch {
            streams: [
                Stream::new(child.stdout.take().map(OwnedFd::from), save("stdout")),
                Stream::new(child.stderr.take().map(OwnedFd::from), save("stderr")),
            ],
            exit: group
                .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()),
            group,
            buf: vec![0u8; 16 << 10],
        };
        let live = self.policy.live.enter(child.id() as i32);
        let (status, ended) = self.wait(&mut watch, child, live);
        // Nothing a call started outlives it: its process group is killed as it exits
        // (in `wait`), and what left the group (setsid) is killed through the session
        // cgroup.
        if let Some(cg) = &self.policy.cgroup {
            cg.kill_all();
        }
        let (out, err) = watch.drain();
        Ran {
            text: self.render(shown_line, status, ended, [&out, &err], label),
            exit_code: status.and_then(|s| s.code()),
            is_error: false,
            truncated: out.total > SHOW_CAP as u64 || err.total > SHOW_CAP as u64,
            cut_at_cap: [("stdout", &out), ("stderr", &err)]
                .into_iter()
                .filter(|(_, c)| c.total > SAVE_CAP)
                .map(|(name, c)| (name, c.total))
                .collect(),
            duration: started.elapsed(),
            error: None,
        }
    }

    /// Wait for the exit within the time limit, watching the task's cancel flag and reading
    /// the output as it comes; past either, kill the command's group. Once it has exited
    /// (not yet reaped, so its group id cannot have been reused), what it left running in
    /// its group is killed, then it is reaped. The status (if it came) and how the wait
    /// ended.
    fn wait(&self, watch: &mut Watch, mut child: Proc, live: LiveCall) -> (Option<ExitStatus>, Ended) {
        let now = Instant::now();
        let deadline = now
            .checked_add(self.time_limit)
            .unwrap_or(now + Duration::from_secs(1 << 32));
        let ended = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if watch.turn(left.min(CANCEL_TICK)) {
                break Ended::Exited;
            }
            if Instant::now() >= deadline {
                break Ended::TimedOut;
            }
            if self.cancel.load(Ordering::SeqCst) {
                break Ended::Canceled;
            }
        };
        let exited = ended == Ended::Exited || {
            kill_group(watch.group);
            watch.exited_within(Duration::from_secs(5))
        };
        if !exited {
            // Stuck past SIGKILL (uninterruptible I/O): whenever it ends, what it left in its
            // group is killed and it is reaped, as below.
            let group = watch.group;
            let _ = std::thread::Builder::new().name("reap".into()).spawn(move || {
                if let Some(p) = group {
                    use rustix::process::{waitid, WaitId, WaitIdOptions};
                    let _ = waitid(WaitId::Pid(p), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT);
                }
                kill_group(group);
                drop(live);
                let _ = child.wait();
            });
            return (None, ended);
        }
        kill_group(watch.group);
        // Out of the live set before the reap frees its group id.
        drop(live);
        (child.wait().ok(), ended)
    }

    /// What the model reads: the command line, how it ended, then each stream's head.
    fn render(
        &self,
        shown_line: &str,
        status: Option<ExitStatus>,
        ended: Ended,
        streams: [&Capture; 2],
        label: &str,
    ) -> String {
        use std::os::unix::process::ExitStatusExt;
        let mut text = format!("{shown_line}\n");
        match (
            ended,
            status.and_then(|s| s.code()),
            status.and_then(|s| s.signal()),
        ) {
            (Ended::TimedOut, _, _) => text.push_str(&format!(
                "killed: the command ran past its time limit of {} s\n",
                self.time_limit.as_secs()
            )),
            (Ended::Canceled, _, _) => text.push_str("killed: the task was canceled\n"),
            (_, Some(c), _) => text.push_str(&format!("exit code: {c}\n")),
            (_, None, Some(sig)) => text.push_str(&format!("killed by signal {sig}\n")),
            _ => text.push_str("exit status unknown\n"),
        }
        for (name, c) in ["stdout", "stderr"].into_iter().zip(streams) {
            text.push_str(&format!("--- {name} ---\n"));
            text.push_str(&String::from_utf8_lossy(&c.shown));
            if !c.shown.is_empty() && !c.shown.ends_with(b"\n") {
                text.push('\n');
            }
            if c.total > SAVE_CAP {
                text.push_str(&format!(
                    "[{name} truncated: {} bytes in all, the first {SHOW_CAP} shown; the first {SAVE_CAP} saved in the session records as logs/{label}.{name}]\n",
                    c.total
                ));
            } else if c.total > SHOW_CAP as u64 {
                text.push_str(&format!(
                    "[{name} truncated: {} bytes in all, the first {SHOW_CAP} shown; saved in the session records as logs/{label}.{name}]\n",
                    c.total
                ));
            }
        }
        text
    }
}

/// How a call's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Exited,
    TimedOut,
    Canceled,
}

/// SIGKILL to the command's process group.
fn kill_group(group: Option<Pid>) {
    if let Some(p) = group {
        let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::Runner;

    #[test]
    fn shells_get_the_line_others_get_words() {
        assert_eq!(Runner::argv("bash", "ls | wc -l").unwrap(), ["-c", "ls | wc -l"]);
        assert_eq!(Runner::argv("cat", "cat 'a b.txt'").unwrap(), ["a b.txt"]);
        assert_eq!(
            Runner::argv("python3.11", "-c 'print(1+1)'").unwrap(),
            ["-c", "print(1+1)"]
        );
        assert!(Runner::argv("cat", "'open").is_err());
    }
}
