/* remote.c — objects behind URLs through libcurl (see remote.h). One easy
 * handle per process, reused so keep-alive connections are; each try is
 * signed afresh for s3:// (the date is part of the signature). */
#define _GNU_SOURCE
#include "loader/remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "loader/sigv4.h"

static remote_stats stats;
static CURL *handle, *inherited; /* inherited: the parent's, never touched */
static pid_t handle_pid;
static int global_ready;

remote_stats remote_stats_get(void) { return stats; }
void remote_stats_reset(void) { memset(&stats, 0, sizeof stats); }

int remote_is_url(const char *s)
{
    return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "file://", 7) ||
           !strncmp(s, "s3://", 5);
}

void remote_cleanup(void)
{
    if (handle && handle_pid == getpid())
        curl_easy_cleanup(handle);
    handle = NULL;
    if (global_ready)
        curl_global_cleanup();
    global_ready = 0;
}

static CURL *get_handle(errbuf *e)
{
    if (!global_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            errf(e, "libcurl: curl_global_init failed");
            return NULL;
        }
        global_ready = 1;
    }
    if (handle && handle_pid != getpid()) { /* forked: the socket is the parent's */
        inherited = handle;
        handle = NULL;
    }
    if (!handle) {
        handle = curl_easy_init();
        handle_pid = getpid();
        if (!handle)
            errf(e, "libcurl: curl_easy_init failed");
    }
    return handle;
}

/* ---------------------------------------------------------------- targets */

/* What one request goes to: the URL curl fetches and, for s3://, what the
 * signature covers. */
typedef struct target {
    char *url;      /* http(s):// or file:// */
    int s3;         /* sign it */
    char *hostport; /* the Host header's value (s3) */
    char *path;     /* encoded path as sent (s3) */
    char *query;    /* encoded query or NULL (s3) */
    char *bucket;   /* (s3) */
} target;

static void target_free(target *t)
{
    free(t->url);
    free(t->hostport);
    free(t->path);
    free(t->query);
    free(t->bucket);
    memset(t, 0, sizeof *t);
}

/* url (s3://bucket/key or any other) + an encoded query, into t. */
static int target_make(target *t, const char *url, const char *query, const remote_opts *o,
                       errbuf *e)
{
    memset(t, 0, sizeof *t);
    if (strncmp(url, "s3://", 5)) {
        if (query && *query) {
            if (asprintf(&t->url, "%s?%s", url, query) < 0)
                abort();
        } else
            t->url = xstrdup(url);
        return 0;
    }
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    if (!blen)
        return errf(e, "%s: no bucket in the s3:// URL", url);
    t->s3 = 1;
    t->bucket = xmalloc(blen + 1);
    memcpy(t->bucket, b, blen);
    t->bucket[blen] = 0;
    char *key = sigv4_uri_encode(slash ? slash + 1 : "", 1);
    const char *ep =
        o && o->s3_endpoint && *o->s3_endpoint ? o->s3_endpoint : getenv("AWS_ENDPOINT_URL");
    int rc;
    if (ep && *ep) { /* path-style: ENDPOINT/bucket/key */
        const char *h = strstr(ep, "://");
        if (!h) {
            free(key);
            return errf(e, "%s: the S3 endpoint '%s' is not a URL (http://host:port)", url, ep);
        }
        h += 3;
        size_t hl = strcspn(h, "/");
        t->hostport = xmalloc(hl + 1);
        memcpy(t->hostport, h, hl);
        t->hostport[hl] = 0;
        /* the bucket itself (a listing) as /bucket, as boto3 sends it: moto's
         * signature check refuses /bucket/ */
        rc = *key ? asprintf(&t->path, "/%s/%s", t->bucket, key)
                  : asprintf(&t->path, "/%s", t->bucket);
        if (rc >= 0)
            rc = asprintf(&t->url, "%.*s%s%s%s", (int)(h + hl - ep), ep, t->path,
                          query && *query ? "?" : "", query ? query : "");
    } else { /* virtual-hosted: https://bucket.s3.region.amazonaws.com/key */
        rc = asprintf(&t->hostport, "%s.s3.%s.amazonaws.com", t->bucket, sigv4_region());
        if (rc >= 0)
            rc = asprintf(&t->path, "/%s", key);
        if (rc >= 0)
            rc = asprintf(&t->url, "https://%s%s%s%s", t->hostport, t->path,
                          query && *query ? "?" : "", query ? query : "");
    }
    if (rc < 0)
        abort();
    free(key);
    t->query = query && *query ? xstrdup(query) : NULL;
    return 0;
}

