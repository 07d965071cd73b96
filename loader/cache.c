/* cache.c — see cache.h. */
#define _GNU_SOURCE
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC "TRAINPC\n"
#define CACHE_VERSION 1u
#define CACHE_HEADER 4096u

typedef struct cache_header {
    char magic[8];
    uint32_t version;
    uint32_t n;
    uint32_t c, h, w;
    uint64_t key;
    uint64_t data_bytes;
    uint64_t data_sum;
    uint64_t header_sum; /* of the bytes above */
} cache_header;

static uint64_t header_sum(const cache_header *h)
{
    return hash64(h, offsetof(cache_header, header_sum), 0x68656164);
}

uint64_t cache_key(const ds_index *ix, const img_params *p, int base_h, int base_w)
{
    /* the fields that change base images; not the augmentation */
    int32_t v[10] = {CACHE_VERSION,  p->channels, p->resize_h, p->resize_w, p->resize_short,
                     p->random_crop ? 0 : p->crop_h, p->random_crop ? 0 : p->crop_w,
                     base_h,         base_w,      (int32_t)ix->n};
    return hash64(v, sizeof v, ix->content_hash);
}

static int map_anonymous(preload_cache *pc, uint64_t mem_limit, errbuf *e)
{
    uint64_t avail = mem_available_bytes();
    uint64_t limit = mem_limit ? mem_limit : avail / 10 * 8;
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    if (limit && bytes > limit) {
        char need[32], have[32], lim[32];
        return errf(e, "preload needs %s (%u samples of %dx%dx%d) but the limit is %s (%s: %s "
                       "available); use --mode lazy, or --cache FILE to keep it on disk",
                    fmt_bytes(need, sizeof need, bytes), pc->n, pc->c, pc->h, pc->w,
                    fmt_bytes(lim, sizeof lim, limit),
                    mem_limit ? "--mem-limit" : "80% of MemAvailable",
                    fmt_bytes(have, sizeof have, avail));
    }
    pc->map_len = bytes ? bytes : 1;
    void *m = mmap(NULL, pc->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return errf(e, "cannot map %zu bytes for the preload cache: %s", bytes, strerror(errno));
    pc->map = pc->data = m;
    return 0;
}

/* Validate an existing file; on success map it read-only. Returns 0 when
 * usable, 1 when it must be rebuilt (reason in pc->note), -1 on error. */
static int try_reuse(preload_cache *pc, errbuf *e)
{
    int fd = open(pc->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            snprintf(pc->note, sizeof pc->note, "cache %s does not exist: building it", pc->path);
            return 1;
        }
        return errf(e, "%s: %s", pc->path, strerror(errno));
    }
    cache_header h;
    struct stat st;
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
    else if (h.key != pc->key || h.n != pc->n || h.c != (uint32_t)pc->c || h.h != (uint32_t)pc->h ||
             h.w != (uint32_t)pc->w || h.data_bytes != bytes)
        why = "was built for other data or transforms";
    else if ((uint64_t)st.st_size != CACHE_HEADER + bytes)
        why = "has the wrong size (truncated?)";
    if (why) {
        close(fd);
        snprintf(pc->note, sizeof pc->note, "cache %s %s: rebuilding it", pc->path, why);
        return 1;
    }
    void *m = mmap(NULL, CACHE_HEADER + bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return errf(e, "%s: cannot map: %s", pc->path, strerror(errno));
    if (hash64((uint8_t *)m + CACHE_HEADER, bytes, 0x64617461) != h.data_sum) {
        munmap(m, CACHE_HEADER + bytes);
        snprintf(pc->note, sizeof pc->note, "cache %s is corrupt (checksum mismatch): rebuilding it",
                 pc->path);
        return 1;
    }
    pc->map = m;
    pc->map_len = CACHE_HEADER + bytes;
    pc->data = pc->map + CACHE_HEADER;
    pc->ready = 1;
    snprintf(pc->note, sizeof pc->note, "cache %s matches: reusing it, nothing to decode", pc->path);
    return 0;
}

static int create_temp(preload_cache *pc, errbuf *e)
{
    size_t bytes = (size_t)pc->n * pc->sample_bytes;
    size_t n = strlen(pc->path) + 32;
    pc->tmp_path = xmalloc(n);
    snprintf(pc->tmp_path, n, "%s.tmp.XXXXXX", pc->path);
    pc->fd = mkstemp(pc->tmp_path);
    if (pc->fd < 0) {
        errf(e, "%s: cannot create a temporary file next to it: %s", pc->path, strerror(errno));
        free(pc->tmp_path);
        pc->tmp_path = NULL;
        return -1;
    }
    fchmod(pc->fd, 0644);
    int rc = posix_fallocate(pc->fd, 0, (off_t)(CACHE_HEADER + bytes));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL)
        return errf(e, "%s: cannot allocate %zu bytes: %s", pc->tmp_path, CACHE_HEADER + bytes,
                    strerror(rc));
    if (ftruncate(pc->fd, (off_t)(CACHE_HEADER + bytes)) != 0)
        return errf(e, "%s: %s", pc->tmp_path, strerror(errno));
    void *m = mmap(NULL, CACHE_HEADER + bytes, PROT_READ | PROT_WRITE, MAP_SHARED, pc->fd, 0);
    if (m == MAP_FAILED)
        return errf(e, "%s: cannot map: %s", pc->tmp_path, strerror(errno));
    pc->map = m;
    pc->map_len = CACHE_HEADER + bytes;
    pc->data = pc->map + CACHE_HEADER;
    return 0;
}

int cache_open(preload_cache *pc, const char *path, uint32_t n, int c, int h, int w, uint64_t key,
               uint64_t mem_limit, errbuf *e)
{
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
    pc->n = n;
    pc->c = c;
    pc->h = h;
    pc->w = w;
    pc->key = key;
    pc->sample_bytes = (size_t)c * h * w;
    if (!path)
        return map_anonymous(pc, mem_limit, e) == 0 ? 0 : (cache_close(pc), -1);
    pc->path = xstrdup(path);
    int rc = try_reuse(pc, e);
    if (rc == 0)
        return 0;
    if (rc < 0 || create_temp(pc, e) != 0) {
        cache_close(pc);
        return -1;
    }
    return 0;
}

int cache_commit(preload_cache *pc, errbuf *e)
{
    if (!pc->tmp_path)
        return 0;
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
    h.data_sum = hash64(pc->data, (size_t)h.data_bytes, 0x64617461);
    h.header_sum = header_sum(&h);
    memcpy(pc->map, &h, sizeof h);
    if (msync(pc->map, pc->map_len, MS_SYNC) != 0 || fsync(pc->fd) != 0)
        return errf(e, "%s: cannot write the cache: %s", pc->tmp_path, strerror(errno));
    if (rename(pc->tmp_path, pc->path) != 0)
        return errf(e, "%s: cannot rename to %s: %s", pc->tmp_path, pc->path, strerror(errno));
    char *dir = xstrdup(pc->path), *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(pc->tmp_path);
    pc->tmp_path = NULL;
    pc->ready = 1;
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
    free(pc->path);
    memset(pc, 0, sizeof *pc);
    pc->fd = -1;
}
