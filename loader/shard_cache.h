/* shard_cache.h — remote shards (http://, https://, s3://) kept on local
 * disk while a run reads them: a shard is downloaded whole the first time
 * any process of the node asks for it, and read locally after that.
 *
 *   - one file per shard in the cache folder, named by a hash of its URL
 *     and its basename (`3fa2c1d0e4b5a697-train-000003.tar`); a download
 *     lands as NAME.part-PID and is renamed over NAME when complete, so a
 *     name in the folder is always a whole shard;
 *   - one download per node: the process that wants a shard takes an
 *     flock on NAME.lock and downloads it; another process that wants it
 *     blocks on that lock and then finds it there. The kernel drops the
 *     lock of a process that dies, so nobody waits on a dead one; the
 *     .part-PID files of dead processes are removed at the next eviction;
 *   - eviction, least recently used first (a hit touches the file's
 *     mtime), before each download, under an flock on the folder's .lock,
 *     and after it, until the shards fit in `limit` bytes. A shard a
 *     process still has open stays readable after its name is removed
 *     (POSIX), so eviction never breaks a reader; it only costs a second
 *     download when that shard is wanted again;
 *   - several processes, ranks and runs may share one folder.
 * Shards are keyed by URL only: an object replaced at the same URL is
 * not noticed (clear the folder, or use another). */
#ifndef TRAIN_SHARD_CACHE_H
#define TRAIN_SHARD_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"
#include "loader/remote.h"

typedef struct shard_cache_opts {
    char *dir;      /* the cache folder (created when missing) */
    uint64_t limit; /* bytes of shards to keep; 0: no limit */
    remote_opts ro; /* timeouts and retries of the downloads */
} shard_cache_opts;

/* What this process has done since it started (or shard_cache_stats_reset). */
typedef struct shard_cache_stats {
    uint64_t hits;      /* shards found in the cache */
    uint64_t downloads; /* shards this process downloaded */
    uint64_t bytes;     /* ... their bytes */
    uint64_t waits;     /* times it waited for another process's download */
    uint64_t evicted;   /* shards it removed to make room */
    double wait_s;      /* seconds spent waiting for shards (downloads included) */
} shard_cache_stats;
shard_cache_stats shard_cache_stats_get(void);
void shard_cache_stats_reset(void);

/* The local file holding `url`'s shard, downloading it when it is not
 * there: 0 with a path to it in path (/proc/self/fd/N of a descriptor
 * this process keeps, so an eviction cannot take it away before the
 * read), or -1 (REMOTE_MISSING: no such object) with e naming the URL
 * and why. */
int shard_cache_get(const shard_cache_opts *c, const char *url, char *path, size_t len, errbuf *e);

/* Read-ahead: download `url` into the cache unless it is there or another
 * process is downloading it (then return at once). 0, or -1 with e. */
int shard_cache_prefetch(const shard_cache_opts *c, const char *url, errbuf *e);

/* The local file for `url` when it is in the cache now (1, path filled),
 * else 0; downloads nothing. */
int shard_cache_peek(const shard_cache_opts *c, const char *url, char *path, size_t len);

/* The folder a --shard-cache argument names: "%h" becomes this host's
 * name (one folder per node when several share a file system). malloc'd. */
char *shard_cache_dir_expand(const char *arg);

/* Create c->dir (and its parents) when missing: 0, or -1 with e. */
int shard_cache_prepare(const shard_cache_opts *c, errbuf *e);

/* Remove the .part-PID files of processes that are gone (a run's
 * workers killed mid-download when it ended). */
void shard_cache_sweep(const shard_cache_opts *c);

/* Remove every file in dir and dir itself (a run's temporary cache). */
void shard_cache_remove_dir(const char *dir);

#endif
