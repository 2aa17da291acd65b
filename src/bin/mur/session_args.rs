//! `mur ps`, `stop`, `cancel`, `watch`, `token` and `records`' arguments: the operator's
//! commands on sessions, live or recorded (split from `mur.rs` by size; parsing only).

use super::{help_for, unknown, Command};
use murmur::cli::{no_value, Arg, ArgError, Args};

/// What a command line of these commands came to: its words and the boolean flags set, or
/// (`Err`) the help it asked for.
type Parsed = Result<(Vec<String>, Vec<String>), Command>;

/// The words and flags of one of these commands: `-h`/`--help`, the boolean `flags` it
/// takes, and its words in order.
fn words_and_flags(command: &'static str, args: &mut Args, flags: &[&str]) -> Result<Parsed, ArgError> {
    let (mut words, mut set) = (Vec::new(), Vec::new());
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) => words.push(w),
            Arg::Flag { name, inline } if name == "-h" || name == "--help" => {
                return help_for(command, &name, inline).map(Err)
            }
            Arg::Flag { name, inline } if flags.contains(&name.as_str()) => {
                no_value(&name, inline)?;
                set.push(name);
            }
            other => return Err(unknown(other)),
        }
    }
    Ok(Ok((words, set)))
}

/// `mur ps [--json]`.
pub(crate) fn parse_ps(args: &mut Args) -> Result<Command, ArgError> {
    let (words, set) = match words_and_flags("ps", args, &["--json"])? {
        Ok(v) => v,
        Err(help) => return Ok(help),
    };
    if let Some(w) = words.into_iter().next() {
        return Err(ArgError::Unknown(w));
    }
    Ok(Command::Ps {
        json: !set.is_empty(),
    })
}

/// `mur stop SESSION | --all`.
pub(crate) fn parse_stop(args: &mut Args) -> Result<Command, ArgError> {
    let (words, set) = match words_and_flags("stop", args, &["--all"])? {
        Ok(v) => v,
        Err(help) => return Ok(help),
    };
    let mut words = words.into_iter();
    let o = murmur::commands::stop::StopOptions {
        session: words.next(),
        all: !set.is_empty(),
    };
    if let Some(w) = words.next() {
        return Err(ArgError::Unknown(w));
    }
    if o.session.is_some() == o.all {
        return Err(ArgError::MissingValue("stop SESSION (or --all, alone)".into()));
    }
    Ok(Command::Stop(o))
}

/// `mur cancel SESSION TASK`.
pub(crate) fn parse_cancel(args: &mut Args) -> Result<Command, ArgError> {
    let (words, _) = match words_and_flags("cancel", args, &[])? {
        Ok(v) => v,
        Err(help) => return Ok(help),
    };
    let mut words = words.into_iter();
    let (Some(session), Some(task)) = (words.next(), words.next()) else {
        return Err(ArgError::MissingValue("cancel SESSION TASK".into()));
    };
    if let Some(w) = words.next() {
        return Err(ArgError::Unknown(w));
    }
    Ok(Command::Cancel { session, task })
}

/// `mur watch SESSION`.
pub(crate) fn parse_watch(args: &mut Args) -> Result<Command, ArgError> {
    let (words, _) = match words_and_flags("watch", args, &[])? {
        Ok(v) => v,
        Err(help) => return Ok(help),
    };
    let mut words = words.into_iter();
    let session = words
        .next()
        .ok_or_else(|| ArgError::MissingValue("watch SESSION".into()))?;
    if let Some(w) = words.next() {
        return Err(ArgError::Unknown(w));
    }
    Ok(Command::Watch { session })
}

/// `mur token --session ID [NAME]`.
pub(crate) fn parse_token(args: &mut Args) -> Result<Command, ArgError> {
    let (mut session, mut name) = (None, None);
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if name.is_none() => name = Some(w),
            Arg::Flag { name: flag, inline } => match flag.as_str() {
                "--session" => session = Some(args.value(&flag, inline)?),
                "-h" | "--help" => return help_for("token", &flag, inline),
                _ => return Err(ArgError::Unknown(flag)),
            },
            other => return Err(unknown(other)),
        }
    }
    let session = session.ok_or_else(|| ArgError::MissingValue("token --session ID".into()))?;
    Ok(Command::Token { session, name })
}

/// `mur records prune [--dry-run] [--json]`.
pub(crate) fn parse_records(args: &mut Args) -> Result<Command, ArgError> {
    match args.next_arg() {
        Some(Arg::Word(w)) if w == "prune" => {}
        Some(Arg::Flag { name, inline }) if name == "-h" || name == "--help" => {
            return help_for("records", &name, inline)
        }
        Some(other) => return Err(unknown(other)),
        None => return Err(ArgError::MissingValue("records prune".into())),
    }
    let mut o = murmur::commands::records::PruneOptions::default();
    while let Some(arg) = args.next_arg() {
        let Arg::Flag { name, inline } = arg else {
            return Err(unknown(arg));
        };
        match name.as_str() {
            "--dry-run" => o.dry_run = true,
            "--json" => o.json = true,
            "-h" | "--help" => return help_for("records", &name, inline),
            _ => return Err(ArgError::Unknown(name)),
        }
        no_value(&name, inline)?;
    }
    Ok(Command::RecordsPrune(o))
}
