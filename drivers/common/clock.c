/* dlz_now_ms: the one clock of the drivers, for ages and deadlines (never for a timestamp). */
#include <time.h>

#include "dlz_driver.h"

long
dlz_now_ms(void) {
	struct timespec ts;

	/* The coarse clock (a few ms of resolution, no system call) is read on every DNS query
	 * (the memo's age); nothing here needs a finer one. */
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
