/* util.h — small helpers every part of train uses.
 *
 * Error buffers (library code reports, the caller decides), checked
 * allocation that names file:line when memory runs out, a monotonic clock,
 * /proc/meminfo, atomic file replacement and a fast 64-bit hash.
 * Deliberately nothing clever: no logging framework, no global state.
 */
#ifndef TRAIN_UTIL_H
#define TRAIN_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define ERR_MAX 512

/* An error message produced by library code; the caller prints it. */
typedef struct errbuf {
    char msg[ERR_MAX];
} errbuf;

/* Format into e (if not NULL) and return -1, so `return errf(e, ...)` reads
 * naturally. */
int errf(errbuf *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int verrf(errbuf *e, const char *fmt, va_list ap);
/* The same, returning `status` (an exit status, a loader status):
 * `return fail(e, RUN_BAD_INPUT, "%s: ...", path);` */
int fail(errbuf *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Allocation that cannot fail: on exhaustion prints file:line and the size,
 * then exits with status 1. */
#define xmalloc(n) xmalloc_at((n), __FILE__, __LINE__)
#define xcalloc(n, s) xcalloc_at((n), (s), __FILE__, __LINE__)
#define xrealloc(p, n) xrealloc_at((p), (n), __FILE__, __LINE__)
#define xstrdup(s) xstrdup_at((s), __FILE__, __LINE__)
void *xmalloc_at(size_t n, const char *file, int line);
void *xcalloc_at(size_t n, size_t size, const char *file, int line);
void *xrealloc_at(void *p, size_t n, const char *file, int line);
char *xstrdup_at(const char *s, const char *file, int line);

/* Seconds on the monotonic clock. */
double now_sec(void);

/* MemAvailable from /proc/meminfo in bytes, or 0 when it cannot be read. */
uint64_t mem_available_bytes(void);

/* Human-readable byte count ("1.5 GB") into buf; returns buf. */
const char *fmt_bytes(char *buf, size_t len, uint64_t bytes);

/* Read a whole file into a malloc'd buffer (NUL-terminated, *len excludes
 * the NUL). Returns NULL and fills e on failure. */
char *read_whole_file(const char *path, size_t *len, errbuf *e);

/* Write `len` bytes to `path` atomically: a temporary file in the same
 * folder (unnamed until complete where the file system has O_TMPFILE, so a
 * killed writer leaves nothing), fsync, rename over the target, fsync the
 * folder. Readers see the old file or the new one, never a half-written
 * one. A target that is not a regular file (a FIFO, a device, a folder) is
 * refused, never replaced. The file's mode is 0666 less the umask. */
int write_file_atomic(const char *path, const void *data, size_t len, errbuf *e);

/* Same, for writers that produce their content in pieces. */
typedef struct atomic_file {
    FILE *fp;
    char *tmp_path;
    char *path;
} atomic_file;
int atomic_file_open(atomic_file *af, const char *path, errbuf *e);
int atomic_file_commit(atomic_file *af, errbuf *e); /* fsync + rename */
void atomic_file_abort(atomic_file *af);            /* unlink temp */

/* A fast, well-mixed 64-bit hash (not cryptographic), for checksums of
 * caches and checkpoints and for fingerprints of CSV content. Chain pieces
 * by passing the previous result as the seed. */
uint64_t hash64(const void *data, size_t len, uint64_t seed);

/* Keep one core busy for `secs` seconds (the tests' slow-loader and
 * heavy-model hooks: real CPU work, not a sleep). */
void burn_cpu_for(double secs);

/* Number of online CPUs (at least 1). */
int cores_online(void);

/* SIGINT and SIGTERM to fn, without SA_RESTART: a blocking wait returns
 * EINTR, so the caller sees the signal at once. */
void on_stop_signals(void (*fn)(int));

/* Parse helpers: strict integer/float parsing of a whole string. */
int parse_i64(const char *s, long long *out);
int parse_f64(const char *s, double *out);
/* "1G", "512M", "1000000" -> bytes; -1 on error. */
int parse_bytes(const char *s, uint64_t *out);

/* ---------------------------------------------------------------- hostile paths
 * Files train reads or replaces must be regular files: a FIFO would block,
 * a device read forever (/dev/zero) or be replaced by a rename (/dev/full). */

/* "a directory", "a FIFO", "a character device", ... for a stat mode. */
const char *file_kind(unsigned mode);
/* An output path that train will create or replace: 0 when it does not
 * exist or is a regular file (symlinks followed); else -1 with
 * "PATH: is a FIFO, not a regular file" in e. */
int check_output_path(const char *path, errbuf *e);
/* The folder an output at path (through a symlink: its target) will be
 * written in exists, is a folder and is writable: 0, else -1 naming it
 * (checked before any work, so a run does not end unable to save). */
int check_output_folder(const char *path, errbuf *e);
/* open(2) that refuses anything but a regular file without blocking on a
 * FIFO or touching a device: stat, open with O_NONBLOCK, fstat, then
 * O_NONBLOCK cleared. flags as open's (O_CLOEXEC added); mode for O_CREAT.
 * Returns the descriptor, or -1 with "PATH: reason" in e. */
int open_regular(const char *path, int flags, unsigned mode, errbuf *e);
/* mkdir -p: path and every missing folder above it, with mode; 0, or -1
 * with errno (from the first folder that could not be made). */
int mkdir_p(const char *path, unsigned mode);

/* read_whole_file for a regular file of at most max bytes (NUL-terminated;
 * *len excludes the NUL): refused up front when larger, and never more
 * than its size read. */
char *read_regular_file(const char *path, size_t max, size_t *len, errbuf *e);
/* pread(2) of n bytes at off, retried after EINTR and short reads: the
 * bytes read (fewer than n only at the end of the file), or -1 with errno
 * when a read failed. */
long pread_full(int fd, void *buf, size_t n, uint64_t off);

/* The process's umask, without changing it (/proc/self/status). */
unsigned umask_now(void);
/* The file a write to path lands on: path with the symbolic links of its
 * last component followed (a dangling link: its target, relative to the
 * link's folder); malloc'd. replace_file_open/commit write through it. */
char *output_target(const char *path);
/* output_target made absolute: realpath of it when it exists, else the
 * realpath of its folder + its name (as given when the folder is
 * missing); malloc'd. */
char *output_canonical(const char *path);
/* 1 when a and b name one file: the same st_dev/st_ino when both exist,
 * the same output_canonical when neither does. */
int same_file(const char *a, const char *b);
/* A new file that will replace `path` once complete: unnamed (O_TMPFILE in
 * path's folder, so that nothing outlives a killed process) where the file
 * system has it, else a mkstemp name path.tmp.XXXXXX (returned in
 * *tmp_path, malloc'd; NULL when unnamed). Written through a symlink (the
 * temporary beside output_target). Read-write, mode that of the file it
 * replaces, else 0666 less the umask. Returns the descriptor or -1 with e
 * filled. */
int replace_file_open(const char *path, char **tmp_path, errbuf *e);
/* Put the complete file fd in place of path (a name of its own first when
 * it has none, then rename over path, refused when path has become
 * something other than a regular file). *tmp_path is freed and cleared.
 * Does not close fd; fsyncs nothing. */
int replace_file_commit(int fd, char **tmp_path, const char *path, errbuf *e);

/* s with every byte a terminal could act on written as \xHH: C0 controls
 * (ESC, CR, LF, TAB...), DEL, C1 controls and bytes that are not valid
 * UTF-8; valid UTF-8 text passes unchanged. For every message that carries
 * a path or a CSV cell (a name with ESC[2J must not clear the screen).
 * Cut at a whole character when buf (n bytes) is too small; returns buf. */
#define ESC_MAX (4 * ERR_MAX)
const char *esc_path(const char *s, char *buf, size_t n);

/* Child processes: wait for pid at most secs seconds (polling with short
 * sleeps; EINTR and a stopped child do not stop the clock). Returns 1 and
 * the wait status in *status (when not NULL) once it is reaped, 0 when it
 * is still there at the deadline, -1 when it is not a child. */
int wait_child_for(pid_t pid, double secs, int *status);
/* Wait for pid at most secs seconds; a child that is stopped (SIGSTOP,
 * SIGTSTP: killed at once, "train: WHAT PID is stopped (signal N);
 * killed") or still there at the deadline ("... did not exit within N s;
 * killed") is SIGKILLed and reaped, and stderr says so. Returns the wait
 * status (-1: not a child). */
int reap_bounded(pid_t pid, double secs, const char *what);

#endif
