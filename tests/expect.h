/* expect.h - the one check of the C test programs: EXPECT(cond) prints
 * the file, line and condition that did not hold to stderr and counts it
 * in expect_failures, and the test goes on; main returns nonzero when
 * expect_failures is. */
#ifndef TPA_TEST_EXPECT_H
#define TPA_TEST_EXPECT_H

#include <stdio.h>

static int expect_failures;

#define EXPECT(cond)                                                            \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            expect_failures++;                                                  \
        }                                                                       \
    } while (0)

#endif
