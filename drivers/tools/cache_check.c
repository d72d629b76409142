/*
 * The core's cache (common/cache.c) against a store simulated in memory, for the tests.
 * Built with AddressSanitizer and UndefinedBehaviorSanitizer, and again with ThreadSanitizer
 * (make -C drivers tools): a bad access, a data race or a failed check ends the run with a
 * non-zero status and says what failed.
 *
 * The store: zone "example" with its apex and owners h0.example ... h<N-1>.example; owner i
 * is at version truth[i] (only ever incremented), exists unless its version is a multiple of
 * 3, and then holds one TXT row "v<version>". A writer commits a change by incrementing a
 * version and then reports it through the change channel (a queue that the channel's watch
 * thread, run by the cache like a driver's, drains in order, reporting each change and then
 * the instant it drained from as caught up), or invalidates it itself at once, as an update
 * through the driver does at its commit.
 *
 * The property checked on every hit: the answer is the owner's state at some version between
 * the last one whose change had been reported before the lookup began and the one current
 * after it: never older than a reported change, never a state the store did not hold.
 *
 *   cache_check units        single-threaded checks of each rule
 *   cache_check stress SECS  readers, writers, outages and eviction at once for SECS seconds
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/cache.h"

#define ZONE "example"
#define OWNERS 3000
#define READERS 3
#define WRITERS 2
#define QUEUE 4096

static int failures;

#define CHECK(cond, ...)                                             \
	do {                                                         \
		if (!(cond)) {                                       \
			fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                \
			fprintf(stderr, "\n");                       \
			failures++;                                  \
		}                                                    \
	} while (0)

/* ---- the simulated store ---------------------------------------------------------------------- */

static atomic_uint truth[OWNERS];
/* The last version of each owner whose change the cache was told of. */
static atomic_uint reported[OWNERS];
static bool zone_exists = true;

static bool
version_exists(unsigned v) {
	return v % 3 != 0;
}

/* A fetch request for h<i>.example, as core.c builds one (no hints). */
struct request {
	char qname[64];
	const char *names[2];
	const char *wilds[2];
	const char *owners[3];
	struct dlz_fetch_req req;
};

static void
request_for(struct request *r, unsigned i, int zone_index) {
	snprintf(r->qname, sizeof(r->qname), "h%u." ZONE, i);
	r->names[0] = r->qname;
	r->names[1] = ZONE;
	r->wilds[0] = NULL;
	r->wilds[1] = "*." ZONE;
	r->owners[0] = r->names[0];
	r->owners[1] = r->names[1];
	r->owners[2] = r->wilds[1];
	r->req = (struct dlz_fetch_req){ .qname = r->qname, .nnames = 2, .names = r->names,
					 .wilds = r->wilds, .zone_index = zone_index,
					 .nowners = 3, .owners = r->owners, .extras_zone = -1 };
}

/* What a one-statement backend answers: every zone among the names, every row of every
 * candidate owner. The version read is returned (the store's snapshot). */
static unsigned
store_fetch(const struct request *r, unsigned i, struct dlz_rowset *out) {
	unsigned v = atomic_load(&truth[i]);
	char text[32];

	rowset_reset(out);
	if (!zone_exists) {
		return v;
	}
	dlz_rowset_add_zone(out, ZONE);
	dlz_rowset_add_row_n(out, ZONE, strlen(ZONE), ZONE, strlen(ZONE), "SOA", 3, 60,
			     "ns." ZONE ". h." ZONE ". 1 2 3 4 5", strlen("ns." ZONE ". h." ZONE ". 1 2 3 4 5"));
	if (version_exists(v)) {
		snprintf(text, sizeof(text), "v%u", v);
		dlz_rowset_add_row_n(out, ZONE, strlen(ZONE), r->qname, strlen(r->qname), "TXT", 3,
				     60, text, strlen(text));
	}
	return v;
}

/* The owner's state in a rowset: -1 absent, else its version. */
static long
state_in(const struct dlz_rowset *rows, const char *qname) {
	for (size_t k = 0; k < rows->nrows; k++) {
		if (strcmp(rows->rows[k].owner, qname) == 0) {
			return strtol(rows->rows[k].rdata + 1, NULL, 10);
		}
	}
	return -1;
}

/* One lookup as core.c makes it: from the cache, else from the store into the cache. On a
 * hit, the answer is checked against the versions before and after. True on a hit. */
