/* SPDX-License-Identifier: BSD-3-Clause */
/* rig-mesh-keeper: runs one program in a process tree that ends whole.
 *
 * The executors start every process they run (a native node, a compiler of
 * the wasm backend) through a keeper of its own: librig carries this
 * program's image and executes it from a sealed memfd
 * (src/mesh/child.c), so there is nothing to install.  The keeper
 *
 *   - makes itself a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the
 *     program leaves behind -- a child it did not wait for, a daemon that
 *     called setsid and forked again -- is re-parented to the keeper, not
 *     to init;
 *   - runs the program as its only child, in a process group of its own;
 *   - when the program ends, kills its process group and every process
 *     re-parented to it, reaps them all, and ends as the program ended (the
 *     same exit status, or the same signal), so its parent reads the
 *     program's own wait status;
 *   - on SIGTERM sends SIGTERM to the program's process group (the host's
 *     polite request), on SIGUSR1, SIGINT, SIGHUP or SIGQUIT kills the
 *     whole tree at once, and when its parent is gone (the host exited or
 *     was killed) does the same, within KEEPER_POLL_MS.
 *
 * Usage (by librig only):
 *   rig-mesh-keeper PARENT_PID STACK_BYTES FDS EXEC_FD PROGRAM [ARG...]
 * PARENT_PID is the host (the keeper refuses to start for another parent);
 * STACK_BYTES the program's RLIMIT_STACK (0: inherit); FDS a bit mask of
 * the descriptors 3..6 the program gets (bit 0: fd 3), all others above 2
 * are closed; EXEC_FD the descriptor whose file runs (fexecve), or -1 to
 * run PROGRAM found in PATH.  Exit status 125: bad usage or no such parent;
 * 126: the program could not start (fork failed).
 *
 * libc only, single-threaded; it never allocates after the fork. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How often the keeper looks whether its parent is gone. */
#define KEEPER_POLL_MS 100
/* How long a sweep may take before the keeper gives up on a process it
 * cannot reap (one stuck in the kernel), so that it never hangs. */
#define SWEEP_MS 5000

static bool parse_long(const char *s, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

static void close_from(int lo, int hi)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) == 0) {
        return;
    }
#endif
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) {
        max = 65536;
    }
    for (long fd = lo; fd <= hi && fd < max; fd++) {
        close((int)fd);
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000,
                          .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* SIGKILLs every child of this process but the program (which the caller
 * handles), as /proc lists them, and reaps those that are zombies already;
 * returns how many there were.  The list includes zombies (a child stays
 * in it until reaped).  The keeper is single-threaded: its task is its
 * pid. */
static int kill_others(pid_t program)
{
    char path[300], buf[4096];
    int found = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    if (n >= 0) {
        buf[n] = '\0';
        /* A full buffer may cut the list: the next round sees the rest. */
        for (char *p = buf;;) {
            char *end = NULL;
            long pid = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            p = end;
            if (pid > 0 && pid != program) {
                kill((pid_t)pid, SIGKILL);
                waitpid((pid_t)pid, NULL, WNOHANG);
                found++;
            }
        }
        return found;
    }
    /* No children file (a kernel without CONFIG_PROC_CHILDREN): /proc. */
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return 0;
    }
    pid_t self = getpid();
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0) {
            close(fd);
        }
        if (n <= 0) {
            continue;
        }
        buf[n] = '\0';
        char *rp = strrchr(buf, ')');
        char state = 0;
        int ppid = 0;
        pid_t pid = (pid_t)atoi(e->d_name);
        if (rp != NULL && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 &&
            ppid == self && pid != program) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, WNOHANG);
            found++;
        }
    }
    closedir(d);
    return found;
}

/* Whether the program has ended; it stays a zombie (not reaped), so its
 * pid, which is also its group's id, cannot be reused meanwhile. */
static bool program_ended(pid_t program)
{
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    return waitid(P_PID, (id_t)program, &si, WEXITED | WNOHANG | WNOWAIT) ==
               0 &&
           si.si_pid == program;
}

/* Kills the program, its group and everything re-parented to the keeper,
 * and reaps all but the program, round after round: a process killed
 * hands its own children to the keeper, which kills them in the next
 * round.  Done when the program has ended and no other child is left;
 * gives up after SWEEP_MS (a process stuck in the kernel). */
