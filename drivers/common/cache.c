/*
 * The coherent cache of fetch results (what and when: cache.h) and its change channel.
 *
 * Layout. Entries live in shards chosen by their key's hash, each a chained hash table behind
 * its own reader-writer lock, with a CLOCK ring for eviction and a byte budget (the cache's
 * size divided evenly; a key's hash spreads entries evenly over the shards).
 *
 * Why a reader-writer lock per shard and not an RCU-like scheme: a hit copies its rows into
 * the thread's rowset while it holds the entry, and an entry may be evicted or invalidated by
 * another thread at any moment. Without a lock the entry's memory would need deferred
 * reclamation (epochs or hazard pointers per reader), and named's worker threads are not ours
 * to make report quiescent states. A shard's lock costs a reader two atomic operations on a
 * line of that shard only: with up to 64 shards, workers of a busy named rarely meet on one,
 * and nothing on the read path is shared by every thread except read-mostly words (the
 * channel state, the change sequence). A hit's CLOCK bit is a relaxed store, and only when it
 * was clear. The locks prefer writers, so that a change is applied within the bound even
 * while the shard is read without pause.
 *
 * Entries. A zone entry (ENTRY_ZONE, the name as its zone, no owner) says whether the name is
 * a zone; an owner entry (ENTRY_OWNER) holds the rows of one owner in one zone, or none for
 * an owner that does not exist. A fetch is answered by walking the entries as the backends
 * that read one name at a time walk their store (owners.c: dlz_fetch_zone_owners), so a hit
 * gives the core what such a backend would; and a store's answer is cut into the same entries
 * by the same walk (cache_store), taking only the facts the fetch contract guarantees.
 *
 * Coherence. Every change reported (an owner, a zone, everything) first increments `seq`,
 * then removes what it changes: an owner's entry from its shard; a zone's entries by
 * incrementing the epoch of the zone's stripe, which every entry of that zone (and the zone
 * entry of its name) was stamped with at insertion, so that none of them matches any more
 * (they are reclaimed by CLOCK); everything by emptying every shard.
 *  - A fetch from the store reads `seq` before it starts (cache_ticket) and inserts each entry
 *    only if `seq` is unchanged, checked under the shard's lock: a result that a change may
 *    have overtaken is never inserted after that change's removal. (The store's snapshot is
 *    taken after the ticket, so a change reported before the ticket is in it.)
 *  - An entry reads its stripe's epoch before that check: if the check passes, a zone change
 *    still to come increments the epoch after, and the entry stops matching then.
 *  - A hit reads `seq` before and after its walk: one that a change overlapped is a miss, so a
 *    hit is a set of entries that were all current at one instant.
 *  - The channel's state gates all of it: while it is down nothing is read or inserted (up
 *    increments `seq` before it lets fetches take tickets, so no fetch begun while down
 *    inserts), and entries are read only while the channel has been caught up within the
 *    bound (dlz_channel_synced).
 */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np, pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"

#define MAX_SHARDS 64
/* A shard holds at least this many bytes: a small cache has fewer shards, not tiny ones. */
#define MIN_SHARD_BYTES (64 * 1024)
#define ZONE_STRIPES 1024
#define FIRST_BUCKETS 64
/* Bytes an entry costs besides its own allocation: its ring slot and its bucket's share. */
#define ENTRY_OVERHEAD (2 * sizeof(void *))
/* A read from the cache that found no entry: neither DLZ_OK nor a backend failure. */
#define NOT_CACHED 7
/* Stands for "never" in synced_ms. */
#define NEVER (-1L)

enum entry_kind { ENTRY_ZONE = 1, ENTRY_OWNER = 2 };

struct entry {
	struct entry *next; /* bucket chain */
	uint64_t hash;
	size_t size;        /* bytes charged to the shard */
	uint32_t slot;      /* index in the shard's ring */
	unsigned epoch;     /* its zone stripe's epoch when inserted */
	atomic_bool referenced;
	uint8_t kind;
	bool present;       /* a zone / an owner that exists */
	uint16_t zone_len;
	uint16_t owner_len;
	uint32_t nrows;
	/* zone NUL owner NUL, then per row: ttl, type length, rdata length (uint32_t each,
	 * unaligned), type NUL, rdata NUL. */
	char data[];
};

