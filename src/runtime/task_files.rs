//! A task's files, both ways (`a2a.input`, `a2a.output`). In: the file and data parts of
//! an A2A message land in `<input dir>/<task id>/` of the accessible workdir, each created
//! new through [`fsx`](crate::fsx) under the name [`land_names`] made safe, and the task's
//! text gains a `## Files` list naming them (what `task.md` and an agent's first message
//! hold). Out: after a completed task, the regular files beneath the output directory
//! (symlinks refused, each read through the resource plane's confined resolver, at most
//! `a2a.output.max_bytes` each, [`MAX_OUTPUT_FILES`] and [`MAX_OUTPUT_BYTES`] in all) come
//! back as file artifacts with a media type by extension. Before each A2A task the output
//! and input directories are emptied, so each task's artifacts are its own and no task sees
//! an earlier one's files.

use super::door::tasks::Taken;
use crate::a2a::media;
use crate::a2a::parts::land_names;
use crate::a2a::shapes::FileBody;
use crate::fsx::Dir;
use crate::manifest::model::{TaskIo, MAX_OUTPUT_BYTES};
use crate::resources::{body, list, open, Symlinks};
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::AsFd;

/// The most output files sent back for one task.
pub const MAX_OUTPUT_FILES: usize = 32;

/// What landing a task's parts did: the text to run the task with, and for the trace the
/// files as they landed.
pub struct Landed {
    pub text: String,
    pub files: Vec<Value>,
}

/// Land `task`'s file and data parts beneath `work` and empty the output directory (an
/// A2A task's); the error names the step that failed.
pub fn prepare(work: &Dir, io: &TaskIo, task: &Taken) -> Result<Landed, String> {
    if task.source == "a2a" {
        if let Some(out) = &io.output {
            clear(work, &out.dir).map_err(|e| format!("cannot empty the output directory: {e}"))?;
        }
        // An earlier task's files (another caller's, perhaps) are gone before this one's land.
        clear(work, &io.input.dir).map_err(|e| format!("cannot empty the input directory: {e}"))?;
    }
    if task.files.is_empty() {
        return Ok(Landed {
            text: task.text.clone(),
            files: Vec::new(),
        });
    }
    land(work, io, task).map_err(|e| format!("cannot land the message's files: {e}"))
}

/// Remove the directory `dir` (relative to the workdir) and all beneath it, through fsx
/// (nothing there already is fine).
fn clear(work: &Dir, dir: &str) -> Result<(), crate::fsx::FsError> {
    let removed = match dir.rsplit_once('/') {
        Some((p, l)) => work.sub(p).and_then(|d| d.remove_tree(l)),
        None => work.remove_tree(dir),
    };
    match removed {
        Err(crate::fsx::FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

fn land(work: &Dir, io: &TaskIo, task: &Taken) -> Result<Landed, crate::fsx::FsError> {
    let base = format!("{}/{}", io.input.dir, task.id);
    let dir = work.mkdirs(&io.input.dir, 0o755)?.mkdir_new(&task.id, 0o755)?;
    let names = land_names(&task.files);
    let mut listed = String::from("\n\n## Files\n\n");
    let mut files = Vec::new();
    for (p, name) in task.files.iter().zip(&names) {
        let mut f = dir.create_new(name)?;
        f.write_all(&p.bytes)
            .and_then(|_| f.flush())
            .map_err(|err| crate::fsx::FsError::Io {
                path: format!("{base}/{name}"),
                err,
            })?;
        let media_type = p
            .media_type
            .as_deref()
            .and_then(media::essence)
            .unwrap_or_else(|| match p.kind {
                crate::a2a::parts::Kind::Data => "application/json".into(),
                _ => "application/octet-stream".into(),
            });
        let sent = p.name.as_deref().map(shown).filter(|s| s != name);
        let mut line = format!(
            "- {base}/{name} ({} part, {media_type}, {} bytes",
            p.kind.as_str(),
            p.bytes.len()
        );
        if let Some(sent) = &sent {
            line.push_str(&format!(", sent as \"{sent}\""));
        }
        listed.push_str(&line);
        listed.push_str(")\n");
        files.push(json!({"path": format!("{base}/{name}"), "kind": p.kind.as_str(),
            "media_type": media_type, "bytes": p.bytes.len(), "sent_as": sent}));
    }
    let text = if task.text.is_empty() {
        listed.trim_start().to_string()
    } else {
        format!("{}{listed}", task.text)
    };
    Ok(Landed { text, files })
}

/// A sender's name as it may be shown in the task's text: no control characters, no
/// quotes, at most 200 characters.
fn shown(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_control() && *c != '"' && *c != '`')
        .take(200)
        .collect()
}

/// The files beneath the output directory, as artifacts; what was left out and why is in
/// the second list (for the bootstrap log).
pub fn collect(work: &Dir, io: &TaskIo) -> (Vec<FileBody>, Vec<String>) {
    let (mut files, mut skipped) = (Vec::new(), Vec::new());
    let Some(out) = &io.output else {
        return (files, skipped);
    };
    let root = match open::open_root(work, &out.dir, Symlinks::Refuse) {
        Ok(Some(r)) => r,
        Ok(None) => return (files, skipped),
        Err(r) => {
            skipped.push(format!("{}: {}", out.dir, r.message()));
            return (files, skipped);
        }
    };
    let entries = match list::list(root.as_fd(), Symlinks::Refuse, out.max_bytes) {
        Ok(e) => e,
        Err(r) => {
            skipped.push(format!("{}: {}", out.dir, r.message()));
            return (files, skipped);
        }
    };
    let mut total = 0u64;
    for e in entries {
        let why = if e.path.chars().any(char::is_control) {
            Some("a name with control characters is not sent back".to_string())
        } else if e.size > out.max_bytes {
            Some(format!("larger than a2a.output.max_bytes ({})", out.max_bytes))
        } else if files.len() >= MAX_OUTPUT_FILES {
            Some(format!("past the first {MAX_OUTPUT_FILES} files"))
        } else if total + e.size > MAX_OUTPUT_BYTES {
            Some(format!("past {MAX_OUTPUT_BYTES} bytes of files in all"))
        } else {
            None
        };
        if let Some(why) = why {
            skipped.push(format!("{}/{}: {why}", out.dir, e.path.escape_debug()));
            continue;
        }
        let read = open::open_file(root.as_fd(), &e.path, Symlinks::Refuse, out.max_bytes)
            .and_then(|o| body::read_small(&o.file, o.size));
        match read {
            // A file that grew since it was listed is held to the bound by what was read.
            Ok(bytes) if total + bytes.len() as u64 > MAX_OUTPUT_BYTES => skipped.push(format!(
                "{}/{}: past {MAX_OUTPUT_BYTES} bytes of files in all",
                out.dir,
                e.path.escape_debug()
            )),
            Ok(bytes) => {
                total += bytes.len() as u64;
                files.push(FileBody {
                    media_type: media::by_extension(&e.path).to_string(),
                    name: e.path,
                    bytes,
                });
            }
            Err(r) => skipped.push(format!("{}/{}: {}", out.dir, e.path.escape_debug(), r.message())),
        }
    }
    (files, skipped)
}
