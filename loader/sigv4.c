/* sigv4.c — AWS Signature Version 4 (see sigv4.h). The steps follow AWS's
 * "Create a signed AWS API request" page: canonical request, string to
 * sign, signing key derived from the secret by four HMACs (date, region,
 * service, "aws4_request"), signature. */
#define _GNU_SOURCE
#include "loader/sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void hexify(const unsigned char *b, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[b[i] >> 4];
        hex[2 * i + 1] = digits[b[i] & 15];
    }
    hex[2 * n] = 0;
}

void sigv4_sha256_hex(const void *data, size_t n, char hex[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    hexify(md, 32, hex);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

char *sigv4_uri_encode(const char *s, int keep_slash)
{
    size_t n = strlen(s);
    char *out = xmalloc(3 * n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
            (keep_slash && *p == '/'))
            *o++ = (char)*p;
        else
            o += sprintf(o, "%%%02X", *p);
    }
    *o = 0;
    return out;
}

void sigv4_amz_date(long long t, char d[17])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(d, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* n bytes of s with %XX sequences decoded, malloc'd */
static char *uri_decode(const char *s, size_t n)
{
    char *out = xmalloc(n + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2]) && sscanf(s + i + 1, "%2x", &v) == 1) {
            *o++ = (char)v;
            i += 2;
        } else
            *o++ = s[i];
    }
    *o = 0;
    return out;
}

/* a query's pair as SigV4 canonicalises it: name and value decoded, then
 * encoded again by its rule (so "/" in a value, sent as is or as %2F,
 * signs as %2F either way), joined by '=' */
static char *canonical_pair(const char *pair)
{
    size_t nl = strcspn(pair, "=");
    const char *v = pair[nl] ? pair + nl + 1 : "";
    char *dn = uri_decode(pair, nl), *dv = uri_decode(v, strlen(v));
    char *en = sigv4_uri_encode(dn, 0), *ev = sigv4_uri_encode(dv, 0), *out;
    if (asprintf(&out, "%s=%s", en, ev) < 0)
        abort();
    free(dn);
    free(dv);
    free(en);
    free(ev);
    return out;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "Name: a  b " -> "name:a b" (malloc'd), or NULL without a ':'. */
static char *canonical_header(const char *h)
{
    const char *colon = strchr(h, ':');
    if (!colon || colon == h)
        return NULL;
    char *out = xmalloc(strlen(h) + 1), *o = out;
    for (const char *p = h; p < colon; p++)
        *o++ = (char)tolower((unsigned char)*p);
    *o++ = ':';
    const char *v = colon + 1, *end = v + strlen(v);
    while (*v == ' ' || *v == '\t')
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    for (int space = 0; v < end; v++) {
        if (*v == ' ' || *v == '\t') {
            space = 1;
            continue;
        }
        if (space)
            *o++ = ' ';
        space = 0;
        *o++ = *v;
    }
    *o = 0;
    return out;
}

int sigv4_sign(const sigv4_req *r, const sigv4_creds *c, sigv4_out *out, errbuf *e)
{
    memset(out, 0, sizeof *out);
    if (strlen(r->amz_date) != 16 || r->amz_date[8] != 'T' || r->amz_date[15] != 'Z')
        return errf(e, "sigv4: date '%s' is not YYYYMMDDTHHMMSSZ", r->amz_date);

    /* headers: lowercased, trimmed, sorted by name */
    char **hs = xcalloc(r->nheaders ? r->nheaders : 1, sizeof *hs);
    for (size_t i = 0; i < r->nheaders; i++)
        if (!(hs[i] = canonical_header(r->headers[i]))) {
            for (size_t j = 0; j < i; j++)
                free(hs[j]);
            free(hs);
            return errf(e, "sigv4: header '%s' has no name", r->headers[i]);
        }
    qsort(hs, r->nheaders, sizeof *hs, cmp_str);

    /* query: pairs sorted (by name, then value: the byte order of "k=v"
     * differs only when one name is a prefix of another, so compare the
     * names first) */
    char *q = xstrdup(r->query ? r->query : "");
    size_t nq = 0;
    char **qs = xcalloc(strlen(q) / 2 + 2, sizeof *qs);
    for (char *save = NULL, *t = strtok_r(q, "&", &save); t; t = strtok_r(NULL, "&", &save))
        qs[nq++] = canonical_pair(t);
    for (size_t i = 1; i < nq; i++) /* insertion sort on (name, value) */
        for (size_t j = i; j > 0; j--) {
            const char *a = qs[j - 1], *b = qs[j];
            size_t la = strcspn(a, "="), lb = strcspn(b, "=");
            int d = memcmp(a, b, la < lb ? la : lb);
            if (!d)
                d = la == lb ? strcmp(a + la, b + lb) : (la < lb ? -1 : 1);
            if (d <= 0)
                break;
            qs[j - 1] = (char *)b;
            qs[j] = (char *)a;
        }

    char *creq = NULL, *signed_h = NULL;
    size_t creq_len = 0, sh_len = 0;
    FILE *f = open_memstream(&creq, &creq_len), *sh = open_memstream(&signed_h, &sh_len);
    fprintf(f, "%s\n%s\n", r->method, r->path && *r->path ? r->path : "/");
    for (size_t i = 0; i < nq; i++) {
        fprintf(f, "%s%s", i ? "&" : "", qs[i]);
        free(qs[i]);
    }
    fprintf(f, "\n");
    for (size_t i = 0; i < r->nheaders; i++) {
        fprintf(f, "%s\n", hs[i]);
        fprintf(sh, "%s%.*s", i ? ";" : "", (int)strcspn(hs[i], ":"), hs[i]);
        free(hs[i]);
    }
    fclose(sh);
    fprintf(f, "\n%s\n%s", signed_h, r->payload_sha256);
    fclose(f);
    free(hs);
    free(qs);
    free(q);

    char day[9], scope[256], creq_hash[65];
    memcpy(day, r->amz_date, 8);
    day[8] = 0;
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", day, r->region, r->service);
    sigv4_sha256_hex(creq, creq_len, creq_hash);
    char *sts = NULL;
    if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, creq_hash) < 0)
        abort();

    /* the signing key: HMAC chain from "AWS4" + secret */
    size_t klen = strlen(c->secret_key) + 4;
    char *k0 = xmalloc(klen + 1);
    snprintf(k0, klen + 1, "AWS4%s", c->secret_key);
    unsigned char k[32], sig[32];
    hmac(k0, klen, day, k);
    free(k0);
    hmac(k, 32, r->region, k);
    hmac(k, 32, r->service, k);
    hmac(k, 32, "aws4_request", k);
    hmac(k, 32, sts, sig);
    out->signature = xmalloc(65);
    hexify(sig, 32, out->signature);
    out->canonical_request = creq;
    out->string_to_sign = sts;
    out->signed_headers = signed_h;
    if (asprintf(&out->authorization,
                 "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", c->access_key,
                 scope, signed_h, out->signature) < 0)
        abort();
    return 0;
}

