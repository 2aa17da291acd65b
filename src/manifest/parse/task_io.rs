//! `a2a`: the part kinds a capsule's tasks take (`input.parts`: `text`, `file`, `data`;
//! `input.media_types` for file parts), where a task's file and data parts land
//! (`input.dir`, each part at most `input.max_bytes`), the directory whose files come back
//! as file artifacts (`output.dir`, each at most `output.max_bytes`; `output.data` and
//! `output.links` for data parts and files by reference), and whether a send
//! that waits is answered with the Task or a Message (`answer`), and the webhooks a caller
//! may name for push notifications (`push.allow`, rules as `capabilities.network.allow`
//! writes them). Any other shape is E-MAN-003 naming the key.

use super::super::model::{
    AnswerAs, InputParts, OutputFiles, TaskIo, DEFAULT_OUTPUT_MAX_BYTES, MAX_OUTPUT_BYTES,
};
use super::super::read::{invalid, join, Node};
use super::super::units;
use super::{relative_path, R};
use crate::a2a::media;
use crate::diag::Diagnostic;
use crate::manifest::netrule::NetRule;

/// The most media types one capsule declares.
const MAX_MEDIA_TYPES: usize = 32;

/// The `a2a` block `node`.
pub fn parse(node: Node<'_>) -> R<TaskIo> {
    let input = match node.mapping("input")? {
        Some(v) => input(&Node {
            value: v,
            path: "a2a.input",
        })?,
        None => InputParts::default(),
    };
    let output = match node.mapping("output")? {
        Some(v) => Some(output(&Node {
            value: v,
            path: "a2a.output",
        })?),
        None => None,
    };
    let answer = match node.string("answer")?.as_deref() {
        None | Some("task") => AnswerAs::Task,
        Some("message") => AnswerAs::Message,
        Some(other) => {
            return Err(invalid(
                "a2a.answer",
                format!(
                    "unknown value '{}' (expected task or message)",
                    other.escape_debug()
                ),
            ))
        }
    };
    if let (Some(o), true) = (&output, input.file || input.data) {
        for (key, dir) in output_keys(o) {
            if overlap(dir, &input.dir) {
                return Err(invalid(
                    key,
                    "overlaps a2a.input.dir: a task's own inputs would come back as its answer",
                ));
            }
        }
    }
    let push_allow = match node.mapping("push")? {
        Some(v) => push(&Node {
            value: v,
            path: "a2a.push",
        })?,
        None => Vec::new(),
    };
    Ok(TaskIo {
        input,
        output,
        answer,
        push_allow,
    })
}

/// `push.allow`: at least one destination, each `host`, `host:port` or
/// `http(s)://host[:port]`.
fn push(n: &Node<'_>) -> R<Vec<NetRule>> {
    let entries = n.strings("allow")?.unwrap_or_default();
    if entries.is_empty() {
        return Err(invalid(
            "a2a.push.allow",
            "must list at least one destination when a2a.push is declared",
        ));
    }
    let mut rules = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let rule = NetRule::parse(e).map_err(|why| {
            invalid(
                &format!("a2a.push.allow[{i}]"),
                format!("'{}': {why}", e.escape_debug()),
            )
        })?;
        rules.push(rule);
    }
    Ok(rules)
}

