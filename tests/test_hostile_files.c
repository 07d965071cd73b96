/* test_hostile_files.c — the files train reads whole or replaces, met as
 * an attacker (or a slip of the keyboard) leaves them (issue 26): a FIFO,
 * a device behind a symlink, a folder where a file belongs; a cache file
 * truncated while a run maps it; a build killed by SIGKILL; a umask that
 * keeps the files private. Each test runs the real train binary on real
 * JPEGs and real FIFOs made in its own folder (never a real /dev node: a
 * device is only reached through a symlink to /dev/null, which a missing
 * fix could at worst replace the symlink of). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"

static char *dir, *csv;

/* 16 JPEGs of 28x28, three classes, listed in dir/data.csv */
static void setup(void)
{
    dir = tmpdir_make();
    char text[2048] = "path,label\n";
    for (int k = 0; k < 16; k++) {
        char name[64];
        snprintf(name, sizeof name, "img/%02d.jpg", k);
        uint8_t *px = ti_picture(28, 28, 3, (uint64_t)k + 1);
        free(ti_write_jpeg(dir, name, px, 28, 28, TJPF_RGB, TJSAMP_420, 90, 0));
        free(px);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s,%d\n", name, k % 3);
    }
    csv = write_text(dir, "data.csv", text);
}

static void teardown(void)
{
    spawn_kill_all();
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(hostile_files, .init = setup, .fini = teardown);

/* ./train ARGS... (NULL-terminated), at most 30 s: a run that blocks on a
 * FIFO fails the test instead of hanging it */
static void train(run_result *r, const char *first, ...)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)train_bin();
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    run_argv(argv, NULL, 30, r);
}

static char *fifo(const char *name)
{
    char *p = path_join(dir, name);
    cr_assert_eq(mkfifo(p, 0600), 0, "mkfifo %s", p);
    return p;
}

static char *devnull_link(const char *name)
{
    char *p = path_join(dir, name);
    cr_assert_eq(symlink("/dev/null", p), 0, "symlink %s", p);
    return p;
}

static unsigned kind_of(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s is gone", path);
    return st.st_mode & S_IFMT;
}

/* The refusal: status 2, the path and what it is named, no epoch run. */
static void assert_refused(run_result *r, const char *opt, const char *path, const char *what)
{
    cr_assert_eq(r->status, 2, "train %s %s: exit %d (signal %d): %s", opt, path, r->status,
                 r->signal, r->err);
    char want[1024];
    snprintf(want, sizeof want, "--%s %s: is %s, not a regular file", opt, path, what);
    cr_assert(strstr(r->err, want), "wanted '%s' in: %s", want, r->err);
    cr_assert(!strstr(r->out, "dev "), "no epoch may run first: %s", r->out);
}

/* Names in dir (not recursing) other than the inputs: what a run left. */
static int leftovers(const char *keep, char *first, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "img") &&
            strcmp(de->d_name, "data.csv") && strcmp(de->d_name, keep) &&
            !strstr(de->d_name, ".out") && !strstr(de->d_name, ".err") && n++ == 0)
            snprintf(first, len, "%s", de->d_name);
    closedir(d);
    return n;
}

/* Whether /proc/PID/maps maps a file whose path starts with prefix. */
static int maps_file(pid_t pid, const char *prefix)
{
    char p[64], line[4096];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(p, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, prefix) != NULL;
    if (f)
        fclose(f);
    return found;
}

/* Wait (at most 20 s) until pid maps a file whose path starts with prefix. */
static void wait_mapped(pid_t pid, const char *prefix)
{
    for (int i = 0; i < 4000 && !maps_file(pid, prefix); i++) {
        cr_assert(process_alive(pid), "the run ended before it mapped %s", prefix);
        usleep(5000);
    }
    cr_assert(maps_file(pid, prefix), "the run never mapped %s", prefix);
}

/* ---------------------------------------------------------------- items 1, 2, 15 */

Test(hostile_files, cache_and_save_onto_a_fifo_or_a_device_are_refused_up_front)
{
    /* before the fix --cache FIFO blocked in open() for ever, and --save
     * renamed the checkpoint over the FIFO (and, as root, over /dev/full) */
    char *f = fifo("target.fifo"), *dev = devnull_link("null");
    run_result r;
    train(&r, "--mode", "preload", "--cache", f, "--no-progress", csv, NULL);
    assert_refused(&r, "cache", f, "a FIFO");
    run_free(&r);
    train(&r, "--save", f, "--no-progress", csv, NULL);
    assert_refused(&r, "save", f, "a FIFO");
    run_free(&r);
    cr_assert_eq(kind_of(f), (unsigned)S_IFIFO, "the FIFO was replaced");
    train(&r, "--save", dev, "--no-progress", csv, NULL);
    assert_refused(&r, "save", dev, "a character device");
    run_free(&r);
    train(&r, "--mode", "preload", "--cache", dev, "--no-progress", csv, NULL);
    assert_refused(&r, "cache", dev, "a character device");
    run_free(&r);
    cr_assert_eq(kind_of(dev), (unsigned)S_IFLNK, "the link to the device was replaced");
    char left[256] = "";
    cr_assert_eq(leftovers("", left, sizeof left), 2, "only the FIFO and the link (first: %s)",
                 left);
    free(f);
    free(dev);
}