static void sweep(pid_t program)
{
    long until = now_ms() + SWEEP_MS;
    for (;;) {
        kill(-program, SIGKILL);
        kill(program, SIGKILL);
        /* In this order: once the program is seen ended, its children were
         * re-parented already, so the list below has them. */
        bool ended = program_ended(program);
        int others = kill_others(program);
        if ((ended && others == 0) || now_ms() >= until) {
            return;
        }
        sleep_ms(1);
    }
}

/* Ends the keeper as status says the program ended. */
static _Noreturn void mirror(int status)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

/* In the child: the program, with default signals and its descriptors. */
static _Noreturn void run(char **argv, long exec_fd, long stack)
{
    setpgid(0, 0);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig != SIGKILL && sig != SIGSTOP) {
            signal(sig, SIG_DFL);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (stack > 0) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_STACK, &rl) == 0) {
            rl.rlim_cur = (rlim_t)stack;
            if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
            }
            setrlimit(RLIMIT_STACK, &rl);
        }
    }
    if (exec_fd >= 0) {
        fcntl((int)exec_fd, F_SETFD, FD_CLOEXEC);
        fexecve((int)exec_fd, argv, environ);
        /* Where execveat is missing or intercepted: the same file by its
         * /proc path, which the kernel opens before closing exec_fd. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%ld", exec_fd);
        execve(path, argv, environ);
    } else {
        execvp(argv[0], argv);
    }
    _exit(127);
}

int main(int argc, char **argv)
{
    long long parent, stack, fds, exec_fd;
    if (argc < 6 || !parse_long(argv[1], &parent) ||
        !parse_long(argv[2], &stack) || !parse_long(argv[3], &fds) ||
        !parse_long(argv[4], &exec_fd) || fds < 0 || fds > 15 || exec_fd < -1 ||
        exec_fd > 6) {
        return 125;
    }
    /* Descriptors: 0-2, and 3..6 as the mask says; nothing of the host's. */
    for (int i = 0; i < 4; i++) {
        if ((fds & (1 << i)) == 0) {
            close(3 + i);
        }
    }
    close_from(7, ~0u >> 1);

    /* The signals the keeper waits for, blocked, with their default
     * dispositions: an ignored SIGCHLD (inherited through exec from a host
     * that ignores it) would reap the program behind the keeper's back. */
    static const int waited[] = {SIGCHLD, SIGTERM, SIGUSR1,
                                 SIGINT,  SIGHUP,  SIGQUIT};
    sigset_t set, old;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof(waited) / sizeof(waited[0]); i++) {
        signal(waited[i], SIG_DFL);
        sigaddset(&set, waited[i]);
    }
    sigprocmask(SIG_BLOCK, &set, &old);
    /* Subreaper before the program starts: nothing it forks escapes. */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    if (getppid() != (pid_t)parent) {
        return 125; /* the host is gone already */
    }
    pid_t child = fork();
    if (child == 0) {
        run(&argv[5], (long)exec_fd, (long)stack);
    }
    if (child < 0) {
        return 126;
    }
    setpgid(child, child);
    for (int i = 0; i < 4; i++) {
        close(3 + i);
    }

    bool end_all = false;
    for (;;) {
        siginfo_t si;
        struct timespec poll = {.tv_sec = 0,
                                .tv_nsec = KEEPER_POLL_MS * 1000000L};
        int sig = sigtimedwait(&set, &si, &poll);
        if (sig == SIGTERM) {
            /* The program may have left its group: it gets one too. */
            kill(-child, SIGTERM);
            kill(child, SIGTERM);
        } else if (sig == SIGUSR1 || sig == SIGINT || sig == SIGHUP ||
                   sig == SIGQUIT) {
            end_all = true;
        }
        if (getppid() != (pid_t)parent) {
            end_all = true; /* the host is gone */
        }
        if (end_all || program_ended(child)) {
            break;
        }
        /* Orphans that ended meanwhile: reap them (the program runs, so
         * waitid cannot name it). */
        for (;;) {
            memset(&si, 0, sizeof(si));
            if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 ||
                si.si_pid == 0 || si.si_pid == child) {
                break;
            }
            waitpid(si.si_pid, NULL, WNOHANG);
        }
    }
    /* Whatever the program started ends with it. */
    sweep(child);
    int status = 0;
    long until = now_ms() + SWEEP_MS;
    while (waitpid(child, &status, WNOHANG) == 0 && now_ms() < until) {
        sleep_ms(1);
    }
    mirror(status);
}
