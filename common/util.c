/* util.c — see util.h. */
#define _GNU_SOURCE
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int verrf(errbuf *e, const char *fmt, va_list ap)
{
    if (e)
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return -1;
}

int errf(errbuf *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verrf(e, fmt, ap);
    va_end(ap);
    return -1;
}

int fail(errbuf *e, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    verrf(e, fmt, ap);
    va_end(ap);
    return status;
}

static void oom(size_t n, const char *file, int line)
{
    fprintf(stderr, "train: out of memory allocating %zu bytes at %s:%d\n", n, file, line);
    exit(1);
}

void *xmalloc_at(size_t n, const char *file, int line)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n, file, line);
    return p;
}

void *xcalloc_at(size_t n, size_t size, const char *file, int line)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom(n * size, file, line);
    return p;
}

void *xrealloc_at(void *p, size_t n, const char *file, int line)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n, file, line);
    return q;
}

char *xstrdup_at(const char *s, const char *file, int line)
{
    size_t n = strlen(s) + 1;
    char *p = xmalloc_at(n, file, line);
    memcpy(p, s, n);
    return p;
}

double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t meminfo_field(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[256];
    size_t klen = strlen(key);
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            kb = strtoull(line + klen + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb * 1024;
}

uint64_t mem_available_bytes(void) { return meminfo_field("MemAvailable"); }

const char *fmt_bytes(char *buf, size_t len, uint64_t b)
{
    const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)b);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

char *read_whole_file(const char *path, size_t *len, errbuf *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        errf(e, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
        errf(e, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : strerror(errno));
        close(fd);
        return NULL;
    }
    size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 4096, n = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            buf = xrealloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            errf(e, "%s: read failed: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static int fsync_dir_of(const char *path)
{
    char *copy = xstrdup(path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(copy);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int atomic_file_open(atomic_file *af, const char *path, errbuf *e)
{
    memset(af, 0, sizeof *af);
    if (check_output_path(path, e) != 0) /* never rename over a FIFO or a device */
        return -1;
    int fd = replace_file_open(path, &af->tmp_path, e);
    if (fd < 0)
        return -1;
    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        errf(e, "%s: %s", path, strerror(errno));
        close(fd);
        if (af->tmp_path)
            unlink(af->tmp_path);
        free(af->tmp_path);
        af->tmp_path = NULL;
        return -1;
    }
    af->path = xstrdup(path);
    return 0;
}

void atomic_file_abort(atomic_file *af)
{
    if (af->fp)
        fclose(af->fp);
    if (af->tmp_path)
        unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
}

int atomic_file_commit(atomic_file *af, errbuf *e)
{
    int rc = 0;
    if (fflush(af->fp) != 0 || ferror(af->fp))
        rc = errf(e, "%s: write failed: %s", af->path, strerror(errno));
    else if (fsync(fileno(af->fp)) != 0)
        rc = errf(e, "%s: fsync failed: %s", af->path, strerror(errno));
    if (rc == 0)
        rc = replace_file_commit(fileno(af->fp), &af->tmp_path, af->path, e);
    if (fclose(af->fp) != 0 && rc == 0)
        rc = errf(e, "%s: close failed: %s", af->path, strerror(errno));
    af->fp = NULL;
    if (rc == 0) {
        char *t = output_target(af->path); /* the folder the rename changed */
        fsync_dir_of(t);
        free(t);
    } else if (af->tmp_path)
        unlink(af->tmp_path);
    free(af->tmp_path);
    free(af->path);
    memset(af, 0, sizeof *af);
    return rc;
}

int write_file_atomic(const char *path, const void *data, size_t len, errbuf *e)
{
    atomic_file af;
    if (atomic_file_open(&af, path, e) != 0)
        return -1;
    if (len && fwrite(data, 1, len, af.fp) != len) {
        errf(e, "%s: write failed: %s", path, strerror(errno));
        atomic_file_abort(&af);
        return -1;
    }
    return atomic_file_commit(&af, e);
}

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Four independent lanes so the loop is not one long dependency chain;
 * about 8 GB/s on this machine, enough to checksum a preload cache. */
uint64_t hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    const uint64_t k1 = 0x9e3779b185ebca87ULL, k2 = 0xc2b2ae3d27d4eb4fULL;
    uint64_t a = seed + k1, b = seed ^ k2, c = seed - k1, d = ~seed;
    size_t i = 0;
    for (; i + 32 <= len; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        a = rotl64(a + w[0] * k2, 31) * k1;
        b = rotl64(b + w[1] * k2, 31) * k1;
        c = rotl64(c + w[2] * k2, 31) * k1;
        d = rotl64(d + w[3] * k2, 31) * k1;
    }
    uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = rotl64(h ^ mix64(w), 27) * k1 + k2;
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, len - i);
    h ^= mix64(tail + (uint64_t)len);
    return mix64(h);
}

void burn_cpu_for(double secs)
{
    double end = now_sec() + secs;
    volatile uint64_t x = 0;
    while (now_sec() < end)
        for (int i = 0; i < 1000; i++)
            x += (uint64_t)i;
}

int cores_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int parse_i64(const char *s, long long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0' || isspace((unsigned char)*s))
        return -1;
    *out = v;
    return 0;
}

int parse_f64(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || isspace((unsigned char)*s))
        return -1;
    *out = v;
    return 0;
}

int parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !*s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || v < 0)
        return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 'T':
        mul = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default: return -1;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}

void on_stop_signals(void (*fn)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---------------------------------------------------------------- hostile paths */

const char *file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
    }
}

int check_output_path(const char *path, errbuf *e)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0; /* absent (or unreachable: the open says why) */
    return errf(e, "%s: is %s, not a regular file%s", path, file_kind(st.st_mode),
                S_ISDIR(st.st_mode) ? " (give a file name)" : "");
}

int check_output_folder(const char *path, errbuf *e)
{
    char *target = output_target(path), *copy = xstrdup(target);
    const char *dir = dirname(copy);
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0)
        rc = errf(e, "%s: folder %s does not exist (make it first)", path, dir);
    else if (!S_ISDIR(st.st_mode))
        rc = errf(e, "%s: %s is not a folder", path, dir);
    else if (access(dir, W_OK) != 0)
        rc = errf(e, "%s: folder %s is not writable: %s", path, dir, strerror(errno));
    free(copy);
    free(target);
    return rc;
}

int open_regular(const char *path, int flags, unsigned mode, errbuf *e)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* before open: no device is opened */
        return errf(e, "%s: is %s, not a regular file", path, file_kind(st.st_mode));
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, (mode_t)mode);
    if (fd < 0)
        return errf(e, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* replaced since the stat */
        errf(e, "%s: is %s, not a regular file", path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

long pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long)got;
}

