//! The session skeleton, written once for both capsule kinds: start the session (its
//! `session_start`, the door serving, the announcement), loop over the lifecycle's tasks
//! through a [`TaskRunner`], and record the end (the runner's close, `session_end`, the
//! door, delegation's end, the status line and the exit). A runner only runs tasks; the
//! session's hooks are fired at the moments this file chooses (`started`, `close`), and the
//! task table, delegation's end, `session_start`/`session_end` and the exit are handled here.

use super::delegation::{self, registration::Standing};
use super::door::{self, tasks::Taken};
use super::door_access::{self, Access};
use super::lifecycle::{self, Lifecycle};
use super::session::Layout;
use super::status::{self, Status};
use super::task_files;
use super::trace::{Bootstrap, Trace};
use crate::a2a::shapes::State;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::Manifest;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// How one task ended, as its runner reports it: the answer is the runner's, in memory.
pub struct Finished {
    pub state: State,
    /// The `response` artifact's text; a failure's first line is its status message.
    pub answer: String,
    /// The status message when the answer's first line is empty.
    pub fallback: String,
    /// The run chose a Message for its answer (a component's `out/message.txt`).
    pub as_message: bool,
}

/// What the session's tasks came to, for the runner's close.
#[derive(Debug, Default, Clone, Copy)]
pub struct Served {
    pub tasks: u64,
    pub last: Option<State>,
    /// The SIGTERM or SIGINT that ended the session (0: none).
    pub signal: i32,
}

/// How a session ends, as its runner says.
pub struct Closing {
    /// `session_end.exit_status`.
    pub exit_status: &'static str,
    /// The kind's own `session_end` fields (totals, the trap).
    pub fields: Value,
    /// Whether the session's work is done (a delegated child's completion says so).
    pub ok: bool,
    /// The word of the `status:` line.
    pub word: &'static str,
    pub exit: Result<u8, Diagnostic>,
}

/// One capsule kind's tasks: the WASM component or the agent loop.
pub trait TaskRunner {
    /// The session started (`session_start` is traced, the door serves).
    fn started(&mut self) {}
    /// Run one task to its end. An error ends the session at once (its records failed).
    fn run(&mut self, task: &Taken, bootstrap: &mut Bootstrap) -> Result<Finished, Diagnostic>;
    /// Whether the session must end after the task that just ran.
    fn must_end(&self) -> bool;
    /// What a SIGTERM or SIGINT does to the work in progress (run on the signal thread).
    fn on_signal(&self) -> Box<dyn Fn() + Send>;
    /// Close what the runner holds; how the session ends.
    fn close(self: Box<Self>, served: Served, bootstrap: &mut Bootstrap) -> Closing;
}

/// A session whose layout, records, trace and task table exist and whose door is bound.
pub struct Opened<'a> {
    /// `--json`: the announcement is one JSON line and no `status:` line is printed.
    pub json: bool,
    /// `--verbose`: the announcement says where things are.
    pub verbose: bool,
    pub manifest: &'a Manifest,
    pub session_id: String,
    pub layout: Layout,
    pub bootstrap: Bootstrap,
    pub trace: Trace,
    pub life: Lifecycle,
    /// The door, bound; it serves from the start of the session.
    pub bound: Option<door::Bound>,
    pub achieved: crate::containment::class::Class,
    pub url: String,
    /// The signal that stopped the session (0: none).
    pub stop: Arc<AtomicI32>,
    pub started: Instant,
    pub standing: Standing,
    /// What the scope phase settled for the runner's assembly.
    pub declared: crate::manifest::model::Containment,
    pub landlock_abi: u32,
    /// Whether a contained child can have a network namespace here.
    pub netns: bool,
    /// Whether a PID namespace bounds a session here where no pids cgroup can be made.
    pub pidns: bool,
    /// `env.allow` names present in the host environment, with their values.
    pub env_present: Vec<(String, String)>,
    /// `effective_grants` for `session_start`.
    pub grants_json: Value,
    /// The session's network namespace and egress relay, with its decisions.
    pub egress: Option<(
        crate::containment::egress::Egress,
        std::sync::mpsc::Receiver<crate::containment::egress::event::Event>,
    )>,
}

/// What the runner's assembly gives the start of the session.
pub struct Start {
    /// `session_start`'s fields (the kind's own).
    pub fields: Value,
    /// The tool names the card lists.
    pub tools: Vec<String>,
    pub peer_key: Option<Arc<crate::token::Key>>,
}

