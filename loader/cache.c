/* cache.c — see cache.h. */
#define _GNU_SOURCE
#include "loader/cache.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* 3: base images of DCT-scaled JPEGs are resampled by their true extent
 * and --decode is part of the key; 4: so is --exif */
#define CACHE_VERSION 4u
#define CACHE_HEADER 4096u

typedef struct cache_header {
    char magic[8];
    uint32_t version;
    uint32_t n;
    uint32_t c, h, w;
    uint64_t key;
    uint64_t data_bytes;
    uint64_t data_sum;
    uint64_t csv_hash;   /* the CSV's content alone, to say what changed */
    uint64_t stamps_sum; /* of the file stamps after the data */
    uint64_t header_sum; /* of the bytes above */
} cache_header;

/* What a source image looked like when its sample was cached: any change
 * (rewritten, touched, replaced by another file) rebuilds the cache. A
 * file that cannot be stat'ed is all zeros, which changes too when it
 * appears. */
typedef struct file_stamp {
    uint64_t size, ino;
    int64_t mtime_ns, ctime_ns;
} file_stamp;

static void stamp_files(preload_cache *pc, const dataset *ds)
{
    pc->stamps = xcalloc(ds->n ? ds->n : 1, sizeof(file_stamp));
    file_stamp *fs = pc->stamps;
    for (uint32_t i = 0; i < ds->n; i++) {
        struct stat st;
        if (stat(dataset_path(ds, i), &st) != 0)
            continue;
        fs[i].size = (uint64_t)st.st_size;
        fs[i].ino = (uint64_t)st.st_ino;
        fs[i].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        fs[i].ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
    }
}

static size_t stamps_bytes(const preload_cache *pc) { return (size_t)pc->n * sizeof(file_stamp); }

/* Name the first image that changed and count them, for the note. */
static void describe_changed(preload_cache *pc, const file_stamp *old)
{
    const file_stamp *now = pc->stamps;
    uint32_t changed = 0, first = 0;
    for (uint32_t i = 0; i < pc->n; i++)
        if (memcmp(&old[i], &now[i], sizeof *now) != 0 && changed++ == 0)
            first = i;
    const file_stamp *a = &old[first], *b = &now[first];
    const char *how = !b->ino              ? "missing now"
                      : a->ino != b->ino   ? "replaced by another file"
                      : a->size != b->size ? "size changed"
                                           : "modified (time stamps changed)";
    char what[ERR_MAX], where[2 * ERR_MAX];
    snprintf(what, sizeof what, "%s, %s", dataset_path(pc->ds, first), how);
    snprintf(pc->note, sizeof pc->note,
             "cache %s: %u image file%s changed since it was built (first: %s): "
             "rebuilding it",
             pc->path, changed, changed == 1 ? "" : "s",
             dataset_row_message(pc->ds, first, what, where, sizeof where));
}

static uint64_t header_sum(const cache_header *h)
{
    return hash64(h, offsetof(cache_header, header_sum), 0x68656164);
}

uint64_t cache_key(const dataset *ds, const img_params *p, int base_h, int base_w)
{
    /* the fields that change base images; not the augmentation */
    int32_t v[13] = {CACHE_VERSION,
                     p->channels,
                     p->resize_h,
                     p->resize_w,
                     p->resize_short,
                     p->random_crop ? 0 : p->crop_h,
                     p->random_crop ? 0 : p->crop_w,
                     base_h,
                     base_w,
                     (int32_t)ds->n,
                     p->decode,
                     p->full_decode,
                     p->exif};
    return hash64(v, sizeof v, ds->content_hash);
}

/* The memory guard: one copy of the cache in memory must fit the limit. */
static int check_memory(const preload_cache *pc, uint64_t mem_limit, errbuf *e)
{
    uint64_t avail = mem_available_bytes();
    uint64_t limit = mem_limit ? mem_limit : avail / 10 * 8;
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    if (limit && bytes > limit) {
        char need[32], have[32], lim[32];
        return errf(e,
                    "preload needs %s (%u samples of %dx%dx%d) but the limit is %s (%s: %s "
                    "available); use --mode lazy, or --cache FILE to keep it on disk",
                    fmt_bytes(need, sizeof need, bytes), pc->n, pc->c, pc->h, pc->w,
                    fmt_bytes(lim, sizeof lim, limit),
                    mem_limit ? "--mem-limit" : "80% of MemAvailable",
                    fmt_bytes(have, sizeof have, avail));
    }
    return 0;
}

