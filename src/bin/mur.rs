//! `mur`: argument parsing and dispatch to the subcommands, nothing else.

use murmur::cli::{no_value, Arg, ArgError, Args};
use murmur::commands::{self, help, render};
use murmur::diag::Diagnostic;
use murmur::registry::{self, ArtifactName};
use std::path::PathBuf;
use std::process::ExitCode;

// Beside this file, not under src/bin/ itself (where cargo would take it for a binary).
#[path = "mur/eval_args.rs"]
mod eval_args;
#[path = "mur/session_args.rs"]
mod session_args;

const BIN: &str = "mur";

enum Command {
    /// `mur` with no command: the usage, on stderr, and exit 2.
    Usage,
    /// `mur --help` (`None`) or one command's help.
    Help(Option<&'static str>),
    /// `mur --version` (the one line) or `mur version` (with the build's facts).
    Version {
        facts: bool,
        json: bool,
    },
    Build {
        dir: PathBuf,
        out: Option<PathBuf>,
        json: bool,
    },
    Publish {
        file: PathBuf,
        registry: Option<PathBuf>,
        scope: Option<String>,
        json: bool,
    },
    Inspect {
        target: String,
        registry: Option<PathBuf>,
        json: bool,
    },
    #[cfg(feature = "runtime")]
    Run(murmur::runtime::RunOptions),
    Exec(murmur::commands::exec::ExecOptions),
    Doctor(murmur::commands::doctor::DoctorOptions),
    Lock(murmur::commands::lock::LockOptions),
    Push(murmur::commands::oci::PushOptions),
    Pull(murmur::commands::oci::PullOptions),
    Install(murmur::commands::install::InstallOptions),
    Trace(murmur::commands::trace::TraceOptions),
    New(murmur::commands::new::NewOptions),
    Token {
        session: String,
        name: Option<String>,
    },
    RecordsPrune(murmur::commands::records::PruneOptions),
    Ps {
        json: bool,
    },
    Stop(murmur::commands::stop::StopOptions),
    Cancel {
        session: String,
        task: String,
    },
    Watch {
        session: String,
    },
    EvalShow {
        source: murmur::commands::eval::Source,
        json: bool,
    },
    EvalDiff {
        a: murmur::commands::eval::Source,
        b: murmur::commands::eval::Source,
        json: bool,
    },
    /// `mur eval show --html OUT SOURCE...`: each source a variant.
    EvalPage {
        sources: Vec<murmur::commands::eval::Source>,
        out: PathBuf,
    },
    EvalRun(murmur::commands::eval_run::RunOptions),
    /// Hidden: the host probe's child (see `containment::probe`).
    /// The host probe child, up to a class (all of them when none is named).
    Probe(murmur::containment::class::Class),
}

fn parse_exec(args: &mut Args) -> Result<Command, ArgError> {
    let mut o = murmur::commands::exec::ExecOptions::default();
    while let Some(arg) = args.next_arg() {
        let Arg::Flag { name, inline } = arg else {
            return Err(unknown(arg));
        };
        match name.as_str() {
            "--" => {
                o.command = args.rest();
                break;
            }
            "--manifest" => o.manifest = Some(args.value(&name, inline)?.into()),
            "--workdir" => o.workdir = Some(args.value(&name, inline)?.into()),
            "--home" => o.home = Some(args.value(&name, inline)?.into()),
            "--containment" => {
                o.containment = Some(class_value(&name, args.value(&name, inline)?)?);
            }
            "-h" | "--help" => return help_for("exec", &name, inline),
            _ => return Err(ArgError::Unknown(name)),
        }
    }
    if o.command.is_empty() {
        return Err(ArgError::MissingValue("exec -- CMD".into()));
    }
    Ok(Command::Exec(o))
}

#[cfg(feature = "runtime")]
fn parse_run(args: &mut Args) -> Result<Command, ArgError> {
    let mut o = murmur::runtime::RunOptions::default();
    while let Some(arg) = args.next_arg() {
        let Arg::Flag { name, inline } = arg else {
            return Err(unknown(arg));
        };
        match name.as_str() {
            "--manifest" => o.manifest = Some(args.value(&name, inline)?.into()),
            "--capsule" => o.capsule = Some(args.value(&name, inline)?),
            "--capsule-version" => o.capsule_version = Some(args.value(&name, inline)?),
            "--registry-path" => o.registry = Some(args.value(&name, inline)?.into()),
            "--workdir" => o.workdir = Some(args.value(&name, inline)?.into()),
            "--task" => o.task = Some(args.value(&name, inline)?),
            "--containment" => {
                o.containment = Some(class_value(&name, args.value(&name, inline)?)?);
            }
            "--json" => {
                no_value(&name, inline)?;
                o.json = true;
            }
            "-v" | "--verbose" => {
                no_value(&name, inline)?;
                o.verbose = true;
            }
            "--explain-scope" => {
                no_value(&name, inline)?;
                o.explain = true;
            }
            "--locked" => {
                no_value(&name, inline)?;
                o.locked = true;
            }
            "-h" | "--help" => return help_for("run", &name, inline),
            _ => return Err(ArgError::Unknown(name)),
        }
    }
    match (&o.capsule, &o.capsule_version, &o.manifest) {
        (Some(_), Some(_), None) | (None, None, _) => Ok(Command::Run(o)),
        (Some(_), Some(_), Some(_)) => Err(ArgError::Conflict("--capsule", "--manifest")),
        (Some(_), None, _) => Err(ArgError::MissingValue("--capsule-version".into())),
        (None, Some(_), _) => Err(ArgError::MissingValue("--capsule".into())),
    }
}

/// `-h`/`--help` after a command: that command's help.
fn help_for(command: &'static str, name: &str, inline: Option<String>) -> Result<Command, ArgError> {
    no_value(name, inline)?;
    Ok(Command::Help(Some(command)))
}

fn parse_trace(args: &mut Args) -> Result<Command, ArgError> {
    let mut o = murmur::commands::trace::TraceOptions::default();
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if o.path.is_none() => o.path = Some(w.into()),
            Arg::Flag { name, inline } => match name.as_str() {
                "--session" => o.session = Some(args.value(&name, inline)?),
                "--json" => {
                    no_value(&name, inline)?;
                    o.json = true;
                }
                "-f" | "--follow" => {
                    no_value(&name, inline)?;
                    o.follow = true;
                }
                "--html" => o.html = Some(args.value(&name, inline)?.into()),
                "-h" | "--help" => return help_for("trace", &name, inline),
                _ => return Err(ArgError::Unknown(name)),
            },
            other => return Err(unknown(other)),
        }
    }
    match (&o.path, &o.session) {
        (Some(_), Some(_)) => Err(ArgError::Conflict("PATH", "--session")),
        (None, None) => Err(ArgError::MissingValue("trace PATH or --session ID".into())),
        _ if o.html.is_some() && o.follow => Err(ArgError::Conflict("--html", "--follow")),
        _ if o.html.is_some() && o.json => Err(ArgError::Conflict("--html", "--json")),
        _ => Ok(Command::Trace(o)),
    }
}

