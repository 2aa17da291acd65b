//! Every help text of both binaries, as data: each command's usage, what it does, its flags
//! with their defaults, and one example. `-h`/`--help` print these; an argument error points
//! at them.

/// One command's help.
pub struct Help {
    pub name: &'static str,
    pub usage: &'static str,
    pub about: &'static str,
    /// `(flag, what it does and its default)`.
    pub flags: &'static [(&'static str, &'static str)],
    pub example: &'static str,
}

const JSON: (&str, &str) = ("--json", "machine-readable output (default: text for a person)");
const REGISTRY: (&str, &str) = (
    "--registry-path DIR",
    "the local registry (default ~/.murmur/artifacts)",
);
const HELP: (&str, &str) = ("-h, --help", "print this help");

/// The `mur` subcommands, in the order `mur --help` lists them.
pub const COMMANDS: &[Help] = &[
    Help {
        name: "build",
        usage: "mur build [DIR] [-o FILE] [--json]",
        about: "validate a capsule directory and pack it into a .mur.zip",
        flags: &[("DIR", "the capsule directory (default .)"), ("-o, --output FILE", "the archive to write, ending in .mur.zip (default NAME-VERSION.mur.zip here)"), JSON, HELP],
        example: "mur build examples/hello -o hello-0.1.0.mur.zip",
    },
    Help {
        name: "publish",
        usage: "mur publish FILE [--registry-path DIR] [--scope SCOPE] [--json]",
        about: "file an archive into the local registry",
        flags: &[("FILE", "the .mur.zip to publish (required)"), REGISTRY, ("--scope SCOPE", "file it as SCOPE/NAME (default: a bare name)"), JSON, HELP],
        example: "mur publish hello-0.1.0.mur.zip --scope local",
    },
    Help {
        name: "inspect",
        usage: "mur inspect NAME@VERSION [--registry-path DIR] [--json]",
        about: "show what the registry resolves for NAME@VERSION",
        flags: &[("NAME@VERSION", "a bare or scoped name and an exact version (required)"), REGISTRY, JSON, HELP],
        example: "mur inspect local/hello@0.1.0 --json",
    },
    Help {
        name: "run",
        usage: "mur run [--manifest PATH | --capsule NAME --capsule-version V] [options]",
        about: "run a WASM capsule and serve its door on 127.0.0.1",
        flags: &[
            ("--manifest PATH", "the capsule's manifest (default ./murmur.yaml)"),
            ("--capsule NAME", "run a published capsule instead (with --capsule-version)"),
            ("--capsule-version V", "its exact version"),
            REGISTRY,
            ("--workdir DIR", "an existing workdir (default <manifest dir>/workdir/<session>)"),
            ("--task TEXT|FILE", "the task: a file is copied, text written as task.md (default: none)"),
            ("--containment CLASS", "raise the floor to advisory, scoped or sealed (default: the manifest's)"),
            ("--explain-scope", "print the effective grants and run nothing"),
            ("--locked", "the manifest's lock (murmur.lock beside murmur.yaml) must exist and is never written (default: written when absent)"),
            ("-v, --verbose", "print where the records go"),
            ("--json", "print one announcement line instead of text"),
            HELP,
        ],
        example: "mur run --manifest examples/hello/murmur.yaml --task \"say hi\"",
    },
    Help {
        name: "exec",
        usage: "mur exec [--manifest PATH] [--containment CLASS] [--workdir DIR] [--home DIR] -- CMD [ARGS]",
        about: "run one shell.allow command contained as the capsule's shell tool would be; exits with its status",
        flags: &[
            ("--manifest PATH", "the capsule's manifest (default ./murmur.yaml)"),
            ("--containment CLASS", "raise the floor to advisory, scoped or sealed (default: the manifest's)"),
            ("--workdir DIR", "the directory the command works in (default: a fresh one)"),
            ("--home DIR", "the command's HOME, an existing directory (default: <workdir>/.home)"),
            ("-- CMD [ARGS]", "the command, a bare name from capabilities.shell.allow (required)"),
            HELP,
        ],
        example: "mur exec --manifest murmur.yaml --containment sealed -- ls -la",
    },
    Help {
        name: "doctor",
        usage: "mur doctor [--manifest PATH] [--registry-path DIR] [--json]",
        about: "probe this host as a launch would and say which containment classes it backs, and why not",
        flags: &[
            ("--manifest PATH", "also say whether this capsule's floor is met here; exit 1 if not (default: none)"),
            REGISTRY,
            JSON,
            HELP,
        ],
        example: "mur doctor --manifest examples/hello/murmur.yaml",
    },
    Help {
        name: "trace",
        usage: "mur trace [PATH | --session ID] [--json | --follow | --html OUT]",
        about: "render a session's trace.jsonl as a timeline and a summary",
        flags: &[
            ("PATH", "a trace.jsonl, or a session's records directory"),
            ("--session ID", "the trace of session ID in $MURMUR_RECORDS_DIR (default ~/.murmur/records)"),
            ("--json", "print only the summary, as one JSON object"),
            ("-f, --follow", "keep reading while the session runs; stop shortly after it ends"),
            ("--html OUT", "write the timeline as one self-contained HTML page to OUT instead"),
            HELP,
        ],
        example: "mur trace --session ses_0123456789abcdef0123456789abcdef",
    },
    Help {
        name: "eval",
        usage: "mur eval show [--json] FILE|DIR|SESSION | mur eval show --html OUT SOURCE... | mur eval diff [--json] A B | mur eval run [MANIFEST] --dataset FILE [--variant MANIFEST2] [--repeat K] [--jobs N] [--session-timeout SECS] [--json] [--junit FILE]",
        about: "read eval.jsonl files (show, diff), or run a capsule over a dataset of cases, each as its own contained session (run)",
        flags: &[
            ("FILE|DIR|SESSION", "an eval.jsonl, a records directory holding one, or a session id (ses_...)"),
            ("--session ID", "the eval.jsonl of session ID in $MURMUR_RECORDS_DIR (default ~/.murmur/records)"),
            ("--dataset FILE", "run: JSONL cases {case_id, task_path, start?, check?}, paths within its directory"),
            ("--variant MANIFEST2", "run: a second capsule over the same cases"),
            ("--repeat K", "run: each case K times (pass rate and pass^k)"),
            ("--jobs N", "run: cases at once (default: the cores)"),
            ("--junit FILE", "run: also write JUnit XML"),
            ("--json", "print one JSON object"),
            ("--html OUT", "show: write the pass rates as one self-contained HTML page, each SOURCE a variant"),
            HELP,
        ],
        example: "mur eval diff before/eval.jsonl after/eval.jsonl",
    },
    Help {
        name: "lock",
        usage: "mur lock [--manifest PATH] [--registry-path DIR] [--update NAME[@VERSION]] [--accept-changed NAME] [--json]",
        about: "pin every artifact the manifest declares in its lock (murmur.lock beside murmur.yaml), by name, version and sha256",
        flags: &[
            ("--manifest PATH", "the capsule's manifest (default ./murmur.yaml)"),
            REGISTRY,
            ("--update NAME", "take only NAME as the registry has it now, keeping every other pin (default: pin them all); NAME@VERSION moves a spawn.allow capsule's pin to VERSION"),
            ("--accept-changed NAME", "trust other bytes under a version the lock pins for NAME (default: refused, E-REG-002)"),
            JSON,
            HELP,
        ],
        example: "mur lock --manifest examples/agent/murmur.yaml",
    },
    Help {
        name: "push",
        usage: "mur push NAME@VERSION oci://HOST[:PORT]/REPO[:TAG] [--registry-path DIR] [--json]",
        about: "file a published artifact in an OCI registry (its meta.json the config blob, its .mur.zip the one layer)",
        flags: &[
            ("NAME@VERSION", "an artifact of the local registry (required)"),
            ("oci://HOST/REPO[:TAG]", "where to file it, over HTTPS; oci+http:// to a loopback host only (default tag: the version)"),
            REGISTRY,
            JSON,
            HELP,
        ],
        example: "mur push local/hello@0.1.0 oci://registry.example/murmur/local/hello",
    },
    Help {
        name: "pull",
        usage: "mur pull oci://HOST[:PORT]/REPO(:TAG|@sha256:DIGEST) [--registry-path DIR] [--json]",
        about: "fetch an artifact from an OCI registry into the local registry, every blob checked against its digest",
        flags: &[
            ("oci://HOST/REPO:TAG", "a tag, or @sha256:… a manifest digest (required); credentials from ~/.docker/config.json or REGISTRY_AUTH_FILE, CA bundle MURMUR_CA_FILE (default: the system's)"),
            REGISTRY,
            JSON,
            HELP,
        ],
        example: "mur pull oci://registry.example/murmur/local/hello:0.1.0",
    },
    Help {
        name: "install",
        usage: "mur install [--manifest PATH] [--registry-path DIR] [--locked] [--json]",
        about: "fetch every artifact the manifest declares that the local registry lacks, from registry.sources, and pin it in the lock",
        flags: &[
            ("--manifest PATH", "the capsule's manifest (default ./murmur.yaml)"),
            REGISTRY,
            ("--locked", "fetch only what the lock pins, by its digest, and never write the lock (default: pin what is fetched)"),
            JSON,
            HELP,
        ],
        example: "mur install --manifest examples/agent/anthropic.yaml",
    },
    Help {
        name: "token",
        usage: "mur token --session ID [NAME]",
        about: "print a bearer token of a running session's authenticated door",
        flags: &[
            ("--session ID", "the session, in $MURMUR_RECORDS_DIR (default ~/.murmur/records)"),
            ("NAME", "the credential (capabilities.network.authentication; default: the first declared)"),
            HELP,
        ],
        example: "mur token --session ses_0123456789abcdef0123456789abcdef operator",
    },
    Help {
        name: "ps",
        usage: "mur ps [--json]",
        about: "list your live sessions: id, capsule, class, state, tasks, age, door, parent",
        flags: &[
            ("--json", "one JSON array of objects (default: a table); sessions in $MURMUR_RECORDS_DIR (default ~/.murmur/records) whose mur still holds their lock"),
            HELP,
        ],
        example: "mur ps --json",
    },
    Help {
        name: "stop",
        usage: "mur stop SESSION | --all",
        about: "end a live session as SIGTERM does (its task failed, its delegated children ended), asked through its control socket; wait up to 15 s and say how it ended",
        flags: &[
            ("SESSION", "the session (ses_...); its delegated children end with it"),
            ("--all", "stop every live session of yours instead (a whole delegation tree ends with its top session anyway)"),
            HELP,
        ],
        example: "mur stop ses_0123456789abcdef0123456789abcdef",
    },
    Help {
        name: "cancel",
        usage: "mur cancel SESSION TASK",
        about: "cancel one task through the session's door (A2A tasks/cancel); the session goes on. Prints the task's state",
        flags: &[
            ("SESSION", "the live session (ses_...); an authenticated door is called with its first declared credential, as mur token prints it"),
            ("TASK", "the task id (the trace's task_start, the A2A send's answer)"),
            HELP,
        ],
        example: "mur cancel ses_0123456789abcdef0123456789abcdef 3f2a…",
    },
    Help {
        name: "watch",
        usage: "mur watch SESSION",
        about: "follow a live session: a line per turn, tool call, task and delegation as they happen, with turns and tokens so far; ends with the session",
        flags: &[("SESSION", "the live session (ses_...)"), HELP],
        example: "mur watch ses_0123456789abcdef0123456789abcdef",
    },
    Help {
        name: "new",
        usage: "mur new NAME [--wasm | --agent] [DIR]",
        about: "make a capsule directory that runs as it is, with an eval dataset",
        flags: &[
            ("NAME", "the capsule's name (required)"),
            ("--wasm", "a WASM capsule: the hello component, runs with nothing else installed (the default)"),
            ("--agent", "an agent capsule: the OpenAI driver against a local server (Ollama's address)"),
            ("DIR", "where to make it, new or empty, never overwritten (default ./NAME)"),
            HELP,
        ],
        example: "mur new greeter && mur eval run greeter/murmur.yaml --dataset greeter/eval/cases.jsonl",
    },
    Help {
        name: "records",
        usage: "mur records prune [--dry-run] [--json]",
        about: "prune the session records (and ended children's workdirs) by the retention policy",
        flags: &[
            ("prune", "remove the oldest ended sessions' records until the records: policy of ~/.config/murmur/config.yaml holds (default 30 days, 1000 sessions, 2 GiB)"),
            ("--dry-run", "print what would be removed; remove nothing"),
            JSON,
            HELP,
        ],
        example: "mur records prune --dry-run",
    },
    Help {
        name: "help",
        usage: "mur help [COMMAND]",
        about: "print this help, or a command's",
        flags: &[],
        example: "mur help doctor",
    },
    Help {
        name: "version",
        usage: "mur version [--json]",
        about: "print the version and the build's facts for a bug report",
        flags: &[("--json", "one object: version, commit, target, rustc, features, wit, a2a (default: the --version line, then a line each)"), HELP],
        example: "mur version --json",
    },
];

