/*
 * The coherent cache of fetch results (cache.c), for core.c and update.c; drivers see only
 * the change channel's calls in dlz_driver.h.
 *
 * What it holds: facts a fetch established, each an entry of its own so that a change of one
 * owner costs one entry. A zone entry says whether a name is a zone (findzonedb's answer,
 * negative ones too); an owner entry holds every row of one owner key in one zone (data rows
 * and ENT markers), or says that the owner does not exist (a negative answer). A fetch is
 * answered from the cache when the entries hold every fact the fetch contract asks for
 * (dlz_driver.h: the zone search, then the owners a one-name-at-a-time backend reads), and
 * from the store otherwise, its result then put into the cache.
 *
 * When it may answer: only while its change channel (the store telling the driver of every
 * committed change: PostgreSQL LISTEN/NOTIFY, ...) is up and has shown within the bound
 * (cache_bound_ms) that it has delivered every change committed before a recent instant
 * (dlz_channel_synced). A channel that goes down flushes the cache, and until it is up and
 * caught up again every fetch goes to the store and nothing is inserted: no answer is older
 * than the bound.
 */
#ifndef DLZ_CACHE_H
#define DLZ_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "core.h"

struct cache;

/* A cache of at most `bytes` bytes of entries that answers only while its channel is caught
 * up to within bound_ms; NULL when out of memory. */
struct cache *cache_new(size_t bytes, long bound_ms);
/* Stops the channel's watcher first (cache_watch_stop). */
void cache_free(struct cache *c);

/* Run the backend's watch (dlz_backend.watch) in a thread of its own; false (logged) if the
 * thread could not be started. */
bool cache_watch_start(struct cache *c, const struct dlz_backend *backend, void *state);
/* Tell the watcher to return and wait for it. */
void cache_watch_stop(struct cache *c);

/* What a fetch from the store needs to know before it starts, so that its result is put into
 * the cache only if no change was reported meanwhile (a result read before a change must not
 * be inserted after the change's invalidation). */
struct cache_ticket {
	unsigned long seq;
	bool live;
};

enum cache_outcome {
	CACHE_HIT,      /* out holds the fetch's result */
	CACHE_MISS,     /* some fact was not cached: fetch from the store */
	CACHE_BYPASSED, /* the channel is down or behind: fetch from the store, insert nothing */
};

/* Answer req from the cache into out (reset by the caller before a store fetch). */
enum cache_outcome cache_fetch(struct cache *c, const struct dlz_fetch_req *req,
			       struct dlz_rowset *out);
struct cache_ticket cache_ticket(struct cache *c);
/* Insert what the store's answer `rows` to req establishes (taken under ticket). */
void cache_store(struct cache *c, const struct dlz_fetch_req *req, const struct dlz_rowset *rows,
		 struct cache_ticket ticket);
/* A change: owner in zone (owner NULL: the whole zone; zone NULL: everything). Called by the
 * channel and by update.c at a commit. */
void cache_invalidate(struct cache *c, const char *zone, const char *owner);

struct cache_counts {
	unsigned long entries;
	unsigned long bytes;
	unsigned long inserted;
	unsigned long evicted;
	unsigned long invalidations;
	unsigned long flushes;
};
void cache_counts(struct cache *c, struct cache_counts *out);
long cache_bound_ms(const struct cache *c);
size_t cache_budget(const struct cache *c);

#endif /* DLZ_CACHE_H */