static bool
lookup(struct cache *c, unsigned i, struct dlz_rowset *rows) {
	struct request r;
	unsigned before = atomic_load(&reported[i]), after;
	enum cache_outcome got;
	long state;

	request_for(&r, i, -1);
	rowset_reset(rows);
	got = cache_fetch(c, &r.req, rows);
	if (got != CACHE_HIT) {
		struct cache_ticket ticket = cache_ticket(c);
		store_fetch(&r, i, rows);
		cache_store(c, &r.req, rows, ticket);
		return false;
	}
	after = atomic_load(&truth[i]);
	state = state_in(rows, r.qname);
	CHECK(rowset_has_zone(rows, ZONE), "h%u: a hit without the zone", i);
	if (state >= 0) {
		CHECK(state >= before && state <= after && version_exists((unsigned)state),
		      "h%u: a hit at version %ld, outside [%u, %u]", i, state, before, after);
	} else {
		bool absent_between = false;
		for (unsigned v = before; v <= after && !absent_between; v++) {
			absent_between = !version_exists(v);
		}
		CHECK(absent_between, "h%u: a hit says absent, but no version in [%u, %u] is", i,
		      before, after);
	}
	return true;
}

/* ---- the change channel: a queue drained by the cache's watch thread ----------------------- */

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct change {
	unsigned owner;
	unsigned version;
} queue[QUEUE];
static size_t queue_head, queue_len;
static atomic_bool outages;   /* the watch thread takes the channel down now and then */
static atomic_ulong downs;
static atomic_ulong drains;   /* drain() calls done */

/* A committed change, queued for reporting; false when the queue is full (not committed). */
static bool
commit_change(unsigned i) {
	bool done = false;

	pthread_mutex_lock(&queue_lock);
	if (queue_len < QUEUE) {
		/* The version changes and is queued under one lock: the queue is in commit order. */
		unsigned v = atomic_fetch_add(&truth[i], 1) + 1;
		queue[(queue_head + queue_len++) % QUEUE] = (struct change){ i, v };
		done = true;
	}
	pthread_mutex_unlock(&queue_lock);
	return done;
}

/* The cache was told of owner i's change to version v (versions of one owner may be told
 * out of order, by the channel and by an update's own invalidation). */
static void
note_reported(unsigned i, unsigned v) {
	unsigned seen = atomic_load(&reported[i]);

	while (seen < v && !atomic_compare_exchange_weak(&reported[i], &seen, v)) {
	}
}

/* Everything queued before now, reported in order. */
static void
drain(struct dlz_channel *ch) {
	char owner[64];
	long since = dlz_now_ms();

	for (;;) {
		struct change next;

		pthread_mutex_lock(&queue_lock);
		if (queue_len == 0) {
			pthread_mutex_unlock(&queue_lock);
			break;
		}
		next = queue[queue_head];
		queue_head = (queue_head + 1) % QUEUE;
		queue_len--;
		pthread_mutex_unlock(&queue_lock);
		snprintf(owner, sizeof(owner), "h%u." ZONE, next.owner);
		dlz_channel_changed(ch, ZONE, owner);
		note_reported(next.owner, next.version);
	}
	dlz_channel_synced(ch, since);
	atomic_fetch_add(&drains, 1);
}

static void
test_watch(void *state, struct dlz_channel *ch) {
	unsigned long round = 0;

	(void)state;
	dlz_channel_up(ch);
	while (dlz_channel_wait(ch, -1, 0, 1) == 0) {
		if (atomic_load(&outages) && ++round % 200 == 0) {
			/* Changes committed while down are reported after: as a reconnect finds
			 * the data as it is then, with the cache flushed. */
			dlz_channel_down(ch, "a simulated outage");
			atomic_fetch_add(&downs, 1);
			dlz_channel_wait(ch, -1, 0, 5);
			dlz_channel_up(ch);
		}
		drain(ch);
	}
}

static const struct dlz_backend test_backend = { .name = "cache_check", .watch = test_watch };

/* A channel that is up and says once that it caught up, and never again. */
static atomic_int silent_synced;

static void
silent_watch(void *state, struct dlz_channel *ch) {
	(void)state;
	dlz_channel_up(ch);
	dlz_channel_synced(ch, dlz_now_ms());
	atomic_store(&silent_synced, 1);
	while (dlz_channel_wait(ch, -1, 0, 1000) == 0) {
	}
}

static const struct dlz_backend silent_backend = { .name = "cache_check", .watch = silent_watch };

/* Until the watch thread has reported everything committed so far and said so (a whole
 * drain begun after this call). */
