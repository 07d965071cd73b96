/* tar.h — the regular-file members of a POSIX tar file, from its headers
 * (ustar, with pax 'x' headers and GNU 'L' long names honoured) or from its
 * DALI wds2idx index: what dataset_shards.c groups into samples. Reads
 * with pread on a descriptor the caller opened; nothing here knows about
 * samples, labels or images. */
#ifndef TRAIN_TAR_H
#define TRAIN_TAR_H

#include <stdint.h>
#include <sys/stat.h>

#include "common/util.h"

#define TAR_BLOCK 512

typedef struct tar_member {
    char *name;        /* as stored (a pax or GNU long name when there is one) */
    uint64_t off, len; /* the member's data in the file */
} tar_member;

typedef struct tar_members {
    tar_member *v;
    size_t n, cap;
} tar_members;

void tar_members_clear(tar_members *m); /* frees the names; n = 0 */
void tar_members_free(tar_members *m);

/* n bytes at off, all of them: 0, or -1 with errno (0 at the end of the
 * file). */
int tar_pread(int fd, void *buf, size_t n, uint64_t off);

/* Walk the headers of the tar file open on fd (size bytes; `path` starts
 * every message): each regular file (types '0', NUL, '7') into m, in
 * order; folders, links and global pax headers are passed over. Returns
 *   0        the archive ends with its end-of-archive block;
 *   TAR_CUT  the file ends early: inside a member (*cut gets that member's
 *            name, malloc'd), or without the end-of-archive block (*cut
 *            NULL); e says where; the members read whole are in m;
 *   -1       not a tar file, a corrupt header (bad checksum or size), a
 *            read error: e says which. */
#define TAR_CUT 1
int tar_scan(int fd, uint64_t size, const char *path, tar_members *m, char **cut, errbuf *e);

/* The members as the wds2idx v1.2 index beside the tar file lists them
 * (named as wds2idx names it: train-000003.tar -> train-000003.idx),
 * checked against the file open on fd (st its fstat): 0, or 1 when there
 * is no index to trust (see tar.c; m is left empty), then read the
 * headers. */
int tar_read_index(int fd, const struct stat *st, const char *path, tar_members *m);

/* The index's name for a tar file (train-000003.tar -> train-000003.idx:
 * up to the first '.' after the last '/' plus one character), malloc'd. */
char *tar_index_name(const char *tar);

/* Parse a wds2idx v1.2 index's text (changed in place) into m, every member
 * inside a file of `size` bytes (UINT64_MAX: not known): 0, or 1 when it
 * is not such an index (m left empty). */
int tar_parse_index(char *text, uint64_t size, tar_members *m);

/* The end of the last member's data, rounded up to whole blocks. */
uint64_t tar_members_end(const tar_members *m);

/* 1 when the tar header before x's data in the file open on fd is a
 * regular file's of x's size and name (an index that fits its shard). */
int tar_header_names(int fd, const tar_member *x);

#endif