fn input(n: &Node<'_>) -> R<InputParts> {
    let mut p = InputParts {
        text: false,
        ..InputParts::default()
    };
    let kinds = n.strings("parts")?.unwrap_or_else(|| vec!["text".into()]);
    if kinds.is_empty() {
        return Err(invalid(
            "a2a.input.parts",
            "must list at least one of text, file, data",
        ));
    }
    for k in &kinds {
        match k.as_str() {
            "text" => p.text = true,
            "file" => p.file = true,
            "data" => p.data = true,
            other => {
                return Err(invalid(
                    "a2a.input.parts",
                    format!(
                        "unknown part kind '{}' (expected text, file or data)",
                        other.escape_debug()
                    ),
                ))
            }
        }
    }
    let types = n.strings("media_types")?;
    if types.is_some() && !p.file {
        return Err(invalid(
            "a2a.input.media_types",
            "is for file parts; add file to a2a.input.parts",
        ));
    }
    let types = types.unwrap_or_else(|| vec!["*/*".into()]);
    if types.is_empty() || types.len() > MAX_MEDIA_TYPES {
        return Err(invalid(
            "a2a.input.media_types",
            format!("must list 1 to {MAX_MEDIA_TYPES} media types"),
        ));
    }
    if p.file {
        for t in &types {
            let r = media::range(t).ok_or_else(|| {
                invalid(
                    "a2a.input.media_types",
                    format!("'{}' is not a media type, type/* or */*", t.escape_debug()),
                )
            })?;
            if !p.media_types.contains(&r) {
                p.media_types.push(r);
            }
        }
    }
    if let Some(dir) = n.string("dir")? {
        p.dir = nonempty_dir(&dir, "a2a.input.dir")?;
    }
    if let Some(v) = n.raw("max_bytes") {
        p.max_bytes = units::bytes(v).map_err(|why| invalid(&join(n.path, "max_bytes"), why))?;
    }
    Ok(p)
}

/// Whether one directory is the other or beneath it.
fn overlap(a: &str, b: &str) -> bool {
    let under = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
    under(a, b) || under(b, a)
}

/// The output directories with the keys that name them.
fn output_keys(o: &OutputFiles) -> Vec<(&'static str, &str)> {
    let mut keys = vec![("a2a.output.dir", o.dir.as_str())];
    keys.extend(o.data.as_deref().map(|d| ("a2a.output.data", d)));
    keys.extend(o.links.as_deref().map(|d| ("a2a.output.links", d)));
    keys
}

fn output(n: &Node<'_>) -> R<OutputFiles> {
    let dir = match n.string("dir")? {
        Some(d) => nonempty_dir(&d, "a2a.output.dir")?,
        None => return Err(invalid("a2a.output.dir", "missing required field 'dir'")),
    };
    let max_bytes = match n.raw("max_bytes") {
        Some(v) => units::bytes(v).map_err(|why| invalid(&join(n.path, "max_bytes"), why))?,
        None => DEFAULT_OUTPUT_MAX_BYTES,
    };
    if max_bytes > MAX_OUTPUT_BYTES {
        return Err(invalid(
            "a2a.output.max_bytes",
            format!("must be at most {MAX_OUTPUT_BYTES} (640Ki: what one answer carries; export larger files with exports.files)"),
        ));
    }
    let data = match n.string("data")? {
        Some(d) => Some(nonempty_dir(&d, "a2a.output.data")?),
        None => None,
    };
    let links = match n.string("links")? {
        Some(d) => Some(nonempty_dir(&d, "a2a.output.links")?),
        None => None,
    };
    let o = OutputFiles {
        dir,
        max_bytes,
        data,
        links,
    };
    // Each file is collected once, as one kind.
    let keys = output_keys(&o);
    for (i, (key, dir)) in keys.iter().enumerate() {
        if let Some((other, _)) = keys[..i].iter().find(|(_, d)| overlap(dir, d)) {
            return Err(invalid(key, format!("overlaps {other}")));
        }
    }
    Ok(o)
}

/// A directory beneath the workdir, not the workdir itself.
fn nonempty_dir(raw: &str, key: &str) -> Result<String, Diagnostic> {
    match relative_path(raw) {
        Ok(d) if d.is_empty() => Err(invalid(
            key,
            "must name a directory beneath the workdir, not the workdir itself",
        )),
        Ok(d) => Ok(d),
        Err(why) => Err(invalid(key, why)),
    }
}

#[cfg(test)]
mod tests {
    use crate::manifest::model::{AnswerAs, TaskIo};
    use crate::manifest::{parse, Resolve};