/// A session that started (its trace is open) but failed before its first task: the trace
/// ends with `session_end` failed and `out/result.txt` says why, like any other failure.
pub fn failed_start(s: &mut Opened<'_>, d: Diagnostic) -> Diagnostic {
    let fields = with_records(
        &s.trace,
        json!({"exit_status": "failed", "error": d.message, "duration_ms": ms(s.started)}),
    );
    let _ = s.trace.end(fields);
    let _ = s
        .layout
        .work
        .replace("out/result.txt", format!("error: {}\n", d.message).as_bytes());
    d
}

/// Run the session: start it, serve its tasks, record its end; the exit.
pub fn serve(mut s: Opened<'_>, start: Start, runner: Box<dyn TaskRunner>) -> Result<u8, Diagnostic> {
    let (door, access, status) = begin(&mut s, start).map_err(|d| failed_start(&mut s, d))?;
    let mut runner = runner;
    runner.started();
    if let Err(d) = signal_thread(&s, runner.on_signal(), status.clone()) {
        door.close();
        door_access::forget(&s.layout.records_dir, &access);
        status::forget(&s.layout.records_dir);
        return Err(failed_start(&mut s, d));
    }
    let (served, runner) = match tasks(&mut s, runner, status.as_ref()) {
        Ok(v) => v,
        Err(d) => {
            let fields = with_records(
                &s.trace,
                json!({"exit_status": "failed", "duration_ms": ms(s.started), "error": d.message}),
            );
            let _ = s.trace.end(fields);
            door.close();
            door_access::forget(&s.layout.records_dir, &access);
            status::forget(&s.layout.records_dir);
            return Err(d);
        }
    };
    end(s, (door, access, status), served, runner)
}

/// The session's status file (`session.json`), first written now: what `mur ps` lists.
fn session_status(s: &Opened<'_>) -> Option<Status> {
    let m = s.manifest;
    let spawner = s.standing.spawner.as_ref();
    let fixed = json!({
        "session_id": s.session_id,
        "pid": std::process::id(),
        "capsule": m.name,
        "version": m.version,
        "class": s.achieved.as_str(),
        "url": s.url,
        "started_ms": crate::clock::now_ms().saturating_sub(ms(s.started)),
        "parent": spawner.map(|p| p.session_id.clone()),
        "delegation_id": spawner.map(|p| p.delegation_id.clone()),
    });
    let watched = s.trace.health().watch(crate::places::SESSION_FILE);
    let status = Status::new(&s.layout.records_dir, fixed, s.life.tasks.clone(), watched)?;
    status.write("idle", json!({}));
    Some(status)
}

/// The control socket `mur stop` reaches the session through; a session that cannot listen
/// runs on (SIGTERM still stops it) and its bootstrap log says why.
fn control(s: &mut Opened<'_>) {
    if let Err(e) = status::listen(&s.layout.records_dir) {
        s.bootstrap.line(&format!(
            "cannot listen on {}: {e}; mur stop cannot reach this session (SIGTERM still stops it)",
            crate::places::CONTROL_SOCKET
        ));
    }
}

/// `session_start`, the door's access settled, the door serving, the session's status file
/// and control socket (so `mur ps` lists it and `mur stop` reaches it once it is
/// announced), the announcement.
fn begin(s: &mut Opened<'_>, start: Start) -> Result<(door::Door, Access, Option<Status>), Diagnostic> {
    let mut fields = start.fields;
    delegation::session_start_fields(s.standing.spawner.as_ref(), &mut fields);
    s.trace
        .event("session_start", fields)
        .map_err(|e| trace_err(s, e))?;
    let bound = s
        .bound
        .take()
        .ok_or_else(|| Diagnostic::new(code::RUN_TRAP, "", "the door was already opened"))?;
    let delegated = s.standing.spawner.is_some();
    let access = door_access::settle(
        s.manifest,
        &s.session_id,
        &s.url,
        &s.layout.records_dir,
        delegated,
    )?;
    let opened = bound.open(door::Setup {
        manifest: s.manifest,
        tools: start.tools,
        tasks: s.life.tasks.clone(),
        session_id: &s.session_id,
        work: door_workdir(&s.layout)?,
        class: s.achieved,
        trace: Some(s.trace.clone()),
        peer_key: start.peer_key,
        gate: access.gate.clone(),
    });
    let door = match opened {
        Ok(d) => d,
        Err(d) => {
            door_access::forget(&s.layout.records_dir, &access);
            return Err(d);
        }
    };
    let status = session_status(s);
    control(s);
    announce(s, &access);
    Ok((door, access, status))
}

