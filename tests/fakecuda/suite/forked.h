/* forked.h — run a function in a forked child and capture what it printed
 * to stderr and how it ended: for code paths that print and exit(1) (the
 * CHECK macros, contract violations). LeakSanitizer is turned off in the
 * child, which exits without cleaning up by design. */
#ifndef TRAIN_FAKECUDA_FORKED_H
#define TRAIN_FAKECUDA_FORKED_H

typedef struct forked {
    int status; /* exit status, -1 when killed */
    int signal;
    char *err; /* captured stderr, NUL-terminated; free() it */
} forked;

void run_forked(void (*fn)(void *), void *arg, forked *r);

#endif
