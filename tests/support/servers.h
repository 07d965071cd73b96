/* servers.h — real servers on loopback for the tests of remote reads:
 * nginx (byte ranges, ETags, TLS), a small fault-injecting HTTP server
 * (5xx, cuts mid-body, silence, Range ignored), a port nothing listens on,
 * and moto's S3 server (signature checks). Each is a child process the
 * caller kills (spawn_kill_all for nginx and moto, kill + waitpid for the
 * fault server); all die with the test (PR_SET_PDEATHSIG). */
#ifndef TRAIN_TESTS_SERVERS_H
#define TRAIN_TESTS_SERVERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct fault {
    int fail_first; /* the first k requests answer `fail_status` */
    int fail_status;
    int cut_first; /* the first k requests send only cut_bytes of the body, then close */
    size_t cut_bytes;
    int hang;     /* accept, read, never answer */
    int no_range; /* answer 200 with the whole body to a Range request */
    int only_tar; /* a path not ending in ".tar" is 404 (no index beside the shard) */
    const char *body;
    size_t len;
} fault;

/* The fault server, forked into *server, answering every request with f's
 * body (any path) and counting requests in *seen (shared memory): its
 * port. */
int server_fault_start(_Atomic int *seen, pid_t *server, const fault *f);

/* Read a request's head (up to the blank line, or cap - 1 bytes) from
 * socket c into buf, NUL-terminated: its length, 0 when the peer closed
 * first. */
size_t server_read_head(int c, char *buf, size_t cap);

/* A loopback port nothing listens on (bound, then closed). */
int server_dead_port(void);

/* nginx serving www on loopback (TLS when cert and key are given; its
 * config and logs in dir, extra directives of its server block in extra,
 * e.g. "limit_rate 20k;", or NULL): its port, once it answers a HEAD of
 * url_path. */
int server_nginx_start(const char *dir, const char *www, const char *cert, const char *key,
                       const char *url_path, const char *extra);

/* dir/nginx.conf for an nginx in the foreground serving www on `listen`
 * (an nginx listen directive's value), its pid, logs (access.log) and
 * temporary files in dir, `extra` directives in its server block (or
 * NULL): the file's path, malloc'd. */
char *server_nginx_conf(const char *dir, const char *www, const char *listen, const char *extra);

/* GET requests in an nginx access log for paths ending in `suffix` (0
 * when there is no log). */
int server_nginx_gets(const char *log, const char *suffix);

/* PUT body at url, unsigned (moto takes that unless told to check): the
 * HTTP status, 0 when there was none. */
long server_http_put(const char *url, const void *body, size_t len);

/* The python with moto: the rig's pinned venv (build/netlab/venv, make
 * deps), else python3 on PATH; in buf. */
const char *server_moto_python(char *buf, size_t len);

/* moto's S3 server on loopback with bucket "bkt" (its log in dir): its
 * endpoint (malloc'd), or NULL when that python has no moto. */
char *server_moto_start(const char *dir);

/* moto's S3 server checking signatures, with bucket "bkt" holding every
 * file of the folder `upload` as PREFIX+NAME, and a user allowed
 * everything: its endpoint in ep, the user's key in id and secret, and
 * in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). NULL,
 * or why it cannot run (no moto or boto3: the caller skips). */
const char *server_moto_signed(const char *dir, const char *upload, const char *prefix, char *ep,
                               size_t eplen, char *id, size_t idlen, char *secret, size_t slen);

#endif
