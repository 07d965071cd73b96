/* test_bundle.c — the relocatable bundle (make bundle, tools/bundle) as a
 * stranger's machine sees it, and tools/gpu-check without a GPU.
 *
 * `make test` builds the bundle and unpacks it into $TRAIN_BUNDLE_DIR; the
 * tests skip, saying so, when that is not set. The stranger's machine is a
 * chroot in a private mount namespace (tests/bundle-root) that holds glibc,
 * libstdc++, libgcc and busybox and nothing else of Debian's: without CUDA
 * the launcher must run the CPU build; with only the toolkit mounted (no
 * driver) the CUDA build must start, fall back and say why, the GPU suite
 * must skip for want of a device, and every library loaded must come from
 * the bundle, glibc's folder or the toolkit. Those need root (CI is root).
 *
 * gpu-check runs on the CPU here: every step but the GPU's own, its per-step
 * timeout (the process it kills is gone after), a failed step (the summary
 * says which, the steps after it still run) and its argument errors.
 */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/helpers.h"

static const char *bundle_dir(void)
{
    const char *b = getenv("TRAIN_BUNDLE_DIR");
    if (!b || !*b)
        cr_skip_test("TRAIN_BUNDLE_DIR not set (make test builds and unpacks the bundle)");
    return b;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert(s);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

static char *dir;

static void nap(double s)
{
    struct timespec t = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&t, NULL);
}

static void setup(void) { dir = tmpdir_make(); }

static void teardown(void)
{
    if (dir)
        tmpdir_remove(dir);
    dir = NULL;
}

TestSuite(bundle, .init = setup, .fini = teardown);

/* Run `cmd` (a shell command line, NULL: none) in the stranger's root,
 * with the bundle at /opt/train and `data` (may be NULL) at /data. */
static void in_root(run_result *r, int cuda, const char *data, const char *cmd)
{
    if (geteuid() != 0)
        cr_skip_test("the chroot needs root (unshare, mount)");
    char *script = path_join(source_root(), "tests/bundle-root");
    char *root = path_join(dir, "root");
    char *argv[12];
    int n = 0;
    argv[n++] = script;
    argv[n++] = root;
    argv[n++] = (char *)bundle_dir();
    if (cuda)
        argv[n++] = "--cuda";
    if (data) {
        argv[n++] = "--data";
        argv[n++] = (char *)data;
    }
    argv[n++] = "--";
    argv[n++] = "/bin/sh";
    argv[n++] = "-c";
    argv[n++] = (char *)cmd;
    argv[n] = NULL;
    run_argv(argv, NULL, 200, r);
    free(script);
    free(root);
}

Test(bundle, layout)
{
    const char *b = bundle_dir();
    /* the CUDA libraries travel as names the launcher looks for, not files */
    char *needs_path = path_join(b, "CUDA_NEEDS");
    char *needs = slurp(needs_path);
    if (needs) {
        cr_expect(strstr(needs, "libcudart.so."), "CUDA_NEEDS: %s", needs);
        cr_expect(strstr(needs, "libcudnn.so."), "CUDA_NEEDS: %s", needs);
    }
    char *lib = path_join(b, "lib");
    DIR *d = opendir(lib);
    cr_assert(d, "no lib/ in %s", b);
    int nlib = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        nlib++;
        cr_expect(strncmp(e->d_name, "libcud", 6) && strncmp(e->d_name, "libcublas", 9) &&
                      strncmp(e->d_name, "libnccl", 7) && strncmp(e->d_name, "libc.so", 7) &&
                      strncmp(e->d_name, "libstdc++", 9),
                  "lib/%s must not travel (CUDA's and glibc's own come from the machine)",
                  e->d_name);
    }
    closedir(d);
    cr_expect_geq(nlib, 8, "libjpeg-turbo, libwebp, libpng, stb, libcsv, OpenBLAS ... travel");
    /* the image decoders' libraries by name (PNG moved from stb to libpng) */
    const char *decoders[] = {"libturbojpeg.so.0", "libwebp.so.7", "libpng16.so.16", "libstb.so.0"};
    for (size_t i = 0; i < sizeof decoders / sizeof *decoders; i++) {
        char *so = path_join(lib, decoders[i]);
        cr_expect_eq(access(so, R_OK), 0, "lib/%s does not travel", decoders[i]);
        free(so);
    }
    /* every carried ELF finds its libraries relative to itself */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for f in libexec/train libexec/train-cpu libexec/tools/* lib/*; do "
             "readelf -d \"$f\" | grep -q 'RUNPATH.*\\$ORIGIN' || echo \"$f\"; done",
             b);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_expect_eq(r.status, 0);
    cr_expect_str_eq(r.out, "", "without an $ORIGIN RUNPATH: %s", r.out);
    run_free(&r);
    /* the archive itself: small enough to travel */
    char *tarball = getenv("TRAIN_BUNDLE_TARBALL");
    if (tarball) {
        struct stat st;
        cr_assert_eq(stat(tarball, &st), 0, "%s", tarball);
        cr_expect_leq(st.st_size, 40ll << 20, "%s is %lld bytes, over 40 MiB", tarball,
                      (long long)st.st_size);
        cr_log_info("bundle: %lld bytes", (long long)st.st_size);
    }
    free(needs);
    free(needs_path);
    free(lib);
}

