/* test_hostile_shutdown.c — shutdown when a peer misbehaves (issue 26):
 * a stopped loader supervisor must not hold train's exit forever (it is
 * killed after a bound, and stderr says so), a stopped configuration run
 * of a sweep must not hold the sweep's Ctrl-C, a sweep killed by SIGKILL
 * must take its configuration run and that run's loader with it and leave
 * no file, and tools/fuzz_image must
 * leave no scratch file in /dev/shm on any exit, and a ring mapping handed
 * to the caller (the Python module's batches) must outlive the loader. The
 * Python module itself is checked in tests/python/test_hostile.py. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/feed.h"
#include "support/helpers.h"

static char *dir, *csv;

static void setup(void)
{
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void teardown(void)
{
    spawn_kill_all();
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(hostile_shutdown, .init = setup, .fini = teardown);

/* Wait (at most secs) until pid has at least want children. */
static int wait_children(int pid, int want, int *out, int max, double secs)
{
    double end = now_sec() + secs;
    int n;
    while ((n = list_children(pid, out, max)) < want && now_sec() < end)
        usleep(10000);
    return n;
}

static void assert_gone(const int *pids, int n)
{
    for (int i = 0; i < n; i++) {
        int gone = wait_process_gone(pids[i], 2);
        if (!gone) /* not left stopped, holding the suite's output pipes */
            kill(pids[i], SIGKILL);
        cr_assert(gone, "process %d is still there", pids[i]);
    }
}

static char *slurp(const char *path)
{
    char *s = read_whole_file(path, NULL, NULL);
    return s ? s : strdup("");
}

Test(hostile_shutdown, a_stopped_supervisor_is_killed_after_a_bound_and_named)
{
    char *out = path_join(dir, "stop.out"), *err = path_join(dir, "stop.err");
    char *argv[] = {(char *)train_bin(),
                    "--workers",
                    "2",
                    "--batch",
                    "16",
                    "--epochs",
                    "50",
                    "--test-slow-step",
                    "0.02",
                    "--no-progress",
                    csv,
                    NULL};
    pid_t pid = spawn_bg(argv, out, err);
    int sup[4];
    cr_assert_eq(wait_children(pid, 1, sup, 4, 60), 1, "train started no loader supervisor");
    int workers[8], nw = wait_children(sup[0], 2, workers, 8, 60);
    cr_assert_eq(nw, 2, "the supervisor forked %d of 2 workers", nw);
    usleep(200000); /* training under way */
    cr_assert_eq(kill(sup[0], SIGSTOP), 0);
    usleep(100000);
    double t0 = now_sec();
    kill(pid, SIGINT);
    int st = spawn_wait(pid, 30); /* before the fix: waitpid forever, and this fails */
    double took = now_sec() - t0;
    char *e = slurp(err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, e);
    cr_assert(took < 5, "exit took %.1f s after SIGINT", took); /* no wait for a stopped one */
    char want[96];
    snprintf(want, sizeof want, "supervisor %d is stopped (signal %d); killed", sup[0], SIGSTOP);
    cr_assert(strstr(e, want), "want '%s' in: %s", want, e);
    assert_gone(sup, 1);
    assert_gone(workers, nw);
    free(e);
    free(out);
    free(err);
}