Test(hostile_files, cache_onto_a_folder_is_refused_up_front)
{
    /* before the fix: "truncated", a whole preload build, a failed rename,
     * exit 0 */
    char *d = path_join(dir, "cachedir");
    cr_assert_eq(mkdir(d, 0755), 0);
    run_result r;
    train(&r, "--mode", "preload", "--cache", d, "--no-progress", csv, NULL);
    assert_refused(&r, "cache", d, "a directory");
    cr_assert(strstr(r.err, "give a file name"), "%s", r.err);
    cr_assert(!strstr(r.out, "truncated") && !strstr(r.err, "truncated"), "%s%s", r.out, r.err);
    run_free(&r);
    DIR *dd = opendir(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dd)))
        n += de->d_name[0] != '.';
    closedir(dd);
    cr_assert_eq(n, 0, "nothing written inside the folder");
    free(d);
}

Test(hostile_files, resume_and_json_on_a_fifo_or_a_device_are_refused_without_blocking)
{
    /* before the fix --resume FIFO and --json FIFO blocked for ever, and
     * --resume /dev/zero read until the OOM killer came */
    char *f = fifo("in.fifo"), *dev = devnull_link("null");
    run_result r;
    train(&r, "--resume", f, "--no-progress", csv, NULL);
    assert_refused(&r, "resume", f, "a FIFO");
    run_free(&r);
    train(&r, "--resume", dev, "--no-progress", csv, NULL);
    assert_refused(&r, "resume", dev, "a character device");
    run_free(&r);
    train(&r, "--json", f, "--no-progress", csv, NULL);
    assert_refused(&r, "json", f, "a FIFO");
    run_free(&r);
    train(&r, "--json", f, "--workers", "0,1", "--no-progress", csv, NULL); /* a sweep */
    assert_refused(&r, "json", f, "a FIFO");
    run_free(&r);
    cr_assert_eq(kind_of(f), (unsigned)S_IFIFO);
    free(f);
    free(dev);
}

Test(hostile_files, open_regular_refuses_at_once_and_reads_no_more_than_the_file)
{
    /* the library calls themselves: no blocking on a FIFO that has no
     * writer (read) or no reader (write), and the size cap before any read */
    char *f = fifo("lib.fifo"), *dev = devnull_link("null");
    errbuf e;
    double t0 = now_sec();
    cr_assert_eq(open_regular(f, O_RDONLY, 0, &e), -1);
    cr_assert(strstr(e.msg, "lib.fifo: is a FIFO, not a regular file"), "%s", e.msg);
    cr_assert_eq(open_regular(f, O_WRONLY | O_CREAT | O_TRUNC, 0666, &e), -1);
    cr_assert(strstr(e.msg, "lib.fifo: is a FIFO, not a regular file"), "%s", e.msg);
    cr_assert_eq(open_regular(dev, O_RDONLY, 0, &e), -1);
    cr_assert(strstr(e.msg, "is a character device"), "%s", e.msg);
    cr_assert_eq(open_regular(dir, O_RDONLY, 0, &e), -1);
    cr_assert(strstr(e.msg, "is a directory"), "%s", e.msg);
    cr_assert_null(read_regular_file(f, 100, NULL, &e));
    cr_assert_lt(now_sec() - t0, 2.0, "nothing blocked");
    /* a regular file: read whole up to the cap, refused above it */
    char *small = write_text(dir, "ten", "0123456789");
    size_t len = 0;
    char *t = read_regular_file(small, 10, &len, &e);
    cr_assert(t && len == 10 && strcmp(t, "0123456789") == 0);
    free(t);
    cr_assert_null(read_regular_file(small, 9, &len, &e));
    cr_assert(strstr(e.msg, "ten: is 10 B, more than the 9 B"), "%s", e.msg);
    int fd = open_regular(small, O_RDONLY, 0, &e);
    cr_assert_geq(fd, 0, "%s", e.msg);
    cr_assert_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, 0, "O_NONBLOCK is cleared");
    close(fd);
    cr_assert_eq(check_output_path(small, &e), 0);
    char *none = path_join(dir, "none");
    cr_assert_eq(check_output_path(none, &e), 0, "an absent file may be created");
    free(none);
    free(small);
    free(f);
    free(dev);
}