/* Without CUDA at all: bin/train runs the CPU build, says so, and trains. */
Test(bundle, trains_where_there_is_no_cuda)
{
    char *fm = make_fashion_subset(dir, 96);
    run_result r;
    in_root(&r, 0, fm,
            "/opt/train/bin/train --epochs 1 --batch 32 --workers 2 --no-progress "
            "/data/train.csv && /opt/train/bin/train-cpu --selftest; echo selftest=$?");
    cr_assert_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.err, "no CUDA libraries here") && strstr(r.err, "running the CPU build"),
              "%s", r.err);
    cr_expect(strstr(r.out, "device: cpu (built without CUDA)"), "%s", r.out);
    cr_expect(strstr(r.out, "cpu   lenet    lazy     2"), "an epoch row: %s", r.out);
    cr_expect(strstr(r.out, "selftest=2"), "the CPU build's selftest has no GPU: %s", r.out);
    run_free(&r);
    free(fm);
}

/* The toolkit without a driver: the CUDA build starts, falls back with the
 * reason; the GPU suite skips; the libraries come from the three places. */
Test(bundle, cuda_build_without_a_driver)
{
    char *fm = make_fashion_subset(dir, 64);
    run_result r;
    in_root(&r, 1, fm,
            "LD_DEBUG=libs LD_DEBUG_OUTPUT=/tmp/ld /opt/train/bin/train --epochs 1 --batch 32 "
            "--no-progress /data/train.csv || exit 9; "
            "/opt/train/bin/train --selftest; echo selftest=$?; "
            "/opt/train/bin/train --device cuda /data/train.csv; echo insist=$?; "
            "TRAIN_TOOLS=/opt/train/libexec/tools /opt/train/bin/run-gpu; echo run-gpu=$?; "
            "cat /tmp/ld.* | sed -n 's/.*calling init: //p' | sort -u | "
            "grep -v -E '^(/opt/train/(libexec|lib)/|/lib64/ld-linux|/lib/x86_64-linux-gnu/"
            "lib(c|m|dl|pthread|rt|resolv|stdc\\+\\+|gcc_s)\\.so|/usr/local/cuda/)' "
            "| sed 's/^/foreign: /'; "
            "cat /tmp/ld.* | grep -c 'calling init: /usr/local/cuda/.*libcudnn'");
    if (r.status == 9)
        cr_skip_test("no CUDA build in this bundle (no toolkit where it was made)");
    cr_assert_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "device: cpu (no usable GPU: no NVIDIA driver"), "%s", r.out);
    cr_expect(strstr(r.out, "selftest=2"), "%s", r.out);
    cr_expect(strstr(r.out, "insist=2"), "%s", r.out);
    cr_expect(strstr(r.out, "run-gpu=0"), "%s", r.out);
    cr_expect(strstr(r.err, "skipped: no CUDA device"), "%s", r.err);
    cr_expect_null(strstr(r.out, "foreign: "), "a library from outside: %s", r.out);
    cr_expect(strstr(r.out, "\n1\n"), "cuDNN from the toolkit, once: %s", r.out);
    run_free(&r);
    free(fm);
}

