/* sweep.c — see sweep.h.
 *
 * Configurations are the cartesian product of --mode, --pin,
 * --non-blocking, --batch, --prefetch and --workers, with --workers varying
 * fastest, each list in the order given. A child gets the original command
 * line without the swept options, one value of each, and --sweep-child
 * --summary-out FILE; it prints its own epoch lines and leaves its summary
 * record in FILE for the closing table.
 */
#define _GNU_SOURCE
#include "app/sweep.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/reexec.h"
#include "app/report.h"
#include "app/run.h"

static char *int_arg(const char *name, int v)
{
    char *s;
    if (asprintf(&s, "--%s=%d", name, v) < 0)
        abort();
    return s;
}

int sweep_run(const options *o)
{
    reexec_install_signals();
    if (o->json) { /* children append; start the file afresh */
        FILE *f = fopen(o->json, "w");
        if (!f) {
            fprintf(stderr, "train: %s: cannot open for writing: %s\n", o->json, strerror(errno));
            return 2;
        }
        fclose(f);
    }
    int total = o->mode.n * o->pin.n * o->non_blocking.n * o->batch.n * o->prefetch.n * o->workers.n;
    summary_rec *sums = xcalloc((size_t)total, sizeof *sums);
    char *strs = xmalloc((size_t)total * 256);
    int k = 0, rc = 0;
    for (int im = 0; im < o->mode.n; im++)
        for (int ip = 0; ip < o->pin.n; ip++)
            for (int in = 0; in < o->non_blocking.n; in++)
                for (int ib = 0; ib < o->batch.n; ib++)
                    for (int ipf = 0; ipf < o->prefetch.n; ipf++)
                        for (int iw = 0; iw < o->workers.n; iw++) {
                            if (rc == 2 || reexec_signal_received())
                                continue;
                            run_choice c = {o->workers.v[iw], o->prefetch.v[ipf], o->batch.v[ib],
                                            o->mode.v[im], o->pin.v[ip], o->non_blocking.v[in]};
                            char bs[16];
                            snprintf(bs, sizeof bs, "%d", c.batch);
                            printf("\n== configuration %d/%d: mode %s, workers %d, prefetch %d, "
                                   "batch %s, pin %s, non-blocking %s\n",
                                   k + 1, total, c.mode ? "preload" : "lazy", c.workers,
                                   c.prefetch, c.batch ? bs : "default", c.pin ? "on" : "off",
                                   c.non_blocking ? "on" : "off");
                            fflush(stdout);
                            char *w = int_arg("workers", c.workers), *pf = int_arg("prefetch", c.prefetch),
                                 *bt = int_arg("batch", c.batch);
                            char *extra[] = {w, pf, c.mode ? "--mode=preload" : "--mode=lazy",
                                             c.pin ? "--pin=on" : "--pin=off",
                                             c.non_blocking ? "--non-blocking=on" : "--non-blocking=off",
                                             c.batch ? bt : NULL, NULL};
                            int status = 1;
                            int got = reexec_run(o, extra, 0, &sums[k], strs + k * 256, 256, &status);
                            free(w);
                            free(pf);
                            free(bt);
                            if (got != 0) {
                                memset(&sums[k], 0, sizeof sums[k]);
                                sums[k].cfg.device = "?";
                                sums[k].cfg.mode = c.mode ? "preload" : "lazy";
                                sums[k].cfg.workers = c.workers;
                                sums[k].cfg.prefetch = c.prefetch;
                                sums[k].cfg.batch = c.batch;
                                sums[k].cfg.pin = c.pin;
                                sums[k].cfg.non_blocking = c.non_blocking;
                            }
                            sums[k].status = status;
                            if (status != 0 && rc == 0)
                                rc = status;
                            k++;
                        }
    report_sweep_table(stdout, sums, k);
    if (reexec_signal_received())
        rc = 128 + reexec_signal_received();
    free(sums);
    free(strs);
    return rc;
}
