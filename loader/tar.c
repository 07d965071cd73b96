/* tar.c — see tar.h. The index is trusted only when it is as new as the
 * tar file and fits it (read_index's rules); anything else sends the
 * caller to the headers, which say what is wrong. */
#define _POSIX_C_SOURCE 200809L
#include "loader/tar.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PAX_MAX (1u << 20)   /* a pax header or GNU long name larger than this is refused */
#define INDEX_MAX (1u << 30) /* the largest index read */

void tar_members_clear(tar_members *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].name);
    m->n = 0;
}

void tar_members_free(tar_members *m)
{
    tar_members_clear(m);
    free(m->v);
    m->v = NULL;
    m->cap = 0;
}

static void members_add(tar_members *m, char *name, uint64_t off, uint64_t len)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 256;
        m->v = xrealloc(m->v, m->cap * sizeof *m->v);
    }
    m->v[m->n++] = (tar_member){name, off, len};
}

static char *concat(const char *a, size_t an, const char *b)
{
    size_t bn = strlen(b);
    char *s = xmalloc(an + bn + 1);
    memcpy(s, a, an);
    memcpy(s + an, b, bn + 1);
    return s;
}

/* n bytes at off, all of them (0), or -1 with errno (0 for end of file). */
int tar_pread(int fd, void *buf, size_t n, uint64_t off)
{
    long got = pread_full(fd, buf, n, off);
    if (got >= 0 && (size_t)got < n)
        errno = 0; /* the file ends first */
    return got == (long)n ? 0 : -1;
}

/* A numeric header field: octal text (NUL or space ended), or GNU's
 * base-256 (high bit of the first byte set) for sizes of 8 GiB and more. */