struct shard {
	pthread_rwlock_t lock;
	struct entry **buckets;
	size_t nbuckets;   /* a power of two */
	struct entry **ring; /* CLOCK order; ring[i]->slot == i */
	size_t count;
	size_t ring_cap;
	size_t hand;
	size_t bytes;
	size_t budget;
	unsigned long inserted;
	unsigned long evicted;
} __attribute__((aligned(64)));

struct dlz_channel {
	struct cache *cache;
	const struct dlz_backend *backend;
	void *state;
	pthread_t thread;
	bool running;
	int stop_pipe[2];
	/* The watcher thread's own: what named's log was last told. */
	bool said_serving;
	bool said_down;
};

struct cache {
	struct shard *shards;
	unsigned nshards;
	size_t budget;
	long bound_ms;
	atomic_ulong seq;
	atomic_bool live;      /* the channel is up */
	atomic_long synced_ms; /* every change committed before it was reported; NEVER */
	atomic_uint epochs[ZONE_STRIPES];
	atomic_ulong invalidations;
	atomic_ulong flushes;
	struct dlz_channel channel;
};

/* ---- keys --------------------------------------------------------------------------------- */

#define FNV_PRIME 0x100000001b3ULL

static uint64_t
fnv_more(uint64_t h, const char *text, size_t len) {
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= FNV_PRIME;
	}
	return h;
}

static uint64_t
entry_hash(int kind, const char *zone, size_t zone_len, const char *owner, size_t owner_len) {
	uint64_t h = fnv_more(0xcbf29ce484222325ULL ^ (uint64_t)kind, zone, zone_len);

	h ^= 0xff; /* no key holds this byte: "a" + "bc" and "ab" + "c" differ */
	h *= FNV_PRIME;
	return fnv_more(h, owner, owner_len);
}

static atomic_uint *
zone_epoch(struct cache *c, const char *zone, size_t zone_len) {
	return &c->epochs[hint_hash(zone, zone_len) & (ZONE_STRIPES - 1)];
}

static struct shard *
shard_of(struct cache *c, uint64_t hash) {
	return &c->shards[(hash >> 40) & (c->nshards - 1)];
}

struct key {
	int kind;
	const char *zone;
	size_t zone_len;
	const char *owner;
	size_t owner_len;
	uint64_t hash;
};

static struct key
key_of(int kind, const char *zone, const char *owner) {
	struct key k = { .kind = kind, .zone = zone, .zone_len = strlen(zone),
			 .owner = owner, .owner_len = strlen(owner) };

	k.hash = entry_hash(kind, zone, k.zone_len, owner, k.owner_len);
	return k;
}

static bool
entry_is(const struct entry *e, const struct key *k) {
	return e->hash == k->hash && e->kind == k->kind && e->zone_len == k->zone_len &&
	       e->owner_len == k->owner_len && memcmp(e->data, k->zone, k->zone_len) == 0 &&
	       memcmp(e->data + k->zone_len + 1, k->owner, k->owner_len) == 0;
}

/* Not outdated by a change of its zone since it was inserted. */
static bool
entry_current(struct cache *c, const struct entry *e) {
	return e->epoch == atomic_load(zone_epoch(c, e->data, e->zone_len));
}

/* The link that points to k's entry in its bucket (to *link == NULL if there is none). */
static struct entry **
shard_link(struct shard *s, const struct key *k) {
	struct entry **link = &s->buckets[k->hash & (s->nbuckets - 1)];

	while (*link != NULL && !entry_is(*link, k)) {
		link = &(*link)->next;
	}
	return link;
}

/* ---- entries -------------------------------------------------------------------------------- */

static bool
row_is(const struct dlz_row *row, const char *zone, size_t zone_len, const char *owner,
       size_t owner_len) {
	return row->zone_len == zone_len && row->owner_len == owner_len &&
	       memcmp(row->owner, owner, owner_len) == 0 && memcmp(row->zone, zone, zone_len) == 0;
}

static char *
put_u32(char *p, uint32_t value) {
	memcpy(p, &value, sizeof(value));
	return p + sizeof(value);
}

static const char *
get_u32(const char *p, uint32_t *value) {
	memcpy(value, p, sizeof(*value));
	return p + sizeof(*value);
}

static char *
put_text(char *p, const char *text, size_t len) {
	memcpy(p, text, len);
	p[len] = '\0';
	return p + len + 1;
}

