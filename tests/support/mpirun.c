/* mpirun.c — see mpirun.h. */
#define _GNU_SOURCE
#include "tests/support/mpirun.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *mpirun_path(void)
{
    static char path[512];
    if (path[0])
        return path;
    const char *p = getenv("PATH");
    char *dirs = strdup(p ? p : "/usr/bin:/bin");
    for (char *s = dirs, *d; (d = strtok(s, ":")) != NULL; s = NULL) {
        snprintf(path, sizeof path, "%s/mpirun", d);
        if (access(path, X_OK) == 0)
            break;
        path[0] = '\0';
    }
    free(dirs);
    return path;
}

int mpi_available(void)
{
#ifdef TRAIN_MPI
    return mpirun_path()[0] != '\0';
#else
    return 0;
#endif
}

void mpi_test_env(void)
{
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl", "self,vader", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 1);
    setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
    char buf[1024];
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(buf, sizeof buf, "%s%sfast_unwind_on_malloc=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", buf, 1);
    snprintf(buf, sizeof buf, "suppressions=%s/tests/lsan-mpi.supp:print_suppressions=0",
             source_root());
    setenv("LSAN_OPTIONS", buf, 1);
}

/* mpirun -q -np np bin args... into argv (room for 64) */
static void mpi_argv(char **argv, char *np_s, int np, const char *bin, char *const *args)
{
    int n = 0;
    snprintf(np_s, 16, "%d", np);
    argv[n++] = (char *)mpirun_path();
    argv[n++] = "-q"; /* no launcher banners: train's own message is the one */
    argv[n++] = "-np";
    argv[n++] = np_s;
    argv[n++] = (char *)bin;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
}

int run_mpi(run_result *r, int np, const char *bin, const char *first, ...)
{
    char *args[56], *argv[64], np_s[16];
    int n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 55; a = va_arg(ap, const char *))
        args[n++] = (char *)a;
    va_end(ap);
    args[n] = NULL;
    mpi_argv(argv, np_s, np, bin, args);
    return run_argv(argv, NULL, 200, r);
}

pid_t spawn_mpi(int np, const char *bin, char *const args[], const char *out, const char *err)
{
    char *argv[64], np_s[16];
    mpi_argv(argv, np_s, np, bin, args);
    return spawn_bg(argv, out, err);
}

/* the children of pid (from /proc/PID/task/ * /children) */
static int children(pid_t pid, pid_t *out, int max)
{
    char path[64];
    int n = 0, c;
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (n < max && fscanf(f, "%d", &c) == 1)
        out[n++] = c;
    fclose(f);
    return n;
}

int process_descendants(pid_t pid, pid_t *out, int max)
{
    int n = children(pid, out, max);
    for (int i = 0; i < n && n < max; i++)
        n += children(out[i], out + n, max - n);
    return n;
}

/* OMPI_COMM_WORLD_RANK of process pid, or -1 */
static int rank_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i += strlen(buf + i) + 1)
        if (!strncmp(buf + i, "OMPI_COMM_WORLD_RANK=", 21))
            return atoi(buf + i + 21);
    return -1;
}

pid_t mpi_rank_pid(pid_t launcher, int rank)
{
    for (int tries = 0; tries < 2000; tries++) {
        pid_t kids[16];
        int n = children(launcher, kids, 16);
        for (int i = 0; i < n; i++)
            if (rank_of(kids[i]) == rank)
                return kids[i];
        usleep(10000);
    }
    cr_assert_fail("no rank %d under mpirun %d after 20 s", rank, (int)launcher);
    return -1;
}
