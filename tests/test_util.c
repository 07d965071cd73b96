/* test_util.c — common/: byte counts as users type and read them, the
 * hash every fingerprint (cache key, checkpoint, CSV) rests on, and the
 * keyed RNG's floats. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "common/rng.h"
#include "common/util.h"

Test(util, fmt_bytes_switches_unit_at_1024)
{
    char b[32];
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 0), "0 B");
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 1023), "1023 B");
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 1024), "1.0 KB");
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 1536), "1.5 KB");
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 1024 * 1024), "1.0 MB");
    cr_assert_str_eq(fmt_bytes(b, sizeof b, 3ull << 30), "3.0 GB");
}

Test(util, parse_bytes_suffixes_and_junk)
{
    uint64_t v;
    const struct {
        const char *s;
        uint64_t want;
    } ok[] = {{"100", 100},       {"100K", 102400}, {"2M", 2u << 20},  {"2mb", 2u << 20},
              {"1G", 1ull << 30}, {"1.5KB", 1536},  {"3T", 3ull << 40}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        cr_assert_eq(parse_bytes(ok[i].s, &v), 0, "%s", ok[i].s);
        cr_assert_eq(v, ok[i].want, "%s: %llu", ok[i].s, (unsigned long long)v);
    }
    /* 1e999 overflows strtod (ERANGE): refused, not taken as some value */
    const char *bad[] = {"", "x", "-1", "5Q", "5KX", "5K B", " 5", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_neq(parse_bytes(bad[i], &v), 0, "'%s' accepted", bad[i]);
}

Test(util, hash64_sees_every_byte)
{
    /* every length up to 70 (the 32-byte blocks, the 8-byte words and the
     * tail) and every byte position: changing one byte changes the hash */
    unsigned char buf[70];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 37 + 11);
    for (size_t len = 1; len <= sizeof buf; len++) {
        uint64_t h = hash64(buf, len, 5);
        cr_assert_eq(hash64(buf, len, 5), h);
        cr_assert_neq(hash64(buf, len, 6), h, "len %zu: the seed", len);
        if (len > 1)
            cr_assert_neq(hash64(buf, len - 1, 5), h, "len %zu: the length", len);
        for (size_t k = 0; k < len; k++) {
            buf[k] ^= 0x40;
            cr_assert_neq(hash64(buf, len, 5), h, "len %zu: byte %zu", len, k);
            buf[k] ^= 0x40;
        }
    }
}

Test(util, rng_uniform_is_in_unit_interval_with_mean_half)
{
    rng r = rng_keyed(3, RNG_TOOL, 1, 2);
    double sum = 0;
    float mx = 0;
    for (int i = 0; i < 200000; i++) {
        float u = rng_uniform(&r);
        cr_assert(u >= 0.0f && u < 1.0f, "draw %d: %g", i, (double)u);
        sum += u;
        mx = u > mx ? u : mx;
    }
    cr_assert(sum / 200000 > 0.495 && sum / 200000 < 0.505, "mean %g", sum / 200000);
    cr_assert_gt(mx, 0.999f);
    for (int i = 0; i < 100000; i++) {
        uint32_t k = rng_below(&r, 7);
        cr_assert_lt(k, 7u);
    }
}
