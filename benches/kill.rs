//! What supervision costs and what it buys, printed and never asserted. For each class this
//! host backs: the time from `kill -9` of `mur exec` (its command a `bash` that has started
//! two `sleep`s of its own) to the last of the session's processes gone (no longer running;
//! a zombie waiting for the host's init to reap it counts as gone), p50 and p99 over 50
//! kills; and the wall time of `mur exec --containment CLASS -- true` (the warden's start is
//! part of every session), median of 20, beside the same for `MURMUR_BASELINE_MUR` (another
//! build of `mur`, an earlier commit's) interleaved in the same run when it is set; for that
//! baseline also 5 kills per class, counting the sessions of which a process still ran 2 s
//! after the kill (those are then killed by the bench).
//!
//! Run as root, the kills are measured a second time as an ordinary account (uid 4242, no
//! supplementary groups, no pids cgroup of its own: a PID namespace per command bounds and
//! ends the session there).
//!
//! Run: `cargo bench --bench kill`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::ms;

fn show(d: Duration) -> String {
    format!("{:.1} ms", ms(d))
}

const KILLS: usize = 50;
const STARTS: usize = 20;
const BASELINE_KILLS: usize = 5;

/// Whether `pid` still runs (exists and is not a zombie).
fn running(pid: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|r| r.trim_start().chars().next())
        .is_some_and(|s| s != 'Z' && s != 'X')
}

/// The pids whose command line holds `marker`.
fn marked(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(String::from))
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
        })
        .collect()
}

/// The ordinary account of the second pass.
const USER: u32 = 4242;

