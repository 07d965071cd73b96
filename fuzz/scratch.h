/* scratch.h — what the fuzz targets share: a scratch file that no exit
 * leaves behind, writing an input to it, and the abort on a broken
 * invariant. Header-only, like the harnesses that include it. */
#ifndef TRAIN_FUZZ_SCRATCH_H
#define TRAIN_FUZZ_SCRATCH_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_FAIL(who, ...)                                                                        \
    do {                                                                                           \
        fprintf(stderr, "%s: invariant broken: ", who);                                            \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* A file created and unlinked at once, named by /proc/self/fd/N in out:
 * libFuzzer's time limit, a crash or SIGKILL leave nothing behind. */
static inline void fuzz_scratch_file(const char *who, char *out, size_t len)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char named[128];
    snprintf(named, sizeof named, "%s/%s-%ld.tmp", base, who, (long)getpid());
    int fd = open(named, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600); /* a stale one: reused */
    if (fd < 0) {
        fprintf(stderr, "%s: cannot create %s: %s\n", who, named, strerror(errno));
        exit(1);
    }
    unlink(named);
    snprintf(out, len, "/proc/self/fd/%d", fd);
}

/* path's content becomes data[0..n) */
static inline void fuzz_write(const char *who, const char *path, const void *data, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (n > 0 && write(fd, data, n) != (ssize_t)n) || close(fd) != 0)
        FUZZ_FAIL(who, "cannot write %s: %s", path, strerror(errno));
}

/* e is one non-empty line that starts with `path` */
static inline void fuzz_check_message(const char *who, const char *path, const char *msg)
{
    if (strncmp(msg, path, strlen(path)) != 0 || strlen(msg) <= strlen(path) + 1 ||
        strchr(msg, '\n'))
        FUZZ_FAIL(who, "error is not one line naming %s: '%s'", path, msg);
}

#endif
