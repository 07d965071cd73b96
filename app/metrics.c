/* metrics.c — see metrics.h. */
#define _POSIX_C_SOURCE 200809L
#include "app/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* Rss and Pss (kB) of one process; -1 when it cannot be read. */
static int read_rollup(int pid, double *rss_kb, double *pss_kb)
{
    char path[64];
    if (pid > 0)
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    else
        snprintf(path, sizeof path, "/proc/self/smaps_rollup");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    int got = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Rss:", 4)) {
            *rss_kb = strtod(line + 4, NULL);
            got |= 1;
        } else if (!strncmp(line, "Pss:", 4)) {
            *pss_kb = strtod(line + 4, NULL);
            got |= 2;
        }
    }
    fclose(f);
    return got == 3 ? 0 : -1;
}

void mem_usage_read(const int *pids, int n, mem_usage *out)
{
    memset(out, 0, sizeof *out);
    for (int i = -1; i < n; i++) {
        double r = 0, p = 0;
        if (read_rollup(i < 0 ? 0 : pids[i], &r, &p) == 0) {
            out->rss_mb += r / 1024.0;
            out->pss_mb += p / 1024.0;
            out->nprocs++;
        }
    }
}

void machine_info_read(machine_info *m)
{
    memset(m, 0, sizeof *m);
    m->cores = cores_online();
    snprintf(m->cpu, sizeof m->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ')
                        c++;
                    c[strcspn(c, "\n")] = '\0';
                    snprintf(m->cpu, sizeof m->cpu, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
}
