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

/* each run at most 30 s: one that blocks on a FIFO fails its test instead
 * of hanging it */
#define RUN_S 30

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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", f, "--no-progress", csv, NULL);
    assert_refused(&r, "cache", f, "a FIFO");
    run_free(&r);
    run_train_for(&r, RUN_S, "--save", f, "--no-progress", csv, NULL);
    assert_refused(&r, "save", f, "a FIFO");
    run_free(&r);
    cr_assert_eq(kind_of(f), (unsigned)S_IFIFO, "the FIFO was replaced");
    run_train_for(&r, RUN_S, "--save", dev, "--no-progress", csv, NULL);
    assert_refused(&r, "save", dev, "a character device");
    run_free(&r);
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", dev, "--no-progress", csv, NULL);
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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", d, "--no-progress", csv, NULL);
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
    run_train_for(&r, RUN_S, "--resume", f, "--no-progress", csv, NULL);
    assert_refused(&r, "resume", f, "a FIFO");
    run_free(&r);
    run_train_for(&r, RUN_S, "--resume", dev, "--no-progress", csv, NULL);
    assert_refused(&r, "resume", dev, "a character device");
    run_free(&r);
    run_train_for(&r, RUN_S, "--json", f, "--no-progress", csv, NULL);
    assert_refused(&r, "json", f, "a FIFO");
    run_free(&r);
    run_train_for(&r, RUN_S, "--json", f, "--workers", "0,1", "--no-progress", csv,
                  NULL); /* a sweep */
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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress",
                  csv, NULL);
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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress",
                  csv, NULL);
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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--batch", "8", "--no-progress",
                  csv, NULL);
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
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--save", ck, "--batch", "8",
                  "--no-progress", csv, NULL);
    umask(old);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    struct stat st;
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "cache mode %o under umask 077", st.st_mode & 0777);
    cr_assert_eq(stat(ck, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "checkpoint mode %o under umask 077", st.st_mode & 0777);
    /* a umask of 002 (a private group) gives the group write, as to any
     * file the user makes (new files: a replaced one keeps its mode) */
    cr_assert_eq(unlink(cache), 0);
    cr_assert_eq(unlink(ck), 0);
    old = umask(002);
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--resize", "24x24", "--save",
                  ck, "--batch", "8", "--no-progress", csv, NULL);
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

/* ---------------------------------------------------------------- review round 2: outputs */

static char *slurp(const char *path, size_t *len)
{
    errbuf e;
    char *t = read_whole_file(path, len, &e);
    cr_assert(t, "%s", e.msg);
    return t;
}

/* path's first 8 bytes are magic */
static void assert_starts(const char *path, const char *magic)
{
    size_t len = 0;
    char *t = slurp(path, &len);
    cr_assert(len >= 8 && !memcmp(t, magic, 8), "%s does not start with %.7s", path, magic);
    free(t);
}

/* Refused up front (status 2, no epoch) with want in the message. */
static void assert_refused_with(run_result *r, const char *want)
{
    cr_assert_eq(r->status, 2, "exit %d (signal %d): %s", r->status, r->signal, r->err);
    cr_assert(strstr(r->err, want), "wanted '%s' in: %s", want, r->err);
    cr_assert(!strstr(r->out, "dev "), "no epoch may run first: %s", r->out);
    run_free(r);
}

