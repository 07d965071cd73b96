/* test_netlab.c — the network test rig itself (tools/netlab, docs/NETLAB.md):
 * a lab comes up and goes down leaving no namespace, veth or process, also
 * when `up` is interrupted; its rate limit and its added delay hold; nginx
 * answers ranges; moto's S3 server refuses a wrong signature; and two ranks
 * of the real train binary on two "nodes" (network namespaces with their
 * own host names, Open MPI over TCP between them) end with the bits of one
 * process and of two ranks on one node, and end together when one dies.
 *
 * Root and `ip netns` are needed (skipped, saying why, without them), and
 * nginx, curl and moto's venv, which `make deps` installs: skipped without
 * them, except under CI, where they must be there. Every lab is made with
 * --owner <the test process>, so a test that fails or times out leaves
 * nothing behind; the suite's fini takes them down too.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/helpers.h"
#include "tests/support/mpirun.h"
#include "tests/support/netlab.h"
#include "tests/support/servers.h"

static char *dir;
static char made[4][96]; /* what fini takes down: labs, then "nodes A,B", "s3 NAME" */

static void setup(void) { dir = tmpdir_make(); }

static void teardown(void)
{
    spawn_kill_all();
    for (int i = 0; i < 4; i++) {
        if (!made[i][0])
            continue;
        run_result r;
        char *sp = strchr(made[i], ' ');
        if (!strncmp(made[i], "nodes ", 6))
            netlab_run(&r, "nodes", "down", "--names", sp + 1, NULL);
        else if (!strncmp(made[i], "s3 ", 3))
            netlab_run(&r, "s3", "down", "--name", sp + 1, NULL);
        else
            netlab_run(&r, "down", made[i], NULL);
        run_free(&r);
        made[i][0] = '\0';
    }
    if (dir)
        tmpdir_remove(dir);
    dir = NULL;
}

TestSuite(netlab, .init = setup, .fini = teardown, .timeout = 90);

/* remember what fini must take down; returns the name */
static const char *remember(int slot, const char *text)
{
    snprintf(made[slot], sizeof made[slot], "%s", text);
    return made[slot];
}

/* n bytes of a fixed pseudo-random pattern into dir/name */
static char *pattern_file(const char *name, size_t n, unsigned char **bytes)
{
    unsigned char *b = malloc(n);
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        b[i] = (unsigned char)x;
    }
    char *p = write_file(dir, name, b, n);
    if (bytes)
        *bytes = b;
    else
        free(b);
    return p;
}

/* no process of the list is alive (zombies waiting for init do not count) */
static void assert_gone(const pid_t *pids, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        cr_assert(wait_process_gone(pids[i], 5), "%s: process %d outlived it", what, (int)pids[i]);
}

/* the lab is gone: namespace, host veth, state folder, the given processes */
static void assert_lab_gone(const char *name, const char *index, const pid_t *pids, int n)
{
    char state[64];
    snprintf(state, sizeof state, "lab-%s", name);
    cr_assert(!netns_exists(name), "namespace %s is still there", name);
    cr_assert(!netlab_state_exists(state), "state folder %s is still there", state);
    if (index) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "/sys/class/net/nl%dh", atoi(index));
        cr_assert(access(cmd, F_OK) != 0, "the host's veth %s is still there", cmd);
    }
    assert_gone(pids, n, name);
}

Test(netlab, up_and_down_leave_no_namespace_veth_or_process)
{
    NEED_NETLAB(NETLAB_HTTP);
    char name[32], state[48];
    netlab_name(name, sizeof name, "nlt-ud");
    remember(0, name);
    snprintf(state, sizeof state, "lab-%s", name);
    free(write_text(dir, "hello.txt", "hello\n"));
    char *url = netlab_up(name, dir, "1gbit", 0);
    cr_assert(netns_exists(name));
    pid_t procs[8];
    int n = 0;
    procs[n++] = netlab_state_pid(state, "nginx.pid");
    procs[n++] = netlab_state_pid(state, "proxy.pid");
    procs[n++] = netlab_state_pid(state, "owner.pid");
    for (int i = 0; i < n; i++)
        cr_assert(procs[i] > 0 && process_alive(procs[i]), "server %d of %s", i, name);
    /* nginx and the proxy run inside the namespace, with nginx's worker */
    pid_t in_ns[16];
    int k = netns_pids(name, in_ns, 16);
    cr_assert_geq(k, 3, "nginx master and worker and the proxy in %s, found %d", name, k);
    for (int i = 0; i < k && n < 8; i++)
        procs[n++] = in_ns[i];
    /* it serves: through the proxy, the file */
    char *hello = NULL;
    cr_assert(asprintf(&hello, "%shello.txt", url) > 0);
    run_result r;
    curl_run(&r, "-sS", hello, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "hello\n");
    run_free(&r);
    /* up again, same parameters: the same lab, nothing restarted */
    char *again = netlab_up(name, dir, "1gbit", 0);
    cr_assert_str_eq(again, url);
    cr_assert_eq(netlab_state_pid(state, "nginx.pid"), procs[0], "nginx was restarted");
    char *index = netlab_state_text(state, "index");
    cr_assert_not_null(index);
    netlab_down(name);
    assert_lab_gone(name, index, procs, n);
    netlab_down(name); /* twice: nothing to do, no error */
    free(index);
    free(again);
    free(hello);
    free(url);
}

