//! The cost of one contained spawn: the median over 50 spawns of `/bin/true`, from the
//! call to the spawn function to the child's exit, for each class this host backs, beside a
//! plain `std::process::Command`. Then `mur exec --containment CLASS -- true` from process
//! start to exit, wall time and CPU of the whole process tree (`perf stat`'s task-clock),
//! beside one `bwrap --unshare-all` run of `true` (bubblewrap installed with apt-get when
//! missing), with the probe cached and not, beside another build of `mur` when
//! MURMUR_BASELINE_MUR names one, and beside the static (musl) build `scripts/release.sh`
//! left under the target directory (or MURMUR_STATIC_MUR names), alternated in one run, then
//! both builds' sizes; run as root, also `mur exec` as an ordinary account (uid 4242, no pids
//! cgroup of its own) beside root, both started through `setpriv` so that each carries the
//! same extra exec. Then plain bwrap and the sealed `mur exec`s counted two more ways: the
//! `wait4` sums of the bench's children and the whole machine's busy time (see
//! [`accounting`]). Printed, never asserted.
//!
//! `cargo bench --bench spawn`

mod support;

use murmur::containment::cgroup::Cgroup;
use murmur::containment::class::Class;
use murmur::containment::probe;
use murmur::containment::spawn::{self, Stdio};
use std::path::{Path, PathBuf};
use std::process::Command;
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
                    netns: true,
                    in_fork: None,
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
    exec_startup(&work);
    let _ = std::fs::remove_dir_all(&work);
}

/// Run `args` under `perf stat` (task-clock counts the process and every descendant, in
/// microseconds): (wall ms, CPU ms).
/// One measured command: its label, argv and environment.
type Row = (String, Vec<String>, Vec<(String, String)>);

/// `mur exec` start-up against bubblewrap.
fn exec_startup(work: &Path) {
    const N: usize = 21;
    let dir = work.join("exec");
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: b\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [\"true\"]\n",
    )
    .unwrap();
    let d = dir.display().to_string();
    let manifest = format!("{d}/murmur.yaml");
    let cache = format!("{d}/cache");
    let bwrap = support::bwrap_true(&d);
    let have_bwrap = support::have_bwrap();
    let baseline = std::env::var("MURMUR_BASELINE_MUR").ok();
    let mut rows: Vec<Row> = Vec::new();
    if have_bwrap {
        rows.push(("bwrap --unshare-all true".into(), bwrap, vec![]));
        rows.push((
            "bwrap plain (the ratios' base)".into(),
            support::bwrap_plain(),
            vec![],
        ));
    }
    let mur = env!("CARGO_BIN_EXE_mur").to_string();
    let statically = static_mur();
    let mut bins = vec![("this build", mur)];
    if let Some(b) = &baseline {
        bins.push(("baseline", b.clone()));
    }
    if let Some(b) = &statically {
        bins.push(("static (musl)", b.clone()));
    }
    for (label, bin) in &bins {
        for class in ["sealed", "scoped", "advisory"] {
            let args = exec_true(&[], bin, &manifest, &d, class);
            rows.push((
                format!("{label}: mur exec {class}"),
                args.clone(),
                vec![("MURMUR_CACHE_DIR".into(), cache.clone())],
            ));
            if class == "sealed" && *label == "this build" {
                rows.push((
                    format!("{label}: mur exec {class}, probe not cached"),
                    args,
                    vec![("MURMUR_CACHE_DIR".into(), "/proc/murmur-no-probe-cache".into())],
                ));
            }
        }
    }
    rows.extend(user_rows(work));
    let mut got: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); rows.len()];
    for _ in 0..N {
        for (i, (_, args, env)) in rows.iter().enumerate() {
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let e: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let (w, c) = support::perf_stat(&a, &e);
            got[i].0.push(w);
            got[i].1.push(c);
        }
    }
    println!("start-up of one command to its exit, median of {N}, alternated (CPU: the whole process tree)");
    if !have_bwrap {
        println!("  bwrap: not installed (apt-get install bubblewrap)");
    }
    let medians: Vec<(f64, f64)> = got
        .into_iter()
        .map(|(w, c)| (support::median_f64(w), support::median_f64(c)))
        .collect();
    for ((label, _, _), (w, c)) in rows.iter().zip(&medians) {
        println!("  {label:<44} wall {w:>6.1} ms   CPU {c:>6.1} ms");
    }
    // The ratio: each `mur exec` row's CPU over the plain bubblewrap line's.
    let plain = rows
        .iter()
        .position(|(label, _, _)| label.starts_with("bwrap plain"))
        .map(|i| medians[i].1);
    if let Some(plain) = plain {
        println!(
            "ratios of CPU against `{}` ({plain:.1} ms; goal for mur exec sealed <= 1.5x)",
            support::bwrap_plain().join(" ")
        );
        for ((label, _, _), (_, c)) in rows.iter().zip(&medians) {
            if label.contains("mur exec") {
                println!("  {label:<44} {:>5.2}x", c / plain);
            }
        }
    }
    accounting(&rows);
    sizes(&dir, statically.as_deref());
}