/* gpu-check's argv, OUT in the test's folder; extra arguments after */
static void gpu_check(run_result *r, const char *out, const char *a1, const char *a2,
                      const char *a3, const char *a4, const char *a5)
{
    char *script = path_join(bundle_dir(), "bin/gpu-check");
    char *argv[] = {script,     (char *)out, (char *)a1, (char *)a2,
                    (char *)a3, (char *)a4,  (char *)a5, NULL};
    /* its scratch folder (the data) in the test's own: what it leaves
     * running can be told from another test's */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "TMPDIR=%s", dir);
    char *env[] = {tmp, NULL};
    run_argv(argv, env, 200, r);
    free(script);
}

Test(bundle, gpu_check_on_the_cpu)
{
    char *out = path_join(dir, "out");
    run_result r;
    /* 1,024 images: the outputs' rehearsal, not the E runs' figures */
    gpu_check(&r, out, "--quick", "--images", "1024", NULL, NULL);
    cr_assert_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    char *sp = path_join(out, "summary.txt");
    char *s = slurp(sp);
    cr_assert(s, "no %s", sp);
    cr_expect(strstr(s, "verdict: PASS: every step that ran passed; not run: probe (no GPU), "
                        "cupti (no GPU), selftest (no GPU)"),
              "%s", s);
    cr_expect(strstr(s, "probe          no-gpu"), "%s", s);
    cr_expect(strstr(s, "cupti          skip"), "%s", s);
    cr_expect(strstr(s, "selftest       no-gpu"), "%s", s);
    cr_expect(strstr(s, "run-gpu        pass") || strstr(s, "run-gpu        skip"), "%s", s);
    cr_expect(strstr(s, "skipped: no CUDA device") || strstr(s, "run-gpu        skip"), "%s", s);
    /* the E3 table: four configurations, each with its figures */
    const char *e3 = strstr(s, "== e3\n");
    cr_assert(e3, "%s", s);
    int rows = 0;
    for (const char *p = strstr(e3, "\nlazy "); p && p < strstr(e3, "== e1");
         p = strstr(p + 1, "\nlazy "))
        rows++;
    cr_expect_eq(rows, 4, "%s", e3);
    const char *files[] = {"env.log", "libs.log", "selftest.log", "e3.json",     "e3-trace.json",
                           "e1.json", "e2.json",  "steps.tsv",    "run-gpu.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *f = path_join(out, files[i]);
        struct stat st;
        cr_expect(stat(f, &st) == 0 && st.st_size > 0, "%s missing or empty", files[i]);
        free(f);
    }
    char *ep = path_join(out, "env.log");
    char *env = slurp(ep);
    cr_expect(env && strstr(env, "ulimit -l") && strstr(env, "glibc:"), "%s", env);
    free(env);
    free(ep);
    free(s);
    free(sp);
    free(out);
    run_free(&r);
}

/* One step over its time: killed with what it started, named in the
 * summary; the exit status says so. */
Test(bundle, gpu_check_step_timeout)
{
    char *out = path_join(dir, "out");
    run_result r;
    /* data, then an E2 run on the CPU: whichever passes 1 s first (the
     * data step alone took 0.9 s on a quiet machine, so it cannot be the
     * one relied on) is killed and named */
    gpu_check(&r, out, "--steps", "e2", "--step-timeout", "1", NULL);
    cr_expect_eq(r.status, 1, "stdout: %s\nstderr: %s", r.out, r.err);
    cr_expect(strstr(r.out, "data           timeout    124") ||
                  strstr(r.out, "e2             timeout    124"),
              "%s", r.out);
    cr_expect(strstr(r.out, "verdict: FAIL: data (timeout)") ||
                  strstr(r.out, "verdict: FAIL: e2 (timeout)"),
              "%s", r.out);
    /* the killed tool is gone, not orphaned */
    char cmd[700];
    snprintf(cmd, sizeof cmd,
             "sleep 1; pgrep -f '[f]ashion_mnist --src .* --out %s|[-]-model lenet .*%s' | wc -l",
             dir, dir);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    run_result p;
    run_argv(argv, NULL, 10, &p);
    cr_expect_eq(atoi(p.out), 0, "fashion_mnist or train still running");
    run_free(&p);
    run_free(&r);
    free(out);
}

