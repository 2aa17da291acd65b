//! Shell and native tool calls: each a child started by the one containment spawn function
//! under the session's achieved class, in the accessible workdir, with a cleared
//! environment, a time limit, and its output captured up to a budget per stream for the
//! model while the whole of it (up to [`SAVE_CAP`]) is saved in the records directory.

use crate::agent::words;
use crate::containment::child_policy::{ChildPolicy, Stdios};
use crate::containment::spawn::{Proc, Stdio};
use crate::fsx::Dir;
use crate::runtime::records::{Health, Watched};
use rustix::process::Pid;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
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
}

impl Ran {
    /// A call that never ran (spawn or I/O failure): an error result.
    fn failed(shown_line: &str, why: String, started: Instant) -> Ran {
        Ran {
            text: format!("{shown_line}\nerror: {why}"),
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

/// Read `from` until EOF or until `stop` is set (checked at least every 50 ms), keeping
/// the first [`SHOW_CAP`] bytes and saving up to [`SAVE_CAP`]. A descendant that keeps the
/// pipe open can therefore not hold the session.
fn drain<F: Read + std::os::fd::AsFd>(
    mut from: F,
    mut save: Option<(std::fs::File, Watched)>,
    stop: &AtomicBool,
) -> Capture {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut shown = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 16 << 10];
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let ready = {
            let mut fds = [PollFd::new(&from, PollFlags::IN)];
            poll(&mut fds, Some(&tick)).unwrap_or(0)
        };
        if ready == 0 {
            continue;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        if shown.len() < SHOW_CAP {
            let take = n.min(SHOW_CAP - shown.len());
            shown.extend_from_slice(&buf[..take]);
        }
        if let Some((f, watched)) = save.as_mut() {
            if total < SAVE_CAP {
                let take = n.min((SAVE_CAP - total) as usize);
                if let Err(e) = f.write_all(&buf[..take]) {
                    watched.failed(&e);
                    save = None;
                }
            }
        }
        total += n as u64;
    }
    Capture { shown, total }
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
    pub fn shell(&self, binary: &str, command: &str, records: &Dir, seq: u32) -> Ran {
        let started = Instant::now();
        let shown_line = if SHELLS.contains(&binary) || !command.trim_start().starts_with(binary) {
            format!("$ {binary} {command}")
        } else {
            format!("$ {}", command.trim_start())
        };
        let fail = |why: String| Ran::failed(&shown_line, why, started);
        let Some(program) = self.policy.resolved(binary) else {
            return fail(format!("'{binary}' is allowed but not found on PATH"));
        };
        let args = match Runner::argv(binary, command) {
            Ok(a) => a,
            Err(e) => return fail(format!("cannot split the command line: {e}")),
        };
        self.run(
            program,
            &args,
            None,
            records,
            &format!("shell-{seq}"),
            &shown_line,
            started,
        )
    }

    /// Run a staged native tool with `input` on its stdin.
    pub fn native(&self, name: &str, program: &Path, input: &[u8], records: &Dir, seq: u32) -> Ran {
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
        &self,
        program: &Path,
        args: &[String],
        stdin: Option<&[u8]>,
        records: &Dir,
        label: &str,
        shown_line: &str,
        started: Instant,
    ) -> Ran {
        let fail = |why: String| Ran::failed(shown_line, why, started);
        if self.cancel.load(Ordering::SeqCst) {
            return fail("not run: the task was canceled".into());
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
            Ok(c) => c,
            Err(d) => return fail(d.message),
        };
        if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
            let bytes = bytes.to_vec();
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        let readers = Readers::start(&mut child, records, label, &self.health);
        let group = rustix::process::Pid::from_raw(child.id() as i32);
        let exited = reap(child, group);
        let (status, ended) = self.wait(&exited, group);
        // Nothing a call started outlives it: its process group is killed as it exits
        // (above), and what left the group (setsid) is killed through the session cgroup.
        if let Some(cg) = &self.policy.cgroup {
            cg.kill_all();
        }
        let (out, err) = readers.finish();
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
        }
    }

    /// Wait for the exit within the time limit, watching the task's cancel flag; past
    /// either, kill the command's group. The status (if it came) and how the wait ended.
    fn wait(
        &self,
        exited: &mpsc::Receiver<std::io::Result<ExitStatus>>,
        group: Option<Pid>,
    ) -> (Option<ExitStatus>, Ended) {
        let deadline = Instant::now() + self.time_limit;
        let waited = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match exited.recv_timeout(left.min(CANCEL_TICK)) {
                Ok(s) => break Ok(s),
                Err(mpsc::RecvTimeoutError::Timeout) if left > CANCEL_TICK => {
                    if self.cancel.load(Ordering::SeqCst) {
                        break Err(Ended::Canceled);
                    }
                }
                Err(_) => break Err(Ended::TimedOut),
            }
        };
        match waited {
            Ok(s) => (s.ok(), Ended::Exited),
            Err(how) => {
                kill_group(group);
                let status = exited
                    .recv_timeout(Duration::from_secs(5))
                    .ok()
                    .and_then(Result::ok);
                (status, how)
            }
        }
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

/// Reap `child` on a thread of its own; its status arrives on the receiver. It waits for
/// the exit without reaping first, so the group id cannot have been reused when what the
/// command left running in its group is killed; then it reaps.
fn reap(mut child: Proc, group: Option<Pid>) -> mpsc::Receiver<std::io::Result<ExitStatus>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Some(p) = group {
            use rustix::process::{waitid, WaitId, WaitIdOptions};
            let _ = waitid(WaitId::Pid(p), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT);
        }
        kill_group(group);
        let _ = tx.send(child.wait());
    });
    rx
}

