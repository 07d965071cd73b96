/* fuzz_csv.c — libFuzzer target over the CSV parser (fuzz/csv_harness.h).
 *
 * Built two ways (mk/fuzz.mk):
 *   clang -fsanitize=fuzzer,address,undefined -DFUZZ_LIBFUZZER
 *       -> build/fuzz/fuzz_csv, run by `make fuzz-csv` for FUZZ_SECONDS
 *          (libcsv is the uninstrumented system library)
 *   gcc -> build/tools/fuzz_csv, a plain driver:
 *       fuzz_csv FILE...      replay inputs through the same harness
 *       fuzz_csv --seeds DIR  write the starting corpus: small CSVs of
 *                             every shape the parser accepts or names
 */
#define _POSIX_C_SOURCE 200809L
#include <sys/stat.h>

#include "fuzz/csv_harness.h"

static char fuzz_path[64];

#ifdef FUZZ_LIBFUZZER

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fuzz_path[0])
        fuzz_scratch_file("fuzz_csv", fuzz_path, sizeof fuzz_path);
    fuzz_csv_one(fuzz_path, data, size);
    return 0;
}

#else

#include "fuzz/driver.h"

static int seeds(const char *dir)
{
    static const struct {
        const char *name;
        uint8_t sel;
        const char *text;
        size_t n;
    } s[] = {
#define SEED(name, sel, text)                                                                      \
    {                                                                                              \
        name, sel, text, sizeof text - 1                                                           \
    }
        SEED("plain", 0x00, "a.png,0\nb.png,1\nc.png,2\n"),
        SEED("header", 0x02, "path,label\nx/a.jpg,3\nx/b.jpg,1\n"),
        SEED("names", 0x00, "path,label\ncat.png,cat\ndog.png,dog\nemu.png,cat\n"),
        SEED("columns", 0x20, "label,path\n0,a.png\n1,b.png\n"),
        SEED("named-columns", 0x41, "id,img,label,path,extra\n7,q,1,a.png,z\n8,r,0,b.png,z\n"),
        SEED("quoted", 0x00, "\"a,b.png\",0\n\"multi\nline.png\",1\n\"q\"\"uote.png\",0\r\n"),
        SEED("crlf-bom", 0x00, "\xef\xbb\xbfpath,label\r\na.png,0\r\nb.png,1\r\n"),
        SEED("bad-rows-skip", 0x04, "a.png,0\nb.png\n,1\nc.png,-1\nd.png,x1\ne.png,1\n"),
        SEED("bad-rows-list", 0x08, "a.png,0\nb.png,99999999999\nc.png,1.5\nd.png,1\n"),
        SEED("sparse", 0x10, "a.png,0\nb.png,1\nc.png,1000\n"),
        SEED("root", 0x80, "/abs/a.png,0\nrel/b.png,1\n../c.png,0\n"),
        SEED("utf16", 0x00, "\xff\xfep\0a\0t\0h\0,\0l\0\n\0"),
        SEED("empty-fields", 0x03, ",,\n,\n\n\n"),
        SEED("nul", 0x00, "a\0b.png,0\nc.png,1\n"),
        SEED("heading-only", 0x00, "path,label\n"),
#undef SEED
    };
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "%s: %s\n", dir, strerror(errno));
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < sizeof s / sizeof *s; i++)
        rc |= fuzz_put_seed(dir, s[i].name, s[i].sel, s[i].text, s[i].n);
    if (rc == 0)
        printf("fuzz_csv: %zu seeds written to %s\n", sizeof s / sizeof *s, dir);
    return rc ? 1 : 0;
}

static void setup(void) { fuzz_scratch_file("fuzz_csv", fuzz_path, sizeof fuzz_path); }
static int one(const uint8_t *d, size_t n) { return fuzz_csv_one(fuzz_path, d, n); }

int main(int argc, char **argv)
{
    static const fuzz_driver t = {"fuzz_csv", seeds, setup, one, NULL, "loaded", "refused"};
    return fuzz_driver_main(&t, argc, argv);
}

#endif