/// `mur lock [--manifest PATH] [--registry-path DIR] [--update NAME] [--json]`.
fn parse_lock(args: &mut Args) -> Result<Command, ArgError> {
    let mut o = murmur::commands::lock::LockOptions::default();
    while let Some(arg) = args.next_arg() {
        let Arg::Flag { name, inline } = arg else {
            return Err(unknown(arg));
        };
        match name.as_str() {
            "--manifest" => o.manifest = Some(args.value(&name, inline)?.into()),
            "--registry-path" => o.registry = Some(args.value(&name, inline)?.into()),
            "--update" => o.update = Some(args.value(&name, inline)?),
            "--accept-changed" => o.accept_changed.push(args.value(&name, inline)?),
            "--json" => {
                no_value(&name, inline)?;
                o.json = true;
            }
            "-h" | "--help" => return help_for("lock", &name, inline),
            _ => return Err(ArgError::Unknown(name)),
        }
    }
    Ok(Command::Lock(o))
}

/// `mur push NAME@VERSION oci://HOST/REPO[:TAG]`, `mur pull oci://…`: positional words,
/// `--registry-path`, `--json`.
fn parse_oci(command: &'static str, args: &mut Args) -> Result<Command, ArgError> {
    let (mut words, mut registry, mut json) = (Vec::new(), None, false);
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if words.len() < 2 => words.push(w),
            Arg::Flag { name, inline } => match name.as_str() {
                "--registry-path" => registry = Some(args.value(&name, inline)?.into()),
                "--json" => {
                    no_value(&name, inline)?;
                    json = true;
                }
                "-h" | "--help" => return help_for(command, &name, inline),
                _ => return Err(ArgError::Unknown(name)),
            },
            other => return Err(unknown(other)),
        }
    }
    let mut words = words.into_iter();
    if command == "push" {
        let (Some(artifact), Some(to)) = (words.next(), words.next()) else {
            return Err(ArgError::MissingValue(
                "push NAME@VERSION oci://HOST/REPO[:TAG]".into(),
            ));
        };
        return Ok(Command::Push(murmur::commands::oci::PushOptions {
            artifact,
            to,
            registry,
            json,
        }));
    }
    let from = words
        .next()
        .ok_or_else(|| ArgError::MissingValue("pull oci://HOST/REPO:TAG".into()))?;
    if let Some(extra) = words.next() {
        return Err(ArgError::Unknown(extra));
    }
    Ok(Command::Pull(murmur::commands::oci::PullOptions {
        from,
        registry,
        json,
    }))
}