static int tar_number(const uint8_t *f, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (f[0] & 0x80) {
        if (f[0] != 0x80)
            return -1; /* negative, or too large */
        for (size_t i = 1; i < n; i++) {
            if (x >> 56)
                return -1;
            x = x << 8 | f[i];
        }
        *v = x;
        return 0;
    }
    size_t i = 0;
    while (i < n && f[i] == ' ')
        i++;
    int digits = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (x >> 60)
            return -1;
        x = x * 8 + (uint64_t)(f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    *v = x;
    return digits ? 0 : -1;
}

static int tar_checksum_ok(const uint8_t *h)
{
    uint64_t want;
    if (tar_number(h + 148, 8, &want) != 0)
        return 0;
    uint64_t u = 0;
    int64_t s = 0; /* some old tars summed signed bytes */
    for (int i = 0; i < TAR_BLOCK; i++) {
        int b = i >= 148 && i < 156 ? ' ' : h[i];
        u += (uint64_t)b;
        s += i >= 148 && i < 156 ? ' ' : (int8_t)h[i];
    }
    return u == want || (uint64_t)s == want;
}

static int all_zero(const uint8_t *h)
{
    for (int i = 0; i < TAR_BLOCK; i++)
        if (h[i])
            return 0;
    return 1;
}

/* A header's name: prefix "/" name, each NUL-ended or full width. */
static char *ustar_name(const uint8_t *h)
{
    char name[101], prefix[156];
    memcpy(name, h, 100), name[100] = '\0';
    memcpy(prefix, h + 345, 155), prefix[155] = '\0';
    if (memcmp(h + 257, "ustar", 5) != 0 || !prefix[0])
        return xstrdup(name);
    char *p = concat(prefix, strlen(prefix), "/"), *full = concat(p, strlen(p), name);
    free(p);
    return full;
}

/* The path= and size= records of a pax extended header. */
static void pax_records(const char *d, size_t n, char **path, uint64_t *size, int *has_size)
{
    size_t pos = 0;
    while (pos < n) {
        char *end;
        unsigned long long len = strtoull(d + pos, &end, 10);
        if (end == d + pos || *end != ' ' || len == 0 || len > n - pos)
            return;
        const char *kv = end + 1, *stop = d + pos + len - 1; /* stop: the record's '\n' */
        const char *eq = memchr(kv, '=', (size_t)(stop - kv));
        if (eq && (size_t)(eq - kv) == 4 && memcmp(kv, "path", 4) == 0) {
            free(*path);
            *path = concat(eq + 1, (size_t)(stop - eq - 1), "");
        } else if (eq && (size_t)(eq - kv) == 4 && memcmp(kv, "size", 4) == 0) {
            *size = strtoull(eq + 1, NULL, 10);
            *has_size = 1;
        }
        pos += len;
    }
}

/* A pax header's or GNU long name's data, NUL-ended. */
static char *read_meta(int fd, const char *path, uint64_t off, uint64_t len, errbuf *e)
{
    if (len > PAX_MAX) {
        errf(e, "%s: a tar extended header of %llu bytes at offset %llu (limit %u)", path,
             (unsigned long long)len, (unsigned long long)off, PAX_MAX);
        return NULL;
    }
    char *d = xmalloc((size_t)len + 1);
    if (tar_pread(fd, d, (size_t)len, off) != 0) {
        errf(e, "%s: read error at offset %llu: %s", path, (unsigned long long)off,
             errno ? strerror(errno) : "truncated");
        free(d);
        return NULL;
    }
    d[len] = '\0';
    return d;
}

/* Walk the tar's headers: every regular member into m (tar.h). */
int tar_scan(int fd, uint64_t size_all, const char *path, tar_members *m, char **cut, errbuf *e)
{
    uint64_t pos = 0, pax_size = 0;
    char *long_name = NULL;
    int has_pax_size = 0, rc = -1;
    const char *last = NULL; /* the last member's name, for messages */
    *cut = NULL;
    for (;;) {
        uint8_t h[TAR_BLOCK];
        if (pos + TAR_BLOCK > size_all) {
            if (pos == 0) {
                errf(e, "%s: not a tar file (%llu bytes, shorter than a tar header)", path,
                     (unsigned long long)size_all);
            } else {
                errf(e,
                     "%s: truncated: the archive ends at byte %llu without its "
                     "end-of-archive block%s%s%s",
                     path, (unsigned long long)size_all, last ? " (last member: " : "",
                     last ? last : "", last ? ")" : "");
                rc = TAR_CUT;
            }
            break;
        }
        if (tar_pread(fd, h, TAR_BLOCK, pos) != 0) {
            errf(e, "%s: read error at offset %llu: %s", path, (unsigned long long)pos,
                 errno ? strerror(errno) : "truncated");
            break;
        }
        if (all_zero(h)) {
            rc = 0;
            break;
        }
        if (!tar_checksum_ok(h)) {
            if (pos == 0)
                errf(e, "%s: not a tar file (no valid tar header at its start)", path);
            else
                errf(e, "%s: corrupt tar header at offset %llu (checksum)%s%s", path,
                     (unsigned long long)pos, last ? ", after member " : "", last ? last : "");
            break;
        }
        uint64_t size;
        if (tar_number(h + 124, 12, &size) != 0) {
            errf(e, "%s: corrupt tar header at offset %llu (size field)", path,
                 (unsigned long long)pos);
            break;
        }
        if (has_pax_size)
            size = pax_size;
        uint64_t data = pos + TAR_BLOCK;
        char type = (char)h[156];
        if (type == 'x' || type == 'L') {
            if (data + size > size_all) {
                errf(e, "%s: truncated inside a tar extended header at offset %llu", path,
                     (unsigned long long)pos);
                rc = TAR_CUT;
                break;
            }
            char *d = read_meta(fd, path, data, size, e);
            if (!d)
                break;
            if (type == 'L') {
                free(long_name);
                long_name = d;
            } else {
                pax_records(d, (size_t)size, &long_name, &pax_size, &has_pax_size);
                free(d);
            }
            pos = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
            continue;
        }
        char *name = long_name ? long_name : ustar_name(h);
        long_name = NULL;
        has_pax_size = 0;
        if (type == '0' || type == '\0' || type == '7') {
            if (size > size_all - data) { /* data <= size_all: its header was read */
                errf(e,
                     "%s: member %s: truncated (%llu bytes at offset %llu; the shard ends %llu "
                     "bytes into it)",
                     path, name, (unsigned long long)size, (unsigned long long)data,
                     (unsigned long long)(size_all - data));
                *cut = name;
                rc = TAR_CUT;
                break;
            }
            members_add(m, name, data, size);
            last = name;
        } else {
            free(name); /* folders, links, devices, global pax headers */
        }
        pos = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
    }
    free(long_name);
    return rc;
}

/* wds2idx's index name: up to the first '.' after the last '/' plus one
 * character, then ".idx". */
char *tar_index_name(const char *tar)
{
    const char *slash = strrchr(tar, '/');
    size_t from = slash ? (size_t)(slash - tar) + 2 : 1;
    const char *dot = strlen(tar) > from ? strchr(tar + from, '.') : NULL;
    size_t n = dot ? (size_t)(dot - tar) : strlen(tar);
    return concat(tar, n, ".idx");
}

/* The tar header before member x's data is a regular file's, of its size
 * and its name: an index of another shard (wds2idx names a.b.tar's and
 * a.c.tar's both a.idx) or of an older one does not pass for this one's.
 * (A name longer than a ustar header holds, in a pax or GNU header, does
 * not match either: such shards are read through their headers.) */
static int header_names(int fd, const tar_member *x)
{
    uint8_t h[TAR_BLOCK];
    uint64_t size;
    if (x->off < TAR_BLOCK || tar_pread(fd, h, TAR_BLOCK, x->off - TAR_BLOCK) != 0 ||
        !tar_checksum_ok(h) || tar_number(h + 124, 12, &size) != 0 || size != x->len ||
        !(h[156] == '0' || h[156] == '\0' || h[156] == '7'))
        return 0;
    char *name = ustar_name(h);
    int same = strcmp(name, x->name) == 0;
    free(name);
    return same;
}

/* The members as the sidecar index lists them (tar.h): 0, or 1 when there is no
 * index to trust (none; older than the shard; not v1.2; a member outside
 * the shard, the shard too short for its end-of-archive blocks after the
 * last one, or the first or last member's tar header not the index's:
 * header_names): then the headers are read, which say what is wrong. */
int tar_parse_index(char *text, uint64_t size, tar_members *m)
{
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    unsigned long long want = 0, samples = 0;
    char ver[8];
    if (!line || sscanf(line, "%7s %llu", ver, &want) != 2 || strcmp(ver, "v1.2") != 0)
        goto bad;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        samples++;
        char *tok_save = NULL, *f[4];
        int k = 0;
        for (char *tok = strtok_r(line, " ", &tok_save); tok;
             tok = strtok_r(NULL, " ", &tok_save)) {
            f[k++ % 4] = tok;
            if (k % 4)
                continue;
            char *eo, *es; /* f: ext offset size name */
            unsigned long long off = strtoull(f[1], &eo, 10), len = strtoull(f[2], &es, 10);
            if (*eo || *es || off % TAR_BLOCK || off > size || len > size - off)
                goto bad;
            members_add(m, xstrdup(f[3]), off, len);
        }
        if (k == 0 || k % 4 != 0)
            goto bad;
    }
    if (samples == want && m->n)
        return 0;
bad:
    tar_members_clear(m);
    return 1;
}

