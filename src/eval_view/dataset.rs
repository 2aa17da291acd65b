//! A dataset for `mur eval run`: JSONL, one case per line:
//!
//! ```json
//! {"case_id": "c1", "task_path": "tasks/c1.md", "start": "starts/c1",
//!  "check": {"command": "test -s out/result.txt", "timeout_secs": 60}}
//! ```
//!
//! `task_path` (required) and `start` (a directory copied in as the initial workdir) are
//! relative to the dataset's directory; `check` (a command line or `{command, timeout_secs}`)
//! runs in the finished workdir and passes on exit 0. A command line is split into a program
//! and its arguments by POSIX shell quoting ([`crate::agent::words`]: blanks, single and
//! double quotes, backslashes; nothing expanded, no shell run). Parsed strictly: a path that
//! is absolute or holds `..`, an unknown key, a duplicate `case_id`, a bad type or a command
//! line that does not split (an unterminated quote) refuses the dataset with the line's
//! number.

use serde_json::Value;

/// The most cases one dataset holds.
pub const MAX_CASES: usize = 10_000;
/// The longest `case_id`.
pub const MAX_CASE_ID: usize = 100;
/// The longest path or command line, bytes.
const MAX_TEXT: usize = 4096;
/// A check's default and largest deadline, seconds.
pub const CHECK_TIMEOUT: u64 = 60;
const MAX_CHECK_TIMEOUT: u64 = 3600;

/// One case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub case_id: String,
    /// Relative to the dataset's directory, normalised (`a/b`).
    pub task_path: String,
    pub start: Option<String>,
    pub check: Option<Check>,
}

/// A case's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The program (a name of the capsule's `shell.allow`) and its arguments.
    pub argv: Vec<String>,
    pub timeout_secs: u64,
}

/// `p` as a normalised relative path, or why not.
pub fn relative(p: &str) -> Result<String, String> {
    if p.is_empty() || p.len() > MAX_TEXT || p.contains('\0') {
        return Err("is empty, too long or holds a NUL".into());
    }
    if p.starts_with('/') {
        return Err("is absolute".into());
    }
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    if parts.contains(&"..") {
        return Err("climbs out with '..'".into());
    }
    if parts.is_empty() {
        return Err("names the dataset's directory itself".into());
    }
    Ok(parts.join("/"))
}

fn text<'a>(o: &'a serde_json::Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("'{key}' is not a string")),
    }
}

fn path(o: &serde_json::Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    text(o, key)?
        .map(|p| relative(p).map_err(|why| format!("'{key}' {why}")))
        .transpose()
}

fn check(v: &Value) -> Result<Check, String> {
    let (command, timeout_secs) = match v {
        Value::String(s) => (s.as_str(), CHECK_TIMEOUT),
        Value::Object(o) => {
            if let Some(k) = o
                .keys()
                .find(|k| !matches!(k.as_str(), "command" | "timeout_secs"))
            {
                return Err(format!("'check.{}' is not a key of a check", super::clean(k, 64)));
            }
            let command = text(o, "command")?.ok_or("'check.command' is missing")?;
            let timeout = match o.get("timeout_secs") {
                None => CHECK_TIMEOUT,
                Some(t) => t
                    .as_u64()
                    .filter(|t| (1..=MAX_CHECK_TIMEOUT).contains(t))
                    .ok_or(format!(
                        "'check.timeout_secs' is not a whole number from 1 to {MAX_CHECK_TIMEOUT}"
                    ))?,
            };
            (command, timeout)
        }
        _ => return Err("'check' is not a command line or {command, timeout_secs}".into()),
    };
    if command.len() > MAX_TEXT {
        return Err("'check.command' is too long".into());
    }
    let argv = crate::agent::words::split(command)
        .map_err(|why| format!("'check.command' does not split into words: {why}"))?;
    if argv.is_empty() {
        return Err("'check.command' is empty".into());
    }
    Ok(Check { argv, timeout_secs })
}

/// One line.
pub fn parse_case(bytes: &[u8]) -> Result<Case, String> {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(bytes) else {
        return Err("not a JSON object".into());
    };
    if let Some(k) = o
        .keys()
        .find(|k| !matches!(k.as_str(), "case_id" | "task_path" | "start" | "check"))
    {
        return Err(format!("'{}' is not a key of a case", super::clean(k, 64)));
    }
    let case_id = text(&o, "case_id")?.ok_or("'case_id' is missing")?;
    let id_ok = !case_id.is_empty()
        && case_id.len() <= MAX_CASE_ID
        && case_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !case_id.starts_with('.');
    if !id_ok {
        return Err(format!(
            "'case_id' is not 1-{MAX_CASE_ID} of A-Z, a-z, 0-9, '-', '_' and '.' (not first)"
        ));
    }
    Ok(Case {
        case_id: case_id.to_string(),
        task_path: path(&o, "task_path")?.ok_or("'task_path' is missing")?,
        start: path(&o, "start")?,
        check: o.get("check").filter(|v| !v.is_null()).map(check).transpose()?,
    })
}