/// `mur install [--manifest PATH] [--registry-path DIR] [--locked] [--json]`.
fn parse_install(args: &mut Args) -> Result<Command, ArgError> {
    let mut o = murmur::commands::install::InstallOptions::default();
    while let Some(arg) = args.next_arg() {
        let Arg::Flag { name, inline } = arg else {
            return Err(unknown(arg));
        };
        match name.as_str() {
            "--manifest" => o.manifest = Some(manifest_file(args.value(&name, inline)?.into())),
            "--registry-path" => o.registry = Some(args.value(&name, inline)?.into()),
            "--locked" | "--json" => {
                no_value(&name, inline)?;
                if name == "--locked" {
                    o.locked = true;
                } else {
                    o.json = true;
                }
            }
            "-h" | "--help" => return help_for("install", &name, inline),
            _ => return Err(ArgError::Unknown(name)),
        }
    }
    Ok(Command::Install(o))
}

/// `mur new NAME [--wasm|--agent] [DIR]`.
fn parse_new(args: &mut Args) -> Result<Command, ArgError> {
    use murmur::commands::new::{Kind, NewOptions};
    let (mut words, mut kind) = (Vec::new(), None);
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if words.len() < 2 => words.push(w),
            Arg::Flag { name, inline } => match name.as_str() {
                "--wasm" | "--agent" => {
                    no_value(&name, inline)?;
                    let asked = if name == "--wasm" { Kind::Wasm } else { Kind::Agent };
                    if kind.is_some_and(|k| k != asked) {
                        return Err(ArgError::Conflict("--wasm", "--agent"));
                    }
                    kind = Some(asked);
                }
                "-h" | "--help" => return help_for("new", &name, inline),
                _ => return Err(ArgError::Unknown(name)),
            },
            other => return Err(unknown(other)),
        }
    }
    let mut words = words.into_iter();
    let name = words
        .next()
        .ok_or_else(|| ArgError::MissingValue("new NAME".into()))?;
    Ok(Command::New(NewOptions {
        name,
        kind: kind.unwrap_or_default(),
        dir: words.next().map(PathBuf::from),
    }))
}

