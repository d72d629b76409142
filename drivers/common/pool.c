/*
 * N backend connections, each behind its own mutex. A thread has a home slot and tries it
 * first, then any other free slot, and only then waits for its home: there is no global
 * lock, so with as many connections as named has threads no query ever waits for another.
 *
 * A store that stops answering must not take named's workers with it: every connect and
 * every statement is bounded by the backend's time-outs, and after a failed connect, a
 * time-out (the backend calls dlz_timed_out) or a connection that failed as soon as it was
 * opened (dlz_connection_failed), the pool is *down* for down_ms. A statement the server
 * answered with an error is no outage, even on a new connection: one zone transfer over a
 * size limit must not take every other zone down with it. While down, a checkout fails at
 * once (the query is answered SERVFAIL) without touching a slot's lock or the network; once
 * down_ms has passed, one thread at a time (the probe) takes a free slot, never waiting for
 * one, and tries the store: its success brings the pool up for every thread, its failure
 * starts another down_ms. So a frozen or unreachable store costs one bounded wait per down_ms
 * per named, not one per query on every worker, and recovery needs no restart. An update's
 * failures, its connect's included, take nothing down (pool_checkout_update).
 */
#define _GNU_SOURCE /* pthread_mutex_clocklock */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "core.h"

/*
 * The longest an update waits for the update slot another update holds. named 9.18 runs an
 * update on one of its workers, the same threads that answer queries, so a wait here is a
 * worker answering nothing; updates of different zones run at once, and one that writes
 * thousands of records holds the slot for seconds. Past this wait the update is answered
 * SERVFAIL (its client retries): as long as a query may wait for the store (the drivers'
 * default query_timeout_ms).
 */
#define UPDATE_WAIT_MS 500

/* Set by the backend during the current checkout of this thread: the store did not answer in
 * time (not a refusal or an error it answered with); the connection failed, not a statement. */
static __thread bool pool_timed_out;
static __thread bool pool_conn_failed;

void
dlz_timed_out(void) {
	pool_timed_out = true;
}

void
dlz_connection_failed(void) {
	pool_conn_failed = true;
}

bool
pool_init(struct pool *pool, const struct dlz_backend *backend, void *state, unsigned count,
	  unsigned update_count, long down_ms) {
	unsigned total = count + update_count, made = 0;

	pool->backend = backend;
	pool->state = state;
	pool->count = count;
	pool->update_count = update_count;
	pool->slots = NULL;
	pool->down_ms = down_ms;
	atomic_init(&pool->down_until, 0);
	atomic_init(&pool->probing, false);
	if (posix_memalign((void **)&pool->slots, 64, total * sizeof(*pool->slots)) != 0) {
		pool->count = pool->update_count = 0;
		return false;
	}
	for (; made < total; made++) {
		pool->slots[made].conn = NULL;
		pool->slots[made].fresh = false;
		pool->slots[made].probe = false;
		if (pthread_mutex_init(&pool->slots[made].lock, NULL) != 0) {
			break;
		}
	}
	if (made < total) {
		/* pool_destroy goes over the slots made so far only. */
		pool->count = made < count ? made : count;
		pool->update_count = made - pool->count;
		pool_destroy(pool);
		return false;
	}
	return true;
}

void
pool_destroy(struct pool *pool) {
	for (unsigned i = 0; i < pool->count + pool->update_count; i++) {
		if (pool->slots[i].conn != NULL) {
			pool->backend->disconnect(pool->state, pool->slots[i].conn);
		}
		pthread_mutex_destroy(&pool->slots[i].lock);
	}
	free(pool->slots);
	pool->slots = NULL;
	pool->count = 0;
	pool->update_count = 0;
}

/* ---- down and up ------------------------------------------------------------------------ */

static bool
pool_is_down(struct pool *pool) {
	return atomic_load(&pool->down_until) != 0;
}

/* While down: true for the one thread that may try the store now (down_ms has passed and no
 * other thread is trying it). */