/// A whole dataset: its cases, or the first refused line's number and why.
pub fn parse(bytes: &[u8]) -> Result<Vec<Case>, (u64, String)> {
    let mut cases: Vec<Case> = Vec::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        let n = i as u64 + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let case = parse_case(line).map_err(|why| (n, why))?;
        if cases.iter().any(|c| c.case_id == case.case_id) {
            return Err((n, format!("case_id '{}' is used twice", case.case_id)));
        }
        if cases.len() == MAX_CASES {
            return Err((n, format!("more than {MAX_CASES} cases")));
        }
        cases.push(case);
    }
    if cases.is_empty() {
        return Err((0, "the dataset holds no case".into()));
    }
    Ok(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_parse_with_their_paths_normalised_and_their_checks_split() {
        let d = parse(
            br#"{"case_id":"c1","task_path":"./tasks//c1.md","start":"starts/c1","check":"test -s out/result.txt"}

{"case_id":"c2","task_path":"tasks/c2.md","check":{"command":"ls out","timeout_secs":5}}
"#,
        )
        .unwrap();
        assert_eq!(d[0].task_path, "tasks/c1.md");
        assert_eq!(d[0].start.as_deref(), Some("starts/c1"));
        assert_eq!(
            d[0].check,
            Some(Check {
                argv: vec!["test".into(), "-s".into(), "out/result.txt".into()],
                timeout_secs: 60
            })
        );
        assert_eq!(d[1].check.as_ref().unwrap().timeout_secs, 5);
        assert_eq!(d[1].start, None);
    }

    #[test]
    fn a_check_keeps_its_quoted_words() {
        let argv = |command: &str| {
            let line = serde_json::json!({"case_id": "c", "task_path": "t", "check": command});
            parse_case(line.to_string().as_bytes()).map(|c| c.check.unwrap().argv)
        };
        assert_eq!(
            argv(r#"grep -q "DONE. The" out/x"#).unwrap(),
            ["grep", "-q", "DONE. The", "out/x"]
        );
        assert_eq!(
            argv(r#"test -f 'a b'\ c "$HOME""#).unwrap(),
            ["test", "-f", "a b c", "$HOME"]
        );
        assert_eq!(
            argv(r#"grep -q "DONE out/x"#),
            Err("'check.command' does not split into words: unterminated double quote".into())
        );
        assert_eq!(
            argv("grep -q 'DONE out/x"),
            Err("'check.command' does not split into words: unterminated single quote".into())
        );
        // A backslash keeps the next character, a backslash among them.
        assert_eq!(argv(r"grep x\\\\").unwrap(), ["grep", r"x\\"]);
        assert_eq!(
            argv(r"grep x\"),
            Err("'check.command' does not split into words: a trailing backslash escapes nothing".into())
        );
    }

    #[test]
    fn a_bad_line_refuses_the_dataset_naming_it() {
        for (text, want) in [
            (
                &br#"{"case_id":"c","task_path":"../x"}"#[..],
                (1, "'task_path' climbs out with '..'"),
            ),
            (
                br#"{"case_id":"c","task_path":"/etc/passwd"}"#,
                (1, "'task_path' is absolute"),
            ),
            (
                br#"{"case_id":"c","task_path":"t","start":"a/../../b"}"#,
                (1, "'start' climbs out with '..'"),
            ),
            (
                br#"{"case_id":"c","task_path":"t","extra":1}"#,
                (1, "'extra' is not a key of a case"),
            ),
            (
                br#"{"case_id":"../c","task_path":"t"}"#,
                (
                    1,
                    "'case_id' is not 1-100 of A-Z, a-z, 0-9, '-', '_' and '.' (not first)",
                ),
            ),
            (
                b"{\"case_id\":\"c\",\"task_path\":\"t\"}\n{\"case_id\":\"c\",\"task_path\":\"u\"}",
                (2, "case_id 'c' is used twice"),
            ),
            (
                br#"{"case_id":"c","task_path":"t","check":{"command":"x","timeout_secs":0}}"#,
                (1, "'check.timeout_secs' is not a whole number from 1 to 3600"),
            ),
            (
                br#"{"case_id":"c","task_path":"t","check":"   "}"#,
                (1, "'check.command' is empty"),
            ),
            (b"\n\n", (0, "the dataset holds no case")),
        ] {
            assert_eq!(
                parse(text),
                Err((want.0, want.1.to_string())),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }
}
