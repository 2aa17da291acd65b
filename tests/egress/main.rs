//! Network egress of a contained child (issue 17) through the real `mur exec`: under `scoped`
//! and `sealed` the escape probe (tests/escape/probe.c) reaches what
//! `capabilities.network.allow` names, by name (mur's DNS) or by an address an allowed name
//! resolved to at launch, on the rule's port, through mur's relay; other ports, names and
//! addresses, UDP but to DNS, IPv6, raw and packet sockets reach nothing, and an unlisted name
//! never reaches the host's resolver. The host-side servers are in `egress/servers.rs`, names
//! and mur's DNS in `egress/names.rs`, connection churn, a slow reader and the namespace's end
//! in `egress/hostile.rs`. Where the host does not back a class, each test asserts its
//! E-CAP-003 refusal instead. Servers bind loopback only; no other address is contacted.
//!
//! A test binary of its own: the namespace test looks through all of /proc for any holder of
//! a namespace number, which the kernel hands out again once it is freed, so no other test
//! may make network namespaces while it runs. `serial()` keeps the tests here apart; cargo
//! runs test binaries one after another, which keeps the rest of the suite (the escape suite,
//! agent sessions under scoped and sealed) apart from them.

#[path = "../common/mod.rs"]
mod common;
mod hostile;
mod names;
mod servers;

use common::probe::{host_backs_scoped, host_backs_sealed, probe_binary};
use common::unprivileged::{chown_tree, userns_allowed, Account, USER};
use common::TempDir;
use servers::{FakeDns, Silent, Upstream};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

const MUR: &str = env!("CARGO_BIN_EXE_mur");

/// How `mur exec` starts each refusal line on its stderr.
const REFUSED: &str = "mur: network: refused ";

/// One test at a time: the namespace test looks for any holder of a namespace number (which
/// the kernel reuses once it is freed), and the churn test measures memory.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the host backs scoped and sealed, asked once.
fn backed() -> (bool, bool) {
    static BACKED: OnceLock<(bool, bool)> = OnceLock::new();
    *BACKED.get_or_init(|| {
        let scoped = host_backs_scoped();
        (scoped, scoped && host_backs_sealed())
    })
}

struct Capsule {
    _dir: TempDir,
    manifest: PathBuf,
    workdir: PathBuf,
}

/// A capsule allowed to run `escape-probe`, `sleep` and `id`, with `allow` as its
/// `capabilities.network.allow` (no network section when it is empty).
fn capsule(label: &str, allow: &[String]) -> Capsule {
    let t = TempDir::new(label);
    let manifest = t.path().join("murmur.yaml");
    let network = if allow.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = allow.iter().map(|r| format!("\"{r}\"")).collect();
        format!("  network:\n    allow: [{}]\n", quoted.join(", "))
    };
    std::fs::write(
        &manifest,
        format!(
            "name: egress\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [escape-probe, sleep, id]\n{network}"
        ),
    )
    .unwrap();
    let workdir = t.path().join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    Capsule {
        _dir: t,
        manifest,
        workdir,
    }
}

/// The probe's report (its first stdout line, split on blanks) and `mur exec`'s stderr.
struct Report {
    f: Vec<String>,
    stderr: String,
}

impl Report {
    fn line(&self) -> String {
        self.f.join(" ")
    }

    fn verdict(&self) -> &str {
        self.f.get(3).map_or("", String::as_str)
    }

    /// Whether `mur exec` printed a refusal line naming `what` (an address:port or a name).
    fn refused(&self, what: &str) -> bool {
        self.stderr
            .lines()
            .any(|l| l.starts_with(REFUSED) && l.contains(what))
    }
}

