/* dataset_shards.c — a data set stored as WebDataset tar shards (written by
 * tools/shard, the `webdataset` library's ShardWriter, or plain tar), read
 * into the same dataset a CSV gives: each row names its shard (the row's
 * path) and where its image lies in it (dataset.members), so a sample is
 * one pread of the member's bytes and every sampling guarantee of the
 * loader holds unchanged.
 *
 * Rules (webdataset's and DALI's readers.webdataset's, except where noted):
 *   - the spec is one name or a comma list; each name may hold brace
 *     groups, `{000000..000099}` (a numeric range, zero-padded to the
 *     longer end's width when either end starts with 0) or `{a,b}`; every
 *     name it expands to must end in ".tar" (no compression); or the spec
 *     is a list file, one such name a line (blank lines and # comments
 *     passed over; relative names start from its folder), told from a CSV
 *     by its first line (a shard name without a comma);
 *   - a POSIX tar (ustar; pax 'x' headers and GNU 'L' long names are
 *     honoured; read by tar.c); only regular files are members, folders
 *     and links are passed over; a header's checksum is checked; the
 *     archive must end with its end-of-archive block (a shard cut short is
 *     refused: neither peer says so, they stop early);
 *   - the members sharing a key, the name up to the first '.' of its last
 *     path component, and following each other form one sample (a key
 *     that comes back later is another sample, as in both peers);
 *     members whose last component starts with '.' are passed over;
 *   - the image is the member whose extension (after that first '.', any
 *     case) is one the decoder reads: jpg jpeg png ppm pgm pnm bmp gif
 *     tga webp; the label is the .cls member, a decimal integer (text;
 *     .txt and .json labels are not read); a sample with neither, two
 *     images, or a bad label is a bad sample: an error naming shard and
 *     member, or with skip_bad dropped and counted (with list_bad, --check,
 *     listed and counted);
 *   - with the shard's sidecar index in DALI's wds2idx format (v1.2: the
 *     file named as wds2idx names it, train-000003.tar ->
 *     train-000003.idx, not older than the shard) the members come from it
 *     and the headers are not read; an index that cannot be trusted (see
 *     read_index) is passed over for the headers;
 *   - classes.txt beside the first shard (one name a line, in id order, as
 *     tools/shard writes it) gives class names; without it labels are
 *     numbers and there are largest + 1 classes.
 * Rows are numbered (dataset_row.line) by their position in the set.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader/dataset.h"
#include "loader/fingerprint.h"
#include "loader/remote.h"
#include "loader/shard_cache.h"
#include "loader/tar.h"

#define SHARDS_MAX 1000000 /* names a spec may expand to */
#define LABEL_LIMIT 1000000
#define SIDECAR_MAX (1u << 30) /* the largest index or labels file fetched */

/* ---------------------------------------------------------------- names */

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static void names_add(names *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
}