/* netlab up NAME in the background, stalled after nginx has started; the
 * pid of nginx once it has (the script's pid in *script) */
static pid_t stalled_up(const char *name, pid_t *script)
{
    char *bin = path_join(source_root(), "tools/netlab"), *out = path_join(dir, "up.out"),
         *err = path_join(dir, "up.err");
    char *argv[] = {bin, "up", (char *)name, "--serve", dir, NULL};
    setenv("NETLAB_TEST_STALL", "nginx", 1);
    *script = spawn_bg(argv, out, err);
    unsetenv("NETLAB_TEST_STALL");
    char state[48];
    snprintf(state, sizeof state, "lab-%s", name);
    pid_t nginx = -1;
    for (int i = 0; i < 1000 && nginx < 0; i++, usleep(10000))
        if (netlab_state_pid(state, "nginx.pid") > 0 && netns_pids(name, (pid_t[4]){0}, 4) >= 2)
            nginx = netlab_state_pid(state, "nginx.pid");
    cr_assert_gt(nginx, 0, "netlab up %s did not start nginx in 10 s", name);
    cr_assert(process_alive(nginx));
    free(bin);
    free(out);
    free(err);
    return nginx;
}

Test(netlab, an_interrupted_up_leaves_nothing_and_a_killed_one_is_cleaned_by_down)
{
    NEED_NETLAB(NETLAB_HTTP);
    char name[32];
    netlab_name(name, sizeof name, "nlt-int");
    remember(0, name);
    pid_t script, procs[16];
    pid_t nginx = stalled_up(name, &script);
    int n = netns_pids(name, procs, 16);
    kill(script, SIGTERM); /* Ctrl-C, a timeout(1), a test runner stopping it */
    int st = spawn_wait(script, 20);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "netlab up ended with status %d", st);
    assert_lab_gone(name, NULL, procs, n);
    cr_assert(!process_alive(nginx));

    /* SIGKILL: no trap runs, nginx outlives the script; down removes it */
    nginx = stalled_up(name, &script);
    n = netns_pids(name, procs, 16);
    kill(script, SIGKILL);
    spawn_wait(script, 20);
    cr_assert(process_alive(nginx), "nginx runs in a session of its own");
    netlab_down(name);
    assert_lab_gone(name, NULL, procs, n);
}

/* what curl -w FORMAT says after fetching the URLs (NULL-terminated) */
static char *curl_w(const char *format, const char *out, const char *first, ...)
{
    char *argv[80];
    int n = 0;
    argv[n++] = "/usr/bin/curl";
    argv[n++] = "-sS";
    argv[n++] = "-o";
    argv[n++] = (char *)out;
    argv[n++] = "-w";
    argv[n++] = (char *)format;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 79; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "curl: %s", r.err);
    char *s = strdup(r.out);
    run_free(&r);
    return s;
}