uint64_t tar_members_end(const tar_members *m)
{
    uint64_t end = 0;
    for (size_t i = 0; i < m->n; i++) {
        uint64_t x = (m->v[i].off + m->v[i].len + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (x > end)
            end = x;
    }
    return end;
}

int tar_header_names(int fd, const tar_member *x) { return header_names(fd, x); }

int tar_read_index(int tfd, const struct stat *tst, const char *path, tar_members *m)
{
    char *idx = tar_index_name(path);
    const uint64_t size = (uint64_t)tst->st_size;
    struct stat st;
    int fd = open(idx, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    free(idx);
    if (fd < 0)
        return 1;
    char *text = NULL;
    int rc = 1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > INDEX_MAX ||
        st.st_mtim.tv_sec < tst->st_mtim.tv_sec ||
        (st.st_mtim.tv_sec == tst->st_mtim.tv_sec && st.st_mtim.tv_nsec < tst->st_mtim.tv_nsec))
        goto out;
    text = xmalloc((size_t)st.st_size + 1);
    if (tar_pread(fd, text, (size_t)st.st_size, 0) != 0)
        goto out;
    text[st.st_size] = '\0';
    if (tar_parse_index(text, size, m) == 0 && tar_members_end(m) + 2 * TAR_BLOCK <= size &&
        header_names(tfd, &m->v[0]) && header_names(tfd, &m->v[m->n - 1]))
        rc = 0;
out:
    if (rc != 0)
        tar_members_clear(m);
    free(text);
    close(fd);
    return rc;
}
