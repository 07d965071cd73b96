/* trace.c — see trace.h. Events are kept in memory (a few per batch) and
 * written at the end, timestamps in microseconds from the first event. */
#define _POSIX_C_SOURCE 200809L
#include "app/trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct span {
    int pid, tid;
    const char *name; /* a string literal */
    double t0, dur;
    long batch;
} span;

typedef struct track {
    int pid, tid;
    char name[32];
} track;

typedef struct proc {
    int pid;
    char name[32];
} proc;

struct trace {
    FILE *f;
    char *path;
    span *spans;
    size_t n, cap;
    track tracks[64];
    int ntracks;
    proc procs[64];
    int nprocs;
};

trace *trace_open(const char *path, errbuf *e)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        errf(e, "--trace %s: cannot open for writing: %s", path, strerror(errno));
        return NULL;
    }
    trace *t = xcalloc(1, sizeof *t);
    t->f = f;
    t->path = xstrdup(path);
    return t;
}

static int track_id(trace *t, int pid, const char *name)
{
    for (int i = 0; i < t->ntracks; i++)
        if (t->tracks[i].pid == pid && !strcmp(t->tracks[i].name, name))
            return t->tracks[i].tid;
    if (t->ntracks == (int)(sizeof t->tracks / sizeof *t->tracks))
        return 0; /* out of tracks: the rest share one */
    track *k = &t->tracks[t->ntracks++];
    k->pid = pid;
    k->tid = t->ntracks;
    snprintf(k->name, sizeof k->name, "%s", name);
    return k->tid;
}

void trace_name_process(trace *t, int pid, const char *name)
{
    if (!t)
        return;
    for (int i = 0; i < t->nprocs; i++)
        if (t->procs[i].pid == pid)
            return;
    if (t->nprocs == (int)(sizeof t->procs / sizeof *t->procs))
        return;
    proc *p = &t->procs[t->nprocs++];
    p->pid = pid;
    snprintf(p->name, sizeof p->name, "%s", name);
}

void trace_span(trace *t, int pid, const char *track_name, const char *name, double t0, double dur,
                long batch)
{
    if (!t)
        return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->spans = xrealloc(t->spans, t->cap * sizeof *t->spans);
    }
    t->spans[t->n++] =
        (span){pid, track_id(t, pid, track_name), name, t0, dur < 0 ? 0 : dur, batch};
}

int trace_close(trace *t, errbuf *e)
{
    if (!t)
        return 0;
    double base = 0;
    for (size_t i = 0; i < t->n; i++)
        if (i == 0 || t->spans[i].t0 < base)
            base = t->spans[i].t0;
    FILE *f = t->f;
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    int first = 1;
    for (int i = 0; i < t->nprocs; i++, first = 0)
        fprintf(f,
                "%s{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
                "\"args\": {\"name\": \"%s\"}}",
                first ? "" : ",\n", t->procs[i].pid, t->procs[i].name);
    for (int i = 0; i < t->ntracks; i++, first = 0)
        fprintf(f,
                "%s{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %d, \"tid\": %d, "
                "\"args\": {\"name\": \"%s\"}}",
                first ? "" : ",\n", t->tracks[i].pid, t->tracks[i].tid, t->tracks[i].name);
    for (size_t i = 0; i < t->n; i++, first = 0) {
        const span *s = &t->spans[i];
        fprintf(f,
                "%s{\"ph\": \"X\", \"name\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %.3f, "
                "\"dur\": %.3f",
                first ? "" : ",\n", s->name, s->pid, s->tid, (s->t0 - base) * 1e6, s->dur * 1e6);
        if (s->batch >= 0)
            fprintf(f, ", \"args\": {\"batch\": %ld}", s->batch);
        fputc('}', f);
    }
    fprintf(f, "\n]}\n");
    /* the reason is the failed write's errno; a small trace reaches the
     * file only in fclose's flush, whose failure is then the only sign */
    int bad = ferror(f) != 0, err = errno;
    if (fclose(f) != 0 && !bad)
        bad = 1, err = errno;
    if (bad) /* a cut trace does not load in a viewer: no half-written file */
        errf(e, "--trace %s: write failed: %s (the partial file is removed)", t->path,
             strerror(err ? err : EIO)),
            unlink(t->path);
    free(t->spans);
    free(t->path);
    free(t);
    return bad ? -1 : 0;
}
