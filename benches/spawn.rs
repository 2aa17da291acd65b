//! The cost of one contained spawn: the median over 50 spawns of `/bin/true`, from the
//! call to the spawn function to the child's exit, for each class this host backs, beside a
//! plain `std::process::Command`. Printed, never asserted.
//!
//! `cargo bench --bench spawn`

use murmur::containment::cgroup::Cgroup;
use murmur::containment::class::Class;
use murmur::containment::{probe, spawn};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 50;
const TRUE: &str = "/bin/true";

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let report = probe::probe(Path::new(env!("CARGO_BIN_EXE_mur")), Class::Sealed);
    let work = std::env::temp_dir().join(format!("murmur-spawn-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let program = PathBuf::from(TRUE);
    let allowed = [program.clone()];
    let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];

    let plain: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let s = Command::new(TRUE).status().unwrap();
            assert!(s.success());
            t.elapsed()
        })
        .collect();
    println!("spawn of {TRUE}, median of {RUNS}, to exit");
    println!("  std::process::Command   {}", ms(median(plain)));

    let (host, limit) = murmur::containment::class::host_class(&report);
    for class in [Class::Advisory, Class::Scoped, Class::Sealed] {
        if class > host {
            println!(
                "  {:<22}  not backed here: {}",
                class.as_str(),
                limit.as_deref().unwrap_or("?")
            );
            continue;
        }
        let cgroup = Cgroup::create(&format!("bench-{}-{}", class.as_str(), std::process::id()), 256).ok();
        let times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                let mut child = spawn::spawn(spawn::Spawn {
                    class,
                    landlock_abi: report.landlock_abi,
                    program: &program,
                    args: &[],
                    allowed_binaries: &allowed,
                    read_dirs: &[],
                    read_unlisted: &[],
                    workdir: &work,
                    workdir_held: None,
                    workdir_exec: false,
                    unix_sockets: false,
                    env: &env,
                    cgroup: cgroup.as_ref(),
                    rlimits: spawn::Rlimits::default(),
                    runtime: false,
                    net: None,
                    stdin: Stdio::null(),
                    stdout: Stdio::null(),
                    stderr: Stdio::null(),
                })
                .unwrap_or_else(|d| panic!("{}: {d}", class.as_str()));
                assert!(child.wait().unwrap().success());
                t.elapsed()
            })
            .collect();
        println!("  {:<22}  {}", class.as_str(), ms(median(times)));
    }
    let _ = std::fs::remove_dir_all(&work);
}
