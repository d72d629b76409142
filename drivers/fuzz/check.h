/* A harness's verdict: what did not hold, on stderr (libFuzzer keeps it with the crash), then
 * abort, which libFuzzer reports as a crash and saves the input of. */
#ifndef DLZ_FUZZ_CHECK_H
#define DLZ_FUZZ_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

__attribute__((noreturn, format(printf, 1, 2))) static inline void
fuzz_fail(const char *fmt, ...) {
	va_list ap;

	fputs("harness check failed: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

#endif /* DLZ_FUZZ_CHECK_H */
