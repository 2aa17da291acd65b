//! What a killed `mur` leaves behind: the processes whose command line holds a marker,
//! whether any of them still runs (a zombie does not: it waits only for the host's init
//! to reap it), the warden of a `mur`, and what a session's pids cgroup still holds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Every process whose command line holds `marker`, with its state letter.
pub fn marked(marker: &str) -> Vec<(u32, char)> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(marker) {
            found.push((pid, state(pid)));
        }
    }
    found
}

/// The state letter of `pid` (`Z` zombie, `R`, `S` …; `X` when it is gone).
pub fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|rest| rest.trim_start().chars().next())
        .unwrap_or('X')
}

/// The processes holding `marker` that still run (neither gone nor a zombie).
pub fn live(marker: &str) -> Vec<u32> {
    marked(marker)
        .into_iter()
        .filter(|(_, s)| *s != 'Z' && *s != 'X')
        .map(|(p, _)| p)
        .collect()
}

/// Wait until `count` live `sleep` processes hold `marker` (at most 20 s); panics
/// otherwise. For a marker that the launching `mur`'s own command line holds too, where
/// counting every holder would also count `mur` and its forks before they exec.
pub fn wait_for_sleeps(marker: &str, count: usize) {
    let until = Instant::now() + Duration::from_secs(20);
    while sleeps(marker).len() < count {
        assert!(
            Instant::now() < until,
            "{count} sleeps holding {marker} never appeared: {:?}",
            marked(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live `sleep` processes holding `marker`.
pub fn sleeps(marker: &str) -> Vec<u32> {
    live(marker)
        .into_iter()
        .filter(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            cmd.split(|b| *b == 0).next() == Some(b"sleep".as_slice())
        })
        .collect()
}

/// How long after now the last live process holding `marker` was gone, polled up to
/// `bound`; `None` when one still ran then.
pub fn gone_within(marker: &str, bound: Duration) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if live(marker).is_empty() {
            return Some(t.elapsed());
        }
        if t.elapsed() > bound {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The warden of the `mur` whose pid is `mur`: its child running `__warden` (started by
/// whichever of its threads made the session's child policy).
pub fn warden_of(mur: u32) -> Option<u32> {
    marked("__warden").into_iter().map(|(p, _)| p).find(|p| {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let ppid = stat.rsplit(')').next().and_then(|r| r.split_whitespace().nth(1));
        ppid == Some(mur.to_string().as_str())
    })
}

/// The pids cgroup directories named `murmur-<session>` (v1 `pids` hierarchy or v2).
pub fn session_cgroups(session: &str) -> Vec<PathBuf> {
    let name = format!("murmur-{session}");
    ["/sys/fs/cgroup/pids", "/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .iter()
        .map(|m| PathBuf::from(m).join(&name))
        .filter(|p| p.is_dir())
        .collect()
}

/// The processes in `cgroup` that still run (a killed one whose parent died stays listed
/// as a zombie until the host's init reaps it).
pub fn live_in(cgroup: &std::path::Path) -> Vec<u32> {
    std::fs::read_to_string(cgroup.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|p| !matches!(state(*p), 'Z' | 'X'))
        .collect()
}

/// The pids cgroup `pid` is in (its directory under the v1 `pids` mount, or the v2 one).
pub fn pids_cgroup_of(pid: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    for line in own.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        let rel = path.trim_start_matches('/');
        if ctl.split(',').any(|c| c == "pids") {
            return Some(PathBuf::from("/sys/fs/cgroup/pids").join(rel));
        }
        if ctl.is_empty() && line.starts_with("0::") {
            return Some(PathBuf::from("/sys/fs/cgroup").join(rel));
        }
    }
    None
}

/// [`wait_for_sleeps`], then the session pids cgroup the sleeps are in (`None` when they
/// are in none of the runtime's, as an `advisory` session may be where no cgroup is made).
pub fn session_cgroup_of_sleeps(marker: &str, count: usize) -> Option<PathBuf> {
    wait_for_sleeps(marker, count);
    let pid = *sleeps(marker).first()?;
    pids_cgroup_of(&pid.to_string()).filter(|c| {
        c.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("murmur-ses_"))
    })
}

/// The session cgroup of a killed `mur`, by a second after `killed`: removed, or holding
/// only zombies (killed processes whose parent died, listed until the host's init reaps
/// them; then the warden or the next launch removes it).
pub fn assert_cgroup_ended(label: &str, cgroup: Option<&std::path::Path>, killed: Instant) {
    let Some(c) = cgroup else { return };
    while c.exists() && !live_in(c).is_empty() && killed.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        !c.exists() || live_in(c).is_empty(),
        "{label}: a second after the kill the session's cgroup still holds running processes: {:?}",
        live_in(c).iter().map(|p| described(*p)).collect::<Vec<_>>()
    );
}

/// `pid`, its state, parent and command line, for a failure's message.
pub fn described(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ppid = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().nth(1))
        .unwrap_or("?");
    let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
    format!("{pid} {} ppid {ppid}: {}", state(pid), cmd.trim_end())
}