/// Two more ways to count the CPU of plain bwrap and of each build's sealed `mur exec`,
/// alternated, `ROUNDS` times `N` runs each: what the kernel charged to the bench's waited
/// children (`cutime + cstime` of /proc/self/stat: the sums `wait4` reports), and what the
/// whole machine spent (the busy ticks of /proc/stat, less the background rate measured
/// idle: kernel workers included, such as a namespace's teardown). bwrap's first process
/// exits without waiting for its sandbox's pid 1, which init reaps: `wait4` then leaves the
/// sandbox's side (its mounts, `true` itself) out of bwrap's count, while `perf stat`
/// (above) and the machine's count take it in.
fn accounting(rows: &[Row]) {
    const ROUNDS: usize = 3;
    const N: usize = 60;
    let wanted: Vec<&Row> = rows
        .iter()
        .filter(|(label, _, _)| {
            label.starts_with("bwrap plain")
                || (label.ends_with("mur exec sealed") && !label.contains("setpriv"))
        })
        .collect();
    let (Some(hz), Some(_)) = (support::clock_ticks(), support::machine_busy()) else {
        println!("CPU accounting: /proc/stat or /proc/self/stat unreadable");
        return;
    };
    let idle_rate = support::background_rate();
    let mut waited: Vec<Vec<f64>> = vec![Vec::new(); wanted.len()];
    let mut machine: Vec<Vec<f64>> = vec![Vec::new(); wanted.len()];
    for _ in 0..ROUNDS {
        for (i, (_, args, env)) in wanted.iter().enumerate() {
            let (c0, b0, t0) = (
                support::children_ticks().unwrap_or(0),
                support::machine_busy().unwrap_or(0),
                Instant::now(),
            );
            for _ in 0..N {
                let _ = Command::new(&args[0])
                    .args(&args[1..])
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status();
            }
            let secs = t0.elapsed().as_secs_f64();
            let per_run = |ticks: f64| ticks / hz * 1e3 / N as f64;
            waited[i].push(per_run(
                support::children_ticks().unwrap_or(0).saturating_sub(c0) as f64
            ));
            let busy = support::machine_busy().unwrap_or(0).saturating_sub(b0) as f64 - idle_rate * secs;
            machine[i].push(per_run(busy.max(0.0)));
        }
    }
    println!(
        "CPU per run counted two more ways, {ROUNDS} rounds of {N} alternated (background {:.1} ms/s taken out of the machine's)",
        idle_rate / hz * 1e3
    );
    let w: Vec<f64> = waited.into_iter().map(support::median_f64).collect();
    let m: Vec<f64> = machine.into_iter().map(support::median_f64).collect();
    for (i, (label, _, _)) in wanted.iter().enumerate() {
        let ratio = |v: &[f64]| {
            if i == 0 {
                String::new()
            } else {
                format!(" ({:.2}x)", v[i] / v[0])
            }
        };
        println!(
            "  {label:<44} wait4 of the tree {:>5.2} ms{}   the machine {:>5.2} ms{}",
            w[i],
            ratio(&w),
            m[i],
            ratio(&m)
        );
    }
}