Test(hostile_shutdown, a_sweep_interrupted_while_its_run_is_stopped_exits_130)
{
    char *out = path_join(dir, "sweep.out"), *err = path_join(dir, "sweep.err");
    char *argv[] = {
        (char *)train_bin(), "--workers", "0,1",           "--batch", "16", "--epochs", "50",
        "--test-slow-step",  "0.02",      "--no-progress", csv,       NULL};
    pid_t pid = spawn_bg(argv, out, err);
    int run[4];
    cr_assert_eq(wait_children(pid, 1, run, 4, 60), 1, "the sweep started no run");
    usleep(300000);
    cr_assert_eq(kill(run[0], SIGSTOP), 0);
    usleep(100000);
    double t0 = now_sec();
    kill(pid, SIGINT);
    int st = spawn_wait(pid, 30); /* before the fix: the stopped run never saw the SIGINT */
    double took = now_sec() - t0;
    char *e = slurp(err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d: %s", st, e);
    cr_assert(took < 10, "exit took %.1f s after SIGINT", took);
    assert_gone(run, 1);
    free(e);
    free(out);
    free(err);
}

/* fuzz_image's scratch file of process pid, in /dev/shm or /tmp. */
static int scratch_left(pid_t pid)
{
    char p[64];
    struct stat sb;
    snprintf(p, sizeof p, "/dev/shm/fuzz-image-%ld.img", (long)pid);
    if (lstat(p, &sb) == 0)
        return 1;
    snprintf(p, sizeof p, "/tmp/fuzz-image-%ld.img", (long)pid);
    return lstat(p, &sb) == 0;
}

Test(hostile_shutdown, fuzz_image_leaves_no_scratch_file)
{
    char *tool = path_join(tools_dir(), "fuzz_image");
    char *seed = path_join(source_root(), "fuzz/corpus/image/crash-bmp-palette-before-offset");
    char *missing = path_join(dir, "no-such-input"), *fifo = path_join(dir, "input.fifo");
    char *out = path_join(dir, "fuzz.out"), *err = path_join(dir, "fuzz.err");
    /* 1. a normal run, 2. an unreadable second input (exit 1) */
    char *ok[] = {tool, seed, NULL}, *bad[] = {tool, seed, missing, NULL};
    char **runs[] = {ok, bad};
    for (int k = 0; k < 2; k++) {
        pid_t pid = spawn_bg(runs[k], out, err);
        int st = spawn_wait(pid, 30);
        char *e = slurp(err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == (k ? 1 : 0), "run %d: status %d: %s", k, st,
                  e);
        free(e);
        cr_assert(!scratch_left(pid), "run %d left /dev/shm/fuzz-image-%d.img", k, (int)pid);
    }
    /* 3. killed: the second input is a FIFO that blocks it after the first */
    cr_assert_eq(mkfifo(fifo, 0600), 0, "%s", strerror(errno));
    char *killed[] = {tool, seed, fifo, NULL};
    pid_t pid = spawn_bg(killed, out, err);
    int w = -1;
    double end = now_sec() + 30;
    while (now_sec() < end && (w = open(fifo, O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO &&
           process_alive(pid))
        usleep(5000); /* no reader yet: the first input is being checked */
    if (w >= 0) {
        usleep(50000);
        kill(pid, SIGKILL);
        close(w);
    }
    int st = spawn_wait(pid, 30);
    (void)st;
    cr_assert(!scratch_left(pid), "a killed run left /dev/shm/fuzz-image-%d.img", (int)pid);
    free(tool);
    free(seed);
    free(missing);
    free(fifo);
    free(out);
    free(err);
}

Test(hostile_shutdown, a_closed_loader_kills_its_stopped_supervisor_and_leaves_the_ring_mapped)
{
    /* the Python module's way: spawned supervisor (a program of its own: no
     * PR_SET_PDEATHSIG ends it with us), the mapping handed to the caller,
     * the loader closed while a batch is still being read and while its
     * supervisor is stopped */
    char *dir2 = strdup(train_bin()), *slash = strrchr(dir2, '/');
    *slash = 0;
    char *sup = path_join(dir2, "trainloader-supervisor");
    char *argv[] = {"train", "--loader-only", "--batch", "16", "--workers", "2", "--prefetch",
                    "1",     "--channels",    "1",       csv};
    int argc = (int)(sizeof argv / sizeof *argv);
    options o;
    errbuf e = {{0}};
    cr_assert_eq(options_parse_to(&o, argc, argv, &e), 0, "%s", e.msg);
    feed r;
    cr_assert_eq(feed_open(&r, &o, FEED_FORK, 0, 1, &e), RUN_OK, "%s", e.msg);
    char *sargv[16] = {sup};
    for (int i = 1; i < argc; i++)
        sargv[i] = argv[i];
    loader_config extra = {.spawn_argv = sargv};
    cr_assert_eq(feed_loader(&r, &extra, &e), RUN_OK, "%s", e.msg);
    void *base;
    size_t len;
    loader_disown_map(r.ldr, &base, &len);
    load_job j = {.src = 0, .kind = LOAD_JOB_TRAIN, .batch = 16};
    loader_post(r.ldr, &j);
    loader_batch b;
    cr_assert_eq(loader_next(r.ldr, &b, &e), LOADER_OK, "%s", e.msg);
    size_t n = (size_t)b.count * r.sample_bytes;
    const uint8_t *data = b.data;
    uint8_t *want = malloc(n);
    memcpy(want, data, n);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += want[i];
    cr_assert(sum > 0, "an all-zero batch of real images");
    int pids[8], np = 0;
    double end = now_sec() + 30;
    while ((np = loader_pids(r.ldr, pids, 8)) < 3 && now_sec() < end)
        usleep(5000); /* the supervisor records a worker's pid after its fork returns */
    cr_assert_eq(np, 3, "the supervisor and 2 workers");
    cr_assert_eq(kill(pids[0], SIGSTOP), 0);
    double t0 = now_sec();
    feed_close(&r); /* every process stopped and reaped; the mapping stays */
    double took = now_sec() - t0;
    cr_assert(took < 5, "close took %.1f s", took);
    assert_gone(pids, np); /* the supervisor SIGKILLed: a SIGTERM stays pending */
    cr_assert((const uint8_t *)base <= data && data + n <= (const uint8_t *)base + len);
    cr_assert_arr_eq(data, want, n, "the batch changed after the loader closed");
    cr_assert_eq(munmap(base, len), 0);
    free(want);
    options_free(&o);
    free(sup);
    free(dir2);
}

/* reap_bounded itself: a child that ignores SIGTERM and keeps running is
 * killed at the deadline (not before, not never), a stopped one at once,
 * and one that exits is reaped with its status and no message. */
static int reap_with_stderr(pid_t pid, double secs, char *msg, size_t n, double *took)
{
    char path[64];
    snprintf(path, sizeof path, "%s/reap.err", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    dup2(fd, 2);
    double t0 = now_sec();
    int st = reap_bounded(pid, secs, "the child");
    *took = now_sec() - t0;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    FILE *f = fopen(path, "r");
    size_t got = fread(msg, 1, n - 1, f);
    msg[got] = '\0';
    fclose(f);
    return st;
}

static pid_t child_that(int what)
{
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, SIG_IGN);
        if (what == 0)
            _exit(7);
        for (;;)
            pause();
    }
    return pid;
}

Test(hostile_shutdown, reap_bounded_kills_a_stuck_child_at_the_deadline_and_a_stopped_one_at_once)
{
    char msg[256];
    double took;
    pid_t pid = child_that(1);
    int st = reap_with_stderr(pid, 0.4, msg, sizeof msg, &took);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    cr_assert(took >= 0.4 && took < 3, "killed after %.2f s, asked 0.4", took);
    char want[128];
    snprintf(want, sizeof want, "the child %d did not exit within 0.4 s; killed", pid);
    cr_assert(strstr(msg, want), "want '%s' in '%s'", want, msg);

    pid = child_that(1);
    kill(pid, SIGSTOP);
    st = reap_with_stderr(pid, 30, msg, sizeof msg, &took);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    cr_assert(took < 3, "a stopped child waited for %.2f s", took);
    snprintf(want, sizeof want, "the child %d is stopped (signal %d); killed", pid, SIGSTOP);
    cr_assert(strstr(msg, want), "want '%s' in '%s'", want, msg);

    pid = child_that(0);
    st = reap_with_stderr(pid, 30, msg, sizeof msg, &took);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 7, "status %d", st);
    cr_assert_str_empty(msg);
    cr_assert_eq(reap_bounded(pid, 1, "the child"), -1, "reaped twice");
}

/* The argument after `opt` on the command line of pid ("" when none). */
static void cmdline_arg(int pid, const char *opt, char *out, size_t n)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (!strcmp(buf + i, opt) && i + strlen(opt) + 1 < len) {
            snprintf(out, n, "%s", buf + i + strlen(opt) + 1);
            return;
        }
}

