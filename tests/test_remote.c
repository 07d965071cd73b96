/* test_remote.c — loader/remote.c against real servers on loopback: file://
 * URLs, nginx (byte ranges, ETags, 404), a small fault-injecting server of
 * this file's own (5xx then success, a connection cut mid-object, a server
 * that never answers, one that ignores Range), a port with no server, and
 * moto's S3 server for signed s3:// listing and reads. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "loader/remote.h"
#include "tests/support/helpers.h"
#include "tests/support/servers.h"

static char *dir;
static pid_t server = -1;
static _Atomic int *seen; /* requests the fault server answered */

static void setup(void)
{
    dir = tmpdir_make();
    seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    remote_stats_reset();
}
static void teardown(void)
{
    if (server > 0) {
        kill(server, SIGKILL);
        waitpid(server, NULL, 0);
    }
    spawn_kill_all();
    remote_cleanup();
    munmap((void *)seen, sizeof *seen);
    tmpdir_remove(dir);
}
TestSuite(remote, .init = setup, .fini = teardown, .timeout = 90);

/* a deterministic body of n bytes */
static char *pattern(size_t n)
{
    char *b = xmalloc(n);
    for (size_t i = 0; i < n; i++)
        b[i] = (char)(i * 131 + i / 251);
    return b;
}

static int count_entries(const char *d, const char *containing)
{
    DIR *dd = opendir(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(dd));)
        if (de->d_name[0] != '.' && (!containing || strstr(de->d_name, containing)))
            n++;
    closedir(dd);
    return n;
}

/* ---------------------------------------------------------------- the fault server */

static const remote_opts quick = {.timeout_s = 5, .retries = 2, .backoff_s = 0.01};

/* ---------------------------------------------------------------- file:// */