/// The signal thread: SIGTERM and SIGINT stop the work in progress and end a waiting
/// session (every thread has them blocked).
fn signal_thread(
    s: &Opened<'_>,
    on_signal: Box<dyn Fn() + Send>,
    status: Option<Status>,
) -> Result<(), Diagnostic> {
    let (stop, tasks) = (s.stop.clone(), s.life.tasks.clone());
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Ok(sig) = crate::signals::wait_for_termination() {
                stop.store(sig, Ordering::SeqCst);
                // Whatever guest call is in flight (a driver waiting on a model, a hook in
                // a host call) is dropped now rather than at its deadline.
                crate::runtime::wasm::invoke::stop_calls(sig);
                on_signal();
                tasks.wake();
                if let Some(st) = &status {
                    st.write("stopping", json!({"signal": sig}));
                }
            }
        })
        .map(drop)
        .map_err(|e| Diagnostic::new(code::RUN_TRAP, "", format!("cannot start the signal thread: {e}")))
}

/// The task loop: each task the lifecycle hands out, run and answered.
fn tasks(
    s: &mut Opened<'_>,
    mut runner: Box<dyn TaskRunner>,
    status: Option<&Status>,
) -> Result<(Served, Box<dyn TaskRunner>), Diagnostic> {
    let mut served = Served::default();
    let state = |word: &str, task: &str| {
        if let Some(st) = status {
            st.write(word, json!({"task": task}));
        }
    };
    while let Some(task) = s.life.next_task() {
        served.tasks += 1;
        state("working", &task.id);
        let f = run_with_files(s, runner.as_mut(), &task)?;
        let mut outcome = lifecycle::outcome(f.state, f.answer, &f.fallback);
        if f.state == State::Completed {
            outcome.files = output_files(s);
            outcome.as_message = f.as_message;
        }
        s.life.finish(&task, outcome);
        if s.stop.load(Ordering::SeqCst) == 0 {
            state("idle", &task.id);
        }
        served.last = Some(f.state);
        if s.stop.load(Ordering::SeqCst) != 0 || runner.must_end() {
            break;
        }
    }
    s.life.close();
    if s.life.ran() == 0 {
        s.bootstrap.line("no task arrived: the session ends idle");
    }
    served.signal = s.stop.load(Ordering::SeqCst);
    Ok((served, runner))
}

/// Run `task` with its files landed (`a2a.input`): the runner gets the task's text with
/// the files named (traced as `task_files_in`); a message whose files cannot land (or whose
/// output directory cannot be emptied) fails without running (`task_files_failed`).
fn run_with_files(
    s: &mut Opened<'_>,
    runner: &mut dyn TaskRunner,
    task: &Taken,
) -> Result<Finished, Diagnostic> {
    let landed = match task_files::prepare(&s.layout.preopen_dir, &s.manifest.a2a, task) {
        Ok(l) => l,
        Err(why) => {
            s.bootstrap.line(&format!("task {}: {why}", task.id));
            s.trace
                .event("task_files_failed", json!({"task_id": task.id, "error": why}))
                .map_err(|e| trace_err(s, e))?;
            return Ok(Finished {
                state: State::Failed,
                answer: format!("error: {why}\n"),
                fallback: why,
                as_message: false,
            });
        }
    };
    if !landed.files.is_empty() {
        s.trace
            .event(
                "task_files_in",
                json!({"task_id": task.id, "files": landed.files}),
            )
            .map_err(|e| trace_err(s, e))?;
    }
    if landed.text == task.text {
        return runner.run(task, &mut s.bootstrap);
    }
    let with_files = Taken {
        text: landed.text,
        ..task.clone()
    };
    runner.run(&with_files, &mut s.bootstrap)
}

/// The files a completed task left in its output directory (`a2a.output`), as artifacts;
/// what was left out is noted in the bootstrap log.
fn output_files(s: &mut Opened<'_>) -> Vec<crate::a2a::shapes::OutPart> {
    let (files, skipped) = task_files::collect(&s.layout.preopen_dir, &s.manifest.a2a);
    for why in skipped {
        s.bootstrap.line(&format!("output file left out: {why}"));
    }
    files
}

/// `session_end`'s `fields`, with `records: incomplete` and why when a records write failed.
fn with_records(trace: &Trace, mut fields: Value) -> Value {
    if let Some(why) = trace.health().incomplete() {
        fields["records"] = "incomplete".into();
        fields["records_error"] = why.into();
    }
    fields
}

