/* at_exit.c — linked into build/fakecuda/train only (the whole program on
 * the fake device): when the process ends, report what a real device would
 * punish late or never — how much misuse the fake saw (each was printed
 * when it happened), and device allocations, streams, events, handles or
 * page-locked registrations still alive. Those are leaks LeakSanitizer
 * cannot see, because the fake's registry still points at them. Lines start
 * with "fakecuda: at exit:"; the end-to-end tests fail on any "fakecuda:"
 * line. A process that never touched CUDA (a loader worker) reports
 * nothing, since its fake state is empty.
 *
 * FAKECUDA_CLOCK=FILE: the process that used the device also writes its
 * virtual clock there (fake.h's fake_clock_stats, one "key value" a line),
 * for the tests that time whole runs on the fake, and with MPI the NCCL
 * sums that ran and those that overtook queued compute (fake_nccl_overlap);
 * under Open MPI's mpirun, rank r > 0 writes FILE.r instead.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fakecuda/runtime/fake.h"

static void write_clock(void)
{
    const char *path = getenv("FAKECUDA_CLOCK");
    fake_clock_stats c;
    fake_clock(&c);
    if (!path || !c.launches)
        return;
    /* under mpirun each rank has its own clock: rank r > 0 writes FILE.r */
    char ranked[4096];
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank && strcmp(rank, "0") != 0) {
        snprintf(ranked, sizeof ranked, "%s.%s", path, rank);
        path = ranked;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "fakecuda: at exit: cannot write %s\n", path);
        return;
    }
    fprintf(f,
            "host_ms %.6f\ncompute_ms %.6f\nh2d_ms %.6f\nd2h_ms %.6f\nhost_syncs %d\n"
            "launches %d\nspin_waits %d\nstall_syncs %d\n",
            c.host_ms, c.compute_ms, c.h2d_ms, c.d2h_ms, c.host_syncs, c.launches, c.spin_waits,
            c.stall_syncs);
    fprintf(f, "link_ms %.6f\n", c.link_ms);
    fprintf(f, "overlap_ms %.6f\n", c.overlap_ms);
#ifdef TRAIN_MPI
    fake_nccl_stats n;
    fake_nccl_overlap(&n);
    fprintf(f,
            "nccl_sums %lu\nnccl_overtaking %lu\nnccl_floats %.0f\nnccl_floats_overtaking %.0f\n",
            n.sums, n.overtaking, n.floats, n.floats_overtaking);
#endif
    fclose(f);
}

__attribute__((destructor)) static void fake_report_at_exit(void)
{
    write_clock();
    int v = fake_violations(), a = fake_live_allocations(), o = fake_live_objects();
    if (v)
        fprintf(stderr, "fakecuda: at exit: %d misuse%s of the CUDA API (see above)\n", v,
                v == 1 ? "" : "s");
    if (a || o)
        fprintf(stderr,
                "fakecuda: at exit: %d device allocation%s and %d stream/event/handle/"
                "registration%s still alive\n",
                a, a == 1 ? "" : "s", o, o == 1 ? "" : "s");
}
