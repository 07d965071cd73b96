/* bench_allreduce.c — the gradient sum alone: MPI_Allreduce (sum, in
 * place, floats) of the slab sizes of train's models, timed per call, as
 * comm/mpi.c calls it. Run it under the launcher the job uses:
 *
 *   mpirun -np 2 build/tools/bench_allreduce [FLOATS ...]
 *
 * Default sizes: lenet (440812 floats), convnet on 64x64 (94538),
 * resnet20 (272186), resnet18 (11175370). Prints, on rank 0, per size the
 * median and the best of 30 timed calls (after 5 untimed), and the bus
 * bandwidth as NCCL's tests define it: bytes x 2 (K-1) / K / time.
 * Built against MPI by mk/mpi.mk; without MPI it says so and exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#ifdef TRAIN_MPI
#include <mpi.h>

#include "common/util.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long def[] = {440812, 94538, 272186, 11175370};
    int n = argc > 1 ? argc - 1 : 4;
    enum { WARM = 5, RUNS = 30 };
    if (rank == 0)
        printf("%d ranks: floats, MB, median us, best us, busbw GB/s (median)\n", size);
    for (int i = 0; i < n; i++) {
        long count = argc > 1 ? atol(argv[i + 1]) : def[i];
        float *buf = xcalloc((size_t)count, sizeof(float));
        double t[RUNS];
        for (int k = 0; k < WARM + RUNS; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now_sec();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (k >= WARM)
                t[k - WARM] = now_sec() - t0;
        }
        /* a call lasts as long as its slowest rank's */
        MPI_Allreduce(MPI_IN_PLACE, t, RUNS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(t, RUNS, sizeof *t, cmp);
        double bytes = (double)count * sizeof(float), med = t[RUNS / 2];
        if (rank == 0)
            printf("%10ld %8.2f %10.1f %10.1f %8.2f\n", count, bytes / 1e6, med * 1e6, t[0] * 1e6,
                   bytes * 2 * (size - 1) / size / med / 1e9);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "bench_allreduce: built without MPI (make deps, then rebuild)\n");
    return 1;
}
#endif
