/* netlab.c — see netlab.h. */
#define _GNU_SOURCE
#include "tests/support/netlab.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CURL "/usr/bin/curl"
#define NGINX "/usr/sbin/nginx"

static const char *state_root(void)
{
    const char *s = getenv("NETLAB_STATE");
    return s && *s ? s : "/run/netlab";
}

int netlab_in_ci(void)
{
    const char *ci = getenv("CI");
    return ci && (!strcmp(ci, "true") || !strcmp(ci, "1"));
}

/* sh -c CMD, quietly: its exit status */
static int sh_status(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    run_result r;
    int st = run_argv(argv, NULL, 30, &r);
    run_free(&r);
    return st;
}

const char *netlab_missing(int needs, int *installable)
{
    static char why[256];
    *installable = 0;
    if (geteuid() != 0)
        return "needs root (network namespaces, tc)";
    /* a namespace made and removed: the kernel and the container allow it */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ip netns add nlprobe%d && ip netns del nlprobe%d", (int)getpid(),
             (int)getpid());
    if (sh_status(cmd) != 0)
        return "`ip netns add` fails here (no network namespaces for this user or container)";
    *installable = 1;
    if (needs && access(CURL, X_OK) != 0)
        return "no " CURL " (make deps installs curl)";
    if ((needs & NETLAB_HTTP) && access(NGINX, X_OK) != 0)
        return "no " NGINX " (make deps installs Debian's nginx)";
    if (needs & NETLAB_S3) {
        char *moto = path_join(source_root(), "build/netlab/venv/bin/moto_server");
        int ok = access(moto, X_OK) == 0;
        free(moto);
        if (!ok) {
            snprintf(why, sizeof why,
                     "no moto server in %s/build/netlab/venv (make deps installs it; "
                     "build/netlab/venv.stamp says whether pip could)",
                     source_root());
            return why;
        }
    }
    return NULL;
}

void netlab_name(char *out, size_t len, const char *prefix)
{
    snprintf(out, len, "%s-%d", prefix, (int)getpid());
}

static int run_v(run_result *r, const char *bin, const char *first, va_list ap)
{
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)bin;
    for (const char *a = first; a && n < 63; a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    argv[n] = NULL;
    return run_argv(argv, NULL, 60, r);
}

int netlab_run(run_result *r, const char *first, ...)
{
    char *bin = path_join(source_root(), "tools/netlab");
    va_list ap;
    va_start(ap, first);
    int st = run_v(r, bin, first, ap);
    va_end(ap);
    free(bin);
    return st;
}

int curl_run(run_result *r, const char *first, ...)
{
    va_list ap;
    va_start(ap, first);
    int st = run_v(r, CURL, first, ap);
    va_end(ap);
    return st;
}

char *netlab_up(const char *name, const char *serve, const char *rate, int delay_ms)
{
    char delay[16], owner[16];
    snprintf(delay, sizeof delay, "%d", delay_ms);
    snprintf(owner, sizeof owner, "%d", (int)getpid());
    run_result r;
    netlab_run(&r, "up", name, "--serve", serve, "--rate", rate, "--delay-ms", delay, "--owner",
               owner, (char *)NULL);
    cr_assert_eq(r.status, 0, "netlab up %s: %s", name, r.err);
    char *url = strdup(r.out);
    url[strcspn(url, "\n")] = '\0';
    cr_assert(!strncmp(url, "http://10.77.", 13), "netlab up %s printed '%s'", name, r.out);
    run_free(&r);
    return url;
}

void netlab_down(const char *name)
{
    run_result r;
    netlab_run(&r, "down", name, (char *)NULL);
    cr_assert_eq(r.status, 0, "netlab down %s: %s", name, r.err);
    run_free(&r);
}

static char *state_path(const char *dir, const char *file)
{
    char *d = path_join(state_root(), dir);
    char *p = file ? path_join(d, file) : strdup(d);
    free(d);
    return p;
}

char *netlab_state_text(const char *dir, const char *file)
{
    char *p = state_path(dir, file);
    FILE *f = fopen(p, "r");
    free(p);
    if (!f)
        return NULL;
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

pid_t netlab_state_pid(const char *dir, const char *file)
{
    char *t = netlab_state_text(dir, file);
    pid_t p = t && *t ? (pid_t)atoi(t) : -1;
    free(t);
    return p > 0 ? p : -1;
}

int netlab_state_exists(const char *dir)
{
    char *p = state_path(dir, NULL);
    int ok = access(p, F_OK) == 0;
    free(p);
    return ok;
}

int netns_exists(const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "/run/netns/%s", name);
    return access(p, F_OK) == 0;
}

int netns_pids(const char *name, pid_t *out, int max)
{
    if (!netns_exists(name))
        return 0;
    char *argv[] = {"/usr/sbin/ip", "netns", "pids", (char *)name, NULL};
    run_result r;
    run_argv(argv, NULL, 30, &r);
    int n = 0;
    for (char *s = r.out, *e; *s && n < max; s = e) {
        long p = strtol(s, &e, 10);
        if (e == s)
            break;
        if (process_alive((int)p))
            out[n++] = (pid_t)p;
    }
    run_free(&r);
    return n;
}
