/*
 * fault.h — allocation fault injection for tests, SQLite's way: make the n-th
 * allocation from now fail, run a scenario, and see that it fails cleanly.
 *
 * The modules call malloc, calloc, realloc, strdup, ... directly (jemalloc is
 * the production allocator) and know nothing of this. The shim (fault.c) is
 * linked only into the fault-test executables, with the linker's
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,...
 * (fault_link_options() in tests/fault/CMakeLists.txt): every call that our
 * object files make (the modules' static libraries and the test itself) goes
 * to __wrap_malloc here, which counts it and either fails it or passes it on
 * to __real_malloc (libc's, jemalloc's or AddressSanitizer's malloc). Calls
 * made inside libc and the shared libraries (cJSON, PCRE2, utf8proc, ...) are
 * not wrapped and never fail: what is tested is our own code's handling of a
 * NULL from the allocator, not the libraries'. See tests/fault/README.md.
 *
 * Thread-safe (atomics): the engine's workers and the scheduler's engine
 * thread allocate too; "the n-th allocation" counts every thread's.
 */
#ifndef MHLA_TESTS_FAULT_H
#define MHLA_TESTS_FAULT_H

/* The n-th allocation from now (n >= 1) fails, once; n = 0 turns injection
 * off. Either way the count restarts at 0 and fault_fired() at 0. */
void fault_fail_at(long n);
/* Allocations (successful or failed) counted since the last fault_fail_at. */
long fault_count(void);
/* 1 when the armed allocation has been failed since the last fault_fail_at. */
int fault_fired(void);

#endif
