//! A task's files, both ways (`a2a.input`, `a2a.output`). In: the file and data parts of
//! an A2A message land in `<input dir>/<task id>/` of the accessible workdir, each created
//! new through [`fsx`](crate::fsx) under the name [`land_names`] made safe, and the task's
//! text gains a `## Files` list naming them (what `task.md` and an agent's first message
//! hold). Out: after a completed task, the regular files beneath the output directory
//! (symlinks refused, each read through the resource plane's confined resolver, at most
//! `a2a.output.max_bytes` each, [`MAX_OUTPUT_FILES`] and [`MAX_OUTPUT_BYTES`] in all) come
//! back as file artifacts with a media type by extension (`a2a.output.data`'s as data
//! parts, `a2a.output.links`' as files by reference). Before each A2A task the output
//! and input directories are emptied, so each task's artifacts are its own and no task sees
//! an earlier one's files.

use super::door::tasks::Taken;
use crate::a2a::media;
use crate::a2a::parts::land_names;
use crate::a2a::shapes::{Carried, OutPart};
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
        for dir in io.output.iter().flat_map(|o| o.dirs()) {
            clear(work, dir).map_err(|e| format!("cannot empty the output directory {dir}: {e}"))?;
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

/// How the files of one output directory come back.
#[derive(Clone, Copy)]
enum Sent {
    /// `a2a.output.dir`: each file's bytes.
    Files,
    /// `a2a.output.data`: each file a JSON object, a data part.
    Data,
    /// `a2a.output.links`: each file one `http(s)` URL, a file by reference.
    Links,
}

/// The longest URL a `links` file may hold.
const MAX_LINK: usize = 2048;

/// What collecting a task's output came to: the parts, their bytes, and what was left out
/// or sent otherwise, and why (for the bootstrap log).
#[derive(Default)]
struct Collected {
    parts: Vec<OutPart>,
    total: u64,
    notes: Vec<String>,
}

/// The files beneath the output directories, as artifacts' parts; what was left out and
/// why is in the second list (for the bootstrap log).
pub fn collect(work: &Dir, io: &TaskIo) -> (Vec<OutPart>, Vec<String>) {
    let mut c = Collected::default();
    let Some(out) = &io.output else {
        return (c.parts, c.notes);
    };
    let dirs = [
        (Some(out.dir.as_str()), Sent::Files),
        (out.data.as_deref(), Sent::Data),
        (out.links.as_deref(), Sent::Links),
    ];
    for (dir, sent) in dirs {
        if let Some(dir) = dir {
            collect_dir(work, (dir, sent), out.max_bytes, &mut c);
        }
    }
    (c.parts, c.notes)
}

/// The regular files beneath `dir` (symlinks refused), each read within the bounds and
/// sent as `sent` says.
fn collect_dir(work: &Dir, (dir, sent): (&str, Sent), max_bytes: u64, c: &mut Collected) {
    let root = match open::open_root(work, dir, Symlinks::Refuse) {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(r) => return c.notes.push(format!("{dir}: {}", r.message())),
    };
    let entries = match list::list(root.as_fd(), Symlinks::Refuse, max_bytes) {
        Ok(e) => e,
        Err(r) => return c.notes.push(format!("{dir}: {}", r.message())),
    };
    for e in entries {
        let shown = format!("{dir}/{}", e.path.escape_debug());
        let why = if e.path.chars().any(char::is_control) {
            Some("a name with control characters is not sent back".to_string())
        } else if e.size > max_bytes {
            Some(format!("larger than a2a.output.max_bytes ({max_bytes})"))
        } else if c.parts.len() >= MAX_OUTPUT_FILES {
            Some(format!("past the first {MAX_OUTPUT_FILES} files"))
        } else if c.total + e.size > MAX_OUTPUT_BYTES {
            Some(format!("past {MAX_OUTPUT_BYTES} bytes of files in all"))
        } else {
            None
        };
        if let Some(why) = why {
            c.notes.push(format!("{shown}: {why}"));
            continue;
        }
        let read = open::open_file(root.as_fd(), &e.path, Symlinks::Refuse, max_bytes)
            .and_then(|o| body::read_small(&o.file, o.size));
        match read {
            // A file that grew since it was listed is held to the bound by what was read.
            Ok(bytes) if c.total + bytes.len() as u64 > MAX_OUTPUT_BYTES => c
                .notes
                .push(format!("{shown}: past {MAX_OUTPUT_BYTES} bytes of files in all")),
            Ok(bytes) => {
                c.total += bytes.len() as u64;
                match carry(sent, e.path, bytes) {
                    Ok(part) => c.parts.push(part),
                    Err((part, why)) => {
                        c.notes.push(format!("{shown}: {why}"));
                        c.parts.extend(part);
                    }
                }
            }
            Err(r) => c.notes.push(format!("{shown}: {}", r.message())),
        }
    }
}

/// The part `name`'s `bytes` make as `sent` says. A data file that is not one JSON object
/// comes back as a file (nothing of the answer is lost), a links file that is not one
/// `http(s)` URL is left out; either way the error says why.
fn carry(sent: Sent, name: String, bytes: Vec<u8>) -> Result<OutPart, (Option<OutPart>, String)> {
    let media_type = media::by_extension(&name).to_string();
    let file = |name: String, bytes: Vec<u8>| OutPart {
        media_type: media_type.clone(),
        name,
        carried: Carried::Bytes(bytes),
    };
    match sent {
        Sent::Files => Ok(file(name, bytes)),
        Sent::Data => match serde_json::from_slice::<Value>(&bytes) {
            Ok(v @ Value::Object(_)) => Ok(OutPart {
                name,
                media_type: "application/json".into(),
                carried: Carried::Data(v),
            }),
            _ => Err((
                Some(file(name, bytes)),
                "not one JSON object: sent back as a file".into(),
            )),
        },
        Sent::Links => match link(&bytes) {
            Some(url) => Ok(OutPart {
                name,
                media_type,
                carried: Carried::Url(url),
            }),
            None => Err((
                None,
                format!("not one http(s) URL of at most {MAX_LINK} bytes: left out"),
            )),
        },
    }
}

/// The one absolute `http://` or `https://` URL `bytes` hold (surrounding whitespace
/// trimmed): printable ASCII only (no space, control, bidirectional or invisible character
/// to disguise it; a host beyond ASCII is written in punycode), no userinfo, no fragment.
fn link(bytes: &[u8]) -> Option<String> {
    let url = std::str::from_utf8(bytes).ok()?.trim();
    let clean = url.len() <= MAX_LINK && url.bytes().all(|b| (0x21..=0x7e).contains(&b));
    (clean && crate::http::client::Url::parse_web(url).is_ok()).then(|| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_one_web_url_and_data_one_object() {
        assert_eq!(
            link(b" https://example.com/output.txt\n").as_deref(),
            Some("https://example.com/output.txt")
        );
        for bad in [
            &b"ftp://example.com/x"[..],
            b"https://user@example.com/x",
            b"https://example.com/a b",
            b"https://example.com/x\nhttps://example.com/y",
            b"https://example.com/\x01",
            "https://example.com/\u{202e}txt.exe".as_bytes(),
            "https://ex\u{200b}ample.com/".as_bytes(),
            "https://exämple.com/".as_bytes(),
            b"file:///etc/passwd",
            b"\xff",
            b"",
        ] {
            assert_eq!(link(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(link(format!("https://e.com/{}", "a".repeat(MAX_LINK)).as_bytes()).is_none());
        let ok = carry(Sent::Data, "r.json".into(), br#"{"k": 1}"#.to_vec()).unwrap();
        assert_eq!(ok.carried, Carried::Data(serde_json::json!({"k": 1})));
        let Err((Some(f), why)) = carry(Sent::Data, "r.json".into(), b"[1]".to_vec()) else {
            panic!("an array is not a data part")
        };
        assert_eq!(
            (f.carried, why.as_str()),
            (
                Carried::Bytes(b"[1]".to_vec()),
                "not one JSON object: sent back as a file"
            )
        );
    }
}