    fn io(block: &str) -> Result<TaskIo, String> {
        let text = format!("name: x\nversion: 0.1.0\n{block}");
        parse(&text, Resolve::Nothing)
            .map(|l| {
                assert!(l.warnings.is_empty(), "{:?}", l.warnings);
                l.manifest.a2a
            })
            .map_err(|d| d.message)
    }

    #[test]
    fn the_block_reads_with_its_defaults_and_refuses_what_is_wrong() {
        let d = io("").unwrap();
        assert_eq!(d, TaskIo::default());
        assert!(d.input.text && !d.input.file && !d.input.data && d.output.is_none());
        let t = io("a2a:\n  input:\n    parts: [text, file, data]\n    media_types: [text/CSV, 'image/*']\n    dir: ./inbox/\n    max_bytes: 64Ki\n  output:\n    dir: out/files\n  answer: message\n").unwrap();
        assert_eq!(t.input.media_types, ["text/csv", "image/*"]);
        assert_eq!((t.input.dir.as_str(), t.input.max_bytes), ("inbox", 64 << 10));
        assert_eq!(
            t.output.as_ref().map(|o| (o.dir.as_str(), o.max_bytes)),
            Some(("out/files", 512 << 10))
        );
        assert_eq!(t.answer, AnswerAs::Message);
        let o =
            io("a2a:\n  output:\n    dir: out/files\n    data: out/data/\n    links: ./out/links\n").unwrap();
        let o = o.output.unwrap();
        assert_eq!(
            o.dirs().collect::<Vec<_>>(),
            ["out/files", "out/data", "out/links"]
        );
        let p = io("a2a:\n  push:\n    allow: [http://127.0.0.1:9000, hooks.example.com]\n").unwrap();
        assert_eq!(p.push_allow.len(), 2);
        assert_eq!(p.push_allow[0].port, Some(9000));
        assert_eq!(
            io("a2a:\n  input:\n    parts: [file]\n")
                .unwrap()
                .input
                .media_types,
            ["*/*"]
        );
        for (bad, says) in [
            (
                "a2a:\n  input:\n    parts: [video]\n",
                "unknown part kind 'video'",
            ),
            ("a2a:\n  input:\n    parts: []\n", "must list at least one"),
            (
                "a2a:\n  input:\n    media_types: [text/csv]\n",
                "is for file parts",
            ),
            (
                "a2a:\n  input:\n    parts: [file]\n    media_types: ['text/csv; q=1']\n",
                "is not a media type",
            ),
            ("a2a:\n  input:\n    dir: ../up\n", "'..'"),
            ("a2a:\n  input:\n    dir: .\n", "not the workdir itself"),
            ("a2a:\n  output: {}\n", "missing required field 'dir'"),
            (
                "a2a:\n  output:\n    dir: o\n    max_bytes: 641Ki\n",
                "must be at most 655360",
            ),
            (
                "a2a:\n  input:\n    parts: [file]\n  output:\n    dir: in/x\n",
                "overlaps a2a.input.dir",
            ),
            (
                "a2a:\n  output:\n    dir: out\n    data: out/data\n",
                "'a2a.output.data': overlaps a2a.output.dir",
            ),
            (
                "a2a:\n  output:\n    dir: o\n    data: d\n    links: d\n",
                "'a2a.output.links': overlaps a2a.output.data",
            ),
            (
                "a2a:\n  input:\n    parts: [data]\n  output:\n    dir: o\n    links: in\n",
                "'a2a.output.links': overlaps a2a.input.dir",
            ),
            ("a2a:\n  output:\n    dir: o\n    data: ../d\n", "a2a.output.data"),
            ("a2a:\n  answer: maybe\n", "expected task or message"),
            (
                "a2a:\n  push:\n    allow: []\n",
                "must list at least one destination",
            ),
            ("a2a:\n  push:\n    allow: [ftp://h]\n", "a2a.push.allow[0]"),
        ] {
            let e = io(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
