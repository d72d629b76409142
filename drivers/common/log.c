/* dlz_log: every message through BIND's log callback, prefixed with the driver's name. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "core.h"

static log_t *_Atomic log_callback;
static char log_prefix[64] = "dlz";
static _Atomic long log_limited_second = -1;

void
log_setup(log_t *callback, const char *backend_name) {
	snprintf(log_prefix, sizeof(log_prefix), "dlz_%s", backend_name);
	atomic_store(&log_callback, callback);
}

static void
log_va(int level, const char *fmt, va_list ap) {
	char message[2048];
	log_t *callback = atomic_load(&log_callback);

	vsnprintf(message, sizeof(message), fmt, ap);
	if (callback != NULL) {
		callback(level, "%s: %s", log_prefix, message);
	} else {
		fprintf(stderr, "%s: %s\n", log_prefix, message);
	}
}

void
dlz_log(int level, const char *fmt, ...) {
	va_list ap;

	va_start(ap, fmt);
	log_va(level, fmt, ap);
	va_end(ap);
}

void
dlz_log_error_limited(const char *fmt, ...) {
	long second = dlz_now_ms() / 1000, last;
	va_list ap;

	last = atomic_load(&log_limited_second);
	/* One thread per second wins the exchange and logs; a database outage is not a flood. */
	if (last == second ||
	    !atomic_compare_exchange_strong(&log_limited_second, &last, second)) {
		return;
	}
	va_start(ap, fmt);
	log_va(ISC_LOG_ERROR, fmt, ap);
	va_end(ap);
}
