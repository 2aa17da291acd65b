/* The escape probe: one attempt per run, named by argv[1]; prints
 * "<case> <syscall> <errno> <verdict>" where verdict is contained (the attempt failed),
 * escaped (it worked), or allowed (it worked and is expected to), sometimes followed by
 * more words (a line count, a reply, a byte count). Built by the tests with cc. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/perf_event.h>
#include <netdb.h>
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

/* A TCP connection to an IPv4 address ("a.b.c.d", port) with a 5 s receive timeout: the
 * socket, or -1 with errno set. */
static int tcp4_connect(const char *ip, const char *port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(port));
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        errno = EINVAL;
        return -1;
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return -1;
    struct timeval tv = {5, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

/* Send "ping\n", shut the write side, and read the whole reply (up to 4 KiB, each read
 * under the socket's receive timeout) into reply (NUL-terminated): its length, -2 with
 * errno set when the send failed, or -1 with errno set when nothing came before an error. */
static ssize_t ping(int s, char *reply, size_t cap) {
    if (send(s, "ping\n", 5, MSG_NOSIGNAL) != 5) return -2;
    shutdown(s, SHUT_WR);
    size_t got = 0;
    while (got < cap - 1) {
        ssize_t n = read(s, reply + got, cap - 1 - got);
        if (n < 0 && got == 0) return -1;
        if (n <= 0) break;
        got += n;
    }
    reply[got] = 0;
    return got;
}

/* One exchange on the connected socket s (or s < 0: the connect failed, errno set):
 * "<case> <call> 0 allowed <reply>" on a non-empty reply (its blanks and control bytes as
 * '_', a final newline dropped), "<case> read <errno> contained" on none ("send" when
 * the request could not even be sent). */
static int exchange(const char *call, int s) {
    if (s < 0) return report("connect", -1, 0);
    char reply[4096];
    ssize_t n = ping(s, reply, sizeof reply);
    int e = errno;
    close(s);
    if (n < 0) {
        errno = e;
        return report(n == -2 ? "send" : "read", -1, 0);
    }
    if (n == 0) {
        printf("%s read 0 contained\n", name);
        fflush(stdout);
        return 0;
    }
    if (reply[n - 1] == '\n') reply[--n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (reply[i] <= ' ' || reply[i] > '~') reply[i] = '_';
    printf("%s %s 0 allowed %s\n", name, call, reply);
    fflush(stdout);
    return 0;
}

/* A DNS query for the A record of qname, recursion desired, in q: its length, or -1 when
 * the name does not fit (a label over 63 bytes, the name over 255). */
static int dns_query(const char *qname, unsigned char *q, size_t cap) {
    static const unsigned char header[12] = {0x4d, 0x55, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0};
    memcpy(q, header, sizeof header);
    size_t at = sizeof header;
    const char *label = qname;
    while (*label) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        if (len == 0 || len > 63 || at + 1 + len + 5 > cap || at + 1 + len > 12 + 254) return -1;
        q[at++] = (unsigned char)len;
        memcpy(q + at, label, len);
        at += len;
        label += len + (dot ? 1 : 0);
    }
    q[at++] = 0;
    q[at++] = 0;
    q[at++] = 1; /* QTYPE A */
    q[at++] = 0;
    q[at++] = 1; /* QCLASS IN */
    return (int)at;
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
        /* Lo is up inside the namespace, so sendto works; the host-side socket (arg's port)
         * grades whether the datagram got out. */
        return report("sendto", sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a), 1);
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
    /* Network egress: a TCP exchange ("ping\n", half-close, the whole reply) with a name,
     * an IPv4 literal, or [::1]; a hand-made DNS query to 127.0.0.1:53; one UDP datagram;
     * raw and packet sockets; connection churn; a slow reader of a large reply. */
    if (!strcmp(name, "tcp-name")) {
        if (argc < 4) return 2;
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        int rc = getaddrinfo(argv[2], argv[3], &hints, &res);
        if (rc != 0) {
            printf("%s getaddrinfo %d contained %s\n", name, rc, gai_strerror(rc));
            fflush(stdout);
            return 0;
        }
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct timeval tv = {5, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(s, res->ai_addr, res->ai_addrlen) < 0) {
            int e = errno;
            close(s);
            errno = e;
            s = -1;
        }
        freeaddrinfo(res);
        return exchange("connect", s);
    }
    if (!strcmp(name, "tcp-ip")) {
        if (argc < 4) return 2;
        return exchange("connect", tcp4_connect(argv[2], argv[3]));
    }
    if (!strcmp(name, "tcp-self")) {
        /* A listener on 127.0.0.1 and a connection to it from this process: whether the
         * command may serve and reach itself on its namespace's loopback. */
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {0};
        socklen_t len = sizeof a;
        a.sin_family = AF_INET;
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *)&a, &len) < 0)
            return report("listen", -1, 1);
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) < 0) return report("connect", -1, 1);
        return report("accept", accept(l, NULL, NULL), 1);
    }
    if (!strcmp(name, "tcp6")) {
        int s = socket(AF_INET6, SOCK_STREAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct sockaddr_in6 a = {0};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(atoi(arg));
        a.sin6_addr = in6addr_loopback;
        return report("connect", connect(s, (struct sockaddr *)&a, sizeof a), 0);
    }
    if (!strcmp(name, "dns-repeat")) {
        /* N questions for the one name argv[3], one after the other, each answer read
         * before the next question: each is answered from the relay's cache, a decision
         * each, as fast as the relay answers. */
        int n = atoi(arg), answered = 0;
        const char *qname = argc > 3 ? argv[3] : "localhost";
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct timeval tv = {1, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(53);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        unsigned char q[512], r[512];
        int len = dns_query(qname, q, sizeof q);
        for (int i = 0; len > 0 && i < n; i++) {
            if (sendto(s, q, len, 0, (struct sockaddr *)&a, sizeof a) != len) break;
            if (recv(s, r, sizeof r, 0) > 0) answered++;
        }
        printf("dns-repeat recv 0 allowed %d\n", answered);
        fflush(stdout);
        return 0;
    }
    if (!strcmp(name, "dns-flood")) {
        /* N questions for N different names under argv[3], sent as fast as the socket
         * takes them, answers not awaited: a flood of refusals for the trace. */
        int n = atoi(arg), sent = 0;
        const char *base = argc > 3 ? argv[3] : "flood.test";
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(53);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        for (int i = 0; i < n; i++) {
            char qname[300];
            unsigned char q[512];
            snprintf(qname, sizeof qname, "n%d.%s", i, base);
            int len = dns_query(qname, q, sizeof q);
            if (len > 0 && sendto(s, q, len, 0, (struct sockaddr *)&a, sizeof a) == len) sent++;
        }
        printf("dns-flood sendto 0 allowed %d\n", sent);
        fflush(stdout);
        return 0;
    }
    if (!strcmp(name, "dns-query")) {
        unsigned char q[512], r[4096];
        int len = dns_query(arg, q, sizeof q);
        if (len < 0) {
            errno = EINVAL;
            return report("query", -1, 0);
        }
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(53);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        struct timeval tv = {3, 0};
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) return report("connect", -1, 0);
        if (send(s, q, len, 0) != len) return report("send", -1, 0);
        ssize_t n;
        /* The answer to this query (its id echoed); anything else is skipped. */
        do n = recv(s, r, sizeof r, 0);
        while (n >= 0 && (n < 12 || r[0] != q[0] || r[1] != q[1] || !(r[2] & 0x80)));
        if (n < 0) return report("recv", -1, 0);
        int rcode = r[3] & 0x0f, answers = r[6] << 8 | r[7];
        printf("%s recv 0 %s rcode=%d answers=%d\n", name, rcode == 0 && answers > 0 ? "allowed" : "contained",
               rcode, answers);
        fflush(stdout);
        return 0;
    }
    if (!strcmp(name, "udp-to")) {
        if (argc < 4) return 2;
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        if (s < 0) return report("socket", -1, 0);
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons(atoi(argv[3]));
        inet_pton(AF_INET, argv[2], &a.sin_addr);
        /* Whether the datagram got out is graded by the host's receiver, not here. */
        return report("sendto", sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a), 1);
    }
    if (!strcmp(name, "raw-socket")) return report("socket", socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), 0);
    if (!strcmp(name, "packet-socket")) return report("socket", socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), 0);
    if (!strcmp(name, "churn")) {
        /* argv: N IP PORT [SECONDS]. N connections one after another, in rotation: closed at
         * once; 1 KiB written, closed unread; a whole exchange; reset (SO_LINGER 0). Then one
         * exchange that decides the verdict (with the count of failed connects after the
         * reply), then a sleep of SECONDS so the caller can look at the relay idle. */
        if (argc < 5) return 2;
        int n = atoi(argv[2]), failed = 0;
        char junk[1024], reply[4096];
        memset(junk, 'j', sizeof junk);
        for (int i = 0; i < n; i++) {
            int s = tcp4_connect(argv[3], argv[4]);
            if (s < 0) {
                failed++;
                continue;
            }
            switch (i % 4) {
            case 1:
                send(s, junk, sizeof junk, MSG_NOSIGNAL);
                break;
            case 2:
                ping(s, reply, sizeof reply);
                break;
            case 3: {
                struct linger l = {1, 0};
                setsockopt(s, SOL_SOCKET, SO_LINGER, &l, sizeof l);
                break;
            }
            }
            close(s);
        }
        int s = tcp4_connect(argv[3], argv[4]);
        if (s < 0) return report("connect", -1, 0);
        ssize_t got = ping(s, reply, sizeof reply);
        int e = errno;
        close(s);
        if (got <= 0) {
            printf("%s %s %d contained failed-connects=%d\n", name, got == -2 ? "send" : "read", got < 0 ? e : 0,
                   failed);
        } else {
            if (reply[got - 1] == '\n') reply[--got] = 0;
            for (ssize_t i = 0; i < got; i++)
                if (reply[i] <= ' ' || reply[i] > '~') reply[i] = '_';
            printf("%s exchange 0 allowed %s failed-connects=%d\n", name, reply, failed);
        }
        fflush(stdout);
        if (argc > 5) sleep(atoi(argv[5]));
        return 0;
    }
    if (!strcmp(name, "slow-read")) {
        /* argv: IP PORT BYTES. "ping\n", half-close, then the reply read 4 KiB at a time with
         * a 1 ms pause every 64 reads; allowed when BYTES came, the count after the verdict. */
        if (argc < 5) return 2;
        int s = tcp4_connect(argv[2], argv[3]);
        if (s < 0) return report("connect", -1, 0);
        if (send(s, "ping\n", 5, MSG_NOSIGNAL) != 5) return report("send", -1, 0);
        shutdown(s, SHUT_WR);
        char b[4096];
        long long count = 0, reads = 0;
        ssize_t n;
        while ((n = read(s, b, sizeof b)) > 0) {
            count += n;
            if (++reads % 64 == 0) usleep(1000);
        }
        int e = n < 0 ? errno : 0;
        close(s);
        printf("%s read %d %s %lld\n", name, e, count == atoll(argv[4]) ? "allowed" : "contained", count);
        fflush(stdout);
        return 0;
    }
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
}
