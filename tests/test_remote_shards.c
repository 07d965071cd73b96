/* test_remote_shards.c — train reading WebDataset shards behind URLs: the
 * same shards served by nginx over HTTP and by moto's S3 server (checking
 * signatures) give batches byte-identical to the shards read from local
 * disk, and to the CSV they were written from, for 0 and 2 workers; the
 * shard cache downloads each shard once per node (two concurrent runs
 * sharing it), keeps to its size, and leaves nothing half-written;
 * failures (a shard gone, a server down, a cut connection, a silent
 * server, a wrong key) name the shard, the member and the reason. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/support/helpers.h"
#include "tests/support/images.h"
#include "tests/support/servers.h"

static char *dir;
static pid_t server = -1;
static _Atomic int *seen;

static void setup(void)
{
    dir = tmpdir_make();
    seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
}
static void teardown(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    spawn_kill_all();
    munmap((void *)seen, sizeof *seen);
    tmpdir_remove(dir);
}
TestSuite(remote_shards, .init = setup, .fini = teardown, .timeout = 180);

#define NIMG 40
#define PER_SHARD 8 /* 5 shards */
#define SPEC "/shards/train-{000000..000004}.tar"

/* dir/set: NIMG 40x48 JPEGs of 4 classes (numbers) and set.csv; shards
 * of them written by tools/shard into dir/www/shards. Returns the CSV. */
static char *make_shards(void)
{
    char *csv = xstrdup("path,label\n");
    for (int i = 0; i < NIMG; i++) {
        char name[64], *line;
        uint8_t *px = ti_picture(40, 48, 3, 700 + (uint64_t)i);
        snprintf(name, sizeof name, "set/%02d.jpg", i);
        free(ti_write_jpeg(dir, name, px, 40, 48, TJPF_RGB, TJSAMP_420, 85, 0));
        free(px);
        if (asprintf(&line, "%s%s,%d\n", csv, name + 4, (i * 5) % 4) < 0)
            abort();
        free(csv);
        csv = line;
    }
    char *path = write_text(dir, "set/set.csv", csv);
    free(csv);
    char *bin = path_join(tools_dir(), "shard"), *out = path_join(dir, "www/shards");
    char *www = path_join(dir, "www");
    mkdir(www, 0755);
    char *argv[] = {bin, "--out", out, "--shard-samples", "8", path, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "shard: %s", r.err);
    run_free(&r);
    free(bin), free(out), free(www);
    return path;
}

/* train FIXED... EXTRA... DATA (extra: the va_list's NULL-ended words,
 * at most 16) into *r */
static void run_train_va(const char *const *fixed, size_t nfixed, va_list ap, const char *data,
                         run_result *r)
{
    char *argv[48];
    size_t n = 0;
    argv[n++] = (char *)train_bin();
    for (size_t i = 0; i < nfixed; i++)
        argv[n++] = (char *)fixed[i];
    for (const char *a; n < nfixed + 17 && (a = va_arg(ap, const char *));)
        argv[n++] = (char *)a;
    argv[n++] = (char *)data;
    argv[n] = NULL;
    run_argv(argv, NULL, 120, r);
}

/* train --loader-only over data (2 epochs, random crops and flips) with
 * extra arguments (NULL-ended, at most 16): the dump's path; the run's
 * result in *r when r is given (then its status is not checked). */
static char *dump_run(const char *data, const char *tag, run_result *out, ...)
{
    char name[64];
    snprintf(name, sizeof name, "dump-%s", tag);
    char *dump = path_join(dir, name);
    const char *fixed[] = {"--loader-only",
                           "--epochs",
                           "2",
                           "--batch",
                           "4",
                           "--seed",
                           "3",
                           "--crop",
                           "32",
                           "--random-crop",
                           "--hflip",
                           "0.5",
                           "--no-progress",
                           "--dump-batches",
                           dump};
    run_result r;
    va_list ap;
    va_start(ap, out);
    run_train_va(fixed, sizeof fixed / sizeof *fixed, ap, data, &r);
    va_end(ap);
    if (out) {
        *out = r;
    } else {
        cr_assert_eq(r.status, 0, "%s (%s): %s", data, tag, r.err);
        run_free(&r);
    }
    return dump;
}

