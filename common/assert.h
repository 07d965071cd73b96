/* assert.h — ASSERT(cond): a precondition or invariant the code relies on
 * and no input can break, only a bug in the caller.
 *
 * In the sanitized builds (asan, fakecuda: -DTRAIN_ASSERTS=1, so every
 * test run) a false cond prints
 *     train: internal error: ASSERT(cond) failed at file:line in function
 * to stderr and aborts (ASan then prints the stack). In the release
 * builds it compiles to nothing: cond is not evaluated (so it may be
 * costly or call a query), only type-checked, which also keeps a variable
 * used only by it from being "unused". Not for anything a user's file,
 * option or machine can cause: those get a message and an exit status.
 *
 * Left out: <assert.h>'s NDEBUG convention (a release build would have to
 * remember -DNDEBUG, and its message names no program).
 */
#ifndef TRAIN_COMMON_ASSERT_H
#define TRAIN_COMMON_ASSERT_H

#if defined(TRAIN_ASSERTS) && TRAIN_ASSERTS

#include <stdio.h>
#include <stdlib.h>

#define ASSERT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "train: internal error: ASSERT(%s) failed at %s:%d in %s\n", #cond,    \
                    __FILE__, __LINE__, __func__);                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#else

#define ASSERT(cond) ((void)sizeof(!(cond)))

#endif

#endif