Test(netlab, the_rate_limit_holds_within_20_percent)
{
    NEED_NETLAB(NETLAB_HTTP);
    char name[32];
    netlab_name(name, sizeof name, "nlt-rate");
    remember(0, name);
    free(pattern_file("20M.bin", 20000000, NULL));
    char *url = netlab_up(name, dir, "100mbit", 0);
    char *u = NULL;
    cr_assert(asprintf(&u, "%s20M.bin", url) > 0);
    char *got = path_join(dir, "got.bin");
    char *w = curl_w("%{size_download} %{speed_download}", got, u, NULL);
    double size, speed;
    cr_assert_eq(sscanf(w, "%lf %lf", &size, &speed), 2, "%s", w);
    cr_assert_eq(size, 20000000);
    /* 100 Mbit/s is 12.5 MB/s on the wire; the payload is 94-96% of it */
    double mbit = speed * 8 / 1e6;
    cr_assert(mbit >= 80 && mbit <= 120, "20 MB at --rate 100mbit: %.1f Mbit/s", mbit);
    free(w);
    free(got);
    free(u);
    free(url);
}

Test(netlab, the_delay_is_added_to_every_request_on_a_kept_alive_connection)
{
    NEED_NETLAB(NETLAB_HTTP);
    char name[32];
    netlab_name(name, sizeof name, "nlt-dly");
    remember(0, name);
    free(write_text(dir, "small.txt", "a small file\n"));
    char *url = netlab_up(name, dir, "1gbit", 100);
    char *u = NULL;
    cr_assert(asprintf(&u, "%ssmall.txt", url) > 0);
    char *got = path_join(dir, "got.txt");
    /* five GETs, one curl: one connection, the delay each time; a
     * transfer's first byte counts from its start, which comes before its
     * request is sent (curl's pretransfer stamp, under load, can come
     * after: it read 9 ms where the request had gone out at once) */
    char *w = curl_w("%{num_connects} %{time_starttransfer}\n", got, u, "-o", got, u, "-o", got, u,
                     "-o", got, u, "-o", got, u, NULL);
    char *s = w;
    double waits[5];
    for (int i = 0; i < 5; i++) {
        int conns, used;
        cr_assert_eq(sscanf(s, "%d %lf\n%n", &conns, &waits[i], &used), 2, "%s", w);
        s += used;
        cr_assert_eq(conns, i == 0, "request %d: %d new connections (keep-alive):\n%s", i + 1,
                     conns, w);
        cr_assert_geq(waits[i], 0.100, "request %d: first byte after %.3f s, under the delay\n%s",
                      i + 1, waits[i], w);
    }
    /* the delay once, not twice: the fastest well under two delays */
    double least = waits[0];
    for (int i = 1; i < 5; i++)
        least = fmin(least, waits[i]);
    cr_assert_lt(least, 0.190, "%s", w);
    free(w);
    free(got);
    free(u);
    free(url);
}

Test(netlab, nginx_answers_a_range_with_206_and_its_bytes)
{
    NEED_NETLAB(NETLAB_HTTP);
    char name[32], state[48];
    netlab_name(name, sizeof name, "nlt-rng");
    remember(0, name);
    snprintf(state, sizeof state, "lab-%s", name);
    unsigned char *bytes;
    free(pattern_file("data.bin", 100000, &bytes));
    char *url = netlab_up(name, dir, "1gbit", 0);
    char *u = NULL;
    cr_assert(asprintf(&u, "%sdata.bin", url) > 0);
    char *got = path_join(dir, "range.bin"), *heads = path_join(dir, "heads.txt");
    char *w = curl_w("%{http_code}", got, "-r", "1000-1999", "-D", heads, u, NULL);
    cr_assert_str_eq(w, "206");
    size_t len;
    FILE *f = fopen(got, "rb");
    cr_assert_not_null(f);
    unsigned char buf[2000];
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert_eq(len, 1000, "the range's 1000 bytes, got %zu", len);
    cr_assert(!memcmp(buf, bytes + 1000, 1000), "the bytes of 1000-1999");
    f = fopen(heads, "r");
    char line[256];
    int content_range = 0;
    while (fgets(line, sizeof line, f))
        content_range |= !strncasecmp(line, "Content-Range: bytes 1000-1999/100000", 37);
    fclose(f);
    cr_assert(content_range, "Content-Range: bytes 1000-1999/100000");
    free(w);
    /* the last 10 bytes */
    w = curl_w("%{http_code} %{size_download}", got, "-r", "-10", u, NULL);
    cr_assert_str_eq(w, "206 10");
    f = fopen(got, "rb");
    len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    cr_assert(len == 10 && !memcmp(buf, bytes + 99990, 10));
    /* the access log has both, with their Range headers */
    char *log = netlab_state_text(state, "access.log");
    cr_assert_not_null(log);
    cr_assert(strstr(log, "\"GET /data.bin HTTP/1.1\" 206 1000 \"bytes=1000-1999\""), "%s", log);
    cr_assert(strstr(log, "206 10 \"bytes=-10\""), "%s", log);
    free(log);
    free(w);
    free(heads);
    free(got);
    free(u);
    free(url);
    free(bytes);
}