Test(hostile_files, an_output_that_is_an_input_or_another_output_is_refused)
{
    /* before the fix --json data.csv replaced the CSV with the run's
     * record before reading it; --save and --cache named like an input
     * exited 0 having replaced it */
    size_t len0 = 0, len = 0;
    char *text0 = slurp(csv, &len0);
    char *val = write_text(dir, "val.csv", text0), *alias = path_join(dir, "alias.csv");
    cr_assert_eq(symlink("data.csv", alias), 0);
    char *sub = path_join(dir, "sub"), *json = path_join(dir, "o.json");
    char *json2 = path_join(dir, "sub/../o.json"), *ck = path_join(dir, "o.ckpt");
    cr_assert_eq(mkdir(sub, 0755), 0);
    char want[4096];
    run_result r;
    run_train_for(&r, RUN_S, "--json", csv, "--no-progress", csv, NULL);
    snprintf(want, sizeof want, "--json %s is the same file as the data CSV %s: ", csv, csv);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--save", alias, "--no-progress", csv,
                  NULL); /* another name, one inode */
    snprintf(want, sizeof want, "--save %s is the same file as the data CSV %s: ", alias, csv);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", val, "--val", val, "--no-progress",
                  csv, NULL);
    snprintf(want, sizeof want, "--cache %s is the same file as --val %s: ", val, val);
    assert_refused_with(&r, want);
    /* files yet to be made: the same folder and name */
    run_train_for(&r, RUN_S, "--json", json, "--trace", json2, "--no-progress", csv, NULL);
    snprintf(want, sizeof want, "--json %s and --trace %s are the same file", json, json2);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--save", ck, "--mode", "preload", "--cache", ck, "--no-progress", csv,
                  NULL);
    snprintf(want, sizeof want, "--cache %s and --save %s are the same file", ck, ck);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--json", ck, "--resume", ck, "--no-progress", csv, NULL);
    snprintf(want, sizeof want, "--json %s is the same file as --resume %s: ", ck, ck);
    assert_refused_with(&r, want);
    char *text = slurp(csv, &len);
    cr_assert(len == len0 && !memcmp(text, text0, len), "the data CSV was changed");
    free(text);
    text = slurp(val, &len);
    cr_assert(len == len0 && !memcmp(text, text0, len), "the --val CSV was changed");
    free(text);
    struct stat st;
    cr_assert(stat(json, &st) != 0 && stat(ck, &st) != 0, "a refused run wrote an output");
    /* resuming into the checkpoint it was read from stays the usual way */
    run_train_for(&r, RUN_S, "--save", ck, "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train_for(&r, RUN_S, "--resume", ck, "--save", ck, "--epochs", "2", "--batch", "8",
                  "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "--resume and --save one file: %s", r.err);
    cr_expect(strstr(r.err, "--batch") == NULL, "the same batch: no note: %s", r.err);
    run_free(&r);
    assert_starts(ck, "TRAINCKP");
    /* another batch size resumes, and says what it changes */
    run_train_for(&r, RUN_S, "--resume", ck, "--epochs", "3", "--batch", "4", "--no-progress", csv,
                  NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.err, "resuming with --batch 4; the checkpoint was trained with --batch 8"),
              "%s", r.err);
    run_free(&r);
    free(text0);
    free(val);
    free(alias);
    free(sub);
    free(json);
    free(json2);
    free(ck);
}

