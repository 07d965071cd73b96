/* test_table.c — what a run prints: the epoch table fitted to the width
 * it is given ($COLUMNS when stdout is not a terminal), and the run record
 * that opens a --json file; tools/plot still reads such a file. Real
 * processes on real Fashion-MNIST PNGs. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
#include "tests/support/helpers.h"

static char *dir, *csv;

static void setup(void)
{
    dir = tmpdir_make();
    char *fm = make_fashion_subset(dir, 64);
    csv = path_join(fm, "train.csv");
    free(fm);
}

static void teardown(void)
{
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(table, .init = setup, .fini = teardown);

/* ./train --batch 32 --channels 1 [extra...] csv, with env (NULL-terminated or NULL) */
static void train(run_result *r, char *const env[], char *const extra[])
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)train_bin();
    argv[n++] = "--batch";
    argv[n++] = "32";
    argv[n++] = "--channels";
    argv[n++] = "1";
    argv[n++] = "--no-progress";
    for (int i = 0; extra && extra[i]; i++)
        argv[n++] = extra[i];
    argv[n++] = csv;
    argv[n] = NULL;
    run_argv(argv, env, 120, r);
    cr_assert_eq(r->status, 0, "%s\n%s", r->out, r->err);
}

/* the line of out that starts with prefix */
static char *line_of(const char *out, const char *prefix)
{
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, prefix, strlen(prefix))) {
            size_t n = strcspn(p, "\n");
            return strndup(p, n);
        }
    cr_assert_fail("no line starting '%s' in:\n%s", prefix, out);
    return NULL;
}

Test(table, narrow_columns_drop_what_does_not_apply_on_the_cpu)
{
    run_result r;
    char *narrow[] = {"COLUMNS=120", NULL};
    char *json = path_join(dir, "n.json");
    char *extra[] = {"--json", json, NULL};
    train(&r, narrow, extra);
    char *head = line_of(r.out, "dev "), *row = line_of(r.out, "cpu ");
    const char *gone[] = {"gpu%avg/mx", "busy%", "copy%", "pin_MB", " pin ", " nb ", " val "};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        cr_assert(!strstr(head, gone[i]), "'%s' is still there: %s", gone[i], head);
    const char *kept[] = {"img/s", "wait%", "comp%", "loss", "acc", "pss_MB", "cache"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        cr_assert(strstr(head, kept[i]), "'%s' is missing: %s", kept[i], head);
    cr_assert(strlen(head) <= 120 && strlen(row) <= 120, "wider than 120:\n%s\n%s", head, row);
    cr_assert(!strstr(row, "n/a"), "an n/a column is left: %s", row);
    /* the JSON keeps every field */
    char *text = read_whole_file(json, NULL, NULL);
    cr_assert(strstr(text, "\"gpu_util_avg\":null") && strstr(text, "\"pinned_mb\":"), "%s", text);
    free(text);
    free(head);
    free(row);
    run_free(&r);

    /* no COLUMNS and a pipe: every column, as before */
    char *unset[] = {"COLUMNS=", NULL};
    train(&r, unset, NULL);
    head = line_of(r.out, "dev ");
    cr_assert(strstr(head, "gpu%avg/mx") && strstr(head, "pin_MB") && strstr(head, " val "), "%s",
              head);
    cr_assert_gt(strlen(head), 140);
    free(head);
    run_free(&r);
    free(json);
}

Test(table, json_starts_with_a_run_record)
{
    run_result r;
    char *json = path_join(dir, "r.json");
    char *extra[] = {"--json", json, "--resize", "32x32", "--crop", "28", "--seed", "7", NULL};
    train(&r, NULL, extra);
    char *text = read_whole_file(json, NULL, NULL);
    char *first = strndup(text, strcspn(text, "\n"));
    cr_assert(!strncmp(first, "{\"record\":\"run\",\"version\":\"", 27), "%s", first);
    char *want[] = {"\"argv\":[\"",        "\"--resize\",\"32x32\",\"--crop\",\"28\"",
                    "\"data\":\"",         "\"samples\":64,",
                    "\"classes\":10,",     "\"first_image\":[28,28]",
                    "\"input\":[1,28,28]", "\"resize\":[32,32]",
                    "\"crop\":[28,28]",    "\"random_crop\":false",
                    "\"hflip\":0.5",       "\"seed\":7,",
                    "\"model\":\"lenet\"", "\"batch\":32"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        cr_assert(strstr(first, want[i]), "no %s in %s", want[i], first);
    cr_assert(strstr(first, csv), "the data path: %s", first);
    /* "time":"YYYY-MM-DDTHH:MM:SSZ" */
    const char *t = strstr(first, "\"time\":\"");
    cr_assert_not_null(t, "%s", first);
    int y, mo, d, h, mi, s;
    char z;
    cr_assert_eq(sscanf(t + 8, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &s, &z), 7, "%s",
                 t);
    cr_assert(y >= 2024 && z == 'Z', "%s", t);
    /* then the epoch and the summary */
    const char *second = text + strlen(first) + 1;
    cr_assert(!strncmp(second, "{\"record\":\"epoch\"", 17), "%s", second);
    cr_assert_eq(count_lines(text), 3, "%s", text);
    free(first);
    free(text);
    run_free(&r);
    free(json);
}

/* A sweep writes one run record per configuration; tools/plot reads the
 * summaries and draws its charts regardless. */
Test(table, plot_reads_a_sweep_json_with_run_records)
{
    run_result r;
    char *json = path_join(dir, "s.json"), *charts = path_join(dir, "charts");
    char *extra[] = {"--workers", "0,1", "--json", json, NULL};
    train(&r, NULL, extra);
    run_free(&r);
    char *text = read_whole_file(json, NULL, NULL);
    int runs = 0;
    for (const char *p = text; (p = strstr(p, "{\"record\":\"run\"")); p++)
        runs++;
    cr_assert_eq(runs, 2, "%s", text);
    free(text);
    char *plot = path_join(source_root(), "tools/plot");
    char *argv[] = {plot, json, "--out", charts, NULL};
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "tools/plot: %s\n%s", r.out, r.err);
    char *png = path_join(charts, "s_epoch_time.png"); /* named after s.json */
    struct stat st;
    cr_assert(stat(png, &st) == 0 && st.st_size > 0, "%s not drawn", png);
    run_free(&r);
    free(png);
    free(plot);
    free(charts);
    free(json);
}
