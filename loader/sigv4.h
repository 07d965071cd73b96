/* sigv4.h — AWS Signature Version 4 for S3 requests (HMAC-SHA256 from
 * OpenSSL's libcrypto), written here rather than taken from libcurl's
 * CURLOPT_AWS_SIGV4 so that each step (canonical request, string to sign,
 * signature) can be tested against AWS's published examples; and the
 * credentials and region from the environment or ~/.aws/credentials.
 * Nothing here does I/O on the network; loader/remote.c sends what it
 * signs. */
#ifndef TRAIN_SIGV4_H
#define TRAIN_SIGV4_H

#include <stddef.h>

#include "common/util.h"

typedef struct sigv4_creds {
    char *access_key, *secret_key, *session_token; /* token NULL when none */
} sigv4_creds;

/* AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN) from the
 * environment, else the profile AWS_PROFILE (default "default") of
 * AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials): 0, or -1 with
 * e saying where it looked. */
int sigv4_creds_load(sigv4_creds *c, errbuf *e);
void sigv4_creds_free(sigv4_creds *c);

/* AWS_REGION, else AWS_DEFAULT_REGION, else "us-east-1" (not malloc'd). */
const char *sigv4_region(void);

/* One request to sign. `path` is the URI path as sent (already
 * URI-encoded: S3 signs it as is, without a second encoding); `query` the
 * query string as sent (pairs k=v joined by '&'; NULL or "" for none),
 * each name and value decoded and encoded again by SigV4's rule, then
 * sorted (a '/' sent as is or as %2F signs as %2F); `headers` "Name:value" strings, every header
 * to sign, host and x-amz-date included (names are lowercased, values
 * trimmed and inner runs of spaces folded); `payload_sha256` the hex
 * SHA-256 of the body (or "UNSIGNED-PAYLOAD"); `amz_date` the request's
 * time as YYYYMMDDTHHMMSSZ, which is the x-amz-date header's value. */
typedef struct sigv4_req {
    const char *method, *path, *query;
    const char *const *headers;
    size_t nheaders;
    const char *payload_sha256;
    const char *amz_date, *region, *service;
} sigv4_req;

/* The signed request's pieces, each malloc'd (sigv4_out_free). */
typedef struct sigv4_out {
    char *canonical_request, *string_to_sign, *signature, *signed_headers;
    char *authorization; /* the Authorization header's value */
} sigv4_out;

/* Sign r with c: 0, or -1 with e (a malformed header or date). */
int sigv4_sign(const sigv4_req *r, const sigv4_creds *c, sigv4_out *out, errbuf *e);
void sigv4_out_free(sigv4_out *out);

/* Hex SHA-256 of n bytes into hex[65]. */
void sigv4_sha256_hex(const void *data, size_t n, char hex[65]);
/* s URI-encoded as SigV4 wants it: unreserved characters (A-Z a-z 0-9 - _
 * . ~) kept, '/' kept when keep_slash, every other byte %XX (upper case).
 * malloc'd. */
char *sigv4_uri_encode(const char *s, int keep_slash);
/* The time t (seconds since the epoch) as YYYYMMDDTHHMMSSZ into d[17]. */
void sigv4_amz_date(long long t, char d[17]);

#endif