/* KEY=VALUE from an env file's text, into out */
static void env_value(const char *env, const char *key, char *out, size_t len)
{
    char want[64];
    snprintf(want, sizeof want, "%s=", key);
    const char *p = strstr(env, want);
    cr_assert_not_null(p, "%s in\n%s", key, env);
    p += strlen(want);
    snprintf(out, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/* curl --aws-sigv4 with KEY:SECRET: status into *code, the body returned */
static char *s3_get(const char *url, const char *key, const char *secret, int *code)
{
    char user[256], *out = path_join(dir, "s3.out");
    snprintf(user, sizeof user, "%s:%s", key, secret);
    char *w = curl_w("%{http_code}", out, "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", user,
                     "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", url, NULL);
    *code = atoi(w);
    free(w);
    FILE *f = fopen(out, "rb");
    cr_assert_not_null(f);
    char *body = calloc(1, 1 << 16);
    size_t n = fread(body, 1, (1 << 16) - 1, f);
    body[n] = '\0';
    fclose(f);
    free(out);
    return body;
}

Test(netlab, moto_serves_signed_requests_and_refuses_a_wrong_secret_with_403)
{
    NEED_NETLAB(NETLAB_S3);
    char name[32], slot[48], state[48];
    netlab_name(name, sizeof name, "nlt-s3");
    snprintf(slot, sizeof slot, "s3 %s", name);
    remember(1, slot);
    snprintf(state, sizeof state, "s3-%s", name);
    char *data = path_join(dir, "bucket");
    free(write_text(data, "shards/a.txt", "object a\n"));
    free(write_text(data, "b.txt", "object b\n"));
    char owner[16];
    snprintf(owner, sizeof owner, "%d", (int)getpid());
    run_result r;
    netlab_run(&r, "s3", "up", "--name", name, "--port", "auto", "--dir", data, "--bucket",
               "shards", "--owner", owner, NULL);
    cr_assert_eq(r.status, 0, "netlab s3 up: %s", r.err);
    cr_assert(strstr(r.err, "2 objects"), "%s", r.err);
    char key[64], secret[128], endpoint[128];
    env_value(r.out, "AWS_ACCESS_KEY_ID", key, sizeof key);
    env_value(r.out, "AWS_SECRET_ACCESS_KEY", secret, sizeof secret);
    env_value(r.out, "AWS_ENDPOINT_URL", endpoint, sizeof endpoint);
    run_free(&r);
    pid_t moto = netlab_state_pid(state, "moto.pid");
    cr_assert(moto > 0 && process_alive(moto));

    char url[256], list[256];
    snprintf(url, sizeof url, "%s/shards/shards/a.txt", endpoint);
    snprintf(list, sizeof list, "%s/shards?list-type=2", endpoint);
    int code;
    char *body = s3_get(url, key, secret, &code);
    cr_assert_eq(code, 200, "signed GET: %d %s", code, body);
    cr_assert_str_eq(body, "object a\n");
    free(body);
    body = s3_get(list, key, secret, &code);
    cr_assert_eq(code, 200, "signed listing: %d %s", code, body);
    cr_assert(strstr(body, "<Key>shards/a.txt</Key>") && strstr(body, "<Key>b.txt</Key>"), "%s",
              body);
    free(body);
    /* the secret one character off: the signature does not match */
    char wrong[128];
    snprintf(wrong, sizeof wrong, "%s", secret);
    wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
    body = s3_get(url, key, wrong, &code);
    cr_assert_eq(code, 403, "a wrong secret: %d %s", code, body);
    cr_assert(strstr(body, "<Code>SignatureDoesNotMatch</Code>"), "%s", body);
    free(body);
    body = s3_get(list, "AKIANOTAKEYOFMOTOS00", secret, &code);
    cr_assert_eq(code, 403, "an unknown key: %d %s", code, body);
    cr_assert(strstr(body, "<Code>InvalidAccessKeyId</Code>"), "%s", body);
    free(body);
    /* and no signature at all */
    char *out = path_join(dir, "anon.out");
    char *w = curl_w("%{http_code}", out, url, NULL);
    cr_assert_str_eq(w, "403");
    free(w);
    free(out);

    netlab_run(&r, "s3", "down", "--name", name, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    cr_assert(wait_process_gone(moto, 5), "moto outlived s3 down");
    cr_assert(!netlab_state_exists(state));
    free(data);
}

/* ---------------------------------------------------------------- two nodes */

static char node_a[24], node_b[24];

/* netlab nodes up --names A,B for this test process */
static void nodes_up(void)
{
    char names[64], owner[16], slot[80];
    snprintf(node_a, sizeof node_a, "nla%d", (int)getpid());
    snprintf(node_b, sizeof node_b, "nlb%d", (int)getpid());
    snprintf(names, sizeof names, "%s,%s", node_a, node_b);
    snprintf(slot, sizeof slot, "nodes %s", names);
    remember(2, slot);
    snprintf(owner, sizeof owner, "%d", (int)getpid());
    run_result r;
    netlab_run(&r, "nodes", "up", "--names", names, "--rate", "1gbit", "--owner", owner, NULL);
    cr_assert_eq(r.status, 0, "netlab nodes up: %s", r.err);
    run_free(&r);
}

/* tools/netlab-rsh A mpirun (2 ranks, one on each node, TCP on nlnode)
 * train ARGS...; argv into out (room for 64) */
static void two_node_argv(char **out, char *const *train_args)
{
    static char hosts[64], agent[512], rsh[512];
    snprintf(hosts, sizeof hosts, "%s,%s", node_a, node_b);
    snprintf(agent, sizeof agent, "%s/tools/netlab-rsh", source_root());
    snprintf(rsh, sizeof rsh, "%s", agent);
    char *fixed[] = {rsh,
                     node_a,
                     (char *)mpirun_path(),
                     "-q",
                     "--mca",
                     "plm_rsh_agent",
                     agent,
                     "-H",
                     hosts,
                     "-np",
                     "2",
                     "--mca",
                     "btl",
                     "tcp,self",
                     "--mca",
                     "btl_tcp_if_include",
                     "nlnode",
                     "--mca",
                     "oob_tcp_if_include",
                     "nlnode",
                     (char *)train_bin()};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        out[n++] = fixed[i];
    for (int i = 0; train_args[i] && n < 63; i++)
        out[n++] = train_args[i];
    out[n] = NULL;
}

#define NEED_NODES()                                                                               \
    do {                                                                                           \
        NEED_NETLAB(0);                                                                            \
        if (!mpi_available())                                                                      \
            cr_skip_test("built without MPI or no mpirun");                                        \
    } while (0)

/* the whole file: equal bytes or not */
static int same_bytes(const char *a, const char *b)
{
    size_t la, lb;
    char *ba = read_whole(a, &la), *bb = read_whole(b, &lb);
    int same = ba && bb && la == lb && !memcmp(ba, bb, la);
    free(ba);
    free(bb);
    return same;
}

Test(netlab, two_ranks_on_two_nodes_end_with_the_bits_of_one_process_and_of_one_node)
{
    NEED_NODES();
    mpi_test_env();
    char *fm = make_fashion_subset(dir, 385), *csv = path_join(fm, "train.csv");
    char *ck[3], *js[3];
    const char *tags[3] = {"k1", "k2-one-node", "k2-two-nodes"};
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s.ckpt", tags[i]);
        ck[i] = path_join(dir, nm);
        snprintf(nm, sizeof nm, "%s.json", tags[i]);
        js[i] = path_join(dir, nm);
    }
#define ARGS(i)                                                                                    \
    "--epochs", "2", "--batch", "64", "--lr", "0.005", "--workers", "1", "--channels", "1",        \
        "--save", ck[i], "--json", js[i], csv
    run_result r;
    run_train(&r, ARGS(0), NULL);
    cr_assert_eq(r.status, 0, "1 process: %s", r.err);
    run_free(&r);
    run_mpi(&r, 2, train_bin(), ARGS(1), NULL);
    cr_assert_eq(r.status, 0, "2 ranks on one node: %s", r.err);
    run_free(&r);
    nodes_up();
    char *targs[] = {ARGS(2), NULL};
    char *argv[64];
    two_node_argv(argv, targs);
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "2 ranks on two nodes: %s", r.err);
    cr_assert(strstr(r.out, "ranks 2 (1 on this node)"), "one rank on each node:\n%s", r.out);
    run_free(&r);
    /* the parameters after two epochs, every bit */
    cr_assert(same_bytes(ck[0], ck[2]), "two nodes end with other parameters than one process");
    cr_assert(same_bytes(ck[1], ck[2]), "two nodes end with other parameters than one node");
    assert_same_losses(js[1], js[2], 2); /* same K: the reported losses too */
    /* each rank ran under its node's host name: the slowest rank's host is
     * its node's */
    char rk[2][JSON_VALUE_MAX], host[2][JSON_VALUE_MAX];
    cr_assert_eq(json_epoch_values(js[2], "wait_max_rank", rk, 2), 2);
    cr_assert_eq(json_epoch_values(js[2], "wait_max_host", host, 2), 2);
    for (int e = 0; e < 2; e++) {
        char want[JSON_VALUE_MAX];
        snprintf(want, sizeof want, "\"%s\"", atoi(rk[e]) == 0 ? node_a : node_b);
        cr_assert_str_eq(host[e], want, "epoch %d: rank %s on %s", e + 1, rk[e], host[e]);
    }
#undef ARGS
    for (int i = 0; i < 3; i++) {
        free(ck[i]);
        free(js[i]);
    }
    free(csv);
    free(fm);
}

/* pid's parent's command name is `name` */
static int parent_is(pid_t pid, const char *name)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    int ppid = 0;
    if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1)
        return 0;
    snprintf(path, sizeof path, "/proc/%d/comm", ppid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return !strcmp(buf, name);
}

