//! Containment of the runtime's child processes: the class decision (`class`), the host
//! probe (`probe`), the seccomp policy (`seccomp`, with its argument conditions in
//! `seccomp_args` and its unconditional calls compiled as ranges by `seccomp_ranges`), the
//! landlock rules (`rules`), the ELF closure of allowed binaries
//! (`elf`), the per-session network namespace and egress relay (`egress`), the composed root of `sealed` (`sealed`), the pids cgroup (`cgroup`), the steps
//! a child installs on itself (`child`, in the order of `child_steps`), the one spawn
//! function (`spawn`, over the clone-and-exec primitive `process`) and the one
//! policy every contained child of a session is started under (`child_policy`). `confine` is
//! the daemon's confinement of itself. `runtime_dirs` decides what a contained child may
//! read beyond its workdir (interpreter runtimes, the trust store, time zone data).

/// `[(name, number)]` of the named `libc::SYS_*` calls: the policy lists as data.
macro_rules! syscalls {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), libc::$name)),*]
    };
}

pub mod cgroup;
pub mod child;
pub mod child_policy;
pub mod child_steps;
pub mod class;
pub mod confine;
pub mod egress;
pub mod elf;
pub mod host_env;
pub mod probe;
pub mod probe_cache;
pub mod process;
pub mod rules;
pub mod runtime_dirs;
pub mod sealed;
pub mod seccomp;
pub mod seccomp_args;
pub mod seccomp_ranges;
pub mod spawn;
pub mod warden;

/// seccompiler's name for the native architecture.
pub fn seccomp_arch() -> seccompiler::TargetArch {
    #[cfg(target_arch = "x86_64")]
    return seccompiler::TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    return seccompiler::TargetArch::aarch64;
}

/// The kernel's `AUDIT_ARCH_*` value for the native architecture (`seccomp_data.arch`).
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;
