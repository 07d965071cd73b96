/* main.c — train's entry point: parse the command line, then dispatch to
 * one of the commands, each in app/: --model list (model_list.c),
 * --diagnose (diagnose.c), --version and one training run (run.c),
 * --selftest (selftest.c), --check (check.c), a sweep of configurations
 * (sweep.c). Nothing else lives here. */
#include <stdio.h>
#include <string.h>

#include "app/check.h"
#include "app/diagnose.h"
#include "app/model_list.h"
#include "app/options.h"
#include "app/run.h"
#include "app/selftest.h"
#include "app/sweep.h"
#include "comm/dist.h"
#include "cpu/cpu.h"

/* Under an MPI launcher a run is one configuration: sweeps, --diagnose and
 * --workers auto start train again per configuration, which a launcher's
 * ranks cannot do (each child would join the job as another rank). */
static int launcher_refuses(const options *o)
{
    dist d;
    errbuf e;
    if (dist_from_env(&d, &e) != 0) {
        fprintf(stderr, "train: %s\n", e.msg);
        return 1;
    }
    int auto_workers = 0;
    for (int i = 0; i < o->workers.n; i++)
        auto_workers |= o->workers.v[i] < 0;
    const char *what = o->diagnose           ? "--diagnose"
                       : auto_workers        ? "--workers auto"
                       : options_is_sweep(o) ? "a sweep (a comma list)"
                                             : NULL;
    if (!d.launched || !what || o->sweep_child)
        return 0;
    if (d.rank == 0)
        fprintf(stderr,
                "train: %s runs train once per configuration and cannot run under an MPI "
                "launcher; run it without mpirun, or give one configuration per job\n",
                what);
    return 1;
}

int main(int argc, char **argv)
{
    cpu_blas_single(); /* before anything else: OpenBLAS's idle pool spins */
    options o;
    int rc = options_parse(&o, argc, argv);
    if (rc != 0) {
        options_free(&o);
        return rc > 0 ? 0 : 2;
    }
    if (launcher_refuses(&o)) {
        options_free(&o);
        return 2;
    }
    for (int i = 0; i < o.workers.n && !o.sweep_child && !o.check && !o.diagnose; i++)
        if (o.workers.v[i] < 0) { /* --workers auto: measure once, use everywhere */
            int w = autotune_workers(&o);
            if (w < 0) {
                options_free(&o);
                return 2;
            }
            for (int k = 0; k < o.workers.n; k++)
                if (o.workers.v[k] < 0)
                    o.workers.v[k] = w;
        }
    if (o.model && !strcmp(o.model, "list"))
        rc = model_list_main(&o);
    else if (o.diagnose && !o.sweep_child)
        rc = diagnose_run(&o);
    else if (o.version)
        rc = run_print_version(stdout);
    else if (o.selftest)
        rc = selftest_main(stdout);
    else if (o.check)
        rc = check_main(&o);
    else if (options_is_sweep(&o) && !o.sweep_child)
        rc = sweep_run(&o);
    else {
        run_choice c;
        run_choice_first(&o, &c);
        run_install_signals();
        rc = run_one(&o, &c);
    }
    options_free(&o);
    return rc;
}
