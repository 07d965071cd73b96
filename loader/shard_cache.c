/* shard_cache.c — see shard_cache.h. */
#define _GNU_SOURCE
#include "loader/shard_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static shard_cache_stats stats;

/* Shards whose download failed after its retries, in this process: not
 * tried again (under --skip-bad every sample of a lost shard would
 * otherwise pay for the retries again), the same error given. */
#define FAILED_MAX 64
static struct failed {
    uint64_t key;
    int rc;
    char msg[ERR_MAX];
} failed[FAILED_MAX];
static int nfailed;

/* The shards this process has open (most recently used first): a path
 * handed out is /proc/self/fd/N of one of them, so another process's
 * eviction, which only removes names, cannot take it away between
 * shard_cache_get and the read. */
#define OPEN_MAX 4
static struct held {
    uint64_t key;
    int fd;
} held[OPEN_MAX];
static int nheld;

static void held_path(int fd, char *path, size_t len)
{
    snprintf(path, len, "/proc/self/fd/%d", fd);
}

/* the held descriptor of key, moved to the front, or -1 */
static int held_find(uint64_t key)
{
    for (int i = 0; i < nheld; i++)
        if (held[i].key == key) {
            struct held h = held[i];
            memmove(held + 1, held, (size_t)i * sizeof *held);
            held[0] = h;
            return h.fd;
        }
    return -1;
}

static void held_add(uint64_t key, int fd)
{
    if (nheld == OPEN_MAX)
        close(held[--nheld].fd);
    memmove(held + 1, held, (size_t)nheld * sizeof *held);
    held[0] = (struct held){key, fd};
    nheld++;
}

shard_cache_stats shard_cache_stats_get(void) { return stats; }
void shard_cache_stats_reset(void) { memset(&stats, 0, sizeof stats); }

/* NAME for url: its hash, then its last path component (for people
 * looking at the folder), query strings cut off. */
static void entry_name(const char *url, char *buf, size_t len)
{
    const char *base = strrchr(url, '/');
    base = base ? base + 1 : url;
    size_t bl = strcspn(base, "?#");
    if (bl > 96)
        bl = 96;
    snprintf(buf, len, "%016llx-%.*s", (unsigned long long)hash64(url, strlen(url), 0x5eed),
             (int)bl, base);
}