static int map_anonymous(preload_cache *pc, uint64_t mem_limit, int shareable, errbuf *e)
{
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    if (check_memory(pc, mem_limit, e) != 0)
        return -1;
    pc->map_len = bytes ? bytes : 1;
    if (shareable) { /* a memfd, so that a spawned process can map the same pages */
        pc->fd = memfd_create("train-cache", MFD_CLOEXEC);
        if (pc->fd < 0 || ftruncate(pc->fd, (off_t)pc->map_len) != 0)
            return errf(e, "cannot make %zu bytes of shared memory for the preload cache: %s",
                        bytes, strerror(errno));
    }
    void *m = mmap(NULL, pc->map_len, PROT_READ | PROT_WRITE,
                   shareable ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, pc->fd, 0);
    if (m == MAP_FAILED)
        return errf(e, "cannot map %zu bytes for the preload cache: %s", bytes, strerror(errno));
    pc->map = pc->data = m;
    return 0;
}

/* ---------------------------------------------------------------- SIGBUS guard
 * A mapped file truncated by someone else faults (SIGBUS) on the pages
 * past its new end. Every read and write of a cache mapping goes through
 * guarded(): the handler jumps back, and the caller reports the file. */

static __thread sigjmp_buf *volatile g_bus_jmp;
static atomic_int g_bus_installed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    (void)si;
    (void)uc;
    if (g_bus_jmp)
        siglongjmp(*g_bus_jmp, 1);
    signal(sig, SIG_DFL); /* not ours: the fault repeats and kills as before */
}

typedef struct guard_job {
    void *dst;
    const void *src;
    size_t n;
    uint64_t seed, *sum; /* a hash instead of a copy */
} guard_job;

static int guarded(guard_job *j)
{
    if (!atomic_exchange(&g_bus_installed, 1)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigbus;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, NULL);
    }
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1)) {
        g_bus_jmp = NULL;
        return -1;
    }
    g_bus_jmp = &jb;
    if (j->sum)
        *j->sum = hash64(j->src, j->n, j->seed);
    else
        memcpy(j->dst, j->src, j->n);
    g_bus_jmp = NULL;
    return 0;
}

int cache_copy(void *dst, const void *src, size_t n)
{
    guard_job j = {.dst = dst, .src = src, .n = n};
    return guarded(&j);
}

int cache_hash(uint64_t *sum, const void *src, size_t n, uint64_t seed)
{
    guard_job j = {.src = src, .n = n, .seed = seed, .sum = sum};
    return guarded(&j);
}

/* Validate an existing file; on success map it read-only. Returns 0 when
 * usable, 1 when it must be rebuilt (reason in pc->note), -1 on error. */