static bool
pool_claim_probe(struct pool *pool) {
	long until = atomic_load(&pool->down_until);
	bool idle = false;

	return until != 0 && dlz_now_ms() >= until &&
	       atomic_compare_exchange_strong(&pool->probing, &idle, true);
}

/* down_ms 0 (a backend whose failures cost no wait): never down. */
static void
pool_mark_down(struct pool *pool) {
	long until = dlz_now_ms() + pool->down_ms;

	if (pool->down_ms == 0) {
		return;
	}
	if (atomic_exchange(&pool->down_until, until > 0 ? until : 1) == 0) {
		dlz_log(ISC_LOG_ERROR, "the store does not answer: SERVFAIL at once, and one try "
				       "every %ld ms", pool->down_ms);
	}
	atomic_store(&pool->probing, false);
}

static void
pool_mark_up(struct pool *pool) {
	if (atomic_exchange(&pool->down_until, 0) != 0) {
		dlz_log(ISC_LOG_INFO, "the store answers again");
	}
	atomic_store(&pool->probing, false);
}

/* ---- checkout and checkin --------------------------------------------------------------- */

static struct pool_slot *
lock_free_slot(struct pool *pool, unsigned home) {
	for (unsigned i = 0; i < pool->count; i++) {
		struct pool_slot *slot = &pool->slots[(home + i) % pool->count];
		if (pthread_mutex_trylock(&slot->lock) == 0) {
			return slot;
		}
	}
	return NULL;
}

static struct pool_slot *
lock_some_slot(struct pool *pool, unsigned home) {
	struct pool_slot *slot = lock_free_slot(pool, home);

	if (slot == NULL) {
		slot = &pool->slots[home % pool->count];
		pthread_mutex_lock(&slot->lock);
	}
	return slot;
}

/* A locked slot for this checkout: any slot while the pool is up, a free one for the probe;
 * NULL (fail fast) while the pool is down for this thread. */
static struct pool_slot *
pool_take_slot(struct pool *pool, unsigned home) {
	struct pool_slot *slot;

	if (pool_is_down(pool)) {
		if (!pool_claim_probe(pool)) {
			return NULL;
		}
		slot = lock_free_slot(pool, home);
		if (slot == NULL) {
			atomic_store(&pool->probing, false); /* every slot busy: another time */
			return NULL;
		}
		slot->probe = true;
		return slot;
	}
	slot = lock_some_slot(pool, home);
	if (pool_is_down(pool)) { /* went down while this thread waited for the slot */
		pthread_mutex_unlock(&slot->lock);
		return NULL;
	}
	return slot;
}

/* The connection of a locked slot opened with connect, if it has none; false if that failed.
 * Starts the checkout: what the backend reports from here on is this checkout's. */
static bool
pool_open_slot(struct pool *pool, struct pool_slot *slot, int (*connect)(void *, void **)) {
	pool_timed_out = false;
	pool_conn_failed = false;
	slot->fresh = false;
	if (slot->conn != NULL) {
		return true;
	}
	if (connect(pool->state, &slot->conn) != DLZ_OK) {
		slot->conn = NULL;
		return false;
	}
	slot->fresh = true;
	return true;
}

/* The connection of a locked read slot, opened if it has none; NULL (slot unlocked, the pool
 * down) if that failed. */
static struct pool_slot *
pool_connect_slot(struct pool *pool, struct pool_slot *slot) {
	if (!pool_open_slot(pool, slot, pool->backend->connect)) {
		slot->probe = false;
		pool_mark_down(pool);
		pthread_mutex_unlock(&slot->lock);
		dlz_log_error_limited("cannot connect to the backend; answering SERVFAIL");
		return NULL;
	}
	return slot;
}

struct pool_slot *
pool_checkout(struct pool *pool, unsigned home) {
	struct pool_slot *slot = pool_take_slot(pool, home);

	return slot != NULL ? pool_connect_slot(pool, slot) : NULL;
}

