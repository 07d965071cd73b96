/* cache.h — the preload cache: every training sample's base image (decoded,
 * resized, centre-cropped; u8 HWC), one after another, in memory shared by
 * all loader processes.
 *
 * Without a file it is one anonymous MAP_SHARED mapping, checked against
 * MemAvailable before it is taken. With --cache FILE it is a file mapping:
 * a matching file is mapped and used as it is (nothing is decoded); a
 * missing, stale, truncated or corrupt one is rebuilt into a temporary file
 * that is renamed over FILE when complete, so readers never see a partial
 * cache and two runs building at once each install a complete file.
 *
 * File format (little-endian): a 4096-byte header — magic "TRAINPC\n",
 * version, sample count, C, H, W, the key (CSV content + transform
 * parameters), a checksum of the data, the CSV's content hash, a checksum
 * of the stamps and a checksum of the header itself — then n * C * H * W
 * bytes, then one stamp per sample of its image file as it was when the
 * cache was built (size, inode, modification and change times): a file
 * rewritten, touched or replaced since then rebuilds the cache, and the
 * note names the first one. Stamping costs one stat() per image at start.
 */
#ifndef TRAIN_CACHE_H
#define TRAIN_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* A cache file's first 8 bytes. */
#define CACHE_MAGIC "TRAINPC\n"

#include "common/util.h"
#include "image/image.h"
#include "loader/dataset.h"

typedef struct preload_cache {
    uint8_t *data;       /* n * sample_bytes */
    size_t sample_bytes; /* C * H * W */
    uint32_t n;
    int c, h, w;
    uint64_t key;
    int ready; /* data is complete (reused from FILE): no build */
    /* internals */
    uint8_t *map;
    size_t map_len;
    int fd;
    char *path, *tmp_path; /* tmp_path: NULL while an unnamed (O_TMPFILE) build */
    int building;          /* a new file that cache_commit puts in place of path */
    char *node_path;       /* the node's file in memory, while it has a name (cache_node_unlink) */
    int node_mem; /* the leader of a node's file in memory: cache_commit writes the header */
    int follower; /* mapped read-only from the node's leader; ready after cache_node_check */
    const dataset *ds;
    void *stamps;           /* file_stamp per sample (file caches) */
    char note[2 * ERR_MAX]; /* what happened, for the user ("reusing ...") */
} preload_cache;

/* Key of a cache: the CSV's content and every parameter that changes the
 * base images. */
uint64_t cache_key(const dataset *ds, const img_params *p, int base_h, int base_w);

/* Map (or reuse) a cache for ds's n samples of c x h x w (ds must outlive
 * the cache). mem_limit 0 means 80% of MemAvailable; it only limits
 * anonymous (file-less) caches. Call before forking the loader. With
 * shareable, a file-less cache is a memfd and a reused file's descriptor
 * is kept, so that cache_share_fd can hand the cache to a program spawned
 * later (the Python module's loader supervisor). */
int cache_open_shared(preload_cache *pc, const char *path, const dataset *ds, int c, int h, int w,
                      uint64_t key, uint64_t mem_limit, int shareable, errbuf *e);
/* The descriptor behind the cache's mapping (-1: an anonymous mapping). */
int cache_share_fd(const preload_cache *pc);
/* In the spawned program: map the cache behind fd (taken over; file: a
 * --cache file, whose data follow the header) for ds's samples of
 * c x h x w. Read-only when fd is. */
int cache_attach(preload_cache *pc, int fd, const dataset *ds, int c, int h, int w, int file,
                 errbuf *e);

/* One copy for the ranks of a node (data-parallel preload). The leader
 * (local rank 0) makes node_path at full size and maps it read-write
 * (after the memory guard, for that one copy, when there is no path); the
 * other ranks (followers) wait up to wait_s seconds for it and map it
 * read-only. They must not read it before the leader's cache_commit:
 * the caller orders that (an agreement of the ranks), then followers call
 * cache_node_check. With path (--cache FILE) a matching FILE is reused by
 * each rank as by cache_open; else node_path is the build file that
 * cache_commit renames over FILE. */
int cache_open_node(preload_cache *pc, const char *path, const char *node_path, int leader,
                    const dataset *ds, int c, int h, int w, uint64_t key, uint64_t mem_limit,
                    double wait_s, errbuf *e);
/* The leader, once every rank of the node has mapped its file in memory:
 * its name goes, so that nothing is left in /dev/shm even if this process
 * is killed (cache_close does it otherwise). */
void cache_node_unlink(preload_cache *pc);
/* A follower, once the leader has committed: the header must say so. */
int cache_node_check(preload_cache *pc, errbuf *e);

/* After a build: checksum, header, fsync, rename over the target path. A
 * file-less cache needs nothing. */
int cache_commit(preload_cache *pc, errbuf *e);

/* memcpy and hash64 that survive the file under a mapping being
 * truncated (SIGBUS): 0, or -1 when a page was gone; CACHE_TRUNCATED
 * says so after the path. */
int cache_copy(void *dst, const void *src, size_t n);
int cache_hash(uint64_t *sum, const void *src, size_t n, uint64_t seed);
#define CACHE_TRUNCATED                                                                            \
    "the preload cache file was truncated while this run used it (SIGBUS); it is rebuilt by the "  \
    "next run"

/* Unmap; an uncommitted temporary file is removed. */
void cache_close(preload_cache *pc);

#endif