impl Capsule {
    /// `mur exec` of `cmd` under `class`, with the probe's directory first in PATH.
    fn command(&self, class: &str, cmd: &[&str], env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(MUR);
        c.args(["exec", "--manifest"])
            .arg(&self.manifest)
            .arg("--workdir")
            .arg(&self.workdir)
            .args(["--containment", class, "--"])
            .args(cmd)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", probe_binary().parent().unwrap().display()),
            )
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        c
    }

    fn exec(&self, class: &str, cmd: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(class, cmd, env).output().unwrap()
    }

    /// One probe run: its report, and `mur exec` exited with the probe's own success.
    fn probe(&self, class: &str, args: &[&str], env: &[(&str, &str)]) -> Report {
        let mut cmd = vec!["escape-probe"];
        cmd.extend_from_slice(args);
        let out = self.exec(class, &cmd, env);
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        let line = stdout.lines().next().unwrap_or_default();
        assert!(
            !line.is_empty(),
            "{class} {args:?}: no report (status {:?}); stderr: {stderr}",
            out.status
        );
        let f: Vec<String> = line.split_whitespace().map(String::from).collect();
        // 0: contained or allowed; 3: escaped (left to the caller's assertion on the verdict).
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{class} {args:?}: status {:?}: {line}; stderr: {stderr}",
            out.status
        );
        Report { f, stderr }
    }

    /// A file in the workdir that only a command that ran would create.
    fn marker(&self) -> String {
        self.workdir.join("ran-marker").display().to_string()
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The classes to run for `c`: scoped and sealed where the host backs them. For one it does
/// not, `mur exec` is asserted to refuse it (E-CAP-003, nothing run) and it is left out.
fn classes(c: &Capsule) -> Vec<&'static str> {
    let (scoped, sealed) = backed();
    let mut run = Vec::new();
    for (class, backs) in [("scoped", scoped), ("sealed", sealed)] {
        if backs {
            run.push(class);
            continue;
        }
        let marker = c.marker();
        let out = c.exec(class, &["escape-probe", "mark", &marker], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{class}: {stderr}");
        assert!(
            stderr.starts_with("error[E-CAP-003]: containment floor not met"),
            "{class}: {stderr}"
        );
        assert!(
            !std::path::Path::new(&marker).exists(),
            "{class}: the command ran"
        );
        println!("{class}: not backed by this host, refused with E-CAP-003");
    }
    run
}

/// The pids below `root` (every thread's children, children of children).
fn descendants(root: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let kids = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for kid in kids.split_whitespace().filter_map(|k| k.parse().ok()) {
                if !out.contains(&kid) {
                    out.push(kid);
                    todo.push(kid);
                }
            }
        }
    }
    out
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Start `mur exec -- sleep 30` under `class` and wait (10 s at most) until the contained
/// `sleep` exists: the `mur` child and the pid of `sleep`.
fn start_sleep(c: &Capsule, class: &str) -> (std::process::Child, u32) {
    let mut child = c.command(class, &["sleep", "30"], &[]).spawn().unwrap();
    for _ in 0..500 {
        if let Some(pid) = descendants(child.id()).into_iter().find(|p| comm(*p) == "sleep") {
            return (child, pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{class}: no contained sleep appeared");
}

/// End a `start_sleep`: its `sleep` (by pid, if that pid is still a `sleep`) and the
/// `mur exec` that ran it.
fn stop(child: &mut std::process::Child, sleeper: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(sleeper as i32) {
        if comm(sleeper) == "sleep" {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    let _ = child.wait();
}

/// The network namespace of `pid` as its `ns/net` link reads (`net:[NUMBER]`).
fn netns_of(pid: &str) -> String {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    link.display().to_string()
}

#[test]
fn an_allowed_host_is_reached_by_name_and_by_its_launch_time_address() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let c = capsule("allowed", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let before = up.connections();
        // pong:5: the upstream read the whole "ping\n" to its end (the half-close crossed the
        // relay) and its answer came back.
        let r = c.probe(class, &["tcp-name", "localhost", &p], &[]);
        assert_eq!(
            r.line(),
            "tcp-name connect 0 allowed pong:5",
            "{class}: {}",
            r.stderr
        );
        let r = c.probe(class, &["tcp-ip", "127.0.0.1", &p], &[]);
        assert_eq!(
            r.line(),
            "tcp-ip connect 0 allowed pong:5",
            "{class}: {}",
            r.stderr
        );
        assert_eq!(
            up.connections(),
            before + 2,
            "{class}: one upstream connection each"
        );
        assert!(!r.stderr.contains(REFUSED), "{class}: {}", r.stderr);
    }
}

#[test]
fn the_allowed_host_on_another_port_is_refused() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    // Real host servers on both other ports: whatever crossed would be counted.
    let no_rule = Upstream::pong();
    let r_port = no_rule.port().to_string();
    let other = Upstream::pong();
    let q = other.port().to_string();
    // `other.test:Q` gives the namespace a listener on Q; its name resolves (through the fake
    // resolver, so nothing is asked of the host's) to another loopback address, so
    // 127.0.0.1:Q is allowed by no rule.
    let dns = FakeDns::start(&[
        ("localhost", Ipv4Addr::LOCALHOST),
        ("other.test", Ipv4Addr::new(127, 0, 0, 3)),
    ]);
    let resolver = dns.addr();
    let env = [("MURMUR_EGRESS_RESOLVER", resolver.as_str())];
    let c = capsule(
        "other-port",
        &[format!("localhost:{p}"), format!("other.test:{q}")],
    );
    for class in classes(&c) {
        // A port no rule implies has no listener.
        let r = c.probe(class, &["tcp-ip", "127.0.0.1", &r_port], &env);
        assert_eq!(r.line(), "tcp-ip connect 111 contained", "{class}: {}", r.stderr);
        // A port another rule implies: accepted, then closed without a byte.
        let r = c.probe(class, &["tcp-ip", "127.0.0.1", &q], &env);
        assert_eq!(r.verdict(), "contained", "{class}: {}: {}", r.line(), r.stderr);
        assert!(
            r.f[1] == "read" || r.f[1] == "send",
            "{class}: expected the relay to accept and close: {}",
            r.line()
        );
        assert!(r.refused(&format!("127.0.0.1:{q}")), "{class}: {}", r.stderr);
        // The allowed port still works under the same resolver.
        let r = c.probe(class, &["tcp-ip", "127.0.0.1", &p], &env);
        assert_eq!(
            r.line(),
            "tcp-ip connect 0 allowed pong:5",
            "{class}: {}",
            r.stderr
        );
    }
    assert_eq!(no_rule.connections(), 0, "the port no rule implies was reached");
    assert_eq!(
        other.connections(),
        0,
        "the other rule's port was reached on 127.0.0.1"
    );
}

#[test]
fn an_address_not_in_the_allow_list_is_not_reached() {
    let _serial = serial();
    let mut up = Upstream::pong();
    let p = up.port().to_string();
    // 127.0.0.2 is loopback too: a witness there counts anything relayed to it.
    let witness = up.also_on(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)));
    let c = capsule("unlisted-address", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let r = c.probe(class, &["tcp-ip", "127.0.0.2", &p], &[]);
        assert_eq!(r.verdict(), "contained", "{class}: {}: {}", r.line(), r.stderr);
        assert!(r.refused(&format!("127.0.0.2:{p}")), "{class}: {}", r.stderr);
    }
    assert_eq!(up.connections(), 0, "relayed (witness on 127.0.0.2: {witness})");
}

#[test]
fn udp_to_anything_but_the_namespace_dns_goes_nowhere() {
    let _serial = serial();
    let silent = Silent::bind();
    let u = silent.port().to_string();
    // A TCP rule on the same port: it opens no UDP path.
    let c = capsule("udp", &[format!("localhost:{u}")]);
    for class in classes(&c) {
        let r = c.probe(class, &["udp-to", "127.0.0.1", &u], &[]);
        assert!(
            ["allowed", "contained"].contains(&r.verdict()),
            "{class}: {}: {}",
            r.line(),
            r.stderr
        );
        let got = silent.received();
        assert!(got.is_none(), "{class}: the host's UDP socket received {got:?}");
    }
}

#[test]
fn ipv6_reaches_nothing() {
    let _serial = serial();
    let mut up = Upstream::pong();
    let p = up.port().to_string();
    let witness = up.also_on(IpAddr::V6(Ipv6Addr::LOCALHOST));
    let c = capsule("ipv6", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let r = c.probe(class, &["tcp6", &p], &[]);
        assert_eq!(r.verdict(), "contained", "{class}: {}: {}", r.line(), r.stderr);
    }
    assert_eq!(up.connections(), 0, "relayed (witness on [::1]: {witness})");
}

#[test]
fn raw_and_packet_sockets_cannot_be_opened() {
    let _serial = serial();
    let c = capsule("raw", &["localhost:443".to_string()]);
    for class in classes(&c) {
        for case in ["raw-socket", "packet-socket"] {
            let r = c.probe(class, &[case], &[]);
            assert_eq!(
                (r.f[1].as_str(), r.verdict()),
                ("socket", "contained"),
                "{class}: {}: {}",
                r.line(),
                r.stderr
            );
        }
    }
}

#[test]
fn a_host_that_cannot_make_the_namespace_refuses_rules_with_e_cap_005_and_closes_the_rest() {
    let _serial = serial();
    // With rules (the session's namespace is made): refused, whatever the class.
    let ruled = capsule("netns-denied", &["localhost:443".to_string()]);
    let bare = capsule("netns-denied-bare", &[]);
    // Without: `scoped` runs with its network closed (no IP socket), `sealed` (which makes
    // its own namespaces) is refused.
    let deny = [("MURMUR_PROBE_DENY", "netns")];
    if host_backs_scoped() {
        let r = bare.probe("scoped", &["tcp-self"], &deny);
        assert_eq!(r.line(), "tcp-self listen 1 contained", "{}", r.stderr);
    }
    if host_backs_sealed() {
        let out = bare.exec("sealed", &["escape-probe", "tcp-self"], &deny);
        assert!(
            text(&out.stderr).starts_with("error[E-CAP-003]: "),
            "{}",
            text(&out.stderr)
        );
    }
    for (c, class) in [&ruled]
        .into_iter()
        .flat_map(|c| ["advisory", "scoped", "sealed"].map(|class| (c, class)))
    {
        let marker = c.marker();
        let out = c.exec(
            class,
            &["escape-probe", "mark", &marker],
            &[("MURMUR_PROBE_DENY", "netns")],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{class}: {stderr}");
        assert!(stderr.starts_with("error[E-CAP-005]:"), "{class}: {stderr}");
        assert!(out.stdout.is_empty(), "{class}: {}", text(&out.stdout));
        assert!(
            !std::path::Path::new(&marker).exists(),
            "{class}: the command ran"
        );
    }
}

/// The network namespaces `pid` holds a descriptor to (`net:[NUMBER]` each).
fn held_netns(pid: u32) -> Vec<String> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.flatten()
        .filter_map(|f| std::fs::read_link(f.path()).ok())
        .map(|l| l.display().to_string())
        .filter(|l| l.starts_with("net:["))
        .collect()
}

#[test]
fn with_no_rules_mur_makes_no_namespace_and_the_command_reaches_only_its_own_loopback() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let bare = capsule("no-rules", &[]);
    let ruled = capsule("ruled", &[format!("localhost:{p}")]);
    for class in classes(&bare) {
        // No rules: `mur` holds no namespace (none was made for a relay), and the command
        // is in one of its own, not the host's.
        let (mut child, sleeper) = start_sleep(&bare, class);
        let (held, ns) = (held_netns(child.id()), netns_of(&sleeper.to_string()));
        stop(&mut child, sleeper);
        assert_eq!(held, Vec::<String>::new(), "{class}");
        assert_ne!(ns, netns_of("self"), "{class}");
        // With a rule, `mur` holds the session's namespace, the one the command is in.
        let (mut child, sleeper) = start_sleep(&ruled, class);
        let (held, ns) = (held_netns(child.id()), netns_of(&sleeper.to_string()));
        stop(&mut child, sleeper);
        assert!(held.contains(&ns), "{class}: {held:?} against {ns}");
        // The command's own namespace is the session's kind: it serves and reaches itself
        // on loopback, and the host's server is not reached.
        let r = bare.probe(class, &["tcp-self"], &[]);
        assert_eq!(r.line(), "tcp-self accept 0 allowed", "{class}: {}", r.stderr);
        let r = bare.probe(class, &["tcp-ip", "127.0.0.1", &p], &[]);
        assert_eq!(
            (r.f[1].as_str(), r.verdict()),
            ("connect", "contained"),
            "{class}: {}",
            r.line()
        );
        assert_eq!(up.connections(), 0, "{class}");
    }
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn an_unprivileged_user_gets_the_namespace_with_its_own_ids_with_rules_and_without() {
    let _serial = serial();
    // With a pids cgroup delegated to the user, and with none (a PID namespace bounds each
    // command then).
    for account in [Account::with_delegated_cgroup(), Account::without_cgroup()] {
        unprivileged_namespaces(&account);
    }
}

fn unprivileged_namespaces(account: &Account) {
    let delegated = account.cgroup().is_some();
    let (root_scoped, root_sealed) = backed();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let bare = capsule("user-bare", &[]);
    let ruled = capsule("user-ruled", &[format!("localhost:{p}")]);
    for c in [&bare, &ruled] {
        chown_tree(c._dir.path());
    }
    let as_user = |c: &Capsule, class: &str, cmd: &[&str]| -> Output {
        let mut command = account.command(c.command(class, cmd, &[]));
        command
            .env("HOME", c._dir.path())
            .env("MURMUR_CACHE_DIR", c._dir.path().join("cache"));
        command.output().unwrap_or_else(|e| {
            panic!("{MUR} as uid {USER} (its directories must be searchable by others): {e}")
        })
    };
    // What the host backs for the user: its own probe, as `mur exec` will take it.
    let report = account.probe();
    let works = |keys: &[&str]| {
        keys.iter().all(|k| report[k].get("Ok").is_some())
            && (report["pids_cgroup"].get("Ok").is_some() || report["pidns"].get("Ok").is_some())
    };
    // Where root backs a class and nothing on the host forbids unprivileged user
    // namespaces, the user is backed too, with a cgroup or without: a broken namespace is
    // not "not backed".
    if userns_allowed() {
        assert_eq!(works(&["netns"]), root_scoped, "{report}");
        assert_eq!(works(&["sealed"]), root_sealed, "{report}");
        assert_eq!(report["pids_cgroup"].get("Ok").is_some(), delegated, "{report}");
    }
    for (class, keys) in [
        // Advisory too: a child of a user without capabilities still starts (it cannot
        // shrink its bounding set, and need not).
        ("advisory", &[][..]),
        ("scoped", &["landlock", "seccomp", "netns"][..]),
        ("sealed", &["landlock", "seccomp", "netns", "sealed"][..]),
    ] {
        let backed = class == "advisory" || works(keys);
        for c in [&bare, &ruled] {
            let out = as_user(c, class, &["id", "-u"]);
            let stderr = text(&out.stderr);
            if !backed {
                // Refused as the probe says, before anything ran.
                assert!(stderr.starts_with("error[E-CAP-00"), "{class}: {stderr}");
                println!("{class}: not backed for an unprivileged user here: {report}");
                continue;
            }
            // Its own ids inside its user namespace, not the overflow user.
            assert_eq!(text(&out.stdout), format!("{USER}\n"), "{class}: {stderr}");
            assert_eq!(out.status.code(), Some(0), "{class}: {stderr}");
        }
        if !backed {
            continue;
        }
        let out = as_user(&bare, class, &["escape-probe", "tcp-self"]);
        assert_eq!(
            text(&out.stdout),
            "tcp-self accept 0 allowed\n",
            "{class}: {}",
            text(&out.stderr)
        );
        let out = as_user(&ruled, class, &["escape-probe", "tcp-name", "localhost", &p]);
        assert_eq!(
            text(&out.stdout),
            "tcp-name connect 0 allowed pong:5\n",
            "{class}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn advisory_constrains_nothing_on_the_network() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let c = capsule("advisory", &[]);
    // No allow list at all, and the host's server is reached: the child is on the host's
    // network, in the test's own namespace.
    let r = c.probe("advisory", &["tcp-ip", "127.0.0.1", &p], &[]);
    assert_eq!(r.line(), "tcp-ip connect 0 allowed pong:5", "{}", r.stderr);
    assert_eq!(up.connections(), 1);
    // And the launch says so plainly.
    assert!(
        r.stderr.lines().any(|l| l
            == "warning[W-SEC-003]: containment is advisory: nothing constrains a subprocess's network \
                (capabilities.network.allow is enforced for shell commands and native tools only under scoped and sealed)"),
        "{}",
        r.stderr
    );
    let (mut child, sleeper) = start_sleep(&c, "advisory");
    let ns = netns_of(&sleeper.to_string());
    stop(&mut child, sleeper);
    assert_eq!(ns, netns_of("self"));
}