/// `mur-roost --help`.
pub const ROOST: Help = Help {
    name: "mur-roost",
    usage: "mur-roost [--port N] [--registry-path DIR] [--spawn-allow NAME]... [bounds]",
    about: "the loopback daemon that referees which capsules may spawn which others",
    flags: &[
        (
            "--port N",
            "listen on 127.0.0.1:N, 0 for any free port (default 7700)",
        ),
        REGISTRY,
        (
            "--spawn-allow NAME",
            "a capsule that may register without an approval, as a top-level session (children come in under their parent's approval); repeat per name (default: none: only approved children)",
        ),
        ("--max-depth N", "deepest delegation chain (default 3)"),
        (
            "--max-concurrent N",
            "live children per parent session (default 4)",
        ),
        (
            "--max-live-capsules N",
            "live capsules on this machine (default cores x 8, 16 to 256)",
        ),
        ("--version", "print the version"),
        HELP,
    ],
    example: "mur-roost --port 7700 --spawn-allow local/worker-a",
};

/// The help of `mur COMMAND`.
pub fn find(command: &str) -> Option<&'static Help> {
    COMMANDS.iter().find(|h| h.name == command)
}

/// One command's help text.
pub fn text(h: &Help) -> String {
    let mut out = format!("{} - {}\n\nusage: {}\n", h.name, h.about, h.usage);
    if !h.flags.is_empty() {
        out.push_str("\noptions:\n");
        let width = h.flags.iter().map(|(f, _)| f.len()).max().unwrap_or(0).min(24);
        for (flag, what) in h.flags {
            out.push_str(&format!("  {flag:<width$}  {what}\n"));
        }
    }
    out.push_str(&format!("\nexample:\n  {}\n", h.example));
    out
}

/// `mur --help`: every command in one line each.
pub fn mur_text() -> String {
    let mut out = String::from("mur - run murmur capsules inside enforced containment\n\nusage: mur <command> [options]\n\ncommands:\n");
    for h in COMMANDS {
        out.push_str(&format!("  {:<10}{}\n", h.name, h.about));
    }
    out.push_str(
        "\noptions:\n  -h, --help      print this help (after a command: that command's)\n  -V, --version   print the version\n\nexample:\n  mur run --help\n",
    );
    out
}

/// The line after an argument error.
pub fn pointer(command: Option<&str>) -> String {
    match command.and_then(find) {
        Some(h) => format!("run 'mur {} --help' for usage", h.name),
        None => "run 'mur --help' for usage".into(),
    }
}