/// A manifest named by its file or its capsule directory.
fn manifest_file(p: PathBuf) -> PathBuf {
    if p.is_dir() {
        p.join("murmur.yaml")
    } else {
        p
    }
}

/// A containment class named on the command line.
fn class_value(flag: &str, v: String) -> Result<murmur::containment::class::Class, ArgError> {
    murmur::containment::class::Class::parse(&v).ok_or(ArgError::BadValue {
        flag: flag.to_string(),
        value: v,
        why: "advisory, scoped or sealed",
    })
}

fn unknown(arg: Arg) -> ArgError {
    match arg {
        Arg::Flag {
            name,
            inline: Some(v),
        } => ArgError::Unknown(format!("{name}={v}")),
        Arg::Flag { name, inline: None } | Arg::Word(name) => ArgError::Unknown(name),
    }
}

/// Options shared by the registry subcommands, and at most one positional word.
#[derive(Default)]
struct Opts {
    word: Option<String>,
    out: Option<PathBuf>,
    registry: Option<PathBuf>,
    scope: Option<String>,
    manifest: Option<PathBuf>,
    json: bool,
    help: bool,
}

fn opts(args: &mut Args, allowed: &[&str]) -> Result<Opts, ArgError> {
    let mut o = Opts::default();
    while let Some(arg) = args.next_arg() {
        match arg {
            Arg::Word(w) if o.word.is_none() => o.word = Some(w),
            Arg::Flag { name, inline } if name == "-h" || name == "--help" => {
                no_value(&name, inline)?;
                o.help = true;
            }
            Arg::Flag { name, inline } if allowed.contains(&name.as_str()) => match name.as_str() {
                "--json" => {
                    no_value(&name, inline)?;
                    o.json = true;
                }
                "-o" | "--output" => o.out = Some(args.value(&name, inline)?.into()),
                "--registry-path" => o.registry = Some(args.value(&name, inline)?.into()),
                "--scope" => o.scope = Some(args.value(&name, inline)?),
                "--manifest" => o.manifest = Some(args.value(&name, inline)?.into()),
                _ => return Err(ArgError::Unknown(name)),
            },
            other => return Err(unknown(other)),
        }
    }
    Ok(o)
}