/// Whether the kills run as [`USER`] (set once, before the second pass).
static AS_USER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn exec(mur: &str, manifest: &Path, work: &Path, class: &str, cmd: &[&str]) -> Command {
    let mut c = Command::new(mur);
    if AS_USER.load(std::sync::atomic::Ordering::SeqCst) {
        use std::os::unix::process::CommandExt;
        let home = manifest.parent().unwrap_or(Path::new("/tmp"));
        c.env("HOME", home).env("MURMUR_CACHE_DIR", home.join("cache"));
        // SAFETY: three syscalls between fork and exec, nothing allocated.
        unsafe {
            c.pre_exec(|| {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(USER) != 0
                    || libc::setuid(USER) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    c.args(["exec", "--manifest"])
        .arg(manifest)
        .arg("--workdir")
        .arg(work)
        .args(["--containment", class, "--"])
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// One kill: start, wait for both sleeps, SIGKILL `mur`, time until none runs. `Err` with
/// how many still ran at `bound` (killed here), or 0 when the sleeps never started.
fn one_kill(
    mur: &str,
    manifest: &Path,
    work: &Path,
    class: &str,
    n: usize,
    bound: Duration,
) -> Result<Duration, usize> {
    let marker = format!("{}.{n}{}", 7000 + n, std::process::id());
    let script = format!("sleep {marker} & sleep {marker}; true");
    let mut child = exec(mur, manifest, work, class, &["bash", "-c", &script])
        .spawn()
        .map_err(|_| 0usize)?;
    let until = Instant::now() + Duration::from_secs(20);
    let pids = loop {
        let p: Vec<String> = marked(&marker).into_iter().filter(|p| running(p)).collect();
        if p.len() >= 2 {
            break p;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            return Err(0);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let t = Instant::now();
    let _ = child.kill();
    let _ = child.wait();
    while pids.iter().any(|p| running(p)) {
        if t.elapsed() > bound {
            let left: Vec<&String> = pids.iter().filter(|p| running(p)).collect();
            for p in &left {
                let _ = Command::new("kill").args(["-9", p.as_str()]).status();
            }
            return Err(left.len());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(t.elapsed())
}

fn quantile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    let mur = env!("CARGO_BIN_EXE_mur").to_string();
    let baseline = std::env::var("MURMUR_BASELINE_MUR")
        .ok()
        .filter(|b| !b.is_empty());
    let dir = std::env::temp_dir().join(format!("murmur-kill-bench-{}", std::process::id()));
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let manifest: PathBuf = dir.join("murmur.yaml");
    std::fs::write(
        &manifest,
        "name: kill-bench\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [bash, sleep, \"true\"]\n",
    )
    .unwrap();
    println!("kill -9 of mur exec to the last process of its session gone, {KILLS} kills");
    let backed = kills(&mur, baseline.as_deref(), &manifest, &work);
    if rustix::process::geteuid().is_root() {
        // The same as an ordinary account with no cgroup, in a directory it owns.
        let user_dir = dir.join("user");
        std::fs::create_dir_all(user_dir.join("work")).unwrap();
        std::fs::copy(&manifest, user_dir.join("murmur.yaml")).unwrap();
        let _ = Command::new("chown")
            .args(["-R", &format!("{USER}:{USER}")])
            .arg(&user_dir)
            .status();
        let _ = Command::new("chmod").args(["755"]).arg(&dir).status();
        AS_USER.store(true, std::sync::atomic::Ordering::SeqCst);
        println!("as uid {USER} with no pids cgroup of its own (a PID namespace per command):");
        kills(&mur, None, &user_dir.join("murmur.yaml"), &user_dir.join("work"));
        AS_USER.store(false, std::sync::atomic::Ordering::SeqCst);
    }
    starts(&mur, baseline.as_deref(), &manifest, &work, backed);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The kills of every class this host backs (as the current account): the classes.
fn kills(mur: &str, baseline: Option<&str>, manifest: &Path, work: &Path) -> Vec<&'static str> {
    let (mur, manifest, work) = (mur.to_string(), manifest.to_path_buf(), work.to_path_buf());
    let mut backed = Vec::new();
    for class in ["advisory", "scoped", "sealed"] {
        let ok = exec(&mur, &manifest, &work, class, &["true"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("  {class:<9} not backed here");
            continue;
        }
        backed.push(class);
        let mut times: Vec<Duration> = Vec::new();
        let mut lost = 0;
        for n in 0..KILLS {
            match one_kill(&mur, &manifest, &work, class, n, Duration::from_secs(30)) {
                Ok(d) => times.push(d),
                Err(_) => lost += 1,
            }
        }
        if times.is_empty() {
            println!("  {class:<9} no kill could be measured");
            continue;
        }
        let (p50, p99, max) = (
            quantile(&mut times, 0.5),
            quantile(&mut times, 0.99),
            quantile(&mut times, 1.0),
        );
        println!(
            "  {class:<9} p50 {}  p99 {}  max {}  ({lost} not measured)",
            show(p50),
            show(p99),
            show(max)
        );
        if let Some(b) = baseline {
            let survived = (0..BASELINE_KILLS)
                .filter(|n| one_kill(b, &manifest, &work, class, KILLS + n, Duration::from_secs(2)).is_err())
                .count();
            println!("  {class:<9} baseline: {survived} of {BASELINE_KILLS} sessions still ran a process 2 s after the kill");
        }
    }
    backed
}

/// `mur exec -- true` of each class, this build beside the baseline.
fn starts(mur: &str, baseline: Option<&str>, manifest: &Path, work: &Path, backed: Vec<&'static str>) {
    println!("mur exec --containment CLASS -- true, wall time, median of {STARTS}");
    for class in backed {
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..STARTS {
            let t = Instant::now();
            let _ = exec(mur, manifest, work, class, &["true"]).status();
            ours.push(t.elapsed());
            if let Some(b) = baseline {
                let t = Instant::now();
                let _ = exec(b, manifest, work, class, &["true"]).status();
                theirs.push(t.elapsed());
            }
        }
        let mut line = format!("  {class:<9} this build {}", show(quantile(&mut ours, 0.5)));
        if !theirs.is_empty() {
            line.push_str(&format!("  baseline {}", show(quantile(&mut theirs, 0.5))));
        }
        println!("{line}");
    }
}