/// The static build to set beside this one: `$MURMUR_STATIC_MUR`, else the `mur` that
/// `scripts/release.sh` leaves under the target directory, when there is one.
fn static_mur() -> Option<String> {
    if let Ok(p) = std::env::var("MURMUR_STATIC_MUR") {
        return Some(p);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/target", env!("CARGO_MANIFEST_DIR")));
    let built = format!(
        "{target}/{}-unknown-linux-musl/release/mur",
        std::env::consts::ARCH
    );
    Path::new(&built).is_file().then_some(built)
}

/// Both builds' sizes, each stripped of symbols as the release profile strips them (the bench
/// profile keeps them): this build's copied and `strip`ped, the static one as built.
fn sizes(dir: &Path, statically: Option<&str>) {
    let copy = dir.join("mur-glibc-stripped");
    let stripped = std::fs::copy(env!("CARGO_BIN_EXE_mur"), &copy).is_ok()
        && Command::new("strip")
            .arg(&copy)
            .status()
            .is_ok_and(|s| s.success());
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
    println!("size of mur (symbols stripped)");
    match stripped.then(|| size(&copy)).flatten() {
        Some(n) => println!("  this build (glibc, dynamic)   {n:>12} bytes"),
        None => println!("  this build (glibc, dynamic)   not measured: strip (binutils) failed"),
    }
    match statically.and_then(|p| size(Path::new(p))) {
        Some(n) => println!("  static (musl)                 {n:>12} bytes"),
        None => println!(
            "  static (musl)                 not built: scripts/release.sh, or MURMUR_STATIC_MUR=PATH"
        ),
    }
}

/// `mur exec` of `sealed` and `scoped` as root and as uid 4242 (a directory, a cache and a
/// workdir of its own; no cgroup: a PID namespace per command), each through `setpriv`.
fn user_rows(work: &Path) -> Vec<Row> {
    let setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !rustix::process::geteuid().is_root() || !setpriv {
        return Vec::new();
    }
    let mut rows = Vec::new();
    let mur = env!("CARGO_BIN_EXE_mur");
    for (who, uid) in [("root", 0u32), ("uid 4242", 4242)] {
        let d = work.join(format!("as-{uid}"));
        std::fs::create_dir_all(d.join("cache")).unwrap();
        std::fs::write(
            d.join("murmur.yaml"),
            "name: b\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [\"true\"]\n",
        )
        .unwrap();
        let _ = Command::new("chown")
            .args(["-R", &format!("{uid}:{uid}")])
            .arg(&d)
            .status();
        let _ = Command::new("chmod").arg("755").arg(work).status();
        let d = d.display().to_string();
        for class in ["sealed", "scoped"] {
            let uid = uid.to_string();
            let setpriv = ["setpriv", "--reuid", &uid, "--regid", &uid, "--clear-groups"];
            let args = exec_true(&setpriv, mur, &format!("{d}/murmur.yaml"), &d, class);
            rows.push((
                format!("{who} (setpriv): mur exec {class}"),
                args,
                vec![
                    ("MURMUR_CACHE_DIR".into(), format!("{d}/cache")),
                    ("HOME".into(), d.clone()),
                ],
            ));
        }
    }
    rows
}

/// `PREFIX... MUR exec --manifest M --workdir W --containment CLASS -- true`.
fn exec_true(prefix: &[&str], mur: &str, manifest: &str, workdir: &str, class: &str) -> Vec<String> {
    let tail = [
        mur,
        "exec",
        "--manifest",
        manifest,
        "--workdir",
        workdir,
        "--containment",
        class,
        "--",
        "true",
    ];
    prefix.iter().chain(tail.iter()).map(|s| s.to_string()).collect()
}