/// The two output readers of one call, each saving its stream in the records.
struct Readers {
    out: Option<std::thread::JoinHandle<Capture>>,
    err: Option<std::thread::JoinHandle<Capture>>,
    stop: Arc<AtomicBool>,
    done: mpsc::Receiver<()>,
}

impl Readers {
    fn start(child: &mut Proc, records: &Dir, label: &str, health: &Health) -> Readers {
        let save = |stream: &str| {
            let rel = format!("logs/{label}.{stream}");
            let watched = health.watch(&rel);
            match records.create_new(&rel) {
                Ok(f) => Some((f, watched)),
                Err(e) => {
                    watched.failed(&e);
                    None
                }
            }
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done) = mpsc::channel::<()>();
        let spawn = |pipe: Box<dyn ReadFd>, f: Option<(std::fs::File, Watched)>| {
            let (stop, done) = (stop.clone(), done_tx.clone());
            std::thread::spawn(move || {
                let c = drain(pipe, f, &stop);
                let _ = done.send(());
                c
            })
        };
        let out = child.stdout.take().map(|p| spawn(Box::new(p), save("stdout")));
        let err = child.stderr.take().map(|p| spawn(Box::new(p), save("stderr")));
        Readers { out, err, stop, done }
    }

    /// The captures, once both streams ended or [`DRAIN_GRACE`] passed (a descendant that
    /// keeps a pipe open cannot hold the session).
    fn finish(self) -> (Capture, Capture) {
        let readers = usize::from(self.out.is_some()) + usize::from(self.err.is_some());
        let until = Instant::now() + DRAIN_GRACE;
        for _ in 0..readers {
            if self
                .done
                .recv_timeout(until.saturating_duration_since(Instant::now()))
                .is_err()
            {
                break;
            }
        }
        self.stop.store(true, Ordering::Relaxed);
        let join = |h: Option<std::thread::JoinHandle<Capture>>| {
            h.and_then(|h| h.join().ok()).unwrap_or(Capture {
                shown: Vec::new(),
                total: 0,
            })
        };
        (join(self.out), join(self.err))
    }
}

/// A pipe a reader drains.
trait ReadFd: Read + std::os::fd::AsFd + Send {}
impl<T: Read + std::os::fd::AsFd + Send> ReadFd for T {}

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
