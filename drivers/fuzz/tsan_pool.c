/*
 * The connection pool, the memos and the update path under concurrent load, for
 * ThreadSanitizer (make -C drivers tsan; tests/test_fuzz_harness.py runs it). named itself is
 * not built with TSan, so a TSan build of a driver inside it would see none of named's
 * synchronisation; here the memory driver is driven through its dlz_* entry points by threads
 * of this program as named's workers would (standin.c stands in for named's helpers).
 *
 *   tsan_pool DIR
 *
 * DIR is a scratch directory (the data file and the outage file go there). Two phases:
 *  1. READERS threads look names up (dlz_findzonedb, then dlz_lookup) while one thread sends
 *     updates (dlz_newversion, dlz_addrdataset, dlz_subrdataset, dlz_closeversion) and
 *     another makes the store fail and recover (the memory driver's outage_file) every
 *     millisecond: the pool goes down, probes and comes up under the readers' feet. Any
 *     answer but found, not found or SERVFAIL is an error.
 *  2. The store works: the same readers and updates, and now every lookup must answer
 *     (never SERVFAIL) and every update must go through; at the end each name the updates
 *     of phase 2 left holds exactly its last record.
 * Exit 0 when every check held (TSan's own reports make it exit 66: TSAN_OPTIONS).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/dlz_abi.h"
#include "standin.h"

#define ZONE "fz.test"
#define READERS 3
#define LOOKUPS 20000 /* per reader and phase */
#define UPDATES 2000 /* per phase */
#define NAMES 16     /* the updated names: u0 .. u15 */

static const char zone_file[] =
	"#dlzbench-memory 1\n"
	"Z\tfz.test\n"
	"R\tfz.test\tfz.test\t3600\tSOA\tns.fz.test. admin.fz.test. 1 3600 600 86400 300\n"
	"R\tfz.test\tfz.test\t3600\tNS\tns.fz.test.\n"
	"R\tfz.test\tns.fz.test\t3600\tA\t192.0.2.53\n"
	"R\tfz.test\twww.fz.test\t300\tA\t192.0.2.1\n"
	"R\tfz.test\tc.fz.test\t0\tENT\t\n"
	"R\tfz.test\tb.c.fz.test\t300\tTXT\t\"b\"\n";

static void *db;
static char outage_path[4096];
static atomic_bool outages;       /* phase 1: the toggler runs */
static atomic_bool strict;        /* phase 2: every answer must come */
static atomic_bool updates_done;  /* the updater finished: readers may stop */
static atomic_uint failures;      /* checks that did not hold */
static atomic_ulong lookups, servfails;

static void
fail(const char *what, const char *name, int result) {
	fprintf(stderr, "tsan_pool: %s %s: result %d\n", what, name, result);
	atomic_fetch_add(&failures, 1);
}

static void *
reader(void *arg) {
	static const char *const relative[] = { "www", "@", "b.c", "c", "nx", "u1", "u2", "u3",
						"u7", "u15", "x.u1", "ns" };
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (unsigned i = 0; i < LOOKUPS || !atomic_load(&updates_done); i++) {
		const char *rel = relative[rand_r(&seed) % (sizeof(relative) / sizeof(*relative))];
		char name[64];
		struct dns_sdlzlookup found = { 0 };
		isc_result_t result;

		snprintf(name, sizeof(name), "%s%s" ZONE, strcmp(rel, "@") == 0 ? "" : rel,
			 strcmp(rel, "@") == 0 ? "" : ".");
		result = dlz_findzonedb(db, name, NULL, NULL);
		if (result != ISC_R_SUCCESS && result != ISC_R_NOTFOUND) {
			fail("findzonedb", name, result);
		}
		result = dlz_lookup(ZONE, rel, db, &found, NULL, NULL);
		atomic_fetch_add(&lookups, 1);
		if (result == ISC_R_FAILURE) {
			atomic_fetch_add(&servfails, 1);
			if (atomic_load(&strict)) {
				fail("lookup (the store works)", name, result);
			}
		} else if (result != ISC_R_SUCCESS && result != ISC_R_NOTFOUND) {
			fail("lookup", name, result);
		}
	}
	return NULL;
}

/* The record of update i at name u<i % NAMES>: named's rdatastr line. */
static void
update_line(unsigned i, char *owner, size_t owner_size, char *line, size_t line_size) {
	snprintf(owner, owner_size, "u%u." ZONE, i % NAMES);
	snprintf(line, line_size, "%s.\t300\tIN\tA\t10.%u.%u.%u", owner, (i >> 16) & 255,
		 (i >> 8) & 255, i & 255);
}

/* Update i: replace the name's record of update i - NAMES (or, for the phase's first
 * update of the name, every A record it has) by its own. */
static void *
updater(void *arg) {
	unsigned first = (unsigned)(uintptr_t)arg;

	for (unsigned i = first; i < first + UPDATES; i++) {
		char owner[64], line[128], old_owner[64], old_line[128];
		void *version = NULL;
		isc_result_t result = dlz_newversion(ZONE, db, &version);
		bool ok = result == ISC_R_SUCCESS;

		if (!ok) {
			if (atomic_load(&strict)) {
				fail("newversion (the store works)", ZONE, result);
			}
			continue;
		}
		update_line(i, owner, sizeof(owner), line, sizeof(line));
		if (i >= first + NAMES) {
			update_line(i - NAMES, old_owner, sizeof(old_owner), old_line, sizeof(old_line));
			ok = dlz_subrdataset(old_owner, old_line, db, version) == ISC_R_SUCCESS;
		} else {
			/* The phase's first update of the name: whatever an earlier phase left. */
			ok = dlz_delrdataset(owner, "A", db, version) == ISC_R_SUCCESS;
		}
		ok = ok && dlz_addrdataset(owner, line, db, version) == ISC_R_SUCCESS;
		if (!ok && atomic_load(&strict)) {
			fail("update (the store works)", owner, ISC_R_FAILURE);
		}
		dlz_closeversion(ZONE, ok, db, &version);
		if (version != NULL) {
			fail("closeversion left the version", owner, 0);
		}
	}
	atomic_store(&updates_done, true);
	return NULL;
}