static void
settle(void) {
	unsigned long start = atomic_load(&drains);

	while (atomic_load(&drains) < start + 2) {
		usleep(1000);
	}
}

/* ---- single-threaded checks ------------------------------------------------------------------- */

/* The request's strings stay valid as long as the rows (the fetch contract): kept here. */
static struct request last_request;

static enum cache_outcome
fetch_of(struct cache *c, unsigned i, int zone_index, struct dlz_rowset *rows) {
	request_for(&last_request, i, zone_index);
	rowset_reset(rows);
	return cache_fetch(c, &last_request.req, rows);
}

static void
fill(struct cache *c, unsigned i, int zone_index, struct dlz_rowset *rows) {
	struct request r;
	struct cache_ticket ticket = cache_ticket(c);

	request_for(&r, i, zone_index);
	store_fetch(&r, i, rows);
	cache_store(c, &r.req, rows, ticket);
}

static void
units(void) {
	struct cache *c = cache_new(1 << 20, 200);
	struct dlz_rowset rows = { 0 };
	struct cache_ticket ticket;
	struct request r;

	atomic_store(&truth[1], 1);  /* exists */
	atomic_store(&truth[2], 3);  /* absent */
	atomic_store(&truth[3], 4);
	CHECK(c != NULL, "cache_new");
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_BYPASSED, "answered before the channel was up");
	CHECK(cache_watch_start(c, &test_backend, NULL), "watch");
	settle();
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_MISS, "an empty cache answered");
	fill(c, 1, -1, &rows);
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_HIT, "a filled fetch missed");
	CHECK(state_in(&rows, "h1." ZONE) == 1, "the hit's rows");
	CHECK(rows.nrows == 2, "the hit has %zu rows, not the apex's and h1's", rows.nrows);
	/* A negative answer: h2 does not exist. */
	fill(c, 2, -1, &rows);
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_HIT && state_in(&rows, "h2." ZONE) == -1,
	      "the negative answer");
	/* A lookup with a given zone (core.c's fetch_for_lookup) from the same entries. */
	CHECK(fetch_of(c, 1, 1, &rows) == CACHE_HIT && state_in(&rows, "h1." ZONE) == 1,
	      "a lookup's fetch");
	/* A change of one owner: its entry goes, the others stay. */
	commit_change(1);
	commit_change(1); /* version 3: absent now */
	settle();
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_MISS, "a changed owner was answered");
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_HIT, "an unchanged owner was dropped");
	fill(c, 1, -1, &rows);
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_HIT && state_in(&rows, "h1." ZONE) == -1,
	      "the changed owner after a new fill");
	/* A fetch that a change overtook is not inserted. */
	ticket = cache_ticket(c);
	request_for(&r, 3, -1);
	store_fetch(&r, 3, &rows);
	cache_invalidate(c, ZONE, "h3." ZONE); /* an update's commit, between read and insert */
	cache_store(c, &r.req, &rows, ticket);
	CHECK(fetch_of(c, 3, -1, &rows) == CACHE_MISS, "a result read before a change was inserted");
	/* A zone change drops every entry of the zone, the zone entry too. */
	fill(c, 3, -1, &rows);
	cache_invalidate(c, ZONE, NULL);
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_MISS && fetch_of(c, 3, -1, &rows) == CACHE_MISS,
	      "a zone change left entries");
	/* No zone: the negative zone facts answer. */
	zone_exists = false;
	fill(c, 2, -1, &rows);
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_HIT && !rowset_has_zone(&rows, ZONE),
	      "no zone: answered as none");
	cache_invalidate(c, ZONE, NULL); /* the zone comes back: its name's entry goes */
	zone_exists = true;
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_MISS, "a zone added was not seen");
	/* Everything. */
	fill(c, 2, -1, &rows);
	cache_invalidate(c, NULL, NULL);
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_MISS, "a flush left entries");
	/* Down: bypassed and flushed; up and caught up: answering, from an empty cache. */
	fill(c, 2, -1, &rows);
	atomic_store(&outages, true);
	while (atomic_load(&downs) == 0) {
		usleep(1000);
	}
	atomic_store(&outages, false);
	settle();
	CHECK(fetch_of(c, 2, -1, &rows) == CACHE_MISS, "an entry from before an outage was kept");
	cache_free(c);

	/* Caught up once, then not again within the bound: bypassed. */
	c = cache_new(1 << 20, 20);
	CHECK(c != NULL && cache_watch_start(c, &silent_backend, NULL), "cache_new, watch");
	while (atomic_load(&silent_synced) == 0) {
		usleep(1000);
	}
	fill(c, 1, -1, &rows);
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_HIT, "not answering within the bound");
	usleep(60 * 1000);
	CHECK(fetch_of(c, 1, -1, &rows) == CACHE_BYPASSED, "answering past the bound");
	cache_free(c);
	rowset_free(&rows);
}