static void names_free(names *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static char *concat3(const char *a, size_t an, const char *b, size_t bn, const char *c)
{
    size_t cn = strlen(c);
    char *s = xmalloc(an + bn + cn + 1);
    memcpy(s, a, an);
    memcpy(s + an, b, bn);
    memcpy(s + an + bn, c, cn + 1);
    return s;
}

/* "A..B" with decimal A and B: 1 with the range, else 0. */
static int numeric_range(const char *s, size_t n, long long *a, long long *b, int *width)
{
    const char *dots = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (s[i] == '.' && s[i + 1] == '.') {
            dots = s + i;
            break;
        }
    if (!dots)
        return 0;
    size_t la = (size_t)(dots - s), lb = n - la - 2;
    if (!la || !lb || la > 18 || lb > 18)
        return 0;
    char x[20], y[20];
    memcpy(x, s, la), x[la] = '\0';
    memcpy(y, dots + 2, lb), y[lb] = '\0';
    for (size_t i = 0; i < la; i++)
        if (!isdigit((unsigned char)x[i]))
            return 0;
    for (size_t i = 0; i < lb; i++)
        if (!isdigit((unsigned char)y[i]))
            return 0;
    *a = strtoll(x, NULL, 10);
    *b = strtoll(y, NULL, 10);
    *width = (x[0] == '0' && la > 1) || (y[0] == '0' && lb > 1) ? (int)(la > lb ? la : lb) : 0;
    return 1;
}

/* Every name the pattern s expands to, appended to out. */
static int expand(const char *spec, const char *s, names *out, errbuf *e)
{
    const char *open = strchr(s, '{');
    if (!open) {
        if (out->n >= SHARDS_MAX)
            return errf(e, "%s: expands to more than %d names", spec, SHARDS_MAX);
        names_add(out, xstrdup(s));
        return 0;
    }
    const char *close = strchr(open, '}');
    const char *nested = strchr(open + 1, '{');
    if (!close || (nested && nested < close))
        return errf(e, "%s: unbalanced or nested '{' (braces hold A..B or a,b)", spec);
    size_t pre = (size_t)(open - s), in = (size_t)(close - open - 1);
    long long a, b;
    int width;
    if (numeric_range(open + 1, in, &a, &b, &width)) {
        if (b < a)
            return errf(e, "%s: range {%.*s} runs backwards", spec, (int)in, open + 1);
        if (b - a >= SHARDS_MAX)
            return errf(e, "%s: expands to more than %d names", spec, SHARDS_MAX);
        for (long long k = a; k <= b; k++) {
            char num[32];
            int len = snprintf(num, sizeof num, "%0*lld", width, k);
            char *t = concat3(s, pre, num, (size_t)len, close + 1);
            int rc = expand(spec, t, out, e);
            free(t);
            if (rc != 0)
                return rc;
        }
        return 0;
    }
    if (!memchr(open + 1, ',', in)) /* {000000...000009}: a typo, not one literal name */
        return errf(e, "%s: {%.*s} is neither a range {A..B} of numbers nor a list {a,b}", spec,
                    (int)in, open + 1);
    for (const char *alt = open + 1;;) { /* {a,b,c} */
        const char *end = memchr(alt, ',', (size_t)(close - alt));
        if (!end)
            end = close;
        char *t = concat3(s, pre, alt, (size_t)(end - alt), close + 1);
        int rc = expand(spec, t, out, e);
        free(t);
        if (rc != 0)
            return rc;
        if (end == close)
            return 0;
        alt = end + 1;
    }
}

/* The spec's names: split at the commas outside braces, each expanded. */
static int expand_spec(const char *spec, names *out, errbuf *e)
{
    size_t n = strlen(spec);
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && spec[i] == '{')
            depth++;
        else if (i < n && spec[i] == '}')
            depth--;
        if (i < n && !(spec[i] == ',' && depth == 0))
            continue;
        if (i == start)
            return errf(e, "%s: an empty name in the shard list", spec);
        char *piece = xmalloc(i - start + 1);
        memcpy(piece, spec + start, i - start);
        piece[i - start] = '\0';
        int rc = expand(spec, piece, out, e);
        free(piece);
        if (rc != 0)
            return rc;
        start = i + 1;
    }
    return 0;
}

static int ends_with_tar(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && strcmp(s + n - 4, ".tar") == 0;
}

static int names_are_shards(const char *spec)
{
    size_t n = strlen(spec);
    if (n < 5 || !(ends_with_tar(spec) || strstr(spec, ".tar,") || strstr(spec, ".tar}")))
        return 0;
    names l = {0};
    errbuf e;
    int yes = expand_spec(spec, &l, &e) == 0 && l.n > 0;
    for (size_t i = 0; yes && i < l.n; i++)
        yes = ends_with_tar(l.v[i]);
    names_free(&l);
    return yes;
}

/* A list file's next line, without blanks around it, or NULL at the end;
 * blank lines and '#' comments passed over. */
static char *list_line(char **pos)
{
    while (**pos) {
        char *line = *pos, *end = strchr(line, '\n');
        *pos = end ? end + 1 : line + strlen(line);
        if (end)
            *end = '\0';
        while (isspace((unsigned char)*line))
            line++;
        size_t n = strlen(line);
        while (n && isspace((unsigned char)line[n - 1]))
            line[--n] = '\0';
        if (n && line[0] != '#')
            return line;
    }
    return NULL;
}

/* A shard list file: a regular file whose first line names shards (a
 * CSV's first line has two columns, so never does). */
static int is_list_file(const char *spec)
{
    int fd = open(spec, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return 0;
    struct stat st;
    char buf[4097];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, buf, 4096, 0) : -1;
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *pos = buf, *line = list_line(&pos);
    return line && (*pos || (size_t)n < 4096) && !strchr(line, ',') && names_are_shards(line);
}

