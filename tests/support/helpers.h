/* helpers.h — what the tests share: temporary folders, files, running the
 * train binary and the tools as real processes. */
#ifndef TRAIN_TESTS_HELPERS_H
#define TRAIN_TESTS_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A fresh folder under $TMPDIR (default /tmp); removed (recursively) by tmpdir_remove. */
char *tmpdir_make(void);
void tmpdir_remove(char *dir);

/* dir/name (subfolders created); returns the malloc'd full path. */
char *write_file(const char *dir, const char *name, const void *data, size_t len);
char *write_text(const char *dir, const char *name, const char *text);
char *path_join(const char *dir, const char *name);
/* The whole file (malloc'd, a NUL after its *len bytes), or NULL when it
 * cannot be opened. */
char *read_whole(const char *path, size_t *len);

typedef struct run_result {
    int status;  /* exit status, or -1 when killed by a signal */
    int signal;  /* the signal, or 0 */
    char *out;   /* captured stdout (NUL-terminated) */
    char *err;   /* captured stderr */
    double secs; /* wall time */
} run_result;

/* Run argv (argv[0] is a path) with an optional NULL-terminated list of
 * extra environment entries; waits at most timeout_s seconds, then kills the
 * process group and fails the test. */
int run_argv(char *const argv[], char *const env_extra[], double timeout_s, run_result *r);
void run_free(run_result *r);

/* Run the train binary with the given arguments (NULL-terminated), at most
 * 200 seconds. */
int run_train(run_result *r, const char *first, ...);
/* The same, at most timeout_s seconds (a run that would block on a FIFO
 * fails its test instead of hanging it). */
int run_train_for(run_result *r, double timeout_s, const char *first, ...);

/* Start argv in the background, stdout and stderr to the files out and err,
 * in a process group of its own that dies with the test: the process gets
 * SIGKILL when the test process ends (a Criterion timeout included), and
 * spawn_kill_all() (run by helpers at exit, and by suites' fini) kills the
 * whole group of every process started here and not yet waited for. */
pid_t spawn_bg(char *const argv[], const char *out, const char *err);
/* Wait for a process from spawn_bg; after timeout_s seconds kill its group
 * and fail the test. Returns the wait status. */
int spawn_wait(pid_t pid, double timeout_s);
void spawn_kill_all(void);

/* The train binary under test ($TRAIN_BIN, default ./train), the tools
 * folder ($TRAIN_TOOLS, default build/tools) and the source tree. */
const char *train_bin(void);
const char *tools_dir(void);
const char *source_root(void);

/* Count lines of a text. */
int count_lines(const char *s);

/* Number of children of `pid` (from /proc/PID/task/ * /children). */
int count_children(int pid);
/* The children of pid (every thread's), up to max of them in out
 * (out NULL: all counted); -1 when pid is gone. */
int list_children(int pid, int *out, int max);

/* A real Fashion-MNIST subset of n images per split, made by
 * tools/fashion-mnist in dir/fm; returns that folder (train.csv, test.csv). */
char *make_fashion_subset(const char *dir, int n);

/* The values of `key` in every epoch record of a JSON-lines file written
 * by --json, as text; returns how many. */
#define JSON_VALUE_MAX 48
int json_epoch_values(const char *path, const char *key, char vals[][JSON_VALUE_MAX], int max);
/* Both --json files have `epochs` epoch records with the same loss text
 * (every bit: losses are printed exactly). */
void assert_same_losses(const char *a, const char *b, int epochs);

/* The same for the records of another kind ("run", "summary"). */
int json_record_values(const char *path, const char *record, const char *key,
                       char vals[][JSON_VALUE_MAX], int max);

/* The process exists and is not a zombie (an orphaned zombie waits for
 * init to reap it, so kill(pid, 0) would still succeed). */
int process_alive(int pid);
/* 1 once pid is gone (or a zombie), polling every 10 ms; 0 when it is
 * still there after secs seconds. */
int wait_process_gone(int pid, double secs);

#endif
