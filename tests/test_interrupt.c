/* test_interrupt.c — Ctrl-C during a long CPU step: a real train process
 * on real Fashion-MNIST images blown up to 224x224 (convnet, batch 64,
 * one compute thread: several seconds per step under the sanitizers) gets
 * SIGINT while it computes and must exit 130 within a couple of seconds,
 * not at the end of the step. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"

static char *dir, *csv;

static void setup(void)
{
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 320);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void teardown(void)
{
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(interrupt, .init = setup, .fini = teardown, .timeout = 120);

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

Test(interrupt, sigint_during_a_long_cpu_step_exits_130_within_seconds)
{
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *argv[] = {
        (char *)train_bin(), "--resize", "224x224",   "--model", "convnet",       "--batch", "64",
        "--workers",         "0",        "--threads", "1",       "--no-progress", csv,       NULL};
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    cr_assert(pid > 0);
    /* the "data ..." line is printed (and flushed) once setup is done and
     * just before the first batch is loaded and stepped */
    char *text = NULL;
    for (int t = 0; t < 6000 && !(text && strstr(text, "\ndata ")); t++) {
        free(text);
        usleep(10000);
        text = read_whole_file(out, NULL, NULL);
    }
    cr_assert(text && strstr(text, "\ndata "), "train never started: %s", text ? text : "");
    free(text);
    usleep(1500000); /* 64 images loaded; well inside the first step */
    double t0 = now();
    kill(pid, SIGINT);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    double took = now() - t0;
    cr_assert(WIFEXITED(st), "killed by a signal instead of exiting");
    cr_assert_eq(WEXITSTATUS(st), 130);
    char *o = read_whole_file(out, NULL, NULL), *e = read_whole_file(err, NULL, NULL);
    cr_assert(strstr(e, "interrupted"), "%s", e);
    cr_assert(!strstr(o, "| "),
              "the first epoch finished before the signal, so this tests nothing:\n%s", o);
    cr_assert(took < 3.0, "exit took %.2f s after SIGINT (a step is not cut short)", took);
    free(o);
    free(e);
    free(out);
    free(err);
}
