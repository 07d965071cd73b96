/* servers.c — see servers.h. */
#define _GNU_SOURCE
#include "tests/support/servers.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "loader/remote.h"
#include "tests/support/helpers.h"

static const char *reason(int st)
{
    return st == 200   ? "OK"
           : st == 206 ? "Partial Content"
           : st == 403 ? "Forbidden"
           : st == 404 ? "Not Found"
           : st == 503 ? "Service Unavailable"
                       : "Other";
}

size_t server_read_head(int c, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    while (n < cap - 1) {
        ssize_t k = read(c, buf + n, cap - 1 - n);
        if (k <= 0)
            return 0;
        n += (size_t)k;
        buf[n] = 0;
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    return n;
}

static void serve_one(int c, const fault *f, _Atomic int *seen)
{
    char req[4096];
    if (!server_read_head(c, req, sizeof req))
        return;
    int i = atomic_fetch_add(seen, 1);
    if (f->hang) {
        pause();
        return;
    }
    int st = i < f->fail_first ? f->fail_status : 200;
    const char *sp = strchr(req, ' '), *end = sp ? strchr(sp + 1, ' ') : NULL;
    if (f->only_tar && (!end || end - sp < 5 || strncmp(end - 4, ".tar", 4)))
        st = 404;
    size_t off = 0, len = f->len;
    const char *r = strcasestr(req, "\r\nRange: bytes=");
    if (st == 200 && r && !f->no_range) {
        unsigned long long a, b;
        if (sscanf(r + 15, "%llu-%llu", &a, &b) == 2 && a < f->len) {
            st = 206;
            off = (size_t)a;
            len = (size_t)(b + 1 < f->len ? b + 1 : f->len) - off;
        }
    }
    if (st >= 300)
        len = 0;
    char head[256];
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", st,
                      reason(st), len);
    if (write(c, head, (size_t)hl) < 0)
        return;
    if (!strncmp(req, "HEAD", 4))
        return;
    size_t send = i < f->cut_first && f->cut_bytes < len ? f->cut_bytes : len;
    for (size_t done = 0; done < send;) {
        ssize_t w = write(c, f->body + off + done, send - done);
        if (w <= 0)
            return;
        done += (size_t)w;
    }
}

int server_fault_start(_Atomic int *seen, pid_t *server, const fault *f)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s, 16), 0);
    getsockname(s, (struct sockaddr *)&a, &al);
    *server = fork();
    cr_assert_neq(*server, -1);
    if (*server == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        signal(SIGPIPE, SIG_IGN);
        for (;;) {
            int c = accept(s, NULL, NULL);
            if (c < 0)
                continue;
            serve_one(c, f, seen);
            if (!f->hang)
                close(c);
        }
    }
    close(s);
    return ntohs(a.sin_port);
}

/* a port nothing listens on (bound, then closed) */
int server_dead_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(s, (struct sockaddr *)&a, &al);
    close(s);
    return ntohs(a.sin_port);
}

/* nginx serving www on loopback (with TLS when cert and key are given):
 * its port, once it answers a HEAD of url_path */
char *server_nginx_conf(const char *dir, const char *www, const char *listen, const char *extra)
{
    char conf[8192];
    snprintf(
        conf, sizeof conf,
        "daemon off; master_process off; pid %s/nginx.pid; error_log %s/error.log;\n"
        "events { worker_connections 64; }\n"
        "http { access_log %s/access.log; client_body_temp_path %s/tmp; proxy_temp_path %s/tmp;\n"
        "  fastcgi_temp_path %s/tmp; uwsgi_temp_path %s/tmp; scgi_temp_path %s/tmp;\n"
        "  server { listen %s; root %s; %s } }\n",
        dir, dir, dir, dir, dir, dir, dir, dir, listen, www, extra ? extra : "");
    return write_text(dir, "nginx.conf", conf);
}

int server_nginx_start(const char *dir, const char *www, const char *cert, const char *key,
                       const char *url_path, const char *extra)
{
    int port = server_dead_port();
    char listen[1100];
    int n = snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    if (cert)
        snprintf(listen + n, sizeof listen - (size_t)n,
                 " ssl; ssl_certificate %s; ssl_certificate_key %s", cert, key);
    char *cf = server_nginx_conf(dir, www, listen, extra), *out = path_join(dir, "nginx.out");
    char *argv[] = {"/usr/sbin/nginx", "-c", cf, "-p", (char *)dir, NULL};
    spawn_bg(argv, out, out);
    char url[256];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", cert ? "https" : "http", port, url_path);
    errbuf e;
    uint64_t size;
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) { /* until nginx listens */
        rc = remote_head(url, &(remote_opts){.timeout_s = 5, .retries = 0}, &size, NULL, 0, &e);
        if (rc)
            usleep(50000);
    }
    cr_assert_eq(rc, 0, "%s", e.msg);
    free(cf);
    free(out);
    return port;
}

static size_t discard_body(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* PUT body at url (moto's server takes unsigned writes unless told to
 * check): the HTTP status */
long server_http_put(const char *url, const void *body, size_t len)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    /* not a form (curl's default type for a body), which moto would parse */
    struct curl_slist *hs = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hs);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hs);
    return code;
}

/* The python with moto and boto3: the test rig's pinned venv (make deps,
 * mk/netlab.mk), else python3 on PATH; in buf. */