/* A new entry for k: present or not, with the rows of rows (may be NULL) that are k's. */
static struct entry *
entry_build(const struct key *k, bool present, const struct dlz_rowset *rows) {
	size_t size = sizeof(struct entry) + k->zone_len + 1 + k->owner_len + 1;
	uint32_t nrows = 0;
	struct entry *e;
	char *p;

	for (size_t i = 0; rows != NULL && i < rows->nrows; i++) {
		const struct dlz_row *row = &rows->rows[i];
		if (row_is(row, k->zone, k->zone_len, k->owner, k->owner_len)) {
			size += 3 * sizeof(uint32_t) + strlen(row->type) + 1 + strlen(row->rdata) + 1;
			nrows++;
		}
	}
	e = malloc(size);
	if (e == NULL) {
		return NULL;
	}
	e->next = NULL;
	e->hash = k->hash;
	e->size = size + ENTRY_OVERHEAD;
	atomic_init(&e->referenced, false);
	e->kind = (uint8_t)k->kind;
	e->present = present;
	e->zone_len = (uint16_t)k->zone_len;
	e->owner_len = (uint16_t)k->owner_len;
	e->nrows = nrows;
	p = put_text(e->data, k->zone, k->zone_len);
	p = put_text(p, k->owner, k->owner_len);
	for (size_t i = 0; rows != NULL && i < rows->nrows; i++) {
		const struct dlz_row *row = &rows->rows[i];
		size_t type_len, rdata_len;

		if (!row_is(row, k->zone, k->zone_len, k->owner, k->owner_len)) {
			continue;
		}
		type_len = strlen(row->type);
		rdata_len = strlen(row->rdata);
		p = put_u32(p, row->ttl);
		p = put_u32(p, (uint32_t)type_len);
		p = put_u32(p, (uint32_t)rdata_len);
		p = put_text(p, row->type, type_len);
		p = put_text(p, row->rdata, rdata_len);
	}
	return e;
}

/* e's rows into out as rows of owner in zone (strings of the fetch request). */
static bool
entry_copy_rows(const struct entry *e, struct dlz_rowset *out, const char *zone,
		const char *owner) {
	const char *p = e->data + e->zone_len + 1 + e->owner_len + 1;

	for (uint32_t i = 0; i < e->nrows; i++) {
		uint32_t ttl, type_len, rdata_len;
		const char *type, *rdata;

		p = get_u32(p, &ttl);
		p = get_u32(p, &type_len);
		p = get_u32(p, &rdata_len);
		type = p;
		rdata = type + type_len + 1;
		p = rdata + rdata_len + 1;
		if (!dlz_rowset_add_row_keys(out, zone, owner, type, type_len, ttl, rdata,
					     rdata_len)) {
			return false;
		}
	}
	return true;
}

/* ---- a shard: ring, buckets, eviction ------------------------------------------------------- */

static void
shard_unlink(struct shard *s, struct entry *e) {
	struct entry **link = &s->buckets[e->hash & (s->nbuckets - 1)];
	struct entry *last;

	while (*link != e) {
		link = &(*link)->next;
	}
	*link = e->next;
	/* The ring's last entry takes e's slot: CLOCK's order changes a little, nothing more. */
	last = s->ring[--s->count];
	s->ring[e->slot] = last;
	last->slot = e->slot;
	s->bytes -= e->size;
	free(e);
}

/* Twice the buckets, once the chains would average more than one entry. */
static void
shard_grow(struct shard *s) {
	size_t n = s->nbuckets * 2;
	struct entry **buckets;

	if (s->count <= s->nbuckets || (buckets = calloc(n, sizeof(*buckets))) == NULL) {
		return; /* without memory the chains just get longer */
	}
	for (size_t i = 0; i < s->count; i++) {
		struct entry *e = s->ring[i];
		e->next = buckets[e->hash & (n - 1)];
		buckets[e->hash & (n - 1)] = e;
	}
	free(s->buckets);
	s->buckets = buckets;
	s->nbuckets = n;
}

/*
 * CLOCK: the hand goes round the ring; an entry outdated by a zone change goes at once, one
 * read since the hand last passed loses its bit and stays, any other goes; until the shard
 * is within its budget. keep (just inserted) stays.
 */