/* Lock slot, waiting at most UPDATE_WAIT_MS; false (logged) when another update held it
 * that long. */
static bool
pool_lock_update_slot(struct pool_slot *slot) {
	struct timespec until;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += UPDATE_WAIT_MS / 1000;
	until.tv_nsec += (UPDATE_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	while ((rc = pthread_mutex_clocklock(&slot->lock, CLOCK_MONOTONIC, &until)) == EINTR) {
	}
	if (rc != 0) {
		dlz_log_error_limited("another update held the update connection for %d ms: "
				      "SERVFAIL", UPDATE_WAIT_MS);
		return false;
	}
	return true;
}

/*
 * An update slot: one that is free, else (wait) the first one once it is, for at most
 * UPDATE_WAIT_MS. The read slots are never taken, so an update and the queries never wait for
 * each other. Without wait (a backend named calls under its own lock) a busy update slot
 * fails at once: waiting there while another update needs that lock for its next step would
 * never end. While the pool is down an update fails at once too; it is no probe (queries
 * bring the pool up). Its connection is the writer's (connect_writer) where the backend has
 * one; a connection that cannot be made fails this update only, and leaves the pool up (as
 * pool_checkin_update does with a failed update): the writer's account may be refused where
 * the reader's is not, and queries find an outage of the store themselves.
 */
struct pool_slot *
pool_checkout_update(struct pool *pool, bool wait) {
	int (*connect)(void *, void **) = pool->backend->connect_writer != NULL
						  ? pool->backend->connect_writer
						  : pool->backend->connect;
	struct pool_slot *slot = NULL;

	if (pool->update_count == 0 || pool_is_down(pool)) {
		return NULL;
	}
	for (unsigned i = 0; i < pool->update_count && slot == NULL; i++) {
		if (pthread_mutex_trylock(&pool->slots[pool->count + i].lock) == 0) {
			slot = &pool->slots[pool->count + i];
		}
	}
	if (slot == NULL) {
		if (!wait || !pool_lock_update_slot(&pool->slots[pool->count])) {
			return NULL;
		}
		slot = &pool->slots[pool->count];
	}
	if (!pool_open_slot(pool, slot, connect)) {
		pthread_mutex_unlock(&slot->lock);
		dlz_log_error_limited("cannot connect to the backend for an update; SERVFAIL");
		return NULL;
	}
	return slot;
}

void
pool_checkin(struct pool *pool, struct pool_slot *slot, bool broken) {
	/* A connection just opened that fails at once, like a time-out, says the store is not
	 * fit to answer; an old one may only have been cut (a server restart): the core tries a
	 * new one before anything is concluded. A statement the server refused (a size limit, a
	 * privilege) is neither: the store answered. */
	bool down = broken && (pool_timed_out || (slot->fresh && pool_conn_failed));

	if (broken && slot->conn != NULL) {
		pool->backend->disconnect(pool->state, slot->conn);
		slot->conn = NULL;
	}
	if (down) {
		pool_mark_down(pool);
	} else if (slot->probe && !broken) {
		pool_mark_up(pool);
	} else if (slot->probe) {
		atomic_store(&pool->probing, false); /* the retry on a new connection probes */
	}
	slot->probe = false;
	pthread_mutex_unlock(&slot->lock);
}

/*
 * An update slot back. A broken connection is closed, but the pool is not taken for down on
 * an update's account: an update may time out waiting for a row another writer holds (the
 * session's statement_timeout), which says nothing about the store answering queries, and
 * the queries find out for themselves when it does not.
 */
void
pool_checkin_update(struct pool *pool, struct pool_slot *slot, bool broken) {
	if (broken && slot->conn != NULL) {
		pool->backend->disconnect(pool->state, slot->conn);
		slot->conn = NULL;
	}
	pthread_mutex_unlock(&slot->lock);
}
