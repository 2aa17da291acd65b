//! `mur trace [PATH | --session ID]`: read a session's `trace.jsonl` (bounded: at most
//! [`MAX_FILE`] bytes, lines of at most [`crate::trace_view::MAX_LINE`]) and print its
//! timeline and summary, or with `--json` the summary as one object; `--follow` keeps
//! reading as a running session appends; `--html OUT` writes the timeline as one
//! self-contained page ([`crate::trace_view::html`]) instead. Malformed lines go to stderr
//! by number.

use crate::diag::{code, Diagnostic};
use crate::trace_view::{clean, Line, Spans, Splitter, Summary, Timeline, MAX_FILE, MAX_LINE};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The flags of `mur trace`.
#[derive(Debug, Default)]
pub struct TraceOptions {
    pub path: Option<PathBuf>,
    pub session: Option<String>,
    pub json: bool,
    pub follow: bool,
    /// Write the page here instead of printing the timeline.
    pub html: Option<PathBuf>,
}

/// How often `--follow` looks for new lines, and how many quiet looks after `session_end`
/// end it.
const POLL: Duration = Duration::from_millis(200);
const QUIET_AFTER_END: u32 = 5;

use crate::places::records_root;

/// The records directory of session `id` (`--session`): a session id names one directory
/// (letters, digits, `_` and `-` only) under the records root.
pub fn session_dir(id: &str) -> Result<PathBuf, Diagnostic> {
    let ok = !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(Diagnostic::new(
            code::IO_READ,
            "--session",
            format!(
                "'{}' is not a session id (ses_ and 32 hex digits)",
                clean(id, 100)
            ),
        ));
    }
    let root = records_root().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "--session",
            "neither MURMUR_RECORDS_DIR nor HOME is set",
        )
    })?;
    Ok(root.join(id))
}

/// The trace file the options name: a file, a records directory, or a session's.
pub fn locate(o: &TraceOptions) -> Result<PathBuf, Diagnostic> {
    match (&o.path, &o.session) {
        (_, Some(id)) => session_dir(id).map(|d| d.join("trace.jsonl")),
        (Some(p), None) if p.is_dir() => Ok(p.join("trace.jsonl")),
        (Some(p), None) => Ok(p.clone()),
        (None, None) => Err(Diagnostic::new(
            code::IO_READ,
            "trace",
            "name a trace file or --session ID",
        )),
    }
}

fn read_err(path: &Path, e: std::io::Error) -> Diagnostic {
    Diagnostic::new(
        code::IO_READ,
        path.display().to_string(),
        format!("cannot read {}: {e}", path.display()),
    )
}

/// What the lines go into: the printed timeline, or the page's rows.
enum View {
    Text(Box<Timeline>),
    Page(Box<Spans>),
}

impl View {
    fn summary(&self) -> &Summary {
        match self {
            View::Text(t) => t.summary(),
            View::Page(p) => p.summary(),
        }
    }

    fn mark_cut(&mut self) {
        match self {
            View::Text(t) => t.mark_cut(),
            View::Page(p) => p.mark_cut(),
        }
    }

    /// Take one line; the timeline's lines to print.
    fn push(&mut self, line: Line) -> Vec<String> {
        match self {
            View::Text(t) => t.push(line),
            View::Page(p) => {
                p.push(line);
                Vec::new()
            }
        }
    }
}

/// A trace read in bounded chunks as it grows (at most [`MAX_FILE`] bytes, lines of at most
/// [`MAX_LINE`]): what `mur trace` (with `--follow`) and `mur watch` read through.
pub struct Tail {
    file: File,
    split: Splitter,
    read: u64,
    /// The cap was reached: nothing more is read.
    pub cut: bool,
}

impl Tail {
    /// Open the regular file `path`.
    pub fn open(path: &Path) -> Result<Tail, Diagnostic> {
        let file = File::open(path).map_err(|e| read_err(path, e))?;
        let meta = file.metadata().map_err(|e| read_err(path, e))?;
        if !meta.is_file() {
            return Err(read_err(path, std::io::Error::other("not a regular file")));
        }
        Ok(Tail {
            file,
            split: Splitter::new(MAX_LINE),
            read: 0,
            cut: false,
        })
    }