/// The end: the runner closes, `session_end`, the door, delegation's end, the status line.
/// Records that could not be written whole make the session `incomplete` (an error exit),
/// whatever its work came to.
fn end(
    mut s: Opened<'_>,
    (door, access, status): (door::Door, Access, Option<Status>),
    served: Served,
    runner: Box<dyn TaskRunner>,
) -> Result<u8, Diagnostic> {
    door.drain_pushes();
    let closing = runner.close(served, &mut s.bootstrap);
    let mut fields = json!({"exit_status": closing.exit_status, "duration_ms": ms(s.started)});
    if let (Some(f), Some(more)) = (fields.as_object_mut(), closing.fields.as_object()) {
        f.extend(more.clone());
    }
    let fields = with_records(&s.trace, fields);
    let exit_status = fields["exit_status"].clone();
    let recorded = s.trace.end(fields).map_err(|e| trace_err(&s, e));
    let incomplete = s.trace.health().incomplete();
    door.close();
    door_access::forget(&s.layout.records_dir, &access);
    status::forget(&s.layout.records_dir);
    if let Some(st) = &status {
        st.write("ended", json!({"exit_status": exit_status}));
    }
    delegation::finish(
        s.standing,
        &delegation::Ended {
            manifest: s.manifest,
            session_id: &s.session_id,
            ok: closing.ok,
            signalled: served.signal != 0,
            records: &s.layout.records_dir,
            work: &s.layout.work,
            workdir: &s.layout.workdir,
            duration_ms: ms(s.started),
        },
    );
    let word = match (&incomplete, closing.word) {
        (Some(_), "ok" | "idle") => "incomplete",
        (_, word) => word,
    };
    if !s.json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "status:  {word}");
        let _ = out.flush();
    }
    match (closing.exit, recorded, incomplete) {
        (Ok(_), Err(d), _) => Err(d),
        (Ok(_), Ok(()), Some(why)) => Err(Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            format!("the session's records are incomplete: {why}"),
        )),
        (exit, _, _) => exit,
    }
}

/// The peer plane's minting key: 32 random bytes, made only when `exports.peer_files` is
/// declared, held in memory and overwritten when the last holder drops it.
pub fn peer_key(m: &Manifest) -> Result<Option<Arc<crate::token::Key>>, Diagnostic> {
    if m.exports.peer_files.is_none() {
        return Ok(None);
    }
    crate::token::Key::generate_shared().map(Some).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "",
            format!("cannot make the peer plane's key: {e}"),
        )
    })
}

/// The door's own handle on the accessible workdir, for `/resources/`.
pub fn door_workdir(layout: &Layout) -> Result<crate::fsx::Dir, Diagnostic> {
    layout.preopen_dir.try_clone().map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            layout.preopen.display().to_string(),
            format!("cannot hold the workdir for the resource plane: {e}"),
        )
    })
}

fn trace_err(s: &Opened<'_>, e: std::io::Error) -> Diagnostic {
    Diagnostic::new(
        code::RUN_AGENT_LOOP,
        "",
        format!(
            "cannot write {}: {e}",
            s.layout.records.join("trace.jsonl").display()
        ),
    )
}

/// Milliseconds since `since`.
pub fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

/// The announcement on stdout: one JSON line with `--json`, else the url and session lines
/// (and with `--verbose` where things are). An authenticated door adds `"auth":"bearer"`,
/// and for a delegated child the `spawner` credential's token its parent delivers with
/// (the launch line is a pipe to that parent).
fn announce(s: &Opened<'_>, access: &Access) {
    let hostport = s.url.trim_start_matches("http://");
    let (m, layout) = (s.manifest, &s.layout);
    let mut out = std::io::stdout().lock();
    if s.json {
        // Written by hand so the keys keep the documented order.
        let q = |v: &str| serde_json::Value::from(v).to_string();
        let mut auth = String::new();
        if access.gate.is_some() {
            auth.push_str(",\"auth\":\"bearer\"");
        }
        if let Some(t) = &access.spawner_token {
            auth.push_str(&format!(",\"token\":{}", q(t)));
        }
        let _ = writeln!(
            out,
            "{{\"url\":{},\"pid\":{},\"session_id\":{},\"name\":{},\"version\":{},\"workdir\":{}{auth}}}",
            q(hostport),
            std::process::id(),
            q(&s.session_id),
            q(&m.name),
            q(&m.version),
            q(&layout.workdir.display().to_string())
        );
    } else {
        let _ = writeln!(out, "murmur: url {hostport}\nsession: {}", s.session_id);
        if let (Some(_), Some(auth)) = (&access.gate, &m.capabilities.door_auth) {
            let _ = writeln!(
                out,
                "auth: bearer ({})",
                door_access::token_command(&s.session_id, auth)
            );
        }
        if s.verbose {
            let _ = writeln!(
                out,
                "workdir: {}\nrecords: {}\nmanifest: {} v{}",
                layout.workdir.display(),
                layout.records.display(),
                m.name,
                m.version
            );
        }
    }
    let _ = out.flush();
}