fn parse(mut args: Args) -> Result<Command, ArgError> {
    let command = match args.next_arg() {
        None => return Ok(Command::Usage),
        Some(Arg::Word(w)) => w,
        Some(Arg::Flag { name, inline }) if name == "--help" || name == "-h" => {
            no_value(&name, inline)?;
            return Ok(Command::Help(None));
        }
        Some(Arg::Flag { name, inline }) if name == "--version" || name == "-V" => {
            no_value(&name, inline)?;
            return Ok(Command::Version {
                facts: false,
                json: false,
            });
        }
        Some(other) => return Err(unknown(other)),
    };
    let cmd = match command.as_str() {
        "help" => match args.next_arg() {
            None => Command::Help(None),
            Some(Arg::Word(w)) => match help::find(&w) {
                Some(h) => Command::Help(Some(h.name)),
                None => return Err(ArgError::Unknown(w)),
            },
            Some(Arg::Flag { name, inline }) if name == "-h" || name == "--help" => {
                return help_for("help", &name, inline)
            }
            Some(other) => return Err(unknown(other)),
        },
        "version" => {
            let o = opts(&mut args, &["--json"])?;
            if o.help {
                return Ok(Command::Help(Some("version")));
            }
            if let Some(w) = o.word {
                return Err(ArgError::Unknown(w));
            }
            Command::Version {
                facts: true,
                json: o.json,
            }
        }
        "build" => {
            let o = opts(&mut args, &["-o", "--output", "--json"])?;
            if o.help {
                return Ok(Command::Help(Some("build")));
            }
            if let Some(out) = &o.out {
                if !out.to_string_lossy().ends_with(".mur.zip") {
                    return Err(ArgError::BadValue {
                        flag: "-o".into(),
                        value: out.display().to_string(),
                        why: "a file name ending in .mur.zip",
                    });
                }
            }
            Command::Build {
                dir: o.word.map_or_else(|| PathBuf::from("."), PathBuf::from),
                out: o.out,
                json: o.json,
            }
        }
        "publish" => {
            let o = opts(&mut args, &["--registry-path", "--scope", "--json"])?;
            if o.help {
                return Ok(Command::Help(Some("publish")));
            }
            let file = o
                .word
                .ok_or_else(|| ArgError::MissingValue("publish FILE".into()))?;
            Command::Publish {
                file: file.into(),
                registry: o.registry,
                scope: o.scope,
                json: o.json,
            }
        }
        "inspect" => {
            let o = opts(&mut args, &["--registry-path", "--json"])?;
            if o.help {
                return Ok(Command::Help(Some("inspect")));
            }
            let target = o
                .word
                .ok_or_else(|| ArgError::MissingValue("inspect NAME@VERSION".into()))?;
            Command::Inspect {
                target,
                registry: o.registry,
                json: o.json,
            }
        }
        #[cfg(feature = "runtime")]
        "run" => parse_run(&mut args)?,
        "exec" => parse_exec(&mut args)?,
        "trace" => parse_trace(&mut args)?,
        "token" => session_args::parse_token(&mut args)?,
        "new" => parse_new(&mut args)?,
        "records" => session_args::parse_records(&mut args)?,
        "ps" => session_args::parse_ps(&mut args)?,
        "stop" => session_args::parse_stop(&mut args)?,
        "cancel" => session_args::parse_cancel(&mut args)?,
        "watch" => session_args::parse_watch(&mut args)?,
        "lock" => parse_lock(&mut args)?,
        "push" => parse_oci("push", &mut args)?,
        "pull" => parse_oci("pull", &mut args)?,
        "install" => parse_install(&mut args)?,
        "eval" => eval_args::parse_eval(&mut args)?,
        "doctor" => {
            let o = opts(&mut args, &["--manifest", "--registry-path", "--json"])?;
            if o.help {
                return Ok(Command::Help(Some("doctor")));
            }
            if let Some(w) = o.word {
                return Err(ArgError::Unknown(w));
            }
            Command::Doctor(murmur::commands::doctor::DoctorOptions {
                manifest: o.manifest,
                registry: o.registry,
                json: o.json,
            })
        }
        "__probe" => {
            let up_to = match args.next_arg() {
                None => murmur::containment::class::Class::Sealed,
                Some(Arg::Word(w)) => class_value("__probe", w)?,
                Some(other) => return Err(unknown(other)),
            };
            Command::Probe(up_to)
        }
        _ => return Err(ArgError::Unknown(command)),
    };
    if let Some(extra) = args.next_arg() {
        return Err(unknown(extra));
    }
    Ok(cmd)
}

fn warn_all(warnings: &[Diagnostic]) {
    for w in warnings {
        eprintln!("{w}");
    }
}