    /// The whole lines there are now; `None` at end of file (or at the cap).
    pub fn step(&mut self) -> Result<Option<Vec<Line>>, std::io::Error> {
        let mut chunk = vec![0u8; 64 * 1024];
        let room = MAX_FILE.saturating_sub(self.read);
        if room == 0 {
            self.cut = true;
            return Ok(None);
        }
        let want = chunk.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let got = self.file.read(&mut chunk[..want])?;
        if got == 0 {
            return Ok(None);
        }
        self.read += got as u64;
        Ok(Some(self.split.feed(&chunk[..got])))
    }

    /// The last line, without its newline, once the reading is over.
    pub fn finish(&mut self) -> Option<Line> {
        self.split.finish()
    }
}

/// Reads the file in bounded chunks and renders as it goes.
struct Reader<'a> {
    tail: Tail,
    view: View,
    reported: usize,
    json: bool,
    out: &'a mut dyn Write,
    err: &'a mut dyn Write,
}

impl Reader<'_> {
    /// Read what is there now; false at end of file (or at the cap).
    fn step(&mut self) -> Result<bool, std::io::Error> {
        match self.tail.step()? {
            Some(lines) => {
                for line in lines {
                    self.show(line);
                }
                Ok(true)
            }
            None => {
                if self.tail.cut {
                    self.timeline_summary_cut();
                }
                Ok(false)
            }
        }
    }

    fn timeline_summary_cut(&mut self) {
        if !self.view.summary().cut_at_cap {
            let _ = writeln!(self.err, "mur trace: stopped after {MAX_FILE} bytes");
        }
        self.view.mark_cut();
    }

    fn show(&mut self, line: Line) {
        let lines = self.view.push(line);
        if !self.json {
            for l in lines {
                let _ = writeln!(self.out, "{l}");
            }
        }
        let problems = &self.view.summary().problems;
        for (n, why) in problems.iter().skip(self.reported) {
            let _ = writeln!(self.err, "mur trace: line {n}: {why}; skipped");
        }
        self.reported = problems.len();
    }
}

/// Run `mur trace`; the exit status.
pub fn trace(o: &TraceOptions, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Diagnostic> {
    let path = locate(o)?;
    let view = match o.html {
        Some(_) => View::Page(Box::default()),
        None => View::Text(Box::default()),
    };
    let mut r = Reader {
        tail: Tail::open(&path)?,
        view,
        reported: 0,
        json: o.json,
        out,
        err,
    };
    while r.step().map_err(|e| read_err(&path, e))? {}
    if o.follow {
        let mut quiet = 0;
        while quiet < QUIET_AFTER_END || r.view.summary().exit_status.is_none() {
            std::thread::sleep(POLL);
            let mut any = false;
            while r.step().map_err(|e| read_err(&path, e))? {
                any = true;
            }
            quiet = if any { 0 } else { quiet + 1 };
            if r.view.summary().cut_at_cap {
                break;
            }
        }
    }
    if let Some(last) = r.tail.finish() {
        r.show(last);
    }
    let summary = match (r.view, &o.html) {
        (View::Page(spans), Some(out)) => return write_page(*spans, out, &path, r.out),
        (view, _) => summary_of(view),
    };
    no_events(&summary, &path)?;
    if o.json {
        let _ = writeln!(r.out, "{}", summary.to_json());
    } else {
        let _ = write!(r.out, "\n{}", summary.to_text());
    }
    Ok(0)
}

fn summary_of(view: View) -> Summary {
    match view {
        View::Text(t) => (*t).into_summary(),
        View::Page(p) => p.summary().clone(),
    }
}

/// A trace with no event at all is an error, whatever it is rendered as.
fn no_events(summary: &Summary, path: &Path) -> Result<(), Diagnostic> {
    if summary.events > 0 {
        return Ok(());
    }
    Err(Diagnostic::new(
        code::IO_READ,
        path.display().to_string(),
        format!(
            "no trace events in {} ({} malformed lines)",
            path.display(),
            summary.problem_count
        ),
    ))
}

/// `--html OUT`: the page written whole (temp file, then renamed) and one line saying so.
fn write_page(mut spans: Spans, out: &Path, path: &Path, stdout: &mut dyn Write) -> Result<u8, Diagnostic> {
    spans.finish(None);
    no_events(spans.summary(), path)?;
    let page = crate::trace_view::html::page(&spans);
    super::write_page(out, &page)?;
    let _ = writeln!(
        stdout,
        "wrote {}: {} events, {} bytes",
        out.display(),
        spans.summary().events,
        page.len()
    );
    Ok(0)
}