static int try_reuse(preload_cache *pc, errbuf *e)
{
    struct stat st;
    if (stat(pc->path, &st) != 0 && errno == ENOENT) {
        snprintf(pc->note, sizeof pc->note, "cache %s does not exist: building it", pc->path);
        return 1;
    }
    /* a folder, a FIFO or a device is refused, never read nor replaced */
    int fd = open_regular(pc->path, O_RDONLY, 0, e);
    if (fd < 0)
        return -1;
    cache_header h;
    const char *why = NULL;
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    if (fstat(fd, &st) != 0 || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        why = "is too short to hold a header (truncated)";
    else if (memcmp(h.magic, CACHE_MAGIC, 8) != 0)
        why = "is not a train preload cache";
    else if (h.header_sum != header_sum(&h))
        why = "has a corrupt header";
    else if (h.version != CACHE_VERSION)
        why = "was written by another version of train";
    else if (h.csv_hash != pc->ds->content_hash)
        why = "was built from another CSV (its content or --root changed)";
    else if (h.key != pc->key || h.n != pc->n || h.c != (uint32_t)pc->c || h.h != (uint32_t)pc->h ||
             h.w != (uint32_t)pc->w || h.data_bytes != bytes)
        why = "was built for other transforms (--resize, --crop, --channels, --decode)";
    else if ((uint64_t)st.st_size != CACHE_HEADER + bytes + stamps_bytes(pc))
        why = "has the wrong size (truncated?)";
    if (why) {
        close(fd);
        snprintf(pc->note, sizeof pc->note, "cache %s %s: rebuilding it", pc->path, why);
        return 1;
    }
    size_t len = CACHE_HEADER + bytes + stamps_bytes(pc);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return errf(e, "%s: cannot map: %s", pc->path, strerror(errno));
    }
    const file_stamp *old = (const file_stamp *)((uint8_t *)m + CACHE_HEADER + bytes);
    uint64_t stamps_sum = 0, data_sum = 0;
    if (cache_hash(&stamps_sum, old, stamps_bytes(pc), 0x7374616d) != 0 ||
        cache_hash(&data_sum, (uint8_t *)m + CACHE_HEADER, bytes, 0x64617461) != 0) {
        munmap(m, len);
        close(fd);
        snprintf(pc->note, sizeof pc->note,
                 "cache %s was truncated while it was checked: rebuilding it", pc->path);
        return 1;
    }
    if (stamps_sum != h.stamps_sum || data_sum != h.data_sum) {
        munmap(m, len);
        close(fd);
        snprintf(pc->note, sizeof pc->note,
                 "cache %s is corrupt (checksum mismatch): rebuilding it", pc->path);
        return 1;
    }
    if (memcmp(old, pc->stamps, stamps_bytes(pc)) != 0) {
        describe_changed(pc, old);
        munmap(m, len);
        close(fd);
        return 1;
    }
    pc->fd = fd; /* kept: cache_share_fd hands the same file to a spawned process */
    pc->map = m;
    pc->map_len = len;
    pc->data = pc->map + CACHE_HEADER;
    pc->ready = 1;
    snprintf(pc->note, sizeof pc->note, "cache %s matches: reusing it, nothing to decode",
             pc->path);
    return 0;
}

static int create_temp(preload_cache *pc, errbuf *e)
{
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    /* unnamed until complete where the file system allows (O_TMPFILE): a
     * build killed by SIGKILL or the OOM killer leaves nothing behind */
    pc->fd = replace_file_open(pc->path, &pc->tmp_path, e);
    if (pc->fd < 0)
        return -1;
    pc->building = 1;
    const char *where = pc->tmp_path ? pc->tmp_path : pc->path;
    size_t len = CACHE_HEADER + bytes + stamps_bytes(pc);
    int rc = posix_fallocate(pc->fd, 0, (off_t)len);
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
        return errf(e, "%s: cannot allocate %zu bytes: %s", where, len, strerror(rc));
    if (ftruncate(pc->fd, (off_t)len) != 0)
        return errf(e, "%s: %s", where, strerror(errno));
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, pc->fd, 0);
    if (m == MAP_FAILED)
        return errf(e, "%s: cannot map: %s", where, strerror(errno));
    pc->map = m;
    pc->map_len = len;
    pc->data = pc->map + CACHE_HEADER;
    return 0;
}

static void init_cache(preload_cache *pc, const dataset *ds, int c, int h, int w, uint64_t key)
{
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
    pc->ds = ds;
    pc->n = ds->n;
    pc->c = c;
    pc->h = h;
    pc->w = w;
    pc->key = key;
    pc->sample_bytes = (size_t)c * h * w;
}

int cache_open_shared(preload_cache *pc, const char *path, const dataset *ds, int c, int h, int w,
                      uint64_t key, uint64_t mem_limit, int shareable, errbuf *e)
{
    init_cache(pc, ds, c, h, w, key);
    if (!path)
        return map_anonymous(pc, mem_limit, shareable, e) == 0 ? 0 : (cache_close(pc), -1);
    pc->path = xstrdup(path);
    stamp_files(pc, ds);
    int rc = try_reuse(pc, e);
    if (rc == 0)
        return 0;
    if (rc < 0 || create_temp(pc, e) != 0) {
        cache_close(pc);
        return -1;
    }
    return 0;
}

/* The header (and the stamps, for a --cache file) after the data; -1
 * when the file was truncated under the mapping. */