/* ---- everything at once --------------------------------------------------------------------- */

static atomic_bool stop;
static atomic_ulong hits, misses;

static unsigned
next_random(unsigned *seed) {
	*seed = *seed * 1103515245u + 12345u;
	return (*seed >> 8) % OWNERS;
}

static void *
reader(void *arg) {
	struct cache *c = arg;
	struct dlz_rowset rows = { 0 };
	unsigned seed = (unsigned)(uintptr_t)&rows;

	while (!atomic_load(&stop)) {
		/* Mostly a hot tenth of the owners, so that hits happen in a cache that evicts. */
		unsigned i = next_random(&seed);
		if (i % 4 != 0) {
			i %= OWNERS / 10;
		}
		if (lookup(c, i, &rows)) {
			atomic_fetch_add_explicit(&hits, 1, memory_order_relaxed);
		} else {
			atomic_fetch_add_explicit(&misses, 1, memory_order_relaxed);
		}
	}
	rowset_free(&rows);
	return NULL;
}

static void *
writer(void *arg) {
	struct cache *c = arg;
	unsigned seed = (unsigned)(uintptr_t)&seed;
	unsigned long n = 0;

	while (!atomic_load(&stop)) {
		unsigned i = next_random(&seed) % (OWNERS / 10);
		if (++n % 5 == 0) {
			/* An update through the driver: committed, then invalidated at once (its
			 * notification is not simulated: the update's own invalidation must do). */
			char owner[64];
			unsigned v = atomic_fetch_add(&truth[i], 1) + 1;

			snprintf(owner, sizeof(owner), "h%u." ZONE, i);
			cache_invalidate(c, ZONE, owner);
			note_reported(i, v);
		} else {
			commit_change(i);
		}
		usleep(200);
	}
	return NULL;
}

static void
stress(int seconds) {
	/* Small: the hot owners alone fill it, and CLOCK evicts all the time. */
	struct cache *c = cache_new(64 * 1024, 1000);
	pthread_t readers[READERS], writers[WRITERS];
	struct cache_counts n;

	CHECK(c != NULL, "cache_new");
	atomic_store(&outages, true);
	CHECK(cache_watch_start(c, &test_backend, NULL), "watch");
	for (int k = 0; k < READERS; k++) {
		pthread_create(&readers[k], NULL, reader, c);
	}
	for (int k = 0; k < WRITERS; k++) {
		pthread_create(&writers[k], NULL, writer, c);
	}
	sleep((unsigned)seconds);
	/* At least one outage among the rest, however slowly a loaded machine runs the watch
	 * thread (one about every 200 of its waits); 30 s at the most. */
	for (int waited = 0; atomic_load(&downs) == 0 && waited < 30000; waited++) {
		usleep(1000);
	}
	atomic_store(&stop, true);
	for (int k = 0; k < READERS; k++) {
		pthread_join(readers[k], NULL);
	}
	for (int k = 0; k < WRITERS; k++) {
		pthread_join(writers[k], NULL);
	}
	cache_counts(c, &n);
	printf("stress: %lu hits, %lu misses, %lu outages; %lu entries, %lu of %zu bytes, %lu "
	       "inserted, %lu evicted, %lu changes, %lu flushes\n",
	       atomic_load(&hits), atomic_load(&misses), atomic_load(&downs), n.entries, n.bytes,
	       cache_budget(c), n.inserted, n.evicted, n.invalidations, n.flushes);
	CHECK(n.bytes <= cache_budget(c), "over its budget");
	CHECK(n.evicted > 0, "nothing evicted");
	CHECK(atomic_load(&hits) > 0, "no hit");
	CHECK(atomic_load(&downs) > 0, "no outage");
	cache_free(c);
}

int
main(int argc, char *argv[]) {
	if (argc == 2 && strcmp(argv[1], "units") == 0) {
		units();
	} else if (argc == 3 && strcmp(argv[1], "stress") == 0) {
		stress(atoi(argv[2]));
	} else {
		fprintf(stderr, "usage: cache_check units | stress SECONDS\n");
		return 2;
	}
	if (failures > 0) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("all checks passed\n");
	return 0;
}
