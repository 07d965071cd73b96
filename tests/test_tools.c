/* test_tools.c — the data-set tools produce what they promise. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb/stb_image.h>

#include "common/util.h"
#include "loader/dataset.h"
#include "tests/support/helpers.h"

static char *dir;
static void setup(void) { dir = tmpdir_make(); }
static void teardown(void) { tmpdir_remove(dir); }
TestSuite(tools, .init = setup, .fini = teardown, .timeout = 120);

static char *tool(const char *name) { return path_join(tools_dir(), name); }

Test(tools, fashion_mnist_limit)
{
    char *bin = tool("fashion_mnist"), *out = path_join(dir, "fm");
    char *argv[] = {bin, "--out", out, "--limit", "40", NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    run_free(&r);

    const char *splits[] = {"train.csv", "test.csv"};
    for (int s = 0; s < 2; s++) {
        char *csv = path_join(out, splits[s]);
        dataset ds;
        errbuf e;
        cr_assert_eq(dataset_load(&ds, csv, NULL, &e), 0, "%s", e.msg);
        cr_assert_eq(ds.n, 40);
        cr_assert_leq(ds.nclasses, 10);
        for (uint32_t i = 0; i < ds.n; i++) {
            int w, h, c;
            cr_assert(stbi_info(dataset_path(&ds, i), &w, &h, &c), "%s", dataset_path(&ds, i));
            cr_assert(w == 28 && h == 28 && c == 1);
        }
        dataset_free(&ds);
        free(csv);
    }
    /* the first training item of Fashion-MNIST is an ankle boot (9) */
    char *csv = path_join(out, "train.csv");
    size_t len;
    char *text = read_whole_file(csv, &len, NULL);
    cr_assert(strncmp(text, "path,label\ntrain/00000.png,9\n", 29) == 0, "%s", text);
    free(text);
    free(csv);

    /* a second run with the same limit is a no-op */
    run_argv(argv, NULL, 60, &r);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "up to date"), "%s", r.out);
    run_free(&r);
    free(bin);
    free(out);
}

Test(tools, jpeg_set_counts_sizes_and_determinism)
{
    char *bin = tool("jpeg_set"), *a = path_join(dir, "a"), *b = path_join(dir, "b");
    char *argv_a[] = {bin, "--n", "12", "--val", "3", "--out", a, "--seed", "7", NULL};
    char *argv_b[] = {bin, "--n", "12", "--val", "3", "--out", b, "--seed", "7", NULL};
    run_result r;
    run_argv(argv_a, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    run_free(&r);
    run_argv(argv_b, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    run_free(&r);

    char *csv = path_join(a, "train.csv"), *vcsv = path_join(a, "val.csv");
    dataset ds, vx;
    errbuf e;
    cr_assert_eq(dataset_load(&ds, csv, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(dataset_load(&vx, vcsv, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ds.n, 12);
    cr_assert_eq(vx.n, 3);
    for (uint32_t i = 0; i < ds.n; i++) {
        const char *p = dataset_path(&ds, i);
        int w, h, c;
        cr_assert(stbi_info(p, &w, &h, &c), "%s", p);
        cr_assert(w == 512 && h == 384 && c == 3, "%s: %dx%dx%d", p, w, h, c);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        cr_assert(st.st_size > 10 * 1024 && st.st_size < 200 * 1024, "%s: %ld bytes", p,
                  (long)st.st_size);
        /* same seed, same bytes */
        char *other = path_join(b, p + strlen(a) + 1);
        size_t la, lb;
        char *da = read_whole_file(p, &la, NULL), *db = read_whole_file(other, &lb, NULL);
        cr_assert(da && db && la == lb && memcmp(da, db, la) == 0, "%s differs", other);
        free(da);
        free(db);
        free(other);
    }
    dataset_free(&ds);
    dataset_free(&vx);
    free(csv);
    free(vcsv);
    free(bin);
    free(a);
    free(b);
}

/* tools/check-layers on two real static libraries: "low" calling into
 * "high" (above it) is reported by object and symbol; the right way round
 * passes. */
static void make_lib(const char *name, const char *src)
{
    char *c = write_text(dir, "x.c", src), *o = path_join(dir, "x.o");
    char lib[512];
    snprintf(lib, sizeof lib, "%s/lib%s.a", dir, name);
    char *cc[] = {"/usr/bin/gcc", "-c", c, "-o", o, NULL};
    run_result r;
    run_argv(cc, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    char *ar[] = {"/usr/bin/ar", "rcs", lib, o, NULL};
    run_argv(ar, NULL, 60, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    free(c), free(o);
}

static run_result check_layers(const char *top, const char *bottom)
{
    char *script = path_join(source_root(), "tools/check-layers");
    char *argv[] = {script, dir, (char *)top, (char *)bottom, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    free(script);
    return r;
}

Test(tools, check_layers_names_a_wrong_way_call)
{
    make_lib("high", "int high_fn(void) { return 1; }\n");
    make_lib("low", "int high_fn(void);\nint low_fn(void) { return high_fn() + 1; }\n");
    run_result r = check_layers("high", "low");
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "low/x.o uses high_fn, defined in high/ (above low/)"), "%s", r.out);
    run_free(&r);
    /* the same libraries in the other order: low above high is allowed */
    r = check_layers("low", "high");
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
}

/* tools/check-includes on a small tree: another folder's private header
 * (internal.h, or one saying "Private to") is named with file, line and
 * owner; the owner itself and the tests may include it. */
static run_result check_includes(void)
{
    char *script = path_join(source_root(), "tools/check-includes");
    char *argv[] = {script, dir, NULL};
    run_result r;
    run_argv(argv, NULL, 60, &r);
    free(script);
    return r;
}

static void write_in(const char *sub, const char *name, const char *text)
{
    char *d = path_join(dir, sub);
    mkdir(d, 0755);
    free(write_text(d, name, text));
    free(d);
}

Test(tools, check_includes_names_a_private_header_used_outside_its_folder)
{
    write_in("app", "run_ctx.h", "/* run_ctx.h — a run's state.\n * Private to app/. */\n");
    write_in("app", "feed.h", "/* feed.h — the data side, public */\n");
    write_in("cpu", "internal.h", "/* shared by cpu/ */\n");
    write_in("app", "loop.c", "#include \"app/run_ctx.h\"\n#include \"cpu/internal.h\"\n");
    write_in("python", "mod.c", "#include <stdio.h>\n#include \"app/feed.h\"\n");
    write_in("tests", "t.c", "#include \"cpu/internal.h\"\n#include \"app/run_ctx.h\"\n");
    run_result r = check_includes();
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "app/loop.c:2: includes cpu/internal.h, private to cpu/"), "%s", r.out);
    cr_expect(!strstr(r.out, "run_ctx.h"), "app/ may use its own: %s", r.out);
    cr_expect(!strstr(r.out, "tests/"), "tests may look inside: %s", r.out);
    run_free(&r);
    /* the module reaching for the run's private state is caught too */
    write_in("python", "mod.c", "#include \"app/feed.h\"\n\n#include \"app/run_ctx.h\"\n");
    write_in("app", "loop.c", "#include \"app/run_ctx.h\"\n");
    r = check_includes();
    cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "python/mod.c:3: includes app/run_ctx.h, private to app/"), "%s",
              r.out);
    run_free(&r);
    write_in("python", "mod.c", "#include \"app/feed.h\"\n");
    r = check_includes();
    cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
    run_free(&r);
}
