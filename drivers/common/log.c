/* dlz_log: every message through BIND's log callback, prefixed with the driver's name. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "core.h"

/*
 * dlz_log_error_limited: one message a second per kind of message, a kind being its format
 * string (one call site, or a few that share a format). A database outage makes every query
 * log the same failure, which is a flood; one limit for the whole process would also hide the
 * next message of another kind (an update's "rolled back" line right after the store's
 * reason for it). LIMIT_KINDS kinds have a second of their own; any further kind shares the
 * last slot.
 */
#define LIMIT_KINDS 64

struct limit_slot {
	const char *_Atomic fmt;
	_Atomic long second;
};

static log_t *_Atomic log_callback;
static char log_prefix[64] = "dlz";
static struct limit_slot log_limits[LIMIT_KINDS];

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

/* The slot of fmt's kind: found by the format's address, claimed the first time. */
static struct limit_slot *
limit_slot_of(const char *fmt) {
	unsigned start = (unsigned)(((uintptr_t)fmt >> 3) % LIMIT_KINDS);

	for (unsigned i = 0; i < LIMIT_KINDS; i++) {
		struct limit_slot *slot = &log_limits[(start + i) % LIMIT_KINDS];
		const char *have = atomic_load(&slot->fmt);

		if (have == fmt) {
			return slot;
		}
		if (have == NULL &&
		    (atomic_compare_exchange_strong(&slot->fmt, &have, fmt) || have == fmt)) {
			return slot;
		}
	}
	return &log_limits[LIMIT_KINDS - 1];
}

void
dlz_log_error_limited(const char *fmt, ...) {
	struct limit_slot *slot = limit_slot_of(fmt);
	long second = dlz_now_ms() / 1000 + 1, last;
	va_list ap;

	last = atomic_load(&slot->second);
	/* One thread per second and kind wins the exchange and logs (0: never logged). */
	if (last == second || !atomic_compare_exchange_strong(&slot->second, &last, second)) {
		return;
	}
	va_start(ap, fmt);
	log_va(ISC_LOG_ERROR, fmt, ap);
	va_end(ap);
}