static int same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    errbuf e;
    char *x = read_whole_file(a, &la, &e), *y = read_whole_file(b, &lb, &e);
    int same = x && y && la == lb && !memcmp(x, y, la);
    free(x), free(y);
    return same;
}

/* files in d whose names end with `suffix`, and their bytes */
static int count_files(const char *d, const char *suffix, uint64_t *bytes)
{
    DIR *dd = opendir(d);
    int n = 0;
    if (bytes)
        *bytes = 0;
    for (struct dirent *de; dd && (de = readdir(dd));) {
        size_t l = strlen(de->d_name), sl = strlen(suffix);
        if (de->d_name[0] == '.' || l < sl || strcmp(de->d_name + l - sl, suffix))
            continue;
        n++;
        struct stat st;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", d, de->d_name);
        if (bytes && stat(p, &st) == 0)
            *bytes += (uint64_t)st.st_size;
    }
    if (dd)
        closedir(dd);
    return n;
}

/* GET requests in the access log of the nginx whose files are in d for
 * paths ending in `suffix` */
static int gets_in(const char *d, const char *suffix)
{
    char *log = path_join(d, "access.log");
    int n = server_nginx_gets(log, suffix);
    free(log);
    return n;
}

/* ... of the nginx start_www started */
static int gets_of(const char *suffix) { return gets_in(dir, suffix); }

/* nginx serving dir/www, its files in d (NULL: dir) */
static int start_www_in(const char *d, const char *extra)
{
    char *www = path_join(dir, "www");
    int port = server_nginx_start(d ? d : dir, www, NULL, NULL, "/shards/train-000000.tar", extra);
    free(www);
    return port;
}

static int start_www(const char *extra) { return start_www_in(NULL, extra); }

Test(remote_shards, http_shards_give_the_batches_of_local_shards_and_the_csv_for_0_and_2_workers)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    char *csv = make_shards();
    int port = start_www(NULL);
    char url[256], *local = path_join(dir, "www" SPEC);
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, port);
    char *cache = path_join(dir, "cache");

    char *want = dump_run(csv, "csv", NULL, "--workers", "2", NULL);
    char *disk = dump_run(local, "disk", NULL, "--workers", "2", NULL);
    cr_assert(same_bytes(want, disk), "local shards differ from the CSV");
    /* the CSV's order over all samples ... */
    char *w0 = dump_run(url, "http0", NULL, "--workers", "0", "--order", "global", "--shard-cache",
                        cache, NULL);
    cr_assert(same_bytes(want, w0), "HTTP shards, 0 workers: batches differ from the CSV's");
    /* ... and remote shards' default, the streaming order, as on local disk */
    char *stream =
        dump_run(local, "disk-stream", NULL, "--workers", "0", "--order", "shards", NULL);
    cr_assert(!same_bytes(want, stream), "--order shards gave the global order's batches");
    /* before training: two small files a shard, not the shards */
    int tars_first = gets_of(".tar");
    cr_assert_eq(gets_of(".idx"), 5);
    cr_assert_eq(gets_of(".labels"), 5);
    cr_assert_eq(tars_first, 5, "each shard once (the first probed into the cache): %d",
                 tars_first);
    cr_assert_eq(count_files(cache, ".tar", NULL), 5);
    /* a dead process's half download, left in a named cache: a run that
     * downloads nothing (so evicts nothing) still clears it at exit */
    free(write_text(cache, "0000000000000000-train-000001.tar.part-999999999", "half"));
    /* a second run over the same cache: nothing downloaded, the same batches */
    char *w2 = dump_run(url, "http2", NULL, "--workers", "2", "--shard-cache", cache, NULL);
    cr_assert(same_bytes(stream, w2), "HTTP shards, 2 workers: batches differ from local disk's");
    cr_assert_eq(gets_of(".tar"), tars_first, "the cache's shards were downloaded again");
    cr_assert_eq(count_files(cache, ".part-999999999", NULL), 0, "a dead process's .part is left");
    /* without --shard-cache: a temporary folder, gone after the run */
    char *tmp = path_join(dir, "tmp");
    mkdir(tmp, 0755);
    setenv("TMPDIR", tmp, 1);
    char *w3 = dump_run(url, "http-tmp", NULL, "--workers", "2", NULL);
    unsetenv("TMPDIR");
    cr_assert(same_bytes(stream, w3));
    cr_assert_eq(count_files(tmp, "", NULL), 0, "the run's temporary shard cache is left");
    /* a dot in the shards' names: each has its own .idx and .labels
     * (v1.0-000000.idx, not wds2idx's first-dot v1.idx for every one) */
    char *mv;
    if (asprintf(&mv,
                 "cd '%s/www/shards' && for k in 0 1 2 3 4; do for x in tar idx labels; do "
                 "cp train-00000$k.$x v1.0-00000$k.$x; done; done",
                 dir) < 0)
        abort();
    cr_assert_eq(system(mv), 0);
    free(mv);
    char dotted[256];
    snprintf(dotted, sizeof dotted, "http://127.0.0.1:%d/shards/v1.0-{000000..000004}.tar", port);
    run_result rd;
    char *wd = dump_run(dotted, "dotted", &rd, "--workers", "2", NULL);
    cr_assert_eq(rd.status, 0, "%s", rd.err);
    cr_assert(!strstr(rd.err, "have no .idx"), "the dotted shards' sidecars were not found: %s",
              rd.err);
    cr_assert(same_bytes(stream, wd), "dotted names: other batches");
    run_free(&rd);
    free(wd);
    /* --check reads them too (downloading each shard into its cache) */
    run_result r;
    run_train(&r, "--check", "--shard-cache", cache, url, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "40 samples in 5 shards, 4 classes"), "%s", r.out);
    run_free(&r);
    free(csv), free(local), free(cache), free(want), free(disk), free(w0), free(w2), free(w3);
    free(stream);
    free(tmp);
}