/* s3://bucket/prefix/: every .tar under the prefix */
static int is_s3_prefix(const char *spec)
{
    size_t n = strlen(spec);
    return !strncmp(spec, "s3://", 5) && n > 5 && spec[n - 1] == '/';
}

int dataset_is_shards(const char *spec)
{
    /* train reads no CSV or folder behind a URL: a URL spec is shards,
     * and a malformed pattern gets the shard list's message */
    return names_are_shards(spec) || remote_is_url(spec) || ends_with_tar(spec) ||
           is_list_file(spec);
}

static int expand_list_file(const char *list, names *out, errbuf *e);

int dataset_is_remote(const char *spec)
{
    if (remote_is_url(spec))
        return 1;
    names l = {0};
    errbuf e;
    int yes = 0;
    if (names_are_shards(spec) ? expand_spec(spec, &l, &e) == 0
                               : is_list_file(spec) && expand_list_file(spec, &l, &e) == 0)
        yes = l.n && remote_is_url(l.v[0]);
    names_free(&l);
    return yes;
}

/* The names of a list file's lines, expanded; relative ones start from the
 * file's folder, as a CSV's paths do. */
static int expand_list_file(const char *list, names *out, errbuf *e)
{
    size_t len;
    char *text = read_regular_file(list, 1u << 30, &len, e);
    if (!text)
        return -1;
    const char *slash = strrchr(list, '/');
    size_t dl = slash ? (size_t)(slash - list) + 1 : 0;
    char *pos = text, *line;
    int rc = 0, k = 0;
    while (rc == 0 && (line = list_line(&pos)) != NULL) {
        k++;
        char *full = line[0] == '/' ? xstrdup(line) : concat3(list, dl, line, strlen(line), "");
        size_t before = out->n;
        rc = expand_spec(full, out, e);
        for (size_t i = before; rc == 0 && i < out->n; i++)
            if (!ends_with_tar(out->v[i]))
                rc = errf(e, "%s:%d: %s does not end in .tar (one shard or pattern a line)", list,
                          k, out->v[i]);
        free(full);
    }
    free(text);
    if (rc == 0 && out->n == 0)
        rc = errf(e, "%s: names no shards", list);
    return rc;
}

/* ---------------------------------------------------------------- shards */

/* A shard's .labels sidecar (tools/shard writes it): per sample, in
 * order, its label and key. */
typedef struct label_list {
    int32_t *label;
    char **key;
    size_t n;
} label_list;

typedef struct shard_read {
    const char *path;         /* the shard as named (a URL for a remote one) */
    const char *local;        /* the file read, when not path (a cached remote shard) */
    const label_list *labels; /* the sidecar's labels, or NULL: read the .cls members */
    size_t next_label;
    int fd;
    uint64_t size;
    const csv_opts *o;
    uint32_t *bad;
    char *first_bad;
    errbuf *e;
} shard_read;

