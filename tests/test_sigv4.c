/* test_sigv4.c — the S3 request signer against AWS's published Signature
 * Version 4 examples (the sig-v4 test suite's get-vanilla family, and the
 * S3 guide's GetObject example), and against libcurl's own signer
 * (CURLOPT_AWS_SIGV4) as an independent implementation; the credentials'
 * sources. */
#define _GNU_SOURCE
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
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "loader/sigv4.h"
#include "tests/support/helpers.h"
#include "tests/support/servers.h"

TestSuite(sigv4, .timeout = 60);

/* the test suite's credentials and scope (AKIDEXAMPLE, us-east-1, "service") */
static const sigv4_creds suite_creds = {"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                                        NULL};
static const char empty_sha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

static void sign_suite(const char *method, const char *path, const char *query, sigv4_out *out)
{
    const char *hs[] = {"Host:example.amazonaws.com", "X-Amz-Date:20150830T123600Z"};
    sigv4_req r = {.method = method,
                   .path = path,
                   .query = query,
                   .headers = hs,
                   .nheaders = 2,
                   .payload_sha256 = empty_sha,
                   .amz_date = "20150830T123600Z",
                   .region = "us-east-1",
                   .service = "service"};
    errbuf e;
    cr_assert_eq(sigv4_sign(&r, &suite_creds, out, &e), 0, "%s", e.msg);
}

Test(sigv4, get_vanilla_every_step)
{
    sigv4_out o;
    sign_suite("GET", "/", NULL, &o);
    cr_assert_str_eq(o.canonical_request,
                     "GET\n/\n\n"
                     "host:example.amazonaws.com\n"
                     "x-amz-date:20150830T123600Z\n\n"
                     "host;x-amz-date\n"
                     "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    cr_assert_str_eq(o.string_to_sign,
                     "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
                     "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63");
    cr_assert_str_eq(o.signature,
                     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    cr_assert_str_eq(o.authorization,
                     "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                     "aws4_request, SignedHeaders=host;x-amz-date, "
                     "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    sigv4_out_free(&o);
}

Test(sigv4, suite_query_order_post_and_utf8)
{
    static const struct {
        const char *method, *path, *query, *sig;
    } cases[] = {
        /* get-vanilla-query-order-key-case: the pairs are sorted */
        {"GET", "/", "Param2=value2&Param1=value1",
         "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
        /* post-vanilla */
        {"POST", "/", NULL, "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
        /* get-utf8: the path as sent, encoded once */
        {"GET", "/%E1%88%B4", NULL,
         "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sigv4_out o;
        sign_suite(cases[i].method, cases[i].path, cases[i].query, &o);
        cr_assert_str_eq(o.signature, cases[i].sig, "%s %s?%s\n%s", cases[i].method, cases[i].path,
                         cases[i].query ? cases[i].query : "", o.canonical_request);
        sigv4_out_free(&o);
    }
}

/* The S3 guide's "GET Object" example: a Range header that is signed, the
 * payload hash header, another key and region scope. */
Test(sigv4, s3_get_object_example)
{
    const sigv4_creds c = {"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                           NULL};
    char sha[100];
    snprintf(sha, sizeof sha, "x-amz-content-sha256:%s", empty_sha);
    const char *hs[] = {"Host: examplebucket.s3.amazonaws.com", "Range: bytes=0-9", sha,
                        "x-amz-date:  20130524T000000Z "};
    sigv4_req r = {.method = "GET",
                   .path = "/test.txt",
                   .headers = hs,
                   .nheaders = 4,
                   .payload_sha256 = empty_sha,
                   .amz_date = "20130524T000000Z",
                   .region = "us-east-1",
                   .service = "s3"};
    sigv4_out o;
    errbuf e;
    cr_assert_eq(sigv4_sign(&r, &c, &o, &e), 0, "%s", e.msg);
    char h[65];
    sigv4_sha256_hex(o.canonical_request, strlen(o.canonical_request), h);
    cr_assert_str_eq(h, "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972", "%s",
                     o.canonical_request);
    cr_assert_str_eq(o.signed_headers, "host;range;x-amz-content-sha256;x-amz-date");
    cr_assert_str_eq(o.signature,
                     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    sigv4_out_free(&o);
}

Test(sigv4, uri_encode_and_bad_input)
{
    char *a = sigv4_uri_encode("a b/c~d_e.f-g+h=é", 1), *b = sigv4_uri_encode("p/q", 0);
    cr_assert_str_eq(a, "a%20b/c~d_e.f-g%2Bh%3D%C3%A9");
    cr_assert_str_eq(b, "p%2Fq");
    free(a);
    free(b);
    char d[17];
    sigv4_amz_date(1440938160, d);
    cr_assert_str_eq(d, "20150830T123600Z");

    const char *hs[] = {":nameless"};
    sigv4_req r = {.method = "GET",
                   .path = "/",
                   .headers = hs,
                   .nheaders = 1,
                   .payload_sha256 = empty_sha,
                   .amz_date = "20150830T123600Z",
                   .region = "us-east-1",
                   .service = "s3"};
    sigv4_out o;
    errbuf e;
    cr_assert_eq(sigv4_sign(&r, &suite_creds, &o, &e), -1);
    cr_assert(strstr(e.msg, ":nameless"), "%s", e.msg);
    r.nheaders = 0;
    r.amz_date = "2015-08-30";
    cr_assert_eq(sigv4_sign(&r, &suite_creds, &o, &e), -1);
    cr_assert(strstr(e.msg, "YYYYMMDDTHHMMSSZ"), "%s", e.msg);
}

/* ---------------------------------------------------------------- curl as the oracle */

/* A one-shot HTTP server on loopback: accepts one connection, reads the
 * request's head, answers 200 with no body. */
static pid_t one_shot_server(int *port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s, 4), 0);
    getsockname(s, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int c = accept(s, NULL, NULL);
        char buf[8192];
        server_read_head(c, buf, sizeof buf);
        static const char ok[] =
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        if (write(c, ok, sizeof ok - 1) < 0)
            _exit(1);
        close(c);
        _exit(0);
    }
    close(s);
    return pid;
}

typedef struct captured {
    char text[8192];
    size_t len;
} captured;

static int on_debug(CURL *h, curl_infotype type, char *data, size_t size, void *arg)
{
    (void)h;
    captured *c = arg;
    if (type == CURLINFO_HEADER_OUT && c->len + size < sizeof c->text) {
        memcpy(c->text + c->len, data, size);
        c->len += size;
        c->text[c->len] = 0;
    }
    return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    (void)p;
    (void)arg;
    return size * n;
}

/* header `name`'s value in the captured request head, malloc'd */
static char *header_value(const char *head, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = head; p && *p; p = strstr(p, "\r\n") ? strstr(p, "\r\n") + 2 : NULL)
        if (!strncasecmp(p, name, nl) && p[nl] == ':') {
            const char *v = p + nl + 1;
            while (*v == ' ')
                v++;
            return strndup(v, strcspn(v, "\r\n"));
        }
    return NULL;
}

/* libcurl signs a request (CURLOPT_AWS_SIGV4, its own code); the head it
 * sends is signed again here from its own headers and date: the two
 * Authorization headers must agree. */
Test(sigv4, agrees_with_libcurls_signer)
{
    static const char *paths[] = {"/bkt/train-000003.tar", "/bkt/",
                                  "/bkt/?list-type=2&prefix=shards%2Ftrain"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        int port;
        pid_t srv = one_shot_server(&port);
        char url[256];
        snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, paths[i]);
        captured cap = {.len = 0};
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, "aws:amz:eu-west-3:s3");
        curl_easy_setopt(h, CURLOPT_USERPWD, "AKIDCURL:curl/secret+key");
        curl_easy_setopt(h, CURLOPT_VERBOSE, 1L);
        curl_easy_setopt(h, CURLOPT_DEBUGFUNCTION, on_debug);
        curl_easy_setopt(h, CURLOPT_DEBUGDATA, &cap);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        CURLcode cc = curl_easy_perform(h);
        curl_easy_cleanup(h);
        cr_assert_eq(cc, CURLE_OK, "%s", curl_easy_strerror(cc));
        int st;
        waitpid(srv, &st, 0);

        char *auth = header_value(cap.text, "Authorization");
        char *date = header_value(cap.text, "X-Amz-Date");
        char *host = header_value(cap.text, "Host");
        char *sha = header_value(cap.text, "x-amz-content-sha256");
        cr_assert(auth && date && host, "%s", cap.text);
        /* the headers curl signed, from its SignedHeaders list */
        const char *sh = strstr(auth, "SignedHeaders=");
        cr_assert(sh);
        sh += 14;
        char *names = strndup(sh, strcspn(sh, ",")), *save = NULL;
        const char *hs[8];
        char *own[8];
        size_t nh = 0;
        for (char *n = strtok_r(names, ";", &save); n && nh < 8; n = strtok_r(NULL, ";", &save)) {
            char *v = header_value(cap.text, n);
            cr_assert(v, "curl signed %s but did not send it:\n%s", n, cap.text);
            if (asprintf(&own[nh], "%s:%s", n, v) < 0)
                abort();
            hs[nh] = own[nh];
            nh++;
            free(v);
        }
        const char *q = strchr(paths[i], '?');
        char *path = strndup(paths[i], q ? (size_t)(q - paths[i]) : strlen(paths[i]));
        sigv4_creds c = {"AKIDCURL", "curl/secret+key", NULL};
        sigv4_req r = {.method = "GET",
                       .path = path,
                       .query = q ? q + 1 : NULL,
                       .headers = hs,
                       .nheaders = nh,
                       .payload_sha256 = sha ? sha : empty_sha,
                       .amz_date = date,
                       .region = "eu-west-3",
                       .service = "s3"};
        sigv4_out o;
        errbuf e;
        cr_assert_eq(sigv4_sign(&r, &c, &o, &e), 0, "%s", e.msg);
        cr_assert_str_eq(o.authorization, auth, "%s\nours:\n%s", cap.text, o.canonical_request);
        sigv4_out_free(&o);
        for (size_t k = 0; k < nh; k++)
            free(own[k]);
        free(names);
        free(path);
        free(auth);
        free(date);
        free(host);
        free(sha);
    }
}

/* ---------------------------------------------------------------- credentials */

static void clear_aws_env(void)
{
    static const char *vars[] = {"AWS_ACCESS_KEY_ID",           "AWS_SECRET_ACCESS_KEY",
                                 "AWS_SESSION_TOKEN",           "AWS_PROFILE",
                                 "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION",
                                 "AWS_DEFAULT_REGION"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

Test(sigv4, credentials_from_env_then_file_profiles)
{
    clear_aws_env();
    char *dir = tmpdir_make();
    setenv("HOME", dir, 1);
    sigv4_creds c;
    errbuf e;
    /* nothing anywhere: the message says where it looked */
    cr_assert_eq(sigv4_creds_load(&c, &e), -1);
    cr_assert(strstr(e.msg, ".aws/credentials") && strstr(e.msg, "'default'"), "%s", e.msg);

    char *file =
        write_text(dir, ".aws/credentials",
                   "# comment\n[other]\naws_access_key_id = AKOTHER\naws_secret_access_key=sOther\n"
                   "\n[default]\n  aws_access_key_id=AKDEF  \naws_secret_access_key = sDef\n"
                   "aws_session_token = tok\n");
    free(file);
    cr_assert_eq(sigv4_creds_load(&c, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c.access_key, "AKDEF");
    cr_assert_str_eq(c.secret_key, "sDef");
    cr_assert_str_eq(c.session_token, "tok");
    sigv4_creds_free(&c);

    setenv("AWS_PROFILE", "other", 1);
    cr_assert_eq(sigv4_creds_load(&c, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c.access_key, "AKOTHER");
    cr_assert_null(c.session_token);
    sigv4_creds_free(&c);

    setenv("AWS_PROFILE", "absent", 1);
    cr_assert_eq(sigv4_creds_load(&c, &e), -1);
    cr_assert(strstr(e.msg, "'absent'"), "%s", e.msg);

    /* the environment wins over the file */
    setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "sEnv", 1);
    cr_assert_eq(sigv4_creds_load(&c, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c.access_key, "AKENV");
    cr_assert_null(c.session_token);
    sigv4_creds_free(&c);

    cr_assert_str_eq(sigv4_region(), "us-east-1");
    setenv("AWS_DEFAULT_REGION", "eu-west-1", 1);
    cr_assert_str_eq(sigv4_region(), "eu-west-1");
    setenv("AWS_REGION", "ap-south-1", 1);
    cr_assert_str_eq(sigv4_region(), "ap-south-1");
    tmpdir_remove(dir);
}

/* A query is canonicalised from what it means, not how it was sent: '/'
 * as is or as %2F, a token's '+' and '=' encoded or not, sign alike; a
 * name without '=' signs with an empty value. */
Test(sigv4, query_pairs_sign_by_meaning)
{
    static const char *same[][2] = {
        {"list-type=2&prefix=shards/", "prefix=shards%2F&list-type=2"},
        {"continuation-token=a+b=c/d", "continuation-token=a%2Bb%3Dc%2Fd"},
        {"acl", "acl="},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        sigv4_out a, b;
        sign_suite("GET", "/", same[i][0], &a);
        sign_suite("GET", "/", same[i][1], &b);
        cr_assert_str_eq(a.canonical_request, b.canonical_request);
        sigv4_out_free(&a);
        sigv4_out_free(&b);
    }
    sigv4_out o;
    sign_suite("GET", "/", "prefix=shards/&list-type=2", &o);
    cr_assert(strstr(o.canonical_request, "\nlist-type=2&prefix=shards%2F\n"), "%s",
              o.canonical_request);
    sigv4_out_free(&o);
}