void sigv4_out_free(sigv4_out *out)
{
    free(out->canonical_request);
    free(out->string_to_sign);
    free(out->signature);
    free(out->signed_headers);
    free(out->authorization);
    memset(out, 0, sizeof *out);
}

const char *sigv4_region(void)
{
    const char *r = getenv("AWS_REGION");
    if (!r || !*r)
        r = getenv("AWS_DEFAULT_REGION");
    return r && *r ? r : "us-east-1";
}

static char *trimmed(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = 0;
    return s;
}

/* The profile's keys from an INI-style credentials file: 0 found, 1 no
 * such file or profile, -1 a read error. */
static int creds_from_file(sigv4_creds *c, const char *path, const char *profile)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 1 : -1;
    char line[1024];
    int in = 0;
    while (fgets(line, sizeof line, f)) {
        char *s = trimmed(line);
        if (*s == '[') {
            char *end = strchr(s, ']');
            if (end)
                *end = 0;
            in = !strcmp(trimmed(s + 1), profile);
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || !eq || *s == '#' || *s == ';')
            continue;
        *eq = 0;
        char *k = trimmed(s), *v = trimmed(eq + 1);
        char **dst = !strcmp(k, "aws_access_key_id")       ? &c->access_key
                     : !strcmp(k, "aws_secret_access_key") ? &c->secret_key
                     : !strcmp(k, "aws_session_token")     ? &c->session_token
                                                           : NULL;
        if (dst) {
            free(*dst);
            *dst = xstrdup(v);
        }
    }
    fclose(f);
    return c->access_key && c->secret_key ? 0 : 1;
}

int sigv4_creds_load(sigv4_creds *c, errbuf *e)
{
    memset(c, 0, sizeof *c);
    const char *id = getenv("AWS_ACCESS_KEY_ID"), *secret = getenv("AWS_SECRET_ACCESS_KEY");
    if (id && *id && secret && *secret) {
        const char *token = getenv("AWS_SESSION_TOKEN");
        c->access_key = xstrdup(id);
        c->secret_key = xstrdup(secret);
        c->session_token = token && *token ? xstrdup(token) : NULL;
        return 0;
    }
    const char *profile = getenv("AWS_PROFILE");
    if (!profile || !*profile)
        profile = "default";
    const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
    char path[4096];
    if (file && *file)
        snprintf(path, sizeof path, "%s", file);
    else
        snprintf(path, sizeof path, "%s/.aws/credentials", home ? home : "");
    int rc = creds_from_file(c, path, profile);
    if (rc == 0)
        return 0;
    sigv4_creds_free(c);
    return errf(e,
                "no S3 credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set, "
                "and %s %s '%s'",
                path, rc < 0 ? "cannot be read for the profile" : "has no keys for the profile",
                profile);
}

void sigv4_creds_free(sigv4_creds *c)
{
    free(c->access_key);
    free(c->secret_key);
    free(c->session_token);
    memset(c, 0, sizeof *c);
}