/* The signed headers of one try of t (a curl_slist the caller frees). */
static struct curl_slist *s3_headers(const target *t, const char *method, errbuf *e)
{
    sigv4_creds c;
    if (sigv4_creds_load(&c, e) < 0)
        return NULL;
    static const char empty_sha[] =
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    char date[17], h_host[300], h_sha[100], h_date[40], *h_tok = NULL;
    sigv4_amz_date((long long)time(NULL), date);
    snprintf(h_host, sizeof h_host, "Host:%s", t->hostport);
    snprintf(h_sha, sizeof h_sha, "x-amz-content-sha256:%s", empty_sha);
    snprintf(h_date, sizeof h_date, "x-amz-date:%s", date);
    const char *hs[4] = {h_host, h_sha, h_date, NULL};
    size_t nh = 3;
    if (c.session_token) {
        if (asprintf(&h_tok, "x-amz-security-token:%s", c.session_token) < 0)
            abort();
        hs[nh++] = h_tok;
    }
    sigv4_req r = {.method = method,
                   .path = t->path,
                   .query = t->query,
                   .headers = hs,
                   .nheaders = nh,
                   .payload_sha256 = empty_sha,
                   .amz_date = date,
                   .region = sigv4_region(),
                   .service = "s3"};
    sigv4_out out;
    struct curl_slist *l = NULL;
    if (sigv4_sign(&r, &c, &out, e) == 0) {
        char *auth;
        if (asprintf(&auth, "Authorization: %s", out.authorization) < 0)
            abort();
        for (size_t i = 0; i < nh; i++)
            l = curl_slist_append(l, hs[i]);
        l = curl_slist_append(l, auth);
        free(auth);
        sigv4_out_free(&out);
    }
    free(h_tok);
    sigv4_creds_free(&c);
    return l;
}

/* ---------------------------------------------------------------- transfers */

/* Where a response's body goes. */
typedef struct sink {
    CURL *h;
    int fd;     /* a file, or -1 */
    char *mem;  /* a fixed buffer (range) ... */
    size_t cap; /* ... of this size, or 0 */
    char *grow; /* or a growing one (listings) */
    size_t grow_len;
    size_t grow_max; /* a larger body is cut and too_big set (0: no limit) */
    int too_big;
    uint64_t skip; /* bytes to drop first (a server that ignored Range) */
    uint64_t got;  /* bytes kept */
    int full;      /* the fixed buffer filled: the transfer was cut on purpose */
    int write_errno;
    char err_body[512]; /* the start of an error response's body */
    size_t err_len;
    char reason[96]; /* the status line's reason phrase */
    char etag[160];
} sink;