/* OMPI_COMM_WORLD_RANK of pid, or -1 */
static int rank_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    size_t len;
    char *env = read_whole(path, &len);
    int rank = -1;
    for (size_t i = 0; env && i < len; i += strlen(env + i) + 1)
        if (!strncmp(env + i, "OMPI_COMM_WORLD_RANK=", 21))
            rank = atoi(env + i + 21);
    free(env);
    return rank;
}

Test(netlab, killing_the_rank_on_nodeb_ends_the_job_on_nodea_leaving_nothing)
{
    NEED_NODES();
    mpi_test_env();
    char *fm = make_fashion_subset(dir, 385), *csv = path_join(fm, "train.csv");
    nodes_up();
    char *targs[] = {"--epochs", "200",        "--batch", "16", "--workers",
                     "1",        "--channels", "1",       csv,  NULL};
    char *argv[64], *out = path_join(dir, "job.out"), *err = path_join(dir, "job.err");
    two_node_argv(argv, targs);
    pid_t job = spawn_bg(argv, out, err);
    /* rank 1: orted's child in node B, once its loader (a supervisor and a
     * worker) has started */
    pid_t rank1 = -1, in_b[32];
    for (int t = 0; t < 3000 && rank1 < 0; t++, usleep(10000)) {
        int n = netns_pids(node_b, in_b, 32);
        for (int i = 0; i < n; i++)
            if (rank_of(in_b[i]) == 1 && parent_is(in_b[i], "orted") &&
                count_children(in_b[i]) >= 1)
                rank1 = in_b[i];
    }
    cr_assert_gt(rank1, 0, "no rank 1 with its loader in %s after 30 s", node_b);
    usleep(300000);
    pid_t all[64];
    int n = netns_pids(node_a, all, 32);
    n += netns_pids(node_b, all + n, 32);
    cr_assert_geq(n, 6, "mpirun, orted, and each rank's loader: %d processes", n);
    int ranks = 0;
    for (int i = 0; i < n; i++)
        ranks += rank_of(all[i]) == 0 && parent_is(all[i], "mpirun");
    cr_assert_eq(ranks, 1, "rank 0 runs in %s under mpirun", node_a);
    kill(rank1, SIGKILL);
    int st = spawn_wait(job, 30); /* fails the test if the job outlives it */
    cr_assert(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "the job ended with success");
    assert_gone(all, n, "the job");
    pid_t left[8];
    cr_assert_eq(netns_pids(node_a, left, 8), 0, "processes left in %s", node_a);
    cr_assert_eq(netns_pids(node_b, left, 8), 0, "processes left in %s", node_b);
    free(out);
    free(err);
    free(csv);
    free(fm);
}

