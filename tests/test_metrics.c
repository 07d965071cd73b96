/* test_metrics.c — app/metrics.c: the memory a run reports is read from
 * the processes it names (a child that holds a known amount shows it),
 * and the machine's core count is the one the kernel reports. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/metrics.h"

TestSuite(metrics);

Test(metrics, a_childs_resident_memory_is_counted_from_its_own_pid)
{
    enum { MB = 96 };
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        volatile char *p = malloc((size_t)MB << 20);
        for (size_t i = 0; i < ((size_t)MB << 20); i += 4096)
            p[i] = 1; /* every page resident (volatile: not optimised away) */
        if (write(fd[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    cr_assert_eq(read(fd[0], &c, 1), 1);
    mem_usage self, both;
    mem_usage_read(NULL, 0, &self);
    int pids[1] = {pid};
    mem_usage_read(pids, 1, &both);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fd[0]);
    close(fd[1]);
    cr_assert_eq(self.nprocs, 1);
    cr_assert_eq(both.nprocs, 2);
    /* the child's MB are its own (not shared with this process): both Rss
     * and Pss grow by them */
    cr_assert(both.rss_mb - self.rss_mb >= MB - 4, "rss %.1f -> %.1f MB with a %d MB child",
              self.rss_mb, both.rss_mb, MB);
    cr_assert(both.pss_mb - self.pss_mb >= MB - 4, "pss %.1f -> %.1f MB with a %d MB child",
              self.pss_mb, both.pss_mb, MB);
}

Test(metrics, the_core_count_is_the_kernels)
{
    machine_info m;
    machine_info_read(&m);
    cr_assert_eq(m.cores, (int)sysconf(_SC_NPROCESSORS_ONLN));
    cr_assert(m.cpu[0] != '\0');
}
