/* at_exit.c — linked into build/fakecuda/train only (the whole program on
 * the fake device): when the process ends, report what a real device would
 * punish late or never — how much misuse the fake saw (each was printed
 * when it happened), and device allocations, streams, events, handles or
 * page-locked registrations still alive. Those are leaks LeakSanitizer
 * cannot see, because the fake's registry still points at them. Lines start
 * with "fakecuda: at exit:"; the end-to-end tests fail on any "fakecuda:"
 * line. A process that never touched CUDA (a loader worker) reports
 * nothing, since its fake state is empty.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "fake.h"

__attribute__((destructor)) static void fake_report_at_exit(void)
{
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
