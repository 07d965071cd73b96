/* reexec.c — see reexec.h. */
#define _GNU_SOURCE
#include "app/reexec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define REEXEC_GRACE_S 10.0

static volatile sig_atomic_t parent_signal;
static volatile pid_t running;

static void on_signal(int sig)
{
    parent_signal = sig;
    if (running > 0) {
        kill(running, sig);
        kill(running, SIGCONT); /* a stopped run must see it too */
    }
}

/* The text in fd from its start (at most max bytes), or NULL when empty */
static char *read_fd_text(int fd, size_t max)
{
    size_t cap = 4096, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap >= max)
                break;
            buf = xrealloc(buf, cap *= 2);
        }
        ssize_t r = pread(fd, buf + n, cap - 1 - n, (off_t)n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (n == 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

void reexec_install_signals(void) { on_stop_signals(on_signal); }

int reexec_signal_received(void) { return parent_signal; }

int reexec_run(const options *o, char *const extra[], int quiet, summary_rec *s, char *strbuf,
               size_t len, int *status)
{
    *status = 1;
    if (parent_signal)
        return *status = 128 + parent_signal, -1;
    /* the child's summary comes back in a file with no name, which it
     * inherits: a SIGKILL of either process leaves nothing to remove */
    int fd = memfd_create("train-child-summary", MFD_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "train: cannot create the configuration's summary file: %s\n",
                strerror(errno));
        return -1;
    }
    char summary[48];
    snprintf(summary, sizeof summary, "/proc/self/fd/%d", fd);
    int nextra = 0;
    while (extra && extra[nextra])
        nextra++;
    char **argv = xcalloc((size_t)(o->argc + nextra + 4), sizeof(char *));
    int n = 0;
    argv[n++] = o->argv[0];
    for (int i = 1; i < o->argc; i++)
        if (!o->sweep_arg[i])
            argv[n++] = o->argv[i];
    for (int i = 0; i < nextra; i++)
        argv[n++] = extra[i];
    argv[n++] = "--sweep-child";
    argv[n++] = "--summary-out";
    argv[n++] = summary;
    argv[n] = NULL;
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* the run dies with the sweep (its loader dies with it), even by
         * SIGKILL; a parent gone before prctl took effect is seen here */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        fcntl(fd, F_SETFD, 0); /* open across the exec */
        if (quiet) {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0)
                dup2(null, 1);
        }
        execv("/proc/self/exe", argv);
        fprintf(stderr, "train: cannot run myself (/proc/self/exe): %s\n", strerror(errno));
        _exit(1);
    }
    free(argv);
    if (pid < 0) {
        fprintf(stderr, "train: fork: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    running = pid;
    /* as long as the run takes; after a stop signal (passed on to it) only
     * REEXEC_GRACE_S more, then it is killed */
    int wstatus = 1 << 8, got;
    while ((got = wait_child_for(pid, 0.2, &wstatus)) == 0)
        if (parent_signal) {
            wstatus = reap_bounded(pid, REEXEC_GRACE_S, "the configuration's run");
            break;
        }
    running = 0;
    if (got < 0 || wstatus == -1)
        wstatus = 1 << 8;
    *status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    char *line = read_fd_text(fd, 1 << 20);
    close(fd);
    int rc = line && report_parse_summary(line, s, strbuf, len) == 0 ? 0 : -1;
    free(line);
    return rc;
}
