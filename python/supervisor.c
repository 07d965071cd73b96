/* supervisor.c — trainloader-supervisor: the loader's supervisor for the
 * Python module (python/trainloader.c), started by posix_spawn with the
 * module's shared memory on fd 3 and its command socket on fd 4, and the
 * same command line the module parsed. It sets up the same data and
 * transforms (app/feed.c) and serves the loader: forks the workers from
 * this single-threaded process, reaps them, replaces them (--respawn), and
 * exits when the module's loader is closed or the Python process dies. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "app/feed.h"

int main(int argc, char **argv)
{
    options o;
    errbuf e = {{0}};
    if (options_parse_to(&o, argc, argv, &e) != 0) {
        fprintf(stderr, "trainloader-supervisor: %s\n", e.msg);
        options_free(&o);
        return RUN_BAD_INPUT;
    }
    feed *f = xcalloc(1, sizeof *f);
    /* the passes (and their rank's share) are posted by the module */
    int rc = feed_open(f, &o, FEED_SERVE, 0, 1, &e);
    if (rc == RUN_OK)
        rc = feed_serve(f, &e); /* returns only on failure */
    fprintf(stderr, "trainloader-supervisor: %s\n", e.msg);
    feed_close(f);
    free(f);
    options_free(&o);
    return rc;
}
