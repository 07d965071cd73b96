/* helpers.c — see helpers.h. */
#define _GNU_SOURCE
#include "tests/support/helpers.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char *tmpdir_make(void)
{
    /* under $TMPDIR when set (tools/mutate gives each run its own, so
     * folders of tests that crashed go with it), else /tmp */
    const char *base = getenv("TMPDIR");
    char *tmpl;
    if (asprintf(&tmpl, "%s/train-test-XXXXXX", base && *base ? base : "/tmp") < 0)
        abort();
    cr_assert_not_null(mkdtemp(tmpl), "mkdtemp %s: %s", tmpl, strerror(errno));
    return tmpl;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tmpdir_remove(char *dir)
{
    if (dir && strstr(dir, "/train-test-"))
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

char *path_join(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

char *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    *len = 0;
    if (!f)
        return NULL;
    size_t cap = 4096;
    char *buf = malloc(cap + 1);
    size_t k;
    while ((k = fread(buf + *len, 1, cap - *len, f)) > 0) {
        *len += k;
        if (*len == cap) {
            char *more = realloc(buf, (cap *= 2) + 1);
            cr_assert_not_null(more, "%s: out of memory", path);
            buf = more;
        }
    }
    fclose(f);
    buf[*len] = '\0';
    return buf;
}

static void mkdirs_for(const char *path)
{
    char *copy = strdup(path);
    for (char *s = copy + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(copy, 0755);
            *s = '/';
        }
    free(copy);
}

char *write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char *p = path_join(dir, name);
    mkdirs_for(p);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "%s: %s", p, strerror(errno));
    if (len)
        cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    return p;
}

char *write_text(const char *dir, const char *name, const char *text)
{
    return write_file(dir, name, text, strlen(text));
}

static void append(char **buf, size_t *len, size_t *cap, const char *data, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap)
            *cap = *cap ? *cap * 2 : 4096;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* In a child: a process group of its own (the test kills the group), and
 * SIGKILL when the test process that started it ends. */
static void die_with_parent(pid_t parent)
{
    /* Ctrl-C and Ctrl-\ as a terminal gives them: a suite started in the
     * background (`make test &`, nohup) ignores both, and a shell script
     * that starts with a signal ignored cannot trap it (gpu-check's Ctrl-C
     * test then saw its SIGINT vanish) */
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
}

#define MAX_SPAWNED 32
static pid_t spawned[MAX_SPAWNED];

static void forget(pid_t pid)
{
    for (int i = 0; i < MAX_SPAWNED; i++)
        if (spawned[i] == pid)
            spawned[i] = 0;
}

void spawn_kill_all(void)
{
    for (int i = 0; i < MAX_SPAWNED; i++)
        if (spawned[i] > 0) {
            kill(-spawned[i], SIGKILL);
            while (waitpid(spawned[i], NULL, 0) < 0 && errno == EINTR)
                ;
            spawned[i] = 0;
        }
}

pid_t spawn_bg(char *const argv[], const char *out, const char *err)
{
    static int registered;
    if (!registered) {
        atexit(spawn_kill_all);
        registered = 1;
    }
    int slot = -1;
    for (int i = 0; i < MAX_SPAWNED && slot < 0; i++)
        if (spawned[i] == 0)
            slot = i;
    cr_assert_geq(slot, 0, "more than %d background processes", MAX_SPAWNED);
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) {
        die_with_parent(parent);
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr))
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    spawned[slot] = pid;
    return pid;
}

int spawn_wait(pid_t pid, double timeout_s)
{
    double t0 = mono();
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            cr_assert_fail("waitpid %d: %s", (int)pid, strerror(errno));
        if (mono() - t0 > timeout_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            forget(pid);
            cr_assert_fail("process %d still running after %.0f s: killed its group", (int)pid,
                           timeout_s);
        }
        usleep(5000);
    }
    forget(pid);
    return st;
}