fn run(cmd: Command) -> Result<String, Diagnostic> {
    match cmd {
        Command::Help(None) => Ok(help::mur_text()),
        Command::Help(Some(name)) => Ok(help::find(name).map(help::text).unwrap_or_else(help::mur_text)),
        Command::Version { facts: false, .. } => Ok(format!("{BIN} {}\n", murmur::VERSION)),
        Command::Version { json, .. } => {
            Ok(commands::version::render(&commands::version::facts(), BIN, json))
        }
        Command::RecordsPrune(o) => commands::records::prune(&o),
        Command::Ps { json } => commands::ps::ps(json, murmur::clock::now_ms()),
        Command::Cancel { session, task } => commands::cancel::cancel(&session, &task),
        Command::EvalShow { source, json } => commands::eval::show(&source, json, &mut std::io::stderr()),
        Command::EvalDiff { a, b, json } => commands::eval::compare(&a, &b, json, &mut std::io::stderr()),
        Command::EvalPage { sources, out } => commands::eval::page(&sources, &out, &mut std::io::stderr()),
        Command::Build { dir, out, json } => {
            let built = commands::build(&dir, out.as_deref())?;
            warn_all(&built.loaded.warnings);
            warn_all(built.left_out_warning().as_slice());
            warn_all(&commands::delegation_check::warnings(
                &built.loaded.manifest,
                &registry::default_root(),
            ));
            Ok(render::built(&built, json))
        }
        Command::Publish {
            file,
            registry,
            scope,
            json,
        } => {
            let bytes = std::fs::read(&file).map_err(|e| {
                Diagnostic::new(
                    murmur::diag::code::IO_READ,
                    file.display().to_string(),
                    format!("cannot read {}: {e}", file.display()),
                )
            })?;
            let root = registry.unwrap_or_else(registry::default_root);
            let (loc, sha, loaded) = registry::publish(&root, &bytes, scope.as_deref())?;
            warn_all(&loaded.warnings);
            warn_all(&commands::delegation_check::warnings(&loaded.manifest, &root));
            let full = match &scope {
                Some(s) => format!("{s}/{}", loaded.manifest.name),
                None => loaded.manifest.name.clone(),
            };
            Ok(render::published(&full, &loaded.manifest, &loc, &sha, json))
        }
        #[cfg(feature = "runtime")]
        Command::Run(_) => unreachable!("dispatched in main"),
        Command::Usage
        | Command::Exec(_)
        | Command::Probe(_)
        | Command::Trace(_)
        | Command::Stop(_)
        | Command::Watch { .. }
        | Command::EvalRun(_)
        | Command::Token { .. } => {
            unreachable!("dispatched in main")
        }
        Command::Lock(o) => commands::lock::lock(&o),
        Command::New(o) => commands::new::new(&o),
        Command::Push(o) => commands::oci::push(&o),
        Command::Pull(o) => commands::oci::pull(&o),
        Command::Install(o) => commands::install::install(&o),
        Command::Doctor(o) => {
            let (out, code) = commands::doctor::doctor(&o, &exe())?;
            if code != 0 {
                murmur::diag::write_stdout(&out)?;
                return Err(Diagnostic::new(
                    murmur::diag::code::CAP_FLOOR,
                    "--manifest",
                    "the capsule's containment floor is not met on this host (see above)",
                ));
            }
            Ok(out)
        }
        Command::Inspect {
            target,
            registry,
            json,
        } => {
            let (full, version) = target.rsplit_once('@').ok_or_else(|| {
                Diagnostic::new(
                    murmur::diag::code::BLD_NAME,
                    &target,
                    format!("'{target}' is not NAME@VERSION"),
                )
            })?;
            ArtifactName::parse(full)?;
            let root = registry.unwrap_or_else(registry::default_root);
            let resolved = registry::resolve(&root, full, version, murmur::manifest::Resolve::Nothing)?;
            let wasm = registry::payload::has_root_wasm(&resolved.bytes);
            Ok(render::inspected(full, &resolved, wasm, json))
        }
    }
}

/// Run a capsule session: its output is printed as it happens, so it bypasses `run`.
#[cfg(feature = "runtime")]
fn run_capsule(o: murmur::runtime::RunOptions) -> ExitCode {
    match murmur::runtime::run(o) {
        Ok(code) => ExitCode::from(code),
        Err(d) => {
            eprintln!("{d}");
            ExitCode::from(1)
        }
    }
}

/// This binary, for the probe child.
fn exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
}

