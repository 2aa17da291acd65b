//! The child side of `spawn`, in order: each step one call of `child` (or of the sealed
//! plan), its failure reported through the spawn's error pipe by step number. Under
//! `sealed`, the child enters the namespaces and hands the start over to pid 1, whose own
//! steps end in the command's start. Runs between clone and exec, in `mur`'s memory: only
//! syscalls on values the parent prepared, nothing allocated.

use super::child;
use super::process::Side;
use super::sealed::{self, Failure, Plan};
use std::io;
use std::os::fd::RawFd;

/// Everything the child's steps use, prepared by the parent.
pub struct ChildSteps<'a> {
    /// The spawn's error pipe (its write end).
    pub err_fd: RawFd,
    /// The step `MURMUR_FAULT` makes fail (0: none).
    pub fault: u8,
    /// A delegated `mur`: dies with its parent, keeps its capabilities.
    pub runtime: bool,
    pub parent_pid: i32,
    /// Scoped or sealed.
    pub contained: bool,
    /// No network namespace to join or make: the network is closed by the filter and the
    /// ruleset instead.
    pub closed_network: bool,
    /// No cgroup bounds the session: the command runs in a PID namespace of its own (under
    /// `scoped` made here, under `sealed` by the plan) whose pid 1 dies with `mur`.
    pub pid_namespace: bool,
    /// A pidfd of `mur` (readable once it has exited), for pid 1 to see that `mur` did not
    /// die before it asked to die with it.
    pub mur_pidfd: libc::c_int,
    /// What joins the session cgroup (written `0` while this process is one thread).
    pub join_fd: Option<RawFd>,
    /// The session's user (when not root) and network namespaces to join.
    pub join: Option<(Option<RawFd>, RawFd)>,
    /// The id maps the child writes when it makes its network namespace (or, with its
    /// network closed, its PID namespace) inside a user namespace of its own (not root, no
    /// session namespace, not `sealed`).
    pub own_net_maps: Option<(&'a [u8], &'a [u8])>,
    /// The hard limits set, each `(resource, value)`.
    pub limits: &'a [(super::child::Resource, u64)],
    pub filter: Option<&'a seccompiler::BpfProgram>,
    pub ruleset_fd: Option<RawFd>,
    /// Under `sealed`: the landlock rights of the private `/tmp` and `/etc`.
    pub private_rules: Option<(u64, u64)>,
}