static void
shard_evict(struct cache *c, struct shard *s, const struct entry *keep) {
	while (s->bytes > s->budget && s->count > 1) {
		struct entry *e;

		if (s->hand >= s->count) {
			s->hand = 0;
		}
		e = s->ring[s->hand];
		if (e == keep ||
		    (entry_current(c, e) &&
		     atomic_exchange_explicit(&e->referenced, false, memory_order_relaxed))) {
			s->hand++;
			continue;
		}
		shard_unlink(s, e); /* the ring's last entry is now under the hand */
		s->evicted++;
	}
}

static void
shard_empty(struct shard *s) {
	for (size_t i = 0; i < s->count; i++) {
		free(s->ring[i]);
	}
	memset(s->buckets, 0, s->nbuckets * sizeof(*s->buckets));
	s->count = 0;
	s->hand = 0;
	s->bytes = 0;
}

/* Insert e for key k unless a change was reported since ticket (then e is freed); false
 * then. Replaces an entry of the same key. */
static bool
shard_insert(struct cache *c, struct entry *e, const struct key *k, unsigned long ticket) {
	struct shard *s = shard_of(c, k->hash);
	struct entry **link;
	bool inserted = false;

	if (e->size > s->budget / 2) {
		free(e); /* a huge owner would empty a shard for itself */
		return true;
	}
	pthread_rwlock_wrlock(&s->lock);
	/* The epoch before the check (see the top of the file). */
	e->epoch = atomic_load(zone_epoch(c, k->zone, k->zone_len));
	if (atomic_load(&c->seq) == ticket &&
	    dlz_grow((void **)&s->ring, &s->ring_cap, s->count + 1, sizeof(*s->ring))) {
		link = shard_link(s, k);
		if (*link != NULL) {
			shard_unlink(s, *link);
			link = shard_link(s, k);
		}
		*link = e;
		e->slot = (uint32_t)s->count;
		s->ring[s->count++] = e;
		s->bytes += e->size;
		s->inserted++;
		shard_evict(c, s, e);
		shard_grow(s);
		inserted = true;
	}
	pthread_rwlock_unlock(&s->lock);
	if (!inserted) {
		free(e);
	}
	return inserted || atomic_load(&c->seq) == ticket;
}

/*
 * k's entry, read: 1 present (its rows copied into out as rows of row_zone and row_owner, when
 * out is not NULL), 0 absent, NOT_CACHED, or DLZ_ERROR (out of memory).
 */
static int
shard_read(struct cache *c, const struct key *k, struct dlz_rowset *out, const char *row_zone,
	   const char *row_owner) {
	struct shard *s = shard_of(c, k->hash);
	struct entry *e;
	int rc = NOT_CACHED;

	pthread_rwlock_rdlock(&s->lock);
	e = *shard_link(s, k);
	if (e != NULL && entry_current(c, e)) {
		if (!atomic_load_explicit(&e->referenced, memory_order_relaxed)) {
			atomic_store_explicit(&e->referenced, true, memory_order_relaxed);
		}
		rc = e->present ? 1 : 0;
		if (rc == 1 && out != NULL && !entry_copy_rows(e, out, row_zone, row_owner)) {
			rc = DLZ_ERROR;
		}
	}
	pthread_rwlock_unlock(&s->lock);
	return rc;
}

static void
shard_remove(struct cache *c, const struct key *k) {
	struct shard *s = shard_of(c, k->hash);
	struct entry *e;

	pthread_rwlock_wrlock(&s->lock);
	e = *shard_link(s, k);
	if (e != NULL) {
		shard_unlink(s, e);
	}
	pthread_rwlock_unlock(&s->lock);
}

/* ---- the cache ------------------------------------------------------------------------------ */

