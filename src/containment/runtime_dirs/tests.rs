use super::*;
use crate::manifest::model::{InterpreterRuntime, RuntimeDir};
use crate::manifest::netrule::NetRule;

fn scratch(label: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("murmur-rtdirs-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    std::fs::canonicalize(&p).unwrap()
}

fn caps(allow: &[&str]) -> Capabilities {
    Capabilities {
        shell_allow: Some(allow.iter().map(|s| s.to_string()).collect()),
        ..Capabilities::default()
    }
}

#[test]
fn interpreters_are_recognised_by_name() {
    assert_eq!(
        recognise("python3.11"),
        Some(Interpreter::Python(Some("3.11".into())))
    );
    assert_eq!(recognise("python3"), Some(Interpreter::Python(None)));
    assert_eq!(recognise("python"), Some(Interpreter::Python(None)));
    assert_eq!(recognise("perl5.36.0"), Some(Interpreter::Perl));
    assert_eq!(recognise("ruby3.1"), Some(Interpreter::Ruby));
    assert_eq!(recognise("nodejs"), Some(Interpreter::Node));
    for other in ["python3-config", "perldoc", "rubyx", "cat", "pythonista", "node2"] {
        assert_eq!(recognise(other), None, "{other}");
    }
}

#[test]
fn a_private_prefix_gives_its_own_lib_dir_and_only_existing_ones() {
    let t = scratch("prefix");
    let bin = t.join("versions/3.11.9/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("python3.11"), b"").unwrap();
    std::fs::create_dir_all(t.join("versions/3.11.9/lib/python3.11/lib-dynload")).unwrap();
    let dirs = interpreter_dirs(&bin.join("python3.11")).unwrap();
    assert_eq!(dirs, [t.join("versions/3.11.9/lib/python3.11")]);
    // Not a recognised interpreter: nothing derived.
    std::fs::write(bin.join("tool"), b"").unwrap();
    assert_eq!(interpreter_dirs(&bin.join("tool")), None);
    // Outside a `bin` directory there is no prefix to derive from.
    std::fs::write(t.join("python3.11"), b"").unwrap();
    assert_eq!(interpreter_dirs(&t.join("python3.11")), Some(Vec::new()));
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn advisory_grants_nothing_but_still_warns() {
    let t = scratch("advisory");
    let mut c = caps(&["python3"]);
    c.interpreter_runtime = vec![InterpreterRuntime {
        binary: "python3".into(),
        dirs: vec![RuntimeDir {
            path: t.clone(),
            list_dir: true,
        }],
    }];
    let g = read_grants(Class::Advisory, &[PathBuf::from("/usr/bin/python3")], &c);
    assert!(g.paths.is_empty() && g.unlisted.is_empty(), "{g:?}");
    assert_eq!(g.warnings.len(), 1);
    assert_eq!(g.warnings[0].code, "W-SEC-009");
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn declared_directories_follow_list_dir_and_the_warning_names_them() {
    let t = scratch("declared");
    std::fs::create_dir_all(t.join("listed")).unwrap();
    std::fs::create_dir_all(t.join("hidden")).unwrap();
    let mut c = caps(&["tool"]);
    c.interpreter_runtime = vec![InterpreterRuntime {
        binary: "tool".into(),
        dirs: vec![
            RuntimeDir {
                path: t.join("listed"),
                list_dir: true,
            },
            RuntimeDir {
                path: t.join("hidden"),
                list_dir: false,
            },
            RuntimeDir {
                path: t.join("absent"),
                list_dir: true,
            },
        ],
    }];
    for class in [Class::Scoped, Class::Sealed] {
        let g = read_grants(class, &[], &c);
        assert!(g.paths.contains(&t.join("listed")), "{g:?}");
        assert!(!g.paths.contains(&t.join("hidden")), "{g:?}");
        assert_eq!(g.unlisted, [t.join("hidden")]);
        let w = g.warnings[0].to_string();
        assert!(w.starts_with("warning[W-SEC-009]: "), "{w}");
        assert!(
            w.contains(&format!("{} (read, list)", t.join("listed").display())),
            "{w}"
        );
        assert!(
            w.contains(&format!("{} (read, no listing)", t.join("hidden").display())),
            "{w}"
        );
        assert!(
            w.contains(&format!(
                "absent on this host, not granted: {}",
                t.join("absent").display()
            )),
            "{w}"
        );
        assert!(!g.paths.iter().any(|p| p.ends_with("absent")));
    }
    let _ = std::fs::remove_dir_all(&t);
}

#[test]
fn the_debian_python_gets_its_library_and_the_trust_store_only_with_network() {
    let python = Path::new("/usr/bin/python3.11");
    if !Path::new("/usr/lib/python3.11/lib-dynload").is_dir() || !python.exists() {
        return;
    }
    let c = caps(&["python3.11"]);
    let g = read_grants(Class::Scoped, &[python.to_path_buf()], &c);
    let has = |p: &str| g.paths.iter().any(|g| g == Path::new(p));
    assert!(has("/usr/lib/python3.11"), "{:?}", g.paths);
    assert!(library_dirs()
        .iter()
        .all(|l| g.paths.iter().any(|p| l.starts_with(p))));
    assert!(
        !g.paths.iter().any(|p| p.starts_with("/etc/ssl/certs")),
        "{:?}",
        g.paths
    );
    assert!(!g
        .paths
        .iter()
        .any(|p| p == Path::new("/usr/lib") || p == Path::new("/usr")));
    // With a network grant, the trust store (never the private keys beside it).
    let mut n = c.clone();
    n.network_allow = vec![NetRule::parse("example.com").unwrap()];
    let g = read_grants(Class::Scoped, &[python.to_path_buf()], &n);
    if Path::new("/etc/ssl/certs").is_dir() {
        assert!(
            g.paths.iter().any(|p| p == Path::new("/etc/ssl/certs")),
            "{:?}",
            g.paths
        );
    }
    assert!(!g
        .paths
        .iter()
        .any(|p| p == Path::new("/etc/ssl") || p.starts_with("/etc/ssl/private")));
    // A plain binary gets no interpreter or library directory.
    let g = read_grants(Class::Scoped, &[PathBuf::from("/usr/bin/cat")], &caps(&["cat"]));
    assert!(
        g.paths
            .iter()
            .all(|p| GENERAL.iter().any(|x| existing(Path::new(x)).as_ref() == Some(p))),
        "{:?}",
        g.paths
    );
    // Under sealed, what the root shows is left out, the interpreter's directory is kept
    // (the root rebinds it mappable).
    let g = read_grants(Class::Sealed, &[python.to_path_buf()], &n);
    assert!(
        g.paths.iter().any(|p| p == Path::new("/usr/lib/python3.11")),
        "{:?}",
        g.paths
    );
    assert!(
        !g.paths.iter().any(|p| p.starts_with("/usr/share/zoneinfo")),
        "{:?}",
        g.paths
    );
    assert!(
        !g.paths.iter().any(|p| p.starts_with("/etc/ssl/certs")),
        "{:?}",
        g.paths
    );
}

#[test]
fn computing_the_grants_costs_little() {
    let bins: Vec<PathBuf> = ["python3.11", "perl", "node", "cat", "sh"]
        .iter()
        .map(|b| Path::new("/usr/bin").join(b))
        .filter(|p| p.exists())
        .collect();
    let mut c = caps(&["python3.11"]);
    c.network_allow = vec![NetRule::parse("example.com").unwrap()];
    for class in [Class::Scoped, Class::Sealed] {
        let t = std::time::Instant::now();
        for _ in 0..100 {
            std::hint::black_box(read_grants(class, &bins, &c));
        }
        let per = t.elapsed() / 100;
        println!("read_grants({class}, {} binaries): {per:?} per call", bins.len());
        assert!(per < std::time::Duration::from_millis(50), "{per:?}");
    }
}

#[test]
fn the_root_shows_system_directories_and_the_etc_allow_list_only() {
    assert!(shows(Path::new("/usr/share/zoneinfo")));
    assert!(shows(Path::new("/etc/ssl/certs/ca-certificates.crt")));
    assert!(!shows(Path::new("/etc/ssl/private")));
    assert!(!shows(Path::new("/etc/shadow")));
    assert!(!shows(Path::new("/home")));
}