static void *
toggler(void *arg) {
	(void)arg;
	while (atomic_load(&outages)) {
		int fd = open(outage_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		struct timespec ms = { 0, 1000000 };

		if (fd >= 0) {
			close(fd);
		}
		nanosleep(&ms, NULL);
		unlink(outage_path);
		nanosleep(&ms, NULL);
	}
	return NULL;
}

static void
run_phase(unsigned first_update, bool with_outages) {
	pthread_t readers[READERS], upd, tog;

	atomic_store(&updates_done, false);
	atomic_store(&outages, with_outages);
	atomic_store(&strict, !with_outages);
	for (unsigned i = 0; i < READERS; i++) {
		pthread_create(&readers[i], NULL, reader, (void *)(uintptr_t)(i + 1));
	}
	pthread_create(&upd, NULL, updater, (void *)(uintptr_t)first_update);
	if (with_outages) {
		pthread_create(&tog, NULL, toggler, NULL);
	}
	pthread_join(upd, NULL);
	for (unsigned i = 0; i < READERS; i++) {
		pthread_join(readers[i], NULL);
	}
	if (with_outages) {
		atomic_store(&outages, false);
		pthread_join(tog, NULL);
	}
}

/* After an outage: wait (at most 2 s) until a lookup is answered again. */
static void
await_store(void) {
	for (int i = 0; i < 2000; i++) {
		struct dns_sdlzlookup found = { 0 };
		struct timespec ms = { 0, 1000000 };

		if (dlz_lookup(ZONE, "www", db, &found, NULL, NULL) == ISC_R_SUCCESS) {
			return;
		}
		nanosleep(&ms, NULL);
	}
	fail("the store did not come back", ZONE, 0);
}

/* Each name phase 2 updated holds exactly the record of its last update. */
static void
check_final(unsigned first) {
	struct dns_sdlzallnodes all = { 0 };

	if (standin_allnodes(ZONE, db, &all) != ISC_R_SUCCESS) {
		fail("allnodes", ZONE, 0);
		return;
	}
	for (unsigned k = 0; k < NAMES; k++) {
		unsigned last = first + UPDATES - NAMES + k, seen = 0;
		char owner[64], line[128], want[160];

		update_line(last, owner, sizeof(owner), line, sizeof(line));
		snprintf(want, sizeof(want), "%s. A 300 %s", owner, strrchr(line, '\t') + 1);
		for (size_t i = 0; i < all.count; i++) {
			char prefix[72];
			snprintf(prefix, sizeof(prefix), "%s. ", owner);
			if (strncmp(all.lines[i], prefix, strlen(prefix)) == 0) {
				seen++;
				if (strcmp(all.lines[i], want) != 0) {
					fail("a record the updates did not leave", all.lines[i], 0);
				}
			}
		}
		if (seen != 1) {
			fail("not exactly one record at", owner, (int)seen);
		}
	}
	standin_allnodes_free(&all);
}

int
main(int argc, char **argv) {
	char data_path[4096], file_arg[4200], outage_arg[4200];
	char *args[] = { "dlz_memory.so", file_arg, outage_arg, "connections=3",
			 "down_interval_ms=2", "update_zones=" ZONE, "update_unsigned=yes" };
	FILE *f;

	if (argc != 2) {
		fprintf(stderr, "usage: tsan_pool SCRATCH_DIR\n");
		return 2;
	}
	snprintf(data_path, sizeof(data_path), "%s/zones.tsv", argv[1]);
	snprintf(outage_path, sizeof(outage_path), "%s/outage", argv[1]);
	snprintf(file_arg, sizeof(file_arg), "file=%s", data_path);
	snprintf(outage_arg, sizeof(outage_arg), "outage_file=%s", outage_path);
	f = fopen(data_path, "w");
	if (f == NULL || fputs(zone_file, f) == EOF || fclose(f) != 0) {
		fprintf(stderr, "tsan_pool: cannot write %s: %s\n", data_path, strerror(errno));
		return 2;
	}
	if (standin_create("tsan", sizeof(args) / sizeof(*args), args, &db, true) !=
		    ISC_R_SUCCESS ||
	    dlz_configure(NULL, NULL, db) != ISC_R_SUCCESS) {
		fprintf(stderr, "tsan_pool: dlz_create failed\n");
		return 2;
	}
	run_phase(0, true);
	unlink(outage_path);
	await_store();
	run_phase(UPDATES, false);
	check_final(UPDATES);
	dlz_destroy(db);
	printf("tsan_pool: %lu lookups (%lu SERVFAIL, all during outages), %d updates per phase, "
	       "%u failed checks\n",
	       atomic_load(&lookups), atomic_load(&servfails), UPDATES, atomic_load(&failures));
	return atomic_load(&failures) == 0 ? 0 : 1;
}