static bool
shard_init(struct shard *s, size_t budget) {
	pthread_rwlockattr_t attr;
	int rc;

	memset(s, 0, sizeof(*s));
	s->budget = budget;
	s->nbuckets = FIRST_BUCKETS;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (s->buckets == NULL) {
		return false;
	}
	/* Writers first: a reader may take the lock again only once no writer waits. Readers
	 * never hold it recursively, which that kind requires. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	rc = pthread_rwlock_init(&s->lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc != 0) {
		free(s->buckets);
		return false;
	}
	return true;
}

static void
shard_destroy(struct shard *s) {
	shard_empty(s);
	free(s->buckets);
	free(s->ring);
	pthread_rwlock_destroy(&s->lock);
}

static unsigned
shard_count(size_t bytes) {
	unsigned n = 1;

	while (n < MAX_SHARDS && bytes / (2 * n) >= MIN_SHARD_BYTES) {
		n *= 2;
	}
	return n;
}

struct cache *
cache_new(size_t bytes, long bound_ms) {
	struct cache *c = calloc(1, sizeof(*c));
	unsigned made = 0;

	if (c == NULL) {
		return NULL;
	}
	c->nshards = shard_count(bytes);
	c->budget = bytes;
	c->bound_ms = bound_ms;
	atomic_init(&c->seq, 0);
	atomic_init(&c->live, false);
	atomic_init(&c->synced_ms, NEVER);
	for (unsigned i = 0; i < ZONE_STRIPES; i++) {
		atomic_init(&c->epochs[i], 0);
	}
	c->channel.cache = c;
	c->channel.stop_pipe[0] = c->channel.stop_pipe[1] = -1;
	if (posix_memalign((void **)&c->shards, 64, c->nshards * sizeof(*c->shards)) == 0) {
		for (; made < c->nshards && shard_init(&c->shards[made], bytes / c->nshards); made++) {
		}
	}
	if (made < c->nshards || pipe2(c->channel.stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
		c->nshards = made;
		cache_free(c);
		return NULL;
	}
	return c;
}

void
cache_free(struct cache *c) {
	if (c == NULL) {
		return;
	}
	cache_watch_stop(c);
	for (unsigned i = 0; c->shards != NULL && i < c->nshards; i++) {
		shard_destroy(&c->shards[i]);
	}
	free(c->shards);
	for (int i = 0; i < 2; i++) {
		if (c->channel.stop_pipe[i] >= 0) {
			close(c->channel.stop_pipe[i]);
		}
	}
	free(c);
}

long
cache_bound_ms(const struct cache *c) {
	return c->bound_ms;
}

size_t
cache_budget(const struct cache *c) {
	return c->budget;
}

/* The channel is up and has been caught up within the bound. */
static bool
cache_serving(struct cache *c) {
	long synced = atomic_load(&c->synced_ms);

	return atomic_load(&c->live) && synced != NEVER && dlz_now_ms() - synced <= c->bound_ms;
}

static void
cache_flush(struct cache *c) {
	for (unsigned i = 0; i < c->nshards; i++) {
		pthread_rwlock_wrlock(&c->shards[i].lock);
		shard_empty(&c->shards[i]);
		pthread_rwlock_unlock(&c->shards[i].lock);
	}
	atomic_fetch_add(&c->flushes, 1);
}

void
cache_invalidate(struct cache *c, const char *zone, const char *owner) {
	/* seq first: see the top of the file. */
	atomic_fetch_add(&c->seq, 1);
	atomic_fetch_add_explicit(&c->invalidations, 1, memory_order_relaxed);
	if (zone == NULL) {
		cache_flush(c);
	} else if (owner == NULL) {
		atomic_fetch_add(zone_epoch(c, zone, strlen(zone)), 1);
	} else {
		struct key k = key_of(ENTRY_OWNER, zone, owner);
		shard_remove(c, &k);
	}
}

void
cache_counts(struct cache *c, struct cache_counts *out) {
	memset(out, 0, sizeof(*out));
	for (unsigned i = 0; i < c->nshards; i++) {
		struct shard *s = &c->shards[i];

		pthread_rwlock_rdlock(&s->lock);
		out->entries += s->count;
		out->bytes += s->bytes;
		out->inserted += s->inserted;
		out->evicted += s->evicted;
		pthread_rwlock_unlock(&s->lock);
	}
	out->invalidations = atomic_load(&c->invalidations);
	out->flushes = atomic_load(&c->flushes);
}

/* ---- answering a fetch from the entries ----------------------------------------------------- */

struct hit {
	struct cache *c;
	const struct dlz_fetch_req *req;
	struct dlz_rowset *out;
	const char *zone; /* names[z], set before the first owner is read */
};

static int
hit_probe(void *ctx, unsigned i) {
	struct hit *h = ctx;
	struct key k = key_of(ENTRY_ZONE, h->req->names[i], "");

	return shard_read(h->c, &k, NULL, NULL, NULL);
}

static int
hit_read(void *ctx, const char *owner, bool *found) {
	struct hit *h = ctx;
	struct key k = key_of(ENTRY_OWNER, h->zone, owner);
	int rc = shard_read(h->c, &k, h->out, h->zone, owner);

	*found = rc == 1;
	return rc == 0 || rc == 1 ? DLZ_OK : rc;
}

enum cache_outcome
cache_fetch(struct cache *c, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct hit h = { .c = c, .req = req, .out = out };
	unsigned long seq;
	int rc;

	if (!cache_serving(c)) {
		return CACHE_BYPASSED;
	}
	seq = atomic_load(&c->seq);
	rc = dlz_fetch_zone_owners(req, out, 0, 0, hit_probe, hit_read, &h, &h.zone);
	if (rc != DLZ_OK || atomic_load(&c->seq) != seq) {
		return CACHE_MISS;
	}
	return CACHE_HIT;
}

/* ---- filling the entries from a store's answer ---------------------------------------------- */

struct cache_ticket
cache_ticket(struct cache *c) {
	/* live before seq: up() increments seq before it sets live (see the top of the file). */
	bool live = atomic_load(&c->live);

	return (struct cache_ticket){ .seq = atomic_load(&c->seq), .live = live };
}

struct fill {
	struct cache *c;
	const struct dlz_rowset *rows;
	unsigned long seq;
	const char *zone;
};

/* One fact into the cache; false once a change was reported since the ticket (stop). */
static bool
fill_one(struct fill *f, int kind, const char *zone, const char *owner, bool present) {
	struct key k = key_of(kind, zone, owner);
	struct entry *e = entry_build(&k, present, kind == ENTRY_OWNER ? f->rows : NULL);

	return e == NULL || shard_insert(f->c, e, &k, f->seq);
}

static bool
owner_in_rows(const struct dlz_rowset *rows, const char *zone, const char *owner) {
	size_t zone_len = strlen(zone), owner_len = strlen(owner);

	for (size_t i = 0; i < rows->nrows; i++) {
		if (row_is(&rows->rows[i], zone, zone_len, owner, owner_len)) {
			return true;
		}
	}
	return false;
}

static bool
fill_owner(struct fill *f, const char *owner, bool *exists) {
	*exists = owner_in_rows(f->rows, f->zone, owner);
	return fill_one(f, ENTRY_OWNER, f->zone, owner, *exists);
}

/*
 * The zone facts of the answer: names[zone_index] is a zone or not; or, without a zone_index,
 * names[0..z-1] are none and names[z] is the deepest zone (nothing is known of the names
 * above it). The index of the zone, -1 if none; *ok false to stop.
 */
static int
fill_zones(struct fill *f, const struct dlz_fetch_req *req, bool *ok) {
	int z = -1;

	*ok = true;
	if (req->zone_index >= 0) {
		bool present = rowset_has_zone(f->rows, req->names[req->zone_index]);
		*ok = fill_one(f, ENTRY_ZONE, req->names[req->zone_index], "", present);
		return present ? req->zone_index : -1;
	}
	for (unsigned i = 0; i < req->nnames && z < 0; i++) {
		bool present = rowset_has_zone(f->rows, req->names[i]);
		if (!fill_one(f, ENTRY_ZONE, req->names[i], "", present)) {
			*ok = false;
			return -1;
		}
		if (present) {
			z = (int)i;
		}
	}
	return z;
}

/*
 * The owners of zone names[z] that the fetch contract makes every backend read, as
 * dlz_read_owners walks them: names[z], names[z-1], ... down to the first that does not exist
 * (included: a negative entry; none below it exists), the wildcard child of the deepest that
 * does, and the extras when they are of this zone.
 */
static void
fill_owners(struct fill *f, const struct dlz_fetch_req *req, int z) {
	int enc = -1;
	bool exists;

	for (int i = z; i >= 0; i--) {
		if (!fill_owner(f, req->names[i], &exists)) {
			return;
		}
		if (!exists) {
			break;
		}
		enc = i;
	}
	if (enc > 0 && !fill_owner(f, req->wilds[enc], &exists)) {
		return;
	}
	for (unsigned i = 0; z == req->extras_zone && i < req->nextras; i++) {
		if (!fill_owner(f, req->extras[i], &exists)) {
			return;
		}
	}
}

void
cache_store(struct cache *c, const struct dlz_fetch_req *req, const struct dlz_rowset *rows,
	    struct cache_ticket ticket) {
	struct fill f = { .c = c, .rows = rows, .seq = ticket.seq };
	bool ok;
	int z;

	if (!ticket.live) {
		return;
	}
	z = fill_zones(&f, req, &ok);
	if (ok && z >= 0) {
		f.zone = req->names[z];
		fill_owners(&f, req, z);
	}
}

/* ---- the change channel --------------------------------------------------------------------- */

void
dlz_channel_up(struct dlz_channel *ch) {
	struct cache *c = ch->cache;

	/* seq before live: no fetch that took its ticket while the channel was down inserts. */
	atomic_fetch_add(&c->seq, 1);
	atomic_store(&c->synced_ms, NEVER);
	atomic_store(&c->live, true);
}

void
dlz_channel_synced(struct dlz_channel *ch, long since_ms) {
	struct cache *c = ch->cache;
	long before = atomic_load(&c->synced_ms);

	if (!atomic_load(&c->live)) {
		return;
	}
	if (before == NEVER || since_ms > before) {
		atomic_store(&c->synced_ms, since_ms);
	}
	if (!ch->said_serving) {
		dlz_log(ISC_LOG_INFO, "cache: answering from the cache: the change channel is up "
				      "and caught up (bound %ld ms)", c->bound_ms);
		ch->said_serving = true;
		ch->said_down = false;
	}
}

void
dlz_channel_changed(struct dlz_channel *ch, const char *zone, const char *owner) {
	cache_invalidate(ch->cache, zone != NULL && zone[0] != '\0' ? zone : NULL, owner);
}

void
dlz_channel_down(struct dlz_channel *ch, const char *why_fmt, ...) {
	struct cache *c = ch->cache;
	char why[512];
	va_list ap;

	atomic_store(&c->live, false);
	atomic_store(&c->synced_ms, NEVER);
	cache_invalidate(c, NULL, NULL);
	if (ch->said_down) {
		return; /* said once per outage; the backend logs its own failures */
	}
	va_start(ap, why_fmt);
	vsnprintf(why, sizeof(why), why_fmt, ap);
	va_end(ap);
	dlz_log(ISC_LOG_WARNING, "cache: flushed, and bypassed until the change channel is back "
				 "and caught up: %s", why);
	ch->said_down = true;
	ch->said_serving = false;
}

long
dlz_channel_bound_ms(const struct dlz_channel *ch) {
	return ch->cache->bound_ms;
}

int
dlz_channel_wait(struct dlz_channel *ch, int fd, short events, long timeout_ms) {
	long deadline = dlz_now_ms() + timeout_ms;

	for (;;) {
		struct pollfd pfd[2] = { { .fd = ch->stop_pipe[0], .events = POLLIN },
					 { .fd = fd, .events = events } };
		long left = deadline - dlz_now_ms();
		int rc = poll(pfd, fd >= 0 ? 2 : 1, left > 0 ? (int)left : 0);

		if (rc < 0 && errno == EINTR) {
			continue;
		}
		if (rc < 0 || pfd[0].revents != 0) {
			return -1;
		}
		if (rc > 0) {
			return 1;
		}
		if (left <= 0) {
			return 0;
		}
	}
}

static void *
watch_thread(void *arg) {
	struct dlz_channel *ch = arg;

	ch->backend->watch(ch->state, ch);
	return NULL;
}

bool
cache_watch_start(struct cache *c, const struct dlz_backend *backend, void *state) {
	struct dlz_channel *ch = &c->channel;

	ch->backend = backend;
	ch->state = state;
	if (pthread_create(&ch->thread, NULL, watch_thread, ch) != 0) {
		dlz_log(ISC_LOG_ERROR, "cache: cannot start the change channel's thread");
		return false;
	}
	ch->running = true;
	return true;
}

void
cache_watch_stop(struct cache *c) {
	struct dlz_channel *ch = &c->channel;

	if (!ch->running) {
		return;
	}
	/* The pipe stays readable: every later wait returns -1 at once. */
	while (write(ch->stop_pipe[1], "x", 1) < 0 && errno == EINTR) {
	}
	pthread_join(ch->thread, NULL);
	ch->running = false;
	atomic_store(&c->live, false);
}