char *read_regular_file(const char *path, size_t max, size_t *len, errbuf *e)
{
    int fd = open_regular(path, O_RDONLY, 0, e);
    if (fd < 0)
        return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > max) {
        char have[32], lim[32];
        errf(e, "%s: is %s, more than the %s this file can be", path,
             fmt_bytes(have, sizeof have, (uint64_t)st.st_size), fmt_bytes(lim, sizeof lim, max));
        close(fd);
        return NULL;
    }
    size_t size = (size_t)st.st_size, n = 0;
    char *buf = xmalloc(size + 1);
    while (n < size) { /* never past the size: a file that grows is read as it was */
        ssize_t r = read(fd, buf + n, size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            errf(e, "%s: read failed: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

unsigned umask_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned m = 0;
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = sscanf(line, "Umask: %o", &m) == 1;
    if (f)
        fclose(f);
    if (!found) { /* no /proc: read it by setting it (not thread-safe, but rare) */
        mode_t old = umask(077);
        umask(old);
        m = (unsigned)old;
    }
    return m & 0777;
}

char *output_target(const char *path)
{
    char *cur = xstrdup(path);
    for (int hops = 0; hops < 40; hops++) {
        struct stat st;
        char link[PATH_MAX];
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            break;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n <= 0)
            break;
        link[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dlen = link[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = xmalloc(dlen + (size_t)n + 1);
        memcpy(next, cur, dlen); /* a relative target starts from the link's folder */
        memcpy(next + dlen, link, (size_t)n + 1);
        free(cur);
        cur = next;
    }
    return cur;
}

char *output_canonical(const char *path)
{
    char *t = output_target(path), *full = realpath(t, NULL);
    if (full) {
        free(t);
        return full;
    }
    char *d = xstrdup(t), *b = xstrdup(t);
    char *dir = realpath(dirname(d), NULL);
    const char *base = basename(b);
    char *out = t;
    if (dir) {
        size_t n = strlen(dir) + strlen(base) + 2;
        out = xmalloc(n);
        snprintf(out, n, "%s/%s", strcmp(dir, "/") ? dir : "", base);
        free(dir);
        free(t);
    }
    free(d);
    free(b);
    return out;
}

int same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    int ha = stat(a, &sa) == 0, hb = stat(b, &sb) == 0;
    if (ha && hb)
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ha != hb)
        return 0; /* one exists, the other is yet to be made: not the same */
    char *ca = output_canonical(a), *cb = output_canonical(b);
    int same = strcmp(ca, cb) == 0;
    free(ca);
    free(cb);
    return same;
}

int replace_file_open(const char *path, char **tmp_path, errbuf *e)
{
    *tmp_path = NULL;
    char *target = output_target(path); /* through a symlink: the temporary beside its target */
    struct stat st;
    int keep = stat(target, &st) == 0 && S_ISREG(st.st_mode); /* a replaced file keeps its mode */
    char *copy = xstrdup(target);
    int fd = open(dirname(copy), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    free(copy);
    if (fd < 0) { /* no O_TMPFILE here (old kernel, file system without it): a named one */
        size_t n = strlen(target) + 32;
        *tmp_path = xmalloc(n);
        snprintf(*tmp_path, n, "%s.tmp.XXXXXX", target);
        fd = mkostemp(*tmp_path, O_CLOEXEC);
        if (fd < 0) {
            errf(e, "%s: cannot create a temporary file next to it: %s", path, strerror(errno));
            free(*tmp_path);
            *tmp_path = NULL;
            free(target);
            return -1;
        }
        if (!keep)
            fchmod(fd, 0666 & ~umask_now()); /* mkstemp makes 0600 */
    }
    if (keep)
        fchmod(fd, st.st_mode & 0777);
    free(target);
    return fd;
}

int replace_file_commit(int fd, char **tmp_path, const char *path, errbuf *e)
{
    if (check_output_path(path, e) != 0)
        return -1; /* a FIFO or a device put there since the start is not replaced */
    char *target = output_target(path);
    if (!*tmp_path) { /* unnamed: a name of its own first, so that rename replaces atomically */
        size_t n = strlen(target) + 48;
        char *name = xmalloc(n), proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        for (int i = 0;; i++) {
            snprintf(name, n, "%s.tmp.%d.%d", target, (int)getpid(), i);
            if (linkat(AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW) == 0)
                break;
            if (errno != EEXIST || i == 1000) {
                errf(e, "%s: cannot give the new file a name: %s", path, strerror(errno));
                free(name);
                free(target);
                return -1;
            }
        }
        *tmp_path = name;
    }
    int rc = 0;
    if (rename(*tmp_path, target) != 0)
        rc = errf(e, "%s: cannot rename %s over it: %s", path, *tmp_path, strerror(errno));
    free(target);
    if (rc != 0)
        return rc;
    free(*tmp_path);
    *tmp_path = NULL;
    return 0;
}

/* One UTF-8 sequence at s (n bytes left): its length when well formed
 * (no overlong form, no surrogate, at most U+10FFFF), else 0; *cp gets the
 * code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80)
        return *cp = c, 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, v = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

const char *esc_path(const char *s, char *buf, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, left = strlen(s);
    const unsigned char *u = (const unsigned char *)s;
    if (!n)
        return buf;
    while (left) {
        uint32_t cp = 0;
        size_t k = utf8_seq(u, left, &cp);
        int raw = k > 0 && cp >= 0x20 && cp != 0x7F && !(cp >= 0x80 && cp < 0xA0);
        size_t need = raw ? k : 4 * (k ? k : 1);
        if (o + need + 1 > n)
            break;
        if (raw) {
            memcpy(buf + o, u, k);
            o += k;
        } else {
            for (size_t i = 0; i < (k ? k : 1); i++) {
                buf[o++] = '\\';
                buf[o++] = 'x';
                buf[o++] = hex[u[i] >> 4];
                buf[o++] = hex[u[i] & 15];
            }
        }
        if (!k)
            k = 1;
        u += k;
        left -= k;
    }
    buf[o] = '\0';
    return buf;
}

int wait_child_for(pid_t pid, double secs, int *status)
{
    double deadline = now_sec() + secs;
    long nap_ns = 1000000; /* 1 ms, doubling to 50 ms */
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (status)
                *status = st;
            return 1;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_sec() >= deadline)
            return 0;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 50000000)
            nap_ns *= 2;
    }
}

int reap_bounded(pid_t pid, double secs, const char *what)
{
    double deadline = now_sec() + secs;
    long nap_ns = 1000000; /* 1 ms, doubling to 50 ms */
    int st = -1, stopped = 0;
    for (;;) {
        /* WUNTRACED: a stopped child is reported at once; waiting for it
         * would only run out the clock (under ASan a healthy one can need
         * seconds for its leak check, so the bound itself is generous) */
        pid_t r = waitpid(pid, &st, WNOHANG | WUNTRACED);
        if (r == pid && !WIFSTOPPED(st))
            return st;
        if (r == pid) {
            stopped = WSTOPSIG(st);
            break;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (now_sec() >= deadline)
            break;
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 50000000)
            nap_ns *= 2;
    }
    kill(pid, SIGKILL);
    if (stopped)
        fprintf(stderr, "train: %s %ld is stopped (signal %d); killed\n", what, (long)pid, stopped);
    else
        fprintf(stderr, "train: %s %ld did not exit within %g s; killed\n", what, (long)pid, secs);
    /* SIGKILL ends a stopped process too; only an uninterruptible sleep
     * outlasts it, and then the zombie is left to be reaped at exit */
    return wait_child_for(pid, secs, &st) > 0 ? st : -1;
}

int mkdir_p(const char *path, unsigned mode)
{
    char *tmp = xstrdup(path);
    int rc = 0;
    for (char *p = tmp + 1; *p && rc == 0; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, (mode_t)mode) != 0 && errno != EEXIST)
                rc = -1;
            *p = '/';
        }
    if (rc == 0 && mkdir(tmp, (mode_t)mode) != 0 && errno != EEXIST)
        rc = -1;
    int saved = errno;
    free(tmp);
    errno = saved;
    return rc;
}