static int write_header(preload_cache *pc)
{
    cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, CACHE_MAGIC, 8);
    h.version = CACHE_VERSION;
    h.n = pc->n;
    h.c = (uint32_t)pc->c;
    h.h = (uint32_t)pc->h;
    h.w = (uint32_t)pc->w;
    h.key = pc->key;
    h.data_bytes = (uint64_t)pc->n * pc->sample_bytes;
    if (cache_hash(&h.data_sum, pc->data, (size_t)h.data_bytes, 0x64617461) != 0)
        return -1;
    h.csv_hash = pc->ds->content_hash;
    uint8_t *stamps = pc->data + h.data_bytes;
    if (pc->stamps && cache_copy(stamps, pc->stamps, stamps_bytes(pc)) != 0)
        return -1; /* none in a node's memory file */
    if (cache_hash(&h.stamps_sum, stamps, stamps_bytes(pc), 0x7374616d) != 0)
        return -1;
    h.header_sum = header_sum(&h);
    return cache_copy(pc->map, &h, sizeof h);
}

int cache_commit(preload_cache *pc, errbuf *e)
{
    if (pc->node_mem) { /* the node's file in memory: complete once it has its header */
        if (write_header(pc) != 0)
            return errf(e, "%s: %s", pc->node_path ? pc->node_path : "the node's cache",
                        CACHE_TRUNCATED);
        pc->ready = 1;
        return 0;
    }
    if (!pc->building)
        return 0;
    if (write_header(pc) != 0)
        return errf(e, "%s: %s", pc->path, CACHE_TRUNCATED);
    if (msync(pc->map, pc->map_len, MS_SYNC) != 0 || fsync(pc->fd) != 0)
        return errf(e, "%s: cannot write the cache: %s", pc->path, strerror(errno));
    if (replace_file_commit(pc->fd, &pc->tmp_path, pc->path, e) != 0)
        return -1;
    pc->building = 0;
    char *dir = xstrdup(pc->path), *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    pc->ready = 1;
    return 0;
}

/* ---------------------------------------------------------------- one copy per node */

static size_t file_len(const preload_cache *pc)
{
    return CACHE_HEADER + (size_t)pc->n * pc->sample_bytes + stamps_bytes(pc);
}

/* The leader's node file at node_path, full size and mapped read-write:
 * made under a temporary name and renamed into place, so that a rank that
 * opens node_path finds it at full size. */