Test(remote_shards, two_runs_sharing_a_cache_download_each_shard_once_and_the_size_is_kept)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    char *csv = make_shards();
    /* slow enough (a shard takes about a second) that the two runs want
     * the same shard while it downloads */
    int port = start_www("limit_rate 16k;");
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, port);
    char *cache = path_join(dir, "shared");
    /* a dead process's half download, to be cleared */
    mkdir(cache, 0755);
    free(write_text(cache, "0000000000000000-train-000009.tar.part-999999999", "half"));

    char *bin = getenv("TRAIN_BIN") ? xstrdup(getenv("TRAIN_BIN"))
                                    : path_join(source_root(), "build/asan/train");
    pid_t p[2];
    for (int k = 0; k < 2; k++) {
        char *argv[] = {bin,  "--loader-only", "--workers",     "2",   "--crop",
                        "32", "--no-progress", "--shard-cache", cache, url,
                        NULL};
        char o[64];
        snprintf(o, sizeof o, "%s/run%d.out", dir, k);
        p[k] = spawn_bg(argv, o, o);
    }
    for (int k = 0; k < 2; k++)
        cr_assert_eq(spawn_wait(p[k], 120), 0, "run %d failed (see run%d.out)", k, k);
    cr_assert_eq(gets_of(".tar"), 5, "two runs on one cache: %d shard downloads, not 5",
                 gets_of(".tar"));
    cr_assert_eq(count_files(cache, "part-999999999", NULL), 0, "a dead process's .part is left");

    /* room for about two shards: least recently used ones go, the run
     * still passes (from a second nginx, at full speed) */
    uint64_t all;
    count_files(cache, ".tar", &all);
    char limit[32];
    snprintf(limit, sizeof limit, "%llu", (unsigned long long)(all * 2 / 5 + 100));
    char *small = path_join(dir, "small"), *fast = path_join(dir, "fast");
    mkdir(fast, 0755);
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, start_www_in(fast, NULL));
    char *d = dump_run(url, "small", NULL, "--workers", "2", "--shard-cache", small,
                       "--shard-cache-size", limit, NULL);
    uint64_t kept;
    int n = count_files(small, ".tar", &kept);
    cr_assert(kept <= all * 2 / 5 + 100 + all / 5, "the cache holds %llu bytes over a %s limit",
              (unsigned long long)kept, limit);
    cr_assert(n >= 1 && n <= 3, "%d shards kept", n);
    cr_assert_gt(gets_in(fast, ".tar"), 5, "epoch 2 found every shard although most were evicted");
    cr_assert_eq(count_files(small, ".part", NULL) + count_files(cache, ".part", NULL), 0);
    char *local = path_join(dir, "www" SPEC);
    char *want = dump_run(local, "disk", NULL, "--workers", "0", "--order", "shards", NULL);
    cr_assert(same_bytes(want, d), "evicted and fetched again: other batches");
    free(local);
    free(csv), free(cache), free(bin), free(small), free(fast), free(d), free(want);
}

