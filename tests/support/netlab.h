/* netlab.h — the network test rig (tools/netlab, docs/NETLAB.md) from the
 * tests: labs of slow storage, moto's S3 server, two "nodes". */
#ifndef TRAIN_TESTS_NETLAB_H
#define TRAIN_TESTS_NETLAB_H

#include <sys/types.h>

#include "tests/support/helpers.h"

/* what a test needs besides root and `ip netns` */
enum { NETLAB_HTTP = 1 /* nginx and curl */, NETLAB_S3 = 2 /* moto's venv and curl */ };

/* Why the rig cannot run here (NULL when it can). *installable is set to 1
 * when the reason is a package `make deps` installs (nginx, curl, the
 * venv), 0 when it is the machine (not root, no network namespaces). */
const char *netlab_missing(int needs, int *installable);

/* Skip the test when the rig cannot run, saying why; under CI (CI=true),
 * where `make deps` has run, a missing package fails it instead. */
#define NEED_NETLAB(needs)                                                                         \
    do {                                                                                           \
        int inst_;                                                                                 \
        const char *why_ = netlab_missing((needs), &inst_);                                        \
        if (why_ && inst_ && netlab_in_ci())                                                       \
            cr_assert_fail("%s: under CI, make deps installs it", why_);                           \
        if (why_)                                                                                  \
            cr_skip_test("%s", why_);                                                              \
    } while (0)
int netlab_in_ci(void);

/* A name for a lab or node unique to this test process: PREFIX-PID. */
void netlab_name(char *out, size_t len, const char *prefix);

/* tools/netlab with the arguments (NULL-terminated), at most 60 s. */
int netlab_run(run_result *r, const char *first, ...);

/* netlab up NAME --serve DIR --rate RATE --delay-ms MS --owner <this
 * process> (so it goes down when the test ends, however it ends); fails
 * the test unless it comes up. Returns the base URL (malloc'd). */
char *netlab_up(const char *name, const char *serve, const char *rate, int delay_ms);
/* netlab down NAME; fails the test unless it succeeds */
void netlab_down(const char *name);

/* The pid in the state file $NETLAB_STATE/DIR/FILE, or -1. */
pid_t netlab_state_pid(const char *dir, const char *file);
/* The whole state file $NETLAB_STATE/DIR/FILE (malloc'd), or NULL. */
char *netlab_state_text(const char *dir, const char *file);
/* The state folder DIR exists. */
int netlab_state_exists(const char *dir);

/* The network namespace exists (/run/netns/NAME). */
int netns_exists(const char *name);
/* The processes in namespace NAME (ip netns pids), up to max; how many. */
int netns_pids(const char *name, pid_t *out, int max);

/* curl with the arguments (NULL-terminated), at most 60 s. */
int curl_run(run_result *r, const char *first, ...);

#endif