/* files in d ending in `suffix` */
static int files_in(const char *d, const char *suffix)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null | grep -c -- '%s$'", d, suffix);
    FILE *f = popen(cmd, "r");
    int n = 0;
    if (f && fscanf(f, "%d", &n) != 1)
        n = 0;
    if (f)
        pclose(f);
    return n;
}

Test(netlab, shards_over_http_on_two_nodes_download_once_per_node_and_end_with_one_node_bits,
     .timeout = 150)
{
    NEED_NODES();
    if (access("/usr/sbin/nginx", X_OK) != 0)
        cr_skip_test("no /usr/sbin/nginx");
    mpi_test_env();
    char *fm = make_fashion_subset(dir, 385), *csv = path_join(fm, "train.csv");
    char *www = path_join(dir, "www"), *out = path_join(dir, "www/shards");
    mkdir(www, 0755);
    char *shard = path_join(tools_dir(), "shard");
    char *sargv[] = {shard, "--out", out, "--shard-samples", "50", csv, NULL};
    run_result r;
    run_argv(sargv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "shard: %s", r.err);
    run_free(&r);
    nodes_up();
    /* nginx in node A, reached from both nodes by A's name */
    char *log = path_join(dir, "access.log");
    char *cf = server_nginx_conf(dir, www, "0.0.0.0:8095", NULL),
         *nlog = path_join(dir, "nginx.out");
    char *nargv[] = {"/usr/sbin/ip", "netns", "exec", node_a, "/usr/sbin/nginx",
                     "-c",           cf,      "-p",   dir,    NULL};
    spawn_bg(nargv, nlog, nlog);
    char url[256], probe[300];
    snprintf(url, sizeof url, "http://%s:8095/shards/train-{000000..000007}.tar", node_a);
    snprintf(probe, sizeof probe,
             "ip netns exec %s curl -sf -o /dev/null http://%s:8095/shards/"
             "train-000000.idx",
             node_b, node_a);
    int up = 0;
    for (int i = 0; i < 100 && !up; i++)
        if (!(up = system(probe) == 0))
            usleep(50000);
    cr_assert(up, "nginx in %s does not answer %s (see nginx.out)", node_a, node_b);

    char *ck1 = path_join(dir, "one.ckpt"), *ck2 = path_join(dir, "two.ckpt");
    char *cache = path_join(dir, "cache-%h");
#define SHARD_ARGS(ck)                                                                             \
    "--epochs", "2", "--batch", "64", "--lr", "0.005", "--workers", "2", "--channels", "1",        \
        "--shard-cache", cache, "--save", ck, url
    /* one process on node A, then one rank on each node */
    char rsh[512];
    snprintf(rsh, sizeof rsh, "%s/tools/netlab-rsh", source_root());
    char *oargv[] = {rsh, node_a, (char *)train_bin(), SHARD_ARGS(ck1), NULL};
    run_argv(oargv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "1 process: %s", r.err);
    run_free(&r);
    int first = server_nginx_gets(log, ".tar");
    cr_assert_eq(first, 8, "one process: %d shard downloads for 8 shards", first);
    /* the nodes' caches start empty: that one process's folder is node A's */
    char *cache_a = path_join(dir, node_a), *cmd;
    if (asprintf(&cmd, "rm -rf '%s/cache-%s'", dir, node_a) < 0)
        abort();
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    char *targs[] = {SHARD_ARGS(ck2), NULL};
    char *argv[64];
    two_node_argv(argv, targs);
    run_argv(argv, NULL, 90, &r);
    cr_assert_eq(r.status, 0, "2 ranks on two nodes: %s", r.err);
    run_free(&r);
    /* every shard once per node, though each node's rank has 2 workers and
     * a fetcher reading it */
    int both = server_nginx_gets(log, ".tar") - first;
    cr_assert_eq(both, 16, "two nodes: %d shard downloads for 8 shards, not 8 per node", both);
    char ca[512], cb[512];
    snprintf(ca, sizeof ca, "%s/cache-%s", dir, node_a);
    snprintf(cb, sizeof cb, "%s/cache-%s", dir, node_b);
    cr_assert_eq(files_in(ca, ".tar"), 8, "node A's cache");
    cr_assert_eq(files_in(cb, ".tar"), 8, "node B's cache");
    cr_assert(same_bytes(ck1, ck2), "two nodes over HTTP end with other bits than one process");
#undef SHARD_ARGS
    free(fm), free(csv), free(www), free(out), free(shard), free(log), free(cf), free(nlog);
    free(ck1), free(ck2), free(cache), free(cache_a);
}