/* A failing step: the summary is written and names it; later steps run. */
Test(bundle, gpu_check_failed_step)
{
    char *bad = path_join(dir, "bad");
    mkdir(bad, 0755);
    free(write_text(bad, "train-images-idx3-ubyte.gz", "not gzip, not IDX\n"));
    char *out = path_join(dir, "out");
    run_result r;
    gpu_check(&r, out, "--steps", "data,e3,selftest", "--fashion", bad, NULL);
    cr_expect_eq(r.status, 1, "stdout: %s\nstderr: %s", r.out, r.err);
    char *sp = path_join(out, "summary.txt");
    char *s = slurp(sp);
    cr_assert(s);
    cr_expect(strstr(s, "data           fail"), "%s", s);
    cr_expect(strstr(s, "e3             skip"), "%s", s);
    cr_expect(strstr(s, "selftest       no-gpu"), "the steps after still ran: %s", s);
    cr_expect(strstr(s, "verdict: FAIL: data (fail)"), "%s", s);
    char *lp = path_join(out, "data.log");
    char *log = slurp(lp);
    cr_expect(log && strstr(log, "train-images-idx3-ubyte.gz"), "the tool names the file: %s", log);
    free(log);
    free(lp);
    free(s);
    free(sp);
    free(out);
    free(bad);
    run_free(&r);
}

Test(bundle, gpu_check_usage_errors)
{
    char *out = path_join(dir, "out");
    run_result r;
    gpu_check(&r, out, "--steps", "e4", NULL, NULL, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--steps: no step 'e4'"), "%s", r.err);
    run_free(&r);
    gpu_check(&r, out, "--budget", "soon", NULL, NULL, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--budget wants whole seconds"), "%s", r.err);
    run_free(&r);
    gpu_check(&r, out, "--budget", "0", "--steps", "selftest", NULL);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "selftest       skip") && strstr(r.out, "budget of 0s spent"), "%s",
              r.out);
    run_free(&r);
    free(out);
}

/* The manylinux wheel (make wheel, tools/wheel): installed with pip into a
 * fresh venv and used in a mount namespace where Debian's copies of every
 * library it carries are hidden (/dev/null bound over them): a folder's
 * batches come through DLPack, equal to the in-tree module's, and every
 * carried library is the wheel's own. */
static const char wheel_check_py[] =
    "import sys, numpy as np, trainloader\n"
    "csv, want_tree = sys.argv[1], sys.argv[2] == 'tree'\n"
    "site = '/site-packages/trainloader/' in trainloader.__file__\n"
    "print('from', 'site-packages' if site else trainloader.__file__)\n"
    "L = trainloader.Loader(csv, batch=16, workers=2, seed=3)\n"
    "n, sums = 0, []\n"
    "for images, labels in L:\n"
    "    x, y = np.from_dlpack(images), np.from_dlpack(labels)\n"
    "    assert x.dtype == np.uint8 and x.shape[1:] == (3, 28, 28), (x.dtype, x.shape)\n"
    "    sums.append((int(x.astype(np.int64).sum()), y.tolist()))\n"
    "    n += x.shape[0]\n"
    "print('images', n)\n"
    "print('batches', sums)\n"
    "maps = open('/proc/self/maps').read().split()\n"
    "for name in ('libjpeg', 'libturbojpeg', 'libwebp', 'libpng16', 'libstb', 'libcsv'):\n"
    "    paths = sorted({p for p in maps if '/' + name in p})\n"
    "    print('lib', name, ' '.join(paths))\n";

