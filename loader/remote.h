/* remote.h — objects behind URLs, through libcurl: a whole object to a
 * local file (atomically), a byte range into memory, the size (HEAD), and
 * the keys under an s3:// prefix (ListObjectsV2). URLs: http://, https://,
 * file:// and s3://bucket/key (signed with loader/sigv4.c; the endpoint is
 * AWS_ENDPOINT_URL or remote_opts.s3_endpoint, path-style, else
 * https://BUCKET.s3.REGION.amazonaws.com). Failures that may pass
 * (timeouts, refused or cut connections, HTTP 5xx and 429) are retried
 * with exponential backoff and jitter; others (4xx, a certificate that
 * does not verify) are not. https:// checks the server's certificate
 * against the system's authorities, or against the file AWS_CA_BUNDLE
 * (else CURL_CA_BUNDLE) names: a private store's own authority. Errors
 * name the URL, the HTTP status or curl's error, and the tries:
 *   s3://bkt/train-000003.tar: HTTP 404 Not Found after 1 try
 *   http://h/x.tar: timed out after 6 tries (30 s each)
 * One process at a time: no threads; a forked child gets its own
 * connection (the parent's is left alone). */
#ifndef TRAIN_REMOTE_H
#define TRAIN_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

typedef struct remote_opts {
    double timeout_s;        /* per try: connect, and no byte for this long; a whole
                         HEAD, ranged GET or listing page (0: 30 s) */
    int retries;             /* tries after the first (-1: the default, 5) */
    double backoff_s;        /* the first retry's wait, doubled each time, up to
                         8 s, with jitter (0: 0.25 s) */
    const char *s3_endpoint; /* overrides AWS_ENDPOINT_URL (NULL: none) */
    int list_page;           /* keys per listing page (0: the server's, 1000) */
} remote_opts;

/* The counters of this process since it started (or remote_stats_reset). */
typedef struct remote_stats {
    uint64_t bytes;    /* body bytes received */
    uint64_t requests; /* tries, each counted */
    uint64_t retries;  /* tries after a failed one */
    double seconds;    /* wall time inside requests */
} remote_stats;
remote_stats remote_stats_get(void);
void remote_stats_reset(void);

/* 1 for a URL this module reads (a scheme above), else 0. */
int remote_is_url(const char *s);

/* Results besides 0 and -1: the object does not exist (HTTP 404, a
 * missing file:// file, S3's NoSuchKey); e says which. */
#define REMOTE_MISSING 1

/* The object's size, and its ETag when the server gives one (etag[0] = 0
 * when not; quotes kept). */
int remote_head(const char *url, const remote_opts *o, uint64_t *size, char *etag, size_t etag_len,
                errbuf *e);

/* The whole object into dest: written to dest.part-PID, fsync'd, renamed
 * over dest, the folder fsync'd; nothing is left at dest.part-PID on
 * failure. *bytes (may be NULL) gets its size. */
int remote_get_file(const char *url, const char *dest, const remote_opts *o, uint64_t *bytes,
                    errbuf *e);

/* Bytes [off, off + len) into buf; *got gets how many there were (fewer
 * than len only at the object's end). A server that ignores the Range
 * header is read from the start and cut. */
int remote_get_range(const char *url, uint64_t off, size_t len, void *buf, size_t *got,
                     const remote_opts *o, errbuf *e);

/* A small whole object (an index, a class list) into memory: *buf is
 * malloc'd and NUL-terminated after its *len bytes; one larger than max
 * bytes is an error. */
int remote_get_mem(const char *url, size_t max, char **buf, size_t *len, const remote_opts *o,
                   errbuf *e);

/* The keys under s3://bucket/prefix, as full s3:// URLs, sorted; every
 * page of ListObjectsV2 (continuation tokens). *urls is malloc'd, each
 * string too (remote_list_free). */
int remote_list(const char *s3_prefix, const remote_opts *o, char ***urls, size_t *n, errbuf *e);
void remote_list_free(char **urls, size_t n);

/* Frees this process's connection (tests; the loader's processes exit). */
void remote_cleanup(void);

#endif
