/* env.c — who this process is, from the launcher's environment alone
 * (dist_from_env, see dist.h): read before MPI starts, so the loader can
 * fork first and so ranks other than 0 can keep quiet from the start.
 * Every MPI launcher exports the rank; Open MPI, PMI (MPICH's hydra, Intel
 * MPI, srun --mpi=pmi2) and PMIx (srun --mpi=pmix) are recognised. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/dist.h"

/* the first of names[] that is set, as a number; -1 when none is */
static int env_int(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

/* d->job: what the ranks of one job on a node share, from the launcher
 * (Open MPI's job id, a PMIx namespace, Slurm's job and step), else the
 * parent's pid (the launcher's daemon on this node). Only characters safe
 * in a file name are kept. */
static void job_id(dist *d)
{
    const char *v = getenv("OMPI_MCA_ess_base_jobid");
    char buf[sizeof d->job];
    if (!v || !*v)
        v = getenv("PMIX_NAMESPACE");
    if ((!v || !*v) && getenv("SLURM_JOB_ID")) {
        const char *step = getenv("SLURM_STEP_ID");
        snprintf(buf, sizeof buf, "%s.%s", getenv("SLURM_JOB_ID"), step ? step : "0");
        v = buf;
    }
    if (!v || !*v) {
        snprintf(buf, sizeof buf, "p%ld", (long)getppid());
        v = buf;
    }
    size_t n = 0;
    for (; *v && n + 1 < sizeof d->job; v++)
        if (isalnum((unsigned char)*v) || *v == '.' || *v == '-' || *v == '_')
            d->job[n++] = *v;
    d->job[n] = '\0';
}

int dist_from_env(dist *d, errbuf *e)
{
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                            NULL};
    static const char *const lrank_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                             "SLURM_LOCALID", NULL};
    static const char *const lsize_vars[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", NULL};
    memset(d, 0, sizeof *d);
    d->size = d->local_size = 1;
    int rank = env_int(rank_vars);
    if (rank < 0)
        return 0; /* no launcher: one process */
    d->launched = 1;
    d->rank = rank;
    int size = env_int(size_vars);
    d->size = size > 0 ? size : 1; /* PMIx alone: MPI_Init tells */
    job_id(d);
    int lr = env_int(lrank_vars), ls = env_int(lsize_vars);
    d->local_rank = lr >= 0 ? lr : 0;
    d->local_size = ls > 0 ? ls : 1;
#ifndef TRAIN_MPI
    if (size != 1) {
        char of[24] = "an unknown number";
        if (size > 0)
            snprintf(of, sizeof of, "%d", size);
        return errf(e,
                    "started by an MPI launcher (rank %d of %s) but this train was built without "
                    "MPI: install Open MPI (make deps) and rebuild, or run one process without "
                    "the launcher",
                    rank, of);
    }
    d->launched = 0; /* one rank of one: the one-process program */
#else
    (void)e;
#endif
    return 0;
}