Test(bundle, wheel_without_debian_libraries)
{
    const char *wheel = getenv("TRAIN_WHEEL");
    if (!wheel || !*wheel)
        cr_skip_test("TRAIN_WHEEL not set (make test builds the wheel)");
    if (geteuid() != 0)
        cr_skip_test("the namespace needs root (unshare, mount)");
    char *fm = make_fashion_subset(dir, 40);
    char *py = write_text(dir, "check.py", wheel_check_py);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "set -e; cd '%s'; /usr/bin/python3 -m venv --system-site-packages venv; "
             "venv/bin/pip install -q --no-index --no-deps --disable-pip-version-check '%s'; "
             "unshare -m sh -c 'for l in libjpeg.so.62 libturbojpeg.so.0 libwebp.so.7 "
             "libpng16.so.16 libstb.so.0 libcsv.so.3; do mount --bind /dev/null "
             "/usr/lib/x86_64-linux-gnu/$l; "
             "done; exec venv/bin/python check.py %s/train.csv wheel' > wheel.out; "
             "PYTHONPATH='%s/build/python' /usr/bin/python3 check.py %s/train.csv tree > tree.out",
             dir, wheel, fm, source_root(), fm);
    char *argv[] = {"/usr/bin/env", "-u", "PYTHONPATH", "/bin/sh", "-c", cmd, NULL};
    run_result r;
    run_argv(argv, NULL, 180, &r);
    cr_assert_eq(r.status, 0, "stdout: %s\nstderr: %s", r.out, r.err);
    char *wp = path_join(dir, "wheel.out"), *tp = path_join(dir, "tree.out");
    char *w = slurp(wp), *t = slurp(tp);
    cr_assert(w && t);
    cr_expect(strstr(w, "from site-packages\n"), "%s", w);
    cr_expect(strstr(w, "images 40\n"), "%s", w);
    /* the same batches, bit for bit (pixel sums and labels), as the module
     * built in the tree */
    const char *wb = strstr(w, "batches "), *tb = strstr(t, "batches ");
    cr_assert(wb && tb, "%s\n%s", w, t);
    cr_expect_eq(strcspn(wb, "\n"), strcspn(tb, "\n"));
    cr_expect_eq(strncmp(wb, tb, strcspn(wb, "\n")), 0, "wheel: %.200s\ntree: %.200s", wb, tb);
    /* every library it carries was loaded from the wheel, none from Debian */
    const char *names[] = {"libjpeg", "libturbojpeg", "libwebp", "libpng16", "libstb", "libcsv"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char key[64];
        snprintf(key, sizeof key, "lib %s ", names[i]);
        const char *l = strstr(w, key);
        cr_assert(l, "%s not loaded: %s", names[i], w);
        size_t len = strcspn(l, "\n");
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        cr_expect(strstr(line, "/trainloader.libs/"), "%s", line);
        cr_expect_null(strstr(line, "/usr/lib/"), "%s", line);
    }
    free(w);
    free(t);
    free(wp);
    free(tp);
    free(py);
    free(fm);
    run_free(&r);
}

/* OUT must be new or empty; an explicit --fashion without the files is an
 * error, not a run that skips everything and passes. */
Test(bundle, gpu_check_refuses_a_used_folder_and_a_wrong_data_path)
{
    char *out = path_join(dir, "out");
    mkdir(out, 0755);
    free(write_text(out, "steps.tsv", "old\n"));
    run_result r;
    gpu_check(&r, out, "--steps", "selftest", NULL, NULL, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "is not empty"), "%s", r.err);
    run_free(&r);
    char *out2 = path_join(dir, "out2");
    gpu_check(&r, out2, "--fashion", "/nonexistent", NULL, NULL, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--fashion /nonexistent: no train-images-idx3-ubyte.gz"), "%s", r.err);
    run_free(&r);
    gpu_check(&r, out2, "--images", "0", NULL, NULL, NULL);
    cr_expect_eq(r.status, 2);
    cr_expect(strstr(r.err, "--images wants a whole number above 0, not '0'"), "%s", r.err);
    run_free(&r);
    gpu_check(&r, out2, "--help", NULL, NULL, NULL, NULL);
    cr_expect_eq(r.status, 0);
    cr_expect(strstr(r.out, "gpu-check OUTDIR") && !strstr(r.out, "set -u"),
              "the usage, and no code: %s", r.out);
    run_free(&r);
    free(out);
    free(out2);
}

