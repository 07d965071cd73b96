/* forked.c — see forked.h. */
#define _GNU_SOURCE
#include "tests/fakecuda/suite/forked.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static int in_child;

/* LeakSanitizer asks this before its exit-time check. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return in_child; }

void run_forked(void (*fn)(void *), void *arg, forked *r)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with a test that timed out */
        in_child = 1;
        close(p[0]);
        dup2(p[1], 2);
        close(p[1]);
        fn(arg);
        fflush(NULL);
        exit(0);
    }
    close(p[1]);
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    ssize_t n;
    while ((n = read(p[0], buf + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (cap - len < 1024)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    close(p[0]);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    r->err = buf;
}
