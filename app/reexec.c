/* reexec.c — see reexec.h. */
#define _GNU_SOURCE
#include "app/reexec.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

void reexec_install_signals(void) { on_stop_signals(on_signal); }

int reexec_signal_received(void) { return parent_signal; }

int reexec_run(const options *o, char *const extra[], int quiet, summary_rec *s, char *strbuf,
               size_t len, int *status)
{
    *status = 1;
    if (parent_signal)
        return *status = 128 + parent_signal, -1;
    char summary[] = "/tmp/train-child-XXXXXX";
    int fd = mkstemp(summary);
    if (fd < 0) {
        fprintf(stderr, "train: cannot create a temporary file: %s\n", strerror(errno));
        return -1;
    }
    close(fd);
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
    pid_t pid = fork();
    if (pid == 0) {
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
        unlink(summary);
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
    char *line = read_whole_file(summary, NULL, NULL);
    unlink(summary);
    int rc = line && report_parse_summary(line, s, strbuf, len) == 0 ? 0 : -1;
    free(line);
    return rc;
}
