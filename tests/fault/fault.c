/*
 * fault.c — the test-only allocation shim behind fault.h. Linked with
 * -Wl,--wrap=<each function below>, so that our object files' calls land here.
 */
#include "fault.h"

#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_posix_memalign(void **out, size_t align, size_t size);
void *__wrap_aligned_alloc(size_t align, size_t size);

static atomic_long counted; /* allocations since the last arm */
static atomic_long target;  /* the one to fail; 0: none */
static atomic_int fired;
static int show_stack = -1; /* FAULT_BACKTRACE set: print where the failed one was made */

void fault_fail_at(long n)
{
    atomic_store(&target, 0);
    atomic_store(&counted, 0);
    atomic_store(&fired, 0);
    atomic_store(&target, n > 0 ? n : 0);
}

long fault_count(void) { return atomic_load(&counted); }

int fault_fired(void) { return atomic_load(&fired); }

/* Counts one allocation; 1 when it is the one to fail. */
static int fail_this(void)
{
    long k = atomic_fetch_add(&counted, 1) + 1;
    long t = atomic_load(&target);
    if (t > 0 && k == t) {
        atomic_store(&fired, 1);
        if (show_stack < 0)
            show_stack = getenv("FAULT_BACKTRACE") != NULL;
        if (show_stack) {
            void *pc[32];
            backtrace_symbols_fd(pc, backtrace(pc, 32), 2);
        }
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t size) { return fail_this() ? NULL : __real_malloc(size); }

void *__wrap_calloc(size_t n, size_t size) { return fail_this() ? NULL : __real_calloc(n, size); }

/* realloc(p, 0) frees p: failing it would leave p to a caller that thinks it
 * gone, which no allocator does, so it is passed on uncounted. */
void *__wrap_realloc(void *p, size_t size)
{
    if (size && fail_this())
        return NULL;
    return __real_realloc(p, size);
}

char *__wrap_strdup(const char *s) { return fail_this() ? NULL : __real_strdup(s); }

char *__wrap_strndup(const char *s, size_t n) { return fail_this() ? NULL : __real_strndup(s, n); }

int __wrap_posix_memalign(void **out, size_t align, size_t size)
{
    return fail_this() ? ENOMEM : __real_posix_memalign(out, align, size);
}

void *__wrap_aligned_alloc(size_t align, size_t size)
{
    return fail_this() ? NULL : __real_aligned_alloc(align, size);
}