static int entry_path(const shard_cache_opts *c, const char *url, const char *suffix, char *path,
                      size_t len)
{
    char name[160];
    entry_name(url, name, sizeof name);
    int n = snprintf(path, len, "%s/%s%s", c->dir, name, suffix);
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* a hit: the file is the most recently used now */
static void touch(const char *path) { utimensat(AT_FDCWD, path, NULL, 0); }

int shard_cache_peek(const shard_cache_opts *c, const char *url, char *path, size_t len)
{
    struct stat st;
    return entry_path(c, url, "", path, len) == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *shard_cache_dir_expand(const char *arg)
{
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    size_t n = strlen(arg), hl = strlen(host), cap = n + 1;
    for (const char *p = arg; (p = strstr(p, "%h")); p += 2)
        cap += hl;
    char *out = xmalloc(cap), *o = out;
    for (const char *p = arg; *p;) {
        if (p[0] == '%' && p[1] == 'h') {
            memcpy(o, host, hl);
            o += hl;
            p += 2;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

int shard_cache_prepare(const shard_cache_opts *c, errbuf *e)
{
    if (mkdir_p(c->dir, 0755) != 0)
        return errf(e, "--shard-cache %s: cannot create it: %s", c->dir, strerror(errno));
    struct stat st;
    if (stat(c->dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return errf(e, "--shard-cache %s: not a folder", c->dir);
    if (access(c->dir, W_OK | X_OK) != 0)
        return errf(e, "--shard-cache %s: not writable: %s", c->dir, strerror(errno));
    return 0;
}

void shard_cache_remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            unlinkat(dirfd(d), de->d_name, 0);
    closedir(d);
    rmdir(dir);
}

/* ---------------------------------------------------------------- eviction */

typedef struct entry {
    char *name;
    uint64_t size;
    struct timespec used;
} entry;

static int older(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    if (x->used.tv_nsec != y->used.tv_nsec)
        return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* NAME.part-PID of a process that is gone: removed. */
static int dead_part(int dfd, const char *name)
{
    const char *p = strstr(name, ".part-");
    if (!p)
        return 0;
    char *end;
    long pid = strtol(p + 6, &end, 10);
    if (*end || pid <= 0)
        return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        unlinkat(dfd, name, 0);
    return 1;
}

/* Remove least recently used shards until they fit in the limit; never
 * `keep` (a name in the folder, or NULL), though it counts. */
static void evict(const shard_cache_opts *c, const char *keep)
{
    char lock[4096];
    snprintf(lock, sizeof lock, "%s/.lock", c->dir);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lfd < 0)
        return;
    flock(lfd, LOCK_EX);
    DIR *d = opendir(c->dir);
    entry *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if (nm[0] == '.' || dead_part(dirfd(d), nm) || (l > 5 && !strcmp(nm + l - 5, ".lock")))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), nm, &st, 0) != 0 || !S_ISREG(st.st_mode))
            continue;
        total += (uint64_t)st.st_size;
        if (keep && !strcmp(nm, keep))
            continue;
        if (n == cap)
            v = xrealloc(v, (cap = cap ? 2 * cap : 64) * sizeof *v);
        v[n++] = (entry){xstrdup(nm), (uint64_t)st.st_size, st.st_mtim};
    }
    if (n)
        qsort(v, n, sizeof *v, older);
    for (size_t i = 0; i < n && total > c->limit; i++) {
        if (unlinkat(dirfd(d), v[i].name, 0) == 0) {
            total -= v[i].size;
            stats.evicted++;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    if (d)
        closedir(d);
    flock(lfd, LOCK_UN);
    close(lfd);
}

/* ---------------------------------------------------------------- get */

/* The cache's file for url, present now or downloaded by this process or
 * another: 0 with its name in path, or -1 / REMOTE_MISSING with e. */
static int fetch(const shard_cache_opts *c, const char *url, char *path, size_t len, int nowait,
                 errbuf *e)
{
    char lock[4200];
    if (entry_path(c, url, "", path, len) != 0 || entry_path(c, url, ".lock", lock, sizeof lock))
        return errf(e, "%s: the cache folder's name is too long", c->dir);
    struct stat st;
    if (stat(path, &st) == 0) {
        touch(path);
        stats.hits++;
        return 0;
    }
    uint64_t key = hash64(url, strlen(url), 0xfa11);
    for (int i = 0; i < nfailed; i++)
        if (failed[i].key == key) {
            snprintf(e->msg, sizeof e->msg, "%s", failed[i].msg);
            return failed[i].rc;
        }
    double t0 = now_sec();
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return errf(e, "%s: cannot create %s: %s", url, lock, strerror(errno));
    int waited = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* another process downloads it */
        if (nowait) {
            close(fd);
            return 0;
        }
        waited = 1;
        while (flock(fd, LOCK_EX) != 0 && errno == EINTR)
            ;
    }
    int rc = 0;
    if (stat(path, &st) == 0) { /* it came while we waited */
        touch(path);
        stats.hits++;
        stats.waits += (uint64_t)waited;
    } else {
        if (c->limit)
            evict(c, NULL);
        uint64_t got = 0;
        rc = remote_get_file(url, path, &c->ro, &got, e);
        if (rc == 0) {
            stats.downloads++;
            stats.bytes += got;
            if (c->limit) /* others' downloads may have come in meanwhile */
                evict(c, strrchr(path, '/') + 1);
        } else {
            struct failed *f = &failed[nfailed < FAILED_MAX ? nfailed++ : FAILED_MAX - 1];
            f->key = key;
            f->rc = rc;
            snprintf(f->msg, sizeof f->msg, "%s", e->msg);
        }
    }
    stats.wait_s += now_sec() - t0;
    flock(fd, LOCK_UN);
    close(fd);
    return rc;
}

int shard_cache_get(const shard_cache_opts *c, const char *url, char *path, size_t len, errbuf *e)
{
    uint64_t key = hash64(url, strlen(url), 0x09e7);
    int fd = held_find(key);
    if (fd >= 0) { /* open here already: not a new look into the cache */
        held_path(fd, path, len);
        return 0;
    }
    /* evicted between fetch and open (another process made room): again */
    for (int tries = 0; tries < 5; tries++) {
        int rc = fetch(c, url, path, len, 0, e);
        if (rc != 0)
            return rc;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            held_add(key, fd);
            held_path(fd, path, len);
            return 0;
        }
        if (errno != ENOENT)
            return errf(e, "%s: cannot open %s: %s", url, path, strerror(errno));
    }
    return errf(e,
                "%s: evicted from %s before it could be read, 5 times (--shard-cache-size "
                "too small for the shards being read at once?)",
                url, c->dir);
}

int shard_cache_prefetch(const shard_cache_opts *c, const char *url, errbuf *e)
{
    char path[4200];
    return fetch(c, url, path, sizeof path, 1, e);
}

void shard_cache_sweep(const shard_cache_opts *c)
{
    DIR *d = c->dir ? opendir(c->dir) : NULL;
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        dead_part(dirfd(d), de->d_name);
    closedir(d);
}