static void sink_restart(sink *s)
{
    if (s->fd >= 0 && (ftruncate(s->fd, 0) < 0 || lseek(s->fd, 0, SEEK_SET) < 0))
        s->write_errno = errno;
    s->got = 0;
    s->full = 0;
    s->grow_len = 0;
    s->err_len = 0;
    s->reason[0] = s->etag[0] = 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    sink *s = arg;
    size_t len = size * n;
    if (len > 5 && !strncmp(p, "HTTP/", 5)) { /* a status line: keep its reason */
        const char *sp = memchr(p, ' ', len);
        const char *reason = sp ? memchr(sp + 1, ' ', len - (size_t)(sp + 1 - p)) : NULL;
        size_t rl = reason ? len - (size_t)(reason + 1 - p) : 0;
        while (rl && (reason[rl] == '\r' || reason[rl] == '\n' || reason[rl] == 0))
            rl--;
        rl = reason && rl ? rl : 0;
        if (rl >= sizeof s->reason)
            rl = sizeof s->reason - 1;
        memcpy(s->reason, reason ? reason + 1 : "", rl);
        s->reason[rl] = 0;
        s->etag[0] = 0;
    } else if (len > 5 && !strncasecmp(p, "etag:", 5)) {
        const char *v = p + 5;
        size_t vl = len - 5;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
            vl--;
        if (vl >= sizeof s->etag)
            vl = sizeof s->etag - 1;
        memcpy(s->etag, v, vl);
        s->etag[vl] = 0;
    }
    return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    sink *s = arg;
    size_t len = size * n;
    long code = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 300) { /* an error's body: keep its start for the message */
        size_t k =
            len < sizeof s->err_body - 1 - s->err_len ? len : sizeof s->err_body - 1 - s->err_len;
        memcpy(s->err_body + s->err_len, p, k);
        s->err_len += k;
        s->err_body[s->err_len] = 0;
        return len;
    }
    stats.bytes += len;
    if (s->skip) {
        size_t d = s->skip < len ? (size_t)s->skip : len;
        s->skip -= d;
        p += d;
        len -= d;
        if (!len)
            return size * n;
    }
    if (s->fd >= 0) {
        for (size_t done = 0; done < len;) {
            ssize_t w = write(s->fd, p + done, len - done);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                s->write_errno = errno;
                return 0;
            }
            done += (size_t)w;
        }
    } else if (s->cap) {
        size_t room = s->cap - s->got, k = len < room ? len : room;
        memcpy(s->mem + s->got, p, k);
        if (k < len || s->got + k == s->cap) {
            s->got += k;
            s->full = 1;
            return k < len ? 0 : size * n; /* cut the rest */
        }
    } else {
        if (s->grow_max && s->grow_len + len > s->grow_max) {
            s->too_big = 1;
            return 0;
        }
        s->grow = xrealloc(s->grow, s->grow_len + len + 1);
        memcpy(s->grow + s->grow_len, p, len);
        s->grow_len += len;
        s->grow[s->grow_len] = 0;
    }
    s->got += len;
    return size * n;
}

static int retriable_curl(CURLcode cc)
{
    switch (cc) {
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
    }
}

static uint64_t jitter_state;
static pid_t jitter_pid;
/* in [0.5, 1); seeded again in each process, so workers forked from one
 * parent do not retry in step */
static double jitter(void)
{
    if (jitter_pid != getpid()) {
        jitter_pid = getpid();
        jitter_state = ((uint64_t)jitter_pid << 32) ^ (uint64_t)time(NULL) ^ 0x9e3779b97f4a7c15ull;
    }
    jitter_state ^= jitter_state << 13;
    jitter_state ^= jitter_state >> 7;
    jitter_state ^= jitter_state << 17;
    return 0.5 + 0.5 * (double)(jitter_state >> 11) / 9007199254740992.0;
}

static const char *tries_word(int n) { return n == 1 ? "try" : "tries"; }