Test(remote_shards, a_lost_shard_names_shard_member_and_status_and_skip_bad_skips_its_samples)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    free(make_shards());
    /* the shard goes after its index and labels were written: the load
     * succeeds, its samples cannot be read */
    char *gone = path_join(dir, "www/shards/train-000002.tar");
    cr_assert_eq(unlink(gone), 0);
    int port = start_www(NULL);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, port);
    run_result r;
    free(dump_run(url, "lost", &r, "--workers", "2", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "/shards/train-000002.tar: member 0000") &&
                  strstr(r.err, "HTTP 404 Not Found after 1 try"),
              "%s", r.err);
    run_free(&r);
    free(dump_run(url, "lost-skip", &r, "--workers", "2", "--skip-bad", NULL));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "   8 ") || strstr(r.out, " 8 "), "%s", r.out);
    cr_assert(strstr(r.err, "skipped http://127.0.0.1"), "%s", r.err);
    /* one try per process, not one per sample */
    cr_assert_leq(gets_of("train-000002.tar"), 3 * 2, "%d requests", gets_of("train-000002.tar"));
    run_free(&r);
    free(gone);

    /* another shard's index and labels beside a shard (the pair agrees
     * with itself): the members' tar headers give it away */
    char *i2 = path_join(dir, "www/shards/train-000001.idx"),
         *l2 = path_join(dir, "www/shards/train-000001.labels"),
         *i3 = path_join(dir, "www/shards/train-000003.idx"),
         *l3 = path_join(dir, "www/shards/train-000003.labels");
    char *cp;
    if (asprintf(&cp, "cp '%s' '%s' && cp '%s' '%s'", i3, i2, l3, l2) < 0)
        abort();
    cr_assert_eq(system(cp), 0);
    char one[256];
    snprintf(one, sizeof one, "http://127.0.0.1:%d/shards/train-000001.tar", port);
    free(dump_run(one, "other-index", &r, "--workers", "0", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "train-000001.tar: member 0000") &&
                  strstr(r.err, "its .idx is not this shard's"),
              "%s", r.err);
    run_free(&r);
    free(i2), free(l2), free(i3), free(l3), free(cp);
    /* another shard's labels beside a shard: refused, not mislabelled */
    char *a = path_join(dir, "www/shards/train-000003.labels"),
         *b = path_join(dir, "www/shards/train-000004.labels");
    cr_assert_eq(rename(b, a), 0);
    free(dump_run(url, "swapped", &r, "--workers", "0", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "train-000003.tar: sample 000024 is not the next in its .labels file "
                            "(000032)"),
              "%s", r.err);
    run_free(&r);
    free(a), free(b);
}

