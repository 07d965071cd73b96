/* test_dist.c — data-parallel ranks end to end: the real binary as 2 ranks
 * under a real `mpirun` (Open MPI), against the one-process program.
 *
 * The data set is a real Fashion-MNIST subset of 385 images per split:
 * with --batch 64 its last batch holds ONE sample, so rank 1's slice of it
 * is empty in training and in validation, and the sums still have to come
 * out as the one-process run's. (How batches are cut into slices is tested
 * on the loader itself in test_loader.c.) Skipped when built without MPI.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/ranks.h"
#include "common/util.h"
#include "tests/support/helpers.h"
#include "tests/support/mpirun.h"

static char *dir, *fm, *fm_train, *fm_val;

static void setup(void)
{
    if (!mpi_available())
        return;
    mpi_test_env();
    dir = tmpdir_make();
    fm = make_fashion_subset(dir, 385);
    fm_train = path_join(fm, "train.csv");
    fm_val = path_join(fm, "test.csv");
}

static void teardown(void)
{
    spawn_kill_all();
    if (dir)
        tmpdir_remove(dir);
    free(fm);
    free(fm_train);
    free(fm_val);
}

TestSuite(dist, .init = setup, .fini = teardown);

#define NEED_MPI()                                                                                 \
    do {                                                                                           \
        if (!mpi_available())                                                                      \
            cr_skip_test("built without MPI or no mpirun");                                        \
    } while (0)

/* the whole file, NUL-terminated */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char *buf = NULL;
    size_t cap = 0, len = 0, k;
    char tmp[4096];
    while ((k = fread(tmp, 1, sizeof tmp, f)) > 0) {
        buf = realloc(buf, (cap = len + k + 1));
        memcpy(buf + len, tmp, k);
        len += k;
    }
    fclose(f);
    if (!buf)
        buf = calloc(1, 1);
    buf[len] = '\0';
    (void)cap;
    return buf;
}

/* the values of key in every epoch record of a --json file, as doubles */
static int epoch_numbers(const char *json, const char *key, double *v, int max)
{
    char vals[8][JSON_VALUE_MAX];
    int n = json_epoch_values(json, key, vals, max < 8 ? max : 8);
    for (int i = 0; i < n; i++)
        v[i] = strtod(vals[i], NULL);
    return n;
}

/* two epochs of LeNet on the subset, with validation, into json */
#define TRAIN_ARGS(json)                                                                           \
    "--epochs", "2", "--batch", "64", "--lr", "0.005", "--workers", "1", "--channels", "1",        \
        "--val", fm_val, "--json", json, fm_train

Test(dist, two_ranks_match_one_process_and_rerun_bit_for_bit)
{
    NEED_MPI();
    char *j1 = path_join(dir, "k1.json"), *j2 = path_join(dir, "k2.json"),
         *j2b = path_join(dir, "k2b.json");
    run_result r;
    run_train(&r, TRAIN_ARGS(j1), NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    for (int k = 0; k < 2; k++) {
        run_mpi(&r, 2, train_bin(), TRAIN_ARGS(k ? j2b : j2), NULL);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cr_assert(strstr(r.out, "ranks 2"), "rank 0 says it runs 2 ranks:\n%s", r.out);
        run_free(&r);
    }
    assert_same_losses(j2, j2b, 2); /* same K: every bit */
    double l1[2], l2[2], v1[2], v2[2], n1[2], n2[2];
    cr_assert_eq(epoch_numbers(j1, "loss", l1, 2), 2);
    cr_assert_eq(epoch_numbers(j2, "loss", l2, 2), 2);
    for (int e = 0; e < 2; e++) /* K = 1 vs 2: the same training (the mean adds rank sums) */
        cr_assert(fabs(l1[e] - l2[e]) <= 1e-13 * fabs(l1[e]),
                  "epoch %d: loss %.17g (1 process) vs %.17g (2 ranks)", e + 1, l1[e], l2[e]);
    /* validation and the images counted exactly over the ranks */
    epoch_numbers(j1, "val_acc", v1, 2);
    epoch_numbers(j2, "val_acc", v2, 2);
    epoch_numbers(j1, "images", n1, 2);
    epoch_numbers(j2, "images", n2, 2);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(v1[e], v2[e], "epoch %d: validation accuracy %g vs %g", e + 1, v1[e], v2[e]);
        cr_assert_eq(n2[e], 385, "epoch %d: the job saw %g images", e + 1, n2[e]);
    }
    char ranks[2][JSON_VALUE_MAX], comm[2][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j2, "ranks", ranks, 2), 2);
    cr_assert_str_eq(ranks[0], "2");
    cr_assert_eq(json_epoch_values(j2, "comm_pct", comm, 2), 2);
    cr_assert(strtod(comm[0], NULL) > 0 && strtod(comm[0], NULL) < 100, "comm%% %s", comm[0]);
    char *one = slurp(j1);
    cr_assert_null(strstr(one, "\"ranks\""), "one process: no ranks fields");
    free(one);
    free(j1);
    free(j2);
    free(j2b);
}