const char *server_moto_python(char *buf, size_t len)
{
    char *venv = path_join(source_root(), "build/netlab/venv/bin/python");
    snprintf(buf, len, "%s", access(venv, X_OK) == 0 ? venv : "python3");
    free(venv);
    return buf;
}

/* moto's S3 server on loopback with bucket "bkt": its endpoint, or NULL
 * (skipped) when that python has no moto. */
char *server_moto_start(const char *dir)
{
    char py[1024], cmd[1400];
    server_moto_python(py, sizeof py);
    snprintf(cmd, sizeof cmd, "'%s' -c 'import moto.server' >/dev/null 2>&1", py);
    if (system(cmd) != 0)
        return NULL;
    int port = server_dead_port();
    char *out = path_join(dir, "moto.log");
    snprintf(cmd, sizeof cmd, "exec '%s' -m moto.server -H 127.0.0.1 -p %d", py, port);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    spawn_bg(argv, out, out);
    free(out);
    char *ep, bucket[128];
    if (asprintf(&ep, "http://127.0.0.1:%d", port) < 0)
        abort();
    snprintf(bucket, sizeof bucket, "%s/bkt", ep);
    long code = 0;
    for (int i = 0; i < 200 && code != 200; i++) {
        code = server_http_put(bucket, "", 0);
        if (code != 200)
            usleep(50000);
    }
    cr_assert_eq(code, 200, "moto did not start (see moto.log)");
    return ep;
}

const char *server_moto_signed(const char *dir, const char *upload, const char *prefix, char *ep,
                               size_t eplen, char *id, size_t idlen, char *secret, size_t slen)
{
    static char why[1400];
    char mpy[1024], cmd[1400];
    server_moto_python(mpy, sizeof mpy);
    snprintf(cmd, sizeof cmd, "'%s' -c 'import moto.server, boto3' >/dev/null 2>&1", mpy);
    if (system(cmd) != 0) {
        snprintf(why, sizeof why,
                 "%s has no moto and boto3 (make deps installs them in build/netlab/venv)", mpy);
        return why;
    }
    int port = server_dead_port();
    char *log = path_join(dir, "moto.log");
    /* the first actions (making the user, its key and policy) unsigned */
    snprintf(cmd, sizeof cmd,
             "INITIAL_NO_AUTH_ACTION_COUNT=3 exec '%s' -m moto.server -H 127.0.0.1 -p %d", mpy,
             port);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    spawn_bg(argv, log, log);
    snprintf(ep, eplen, "http://127.0.0.1:%d", port);
    static const char setup_py[] =
        "import boto3, os, sys, time\n"
        "ep, up, prefix = sys.argv[1], sys.argv[2], sys.argv[3]\n"
        "kw = dict(endpoint_url=ep, region_name='us-east-1')\n"
        "iam = boto3.client('iam', aws_access_key_id='x', aws_secret_access_key='y', **kw)\n"
        "for i in range(100):\n"
        "    try:\n"
        "        iam.create_user(UserName='t'); break\n"
        "    except Exception:\n"
        "        time.sleep(0.1)\n"
        "k = iam.create_access_key(UserName='t')['AccessKey']\n"
        "iam.put_user_policy(UserName='t', PolicyName='all', PolicyDocument='{\"Version\":"
        "\"2012-10-17\",\"Statement\":[{\"Effect\":\"Allow\",\"Action\":\"*\",\"Resource\":\"*\"}]}"
        "')\n"
        "s3 = boto3.client('s3', aws_access_key_id=k['AccessKeyId'],\n"
        "                  aws_secret_access_key=k['SecretAccessKey'], **kw)\n"
        "s3.create_bucket(Bucket='bkt')\n"
        "for name in sorted(os.listdir(up)):\n"
        "    with open(os.path.join(up, name), 'rb') as f:\n"
        "        s3.put_object(Bucket='bkt', Key=prefix + name, Body=f.read())\n"
        "print(k['AccessKeyId'], k['SecretAccessKey'])\n";
    char *py = write_text(dir, "moto_setup.py", setup_py);
    char *pargv[] = {"/usr/bin/env", mpy, py, ep, (char *)upload, (char *)prefix, NULL};
    run_result r;
    run_argv(pargv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "moto setup: %s", r.err);
    char fmt[32];
    snprintf(fmt, sizeof fmt, "%%%zus %%%zus", idlen - 1, slen - 1);
    cr_assert_eq(sscanf(r.out, fmt, id, secret), 2, "%s", r.out);
    run_free(&r);
    setenv("AWS_ACCESS_KEY_ID", id, 1); /* for this process and what it starts */
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    unsetenv("AWS_SESSION_TOKEN");
    free(py);
    free(log);
    return NULL;
}

int server_nginx_gets(const char *log, const char *suffix)
{
    size_t len;
    errbuf e;
    char *text = read_whole_file(log, &len, &e), pat[64];
    snprintf(pat, sizeof pat, "%s HTTP/", suffix);
    int n = 0;
    for (char *p = text; p && (p = strstr(p, "\"GET ")); p++) {
        char *eol = strchr(p, '\n'), *hit = strstr(p, pat);
        n += hit && (!eol || hit < eol);
    }
    free(text);
    return n;
}