impl ChildSteps<'_> {
    /// Write `f` to the error pipe; the error to end the child with.
    fn report(&self, f: Failure) -> io::Error {
        let _ = child::write_fd(self.err_fd, &f.encode());
        io::Error::from_raw_os_error(f.errno)
    }

    /// Step `n`'s outcome (failed on purpose under `MURMUR_FAULT`), reported if it failed.
    fn run(&self, n: u8, r: io::Result<()>) -> io::Result<()> {
        let r = if self.fault == n {
            Err(io::Error::from_raw_os_error(libc::ENOTRECOVERABLE))
        } else {
            r
        };
        r.map_err(|e| {
            self.report(Failure {
                step: n,
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                detail: 0,
            })
        })
    }

    /// The child's steps; `Ok` means exec. Under `sealed` (`plan`) this process hands the
    /// start over to pid 1 and never returns `Ok`.
    pub fn run_child(&self, side: &Side<'_>, plan: Option<&mut Plan>) -> io::Result<()> {
        // Its own session and process group, with no controlling terminal: no TIOCSTI
        // into the operator's terminal, no job-control signals from it. (Under `sealed`,
        // pid 1 makes another: the process `mur` waits for and signals.)
        self.run(16, child::new_session())?;
        if self.runtime {
            self.run(17, child::die_with_parent(self.parent_pid))?;
        }
        if let Some(fd) = self.join_fd {
            self.run(1, child::write_fd(fd, b"0"))?;
        }
        if let Some((user, net)) = self.join {
            if let Some(u) = user {
                self.run(18, child::join_namespace(u, libc::CLONE_NEWUSER))?;
            }
            self.run(18, child::join_namespace(net, libc::CLONE_NEWNET))?;
        }
        let Some(p) = plan else {
            if self.contained && self.join.is_none() && !self.closed_network {
                self.run(2, child::enter_network_namespace())?;
                if let Some((uid_map, gid_map)) = self.own_net_maps {
                    self.run(sealed::STEP_ID_MAPS, child::write_id_maps(uid_map, gid_map))?;
                }
                self.run(STEP_LOOPBACK, loopback_up())?;
            } else if let (true, Some((uid_map, gid_map))) = (self.closed_network, self.own_net_maps) {
                // No network namespace to be had, but a PID namespace needs a user
                // namespace to hold it (not root).
                self.run(sealed::STEP_UNSHARE, child::enter_user_namespace())?;
                self.run(sealed::STEP_ID_MAPS, child::write_id_maps(uid_map, gid_map))?;
            }
            if !self.pid_namespace {
                return self.confine();
            }
            self.run(STEP_PID_NAMESPACE, child::enter_pid_namespace())?;
            let mut init = || self.pid1(side, None);
            // SAFETY: a start that may hand over (a PID namespace); `init` allocates nothing.
            #[allow(unsafe_code)]
            let e = unsafe { side.hand_over(&mut init) };
            return Err(self.report(Failure {
                step: sealed::STEP_FORK_INIT,
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                detail: 0,
            }));
        };
        p.enter().map_err(|f| self.report(f))?;
        if p.owns_network() {
            self.run(STEP_LOOPBACK, loopback_up())?;
        }
        let mut init = || self.pid1(side, Some(&mut *p));
        // SAFETY: a start that may hand over (`sealed`); `init` allocates nothing.
        #[allow(unsafe_code)]
        let e = unsafe { side.hand_over(&mut init) };
        Err(self.report(Failure {
            step: sealed::STEP_FORK_INIT,
            errno: e.raw_os_error().unwrap_or(libc::EINVAL),
            detail: 0,
        }))
    }

    /// The limits, capabilities, filter and ruleset, in the process that execs (under
    /// `sealed`, pid 1, whose command inherits them).
    fn confine(&self) -> io::Result<()> {
        self.run(3, child::cloexec_from_3())?;
        self.run(15, child::unblock_signals())?;
        self.run(
            4,
            self.limits
                .iter()
                .try_for_each(|&(resource, value)| child::limit(resource, value)),
        )?;
        if !self.runtime {
            self.run(5, child::drop_capabilities())?;
        }
        self.run(6, child::no_new_privs())?;
        if let Some(f) = self.filter {
            self.run(7, seccompiler::apply_filter(f).map_err(io_of))?;
        }
        if let Some(fd) = self.ruleset_fd {
            if let Some((tmp, etc)) = self.private_rules {
                self.run(
                    sealed::STEP_PRIVATE_RULES,
                    child::landlock_add_path(fd, c"/tmp", tmp)
                        .and_then(|_| child::landlock_add_path(fd, c"/etc", etc)),
                )?;
            }
            self.run(8, child::landlock_restrict(fd))?;
        }
        Ok(())
    }

    /// Pid 1, `mur`'s own child: its session, death with `mur` where no cgroup would end
    /// the namespace, the forwarded signals, the root (under `sealed`), the containment
    /// steps, then the command's start (its pid). `process` then releases the start and
    /// reaps; pid 1 never execs.
    fn pid1(&self, side: &Side<'_>, p: Option<&mut Plan>) -> io::Result<libc::pid_t> {
        self.run(16, child::new_session())?;
        if self.pid_namespace {
            self.run(STEP_DIE_WITH_MUR, child::die_with_mur(self.mur_pidfd))?;
        }
        self.run(sealed::STEP_SIGNALS, sealed::catch_forwarded_signals())?;
        if let Some(p) = p {
            p.compose_root().map_err(|f| self.report(f))?;
        }
        self.confine()?;
        // The command gets a landlock domain below pid 1's (the same rules): landlock then
        // refuses it pid 1 through ptrace and /proc/1/mem, environ and the like.
        let mut command = || -> libc::c_int {
            if let Some(fd) = self.ruleset_fd {
                if self.run(8, child::landlock_restrict(fd)).is_err() {
                    return 127;
                }
            }
            side.exec()
        };
        // SAFETY: this is the handed-over process; `command` allocates nothing.
        #[allow(unsafe_code)]
        let pid = unsafe { side.start_command(&mut command) };
        let errno = |e: &io::Error| e.raw_os_error().unwrap_or(libc::EINVAL);
        self.run(
            sealed::STEP_FORK_COMMAND,
            pid.as_ref()
                .map(|_| ())
                .map_err(|e| io::Error::from_raw_os_error(errno(e))),
        )?;
        pid
    }
}

/// The step that brings up `lo` in a network namespace the child made for itself.
const STEP_LOOPBACK: u8 = 21;
/// The step that makes a `scoped` command's PID namespace.
const STEP_PID_NAMESPACE: u8 = 22;
/// The step that ties pid 1 of a command's PID namespace to `mur`'s life.
const STEP_DIE_WITH_MUR: u8 = 23;

/// A network namespace of the child's own is the session's kind, without the relay: `lo`
/// up and every IPv4 destination delivered locally, so a command may still serve and reach
/// itself on loopback while nothing beyond it is reached (a connection to anywhere else is
/// refused at once, as no socket of the namespace listens there).
fn loopback_up() -> io::Result<()> {
    super::egress::netlink::loopback_up_with_local_default()
}

fn io_of(e: seccompiler::Error) -> io::Error {
    match e {
        seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => io,
        _ => io::Error::from_raw_os_error(libc::EINVAL),
    }
}