/* A problem with one sample or member: fatal, or counted under skip_bad. */
static int sample_problem(shard_read *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int sample_problem(shard_read *s, const char *fmt, ...)
{
    char why[ERR_MAX - 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (!s->o->skip_bad && !s->o->list_bad)
        return errf(s->e, "%s: %s", s->path, why);
    if (!s->o->skip_bad && *s->bad < CSV_LIST_BAD) { /* --check: every bad sample, counted */
        char a[ESC_MAX], b[ESC_MAX];
        fprintf(s->o->list_bad, "%s: %s\n", esc_path(s->path, a, sizeof a),
                esc_path(why, b, sizeof b));
    }
    if ((*s->bad)++ == 0)
        snprintf(s->first_bad, ERR_MAX, "%.200s: %.300s", s->path, why);
    return 0;
}

/* The key's length (up to the first '.' of the last component), or 0 for
 * a name to pass over (hidden, or no key). */
static size_t key_len(const char *name, const char **ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    *ext = dot ? dot + 1 : "";
    if (dot == base || !*base)
        return 0;
    return dot ? (size_t)(dot - name) : strlen(name);
}

/* ---------------------------------------------------------------- samples */

static const char *const image_exts[] = {"jpg", "jpeg", "png", "ppm", "pgm",
                                         "pnm", "bmp",  "gif", "tga", "webp"};

static int is_image_ext(const char *ext)
{
    for (size_t i = 0; i < sizeof image_exts / sizeof *image_exts; i++)
        if (strcasecmp(ext, image_exts[i]) == 0)
            return 1;
    return 0;
}

typedef struct builder {
    char *strs;
    size_t len, cap;
    dataset_member *mem;
    uint64_t *path;
    int32_t *label;
    size_t n, rcap;
} builder;

static uint64_t builder_str(builder *b, const char *s)
{
    size_t n = strlen(s) + 1;
    if (b->len + n > b->cap) {
        b->cap = b->cap ? b->cap : 4096;
        while (b->len + n > b->cap)
            b->cap *= 2;
        b->strs = xrealloc(b->strs, b->cap);
    }
    memcpy(b->strs + b->len, s, n);
    b->len += n;
    return b->len - n;
}

static void builder_row(builder *b, uint64_t path, const tar_member *m, uint64_t name,
                        int32_t label)
{
    if (b->n == b->rcap) {
        b->rcap = b->rcap ? 2 * b->rcap : 1024;
        b->mem = xrealloc(b->mem, b->rcap * sizeof *b->mem);
        b->path = xrealloc(b->path, b->rcap * sizeof *b->path);
        b->label = xrealloc(b->label, b->rcap * sizeof *b->label);
    }
    b->mem[b->n] = (dataset_member){m->off, m->len, name};
    b->path[b->n] = path;
    b->label[b->n] = label;
    b->n++;
}

/* A .cls member's class id; -1 with the reason in why. */
static int64_t read_cls(shard_read *s, const tar_member *m, char *why, size_t n)
{
    char buf[32];
    if (m->len == 0 || m->len >= sizeof buf) {
        snprintf(why, n, "member %s: not a class id (%llu bytes)", m->name,
                 (unsigned long long)m->len);
        return -1;
    }
    if (tar_pread(s->fd, buf, (size_t)m->len, m->off) != 0) {
        snprintf(why, n, "member %s: read error: %s", m->name,
                 errno ? strerror(errno) : "truncated");
        return -1;
    }
    buf[m->len] = '\0';
    size_t end = (size_t)m->len;
    while (end > 0 && isspace((unsigned char)buf[end - 1]))
        buf[--end] = '\0';
    long long v;
    if (parse_i64(buf, &v) != 0 || v < 0 || v > LABEL_LIMIT) {
        snprintf(why, n, "member %s: '%s' is not a class id (a decimal integer 0..%d)", m->name,
                 buf, LABEL_LIMIT);
        return -1;
    }
    return v;
}

/* One sample: members [a, b) of m, sharing a key. */
static int add_sample(shard_read *s, builder *b, uint64_t path, const tar_members *m, size_t a,
                      size_t k)
{
    int64_t side = -1; /* the sidecar's label */
    if (s->labels) {   /* its next line is this sample's, good or bad */
        const char *ext;
        size_t kl = key_len(m->v[a].name, &ext);
        const char *want = s->next_label < s->labels->n ? s->labels->key[s->next_label] : NULL;
        if (!want || strlen(want) != kl || memcmp(want, m->v[a].name, kl) != 0)
            return errf(s->e,
                        "%s: sample %.*s is not the next in its .labels file (%s): the index and "
                        "the labels do not belong together (write both again with tools/shard)",
                        s->path, (int)kl, m->v[a].name, want ? want : "it has no more");
        side = s->labels->label[s->next_label++];
    }
    size_t image = SIZE_MAX, cls = SIZE_MAX;
    for (size_t i = a; i < k; i++) {
        const char *ext;
        key_len(m->v[i].name, &ext);
        if (is_image_ext(ext)) {
            if (image != SIZE_MAX)
                return sample_problem(s, "members %s and %s: two images in one sample",
                                      m->v[image].name, m->v[i].name);
            image = i;
        } else if (strcasecmp(ext, "cls") == 0) {
            cls = i;
        }
    }
    if (image == SIZE_MAX)
        return sample_problem(s,
                              "member %s: a sample without an image (no member ending in .jpg "
                              ".jpeg .png .ppm .pgm .pnm .bmp .gif .tga .webp)",
                              m->v[a].name);
    if (cls == SIZE_MAX && !s->labels)
        return sample_problem(s, "member %s: no label (no .cls member with the same key)",
                              m->v[image].name);
    char why[ERR_MAX - 64];
    int64_t label = s->labels ? side : read_cls(s, &m->v[cls], why, sizeof why);
    if (label < 0)
        return sample_problem(s, "%s", why);
    if (b->n >= UINT32_MAX - 1)
        return errf(s->e, "%s: too many samples (limit %u)", s->path, UINT32_MAX - 1);
    builder_row(b, path, &m->v[image], builder_str(b, m->v[image].name), (int32_t)label);
    return 0;
}

static int group_samples(shard_read *s, builder *b, uint64_t path, const tar_members *m)
{
    size_t a = 0;
    while (a < m->n) {
        const char *ext;
        size_t kl = key_len(m->v[a].name, &ext);
        if (!kl) {
            a++;
            continue;
        }
        size_t k = a + 1;
        for (; k < m->n; k++) {
            size_t kl2 = key_len(m->v[k].name, &ext);
            if (kl2 != kl || memcmp(m->v[k].name, m->v[a].name, kl) != 0)
                break;
        }
        if (add_sample(s, b, path, m, a, k) != 0)
            return -1;
        a = k;
    }
    return 0;
}

/* The shard's headers: a shard cut short is a bad sample (the last,
 * whose members go with it) under skip_bad, else fatal. */
static int scan_shard(shard_read *s, tar_members *m)
{
    char *cut;
    errbuf te;
    int rc = tar_scan(s->fd, s->size, s->path, m, &cut, &te);
    if (rc < 0)
        return errf(s->e, "%s", te.msg);
    if (rc == TAR_CUT) {
        const char *ext;
        size_t kl = cut ? key_len(cut, &ext) : 0;
        while (kl && m->n && key_len(m->v[m->n - 1].name, &ext) == kl &&
               memcmp(m->v[m->n - 1].name, cut, kl) == 0)
            free(m->v[--m->n].name);
        free(cut);
        size_t pl = strlen(s->path); /* te.msg starts with the path: once is enough */
        rc = sample_problem(s, "%s", strncmp(te.msg, s->path, pl) ? te.msg : te.msg + pl + 2);
    }
    return rc;
}

static int read_shard(shard_read *s, builder *b, tar_members *m)
{
    const char *file = s->local ? s->local : s->path;
    s->fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (s->fd < 0)
        return errf(s->e, "%s: cannot open the shard: %s", file, strerror(errno));
    struct stat st;
    int rc = -1;
    if (fstat(s->fd, &st) != 0) {
        errf(s->e, "%s: %s", s->path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        errf(s->e, "%s: %s, not a tar shard", s->path, file_kind(st.st_mode));
    } else {
        s->size = (uint64_t)st.st_size;
        uint64_t path = builder_str(b, s->path);
        tar_members_clear(m);
        int ir = tar_read_index(s->fd, &st, file, m);
        if (ir == 1)
            ir = scan_shard(s, m);
        rc = ir == 0 ? group_samples(s, b, path, m) : -1;
    }
    close(s->fd);
    return rc;
}

/* ---------------------------------------------------------------- classes */

/* classes.txt beside the first shard (fetched when it is a URL): its
 * names into the string buffer and their offsets into *offs; the count,
 * 0 when absent, -1 bad. */
static long read_classes(const char *first_shard, int remote, const remote_opts *ro, builder *b,
                         uint64_t **offs, char **where, errbuf *e)
{
    const char *slash = strrchr(first_shard, '/');
    size_t dl = slash ? (size_t)(slash - first_shard) + 1 : 0;
    char *path = concat3(first_shard, dl, "classes.txt", 11, "");
    char *text = NULL;
    size_t len = 0;
    if (remote) {
        int rc = remote_get_mem(path, SIDECAR_MAX, &text, &len, ro, e);
        if (rc != 0) {
            free(path);
            return rc == REMOTE_MISSING ? 0 : -1;
        }
    } else {
        errbuf ignore; /* none there, or not readable: no class names */
        if (!(text = read_regular_file(path, SIDECAR_MAX, &len, &ignore))) {
            free(path);
            return 0;
        }
    }
    long n = 0, cap = 0;
    char *pos = text;
    while (*pos) {
        char *line = pos, *end = strchr(line, '\n');
        pos = end ? end + 1 : line + strlen(line);
        if (end)
            *end = '\0';
        size_t l = strlen(line);
        while (l && line[l - 1] == '\r')
            line[--l] = '\0';
        if (!l) {
            free(*offs);
            *offs = NULL;
            errf(e, "%s:%ld: an empty class name", path, n + 1);
            free(path);
            free(text);
            return -1;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *offs = xrealloc(*offs, (size_t)cap * sizeof **offs);
        }
        (*offs)[n++] = builder_str(b, line);
    }
    free(text);
    *where = path;
    return n;
}

/* ---------------------------------------------------------------- remote */

static void label_list_free(label_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->key[i]);
    free(l->key);
    free(l->label);
    memset(l, 0, sizeof *l);
}

/* A .labels sidecar's text: `train-labels v1 N`, then N lines `LABEL KEY`. */
static int parse_labels(char *text, const char *url, label_list *l, errbuf *e)
{
    char *pos = text, *line = list_line(&pos);
    unsigned long long want;
    char magic[16], ver[8];
    if (!line || sscanf(line, "%15s %7s %llu", magic, ver, &want) != 3 ||
        strcmp(magic, "train-labels") || strcmp(ver, "v1"))
        return errf(e, "%s: not a labels file (its first line is not `train-labels v1 N`)", url);
    size_t cap = 0;
    for (int k = 2; (line = list_line(&pos)) != NULL; k++) {
        char *sp = strchr(line, ' ');
        long long v;
        if (sp)
            *sp = '\0';
        if (!sp || !sp[1] || parse_i64(line, &v) != 0 || v < 0 || v > LABEL_LIMIT)
            return errf(e, "%s:%d: not `LABEL KEY` with a class id 0..%d", url, k, LABEL_LIMIT);
        if (l->n == cap) {
            cap = cap ? 2 * cap : 1024;
            l->label = xrealloc(l->label, cap * sizeof *l->label);
            l->key = xrealloc(l->key, cap * sizeof *l->key);
        }
        l->label[l->n] = (int32_t)v;
        l->key[l->n++] = xstrdup(sp + 1);
    }
    if (l->n != want)
        return errf(e, "%s: %zu labels, but its first line says %llu", url, l->n, want);
    return 0;
}

/* A remote shard's sidecar: its URL with ".tar" replaced by ".EXT"
 * (train-000003.tar -> train-000003.idx, as tools/shard and wds2idx name
 * it; v1.0-000003.tar -> v1.0-000003.idx, where wds2idx's first-dot rule
 * would give the v1.idx of every v1.* shard). */
static char *sidecar_name(const char *tar, const char *ext)
{
    return concat3(tar, strlen(tar) - 4, ".", 1, ext);
}

/* A shard behind a URL: its members from the .idx and its labels from the
 * .labels beside it, two small requests; a shard without them is
 * downloaded into the shard cache now and read like a local one (its
 * first epoch then reads it from there). *slow counts those. */
static int read_remote_shard(shard_read *s, builder *b, tar_members *m, const shard_cache_opts *c,
                             uint32_t *slow)
{
    char *idx_url = sidecar_name(s->path, "idx"), *lab_url = sidecar_name(s->path, "labels");
    char *idx = NULL, *lab = NULL;
    size_t il = 0, ll = 0;
    label_list labels = {0};
    int rc = remote_get_mem(idx_url, SIDECAR_MAX, &idx, &il, &c->ro, s->e);
    if (rc == 0)
        rc = remote_get_mem(lab_url, SIDECAR_MAX, &lab, &ll, &c->ro, s->e);
    if (rc == 0) {
        tar_members_clear(m);
        if (tar_parse_index(idx, UINT64_MAX, m) != 0)
            rc = errf(s->e, "%s: not a wds2idx v1.2 index", idx_url);
        else if ((rc = parse_labels(lab, lab_url, &labels, s->e)) == 0) {
            s->labels = &labels;
            uint64_t path = builder_str(b, s->path);
            rc = group_samples(s, b, path, m);
            if (rc == 0 && s->next_label != labels.n)
                rc =
                    errf(s->e, "%s: %zu labels for %zu samples (write both again with tools/shard)",
                         lab_url, labels.n, s->next_label);
            s->labels = NULL;
        }
    } else if (rc == REMOTE_MISSING) { /* no sidecars: the shard itself */
        char local[4096];
        (*slow)++;
        rc = shard_cache_get(c, s->path, local, sizeof local, s->e);
        if (rc == 0) {
            s->local = local;
            rc = read_shard(s, b, m);
            s->local = NULL;
        }
    }
    label_list_free(&labels);
    free(idx);
    free(lab);
    free(idx_url);
    free(lab_url);
    return rc == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- load */

static void pack(dataset *ds, builder *b, const uint64_t *cls, long ncls)
{
    size_t n = b->n;
    ds->rows = xmalloc(n * sizeof(dataset_row) + (size_t)ncls * sizeof(uint64_t));
    int32_t maxl = -1;
    for (size_t i = 0; i < n; i++) {
        ds->rows[i] =
            (dataset_row){.path = b->path[i], .label = b->label[i], .line = (uint32_t)(i + 1)};
        if (b->label[i] > maxl)
            maxl = b->label[i];
    }
    if (ncls > 0) {
        ds->class_names = (uint64_t *)(ds->rows + n);
        memcpy(ds->class_names, cls, (size_t)ncls * sizeof *cls);
        ds->names = 1;
        ds->nclasses = (uint32_t)ncls;
    } else {
        ds->nclasses = (uint32_t)(maxl + 1);
    }
    ds->members = b->mem;
    b->mem = NULL;
    ds->strs = b->strs;
    ds->strs_len = b->len;
    b->strs = NULL;
    ds->n = (uint32_t)n;
}

static int shards_load(dataset *ds, const char *spec, const csv_opts *o, errbuf *e)
{
    names l = {0};
    builder b = {0};
    tar_members m = {0};
    uint64_t *cls = NULL;
    uint32_t *first = NULL; /* shard_first */
    char *cls_path = NULL, first_bad[ERR_MAX] = "";
    uint32_t bad = 0;
    int rc = -1;
    if (is_s3_prefix(spec)) {
        if (!o->shard_cache) {
            errf(e, "%s: URLs are not read here", spec);
            goto out;
        }
        char **urls;
        size_t nu;
        if (remote_list(spec, &o->shard_cache->ro, &urls, &nu, e) != 0)
            goto out;
        for (size_t i = 0; i < nu; i++)
            if (ends_with_tar(urls[i]))
                names_add(&l, urls[i]);
            else
                free(urls[i]);
        free(urls);
        if (!l.n) {
            errf(e, "%s: no .tar objects under this prefix (%zu other objects)", spec, nu);
            goto out;
        }
    } else if (names_are_shards(spec) || remote_is_url(spec) || ends_with_tar(spec)
                   ? expand_spec(spec, &l, e) != 0
                   : expand_list_file(spec, &l, e) != 0)
        goto out;
    for (size_t i = 0; i < l.n; i++)
        if (!ends_with_tar(l.v[i])) {
            errf(e, "%s: %s does not end in .tar (shards are .tar files; quote a brace pattern)",
                 spec, l.v[i]);
            goto out;
        }
    const int remote = remote_is_url(l.v[0]);
    for (size_t i = 1; i < l.n; i++)
        if (remote_is_url(l.v[i]) != remote) {
            errf(e, "%s: mixes URLs and local files (%s, %s)", spec, l.v[0], l.v[i]);
            goto out;
        }
    if (remote && !o->shard_cache) {
        errf(e, "%s: URLs are not read here", spec);
        goto out;
    }
    if (o->root || o->path_col || o->label_col || o->header >= 0)
        if (o->warn)
            fprintf(o->warn,
                    "train: note: %s names tar shards: the CSV options (--root, --path-col, "
                    "--label-col, --header) do not apply to them\n",
                    spec);
    long ncls =
        read_classes(l.v[0], remote, remote ? &o->shard_cache->ro : NULL, &b, &cls, &cls_path, e);
    if (ncls < 0)
        goto out;
    uint32_t slow = 0;
    first = xmalloc((l.n + 1) * sizeof *first);
    for (size_t i = 0; i < l.n; i++) { /* a shard's rows are contiguous */
        shard_read s = {.path = l.v[i], .o = o, .bad = &bad, .first_bad = first_bad, .e = e};
        first[i] = (uint32_t)b.n;
        if (remote ? read_remote_shard(&s, &b, &m, o->shard_cache, &slow) != 0
                   : read_shard(&s, &b, &m) != 0)
            goto out;
    }
    first[l.n] = (uint32_t)b.n;
    if (slow && o->warn)
        fprintf(o->warn,
                "train: note: %u of %zu shards have no .idx and .labels beside them: each was "
                "downloaded whole to list its samples (tools/shard writes both; then only they "
                "are read before training)\n",
                slow, l.n);
    if (b.n == 0) {
        if (bad)
            errf(e, "%s: no usable samples (%u bad; first: %s)", spec, bad, first_bad);
        else
            errf(e, "%s: no samples in %zu shard%s", spec, l.n, l.n == 1 ? "" : "s");
        goto out;
    }
    for (size_t i = 0; ncls > 0 && i < b.n; i++)
        if (b.label[i] >= ncls) {
            errf(e, "%s: member %s: class %d, but %s names %ld classes", b.strs + b.path[i],
                 b.strs + b.mem[i].name, b.label[i], cls_path, ncls);
            goto out;
        }
    pack(ds, &b, cls, ncls);
    ds->csv_path = xstrdup(spec);
    ds->nshards = (uint32_t)l.n;
    ds->remote = remote;
    ds->cache = remote ? o->shard_cache : NULL;
    ds->shard_first = first;
    first = NULL;
    ds->bad_rows = bad;
    ds->content_hash = hash64("train-shards", 12, dataset_fingerprint(ds, NULL).hash);
    for (uint32_t i = 0; i < ds->n; i++)
        ds->content_hash = hash64(&ds->members[i], 2 * sizeof(uint64_t), ds->content_hash);
    if (bad && o->warn && !o->list_bad) { /* --check listed them */
        char a[ESC_MAX], c[ESC_MAX];
        fprintf(o->warn, "train: warning: %s: skipped %u bad sample%s (first: %s)\n",
                esc_path(spec, a, sizeof a), bad, bad == 1 ? "" : "s",
                esc_path(first_bad, c, sizeof c));
    }
    rc = 0;
out:
    names_free(&l);
    tar_members_free(&m);
    free(b.strs);
    free(b.mem);
    free(b.path);
    free(b.label);
    free(cls);
    free(first);
    free(cls_path);
    if (rc != 0)
        dataset_free(ds);
    return rc;
}

int dataset_shards_load(dataset *ds, const char *spec, const csv_opts *o, errbuf *e)
{
    memset(ds, 0, sizeof *ds);
    csv_opts defaults = CSV_OPTS_DEFAULT;
    int rc = shards_load(ds, spec, o ? o : &defaults, e);
    if (rc != 0 && e) {
        char tmp[ESC_MAX];
        snprintf(e->msg, sizeof e->msg, "%s", esc_path(e->msg, tmp, sizeof tmp));
    }
    return rc;
}

int dataset_src_local(const dataset *ds, uint32_t i, img_src *s, char *buf, size_t len, char *local,
                      size_t llen, int fetch, errbuf *e)
{
    dataset_src(ds, i, s, buf, len);
    if (!ds->remote)
        return 0;
    if (!fetch)
        return shard_cache_peek(ds->cache, s->file, local, llen) ? (s->file = local, 0) : 1;
    errbuf ce;
    if (shard_cache_get(ds->cache, s->file, local, llen, &ce) != 0) {
        size_t ul = strlen(s->file); /* `URL: why` -> `URL: member NAME: why` */
        const char *why =
            !strncmp(ce.msg, s->file, ul) && ce.msg[ul] == ':' ? ce.msg + ul + 2 : ce.msg;
        return errf(e, "%s: %s", s->name, why);
    }
    s->file = local;
    /* the .idx fetched at start-up and this shard must agree: the tar
     * header before the member names it (a stale or another shard's index
     * would hand out other bytes, and the .labels' labels with them) */
    const dataset_member *m = &ds->members[i];
    tar_member want = {.name = ds->strs + m->name, .off = m->off, .len = m->len};
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && tar_header_names(fd, &want);
    if (fd >= 0)
        close(fd);
    if (!ok)
        return errf(e,
                    "%s: the shard's tar header there is not this member's: its .idx is not this "
                    "shard's (stale, or another shard's; write both again with tools/shard)",
                    s->name);
    return 0;
}

const img_src *dataset_src(const dataset *ds, uint32_t i, img_src *s, char *buf, size_t len)
{
    const char *path = dataset_path(ds, i);
    if (!ds->members) {
        *s = (img_src){.name = path};
        return s;
    }
    const dataset_member *m = &ds->members[i];
    snprintf(buf, len, "%s: member %s", path, ds->strs + m->name);
    *s = (img_src){.file = path, .off = m->off, .len = m->len, .name = buf};
    return s;
}