fn main() -> ExitCode {
    // Hidden: the session network namespace's helper (see `containment::egress::namespace`),
    // started by `mur` itself with the hand-off socket as its stdout.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("__netns") {
        return ExitCode::from(murmur::containment::egress::namespace::helper_main(&args[1..]) as u8);
    }
    // Hidden: the session's warden (see `containment::warden`), and the last words it runs
    // for a delegation whose launcher died.
    if args.first().map(String::as_str) == Some(murmur::containment::warden::SUBCOMMAND) {
        return ExitCode::from(murmur::containment::warden::main() as u8);
    }
    // Hidden: a manual page rendered from the help text (the Debian package's `man mur`).
    if let (Some("__man"), Some(page)) = (args.first().map(String::as_str), args.get(1)) {
        return match murmur::commands::man::page(page, env!("CARGO_PKG_VERSION")) {
            Some(text) => print(&text, 0),
            None => {
                eprintln!("{BIN}: no manual page named {page} (mur, mur-roost)");
                ExitCode::from(2)
            }
        };
    }
    #[cfg(feature = "runtime")]
    if args.first().map(String::as_str) == Some(murmur::runtime::delegation::completion::ORPHANED) {
        return ExitCode::from(murmur::runtime::delegation::completion::orphaned(&args[1..]) as u8);
    }
    let cmd = match parse(Args::new(std::env::args().skip(1))) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    #[cfg(feature = "runtime")]
    let cmd = match cmd {
        Command::Run(o) => return run_capsule(o),
        other => other,
    };
    let cmd = match cmd {
        Command::Usage => {
            eprint!("{}", help::mur_text());
            return ExitCode::from(2);
        }
        Command::Probe(up_to) => return ExitCode::from(murmur::containment::probe::child_main(up_to) as u8),
        Command::Trace(o) => return streamed(|out, err| murmur::commands::trace::trace(&o, out, err)),
        Command::Stop(o) => return streamed(|out, err| murmur::commands::stop::stop(&o, out, err)),
        Command::Watch { session } => {
            return streamed(|out, err| murmur::commands::watch::watch(&session, out, err))
        }
        Command::Token { session, name } => {
            use murmur::commands::token::{token, Refused};
            return match token(&session, name.as_deref()) {
                Ok(t) => print(&t, 0),
                Err(Refused::Usage(e)) => usage_error(&e),
                Err(Refused::Failed(d)) => {
                    eprintln!("{d}");
                    ExitCode::from(1)
                }
            };
        }
        Command::EvalRun(o) => {
            return match murmur::commands::eval_run::run(&o, &exe()) {
                Ok((text, all)) => print(&text, if all { 0 } else { 1 }),
                Err(d) => {
                    eprintln!("{d}");
                    ExitCode::from(1)
                }
            };
        }
        Command::Exec(o) => {
            return match murmur::commands::exec::exec(o, &exe()) {
                Ok(code) => ExitCode::from(code),
                Err(d) => {
                    eprintln!("{d}");
                    ExitCode::from(1)
                }
            };
        }
        other => other,
    };
    match run(cmd) {
        Ok(out) => print(&out, 0),
        Err(d) => {
            eprintln!("{d}");
            ExitCode::from(1)
        }
    }
}

/// A command that writes as it goes (on stdout, progress on stderr): its exit status.
fn streamed(
    f: impl FnOnce(&mut dyn std::io::Write, &mut dyn std::io::Write) -> Result<u8, Diagnostic>,
) -> ExitCode {
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr());
    match f(&mut out, &mut err) {
        Ok(code) => ExitCode::from(code),
        Err(d) => {
            eprintln!("{d}");
            ExitCode::from(1)
        }
    }
}

/// A usage error: `mur: WHY` and where the help is, on stderr; exit 2.
fn usage_error(e: &ArgError) -> ExitCode {
    eprintln!("{BIN}: {e}");
    eprintln!("{}", help::pointer(std::env::args().nth(1).as_deref()));
    ExitCode::from(2)
}

/// `text` on stdout and the exit `code`; a stdout that cannot take it is an error (exit 1).
fn print(text: &str, code: u8) -> ExitCode {
    match murmur::diag::write_stdout(text) {
        Ok(()) => ExitCode::from(code),
        Err(d) => {
            eprintln!("{d}");
            ExitCode::from(1)
        }
    }
}
