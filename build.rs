//! Says whether the tests are built by root: the few that act as a second account (only
//! root can stage one) are then compiled as ignored, with the reason, for anyone else, so
//! `cargo test` as an ordinary account counts them as not run, never as passed.

fn main() {
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
