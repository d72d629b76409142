/*
 * N backend connections, each behind its own mutex. A thread has a home slot and tries it
 * first, then any other free slot, and only then waits for its home: there is no global
 * lock, so with as many connections as named has threads no query ever waits for another.
 */
#include <stdlib.h>

#include "core.h"

bool
pool_init(struct pool *pool, const struct dlz_backend *backend, void *state, unsigned count) {
	pool->backend = backend;
	pool->state = state;
	pool->count = 0;
	pool->slots = NULL;
	if (posix_memalign((void **)&pool->slots, 64, count * sizeof(*pool->slots)) != 0) {
		return false;
	}
	for (unsigned i = 0; i < count; i++) {
		pool->slots[i].conn = NULL;
		pool->slots[i].fresh = false;
		if (pthread_mutex_init(&pool->slots[i].lock, NULL) != 0) {
			pool_destroy(pool);
			return false;
		}
		pool->count++;
	}
	return true;
}

void
pool_destroy(struct pool *pool) {
	for (unsigned i = 0; i < pool->count; i++) {
		if (pool->slots[i].conn != NULL) {
			pool->backend->disconnect(pool->state, pool->slots[i].conn);
		}
		pthread_mutex_destroy(&pool->slots[i].lock);
	}
	free(pool->slots);
	pool->slots = NULL;
	pool->count = 0;
}

static struct pool_slot *
lock_some_slot(struct pool *pool, unsigned home) {
	for (unsigned i = 0; i < pool->count; i++) {
		struct pool_slot *slot = &pool->slots[(home + i) % pool->count];
		if (pthread_mutex_trylock(&slot->lock) == 0) {
			return slot;
		}
	}
	pthread_mutex_lock(&pool->slots[home % pool->count].lock);
	return &pool->slots[home % pool->count];
}

struct pool_slot *
pool_checkout(struct pool *pool, unsigned home) {
	struct pool_slot *slot = lock_some_slot(pool, home);

	slot->fresh = false;
	if (slot->conn == NULL) {
		if (pool->backend->connect(pool->state, &slot->conn) != DLZ_OK) {
			slot->conn = NULL;
			pthread_mutex_unlock(&slot->lock);
			dlz_log_error_limited("cannot connect to the backend; answering SERVFAIL");
			return NULL;
		}
		slot->fresh = true;
	}
	return slot;
}

void
pool_checkin(struct pool *pool, struct pool_slot *slot, bool broken) {
	if (broken && slot->conn != NULL) {
		pool->backend->disconnect(pool->state, slot->conn);
		slot->conn = NULL;
	}
	pthread_mutex_unlock(&slot->lock);
}
