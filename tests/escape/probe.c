/* The escape probe: one attempt per run, named by argv[1]; prints
 * "<case> <syscall> <errno> <verdict>" where verdict is contained (the attempt failed),
 * escaped (it worked), or allowed (it worked and is expected to). Built by the tests with cc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008U
#endif
#if defined(__x86_64__)
#define LDSO "/lib64/ld-linux-x86-64.so.2"
#elif defined(__aarch64__)
#define LDSO "/lib/ld-linux-aarch64.so.1"
#endif

static const char *name;

static int report(const char *call, long rc, int ok_is_expected) {
    int e = rc < 0 ? errno : 0;
    const char *verdict = rc < 0 ? "contained" : (ok_is_expected ? "allowed" : "escaped");
    printf("%s %s %d %s\n", name, call, e, verdict);
    fflush(stdout);
    return rc < 0 || ok_is_expected ? 0 : 3;
}

/* An open that worked on a passwd file: report it with the file's line count, so the
 * caller can tell the host's file from a sealed root's synthetic one. */
static int report_passwd(const char *call, int fd) {
    if (fd < 0) return report(call, -1, 0);
    char b[65536];
    ssize_t n = read(fd, b, sizeof b);
    int lines = 0;
    for (ssize_t i = 0; i < n; i++) lines += b[i] == '\n';
    printf("%s %s 0 escaped %d\n", name, call, lines);
    fflush(stdout);
    return 3;
}

static int tcp(const char *ip, int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return report("socket", -1, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return report("connect", connect(s, (struct sockaddr *)&a, sizeof a), 0);
}

static int unix_connect(const char *path, int abstract) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) return report("socket", -1, 0);
    struct sockaddr_un a = {0};
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path + (abstract ? 1 : 0), path, sizeof a.sun_path - 2);
    return report("connect", connect(s, (struct sockaddr *)&a, sizeof a), 0);
}

/* A child in a new user and network namespace (made by clone or clone3): report whether
 * the namespace was created and whether a raw socket (CAP_NET_RAW in the new namespace)
 * could be opened in it. */
static int new_userns(const char *call, long pid) {
    if (pid < 0) return report(call, -1, 0);
    if (pid == 0) _exit(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) >= 0 ? 0 : 1);
    int st = 0;
    waitpid(pid, &st, 0);
    int raw = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("%s %s 0 escaped raw-socket-%s\n", name, call, raw ? "opened" : "refused");
    fflush(stdout);
    return 3;
}

/* Run argv in a child (fexec: 0 execv, 1 execveat(fd, "", AT_EMPTY_PATH), 2 execv of
 * /proc/self/fd/<fd>); report the exec's errno (the child's exit code) and whether the
 * marker the executed probe would create exists. */