/* The S3 error code in an XML error body (<Code>NoSuchKey</Code>), or "". */
static void s3_code(const char *body, char *code, size_t len)
{
    const char *a = strstr(body, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
    size_t n = a && b ? (size_t)(b - a - 6) : 0;
    if (n >= len)
        n = len - 1;
    memcpy(code, a ? a + 6 : "", n);
    code[n] = 0;
}

enum { REQ_GET, REQ_HEAD };

/* One request with retries. Range: [off, off + len) when len > 0. Fills
 * *size for HEAD. 0, REMOTE_MISSING or -1. */
static int request(const char *url, const char *query, int method, uint64_t off, uint64_t len,
                   sink *s, uint64_t *size, const remote_opts *o, errbuf *e)
{
    CURL *h = get_handle(e);
    if (!h)
        return -1;
    target t;
    if (target_make(&t, url, query, o, e) < 0)
        return -1;
    double timeout = o && o->timeout_s > 0 ? o->timeout_s : 30;
    int retries = o && o->retries >= 0 ? o->retries : 5;
    double backoff = o && o->backoff_s > 0 ? o->backoff_s : 0.25;
    const char *ca = getenv("AWS_CA_BUNDLE");
    if (!ca || !*ca)
        ca = getenv("CURL_CA_BUNDLE");
    char range[64], cerr[CURL_ERROR_SIZE];
    int rc = -1;
    s->h = h;
    struct curl_slist *hdrs = NULL; /* the try's signed headers */
    for (int attempt = 0;; attempt++) {
        int tries = attempt + 1, again = 0;
        curl_slist_free_all(hdrs);
        hdrs = NULL;
        if (t.s3 && !(hdrs = s3_headers(&t, method == REQ_HEAD ? "HEAD" : "GET", e))) {
            rc = -1;
            break;
        }
        sink_restart(s);
        s->skip = 0;
        curl_easy_reset(h);
        cerr[0] = 0;
        curl_easy_setopt(h, CURLOPT_URL, t.url);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
        if (ca && *ca) /* a private store's certificate authority */
            curl_easy_setopt(h, CURLOPT_CAINFO, ca);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout * 1000));
        if (s->fd >= 0) { /* a whole object: no byte for `timeout` is a timeout */
            curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
            curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(timeout < 1 ? 1 : timeout + 0.5));
        } else
            curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
        if (hdrs)
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        if (method == REQ_HEAD)
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        if (len) {
            snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)off,
                     (unsigned long long)(off + len - 1));
            curl_easy_setopt(h, CURLOPT_RANGE, range);
        }
        double t0 = now_sec();
        CURLcode cc = curl_easy_perform(h);
        stats.seconds += now_sec() - t0;
        stats.requests++;
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        int http = !strncmp(t.url, "http", 4);
        if (cc == CURLE_WRITE_ERROR && s->full)
            cc = CURLE_OK; /* we cut it: the range is in */
        if (cc == CURLE_OK && http && code >= 400) {
            char scode[64];
            s3_code(s->err_body, scode, sizeof scode);
            again = code >= 500 || code == 429;
            if (!again || attempt >= retries) {
                rc = code == 404 ? REMOTE_MISSING : -1;
                errf(e, "%s: HTTP %ld%s%s%s%s%s after %d %s", url, code, *s->reason ? " " : "",
                     s->reason, *scode ? " (" : "", scode, *scode ? ")" : "", tries,
                     tries_word(tries));
                break;
            }
        } else if (cc == CURLE_OK) {
            if (len && http && code == 200 && off) { /* Range ignored: read again, skip */
                sink_restart(s);
                s->skip = off;
                curl_easy_setopt(h, CURLOPT_RANGE, NULL);
                cc = curl_easy_perform(h);
                stats.requests++;
                if (cc == CURLE_WRITE_ERROR && s->full)
                    cc = CURLE_OK;
                if (cc != CURLE_OK) {
                    errf(e, "%s: %s (reading past a server that ignored Range)", url,
                         *cerr ? cerr : curl_easy_strerror(cc));
                    break;
                }
            }
            if (size) {
                curl_off_t cl = -1;
                curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
                if (cl < 0) {
                    errf(e, "%s: the server gives no size (no Content-Length)", url);
                    break;
                }
                *size = (uint64_t)cl;
            }
            rc = 0;
            break;
        } else if (cc == CURLE_FILE_COULDNT_READ_FILE || cc == CURLE_REMOTE_FILE_NOT_FOUND) {
            rc = REMOTE_MISSING;
            errf(e, "%s: %s after %d %s", url, *cerr ? cerr : curl_easy_strerror(cc), tries,
                 tries_word(tries));
            break;
        } else if (cc == CURLE_WRITE_ERROR && s->write_errno) {
            errf(e, "%s: writing the download: %s", url, strerror(s->write_errno));
            break;
        } else {
            again = retriable_curl(cc);
            if (!again || attempt >= retries) {
                if (cc == CURLE_OPERATION_TIMEDOUT)
                    errf(e, "%s: timed out after %d %s (%g s each)", url, tries, tries_word(tries),
                         timeout);
                else
                    errf(e, "%s: %s after %d %s", url, *cerr ? cerr : curl_easy_strerror(cc), tries,
                         tries_word(tries));
                break;
            }
        }
        /* wait, then try again */
        double wait = backoff * (double)(1u << (attempt < 6 ? attempt : 6));
        if (wait > 8)
            wait = 8;
        wait *= jitter();
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        stats.retries++;
    }
    curl_slist_free_all(hdrs);
    curl_easy_reset(h); /* nothing of this call's (headers, sink) stays set */
    target_free(&t);
    return rc;
}