Test(remote_shards, a_server_down_or_silent_stops_the_run_naming_the_url)
{
    free(make_shards());
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, server_dead_port());
    run_result r;
    free(dump_run(url, "down", &r, "--io-retries", "1", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "127.0.0.1") && strstr(r.err, "after 2 tries"), "%s", r.err);
    run_free(&r);

    fault f = {.hang = 1, .body = "", .len = 0};
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, server_fault_start(seen, &server, &f));
    double t0 = now_sec();
    free(dump_run(url, "silent", &r, "--io-timeout", "0.5", "--io-retries", "1", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "timed out after 2 tries (0.5 s each)"), "%s", r.err);
    cr_assert_lt(now_sec() - t0, 30, "the timeout did not end the wait");
    run_free(&r);
}

Test(remote_shards, a_connection_cut_mid_shard_is_retried_and_the_batches_are_whole)
{
    free(make_shards());
    /* a shard with no index beside it: the load downloads it whole, and
     * the first try is cut a third of the way in */
    char *tar = path_join(dir, "www/shards/train-000001.tar");
    size_t len;
    errbuf e;
    char *body = read_whole_file(tar, &len, &e);
    cr_assert(body, "%s", e.msg);
    /* requests: classes.txt and the .idx (404s), the shard cut, the shard */
    fault f = {.cut_first = 3, .cut_bytes = len / 3, .only_tar = 1, .body = body, .len = len};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/any/train-000001.tar",
             server_fault_start(seen, &server, &f));
    char *want = dump_run(tar, "disk", NULL, "--workers", "2", "--order", "shards", NULL);
    run_result r;
    char *got = dump_run(url, "cut", &r, "--workers", "2", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "have no .idx and .labels beside them"), "%s", r.err);
    cr_assert(same_bytes(want, got), "a shard cut and fetched again gives other batches");
    /* classes.txt, .idx, the cut try, the whole one (.labels is not asked
     * for without an .idx) */
    cr_assert_eq(*seen, 4, "%d requests", *seen);
    run_free(&r);
    free(got), free(want), free(body), free(tar);
}

Test(remote_shards, s3_shards_signed_give_the_batches_of_local_disk_and_a_wrong_key_is_refused)
{
    char *csv = make_shards();
    char *up = path_join(dir, "www/shards");
    char ep[64], id[128], secret[128];
    const char *why =
        server_moto_signed(dir, up, "data/", ep, sizeof ep, id, sizeof id, secret, sizeof secret);
    if (why)
        cr_skip_test("%s", why);
    char *want = dump_run(csv, "csv", NULL, "--workers", "2", NULL);
    char *local = path_join(dir, "www" SPEC);
    char *stream = dump_run(local, "disk", NULL, "--workers", "2", "--order", "shards", NULL);
    /* a prefix: its .tar objects, listed (the sidecars beside them are not shards) */
    char *got = dump_run("s3://bkt/data/", "s3", NULL, "--workers", "2", "--s3-endpoint", ep, NULL);
    cr_assert(same_bytes(stream, got), "S3 shards: batches differ from local disk's");
    char *got0 = dump_run("s3://bkt/data/train-{000000..000004}.tar", "s3-0", NULL, "--workers",
                          "0", "--order", "global", "--s3-endpoint", ep, NULL);
    cr_assert(same_bytes(want, got0), "S3 shards by name, 0 workers, global order: not the CSV's");

    /* an object gone after the listing (here: deleted, its index and
     * labels left): its samples fail naming it and S3's code */
    char py[1024], cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' -c \"import boto3; boto3.client('s3', endpoint_url='%s', region_name="
             "'us-east-1', aws_access_key_id='%s', aws_secret_access_key='%s')"
             ".delete_object(Bucket='bkt', Key='data/train-000002.tar')\"",
             server_moto_python(py, sizeof py), ep, id, secret);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    run_result r;
    free(dump_run("s3://bkt/data/train-{000000..000004}.tar", "s3-gone", &r, "--workers", "2",
                  "--s3-endpoint", ep, NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "s3://bkt/data/train-000002.tar: member 0000") &&
                  strcasestr(r.err, "HTTP 404 Not Found (NoSuchKey) after 1 try"),
              "%s", r.err);
    run_free(&r);
    free(dump_run("s3://bkt/data/train-{000000..000004}.tar", "s3-gone-skip", &r, "--workers", "2",
                  "--skip-bad", "--s3-endpoint", ep, NULL));
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.err, "skipped s3://bkt/data/train-000002.tar: member"), "%s", r.err);
    run_free(&r);

    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
    free(dump_run("s3://bkt/data/", "s3-bad", &r, "--s3-endpoint", ep, "--io-retries", "0", NULL));
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "s3://bkt/data/") && strstr(r.err, "HTTP 403") &&
                  strstr(r.err, "SignatureDoesNotMatch"),
              "%s", r.err);
    run_free(&r);
    free(csv), free(up), free(want), free(got), free(got0), free(local), free(stream);
}

