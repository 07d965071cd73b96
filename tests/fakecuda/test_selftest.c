/* test_selftest.c — `train --selftest` on the fake: compares with the CPU
 * backend and passes when the backend is right, fails naming the op and
 * the element when one result is off by one, and says there is no usable
 * GPU when there is none.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "app/selftest.h"
#include "tests/fakecuda/fake.h"

static void setup(void) { fake_reset(); }

TestSuite(selftest, .init = setup);

/* run selftest_main, return its output */
static char *run(int *rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    *rc = selftest_main(f);
    fclose(f);
    return buf;
}

Test(selftest, passes_on_a_correct_backend)
{
    int rc;
    char *out = run(&rc);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "selftest: device 0: Fake GPU (tests/fakecuda)"), "%s", out);
    cr_expect(strstr(out, "selftest: PASS: "), "%s", out);
    cr_expect(strstr(out, "FAIL") == NULL, "%s", out);
    cr_expect(strstr(out, "staged batch 2 (copy stream)") != NULL, "%s", out);
    cr_expect(strstr(out, "lenet b8 step 5 conv2.weight momentum ") != NULL, "%s", out);
    cr_expect_eq(fake_violations(), 0, "%s", fake_last_violation());
    cr_expect_eq(fake_live_allocations(), 0);
    cr_expect_eq(fake_live_objects(), 0);
    free(out);
}

Test(selftest, one_wrong_element_fails_and_names_the_op)
{
    fake_corrupt_next("cudnnConvolutionBackwardFilter");
    int rc;
    char *out = run(&rc);
    cr_expect_eq(rc, 1, "%s", out);
    const char *line = strstr(out, "s1 p1 dw ");
    cr_assert_not_null(line, "%s", out);
    const char *fail = strstr(line, "element 0 of 72: gpu "), *eol = strchr(line, '\n');
    cr_expect(fail && fail < eol, "the dw line reports the element: %s", out);
    cr_expect(strstr(out, "selftest: FAIL: 1 of ") != NULL, "%s", out);
    free(out);
}

Test(selftest, no_gpu_is_status_2_with_the_reason)
{
    fake_set_devices(0, cudaErrorInsufficientDriver, 0);
    int rc;
    char *out = run(&rc);
    cr_expect_eq(rc, 2);
    cr_expect(strstr(out, "selftest: no usable GPU: no NVIDIA driver"), "%s", out);
    free(out);
}
