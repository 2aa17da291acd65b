//! Says whether the tests are built by root: the few that act as a second account (only
//! root can stage one) are then compiled as ignored, with the reason, for anyone else, so
//! `cargo test` as an ordinary account counts them as not run, never as passed. Also hands
//! the build's facts to `mur version`: the git commit, the target and the compiler.

use std::process::Command;

fn main() {
    build_facts();
    println!("cargo:rustc-check-cfg=cfg(murmur_test_root)");
    println!("cargo:rerun-if-changed=build.rs");
    // The same user builds and runs the tests in the README's command; a change of user
    // (HOME, USER) builds anew.
    println!("cargo:rerun-if-env-changed=USER");
    println!("cargo:rerun-if-env-changed=HOME");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("");
    if euid == "0" {
        println!("cargo:rustc-cfg=murmur_test_root");
    }
}

/// `MURMUR_BUILD_COMMIT` (the commit HEAD named when this was built, or `unknown` outside a
/// git checkout), `MURMUR_BUILD_TARGET` and `MURMUR_BUILD_RUSTC`, for `mur version`.
fn build_facts() {
    let commit = output("git", &["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MURMUR_BUILD_COMMIT={commit}");
    // A new commit builds anew: HEAD, the ref it names and packed-refs (in a worktree,
    // git-path finds each where it is). Only files that exist are watched: cargo reruns the
    // script on every build for a missing one.
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watched.extend(output("git", &["symbolic-ref", "-q", "HEAD"]));
    for name in &watched {
        if let Some(p) = output("git", &["rev-parse", "--git-path", name]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    }
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MURMUR_BUILD_TARGET={target}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = output(&rustc, &["--version"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MURMUR_BUILD_RUSTC={version}");
}

/// A command's first line of output, when it ran and said something.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}