/* --json's epoch values of key, as numbers (at most 4 epochs) */
static int epoch_nums(const char *json, const char *key, double *v)
{
    char vals[4][JSON_VALUE_MAX];
    int n = json_epoch_values(json, key, vals, 4);
    for (int i = 0; i < n; i++)
        v[i] = strtod(vals[i], NULL);
    return n;
}

/* train --loader-only, 2 epochs of batches of 4, 2 workers, --json to
 * dir/NAME.json (returned), more arguments (NULL-ended, at most 6),
 * then data; the run's output in r */
static char *json_run(const char *data, const char *name, run_result *r, ...)
{
    char file[64];
    snprintf(file, sizeof file, "%s.json", name);
    char *json = path_join(dir, file);
    const char *fixed[] = {"--loader-only", "--epochs", "2",         "--batch", "4",
                           "--crop",        "32",       "--workers", "2",       "--no-progress",
                           "--json",        json};
    va_list ap;
    va_start(ap, r);
    run_train_va(fixed, sizeof fixed / sizeof *fixed, ap, data, r);
    va_end(ap);
    cr_assert_eq(r->status, 0, "%s: %s", data, r->err);
    return json;
}

/* The report's I/O: epoch 1 downloads every shard (its bytes at least the
 * shards'), epoch 2 reads them from the shard cache; the table has the
 * I/O columns for remote data only, the JSON always has the keys. */