/* Ctrl-C stops the running step at once (it sits in timeout's process
 * group, out of the terminal's reach), writes the summary, exits 130 and
 * leaves no process behind; --budget bounds the whole run. */
Test(bundle, gpu_check_stops_on_ctrl_c_and_keeps_its_budget)
{
    char *script = path_join(bundle_dir(), "bin/gpu-check");
    char *out = path_join(dir, "out"), *so = path_join(dir, "so"), *se = path_join(dir, "se");
    char tmp[600];
    snprintf(tmp, sizeof tmp, "TMPDIR=%s", dir);
    char *argv[] = {"/usr/bin/env", tmp, script, out, "--steps", "e2", NULL};
    pid_t pid = spawn_bg(argv, so, se);
    char *steps = path_join(out, "steps.tsv");
    char *log = path_join(out, "e2.log");
    struct stat st;
    for (int i = 0; i < 2400 && stat(log, &st) != 0; i++) /* e2 has started */
        nap(0.05);
    cr_assert_eq(stat(log, &st), 0, "e2 did not start within 2 minutes");
    nap(1.5);
    int early;
    cr_assert_eq(waitpid(pid, &early, WNOHANG), 0, "gpu-check ended before the Ctrl-C");
    kill(pid, SIGINT);
    double t0 = 0;
    {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t0 = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
    }
    int status = spawn_wait(pid, 60);
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double waited = (double)t.tv_sec + 1e-9 * (double)t.tv_nsec - t0;
    char *err_text = slurp(se);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d; stderr:\n%s", status,
              err_text ? err_text : "(none)");
    free(err_text);
    cr_expect_lt(waited, 15.0, "%.1f s from Ctrl-C to the end", waited);
    char *sp = path_join(out, "summary.txt");
    char *s = slurp(sp);
    cr_expect(s && strstr(s, "e2             interrupted"), "%s", s ? s : "(no summary)");
    char cmd[800];
    snprintf(cmd, sizeof cmd, "sleep 1; pgrep -f '[t]rain.* %s' | wc -l", dir);
    char *pg[] = {"/bin/sh", "-c", cmd, NULL};
    run_result r;
    run_argv(pg, NULL, 10, &r);
    cr_expect_eq(atoi(r.out), 0, "processes left: %s", r.out);
    run_free(&r);
    free(s);
    free(sp);
    /* the budget: 4 s for the whole run, whatever the steps would take */
    char *out3 = path_join(dir, "out3");
    char *av[] = {"/usr/bin/env", tmp, script, out3, "--budget", "4", "--steps", "data,e2", NULL};
    run_argv(av, NULL, 120, &r);
    cr_expect_lt(r.secs, 4 + 12.0, "a 4 s budget took %.1f s", r.secs);
    cr_expect(strstr(r.out, "budget of 4s spent") || strstr(r.out, "timeout"), "%s", r.out);
    run_free(&r);
    free(out3);
    free(steps), free(log), free(out), free(so), free(se), free(script);
}

/* A link to a launcher under another name runs that launcher's program. */
Test(bundle, a_launcher_linked_under_another_name_runs_its_program)
{
    char *target = path_join(bundle_dir(), "bin/train"), *link = path_join(dir, "mytrain");
    cr_assert_eq(symlink(target, link), 0);
    char *argv[] = {link, "--version", NULL};
    run_result r;
    run_argv(argv, NULL, 30, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "images: libjpeg"), "%s", r.out);
    run_free(&r);
    free(target);
    free(link);
}