/* ---------------------------------------------------------------- the API */

int remote_head(const char *url, const remote_opts *o, uint64_t *size, char *etag, size_t etag_len,
                errbuf *e)
{
    sink s = {.fd = -1};
    int rc = request(url, NULL, REQ_HEAD, 0, 0, &s, size, o, e);
    if (etag && etag_len)
        snprintf(etag, etag_len, "%s", rc == 0 ? s.etag : "");
    free(s.grow);
    return rc;
}

int remote_get_range(const char *url, uint64_t off, size_t len, void *buf, size_t *got,
                     const remote_opts *o, errbuf *e)
{
    *got = 0;
    if (!len)
        return 0;
    sink s = {.fd = -1, .mem = buf, .cap = len};
    int rc = request(url, NULL, REQ_GET, off, len, &s, NULL, o, e);
    if (rc == 0)
        *got = (size_t)s.got;
    free(s.grow);
    return rc;
}

int remote_get_mem(const char *url, size_t max, char **buf, size_t *len, const remote_opts *o,
                   errbuf *e)
{
    *buf = NULL;
    *len = 0;
    sink s = {.fd = -1, .grow_max = max};
    int rc = request(url, NULL, REQ_GET, 0, 0, &s, NULL, o, e);
    if (s.too_big)
        rc = errf(e, "%s: larger than %zu bytes", url, max);
    if (rc == 0) {
        *buf = s.grow ? s.grow : xcalloc(1, 1);
        *len = s.grow_len;
        return 0;
    }
    free(s.grow);
    return rc;
}

static int fsync_dir_of(const char *path)
{
    char *copy = xstrdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = -1;
    free(copy);
    if (fd >= 0) {
        rc = fsync(fd);
        close(fd);
    }
    return rc;
}

int remote_get_file(const char *url, const char *dest, const remote_opts *o, uint64_t *bytes,
                    errbuf *e)
{
    char *part;
    if (asprintf(&part, "%s.part-%d", dest, (int)getpid()) < 0)
        abort();
    unlink(part); /* ours from an earlier failed call of this process */
    int fd = open(part, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = errf(e, "%s: cannot create %s: %s", url, part, strerror(errno));
        free(part);
        return rc;
    }
    sink s = {.fd = fd};
    int rc = request(url, NULL, REQ_GET, 0, 0, &s, NULL, o, e);
    if (rc == 0 && fsync(fd) < 0)
        rc = errf(e, "%s: fsync %s: %s", url, part, strerror(errno));
    if (close(fd) < 0 && rc == 0)
        rc = errf(e, "%s: close %s: %s", url, part, strerror(errno));
    if (rc == 0 && rename(part, dest) < 0)
        rc = errf(e, "%s: rename %s to %s: %s", url, part, dest, strerror(errno));
    if (rc == 0)
        fsync_dir_of(dest);
    else
        unlink(part);
    if (rc == 0 && bytes)
        *bytes = s.got;
    free(part);
    free(s.grow);
    return rc;
}

/* The text between <tag> and </tag> starting the search at *p, XML entities
 * decoded, malloc'd; *p moves past it. NULL when there is none. */