Test(dist, a_checkpoint_of_two_ranks_resumes_in_one_process)
{
    NEED_MPI();
    char *ck = path_join(dir, "k2.ckpt"), *ja = path_join(dir, "straight.json"),
         *jb = path_join(dir, "resumed.json");
    run_result r;
    run_mpi(&r, 2, train_bin(), "--epochs", "1", "--batch", "64", "--lr-schedule", "const",
            "--channels", "1", "--save", ck, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--epochs", "2", "--batch", "64", "--lr-schedule", "const", "--channels", "1",
              "--resume", ck, "--json", jb, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    run_train(&r, "--epochs", "2", "--batch", "64", "--lr-schedule", "const", "--channels", "1",
              "--json", ja, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    double a[2], b[1];
    cr_assert_eq(epoch_numbers(ja, "loss", a, 2), 2);
    cr_assert_eq(epoch_numbers(jb, "loss", b, 1), 1, "the resumed run trains epoch 2 only");
    cr_assert(fabs(a[1] - b[0]) <= 1e-6 * fabs(a[1]), "epoch 2: %.9g straight vs %.9g resumed",
              a[1], b[0]);
    free(ck);
    free(ja);
    free(jb);
}

/* how often needle occurs in s */
static int occurrences(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The descendants of a rank once its loader has started (a supervisor and
 * a worker; threads are not processes), waiting up to 30 s; returns how
 * many are in tree. */
static int rank_loader_tree(pid_t rank, pid_t *tree, int max)
{
    int n = 0;
    for (int tries = 0; tries < 3000 && n < 2; tries++, usleep(10000))
        n = process_descendants(rank, tree, max);
    return n;
}

static void assert_all_gone(const pid_t *pids, int n)
{
    usleep(200000);
    for (int i = 0; i < n; i++)
        cr_assert(!process_alive(pids[i]), "process %d outlived the job", (int)pids[i]);
}

Test(dist, a_worker_killed_in_rank_1_stops_every_rank_naming_rank_1)
{
    NEED_MPI();
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *args[] = {"--epochs",         "2",     "--batch",    "16", "--workers", "1",
                    "--test-slow-load", "0.003", "--channels", "1",  fm_train,    NULL};
    pid_t mp = spawn_mpi(2, train_bin(), args, out, err);
    pid_t rank1 = mpi_rank_pid(mp, 1);
    pid_t tree[32];
    int n = rank_loader_tree(rank1, tree, 32);
    cr_assert_geq(n, 2, "rank 1's loader processes");
    usleep(500000);
    pid_t all[64];
    int na = process_descendants(mp, all, 64);
    kill(tree[n - 1], SIGKILL); /* rank 1's worker */
    int st = spawn_wait(mp, 60);
    char *e = slurp(err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %d: %s", st, e);
    char want[96];
    snprintf(want, sizeof want, "(pid %d) was killed by signal 9", (int)tree[n - 1]);
    cr_assert_eq(occurrences(e, want), 1, "the death said once: %s", e);
    cr_assert_eq(occurrences(e, "train: rank 1 ("), 1, "naming rank 1, once: %s", e);
    cr_assert_eq(occurrences(e, "train:"), 1, "one message for the job: %s", e);
    assert_all_gone(all, na);
    free(e);
    free(out);
    free(err);
}

Test(dist, sigint_to_the_launcher_stops_every_rank_and_worker)
{
    NEED_MPI();
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *args[] = {"--epochs",         "3",     "--batch",    "16", "--workers", "1",
                    "--test-slow-load", "0.003", "--channels", "1",  fm_train,    NULL};
    pid_t mp = spawn_mpi(2, train_bin(), args, out, err);
    pid_t rank1 = mpi_rank_pid(mp, 1);
    pid_t tree[32];
    rank_loader_tree(rank1, tree, 32); /* its loader has started */
    usleep(500000);
    pid_t all[64];
    int na = process_descendants(mp, all, 64);
    cr_assert_geq(na, 6, "2 ranks, each with a supervisor and a worker");
    kill(mp, SIGINT);
    int st = spawn_wait(mp, 30);
    char *e = slurp(err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d: %s", st, e);
    cr_assert_eq(occurrences(e, "interrupted"), 1, "said once: %s", e);
    assert_all_gone(all, na);
    free(e);
    free(out);
    free(err);
}

Test(dist, a_missing_image_is_reported_once_with_exit_2)
{
    NEED_MPI();
    char *csv = slurp(fm_train);
    /* row 200 points at a file that does not exist; the CSV sits beside
     * the real one, so the other paths still resolve */
    char *row = strstr(csv, "train/00199.png");
    cr_assert_not_null(row);
    memcpy(row, "train/missing", 13);
    char *bad_in_fm = write_text(fm, "bad.csv", csv);
    run_result r;
    run_mpi(&r, 2, train_bin(), "--epochs", "1", "--batch", "16", "--workers", "1", "--channels",
            "1", bad_in_fm, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(occurrences(r.err, "missing"), 1, "reported once: %s", r.err);
    cr_assert_eq(occurrences(r.err, "train:"), 1, "%s", r.err);
    run_free(&r);
    free(csv);
    free(bad_in_fm);
}

Test(dist, a_sweep_is_refused_under_a_launcher)
{
    NEED_MPI();
    run_result r;
    run_mpi(&r, 2, train_bin(), "--workers", "0,1", "--epochs", "1", fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(occurrences(r.err, "cannot run under an MPI launcher"), 1, "%s", r.err);
    run_free(&r);
}

Test(dist, the_verdict_names_a_straggler_and_each_bound_at_its_threshold)
{
    char b[512];
    /* 2 ranks: the slow one waits 15%, the other 5% (mean 10) */
    cr_assert(strstr(ranks_verdict_text(10, 15, 1, "h1", 40, 2, b, sizeof b),
                     "rank 1 (h1) is the straggler"),
              "%s", b);
    cr_assert_null(strstr(ranks_verdict_text(9.95, 14.9, 1, "h1", 10, 2, b, sizeof b), "straggler"),
                   "%s", b);
    /* 10 points apart, not 9.9 */
    cr_assert_null(strstr(ranks_verdict_text(15.05, 20, 1, "h1", 10, 2, b, sizeof b), "straggler"),
                   "%s", b);
    /* 4 ranks: the others' mean, not the mean of all, is the reference */
    cr_assert(strstr(ranks_verdict_text(10, 25, 3, "h3", 10, 4, b, sizeof b), "rank 3 (h3)"), "%s",
              b);
    cr_assert(strstr(ranks_verdict_text(5, 6, 0, "h", 30, 2, b, sizeof b), "communication-bound"),
              "%s", b);
    cr_assert(strstr(ranks_verdict_text(5, 6, 0, "h", 29.9, 2, b, sizeof b), "compute-bound"), "%s",
              b);
    cr_assert(strstr(ranks_verdict_text(30, 31, 0, "h", 5, 2, b, sizeof b), "data-bound"), "%s", b);
    cr_assert(strstr(ranks_verdict_text(29.9, 31, 0, "h", 5, 2, b, sizeof b), "compute-bound"),
              "%s", b);
}

Test(dist, a_rank_with_a_slow_loader_is_named_the_straggler)
{
    NEED_MPI();
    char *j = path_join(dir, "slow.json");
    run_result r;
    /* 10 ms a sample: waiting must dominate even when the suite's other
     * tests take the cores (at 4 ms a loaded CI machine read 22%) */
    run_mpi(&r, 2, train_bin(), "--epochs", "1", "--batch", "64", "--workers", "1", "--channels",
            "1", "--test-slow-load", "0.01", "--test-slow-rank", "1", "--json", j, fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "ranks: rank 1 ("), "%s", r.out);
    cr_assert(strstr(r.out, "is the straggler"), "%s", r.out);
    run_free(&r);
    char rk[1][JSON_VALUE_MAX], w[1][JSON_VALUE_MAX], pr[1][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(j, "wait_max_rank", rk, 1), 1);
    cr_assert_str_eq(rk[0], "1");
    json_epoch_values(j, "wait_max_pct", w, 1);
    /* the slow load burns CPU, so a machine loaded by other work slows
     * both ranks' steps with it: 23% was read under a mutation run beside
     * the suite, 40-60% on a quiet machine. The verdict's thresholds are
     * tested at their boundaries above; here the wait must stand out */
    cr_assert_gt(strtod(w[0], NULL), 15, "rank 1 waited %s%%", w[0]);
    json_epoch_values(j, "rank_wait_pct", pr, 1);
    cr_assert_eq(pr[0][0], '[', "per-rank waits: %s", pr[0]);
    cr_assert_lt(strtod(pr[0] + 1, NULL), 10, "rank 0 hardly waits for data: %s", pr[0]);
    free(j);
}

/* the whole file as bytes: equal or not */
static int same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    fseek(fa, 0, SEEK_END);
    fseek(fb, 0, SEEK_END);
    long la = ftell(fa), lb = ftell(fb);
    rewind(fa);
    rewind(fb);
    char *ba = malloc((size_t)la + 1), *bb = malloc((size_t)lb + 1);
    int same = la == lb && fread(ba, 1, (size_t)la, fa) == (size_t)la &&
               fread(bb, 1, (size_t)lb, fb) == (size_t)lb && memcmp(ba, bb, (size_t)la) == 0;
    fclose(fa);
    fclose(fb);
    free(ba);
    free(bb);
    return same;
}

/* LeNet for two epochs as 1, 2 and 4 ranks with extra arguments (NULL
 * for none); checkpoints and JSON into ck[] and js[] */
static void one_two_four(const char *tag, const char *a1, const char *a2, char **ck, char **js)
{
    int ks[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        char name[48];
        snprintf(name, sizeof name, "%s-k%d.ckpt", tag, ks[i]);
        ck[i] = path_join(dir, name);
        snprintf(name, sizeof name, "%s-k%d.json", tag, ks[i]);
        js[i] = path_join(dir, name);
        run_result r;
        const char *x1 = a1 ? a1 : "--seed", *x2 = a1 ? a2 : "1"; /* --seed 1: the default */
        if (ks[i] == 1)
            run_train(&r, x1, x2, "--save", ck[i], TRAIN_ARGS(js[i]), NULL);
        else
            run_mpi(&r, ks[i], train_bin(), x1, x2, "--save", ck[i], TRAIN_ARGS(js[i]), NULL);
        cr_assert_eq(r.status, 0, "K=%d: %s", ks[i], r.err);
        run_free(&r);
    }
}

/* By default (--grad-chunks auto: 4 chunks on the CPU) and with U given:
 * two epochs, the parameters after them byte for byte whatever K is (the
 * last batch's single sample leaves chunks and slices empty) */
static void assert_same_bits_for_one_two_four(const char *tag, const char *a1, const char *a2)
{
    char *ck[3], *js[3];
    int ks[3] = {1, 2, 4};
    one_two_four(tag, a1, a2, ck, js);
    for (int i = 1; i < 3; i++) {
        cr_assert(same_bytes(ck[0], ck[i]), "K=1 and K=%d end with other parameters", ks[i]);
        double a[2], b[2];
        epoch_numbers(js[0], "loss", a, 2);
        epoch_numbers(js[i], "loss", b, 2);
        for (int e = 0; e < 2; e++) /* the reported mean adds the ranks' sums in another order */
            cr_assert(fabs(a[e] - b[e]) <= 1e-13 * fabs(a[e]), "K=%d epoch %d: %.17g vs %.17g",
                      ks[i], e + 1, a[e], b[e]);
    }
    for (int i = 0; i < 3; i++) {
        free(ck[i]);
        free(js[i]);
    }
}

Test(dist, one_two_and_four_ranks_give_the_same_bits_by_default)
{
    NEED_MPI();
    assert_same_bits_for_one_two_four("auto", NULL, NULL);
}

Test(dist, grad_chunks_give_the_same_bits_for_one_two_and_four_ranks)
{
    NEED_MPI();
    assert_same_bits_for_one_two_four("chunks", "--grad-chunks", "8");
}

/* Without a fixed tree the ranks sum their slices inside the backward
 * GEMMs: K = 1 and 4 differ in the last bits, and still agree to 6
 * significant digits over these two short epochs. */
Test(dist, grad_chunks_off_agree_to_six_digits)
{
    NEED_MPI();
    char *ck[3], *js[3];
    one_two_four("off", "--grad-chunks", "off", ck, js);
    cr_assert(!same_bytes(ck[0], ck[2]), "off: K=1 and K=4 should not be the same bits");
    for (int i = 1; i < 3; i++) {
        double a[2], b[2];
        epoch_numbers(js[0], "loss", a, 2);
        epoch_numbers(js[i], "loss", b, 2);
        for (int e = 0; e < 2; e++)
            cr_assert(fabs(a[e] - b[e]) <= 1e-6 * fabs(a[e]), "K=%d epoch %d: %.9g vs %.9g", i * 2,
                      e + 1, a[e], b[e]);
    }
    for (int i = 0; i < 3; i++) {
        free(ck[i]);
        free(js[i]);
    }
}

Test(dist, grad_chunks_that_the_ranks_cannot_split_are_refused_once)
{
    NEED_MPI();
    run_result r;
    run_mpi(&r, 3, train_bin(), "--grad-chunks", "4", "--epochs", "1", "--channels", "1", fm_train,
            NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(occurrences(r.err, "--grad-chunks 4 with 3 ranks"), 1, "%s", r.err);
    run_free(&r);
    run_train(&r, "--grad-chunks", "3", "--epochs", "1", fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "not a power of 2"), "%s", r.err);
    run_free(&r);
}

/* ---------------------------------------------------------------- one preload copy per node */

/* The mapping of a file whose path starts with prefix in pid's address
 * space: 1 with its path, permissions and inode (2 when the file has no
 * name any more); 0 when there is none (yet); -1 when the process is
 * gone. */
static int file_mapping(pid_t pid, const char *prefix, char *path, size_t len, char perms[8],
                        unsigned long *ino)
{
    char maps[64], line[1024];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(maps, "r");
    if (!f)
        return -1;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char p[8], file[512] = "";
        if (sscanf(line, "%*s %7s %*s %*s %lu %511s", p, ino, file) == 3 &&
            !strncmp(file, prefix, strlen(prefix))) {
            snprintf(perms, 8, "%s", p);
            snprintf(path, len, "%s", file);
            found = strstr(line, " (deleted)") ? 2 : 1;
        }
    }
    fclose(f);
    return found;
}

/* The node's cache file that rank 0 names in its output ("... in PATH:"). */
static void node_cache_path(const char *out, char *path, size_t len)
{
    const char *at = strstr(out, "one copy for the node's ranks in ");
    cr_assert_not_null(at, "rank 0 says the node shares one cache: %s", out);
    at += strlen("one copy for the node's ranks in ");
    size_t n = strcspn(at, ":\n");
    cr_assert_lt(n, len);
    memcpy(path, at, n);
    path[n] = '\0';
}

#define PRELOAD_ARGS(json)                                                                         \
    "--mode", "preload", "--epochs", "2", "--batch", "64", "--lr", "0.005", "--workers", "1",      \
        "--channels", "1", "--val", fm_val, "--json", json

Test(dist, preload_keeps_one_copy_per_node_decoded_once_and_matches_one_process)
{
    NEED_MPI();
    char *j1 = path_join(dir, "p1.json"), *j2 = path_join(dir, "p2.json");
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    run_result r;
    run_train(&r, PRELOAD_ARGS(j1), fm_train, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    /* slow steps keep the ranks up while their mappings are looked at */
    char *args[] = {PRELOAD_ARGS(j2), "--test-slow-step", "0.05", fm_train, NULL};
    pid_t mp = spawn_mpi(2, train_bin(), args, out, err);
    pid_t pid[2] = {mpi_rank_pid(mp, 0), mpi_rank_pid(mp, 1)};
    char path[2][512], perms[2][8];
    unsigned long ino[2];
    int got[2] = {0, 0};
    while (!(got[0] > 0 && got[1] > 0) && got[0] >= 0 && got[1] >= 0) {
        for (int k = 0; k < 2; k++)
            if (got[k] <= 0)
                got[k] = file_mapping(pid[k], "/dev/shm/train-", path[k], sizeof path[k], perms[k],
                                      &ino[k]);
        usleep(10000);
    }
    /* once every rank has mapped it (start-up), the file loses its name
     * while the ranks still train: a SIGKILLed job leaves nothing in
     * /dev/shm (at the end the mapping goes before the name would) */
    int still = got[0], deleted = still == 2;
    char p0[512];
    unsigned long i0;
    char pp[8];
    for (double end = now_sec() + 60; still > 0 && !deleted && now_sec() < end; usleep(5000)) {
        still = file_mapping(pid[0], "/dev/shm/train-", p0, sizeof p0, pp, &i0);
        deleted = still == 2;
    }
    int st = spawn_wait(mp, 120);
    char *o = slurp(out), *e = slurp(err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d: %s", st, e);
    cr_assert(got[0] > 0 && got[1] > 0, "both ranks mapped the node's cache (%d, %d)", got[0],
              got[1]);
    cr_assert(deleted, "the node's cache kept its name while the ranks trained");
    /* one file, one inode: one copy; only rank 0 can write (decode) into it */
    cr_assert_str_eq(path[0], path[1]);
    cr_assert_eq(ino[0], ino[1], "the same file: inode %lu vs %lu", ino[0], ino[1]);
    cr_assert_str_eq(perms[0], "rw-s");
    cr_assert_str_eq(perms[1], "r--s", "rank 1 maps it read-only: it decodes nothing");
    char named[512];
    node_cache_path(o, named, sizeof named);
    cr_assert_str_eq(named, path[0]);
    cr_assert_eq(occurrences(o, "preload: decoded 385 samples"), 1, "%s", o);
    cr_assert_neq(access(named, F_OK), 0, "%s is removed at the end", named);
    /* the same training as one process that preloads */
    double l1[2], l2[2], v1[2], v2[2];
    cr_assert_eq(epoch_numbers(j1, "loss", l1, 2), 2);
    cr_assert_eq(epoch_numbers(j2, "loss", l2, 2), 2);
    epoch_numbers(j1, "val_acc", v1, 2);
    epoch_numbers(j2, "val_acc", v2, 2);
    for (int k = 0; k < 2; k++) {
        cr_assert(fabs(l1[k] - l2[k]) <= 1e-13 * fabs(l1[k]),
                  "epoch %d: loss %.17g (1 process) vs %.17g (2 ranks)", k + 1, l1[k], l2[k]);
        cr_assert_eq(v1[k], v2[k], "epoch %d: validation accuracy %g vs %g", k + 1, v1[k], v2[k]);
    }
    free(o);
    free(e);
    free(out);
    free(err);
    free(j1);
    free(j2);
}

Test(dist, a_preload_build_failing_in_local_rank_0_stops_every_rank_and_removes_the_copy)
{
    NEED_MPI();
    char *csv = slurp(fm_train);
    char *row = strstr(csv, "train/00199.png"); /* not among the images probed at start */
    cr_assert_not_null(row);
    memcpy(row, "train/missing", 13);
    char *bad_in_fm = write_text(fm, "bad-preload.csv", csv);
    run_result r;
    run_mpi(&r, 2, train_bin(), "--mode", "preload", "--epochs", "1", "--batch", "16", "--workers",
            "1", "--channels", "1", bad_in_fm, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(occurrences(r.err, "train: rank 0 ("), 1, "local rank 0 named, once: %s", r.err);
    cr_assert_eq(occurrences(r.err, "missing"), 1, "reported once: %s", r.err);
    cr_assert_eq(occurrences(r.err, "train:"), 1, "%s", r.err);
    char named[512];
    node_cache_path(r.out, named, sizeof named);
    cr_assert_neq(access(named, F_OK), 0, "%s is removed after the failure", named);
    run_free(&r);
    free(csv);
    free(bad_in_fm);
}

Test(dist, a_preload_cache_file_is_built_once_for_the_node_then_reused)
{
    NEED_MPI();
    char *cache = path_join(dir, "node.cache"), *ja = path_join(dir, "ca.json"),
         *jb = path_join(dir, "cb.json");
    run_result r;
    for (int k = 0; k < 2; k++) {
        run_mpi(&r, 2, train_bin(), "--mode", "preload", "--cache", cache, "--epochs", "1",
                "--batch", "64", "--workers", "1", "--channels", "1", "--json", k ? jb : ja,
                fm_train, NULL);
        cr_assert_eq(r.status, 0, "%s", r.err);
        if (k == 0) {
            cr_assert_eq(occurrences(r.out, "preload: decoded 385 samples"), 1, "%s", r.out);
            cr_assert(strstr(r.out, "saved to"), "%s", r.out);
            char named[512];
            node_cache_path(r.out, named, sizeof named);
            cr_assert_neq(access(named, F_OK), 0, "the build file %s became the cache", named);
        } else {
            cr_assert(strstr(r.out, "matches: reusing it"), "%s", r.out);
            cr_assert_null(strstr(r.out, "preload: decoded"), "%s", r.out);
        }
        run_free(&r);
    }
    cr_assert_eq(access(cache, F_OK), 0);
    assert_same_losses(ja, jb, 1);
    free(cache);
    free(ja);
    free(jb);
}

Test(dist, the_memory_guard_refuses_the_node_copy_once_in_local_rank_0)
{
    NEED_MPI();
    run_result r; /* 385 samples of 28x28: 295 KB for the node's one copy */
    run_mpi(&r, 2, train_bin(), "--mode", "preload", "--mem-limit", "200K", "--epochs", "1",
            "--workers", "1", "--channels", "1", fm_train, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert_eq(occurrences(r.err, "preload needs"), 1, "said once, by local rank 0: %s", r.err);
    cr_assert_eq(occurrences(r.err, "train:"), 1, "%s", r.err);
    run_free(&r);
}

Test(dist, a_sigkilled_local_rank_0_leaves_nothing_in_dev_shm)
{
    NEED_MPI();
    char *out = path_join(dir, "o.txt"), *err = path_join(dir, "e.txt");
    char *args[] = {"--mode",    "preload", "--epochs",   "3", "--batch",          "16",
                    "--workers", "1",       "--channels", "1", "--test-slow-step", "0.05",
                    fm_train,    NULL};
    pid_t mp = spawn_mpi(2, train_bin(), args, out, err);
    pid_t rank0 = mpi_rank_pid(mp, 0);
    char path[512], perms[8];
    unsigned long ino;
    int got;
    /* once every rank has mapped it, the node's file loses its name */
    while ((got = file_mapping(rank0, "/dev/shm/train-", path, sizeof path, perms, &ino)) == 0 ||
           got == 1)
        usleep(10000);
    cr_assert_eq(got, 2, "rank 0 ended before its cache file lost its name");
    pid_t all[64];
    int na = process_descendants(mp, all, 64);
    kill(rank0, SIGKILL); /* nobody runs its cleanup */
    int st = spawn_wait(mp, 60);
    cr_assert(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the job fails: status %d", st);
    cr_assert_neq(access(path, F_OK), 0, "%s is not left behind", path);
    assert_all_gone(all, na);
    free(out);
    free(err);
}
