/*
 * mpitest_format.h - counts the string formatting (snprintf and kin) a
 * process does while a test says so.  Include after mpitest.h (its CHECK),
 * in a test whose header carries "mpitest-cflags: -rdynamic": the executable then
 * exports these definitions, the dynamic linker binds Open MPI's and the
 * components' calls to them, and each forwards to libc's vsnprintf.
 *
 *   mt_format_check_bound()   checks that the dynamic linker binds these
 *                             (built without -rdynamic it would not)
 *   mt_format_count_start()   zero the count and start counting (all threads)
 *   mt_format_count_stop()    stop; returns the calls counted
 *   mt_format_check(calls, n, what)  at most one call per 64 of the n
 *                             operations counted (background threads)
 *
 * Why: a debug-output call whose arguments are formatted before its level
 * is checked costs an snprintf on every message (btl/credit did: 3250 of
 * its 4665 instructions per MPI_Isend, callgrind); with verbosity off the
 * message path must format nothing.
 */
#ifndef MPITEST_FORMAT_H
#define MPITEST_FORMAT_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static volatile int mt_format_on;
static long mt_format_calls;

typedef int (*mt_vsnprintf_fn)(char *, size_t, const char *, va_list);

static int mt_format_forward(char *s, size_t n, const char *fmt, va_list ap)
{
    static mt_vsnprintf_fn real;
    if (!real) real = (mt_vsnprintf_fn)dlsym(RTLD_NEXT, "vsnprintf");
    if (mt_format_on) __atomic_fetch_add(&mt_format_calls, 1, __ATOMIC_RELAXED);
    return real(s, n, fmt, ap);
}

int snprintf(char *restrict s, size_t n, const char *restrict fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = mt_format_forward(s, n, fmt, ap);
    va_end(ap);
    return r;
}

int vsnprintf(char *restrict s, size_t n, const char *restrict fmt, va_list ap)
{
    return mt_format_forward(s, n, fmt, ap);
}

/* the fortified entry points Debian's Open MPI calls */
int __snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...);
int __snprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, ...)
{
    (void)flag;
    (void)slen;
    va_list ap;
    va_start(ap, fmt);
    int r = mt_format_forward(s, n, fmt, ap);
    va_end(ap);
    return r;
}

int __vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, va_list ap);
int __vsnprintf_chk(char *s, size_t n, int flag, size_t slen, const char *fmt, va_list ap)
{
    (void)flag;
    (void)slen;
    return mt_format_forward(s, n, fmt, ap);
}

static inline void mt_format_check_bound(void)
{
    mt_section("the counter is what the dynamic linker binds");
    CHECK(dlsym(RTLD_DEFAULT, "snprintf") == (void *)snprintf &&
              dlsym(RTLD_DEFAULT, "__snprintf_chk") == (void *)__snprintf_chk,
          "the executable's snprintf is not the one libraries get (built without -rdynamic?)");
}

static inline void mt_format_check(long calls, long n, const char *what)
{
    CHECK(calls <= n / 64, "%ld snprintf-family calls during %ld %s with verbosity off (something on "
          "their path formats a string before checking its output level)", calls, n, what);
    if (mt_verbose) printf("rank %d: %ld formatting calls in %ld %s\n", mt_rank, calls, n, what);
}

static inline void mt_format_count_start(void)
{
    __atomic_store_n(&mt_format_calls, 0, __ATOMIC_RELAXED);
    mt_format_on = 1;
}

static inline long mt_format_count_stop(void)
{
    mt_format_on = 0;
    return __atomic_load_n(&mt_format_calls, __ATOMIC_RELAXED);
}

#endif
