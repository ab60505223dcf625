// The native tests' one check: CHECK(cond) prints the failed condition with its place and
// counts it; a test's main prints "ALL OK" only when `failures` stayed 0 (the Python side
// looks for it). Header-only; each test is one translation unit.
#pragma once

#include <cstdio>

static int failures = 0;
#define CHECK(cond)                                                \
  do {                                                             \
    if (!(cond)) {                                                 \
      std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);  \
      ++failures;                                                  \
    }                                                              \
  } while (0)