static char *xml_next(const char **p, const char *tag)
{
    char open_tag[64], close_tag[64];
    snprintf(open_tag, sizeof open_tag, "<%s>", tag);
    snprintf(close_tag, sizeof close_tag, "</%s>", tag);
    const char *a = strstr(*p, open_tag);
    if (!a)
        return NULL;
    a += strlen(open_tag);
    const char *b = strstr(a, close_tag);
    if (!b)
        return NULL;
    *p = b + strlen(close_tag);
    char *out = xmalloc((size_t)(b - a) + 1), *o = out;
    static const char *const ent[][2] = {
        {"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}};
    while (a < b) {
        size_t k = 0;
        for (; k < sizeof ent / sizeof ent[0]; k++)
            if (!strncmp(a, ent[k][0], strlen(ent[k][0])))
                break;
        if (k < sizeof ent / sizeof ent[0]) {
            *o++ = ent[k][1][0];
            a += strlen(ent[k][0]);
        } else
            *o++ = *a++;
    }
    *o = 0;
    return out;
}

static int cmp_url(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int remote_list(const char *s3_prefix, const remote_opts *o, char ***urls, size_t *n, errbuf *e)
{
    *urls = NULL;
    *n = 0;
    if (strncmp(s3_prefix, "s3://", 5))
        return errf(e, "%s: only s3:// prefixes can be listed", s3_prefix);
    const char *b = s3_prefix + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    char *bucket_url, *bucket;
    if (asprintf(&bucket_url, "s3://%.*s/", (int)blen, b) < 0 ||
        asprintf(&bucket, "s3://%.*s", (int)blen, b) < 0)
        abort();
    char *prefix = sigv4_uri_encode(slash ? slash + 1 : "", 0), *token = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0) {
        char *query, *tok = token ? sigv4_uri_encode(token, 0) : NULL;
        char page_size[32] = "";
        if (o && o->list_page > 0)
            snprintf(page_size, sizeof page_size, "&max-keys=%d", o->list_page);
        if (asprintf(&query, "list-type=2%s&prefix=%s%s%s", page_size, prefix,
                     tok ? "&continuation-token=" : "", tok ? tok : "") < 0)
            abort();
        free(tok);
        sink s = {.fd = -1};
        rc = request(bucket, query, REQ_GET, 0, 0, &s, NULL, o, e);
        free(query);
        free(token);
        token = NULL;
        if (rc != 0) {
            free(s.grow);
            if (rc == REMOTE_MISSING) /* no bucket */
                rc = -1;
            errbuf why = *e;
            errf(e, "listing %s: %s", s3_prefix, why.msg);
            break;
        }
        const char *p = s.grow ? s.grow : "";
        if (!strstr(p, "<ListBucketResult")) {
            free(s.grow);
            rc = errf(e, "%s: the listing is not a ListObjectsV2 result", s3_prefix);
            break;
        }
        for (char *key; (key = xml_next(&p, "Key"));) {
            if (*n == cap)
                *urls = xrealloc(*urls, (cap = cap ? 2 * cap : 64) * sizeof **urls);
            if (asprintf(&(*urls)[(*n)++], "%s%s", bucket_url, key) < 0)
                abort();
            free(key);
        }
        p = s.grow;
        char *trunc = xml_next(&p, "IsTruncated");
        int more = trunc && !strcmp(trunc, "true");
        free(trunc);
        p = s.grow;
        token = more ? xml_next(&p, "NextContinuationToken") : NULL;
        free(s.grow);
        if (more && !token)
            rc = errf(e, "%s: a truncated listing without a continuation token", s3_prefix);
        if (!more)
            break;
    }
    free(token);
    free(prefix);
    free(bucket_url);
    free(bucket);
    if (rc != 0) {
        remote_list_free(*urls, *n);
        *urls = NULL;
        *n = 0;
        return rc;
    }
    qsort(*urls, *n, sizeof **urls, cmp_url);
    return 0;
}

void remote_list_free(char **urls, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(urls[i]);
    free(urls);
}
