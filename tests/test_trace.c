/* test_trace.c — --trace FILE writes a Chrome trace-event timeline that
 * parses as JSON (checked with Debian's python3 and its json module), with
 * complete "X" events on the expected tracks: a "loader" track in each
 * "loader worker" process with each batch's fill and, inside it, its read,
 * decode and transform sums back to back (lazy PNGs: every stage takes
 * time, and decoding more than reading a cached file), and wait / stage /
 * step on the main process's "main" track; and one clock: a batch's fill (recorded by the worker)
 * ends before the main process's wait for it does. An unwritable path is
 * refused before any work.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    if (!dir)
        return;
    free(csv);
    tmpdir_remove(dir);
}

TestSuite(trace, .init = setup, .fini = teardown);

static const char *check_py =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "ev = d['traceEvents']\n"
    "procs = {e['pid']: e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] == "
    "'process_name'}\n"
    "tracks = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e['ph'] == 'M' and e['name'] "
    "== 'thread_name'}\n"
    "x = [e for e in ev if e['ph'] == 'X']\n"
    "assert all(e['ts'] >= 0 and e['dur'] >= 0 for e in x), 'negative time'\n"
    "names = {}\n"
    "for e in x:\n"
    "    key = (procs[e['pid']], tracks[(e['pid'], e['tid'])], e['name'])\n"
    "    names[key] = names.get(key, 0) + 1\n"
    "need = [('loader worker', 'loader', 'fill'), ('loader worker', 'loader', 'read'),\n"
    "        ('loader worker', 'loader', 'decode'), ('loader worker', 'loader', 'transform'),\n"
    "        ('train', 'main', 'wait'), ('train', 'main', 'stage'), ('train', 'main', 'step')]\n"
    "for k in need:\n"
    "    assert names.get(k, 0) == 8, 'track %s: %d spans, not 8 (%s)' % (k, names.get(k, 0), "
    "names)\n"
    "fill = {e['args']['batch']: e for e in x if e['name'] == 'fill'}\n"
    "wait = {e['args']['batch']: e for e in x if e['name'] == 'wait'}\n"
    "for b in wait:\n"
    "    assert fill[b]['ts'] + fill[b]['dur'] <= wait[b]['ts'] + wait[b]['dur'] + 1, 'clock %d' % "
    "b\n"
    "part = {n: {e['args']['batch']: e for e in x if e['name'] == n}\n"
    "        for n in ('read', 'decode', 'transform')}\n"
    "for b, f in fill.items():\n"
    "    r, d, t = part['read'][b], part['decode'][b], part['transform'][b]\n"
    "    assert r['pid'] == f['pid'] and abs(r['ts'] - f['ts']) < 0.01, 'read starts the fill %d' "
    "% b\n"
    "    assert abs(d['ts'] - (r['ts'] + r['dur'])) < 0.01, 'decode follows read %d' % b\n"
    "    assert abs(t['ts'] - (d['ts'] + d['dur'])) < 0.01, 'transform follows decode %d' % b\n"
    "    assert abs(r['dur'] + d['dur'] + t['dur'] - f['dur']) < 0.01, 'the parts of %d: %s %s %s "
    "of %s' % (b, r['dur'], d['dur'], t['dur'], f['dur'])\n"
    "    assert r['dur'] > 0 and d['dur'] > 0 and t['dur'] > 0, 'an empty stage in %d' % b\n"
    "    assert d['dur'] > 5 * r['dur'] or d['dur'] > 50, 'decoding 8 PNGs: %s us' % d['dur']\n"
    "print('ok', len(x))\n";

Test(trace, a_run_writes_a_chrome_trace_with_loader_and_main_tracks)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3 to parse the trace");
    char *tr = path_join(dir, "trace.json");
    char *argv[] = {(char *)train_bin(), "--model", "probe",   "--epochs", "1", "--batch", "8",
                    "--workers",         "2",       "--trace", tr,         csv, NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
    run_free(&r);
    char *py = write_text(dir, "check.py", check_py);
    char *pargv[] = {"/usr/bin/python3", py, tr, NULL};
    run_argv(pargv, NULL, 60, &r);
    cr_expect_eq(r.status, 0, "the trace does not check out:\n%s%s", r.out, r.err);
    cr_expect(!strncmp(r.out, "ok ", 3), "%s", r.out);
    run_free(&r);
    free(py);
    free(tr);
}

Test(trace, an_unwritable_trace_is_refused_before_work)
{
    char *argv[] = {
        (char *)train_bin(),       "--model", "probe", "--epochs", "1", "--batch", "8", "--trace",
        "/nonexistent/dir/t.json", csv,       NULL};
    run_result r;
    run_argv(argv, NULL, 120, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "--trace /nonexistent/dir/t.json: folder /nonexistent/dir does not "
                            "exist"),
              "%s", r.err);
    cr_expect(!strstr(r.out, "epoch"), "no epoch ran:\n%s", r.out);
    run_free(&r);
}