/* ---------------------------------------------------------------- item 6 */

/* Build dir/c.cache, then run again reading it with `workers` workers,
 * slowed, and truncate the file once the run maps it. */
static void truncate_under(const char *workers)
{
    char *cache = path_join(dir, "c.cache");
    run_result r;
    train(&r, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "the build: %s", r.err);
    run_free(&r);
    char *out = path_join(dir, "t.out"), *err = path_join(dir, "t.err");
    char *argv[] = {(char *)train_bin(),
                    "--mode",
                    "preload",
                    "--cache",
                    cache,
                    "--batch",
                    "8",
                    "--workers",
                    (char *)workers,
                    "--test-slow-load",
                    "0.05",
                    "--no-progress",
                    csv,
                    NULL};
    pid_t pid = spawn_bg(argv, out, err);
    wait_mapped(pid, cache);
    usleep(300000); /* past the check of the file's checksums: into the epoch */
    cr_assert_eq(truncate(cache, 0), 0);
    int st = spawn_wait(pid, 30);
    char *e = read_whole_file(err, NULL, NULL);
    cr_assert(WIFEXITED(st), "killed by signal %d (before the fix: SIGBUS): %s",
              WIFSIGNALED(st) ? WTERMSIG(st) : 0, e);
    cr_assert_eq(WEXITSTATUS(st), 2, "exit %d: %s", WEXITSTATUS(st), e);
    char want[1024];
    snprintf(want, sizeof want, "%s: the preload cache file was truncated while this run used it",
             cache);
    cr_assert(strstr(e, want), "wanted '%s' in: %s", want, e);
    free(e);
    /* and the next run rebuilds it */
    train(&r, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rebuilding it") || strstr(r.err, "rebuilding it"), "%s%s", r.out,
              r.err);
    run_free(&r);
    free(out);
    free(err);
    free(cache);
}

Test(hostile_files, a_cache_truncated_under_the_main_process_is_named_not_a_sigbus)
{
    truncate_under("0");
}

Test(hostile_files, a_cache_truncated_under_a_worker_is_named_not_a_sigbus) { truncate_under("1"); }

/* ---------------------------------------------------------------- item 7 */

Test(hostile_files, a_cache_build_killed_by_sigkill_leaves_no_file)
{
    /* before the fix the build's FILE.tmp.XXXXXX (full size) stayed for
     * ever; now it has no name until it is complete */
    char *cache = path_join(dir, "k.cache");
    char *out = path_join(dir, "k.out"), *err = path_join(dir, "k.err");
    char *argv[] = {(char *)train_bin(),
                    "--mode",
                    "preload",
                    "--cache",
                    cache,
                    "--workers",
                    "1",
                    "--batch",
                    "8",
                    "--test-slow-load",
                    "0.2",
                    "--no-progress",
                    csv,
                    NULL};
    pid_t pid = spawn_bg(argv, out, err);
    wait_mapped(pid, dir); /* the build's file, whatever its name */
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int st = spawn_wait(pid, 20);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status 0x%x", st);
    for (int i = 0; i < 200 && count_children(pid) > 0; i++)
        usleep(10000);
    char left[256] = "";
    cr_assert_eq(leftovers("", left, sizeof left), 0, "left behind: %s", left);
    /* the next run builds and leaves exactly the cache */
    run_result r;
    train(&r, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert_eq(leftovers("k.cache", left, sizeof left), 0, "left behind: %s", left);
    cr_assert_eq(kind_of(cache), (unsigned)S_IFREG);
    free(out);
    free(err);
    free(cache);
}

/* ---------------------------------------------------------------- item 11 */

Test(hostile_files, the_cache_and_the_checkpoint_follow_the_umask)
{
    /* before the fix both were fchmod'ed to 0644 whatever the umask */
    char *cache = path_join(dir, "u.cache"), *ck = path_join(dir, "u.ckpt");
    mode_t old = umask(077);
    run_result r;
    train(&r, "--mode", "preload", "--cache", cache, "--save", ck, "--batch", "8", "--no-progress",
          csv, NULL);
    umask(old);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    struct stat st;
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "cache mode %o under umask 077", st.st_mode & 0777);
    cr_assert_eq(stat(ck, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "checkpoint mode %o under umask 077", st.st_mode & 0777);
    /* a umask of 002 (a private group) gives the group write, as to any
     * file the user makes */
    old = umask(002);
    train(&r, "--mode", "preload", "--cache", cache, "--resize", "24x24", "--save", ck, "--batch",
          "8", "--no-progress", csv, NULL);
    umask(old);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0664, "cache mode %o under umask 002", st.st_mode & 0777);
    cr_assert_eq(stat(ck, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0664, "checkpoint mode %o under umask 002", st.st_mode & 0777);
    free(cache);
    free(ck);
}