Test(remote, file_urls_size_range_whole_and_missing)
{
    size_t n = 100000;
    char *body = pattern(n), *path = write_file(dir, "obj.bin", body, n), url[4200];
    snprintf(url, sizeof url, "file://%s", path);
    cr_assert(remote_is_url(url) && !remote_is_url(path));
    errbuf e;
    uint64_t size = 0;
    char etag[64];
    cr_assert_eq(remote_head(url, &quick, &size, etag, sizeof etag, &e), 0, "%s", e.msg);
    cr_assert_eq(size, n);

    char buf[300];
    size_t got;
    cr_assert_eq(remote_get_range(url, 1000, 100, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_eq(got, 100);
    cr_assert_arr_eq(buf, body + 1000, 100);
    /* past the end: what there is */
    cr_assert_eq(remote_get_range(url, n - 40, 300, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_eq(got, 40);
    cr_assert_arr_eq(buf, body + n - 40, 40);

    char *dest = path_join(dir, "copy.bin");
    uint64_t bytes = 0;
    cr_assert_eq(remote_get_file(url, dest, &quick, &bytes, &e), 0, "%s", e.msg);
    cr_assert_eq(bytes, n);
    size_t len;
    char *copy = read_whole_file(dest, &len, &e);
    cr_assert(copy && len == n && !memcmp(copy, body, n));
    cr_assert_eq(count_entries(dir, ".part"), 0);

    char missing[4300];
    snprintf(missing, sizeof missing, "file://%s/none.tar", dir);
    cr_assert_eq(remote_get_file(missing, dest, &quick, NULL, &e), REMOTE_MISSING);
    cr_assert(strstr(e.msg, missing) && strstr(e.msg, "after 1 try"), "%s", e.msg);
    cr_assert_eq(count_entries(dir, ".part"), 0);
    free(copy);
    free(dest);
    free(path);
    free(body);
}

/* ---------------------------------------------------------------- nginx */

Test(remote, nginx_ranges_etag_and_404)
{
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx (Debian's nginx; make deps of the test rig)");
    size_t n = 3 << 20;
    char *body = pattern(n), *www = path_join(dir, "www");
    free(write_file(www, "shards/train-000000.tar", body, n));
    int port = server_nginx_start(dir, www, NULL, NULL, "/shards/train-000000.tar", NULL);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/shards/train-000000.tar", port);
    errbuf e;
    uint64_t size = 0;
    char etag[128];
    int rc = remote_head(url, &quick, &size, etag, sizeof etag, &e);
    cr_assert_eq(rc, 0, "%s", e.msg);
    cr_assert_eq(size, n);
    cr_assert(etag[0] == '"', "ETag %s", etag);

    remote_stats_reset();
    char buf[512];
    size_t got;
    cr_assert_eq(remote_get_range(url, 2000000, 512, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_eq(got, 512);
    cr_assert_arr_eq(buf, body + 2000000, 512);
    remote_stats st = remote_stats_get();
    cr_assert_eq(st.requests, 1);
    cr_assert_eq(st.bytes, 512, "a ranged read reads the range only (206), not %llu bytes",
                 (unsigned long long)st.bytes);

    char *dest = path_join(dir, "t.tar");
    cr_assert_eq(remote_get_file(url, dest, &quick, NULL, &e), 0, "%s", e.msg);
    size_t len;
    char *copy = read_whole_file(dest, &len, &e);
    cr_assert(copy && len == n && !memcmp(copy, body, n));
    cr_assert_eq(remote_stats_get().bytes, 512 + n);

    char url404[256];
    snprintf(url404, sizeof url404, "http://127.0.0.1:%d/shards/train-000009.tar", port);
    cr_assert_eq(remote_get_file(url404, dest, &quick, NULL, &e), REMOTE_MISSING);
    cr_assert(strstr(e.msg, url404) && strstr(e.msg, "HTTP 404 Not Found after 1 try"), "%s",
              e.msg);
    cr_assert_eq(remote_stats_get().retries, 0);
    free(copy);
    free(dest);
    free(www);
    free(body);
}

/* https:// with a certificate of its own (a private store's): refused
 * without its authority (once: a certificate does not get better), read
 * with AWS_CA_BUNDLE naming it. */
Test(remote, https_checks_the_certificate_against_the_named_authority)
{
    if (access("/usr/sbin/nginx", X_OK) != 0 || access("/usr/bin/openssl", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx or /usr/bin/openssl");
    char *cert = path_join(dir, "cert.pem"), *key = path_join(dir, "key.pem");
    char *argv[] = {"/usr/bin/openssl",
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    key,
                    "-out",
                    cert,
                    "-days",
                    "2",
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                    NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    size_t n = 5000;
    char *body = pattern(n), *www = path_join(dir, "www");
    free(write_file(www, "t.tar", body, n));
    unsetenv("CURL_CA_BUNDLE");
    setenv("AWS_CA_BUNDLE", cert, 1);
    int port = server_nginx_start(dir, www, cert, key, "/t.tar", NULL);
    char url[128], buf[100];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/t.tar", port);
    errbuf e;
    size_t got;
    cr_assert_eq(remote_get_range(url, 4000, 100, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert(got == 100 && !memcmp(buf, body + 4000, 100));

    unsetenv("AWS_CA_BUNDLE");
    remote_stats_reset();
    cr_assert_eq(remote_get_range(url, 0, 100, buf, &got, &quick, &e), -1);
    cr_assert(strstr(e.msg, url) && strcasestr(e.msg, "certificate") &&
                  strstr(e.msg, "after 1 try"),
              "%s", e.msg);
    cr_assert_eq(remote_stats_get().retries, 0);
    free(www);
    free(body);
    free(cert);
    free(key);
}

/* ---------------------------------------------------------------- faults */

Test(remote, server_errors_are_retried_then_succeed)
{
    static char body[] = "0123456789abcdefghij";
    static const fault f = {.fail_first = 2, .fail_status = 503, .body = body, .len = 20};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x.tar", server_fault_start(seen, &server, &f));
    errbuf e;
    char buf[8];
    size_t got;
    cr_assert_eq(remote_get_range(url, 4, 8, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_eq(got, 8);
    cr_assert_arr_eq(buf, "456789ab", 8);
    remote_stats st = remote_stats_get();
    cr_assert_eq(*seen, 3);
    cr_assert_eq(st.requests, 3);
    cr_assert_eq(st.retries, 2);
}

Test(remote, retries_run_out_and_4xx_is_not_retried)
{
    static const fault f503 = {.fail_first = 1000, .fail_status = 503, .body = "", .len = 0};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/train-000003.tar",
             server_fault_start(seen, &server, &f503));
    errbuf e;
    uint64_t size;
    cr_assert_eq(remote_head(url, &quick, &size, NULL, 0, &e), -1);
    cr_assert(strstr(e.msg, url) && strstr(e.msg, "HTTP 503 Service Unavailable after 3 tries"),
              "%s", e.msg);
    cr_assert_eq(*seen, 3);
    cr_assert_eq(remote_stats_get().retries, 2);
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);

    static const fault f403 = {.fail_first = 1000, .fail_status = 403, .body = "", .len = 0};
    *seen = 0;
    snprintf(url, sizeof url, "http://127.0.0.1:%d/train-000003.tar",
             server_fault_start(seen, &server, &f403));
    cr_assert_eq(remote_head(url, &quick, &size, NULL, 0, &e), -1);
    cr_assert(strstr(e.msg, "HTTP 403 Forbidden after 1 try"), "%s", e.msg);
    cr_assert_eq(*seen, 1);
}

Test(remote, server_down_names_the_url_and_the_tries)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/train-000001.tar", server_dead_port());
    errbuf e;
    char *dest = path_join(dir, "d.tar");
    cr_assert_eq(remote_get_file(url, dest, &quick, NULL, &e), -1);
    cr_assert(strstr(e.msg, url) && strstr(e.msg, "after 3 tries"), "%s", e.msg);
    cr_assert(strcasestr(e.msg, "connect"), "%s", e.msg);
    cr_assert_eq(remote_stats_get().requests, 3);
    cr_assert_eq(remote_stats_get().retries, 2);
    cr_assert_eq(count_entries(dir, NULL), 0, "nothing left behind");
    free(dest);
}

/* The connection closes after 1000 of 50000 bytes: the first two tries;
 * the third is whole, and the file is exactly the object (the download
 * restarts, it does not append). With one retry only, the cut is the
 * error, and nothing is left behind. */
Test(remote, connection_cut_mid_object)
{
    size_t n = 50000;
    char *body = pattern(n);
    fault f = {.cut_first = 2, .cut_bytes = 1000, .body = body, .len = n};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/train-000002.tar",
             server_fault_start(seen, &server, &f));
    errbuf e;
    char *dest = path_join(dir, "c.tar");
    cr_assert_eq(remote_get_file(url, dest, &(remote_opts){5, 1, 0.01, NULL, 0}, NULL, &e), -1);
    cr_assert(strstr(e.msg, url) && strstr(e.msg, "after 2 tries"), "%s", e.msg);
    cr_assert_eq(count_entries(dir, NULL), 0, "nothing left behind");

    *seen = 0;
    uint64_t bytes;
    cr_assert_eq(remote_get_file(url, dest, &quick, &bytes, &e), 0, "%s", e.msg);
    cr_assert_eq(*seen, 3);
    size_t len;
    char *copy = read_whole_file(dest, &len, &e);
    cr_assert(copy && len == n && !memcmp(copy, body, n) && bytes == n);
    cr_assert_eq(count_entries(dir, NULL), 1);
    free(copy);
    free(dest);
    free(body);
}

Test(remote, slow_server_times_out_per_try)
{
    static const fault f = {.hang = 1};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/slow.tar",
             server_fault_start(seen, &server, &f));
    errbuf e;
    char buf[16];
    size_t got;
    double t0 = now_sec();
    cr_assert_eq(remote_get_range(url, 0, 16, buf, &got, &(remote_opts){0.3, 1, 0.01, NULL, 0}, &e),
                 -1);
    double dt = now_sec() - t0;
    cr_assert(strstr(e.msg, url) && strstr(e.msg, "timed out after 2 tries (0.3 s each)"), "%s",
              e.msg);
    cr_assert(dt >= 0.6 && dt < 5, "%.2f s", dt);

    /* a whole object: no byte for the timeout is a timeout */
    char *dest = path_join(dir, "s.tar");
    t0 = now_sec();
    cr_assert_eq(remote_get_file(url, dest, &(remote_opts){1, 0, 0.01, NULL, 0}, NULL, &e), -1);
    dt = now_sec() - t0;
    cr_assert(strstr(e.msg, "timed out after 1 try (1 s each)"), "%s", e.msg);
    cr_assert(dt >= 0.9 && dt < 5, "%.2f s", dt);
    cr_assert_eq(count_entries(dir, NULL), 0);
    free(dest);
}

Test(remote, a_server_that_ignores_range_is_read_and_cut)
{
    size_t n = 70000;
    char *body = pattern(n);
    fault f = {.no_range = 1, .body = body, .len = n};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/whole.tar",
             server_fault_start(seen, &server, &f));
    errbuf e;
    char buf[1000];
    size_t got;
    cr_assert_eq(remote_get_range(url, 60000, 1000, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_eq(got, 1000);
    cr_assert_arr_eq(buf, body + 60000, 1000);
    free(body);
}

/* A child forked after the parent used its connection gets its own. */
Test(remote, a_forked_child_reads_on_its_own_connection)
{
    size_t n = 4000;
    char *body = pattern(n);
    fault f = {.body = body, .len = n};
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/f.tar", server_fault_start(seen, &server, &f));
    errbuf e;
    char buf[100];
    size_t got;
    cr_assert_eq(remote_get_range(url, 0, 100, buf, &got, &quick, &e), 0, "%s", e.msg);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = remote_get_range(url, 3000, 100, buf, &got, &quick, &e) == 0 && got == 100 &&
                 !memcmp(buf, body + 3000, 100);
        remote_cleanup();
        _exit(ok ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(remote_get_range(url, 200, 100, buf, &got, &quick, &e), 0, "%s", e.msg);
    cr_assert_arr_eq(buf, body + 200, 100);
    free(body);
}

/* ---------------------------------------------------------------- S3 (moto) */

Test(remote, s3_signed_listing_pages_reads_and_missing_keys)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "test/secret", 1);
    unsetenv("AWS_SESSION_TOKEN");
    char *ep = server_moto_start(dir);
    if (!ep)
        cr_skip_test("no python with moto (make deps installs it in build/netlab/venv)");
    size_t n = 30000;
    char *body = pattern(n);
    static const char *keys[] = {"shards/train-000002.tar", "shards/train-000000.tar",
                                 "shards/train-000001.tar", "shards/train-000003.tar",
                                 "shards/a b+c.tar",        "other/x.tar"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char url[256];
        char *k = curl_easy_escape(NULL, keys[i], 0);
        for (char *p = strstr(k, "%2F"); p; p = strstr(p, "%2F")) /* keep the slashes */
            memmove(p + 1, p + 3, strlen(p + 3) + 1), *p = '/';
        snprintf(url, sizeof url, "%s/bkt/%s", ep, k);
        curl_free(k);
        cr_assert_eq(server_http_put(url, body, n - i), 200, "%s", url);
    }
    remote_opts o = {
        .timeout_s = 10, .retries = 1, .backoff_s = 0.01, .s3_endpoint = ep, .list_page = 2};
    errbuf e;
    char **urls;
    size_t nu;
    remote_stats_reset();
    cr_assert_eq(remote_list("s3://bkt/shards/", &o, &urls, &nu, &e), 0, "%s", e.msg);
    cr_assert_eq(nu, 5);
    cr_assert_str_eq(urls[0], "s3://bkt/shards/a b+c.tar");
    for (int i = 0; i < 4; i++) {
        char want[64];
        snprintf(want, sizeof want, "s3://bkt/shards/train-%06d.tar", i);
        cr_assert_str_eq(urls[i + 1], want);
    }
    cr_assert_eq(remote_stats_get().requests, 3, "5 keys at 2 a page: 3 pages");

    /* reads: the size, a range, the whole object, of a key with a space and a '+' */
    uint64_t size;
    char etag[128];
    cr_assert_eq(remote_head(urls[0], &o, &size, etag, sizeof etag, &e), 0, "%s", e.msg);
    cr_assert_eq(size, n - 4);
    cr_assert(etag[0]);
    char buf[100];
    size_t got;
    cr_assert_eq(remote_get_range(urls[2], 12345, 100, buf, &got, &o, &e), 0, "%s", e.msg);
    cr_assert(got == 100 && !memcmp(buf, body + 12345, 100));
    char *dest = path_join(dir, "s3.tar");
    uint64_t bytes;
    cr_assert_eq(remote_get_file(urls[4], dest, &o, &bytes, &e), 0, "%s", e.msg);
    cr_assert_eq(bytes, n - 3);
    remote_list_free(urls, nu);

    cr_assert_eq(remote_get_file("s3://bkt/shards/train-000009.tar", dest, &o, NULL, &e),
                 REMOTE_MISSING);
    /* (werkzeug, under moto, says NOT FOUND) */
    cr_assert(strcasestr(e.msg, "s3://bkt/shards/train-000009.tar: HTTP 404 Not Found (NoSuchKey) "
                                "after 1 try"),
              "%s", e.msg);
    cr_assert_eq(remote_list("s3://nobucket/x/", &o, &urls, &nu, &e), -1);
    cr_assert(strstr(e.msg, "NoSuchBucket"), "%s", e.msg);
    free(dest);
    free(body);
    free(ep);
}

/* moto with its signature check on (INITIAL_NO_AUTH_ACTION_COUNT: the
 * setup's first three IAM calls go unsigned, then every request is
 * checked, by botocore's signer inside moto): a user's key made and
 * allowed everything, a bucket and three shards put with boto3; then our
 * signed listing (two pages) and reads pass, and a wrong secret or an
 * unknown key is refused with S3's reason named. (moto re-signs a query
 * as it decodes it, so a prefix with a '/' cannot pass its check even
 * from boto3: the prefix here has none.) */
Test(remote, s3_signatures_checked_by_moto)
{
    char *up = path_join(dir, "up");
    for (int i = 0; i < 3; i++) { /* three 1000-byte objects: AAA.., BBB.., CCC.. */
        char name[64], body[1000];
        memset(body, 65 + i, sizeof body);
        snprintf(name, sizeof name, "up/train-%06d.tar", i);
        free(write_file(dir, name, body, sizeof body));
    }
    char ep[64], id[128], secret[128];
    const char *why =
        server_moto_signed(dir, up, "shards/", ep, sizeof ep, id, sizeof id, secret, sizeof secret);
    if (why)
        cr_skip_test("%s", why);
    remote_opts o = {
        .timeout_s = 10, .retries = 1, .backoff_s = 0.01, .s3_endpoint = ep, .list_page = 2};
    errbuf e;
    char **urls;
    size_t nu;
    cr_assert_eq(remote_list("s3://bkt/shards", &o, &urls, &nu, &e), 0, "%s", e.msg);
    cr_assert_eq(nu, 3);
    cr_assert_str_eq(urls[2], "s3://bkt/shards/train-000002.tar");
    remote_list_free(urls, nu);
    char buf[10];
    size_t got;
    cr_assert_eq(remote_get_range("s3://bkt/shards/train-000001.tar", 990, 10, buf, &got, &o, &e),
                 0, "%s", e.msg);
    cr_assert(got == 10 && !memcmp(buf, "BBBBBBBBBB", 10));
    uint64_t size;
    cr_assert_eq(remote_head("s3://bkt/shards/train-000002.tar", &o, &size, NULL, 0, &e), 0, "%s",
                 e.msg);
    cr_assert_eq(size, 1000);

    setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret", 1);
    cr_assert_eq(remote_get_range("s3://bkt/shards/train-000001.tar", 0, 10, buf, &got, &o, &e),
                 -1);
    cr_assert(strcasestr(e.msg, "s3://bkt/shards/train-000001.tar: HTTP 403 Forbidden "
                                "(SignatureDoesNotMatch) after 1 try"),
              "%s", e.msg);
    setenv("AWS_ACCESS_KEY_ID", "AKIANOSUCHKEY0000000", 1);
    cr_assert_eq(remote_list("s3://bkt/shards", &o, &urls, &nu, &e), -1);
    cr_assert(strstr(e.msg, "listing s3://bkt/shards") && strstr(e.msg, "InvalidAccessKeyId"), "%s",
              e.msg);
    free(up);
}