Test(remote_shards, the_report_counts_bytes_requests_and_cache_hits_per_epoch)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    unsetenv("COLUMNS"); /* the table whole: stdout is a pipe */
    char *csv = make_shards();
    int port = start_www(NULL);
    char url[256], *cache = path_join(dir, "cache"), *shards = path_join(dir, "www/shards");
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, port);
    uint64_t tar_bytes;
    cr_assert_eq(count_files(shards, ".tar", &tar_bytes), 5);

    run_result r;
    /* the workers' downloads and the read-ahead process's (loader_fetch_io) */
    char *json = json_run(url, "http", &r, "--shard-cache", cache, NULL);
    const char *cols[] = {" io_MB ", " MB/s ", " req ", " retry ", " hit% "};
    for (size_t i = 0; i < 5; i++)
        cr_assert(strstr(r.out, cols[i]), "no%s column for HTTP shards:\n%s", cols[i], r.out);
    double bytes[4], req[4], retry[4], hits[4], dl[4], rate[4], wait[4];
    cr_assert_eq(epoch_nums(json, "io_bytes", bytes), 2);
    epoch_nums(json, "io_requests", req);
    epoch_nums(json, "io_retries", retry);
    epoch_nums(json, "cache_hits", hits);
    epoch_nums(json, "cache_downloads", dl);
    epoch_nums(json, "io_mb_s", rate);
    epoch_nums(json, "io_wait_s", wait);
    cr_assert_geq(bytes[0], (double)tar_bytes, "epoch 1: %.0f bytes for %llu bytes of shards",
                  bytes[0], (unsigned long long)tar_bytes);
    cr_assert_eq(dl[0], 5, "epoch 1: every shard downloaded once (%.0f)", dl[0]);
    /* 5 shards, 5 indexes, 5 label files, classes.txt at most */
    cr_assert(req[0] >= 15 && req[0] <= 16, "epoch 1: %.0f requests", req[0]);
    cr_assert_eq(retry[0], 0);
    cr_assert_gt(rate[0], 0);
    cr_assert_gt(wait[0], 0, "epoch 1 waited for no shard");
    /* a lookup per shard a process opens (it keeps the file open while
     * its samples come) */
    cr_assert_geq(hits[0] + dl[0], 5, "%.0f shard lookups", hits[0] + dl[0]);
    cr_assert_eq(dl[1], 0, "epoch 2 downloaded %.0f shards", dl[1]);
    cr_assert_geq(hits[1], 5, "epoch 2: every shard from the cache (%.0f lookups)", hits[1]);
    cr_assert_eq(bytes[1], 0, "epoch 2 read %.0f bytes from the server", bytes[1]);
    cr_assert_eq(req[1], 0);
    /* the table's hit% is the share of lookups the cache answered */
    for (int k = 0; k < 2; k++) {
        char want[32];
        snprintf(want, sizeof want, " %5.1f ", 100 * hits[k] / (hits[k] + dl[k]));
        cr_assert(strstr(r.out, want), "epoch %d's hit%% is not%s:\n%s", k + 1, want, r.out);
    }
    run_free(&r);

    /* a second run over the same cache: no download in epoch 1 either */
    free(json);
    json = json_run(url, "http-again", &r, "--shard-cache", cache, NULL);
    epoch_nums(json, "cache_downloads", dl);
    epoch_nums(json, "cache_hits", hits);
    cr_assert_eq(dl[0], 0, "a warm cache: %.0f downloads", dl[0]);
    cr_assert_gt(hits[0], 0);
    run_free(&r);

    /* local data: no I/O columns; the keys with zeros */
    free(json);
    json = json_run(csv, "csv", &r, NULL);
    cr_assert(!strstr(r.out, "io_MB") && !strstr(r.out, " hit% "), "I/O columns for a CSV:\n%s",
              r.out);
    const char *keys[] = {"io_bytes",   "io_mb_s",         "io_requests", "io_retries",
                          "cache_hits", "cache_downloads", "io_wait_s"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        char vals[4][JSON_VALUE_MAX];
        cr_assert_eq(json_epoch_values(json, keys[k], vals, 4), 2, "no %s in the CSV's records",
                     keys[k]);
        cr_assert_str_eq(vals[0], "0", "%s", keys[k]);
        cr_assert_str_eq(vals[1], "0", "%s", keys[k]);
    }
    run_free(&r);
    free(json), free(csv), free(cache), free(shards);
}

/* --diagnose over a slow server: the loader waits for shards, and says so */
Test(remote_shards, diagnose_over_a_slow_server_says_io_bound)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    free(make_shards());
    /* shards of about 20 KB: about a second each at 20 KB/s */
    int port = start_www("limit_rate 20k;");
    char url[256], host[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d" SPEC, port);
    snprintf(host, sizeof host, "waiting for shards from http://127.0.0.1:%d: ", port);
    run_result r;
    /* 2 workers, 2 batches of 2: a shard each at a time, about a second
     * each (about 14 s in all under ASan: every phase opens the data set,
     * fetching the first shard) */
    char *argv[] = {(char *)train_bin(),
                    "--diagnose",
                    "--diagnose-batches",
                    "2",
                    "--batch",
                    "2",
                    "--crop",
                    "32",
                    "--workers",
                    "2",
                    "--no-progress",
                    url,
                    NULL};
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    cr_assert(strstr(r.out, "verdict: I/O-bound: "), "%s", r.out);
    cr_assert(strstr(r.out, host), "%s", r.out);
    cr_assert(strstr(r.out, "--shard-cache DIR") && strstr(r.out, "--mode preload") &&
                  strstr(r.out, ": downloads run in parallel, one per worker"),
              "%s", r.out);
    cr_assert(strstr(r.out, "bigger shards"), "shards of a few KB: %s", r.out);
    run_free(&r);
    /* the loader alone has no model phase to compare with: refused */
    run_train(&r, "--diagnose", "--loader-only", url, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
    cr_assert(strstr(r.err, "--diagnose measures the loader with and without the model"), "%s",
              r.err);
    run_free(&r);
}
