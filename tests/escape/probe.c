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
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

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
    fprintf(stderr, "unknown case %s\n", name);
    return 2;
}