Test(hostile_files, an_existing_file_of_another_kind_is_not_replaced)
{
    /* before the fix --cache over a checkpoint said "is not a train
     * preload cache: rebuilding it" and the weights were gone; --json and
     * --save replaced whatever the name held */
    char *ck = path_join(dir, "w.ckpt"), *cache = path_join(dir, "w.cache");
    char *notes = write_text(dir, "notes.txt", "path,label\nimg/00.jpg,0\n");
    run_result r;
    run_train_for(&r, RUN_S, "--save", ck, "--mode", "preload", "--cache", cache, "--batch", "8",
                  "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    size_t ck_len0 = 0, len = 0;
    char *ck0 = slurp(ck, &ck_len0);
    char want[4096];
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", ck, "--no-progress", csv, NULL);
    snprintf(want, sizeof want,
             "--cache %s: starts with TRAINCKP: a train checkpoint, not a train preload cache; "
             "not replaced (remove it or choose another name)",
             ck);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--json", ck, "--no-progress", csv, NULL);
    snprintf(want, sizeof want,
             "--json %s: starts with TRAINCKP: a train checkpoint, not a train JSON report", ck);
    assert_refused_with(&r, want);
    /* a report and a trace are not each other; a hand-written JSON is neither */
    char *rep = write_text(dir, "rep.json", "{\"record\":\"run\",\"x\":1}\n");
    char *trc =
        write_text(dir, "trc.json", "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n]}\n");
    char *cfg = write_text(dir, "cfg.json", "{\n  \"name\": \"mine\"\n}\n");
    run_train_for(&r, RUN_S, "--trace", rep, "--no-progress", csv, NULL);
    snprintf(want, sizeof want,
             "--trace %s: starts with {\"record\":: a train JSON report, not a train trace", rep);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--json", trc, "--no-progress", csv, NULL);
    snprintf(want, sizeof want,
             "--json %s: starts with {\"displayTimeUnit\":: a train trace, not a train JSON report",
             trc);
    assert_refused_with(&r, want);
    for (int k = 0; k < 2; k++) {
        run_train_for(&r, RUN_S, k ? "--trace" : "--json", cfg, "--no-progress", csv, NULL);
        snprintf(want, sizeof want, "%s %s: starts with '{': a JSON file, not one train wrote",
                 k ? "--trace" : "--json", cfg);
        assert_refused_with(&r, want);
    }
    assert_starts(cfg, "{\n  \"name\"");
    free(rep), free(trc), free(cfg);
    run_train_for(&r, RUN_S, "--save", cache, "--no-progress", csv, NULL);
    snprintf(want, sizeof want,
             "--save %s: starts with TRAINPC: a train preload cache, not a train checkpoint",
             cache);
    assert_refused_with(&r, want);
    run_train_for(&r, RUN_S, "--save", notes, "--no-progress", csv, NULL);
    snprintf(want, sizeof want, "--save %s: starts with \"path,label\\x0aimg/0\", not a train",
             notes);
    assert_refused_with(&r, want);
    /* an image given as an output by mistake: named as an image, kept */
    char *photo = path_join(dir, "photo.jpg");
    {
        uint8_t *px = ti_picture(8, 8, 3, 7);
        free(ti_write_jpeg(dir, "photo.jpg", px, 8, 8, TJPF_RGB, TJSAMP_420, 90, 0));
        free(px);
    }
    size_t photo_len0 = 0;
    char *photo0 = slurp(photo, &photo_len0);
    const char *as[] = {"--trace", "--json", "--save"};
    for (int k = 0; k < 3; k++) {
        run_train_for(&r, RUN_S, as[k], photo, "--no-progress", csv, NULL);
        snprintf(want, sizeof want, "%s %s: starts like a JPEG image, not ", as[k], photo);
        assert_refused_with(&r, want);
    }
    /* a format the decoder recognises but does not read: named the same way */
    char *tif = path_join(dir, "scan.tif");
    free(write_file(dir, "scan.tif", "II*\0\x08\0\0\0scan", 12));
    run_train_for(&r, RUN_S, "--json", tif, "--no-progress", csv, NULL);
    snprintf(want, sizeof want, "--json %s: starts like a TIFF image, not ", tif);
    assert_refused_with(&r, want);
    free(tif);
    char *pt = slurp(photo, &len);
    cr_assert(len == photo_len0 && !memcmp(pt, photo0, len), "the photo was changed");
    free(pt), free(photo0), free(photo);
    char *t = slurp(ck, &len);
    cr_assert(len == ck_len0 && !memcmp(t, ck0, len), "the checkpoint was changed");
    free(t);
    assert_starts(cache, "TRAINPC\n");
    /* still replaced: a cache cut short with its magic (rebuilt, as
     * promised), an empty file, JSON lines after blank lines */
    cr_assert_eq(truncate(cache, 100), 0);
    char *empty = write_text(dir, "e.ckpt", ""), *json = write_text(dir, "j.json", "\n {}\n");
    run_train_for(&r, RUN_S, "--mode", "preload", "--cache", cache, "--save", empty, "--json", json,
                  "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rebuilding it"), "%s", r.out);
    run_free(&r);
    assert_starts(cache, "TRAINPC\n");
    assert_starts(empty, "TRAINCKP");
    t = slurp(json, &len);
    cr_assert(!strncmp(t, "{\"record\":\"run\"", 15), "%.40s", t);
    free(t);
    free(ck0);
    free(ck);
    free(cache);
    free(notes);
    free(empty);
    free(json);
}

/* Names in folder d, not counting . and .. */
static int entries(const char *d)
{
    DIR *dd = opendir(d);
    cr_assert(dd, "%s", d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dd)))
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(dd);
    return n;
}