static int create_node_file(preload_cache *pc, const char *node_path, errbuf *e)
{
    size_t n = strlen(node_path) + 16, len = file_len(pc);
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%s.XXXXXX", node_path);
    pc->fd = mkstemp(tmp);
    int rc = -1;
    if (pc->fd < 0) {
        errf(e, "%s: cannot create the node's preload cache: %s", node_path, strerror(errno));
        goto out;
    }
    fchmod(pc->fd, 0666 & ~umask_now()); /* mkstemp makes 0600; the umask decides */
    int fa = posix_fallocate(pc->fd, 0, (off_t)len);
    if (fa != 0 && fa != EOPNOTSUPP && fa != EINVAL) {
        errf(e,
             "%s: cannot allocate %zu bytes for the node's preload cache: %s (--cache FILE puts it "
             "on a disk instead; --mode lazy needs none)",
             node_path, len, strerror(fa));
        goto out;
    }
    if (ftruncate(pc->fd, (off_t)len) != 0) {
        errf(e, "%s: %s", node_path, strerror(errno));
        goto out;
    }
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, pc->fd, 0);
    if (m == MAP_FAILED) {
        errf(e, "%s: cannot map: %s", node_path, strerror(errno));
        goto out;
    }
    pc->map = m;
    pc->map_len = len;
    pc->data = pc->map + CACHE_HEADER;
    if (rename(tmp, node_path) != 0) {
        errf(e, "%s: cannot rename to %s: %s", tmp, node_path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* A follower: map node_path read-only once the leader has made it,
 * waiting up to wait_s seconds for it to appear. */
static int map_node_file(preload_cache *pc, const char *node_path, double wait_s, errbuf *e)
{
    double until = now_sec() + wait_s;
    int fd;
    while ((fd = open(node_path, O_RDONLY | O_CLOEXEC)) < 0) {
        if (errno != ENOENT)
            return errf(e, "%s: %s", node_path, strerror(errno));
        if (now_sec() >= until)
            return errf(e,
                        "local rank 0 did not create the node's preload cache %s within %.0f s "
                        "(its own message says why)",
                        node_path, wait_s);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    pc->fd = fd;
    struct stat st;
    size_t len = file_len(pc);
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != len)
        return errf(e, "%s: the node's preload cache is not the %zu bytes expected", node_path,
                    len);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return errf(e, "%s: cannot map: %s", node_path, strerror(errno));
    pc->map = m;
    pc->map_len = len;
    pc->data = pc->map + CACHE_HEADER;
    pc->follower = 1;
    return 0;
}

int cache_open_node(preload_cache *pc, const char *path, const char *node_path, int leader,
                    const dataset *ds, int c, int h, int w, uint64_t key, uint64_t mem_limit,
                    double wait_s, errbuf *e)
{
    init_cache(pc, ds, c, h, w, key);
    if (path) {
        pc->path = xstrdup(path);
        stamp_files(pc, ds);
        int rc = try_reuse(pc, e);
        if (rc <= 0)
            return rc == 0 ? 0 : (cache_close(pc), -1);
    } else if (leader && check_memory(pc, mem_limit, e) != 0) {
        cache_close(pc); /* the node's one copy against the guard */
        return -1;
    }
    int rc = leader ? create_node_file(pc, node_path, e) : map_node_file(pc, node_path, wait_s, e);
    if (rc != 0) {
        cache_close(pc);
        return -1;
    }
    /* the leader's file goes at cache_close: renamed over path by
     * cache_commit first, or unlinked (the node's file in memory) */
    if (leader && path)
        pc->tmp_path = xstrdup(node_path), pc->building = 1;
    else if (leader)
        pc->node_mem = 1, pc->node_path = xstrdup(node_path);
    char why[sizeof pc->note];
    snprintf(why, sizeof why, "%s", pc->note);
    snprintf(pc->note, sizeof pc->note, "%.400s%sone copy for the node's ranks in %.400s: %s", why,
             why[0] ? "; " : "", node_path,
             leader ? "local rank 0 decodes it" : "mapped from local rank 0");
    return 0;
}

void cache_node_unlink(preload_cache *pc)
{
    if (!pc->node_path)
        return;
    unlink(pc->node_path);
    free(pc->node_path);
    pc->node_path = NULL;
}

int cache_node_check(preload_cache *pc, errbuf *e)
{
    if (pc->ready)
        return 0;
    cache_header h;
    memcpy(&h, pc->map, sizeof h);
    if (memcmp(h.magic, CACHE_MAGIC, 8) != 0 || h.header_sum != header_sum(&h) ||
        h.version != CACHE_VERSION || h.key != pc->key || h.n != pc->n ||
        h.data_bytes != (uint64_t)pc->n * pc->sample_bytes)
        return errf(e, "local rank 0 did not complete the node's preload cache (%s)", pc->note);
    pc->ready = 1;
    return 0;
}

int cache_share_fd(const preload_cache *pc) { return pc->fd; }

int cache_attach(preload_cache *pc, int fd, const dataset *ds, int c, int h, int w, int file,
                 errbuf *e)
{
    memset(pc, 0, sizeof *pc);
    pc->fd = fd;
    pc->ds = ds;
    pc->n = ds->n;
    pc->c = c;
    pc->h = h;
    pc->w = w;
    pc->sample_bytes = (size_t)c * h * w;
    size_t off = file ? CACHE_HEADER : 0, bytes = (size_t)pc->n * pc->sample_bytes;
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < off + bytes) {
        cache_close(pc);
        return errf(e, "internal: the preload cache handed over is not %zu bytes", off + bytes);
    }
    pc->map_len = (size_t)st.st_size;
    int prot = (fl & O_ACCMODE) == O_RDONLY ? PROT_READ : PROT_READ | PROT_WRITE;
    void *m = mmap(NULL, pc->map_len, prot, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        errf(e, "cannot map the preload cache handed over: %s", strerror(errno));
        cache_close(pc);
        return -1;
    }
    pc->map = m;
    pc->data = pc->map + off;
    return 0;
}

void cache_close(preload_cache *pc)
{
    if (pc->map)
        munmap(pc->map, pc->map_len);
    if (pc->fd >= 0)
        close(pc->fd);
    if (pc->tmp_path) {
        unlink(pc->tmp_path);
        free(pc->tmp_path);
    }
    cache_node_unlink(pc);
    free(pc->path);
    free(pc->stamps);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
}