static int exec_marker(const char *call, int how, int fd, char **argv, const char *marker) {
    pid_t pid = fork();
    if (pid == 0) {
        char path[64];
        if (how == 1) syscall(SYS_execveat, fd, "", argv, environ, AT_EMPTY_PATH);
        else if (how == 2) { snprintf(path, sizeof path, "/proc/self/fd/%d", fd); execv(path, argv); }
        else execv(argv[0], argv);
        _exit(errno & 0x7f);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int ran = access(marker, F_OK) == 0;
    printf("%s %s %d %s\n", name, call, WIFEXITED(st) ? WEXITSTATUS(st) : 128, ran ? "escaped" : "contained");
    fflush(stdout);
    return ran ? 3 : 0;
}

/* A memfd holding a copy of this probe, made with memfd_create flags `flags`. */
static int memfd_copy(unsigned flags) {
    int fd = syscall(SYS_memfd_create, "probe", flags);
    if (fd < 0) return -1;
    int self = open("/proc/self/exe", O_RDONLY);
    char b[65536];
    ssize_t n;
    while (self >= 0 && (n = read(self, b, sizeof b)) > 0)
        if (write(fd, b, n) != n) return -1;
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    name = argv[1];
    const char *arg = argc > 2 ? argv[2] : "";
    char buf[256];
    if (!strcmp(name, "read-shadow")) return report("open", open("/etc/shadow", O_RDONLY), 0);
    if (!strcmp(name, "create-outside")) return report("open", open(arg, O_CREAT | O_WRONLY, 0600), 0);
    if (!strcmp(name, "symlink-read")) {
        symlink("/etc/passwd", "passwd-link");
        return report_passwd("open", open("passwd-link", O_RDONLY));
    }
    if (!strcmp(name, "hardlink")) return report("link", link("/etc/passwd", "passwd-hard"), 0);
    if (!strcmp(name, "rename-out")) {
        close(open("to-move", O_CREAT | O_WRONLY, 0600));
        return report("rename", rename("to-move", arg), 0);
    }
    if (!strcmp(name, "proc-cwd")) return report("open", open("/proc/self/cwd/../escape-proc-cwd", O_CREAT | O_WRONLY, 0600), 0);
    if (!strcmp(name, "proc-root")) {
        snprintf(buf, sizeof buf, "/proc/%d/root/etc/passwd", (int)getppid());
        return report_passwd("open", open(buf, O_RDONLY));
    }
    if (!strcmp(name, "proc-fd-reopen")) {
        int fd = open("/dev/urandom", O_RDONLY);
        if (fd < 0) return report("open", -1, 0);
        snprintf(buf, sizeof buf, "/proc/self/fd/%d", fd);
        return report("open", open(buf, O_WRONLY), 0);
    }
    if (!strcmp(name, "leaked-fd")) return report("read", read(atoi(arg), buf, 1), 0);
    if (!strcmp(name, "mknod")) return report("mknod", mknod("blockdev", S_IFBLK | 0600, makedev(8, 0)), 0);
    if (!strcmp(name, "mkfifo")) return report("mkfifo", mkfifo("fifo", 0600), 0);
    if (!strcmp(name, "exec-copy")) {
        char *args[] = {"escape-copy", NULL};
        execv("./escape-copy", args);
        return report("execve", -1, 0);
    }
    if (!strcmp(name, "tcp-public")) return tcp("192.0.2.1", 80);
    if (!strcmp(name, "tcp-loopback")) return tcp("127.0.0.1", atoi(arg));
    if (!strcmp(name, "udp-send")) {
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(atoi(arg));
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        return report("sendto", sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a), 0);
    }
    if (!strcmp(name, "unix-abstract")) return unix_connect(arg, 1);
    if (!strcmp(name, "unix-path")) return unix_connect(arg, 0);
    if (!strcmp(name, "io_uring_setup")) {
        char params[120] = {0};
        return report("io_uring_setup", syscall(SYS_io_uring_setup, 1, params), 0);
    }
    if (!strcmp(name, "userfaultfd")) return report("userfaultfd", syscall(SYS_userfaultfd, 0), 0);
    if (!strcmp(name, "bpf")) {
        char attr[128] = {0};
        return report("bpf", syscall(SYS_bpf, 0, attr, sizeof attr), 0);
    }
    if (!strcmp(name, "perf_event_open")) {
        struct perf_event_attr attr = {0};
        attr.size = sizeof attr;
        attr.type = PERF_TYPE_SOFTWARE;
        attr.config = PERF_COUNT_SW_CPU_CLOCK;
        return report("perf_event_open", syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0), 0);
    }
    if (!strcmp(name, "open_by_handle_at")) {
        char handle[136] = {0};
        ((unsigned int *)handle)[0] = 128;
        return report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, handle, O_RDONLY), 0);
    }
    if (!strcmp(name, "keyctl")) return report("keyctl", syscall(SYS_keyctl, 0, -3, 0), 0);
    if (!strcmp(name, "ptrace-parent")) return report("ptrace", ptrace(PTRACE_ATTACH, getppid(), 0, 0), 0);
    if (!strcmp(name, "unshare")) return report("unshare", unshare(CLONE_NEWUSER), 0);
    if (!strcmp(name, "mount")) {
        mkdir("mnt", 0700);
        return report("mount", mount("none", "mnt", "tmpfs", 0, NULL), 0);
    }
    if (!strcmp(name, "kill-host")) return report("kill", kill(atoi(arg), SIGTERM), 0);
    /* Acting on a host process (its pid in arg) other than by a signal: its limits, its
     * priority and scheduling, its robust futex list. */
    if (!strcmp(name, "prlimit-host")) {
        struct rlimit r = {1, 1};
        return report("prlimit64", syscall(SYS_prlimit64, atoi(arg), RLIMIT_NOFILE, &r, NULL), 0);
    }
    if (!strcmp(name, "setpriority-host")) return report("setpriority", setpriority(PRIO_PROCESS, atoi(arg), 7), 0);
    if (!strcmp(name, "setpriority-user")) {
        /* Every process of the caller's uid, set to the caller's own nice value (so a
         * success changes nothing on the host but is still reported). */
        errno = 0;
        int own = getpriority(PRIO_PROCESS, 0);
        return report("setpriority", setpriority(PRIO_USER, 0, own), 0);
    }
    if (!strcmp(name, "sched_setaffinity-host")) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        return report("sched_setaffinity", syscall(SYS_sched_setaffinity, atoi(arg), sizeof set, &set), 0);
    }
    if (!strcmp(name, "sched_setscheduler-host")) {
        struct sched_param p = {0};
        return report("sched_setscheduler", syscall(SYS_sched_setscheduler, atoi(arg), SCHED_BATCH, &p), 0);
    }
    if (!strcmp(name, "sched_setparam-host")) {
        struct sched_param p = {0};
        return report("sched_setparam", syscall(SYS_sched_setparam, atoi(arg), &p), 0);
    }
    if (!strcmp(name, "sched_setattr-host")) {
        /* struct sched_attr, version 0 (48 bytes): SCHED_OTHER at nice 9. */
        unsigned int a[12] = {0};
        a[0] = 48;
        a[4] = 9;
        return report("sched_setattr", syscall(SYS_sched_setattr, atoi(arg), a, 0), 0);
    }
    if (!strcmp(name, "get_robust_list-host")) {
        void *head = NULL;
        size_t len = 0;
        return report("get_robust_list", syscall(SYS_get_robust_list, atoi(arg), &head, &len), 0);
    }
    if (!strcmp(name, "prlimit-parent")) {
        /* A background child that keeps touching the marker arg (for 15 s at most, its
         * stdio closed so it holds no pipe of the caller), then RLIMIT_NOFILE 0 on the
         * parent (`mur` under scoped), which must not keep the session from being killed. */
        pid_t bg = fork();
        if (bg == 0) {
            close(0);
            close(1);
            close(2);
            for (int i = 0; i < 300; i++) {
                int fd = open(arg, O_CREAT | O_WRONLY | O_TRUNC, 0600);
                if (fd >= 0) close(fd);
                usleep(50000);
            }
            _exit(0);
        }
        struct rlimit r = {0, 0};
        return report("prlimit64", syscall(SYS_prlimit64, getppid(), RLIMIT_NOFILE, &r, NULL), 0);
    }
    if (!strcmp(name, "stat-shadow")) {
        struct stat st;
        return report("stat", stat("/etc/shadow", &st), 1);
    }
    if (!strcmp(name, "fork-bomb")) {
        int n = 0;
        for (; n < 5000; n++) {
            pid_t p = fork();
            if (p == 0) { pause(); _exit(0); }
            if (p < 0) break;
        }
        int e = errno;
        printf("%s fork %d %s %d\n", name, e, n < 300 ? "contained" : "escaped", n);
        fflush(stdout);
        kill(0, SIGKILL);
        return 0;
    }
    if (!strcmp(name, "fd-exhaust")) {
        int n = 0;
        while (n < 100000 && open("/dev/null", O_RDONLY) >= 0) n++;
        int e = errno;
        printf("%s open %d %s %d\n", name, e, n <= 1024 ? "contained" : "escaped", n);
        return 0;
    }
    if (!strcmp(name, "mark")) return close(open(arg, O_CREAT | O_WRONLY, 0600));
    if (!strcmp(name, "clone-newuser"))
        return new_userns("clone", syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
    if (!strcmp(name, "clone3-newuser")) {
        struct clone_args ca;
        memset(&ca, 0, sizeof ca);
        ca.flags = CLONE_NEWUSER | CLONE_NEWNET;
        ca.exit_signal = SIGCHLD;
        return new_userns("clone3", syscall(SYS_clone3, &ca, sizeof ca));
    }
    if (!strcmp(name, "tiocsti") || !strcmp(name, "tiocsti-high")) {
        /* Push arg into the input of the terminal on stderr, then write a visible line. */
        unsigned long req = TIOCSTI;
        if (!strcmp(name, "tiocsti-high")) req |= 1UL << 32;
        long rc = 0;
        for (const char *c = arg; *c && rc >= 0; c++) rc = syscall(SYS_ioctl, 2, req, c);
        int e = errno;
        dprintf(2, "visible-output\n");
        errno = e;
        return report("ioctl", rc, 0);
    }
    if (!strcmp(name, "chmod-outside")) return report("chmod", chmod(arg, 0777), 0);
    if (!strcmp(name, "fchmodat-outside")) return report("fchmodat", syscall(SYS_fchmodat, AT_FDCWD, arg, 0777), 0);
    if (!strcmp(name, "chown-outside")) return report("chown", chown(arg, getuid(), getgid()), 0);
    if (!strcmp(name, "lchown-outside")) return report("fchownat", fchownat(AT_FDCWD, arg, getuid(), getgid(), AT_SYMLINK_NOFOLLOW), 0);
    if (!strcmp(name, "utimensat-outside")) {
        struct timespec t[2] = {{1, 0}, {1, 0}};
        return report("utimensat", utimensat(AT_FDCWD, arg, t, 0), 0);
    }
#ifdef SYS_utimes
    if (!strcmp(name, "utimes-outside")) {
        struct timeval t[2] = {{1, 0}, {1, 0}};
        return report("utimes", syscall(SYS_utimes, arg, t), 0);
    }
#endif
    if (!strcmp(name, "setxattr-outside")) return report("setxattr", setxattr(arg, "user.murmur.escape", "x", 1, 0), 0);
    if (!strcmp(name, "removexattr-outside")) return report("removexattr", removexattr(arg, "user.murmur.before"), 0);
    if (!strcmp(name, "truncate-outside")) return report("truncate", truncate(arg, 0), 0);
#ifdef LDSO
    if (!strcmp(name, "ldso-exec")) {
        /* The loader (an allowed file) maps a workdir copy of this probe: mmap(PROT_EXEC). */
        char *args[] = {LDSO, "./probe-copy", "mark", (char *)arg, NULL};
        return exec_marker("ld.so", 0, -1, args, arg);
    }
#endif
    if (!strcmp(name, "memfd-execveat") || !strcmp(name, "memfd-proc-exec") || !strcmp(name, "memfd-sealed-execveat")) {
        int sealed = !strcmp(name, "memfd-sealed-execveat");
        int fd = memfd_copy(MFD_CLOEXEC * !sealed | (sealed ? MFD_NOEXEC_SEAL : 0));
        if (fd < 0) return report("memfd_create", -1, 0);
        char *args[] = {"probe", "mark", (char *)arg, NULL};
        int proc = !strcmp(name, "memfd-proc-exec");
        if (proc) fcntl(fd, F_SETFD, 0);
        return exec_marker(proc ? "execve" : "execveat", proc ? 2 : 1, fd, args, arg);
    }
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
}
