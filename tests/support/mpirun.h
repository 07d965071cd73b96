/* mpirun.h — running train as K ranks under a real `mpirun` in the tests. */
#ifndef TRAIN_TESTS_MPIRUN_H
#define TRAIN_TESTS_MPIRUN_H

#include <sys/types.h>

#include "tests/support/helpers.h"

/* mpirun on the PATH, or "" when there is none. */
const char *mpirun_path(void);
/* 1 when the binaries were built with MPI and mpirun is on the PATH. */
int mpi_available(void);

/* The environment Open MPI needs to start ranks here, set in this process
 * (children inherit it): run as root (a container); shared memory between
 * the ranks without the single-copy mechanism containers refuse; no core
 * binding and oversubscription allowed (two cores, ranks plus workers);
 * ranks yield while they wait in a collective. ASan's leak check stays on,
 * minus Open MPI's own allocations (tests/lsan-mpi.supp names only its
 * libraries; unwinding without frame pointers, so their frames are seen). */
void mpi_test_env(void);

/* mpirun -np np <bin> args... (NULL-terminated), at most 200 s. */
int run_mpi(run_result *r, int np, const char *bin, const char *first, ...);

/* The same in the background (spawn_bg), stdout and stderr to files. */
pid_t spawn_mpi(int np, const char *bin, char *const args[], const char *out, const char *err);

/* The pid of rank `rank` among the launcher's children, waiting up to 20 s
 * for it to appear. */
pid_t mpi_rank_pid(pid_t launcher, int rank);

/* Every descendant of pid (children first), up to max; returns how many. */
int process_descendants(pid_t pid, pid_t *out, int max);

#endif
