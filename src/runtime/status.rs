//! The session's own word on itself, kept in its records directory for the operator's
//! commands (`mur ps`, `stop`, `cancel`, `watch`): `session.json` (capsule, class, door,
//! parent, state, tasks), replaced whole (temp file, rename) through the records' held
//! directory on each change; and the control socket (`control.sock`, 0600 in the 0700
//! records directory) on which `mur stop` asks the session to stop. The session answers only
//! a caller of its own user (`SO_PEERCRED`) and then raises its own SIGTERM, so it ends
//! exactly as a SIGTERM ends it: no pid is ever signalled from outside.

use super::door::tasks::Tasks;
use super::records::Watched;
use crate::fsx::Dir;
use crate::places::{CONTROL_SOCKET, CONTROL_STOP as STOP, CONTROL_STOPPING as STOPPING, SESSION_FILE};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The session's status file, shared by the session thread and the signal thread.
#[derive(Clone)]
pub struct Status(Arc<Inner>);

struct Inner {
    /// The records directory, and the last state written with its fields.
    records: Mutex<(Dir, String, Value)>,
    /// The fields that never change (identity, capsule, class, door, parent).
    fixed: Value,
    tasks: Arc<Tasks>,
    watched: Watched,
}

impl Status {
    /// The status of a session whose fixed fields are `fixed`, written into `records`
    /// (a failed write is the records' incompleteness, reported to `watched`).
    pub fn new(records: &Dir, fixed: Value, tasks: Arc<Tasks>, watched: Watched) -> Option<Status> {
        let records = match records.try_clone() {
            Ok(d) => d,
            Err(e) => {
                watched.failed(&e);
                return None;
            }
        };
        let status = Status(Arc::new(Inner {
            records: Mutex::new((records, "idle".into(), json!({}))),
            fixed,
            tasks: tasks.clone(),
            watched,
        }));
        // A task taken or ended by the door (a send, a cancel) changes the counts: the file
        // follows (held weakly: the table outlives nothing of the status).
        let weak = Arc::downgrade(&status.0);
        tasks.on_change(Box::new(move || {
            if let Some(inner) = weak.upgrade() {
                Status(inner).rewrite();
            }
        }));
        Some(status)
    }

    /// Write the file again in the last state, with the counts now.
    fn rewrite(&self) {
        let held = self.0.records.lock().unwrap_or_else(|p| p.into_inner());
        let (state, extra) = (held.1.clone(), held.2.clone());
        drop(held);
        self.write(&state, extra);
    }

    /// Replace `session.json` with the session in `state` (`idle`, `working`, `stopping`,
    /// `ended`), its task counts now, and `extra` fields.
    pub fn write(&self, state: &str, extra: Value) {
        // Under the lock, counts and all: the last write is of the latest counts.
        let mut held = self.0.records.lock().unwrap_or_else(|p| p.into_inner());
        let (open, total) = self.0.tasks.counts();
        let mut v = self.0.fixed.clone();
        v["state"] = state.into();
        v["tasks"] = json!({"open": open, "total": total});
        v["updated_ms"] = crate::clock::now_ms().into();
        if let (Some(to), Some(more)) = (v.as_object_mut(), extra.as_object()) {
            to.extend(more.clone());
        }
        let mut bytes = v.to_string().into_bytes();
        bytes.push(b'\n');
        if let Err(e) = held.0.replace(SESSION_FILE, &bytes) {
            self.0.watched.failed(&e);
        }
        held.1 = state.to_string();
        held.2 = extra;
    }
}

/// Listen on `<records>/control.sock` and serve it on a thread of its own (started with
/// SIGTERM and SIGINT blocked, as every thread of the session). The socket is bound through
/// the held directory (`/proc/self/fd/N/control.sock`), so neither a long records path nor
/// a name swapped above the directory matters.
pub fn listen(records: &Dir) -> std::io::Result<()> {
    let path = records.proc_path().join(CONTROL_SOCKET);
    let listener = UnixListener::bind(&path)?;
    rustix::fs::chmodat(
        records.as_fd(),
        CONTROL_SOCKET,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::AtFlags::empty(),
    )?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                answer(conn);
            }
        })
        .map(drop)
}

/// The session ended: its control socket goes (best effort; the lock says it ended anyway).
pub fn forget(records: &Dir) {
    let _ = records.remove_file(CONTROL_SOCKET);
}

/// One request: only from this session's own user, one short line, `stop` raises SIGTERM.
fn answer(mut conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = conn.set_write_timeout(Some(Duration::from_secs(2)));
    // The line is read first, so a refusal is read whole by the caller (no reset).
    let mut line = String::new();
    let read = BufReader::new(std::io::Read::take(&conn, 64)).read_line(&mut line);
    let mine = rustix::process::geteuid().as_raw();
    let caller = rustix::net::sockopt::socket_peercred(&conn).map(|c| c.uid.as_raw());
    if caller.ok() != Some(mine) {
        let _ = conn.write_all(b"refused: not this session's user\n");
        return;
    }
    if read.is_err() || line.trim() != STOP {
        let _ = conn.write_all(b"refused: unknown request\n");
        return;
    }
    let _ = conn.write_all(format!("{STOPPING}\n").as_bytes());
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TERM);
}
