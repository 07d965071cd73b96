/* sweep.c — see sweep.h.
 *
 * Configurations are the cartesian product of --mode, --pin,
 * --non-blocking, --batch, --prefetch and --workers, with --workers varying
 * fastest, each list in the order given. A child gets the original command
 * line without the swept options, one value of each, and --sweep-child
 * --summary-out FILE (an unnamed file it inherits, see reexec.h); it prints
 * its own epoch lines and leaves its summary record in FILE for the closing
 * table.
 */
#define _GNU_SOURCE
#include "app/sweep.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/reexec.h"
#include "app/report.h"
#include "app/run.h"
#include "common/util.h"

static char *int_arg(const char *name, int v)
{
    char *s;
    if (asprintf(&s, "--%s=%d", name, v) < 0)
        abort();
    return s;
}

/* Configuration k of the sweep: k read as an odometer over the lists,
 * --workers the fastest wheel, then --prefetch, --batch, --non-blocking,
 * --pin and --mode. */
static run_choice sweep_choice(const options *o, int k)
{
    const int_list *wheel[] = {&o->workers,      &o->prefetch, &o->batch,
                               &o->non_blocking, &o->pin,      &o->mode};
    int v[6];
    for (int i = 0; i < 6; i++) {
        v[i] = wheel[i]->v[k % wheel[i]->n];
        k /= wheel[i]->n;
    }
    return (run_choice){.workers = v[0],
                        .prefetch = v[1],
                        .batch = v[2],
                        .non_blocking = v[3],
                        .pin = v[4],
                        .mode = v[5]};
}

/* Runs configuration c as a child; its summary record (or, when it left
 * none, one naming c) in *s, its strings in strbuf. Returns its status. */

int sweep_note_said(const options *o, const char *note)
{
    const char *said = o->sweep_child ? getenv(SWEEP_SAID_ENV) : NULL;
    size_t n = strlen(note);
    for (const char *p = said; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, note, n) && (p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

/* Runs configuration c as a child; its summary record (or, when it left
 * none, one naming c) in *s, its strings in strbuf. Returns its status. */
static int sweep_one(const options *o, const run_choice *c, int k, int total, summary_rec *s,
                     char *strbuf, size_t len)
{
    char bs[16];
    snprintf(bs, sizeof bs, "%d", c->batch);
    char *tr = o->trace ? options_trace_name(o->trace, k + 1) : NULL, *tra = NULL;
    if (tr && asprintf(&tra, "--trace=%s", tr) < 0)
        abort();
    printf("\n== configuration %d/%d: mode %s, workers %d, prefetch %d, batch %s, pin %s, "
           "non-blocking %s%s%s\n",
           k + 1, total, mode_name(c->mode), c->workers, c->prefetch, c->batch ? bs : "default",
           c->pin ? "on" : "off", c->non_blocking ? "on" : "off", tr ? "; trace " : "",
           tr ? tr : "");
    fflush(stdout);
    char *w = int_arg("workers", c->workers), *pf = int_arg("prefetch", c->prefetch),
         *bt = int_arg("batch", c->batch), *md = NULL;
    if (asprintf(&md, "--mode=%s", mode_name(c->mode)) < 0)
        abort();
    char *extra[] = {w,
                     pf,
                     md,
                     c->pin ? "--pin=on" : "--pin=off",
                     c->non_blocking ? "--non-blocking=on" : "--non-blocking=off",
                     tra ? tra : (c->batch ? bt : NULL),
                     tra && c->batch ? bt : NULL,
                     NULL};
    int status = 1;
    if (reexec_run(o, extra, 0, s, strbuf, len, &status) != 0) {
        memset(s, 0, sizeof *s);
        s->cfg = run_config_of(c, c->batch, "?", NULL);
    }
    s->status = status;
    s->asked_pin = c->pin;
    s->asked_nb = c->non_blocking;
    free(w);
    free(pf);
    free(bt);
    free(md);
    free(tr);
    free(tra);
    return status;
}

/* The sweep's command line as a JSON array, for its configurations' run
 * records */
static char *argv_json(const options *o)
{
    size_t cap = 16;
    for (int i = 0; i < o->argc; i++)
        cap += 6 * strlen(o->argv[i]) + 3;
    char *s = xmalloc(cap), *p = s;
    *p++ = '[';
    for (int i = 0; i < o->argc; i++) {
        p += sprintf(p, "%s\"", i ? "," : "");
        for (const unsigned char *c = (const unsigned char *)o->argv[i]; *c; c++) {
            if (*c == '"' || *c == '\\')
                p += sprintf(p, "\\%c", *c);
            else if (*c < 0x20)
                p += sprintf(p, "\\u%04x", *c);
            else
                *p++ = (char)*c;
        }
        *p++ = '"';
    }
    *p++ = ']';
    *p = '\0';
    return s;
}

/* A note configuration s printed, added to what later ones leave out */
static void note_said(const summary_rec *s, char **said)
{
    if (!s->note || !s->note[0] || strchr(s->note, '\n'))
        return;
    size_t have = *said ? strlen(*said) : 0, n = strlen(s->note);
    for (const char *p = *said; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, s->note, n) && (p[n] == '\n' || p[n] == '\0'))
            return;
    *said = xrealloc(*said, have + n + 2);
    snprintf(*said + have, n + 2, "%s%s", have ? "\n" : "", s->note);
    setenv(SWEEP_SAID_ENV, *said, 1);
}

int sweep_run(const options *o)
{
    reexec_install_signals();
    if (o->json) { /* children append; start the file afresh */
        errbuf je;
        int fd = open_regular(o->json, O_WRONLY | O_CREAT | O_TRUNC, 0666, &je);
        if (fd < 0) {
            fprintf(stderr, "train: --json: %s\n", je.msg);
            return 2;
        }
        close(fd);
    }
    int total = options_sweep_size(o);
    summary_rec *sums = xcalloc((size_t)total, sizeof *sums);
    char *strs = xmalloc((size_t)total * 512);
    char *user = argv_json(o), *said = NULL;
    setenv(SWEEP_ARGV_ENV, user, 1);
    unsetenv(SWEEP_SAID_ENV);
    int k = 0, rc = 0;
    for (; k < total && rc != 2 && !reexec_signal_received(); k++) {
        run_choice c = sweep_choice(o, k);
        int status = sweep_one(o, &c, k, total, &sums[k], strs + k * 512, 512);
        note_said(&sums[k], &said);
        if (status != 0 && rc == 0)
            rc = status;
    }
    unsetenv(SWEEP_ARGV_ENV);
    unsetenv(SWEEP_SAID_ENV);
    free(user);
    free(said);
    report_sweep_table(stdout, sums, k);
    if (reexec_signal_received())
        rc = 128 + reexec_signal_received();
    free(sums);
    free(strs);
    return rc;
}
