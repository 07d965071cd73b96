/* single.c — dist.h without MPI (make MPI=0, or no MPI found): one process,
 * rank 0 of 1; every collective is the identity. dist_from_env (env.c)
 * refuses a launch with several ranks before any of this runs. */
#ifndef TRAIN_MPI
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/dist.h"

int dist_start(dist *d, errbuf *e)
{
    (void)d;
    (void)e;
    return 0;
}

int dist_agree(dist *d, int status)
{
    (void)d;
    return status;
}

int dist_agree_idle(dist *d, int status)
{
    (void)d;
    return status;
}

void dist_sum(dist *d, double *v, int n)
{
    (void)d;
    (void)v;
    (void)n;
}

void dist_gather(dist *d, const double *v, int n, double *all)
{
    (void)d;
    memcpy(all, v, sizeof(double) * (size_t)n);
}

void dist_allgather(dist *d, const void *mine, size_t bytes, void *all)
{
    (void)d;
    memcpy(all, mine, bytes);
}

const char *dist_host_of(const dist *d, int r)
{
    (void)d;
    (void)r;
    return "";
}

int dist_attach(dist *d, model *m, errbuf *e)
{
    (void)d;
    (void)m;
    (void)e;
    return 0;
}

void dist_canonical(dist *d) { (void)d; }

double dist_comm_device(dist *d)
{
    (void)d;
    return NAN;
}

int dist_check_gpus(dist *d, const char *bus_id, int device, char *msg, size_t len)
{
    (void)d, (void)bus_id, (void)device;
    if (len)
        msg[0] = '\0';
    return 0;
}

double dist_take_comm(dist *d)
{
    (void)d;
    return 0;
}

int dist_end(dist *d, int status, const char *msg, char *out, size_t len)
{
    (void)d;
    snprintf(out, len, "%s", status ? msg : "");
    return status;
}

void dist_stop(dist *d) { (void)d; }
#endif