/* Every named file under /tmp or /dev/shm (outside the test's folder) that
 * pid holds open, appended to names (one per line). */
static void named_scratch_files(int pid, char *names, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char link[300], target[512];
        snprintf(link, sizeof link, "/proc/%d/fd/%s", pid, de->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0)
            continue;
        target[k] = '\0';
        if ((strncmp(target, "/tmp/", 5) && strncmp(target, "/dev/shm/", 9)) ||
            !strncmp(target, dir, strlen(dir)) || strstr(target, " (deleted)"))
            continue;
        size_t have = strlen(names);
        snprintf(names + have, cap - have, "%s\n", target);
    }
    if (d)
        closedir(d);
}

Test(hostile_shutdown, a_sweep_killed_by_sigkill_leaves_no_process_and_no_file)
{
    char *out = path_join(dir, "kill9.out"), *err = path_join(dir, "kill9.err");
    char *argv[] = {
        (char *)train_bin(), "--workers", "1,2",           "--batch", "16", "--epochs", "50",
        "--test-slow-load",  "0.01",      "--no-progress", csv,       NULL};
    pid_t pid = spawn_bg(argv, out, err);
    int run[4], sup[4], wk[4];
    cr_assert_eq(wait_children(pid, 1, run, 4, 60), 1, "the sweep started no run");
    cr_assert_eq(wait_children(run[0], 1, sup, 4, 60), 1, "the run started no supervisor");
    cr_assert_eq(wait_children(sup[0], 1, wk, 4, 60), 1, "the supervisor started no worker");
    char summary[512], names[4096] = "";
    cmdline_arg(run[0], "--summary-out", summary, sizeof summary);
    cr_assert(summary[0], "the run was given no --summary-out");
    int pids[3] = {run[0], sup[0], wk[0]};
    for (int i = 0; i < 3; i++)
        named_scratch_files(pids[i], names, sizeof names);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int st = spawn_wait(pid, 30);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %d", st);
    assert_gone(pids, 3); /* before the fix: adopted by init, trained to the end */
    struct stat sb;
    /* a name the parent would have removed after reading it stays behind */
    cr_assert(strncmp(summary, "/proc/self/fd/", 14) == 0 || lstat(summary, &sb) != 0,
              "the killed sweep left its summary file %s", summary);
    for (char *p = names, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
        *nl = '\0';
        cr_assert(lstat(p, &sb) != 0, "the killed sweep left %s", p);
    }
    free(out);
    free(err);
}
