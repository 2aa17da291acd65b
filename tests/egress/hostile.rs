//! A hostile child against the relay: a thousand connections opened and dropped in every
//! way (closed at once, written and abandoned, a full exchange, reset) leave it working and
//! its memory flat; a reader slower than the upstream still gets every byte of a large
//! reply; and once `mur exec` ends, no process, thread, descriptor or mount keeps the
//! session's network namespace.

use super::servers::Upstream;
use super::{capsule, classes, comm, descendants, netns_of, serial, start_sleep, stop, Capsule};
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The resident memory (kB) of `root` and every process below it except the probe, and
/// each process's share.
fn tree_rss(root: u32) -> (u64, Vec<String>) {
    let mut total = 0;
    let mut parts = Vec::new();
    for pid in std::iter::once(root).chain(descendants(root)) {
        let name = comm(pid);
        if name == "escape-probe" {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kb: u64 = super::common::status_field(&status, "VmRSS:")
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap_or(0);
        total += kb;
        parts.push(format!("{name}[{pid}] {kb} kB"));
    }
    (total, parts)
}

/// `churn N 127.0.0.1 PORT 3` under `class`: once the probe has reported (and sleeps, the
/// relay idle), the resident memory of `mur` and its processes (kB).
fn churn(c: &Capsule, class: &str, n: &str, port: &str) -> u64 {
    let mut child = c
        .command(class, &["escape-probe", "churn", n, "127.0.0.1", port, "3"], &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
    // Let the last exchange's relay finish before looking.
    std::thread::sleep(Duration::from_millis(500));
    let (rss, parts) = tree_rss(child.id());
    let status = child.wait().unwrap();
    let stderr = drain.join().unwrap();
    assert_eq!(
        line.trim_end(),
        "churn exchange 0 allowed pong:5 failed-connects=0",
        "{class}: churn {n}: {stderr}"
    );
    assert!(status.success(), "{class}: churn {n}: {status:?}: {stderr}");
    println!("{class}: after churn {n}: {rss} kB ({})", parts.join(", "));
    rss
}

#[test]
fn connection_churn_leaves_the_relay_working_and_its_memory_flat() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let c = capsule("churn", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let few = churn(&c, class, "20", &p);
        let many = churn(&c, class, "1000", &p);
        println!(
            "{class}: relay VmRSS after 20 connections {few} kB, after 1000 {many} kB, growth {} kB",
            many.saturating_sub(few)
        );
        assert!(
            many.saturating_sub(few) < 8 * 1024,
            "{class}: the relay grew from {few} kB to {many} kB over 980 more connections"
        );
    }
}

#[test]
fn a_slow_reader_gets_every_byte_of_a_large_reply() {
    let _serial = serial();
    const BYTES: usize = 32 << 20;
    let up = Upstream::firehose(BYTES);
    let p = up.port().to_string();
    let c = capsule("slow-read", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let r = c.probe(class, &["slow-read", "127.0.0.1", &p, &BYTES.to_string()], &[]);
        assert_eq!(
            r.line(),
            format!("slow-read read 0 allowed {BYTES}"),
            "{class}: {}",
            r.stderr
        );
    }
}

/// Who still refers to the namespace `ns` (`net:[NUMBER]`): any process's or thread's
/// `ns/net`, any process's descriptor, any mount of the test's mount namespace.
fn holders(ns: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in procs.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let dir = entry.path();
        let mut links = vec![dir.join("ns/net")];
        for sub in ["task", "fd"] {
            if let Ok(rd) = std::fs::read_dir(dir.join(sub)) {
                for e in rd.flatten() {
                    links.push(if sub == "task" {
                        e.path().join("ns/net")
                    } else {
                        e.path()
                    });
                }
            }
        }
        for link in links {
            if std::fs::read_link(&link).is_ok_and(|t| t.as_os_str() == ns) {
                let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
                found.push(format!(
                    "{} ({})",
                    link.display(),
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                ));
            }
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    found.extend(
        mounts
            .lines()
            .filter(|l| l.contains(ns))
            .map(|l| format!("mount: {l}")),
    );
    found
}

/// The session's namespace is made by a thread of `mur` when it runs as root: that thread
/// must be gone, and every other thread must stay in the host's namespace (a `mur` thread
/// left inside would make the roost's, the model's and the relay's own connections from
/// the sandbox).
#[test]
fn every_thread_of_mur_stays_in_the_hosts_network_namespace_while_its_command_runs_in_the_sessions() {
    let _serial = serial();
    let up = Upstream::pong();
    let c = capsule("netns-threads", &[format!("localhost:{}", up.port())]);
    let own = netns_of("self");
    for class in classes(&c) {
        let (mut child, sleeper) = start_sleep(&c, class);
        let ns = netns_of(&sleeper.to_string());
        let tasks: Vec<(String, String)> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
            .unwrap()
            .flatten()
            .map(|t| {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                let link = std::fs::read_link(t.path().join("ns/net")).unwrap_or_default();
                (comm.trim().to_string(), link.display().to_string())
            })
            .collect();
        stop(&mut child, sleeper);
        assert_ne!(ns, own, "{class}: the contained sleep is in the host's namespace");
        assert!(tasks.len() > 1, "{class}: {tasks:?}");
        assert!(
            tasks.iter().all(|(_, t)| *t == own),
            "{class}: a thread of mur is outside the host's namespace {own} (the session's is {ns}): {tasks:?}"
        );
        assert!(
            !tasks.iter().any(|(comm, _)| comm == "netns"),
            "{class}: {tasks:?}"
        );
    }
}

#[test]
fn no_process_descriptor_or_mount_keeps_the_namespace_once_mur_exec_ends() {
    let _serial = serial();
    let up = Upstream::pong();
    let c = capsule("netns-end", &[format!("localhost:{}", up.port())]);
    let own = netns_of("self");
    for class in classes(&c) {
        let (mut child, sleeper) = start_sleep(&c, class);
        let ns = netns_of(&sleeper.to_string());
        if ns == own {
            stop(&mut child, sleeper);
            panic!("{class}: the contained sleep is in the test's own network namespace {own}");
        }
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        )
        .unwrap();
        let status = child.wait().unwrap();
        println!("{class}: namespace {ns}, mur exec ended with {status:?}");
        // Teardown may trail the exit by a moment (a reaped child's namespaces are released
        // as it exits): look again for up to 10 s.
        let until = Instant::now() + Duration::from_secs(10);
        let mut left = holders(&ns);
        while !left.is_empty() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            left = holders(&ns);
        }
        if !left.is_empty() {
            stop(&mut child, sleeper);
        }
        assert!(
            left.is_empty(),
            "{class}: {ns} outlived mur exec:\n{}",
            left.join("\n")
        );
    }
}