int run_argv(char *const argv[], char *const env_extra[], double timeout_s, run_result *r)
{
    memset(r, 0, sizeof *r);
    int po[2], pe[2];
    cr_assert_eq(pipe2(po, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(pe, O_CLOEXEC), 0);
    double t0 = mono();
    pid_t parent = getpid();
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        die_with_parent(parent);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        for (int i = 0; env_extra && env_extra[i]; i++)
            putenv(env_extra[i]);
        execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(po[1]);
    close(pe[1]);
    size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
    append(&r->out, &olen, &ocap, "", 0);
    append(&r->err, &elen, &ecap, "", 0);
    struct pollfd fds[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    int open_fds = 2, timed_out = 0;
    while (open_fds > 0) {
        double left = timeout_s - (mono() - t0);
        if (left <= 0) {
            timed_out = 1;
            kill(-pid, SIGKILL);
            break;
        }
        int n = poll(fds, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t k = read(fds[i].fd, buf, sizeof buf);
            if (k <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else if (i == 0) {
                append(&r->out, &olen, &ocap, buf, (size_t)k);
            } else {
                append(&r->err, &elen, &ecap, buf, (size_t)k);
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->secs = mono() - t0;
    if (WIFEXITED(st)) {
        r->status = WEXITSTATUS(st);
    } else {
        r->status = -1;
        r->signal = WTERMSIG(st);
    }
    cr_assert(!timed_out, "%s timed out after %.0f s\nstdout:\n%s\nstderr:\n%s", argv[0], timeout_s,
              r->out, r->err);
    /* the binary under test is a sanitizer build: any report is a failure */
    cr_assert(!strstr(r->err, "Sanitizer") && !strstr(r->err, "runtime error:"),
              "%s: sanitizer report:\n%s", argv[0], r->err);
    return r->status;
}

void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

const char *train_bin(void)
{
    const char *b = getenv("TRAIN_BIN");
    return b ? b : "./train";
}

const char *tools_dir(void)
{
    const char *b = getenv("TRAIN_TOOLS");
    return b ? b : "build/tools";
}

const char *source_root(void)
{
    const char *b = getenv("TRAIN_ROOT");
    return b ? b : ".";
}

int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

int list_children(int pid, int *out, int max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char cp[300];
        snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", pid, de->d_name);
        FILE *f = fopen(cp, "r");
        if (!f)
            continue;
        int c;
        while ((!out || n < max) && fscanf(f, "%d", &c) == 1) {
            if (out)
                out[n] = c;
            n++;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

int count_children(int pid) { return list_children(pid, NULL, 0); }

int wait_process_gone(int pid, double secs)
{
    for (double end = mono() + secs; process_alive(pid);) {
        if (mono() >= end)
            return 0;
        usleep(10000);
    }
    return 1;
}

int process_alive(int pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

char *make_fashion_subset(const char *dir, int n)
{
    char *bin = path_join(tools_dir(), "fashion_mnist"), *out = path_join(dir, "fm");
    char limit[16];
    snprintf(limit, sizeof limit, "%d", n);
    char *argv[] = {bin, "--out", out, "--limit", limit, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "tools/fashion-mnist: %s", r.err);
    run_free(&r);
    free(bin);
    return out;
}

int json_epoch_values(const char *path, const char *key, char vals[][JSON_VALUE_MAX], int max)
{
    return json_record_values(path, "epoch", key, vals, max);
}

int json_record_values(const char *path, const char *record, const char *key,
                       char vals[][JSON_VALUE_MAX], int max)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    char pat[64], rec[64], *line = NULL;
    size_t cap = 0;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    snprintf(rec, sizeof rec, "{\"record\":\"%s\"", record);
    int n = 0;
    while (n < max && getline(&line, &cap, f) > 0) {
        if (strncmp(line, rec, strlen(rec)) != 0)
            continue;
        char *p = strstr(line, pat);
        cr_assert_not_null(p, "no %s in %s", key, line);
        p += strlen(pat);
        size_t k = strcspn(p, ",}");
        snprintf(vals[n++], JSON_VALUE_MAX, "%.*s", (int)k, p);
    }
    free(line);
    fclose(f);
    return n;
}

static int run_train_v(run_result *r, double timeout_s, const char *first, va_list ap)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)train_bin();
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    argv[n] = NULL;
    return run_argv(argv, NULL, timeout_s, r);
}

int run_train(run_result *r, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int rc = run_train_v(r, 200, first, ap);
    va_end(ap);
    return rc;
}

int run_train_for(run_result *r, double timeout_s, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int rc = run_train_v(r, timeout_s, first, ap);
    va_end(ap);
    return rc;
}

void assert_same_losses(const char *a, const char *b, int epochs)
{
    char va[8][JSON_VALUE_MAX], vb[8][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(a, "loss", va, 8), epochs);
    cr_assert_eq(json_epoch_values(b, "loss", vb, 8), epochs);
    for (int i = 0; i < epochs; i++)
        cr_assert_str_eq(va[i], vb[i], "epoch %d: loss %s vs %s", i + 1, va[i], vb[i]);
}
