//! `mur eval show [--json] FILE|DIR|--session ID` and `mur eval diff [--json] A B`: read
//! `eval.jsonl` files (bounded: at most [`MAX_FILE`] bytes, lines of at most `MAX_LINE`)
//! into per-scorer and per-dataset pass rates, or compare two runs' and say which scored
//! better; `mur eval show --html OUT SOURCE...` draws them, each source a variant, as one
//! self-contained page. A malformed line is reported on stderr by number and skipped; a record type this
//! reader does not know refuses the file (its numbers would be wrong without it). A word of
//! the session id shape names that session's records, as `mur trace --session` does.

use super::trace::session_dir;
use crate::diag::{code, Diagnostic};
use crate::eval_view::{diff, Report, Splitter, MAX_FILE, MAX_LINE};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The file a session's eval hook writes.
pub const EVAL_FILE: &str = "eval.jsonl";
/// Where in a session's records the eval hook writes it (its `records: own` directory).
pub const HOOK_DIR: &str = "hooks/murmur-hook-eval";

/// Where `mur eval` reads: a file, a records directory, or a session by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Path(PathBuf),
    Session(String),
}

impl Source {
    /// A command-line word: a session id (`ses_` and 32 hex) that is not an existing path
    /// names a session; anything else a path.
    pub fn from_word(w: &str) -> Source {
        if crate::spawner::is_id(w, "ses_") && !Path::new(w).exists() {
            Source::Session(w.to_string())
        } else {
            Source::Path(PathBuf::from(w))
        }
    }

    /// How a page names this source: the session id, or the path as given.
    fn label(&self) -> String {
        match self {
            Source::Session(id) => id.clone(),
            Source::Path(p) => p.display().to_string(),
        }
    }

    fn locate(&self) -> Result<PathBuf, Diagnostic> {
        match self {
            Source::Session(id) => session_dir(id).map(|d| in_records(&d)),
            Source::Path(p) if p.is_dir() => Ok(in_records(p)),
            Source::Path(p) => Ok(p.clone()),
        }
    }
}

/// The eval file of a records directory: `eval.jsonl` there, else the one the eval hook
/// writes in its own directory (`hooks/murmur-hook-eval/eval.jsonl`).
fn in_records(dir: &Path) -> PathBuf {
    let direct = dir.join(EVAL_FILE);
    let hook = dir.join(HOOK_DIR).join(EVAL_FILE);
    if !direct.exists() && hook.exists() {
        hook
    } else {
        direct
    }
}

fn read_err(path: &Path, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(
        code::IO_READ,
        path.display().to_string(),
        format!("cannot read {}: {why}", path.display()),
    )
}

/// Read and tally `src`; malformed lines go to `err` by number. An unknown record type, or
/// a file with no record at all, is an error.
pub fn read(src: &Source, err: &mut dyn Write) -> Result<Report, Diagnostic> {
    let path = src.locate()?;
    // Never through a symlink (a hook writes beside this file) and never blocking on a FIFO.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| read_err(&path, e))?;
    let meta = file.metadata().map_err(|e| read_err(&path, e))?;
    if !meta.is_file() {
        return Err(read_err(&path, "not a regular file"));
    }
    let mut split = Splitter::new(MAX_LINE);
    let mut report = Report::default();
    let mut chunk = vec![0u8; 64 * 1024];
    let mut limited = file.take(MAX_FILE);
    loop {
        let got = limited.read(&mut chunk).map_err(|e| read_err(&path, e))?;
        if got == 0 {
            break;
        }
        for line in split.feed(&chunk[..got]) {
            report.push(line);
        }
    }
    if let Some(last) = split.finish() {
        report.push(last);
    }
    if meta.len() > MAX_FILE {
        let _ = writeln!(
            err,
            "mur eval: {}: stopped after {MAX_FILE} bytes",
            path.display()
        );
    }
    for (n, why) in &report.problems {
        let _ = writeln!(err, "mur eval: {} line {n}: {why}; skipped", path.display());
    }
    if let Some((n, kind)) = &report.unknown {
        return Err(Diagnostic::new(
            code::IO_READ,
            path.display().to_string(),
            format!(
                "{} line {n}: unknown record type '{kind}' (this mur reads event_score and dataset_run)",
                path.display()
            ),
        ));
    }
    if report.event_scores + report.dataset_runs == 0 {
        return Err(Diagnostic::new(
            code::IO_READ,
            path.display().to_string(),
            format!(
                "no eval records in {} ({} malformed lines)",
                path.display(),
                report.problem_count
            ),
        ));
    }
    Ok(report)
}

/// `mur eval show`: the report, as text or one JSON object.
pub fn show(src: &Source, json: bool, err: &mut dyn Write) -> Result<String, Diagnostic> {
    let r = read(src, err)?;
    Ok(if json {
        format!("{}\n", r.to_json())
    } else {
        r.to_text()
    })
}

/// `mur eval show --html OUT`: every source read (each a variant), the page written whole
/// (temp file, then renamed); one line saying so.
pub fn page(sources: &[Source], out: &Path, err: &mut dyn Write) -> Result<String, Diagnostic> {
    let mut variants = Vec::new();
    for src in sources {
        variants.push((src.label(), read(src, err)?));
    }
    let page = crate::eval_view::html::page(&variants);
    super::write_page(out, &page)?;
    Ok(format!(
        "wrote {}: {} variant(s), {} bytes\n",
        out.display(),
        variants.len(),
        page.len()
    ))
}

/// `mur eval diff`: A against B, as text or one JSON object.
pub fn compare(a: &Source, b: &Source, json: bool, err: &mut dyn Write) -> Result<String, Diagnostic> {
    let (ra, rb) = (read(a, err)?, read(b, err)?);
    let d = diff(&ra, &rb);
    Ok(if json {
        format!("{}\n", d.to_json())
    } else {
        d.to_text()
    })
}