Test(hostile_files, save_and_cache_write_through_a_symlink_and_keep_the_mode)
{
    /* before the fix the rename replaced the link itself (a cache linked
     * to a scratch disk landed beside the link), and a replaced 0600
     * checkpoint came back 0644 */
    char *scratch = path_join(dir, "scratch");
    cr_assert_eq(mkdir(scratch, 0755), 0);
    char *lck = path_join(dir, "link.ckpt"), *lcache = path_join(dir, "link.cache");
    char *ck = path_join(dir, "scratch/real.ckpt"), *cache = path_join(dir, "scratch/real.cache");
    cr_assert_eq(symlink("scratch/real.ckpt", lck), 0); /* dangling: made by the run */
    cr_assert_eq(symlink("scratch/real.cache", lcache), 0);
    run_result r;
    run_train_for(&r, RUN_S, "--save", lck, "--mode", "preload", "--cache", lcache, "--batch", "8",
                  "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert_eq(kind_of(lck), (unsigned)S_IFLNK, "the checkpoint's link was replaced");
    cr_assert_eq(kind_of(lcache), (unsigned)S_IFLNK, "the cache's link was replaced");
    assert_starts(ck, "TRAINCKP");
    assert_starts(cache, "TRAINPC\n");
    cr_assert_eq(entries(scratch), 2, "the checkpoint and the cache only");
    /* existing targets, private modes: replaced in place, modes kept */
    cr_assert_eq(chmod(ck, 0600), 0);
    cr_assert_eq(chmod(cache, 0640), 0);
    struct stat before, st;
    cr_assert_eq(stat(ck, &before), 0);
    run_train_for(&r, RUN_S, "--save", lck, "--mode", "preload", "--cache", lcache, "--resize",
                  "24x24", "--batch", "8", "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "rebuilding it"), "%s", r.out);
    run_free(&r);
    cr_assert_eq(kind_of(lck), (unsigned)S_IFLNK);
    cr_assert_eq(kind_of(lcache), (unsigned)S_IFLNK);
    cr_assert_eq(stat(ck, &st), 0);
    cr_assert_neq(st.st_ino, before.st_ino, "the checkpoint was not replaced");
    cr_assert_eq(st.st_mode & 0777, 0600, "checkpoint mode %o, was 0600", st.st_mode & 0777);
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0640, "cache mode %o, was 0640", st.st_mode & 0777);
    cr_assert_eq(entries(scratch), 2, "left behind in scratch");
    free(scratch);
    free(lck);
    free(lcache);
    free(ck);
    free(cache);
}

Test(hostile_files, a_missing_folder_is_named_with_the_option_before_any_work)
{
    /* before the fix --cache's message had no "--cache: " (unlike --save
     * and --json) and came after the data was read: with a bad CSV, the
     * CSV's error instead */
    char *bad = write_text(dir, "bad.csv", "path,label\nimg/00.jpg,0\nimg/01.jpg,-1\n");
    const char *opt[] = {"--cache", "--save", "--json", "--trace"};
    for (int i = 0; i < 4; i++) {
        char *p = path_join(dir, "nodir/out.bin"), want[4096];
        run_result r;
        run_train_for(&r, RUN_S, "--mode", "preload", opt[i], p, "--no-progress", bad, NULL);
        /* the folder named as what is missing (it said "cannot create a
         * temporary file next to it" for --save) */
        snprintf(want, sizeof want, "train: %s %s: folder %s/nodir does not exist (make it first)",
                 opt[i], p, dir);
        assert_refused_with(&r, want);
        free(p);
    }
    free(bad);
}

/* a sweep's per-configuration trace (t-cfg2.json) that may not be replaced
 * is refused before the first configuration runs, not after it */
Test(hostile_files, a_sweeps_configuration_trace_is_checked_up_front)
{
    char *tr = path_join(dir, "sw.json"), *cfg2 = write_text(dir, "sw-cfg2.json", "my notes\n");
    run_result r;
    run_train_for(&r, RUN_S, "--workers", "0,1", "--trace", tr, "--no-progress", csv, NULL);
    char want[2048];
    snprintf(want, sizeof want,
             "train: --trace %s (configuration 2): %s: starts with \"my notes\\x0a\", not a train "
             "trace",
             tr, cfg2);
    assert_refused_with(&r, want);
    assert_starts(cfg2, "my notes");
    /* FILE itself is never written by a sweep: a file of that name is left
     * alone, not refused */
    remove(cfg2);
    char *plain = write_text(dir, "sw.json", "{\"mine\": 1}\n");
    run_train_for(&r, RUN_S, "--workers", "0,1", "--trace", tr, "--no-progress", csv, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    assert_starts(plain, "{\"mine\": 1}");
    for (int k = 1; k <= 2; k++) {
        char name[64];
        snprintf(name, sizeof name, "sw-cfg%d.json", k);
        char *t = path_join(dir, name);
        assert_starts(t, "{\"displayTimeUnit\":");
        free(t);
    }
    run_free(&r);
    free(tr), free(cfg2), free(plain);
}
