//! `mur stop SESSION | --all`: end a live session as SIGTERM ends it, asked through the
//! channel the session owns — the control socket in its records directory, reached through
//! the held directory, which the session answers only for its own user by raising its own
//! SIGTERM (no pid is signalled from here, so a reused pid is never hit). Its running task
//! fails, waiting ones are rejected, its delegated children are ended with it and its
//! warden cleans up. Then wait (at most [`WAIT`], with a line of progress a second) until
//! its lock is free, and say how it ended. `--all` stops every live session of this user.

use super::sessions::{self, not_live, Live};
use crate::diag::{code, Diagnostic};
use crate::places::{CONTROL_SOCKET, CONTROL_STOP, CONTROL_STOPPING};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// How long `mur stop` waits for the sessions to end.
pub const WAIT: Duration = Duration::from_secs(15);
const POLL: Duration = Duration::from_millis(100);

/// The flags of `mur stop`.
#[derive(Debug, Default)]
pub struct StopOptions {
    pub session: Option<String>,
    pub all: bool,
}

/// Run `mur stop`: progress on `err`, a line per session on `out`; the exit status (1 when
/// a session did not end in time).
pub fn stop(o: &StopOptions, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Diagnostic> {
    let targets = match (&o.session, o.all) {
        (Some(id), _) => vec![sessions::open(id)?],
        (None, _) => sessions::list()?,
    };
    let mut asked = Vec::new();
    for live in targets {
        match ask(&live) {
            Ok(()) => asked.push(live),
            Err(d) if o.all => {
                let _ = writeln!(err, "{d}");
            }
            Err(d) => return Err(d),
        }
    }
    let left = wait(&mut asked, err);
    for l in &mut asked {
        l.refresh();
        let how = match l.status.get("exit_status") {
            Some(_) => format!("ended {}", l.field("exit_status")),
            None => "ended".into(),
        };
        let _ = writeln!(out, "{}: {how}", l.id);
    }
    if left.is_empty() {
        return Ok(0);
    }
    Err(Diagnostic::new(
        code::RUN_SESSION_NOT_LIVE,
        "SESSION",
        format!(
            "{} did not end within {} s of being asked to stop",
            left.join(", "),
            WAIT.as_secs()
        ),
    )
    .with_hint("it is still ending its work; kill -TERM its mur (pid in mur ps --json) if it never does"))
}

/// Ask `live` to stop over its control socket, connected through the held records
/// directory (`/proc/self/fd/N/control.sock`).
fn ask(live: &Live) -> Result<(), Diagnostic> {
    let path = live.dir.proc_path().join(CONTROL_SOCKET);
    let refused = |why: String| {
        not_live(
            &live.id,
            format!("session {} cannot be asked to stop: {why}", live.id),
        )
    };
    let mut conn = UnixStream::connect(&path).map_err(|e| {
        if live.alive() {
            refused(format!("{CONTROL_SOCKET}: {e}"))
        } else {
            not_live(
                &live.id,
                format!("session {} is not alive: it has ended", live.id),
            )
        }
    })?;
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    conn.write_all(format!("{}\n", CONTROL_STOP).as_bytes())
        .map_err(|e| refused(e.to_string()))?;
    let mut answer = String::new();
    let _ = BufReader::new(&conn).read_line(&mut answer);
    if answer.trim() != CONTROL_STOPPING {
        return Err(refused(format!(
            "it answered {:?}",
            crate::trace_view::clean(answer.trim(), 200)
        )));
    }
    Ok(())
}

/// Wait until every asked session's lock is free, at most [`WAIT`]; the ids still held.
fn wait(asked: &mut [Live], err: &mut dyn Write) -> Vec<String> {
    let start = Instant::now();
    let mut said = 0;
    loop {
        let left: Vec<String> = asked.iter().filter(|l| l.alive()).map(|l| l.id.clone()).collect();
        if left.is_empty() || start.elapsed() >= WAIT {
            return left;
        }
        let secs = start.elapsed().as_secs();
        if secs > said {
            said = secs;
            let _ = writeln!(err, "mur stop: waiting for {} ({secs} s)", left.join(", "));
        }
        std::thread::sleep(POLL);
    }
}
