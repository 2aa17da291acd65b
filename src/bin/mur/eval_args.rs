//! `mur eval show|diff|run`'s arguments (split from `mur.rs` by size; parsing only).

use super::{help_for, manifest_file, unknown, Command};
use murmur::cli::{no_value, Arg, ArgError, Args};
use std::path::PathBuf;

/// `mur eval show [--json] FILE|DIR|SESSION | --session ID`, `mur eval show --html OUT
/// SOURCE...`, `mur eval diff [--json] A B`.
pub(crate) fn parse_eval(args: &mut Args) -> Result<Command, ArgError> {
    use murmur::commands::eval::Source;
    let verb = match args.next_arg() {
        Some(Arg::Word(w)) if w == "run" => return parse_eval_run(args),
        Some(Arg::Word(w)) if w == "show" || w == "diff" => w,
        Some(Arg::Flag { name, inline }) if name == "-h" || name == "--help" => {
            return help_for("eval", &name, inline)
        }
        Some(other) => return Err(unknown(other)),
        None => return Err(ArgError::MissingValue("eval show|diff".into())),
    };
    let (mut words, mut json, mut html) = (Vec::new(), false, None::<PathBuf>);
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) => words.push(Source::from_word(&w)),
            Arg::Flag { name, inline } => match name.as_str() {
                "--session" => words.push(Source::Session(args.value(&name, inline)?)),
                "--json" => {
                    no_value(&name, inline)?;
                    json = true;
                }
                "--html" if verb == "show" => html = Some(args.value(&name, inline)?.into()),
                "-h" | "--help" => return help_for("eval", &name, inline),
                _ => return Err(ArgError::Unknown(name)),
            },
        }
    }
    if let Some(out) = html {
        return match (words.is_empty(), json) {
            (_, true) => Err(ArgError::Conflict("--html", "--json")),
            (true, _) => Err(ArgError::MissingValue("eval show --html OUT SOURCE...".into())),
            (false, false) => Ok(Command::EvalPage { sources: words, out }),
        };
    }
    let mut words = words.into_iter();
    match (verb.as_str(), words.next(), words.next(), words.next()) {
        ("show", Some(source), None, _) => Ok(Command::EvalShow { source, json }),
        ("diff", Some(a), Some(b), None) => Ok(Command::EvalDiff { a, b, json }),
        ("show", None, ..) => Err(ArgError::MissingValue("eval show FILE|--session ID".into())),
        ("diff", _, None, _) => Err(ArgError::MissingValue("eval diff A B".into())),
        (_, _, _, Some(_)) | ("show", _, Some(_), _) => Err(ArgError::Unknown("a third eval file".into())),
        _ => Err(ArgError::MissingValue("eval show|diff".into())),
    }
}

/// `mur eval run [MANIFEST] --dataset FILE [--variant MANIFEST2] [--repeat K] [--jobs N]
/// [--session-timeout SECS] [--json] [--junit FILE]`.
fn parse_eval_run(args: &mut Args) -> Result<Command, ArgError> {
    use murmur::commands::eval_run::{RunOptions, SESSION_TIMEOUT};
    let mut o = RunOptions {
        repeat: 1,
        jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        session_timeout_secs: SESSION_TIMEOUT,
        ..RunOptions::default()
    };
    let (mut manifest, mut dataset) = (None, None);
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if manifest.is_none() => manifest = Some(PathBuf::from(w)),
            Arg::Flag { name, inline } => match name.as_str() {
                "--manifest" => manifest = Some(args.value(&name, inline)?.into()),
                "--dataset" => dataset = Some(PathBuf::from(args.value(&name, inline)?)),
                "--variant" => o.variant = Some(args.value(&name, inline)?.into()),
                "--registry-path" => o.registry = Some(args.value(&name, inline)?.into()),
                "--repeat" => o.repeat = args.number::<u32>(&name, inline)?.clamp(1, 1000),
                "--jobs" => o.jobs = args.number::<usize>(&name, inline)?.clamp(1, 64),
                "--session-timeout" => {
                    o.session_timeout_secs = args.number::<u64>(&name, inline)?.clamp(1, 86_400)
                }
                "--junit" => o.junit = Some(args.value(&name, inline)?.into()),
                "--json" => {
                    no_value(&name, inline)?;
                    o.json = true;
                }
                "-h" | "--help" => return help_for("eval", &name, inline),
                _ => return Err(ArgError::Unknown(name)),
            },
            other => return Err(unknown(other)),
        }
    }
    o.manifest = manifest_file(manifest.unwrap_or_else(|| PathBuf::from("murmur.yaml")));
    o.variant = o.variant.map(manifest_file);
    o.dataset = dataset.ok_or_else(|| ArgError::MissingValue("eval run --dataset FILE".into()))?;
    Ok(Command::EvalRun(o))
}
