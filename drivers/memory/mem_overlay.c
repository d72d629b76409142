/*
 * Dynamic updates (RFC 2136) in the memory driver: an overlay of changed owners over the
 * immutable table.
 *
 * Why an overlay. The table is one buffer split in place and read with no lock: rows are
 * handed to BIND by reference (dlz_rowset_add_row_ref), which is what makes this driver the
 * ceiling of the DLZ path. Changing it in place would need every fetch to lock, and freeing a
 * replaced record would need to know that no thread still holds a reference to it (a memo
 * keeps rows until the thread's next fetch, which may be much later). So an update never
 * touches the table: it writes the complete new record set of each owner it changes into a
 * node, and a commit puts those nodes into a hash table (the overlay) under a read-write
 * lock. A fetch checks one counter (an atomic load); while it is 0 (no update has committed
 * since named loaded the file) the fetch is exactly what it was: no lock, rows by reference.
 * Once updates have committed, a fetch takes the read lock, looks each owner up in the
 * overlay first and copies the rows of changed owners (dlz_rowset_add_row_keys), so that no
 * reference into the overlay outlives the lock and a commit may free what it replaces at
 * once. A zone no committed update touched skips the overlay lookups (a count per zone).
 * Measured with callgrind on the driver alone (1,000 fetches of a 4-label name, 4 owners read;
 * mem_fetch inclusive, per fetch): 2,382 instructions with no update committed (2,327 before
 * updates existed: the connection's state and the counter cost 55), 2,627 after an update of another zone (the lock), 2,767 after an
 * update of the same zone that left the fetched owners alone, 3,336 when a fetched owner was
 * changed (its rows copied). named spends 262,018 per query with this driver
 * (docs/results/instructions-2026-11-26), so an update costs later reads at most 0.4%.
 *
 * Copy-on-write of whole zones (the other design) would keep reads lock-free after updates
 * too, but costs a copy of the zone per update message (a 30,000-record zone per change) and
 * a grace period before the old copy may be freed, which no thread of named announces.
 *
 * Updates live in named's memory only: the data file is the loader's (schemas/memory.md), and
 * `rndc reload` reads it again, which drops the overlay, as reloading a zone file without its
 * journal would.
 */
#include <stdlib.h>
#include <string.h>

#include "memory.h"

#define OVERLAY_INITIAL_BUCKETS 64

/* ---- nodes ------------------------------------------------------------------------------ */

static void
mem_node_clear(struct mem_node *n) {
	for (size_t i = 0; i < n->nrecs; i++) {
		free(n->recs[i].type);
		free(n->recs[i].rdata);
	}
	free(n->recs);
	n->recs = NULL;
	n->nrecs = n->cap = 0;
}

static void
mem_node_free(struct mem_node *n) {
	mem_node_clear(n);
	free(n->owner);
	free(n);
}

static struct mem_node *
mem_node_new(const struct mem_zone *zone, const char *owner, uint64_t hash) {
	struct mem_node *n = calloc(1, sizeof(*n));

	if (n == NULL || (n->owner = strdup(owner)) == NULL) {
		free(n);
		return NULL;
	}
	n->zone = zone;
	n->hash = hash;
	return n;
}

bool
mem_node_add(struct mem_node *n, const char *type, uint32_t ttl, const char *rdata) {
	struct mem_nrec *r;

	if (!dlz_grow((void **)&n->recs, &n->cap, n->nrecs + 1, sizeof(*n->recs))) {
		return false;
	}
	r = &n->recs[n->nrecs];
	r->type = strdup(type);
	r->rdata = strdup(rdata);
	r->ttl = ttl;
	if (r->type == NULL || r->rdata == NULL) {
		free(r->type);
		free(r->rdata);
		return false;
	}
	n->nrecs++;
	return true;
}

size_t
mem_node_remove(struct mem_node *n, const char *type, const char *rdata) {
	size_t kept = 0, before = n->nrecs;

	for (size_t i = 0; i < n->nrecs; i++) {
		struct mem_nrec *r = &n->recs[i];
		if (strcmp(r->type, type) == 0 && (rdata == NULL || strcmp(r->rdata, rdata) == 0)) {
			free(r->type);
			free(r->rdata);
			continue;
		}
		n->recs[kept++] = *r;
	}
	n->nrecs = kept;
	return before - kept;
}

/* The rows of node n as rows of owner (the request's key) in zone; *found if it has any. */
static int
mem_node_rows(const struct mem_zone *zone, const char *owner, const struct mem_node *n,
	      struct dlz_rowset *out, bool *found) {
	*found = n->nrecs > 0;
	for (size_t i = 0; i < n->nrecs; i++) {
		const struct mem_nrec *r = &n->recs[i];
		if (!dlz_rowset_add_row_keys(out, zone->key, owner, r->type, strlen(r->type), r->ttl,
					     r->rdata, strlen(r->rdata))) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

/* ---- the overlay -------------------------------------------------------------------------- */

bool
mem_overlay_init(struct mem_overlay *o) {
	atomic_init(&o->count, 0);
	o->buckets = calloc(OVERLAY_INITIAL_BUCKETS, sizeof(*o->buckets));
	o->mask = OVERLAY_INITIAL_BUCKETS - 1;
	return o->buckets != NULL && pthread_rwlock_init(&o->lock, NULL) == 0 &&
	       pthread_mutex_init(&o->index_lock, NULL) == 0;
}

void
mem_overlay_free(struct mem_overlay *o) {
	if (o->buckets == NULL) {
		return;
	}
	for (size_t i = 0; i <= o->mask; i++) {
		struct mem_node *n = o->buckets[i], *next;
		for (; n != NULL; n = next) {
			next = n->next;
			mem_node_free(n);
		}
	}
	free(o->buckets);
	pthread_rwlock_destroy(&o->lock);
	pthread_mutex_destroy(&o->index_lock);
}

bool
mem_overlay_used(struct mem_overlay *o) {
	/* Acquire: a reader that sees a commit's count takes the lock, which orders the rest. */
	return atomic_load_explicit(&o->count, memory_order_acquire) != 0;
}

struct mem_node *
mem_overlay_find(const struct mem_overlay *o, const struct mem_zone *zone, const char *owner,
		 uint64_t hash) {
	for (struct mem_node *n = o->buckets[hash & o->mask]; n != NULL; n = n->next) {
		if (n->hash == hash && n->zone == zone && strcmp(n->owner, owner) == 0) {
			return n;
		}
	}
	return NULL;
}

/* Twice the buckets once there are more nodes than buckets; false when out of memory (the
 * overlay is then as it was). The caller holds the write lock. */
static bool
mem_overlay_grow(struct mem_overlay *o, size_t need) {
	size_t size = o->mask + 1, bigger_size = size;
	struct mem_node **bigger;

	while (bigger_size < need) {
		bigger_size *= 2;
	}
	if (bigger_size == size) {
		return true;
	}
	bigger = calloc(bigger_size, sizeof(*bigger));
	if (bigger == NULL) {
		return false;
	}
	for (size_t i = 0; i < size; i++) {
		struct mem_node *n = o->buckets[i], *next;
		for (; n != NULL; n = next) {
			next = n->next;
			n->next = bigger[n->hash & (bigger_size - 1)];
			bigger[n->hash & (bigger_size - 1)] = n;
		}
	}
	free(o->buckets);
	o->buckets = bigger;
	o->mask = bigger_size - 1;
	return true;
}

/* ---- reads --------------------------------------------------------------------------------- */

static struct mem_node *
mem_txn_find(const struct mem_txn *txn, const struct mem_zone *zone, const char *owner,
	     uint64_t hash) {
	for (struct mem_node *n = txn->pending; n != NULL; n = n->next) {
		if (n->hash == hash && n->zone == zone && strcmp(n->owner, owner) == 0) {
			return n;
		}
	}
	return NULL;
}

int
mem_owner_rows(const struct mem_table *t, const struct mem_txn *txn, const struct mem_zone *zone,
	       const char *owner, struct dlz_rowset *out, bool *found) {
	uint64_t hash = mem_hash_key(owner);
	const struct mem_node *n = NULL;

	if (txn != NULL) {
		n = mem_txn_find(txn, zone, owner, hash);
	}
	/* A zone no update changed is read as the table has it (the counter: 37% more
	 * instructions per fetch without it, for the overlay lookup of every owner). */
	if (n == NULL && zone->changed != 0) {
		n = mem_overlay_find(&t->overlay, zone, owner, hash);
	}
	if (n != NULL) {
		return mem_node_rows(zone, owner, n, out, found);
	}
	return mem_table_rows(t, zone, owner, hash, out, found);
}

int
mem_overlay_allnodes(const struct mem_table *t, const struct mem_zone *zone, dlz_node_cb *cb,
		     void *ctx) {
	const struct mem_overlay *o = &t->overlay;
	int rc;

	for (const struct mem_rec *rec = zone->first; rec != NULL; rec = rec->next_in_zone) {
		if (mem_overlay_find(o, zone, rec->owner, mem_hash_key(rec->owner)) != NULL) {
			continue; /* changed: its records come from its node below */
		}
		if ((rc = cb(ctx, rec->owner, rec->type, rec->ttl, rec->rdata)) != DLZ_OK) {
			return rc;
		}
	}
	for (size_t i = 0; i <= o->mask; i++) {
		for (const struct mem_node *n = o->buckets[i]; n != NULL; n = n->next) {
			for (size_t j = 0; n->zone == zone && j < n->nrecs; j++) {
				const struct mem_nrec *r = &n->recs[j];
				if ((rc = cb(ctx, n->owner, r->type, r->ttl, r->rdata)) != DLZ_OK) {
					return rc;
				}
			}
		}
	}
	return DLZ_OK;
}

/* ---- transactions -------------------------------------------------------------------------- */

struct mem_txn *
mem_txn_begin(struct mem_table *t) {
	struct mem_txn *txn = calloc(1, sizeof(*txn));

	if (txn != NULL) {
		txn->t = t;
	}
	return txn;
}

/* Copies the current records of n's owner into n: from the overlay's node, else the table. */
static bool
mem_node_fill(const struct mem_table *t, struct mem_node *n) {
	const struct mem_node *changed = mem_overlay_find(&t->overlay, n->zone, n->owner, n->hash);
	const struct mem_owner *o;

	if (changed != NULL) {
		for (size_t i = 0; i < changed->nrecs; i++) {
			const struct mem_nrec *r = &changed->recs[i];
			if (!mem_node_add(n, r->type, r->ttl, r->rdata)) {
				return false;
			}
		}
		return true;
	}
	o = mem_owner_lookup(t, n->owner, n->hash);
	for (const struct mem_rec *rec = o != NULL ? o->first : NULL; rec != NULL;
	     rec = rec->next_of_owner) {
		if (rec->zone == n->zone && !mem_node_add(n, rec->type, rec->ttl, rec->rdata)) {
			return false;
		}
	}
	return true;
}

struct mem_node *
mem_txn_node(struct mem_txn *txn, const struct mem_zone *zone, const char *owner) {
	uint64_t hash = mem_hash_key(owner);
	struct mem_node *n = mem_txn_find(txn, zone, owner, hash);
	struct mem_overlay *o = &txn->t->overlay;
	bool filled;

	if (n != NULL) {
		return n;
	}
	n = mem_node_new(zone, owner, hash);
	if (n == NULL) {
		return NULL;
	}
	pthread_rwlock_rdlock(&o->lock);
	filled = mem_node_fill(txn->t, n);
	pthread_rwlock_unlock(&o->lock);
	if (!filled) {
		mem_node_free(n);
		return NULL;
	}
	n->next = txn->pending;
	txn->pending = n;
	return n;
}

/* ---- the names below an owner ------------------------------------------------------------ */

typedef const char *mem_key_at(const void *items, size_t i);

static const char *
mem_table_owner_at(const void *items, size_t i) {
	return ((const char *const *)items)[i];
}

static const char *
mem_node_owner_at(const void *items, size_t i) {
	return ((struct mem_node *const *)items)[i]->owner;
}

/* The first of n items sorted from the end whose key (key_at) is not before key. */
static size_t
mem_first_from(const void *items, size_t n, mem_key_at *key_at, const char *key) {
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (dlz_key_cmp_from_end(key_at(items, mid), key) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

static bool
mem_ends_with(const char *key, const char *suffix, size_t suffix_len) {
	size_t len = strlen(key);

	return len >= suffix_len && memcmp(key + len - suffix_len, suffix, suffix_len) == 0;
}

/* The zone's owners in the table, sorted from the end, each once. False when out of memory. */
static bool
mem_zone_index_table(struct mem_zone *zone) {
	size_t n = 0, kept = 0;
	const char **owners;

	for (const struct mem_rec *rec = zone->first; rec != NULL; rec = rec->next_in_zone) {
		n++;
	}
	owners = malloc((n + 1) * sizeof(*owners));
	if (owners == NULL) {
		return false;
	}
	n = 0;
	for (const struct mem_rec *rec = zone->first; rec != NULL; rec = rec->next_in_zone) {
		owners[n++] = rec->owner;
	}
	qsort(owners, n, sizeof(*owners), dlz_key_qsort_from_end);
	for (size_t i = 0; i < n; i++) {
		if (kept == 0 || strcmp(owners[kept - 1], owners[i]) != 0) {
			owners[kept++] = owners[i];
		}
	}
	zone->table_owners = owners;
	zone->ntable_owners = kept;
	zone->table_owners_made = true;
	return true;
}

void
mem_zone_free_indexes(struct mem_zone *zone) {
	free(zone->table_owners);
	free(zone->nodes);
}

/* Room for more nodes in the node indexes of the pending nodes' zones (the write lock held);
 * false when out of memory. */
static bool
mem_reserve_node_indexes(const struct mem_node *pending, size_t more) {
	for (const struct mem_node *p = pending; p != NULL; p = p->next) {
		struct mem_zone *zone = (struct mem_zone *)p->zone;
		if (!dlz_grow((void **)&zone->nodes, &zone->nodes_cap, zone->nnodes + more,
			      sizeof(*zone->nodes))) {
			return false;
		}
	}
	return true;
}

/* A node new in the overlay into its zone's node index (room reserved, the write lock held). */
static void
mem_index_node(struct mem_node *n) {
	struct mem_zone *zone = (struct mem_zone *)n->zone;
	size_t at = mem_first_from(zone->nodes, zone->nnodes, mem_node_owner_at, n->owner);

	memmove(&zone->nodes[at + 1], &zone->nodes[at], (zone->nnodes - at) * sizeof(*zone->nodes));
	zone->nodes[at] = n;
	zone->nnodes++;
}

/* A committed node below owner (its run: names ending in suffix) with records, which the
 * update has not changed. The overlay's lock held. */
static bool
mem_overlay_has_below(const struct mem_txn *txn, const struct mem_zone *zone, const char *owner,
		      const char *suffix, size_t suffix_len) {
	for (size_t i = mem_first_from(zone->nodes, zone->nnodes, mem_node_owner_at, suffix);
	     i < zone->nnodes && mem_ends_with(zone->nodes[i]->owner, suffix, suffix_len); i++) {
		const struct mem_node *n = zone->nodes[i];
		if (n->nrecs > 0 && dlz_key_below(n->owner, owner) &&
		    mem_txn_find(txn, zone, n->owner, n->hash) == NULL) {
			return true;
		}
	}
	return false;
}

/* An owner below owner in the table (its run) that neither the update nor the overlay
 * changed (a changed one counts as its node says). The overlay's lock held. */
static bool
mem_table_has_below(const struct mem_table *t, const struct mem_txn *txn,
		    const struct mem_zone *zone, const char *owner, const char *suffix,
		    size_t suffix_len) {
	for (size_t i = mem_first_from(zone->table_owners, zone->ntable_owners, mem_table_owner_at,
				       suffix);
	     i < zone->ntable_owners && mem_ends_with(zone->table_owners[i], suffix, suffix_len);
	     i++) {
		const char *key = zone->table_owners[i];
		uint64_t hash;
		if (!dlz_key_below(key, owner)) {
			continue;
		}
		hash = mem_hash_key(key);
		if (mem_txn_find(txn, zone, key, hash) == NULL &&
		    mem_overlay_find(&t->overlay, zone, key, hash) == NULL) {
			return true;
		}
	}
	return false;
}

/*
 * Only the names ending in "." and owner are read, in the indexes. (The whole zone and the
 * whole overlay were, once per name whose last record an update deleted: n such names in a
 * zone of N names, n * N keys read while named's worker waited, as mysql's below() did
 * before its index.) The update's own nodes are a list, as long as the update.
 */
int
mem_txn_has_descendant(struct mem_txn *txn, const struct mem_zone *zone, const char *owner) {
	struct mem_table *t = txn->t;
	struct mem_overlay *o = &t->overlay;
	struct mem_zone *indexed = (struct mem_zone *)zone; /* its indexes only */
	char suffix[DLZ_KEY_MAX + 1];
	size_t owner_len = strlen(owner), suffix_len;
	bool made, found;

	for (const struct mem_node *n = txn->pending; n != NULL; n = n->next) {
		if (n->zone == zone && n->nrecs > 0 && dlz_key_below(n->owner, owner)) {
			return 1;
		}
	}
	if (owner_len >= DLZ_KEY_MAX) {
		return 0; /* no key is longer: nothing is below it */
	}
	/* Below the root (".") is every name: the empty suffix. */
	suffix_len = strcmp(owner, ".") == 0 ? 0 : owner_len + 1;
	suffix[0] = '.';
	memcpy(suffix + 1, owner, owner_len + 1);
	suffix[suffix_len] = '\0';
	pthread_mutex_lock(&o->index_lock);
	made = indexed->table_owners_made || mem_zone_index_table(indexed);
	pthread_mutex_unlock(&o->index_lock);
	if (!made) {
		return DLZ_ERROR;
	}
	pthread_rwlock_rdlock(&o->lock);
	found = mem_overlay_has_below(txn, zone, owner, suffix, suffix_len) ||
		mem_table_has_below(t, txn, zone, owner, suffix, suffix_len);
	pthread_rwlock_unlock(&o->lock);
	return found ? 1 : 0;
}

static void
mem_pending_free(struct mem_node *n) {
	for (struct mem_node *next; n != NULL; n = next) {
		next = n->next;
		mem_node_free(n);
	}
}

bool
mem_txn_commit(struct mem_txn *txn) {
	struct mem_overlay *o = &txn->t->overlay;
	struct mem_node *n = txn->pending, *next, *replaced = NULL;
	size_t added = 0;

	for (const struct mem_node *p = n; p != NULL; p = p->next) {
		added++;
	}
	pthread_rwlock_wrlock(&o->lock);
	if (!mem_overlay_grow(o, atomic_load(&o->count) + added) ||
	    !mem_reserve_node_indexes(txn->pending, added)) {
		pthread_rwlock_unlock(&o->lock);
		mem_txn_rollback(txn);
		return false;
	}
	for (; n != NULL; n = next) {
		struct mem_node *old = mem_overlay_find(o, n->zone, n->owner, n->hash);
		next = n->next;
		if (old != NULL) {
			/* Swap the record sets: the old ones are freed after the lock. */
			struct mem_node tmp = *old;
			old->recs = n->recs;
			old->nrecs = n->nrecs;
			old->cap = n->cap;
			n->recs = tmp.recs;
			n->nrecs = tmp.nrecs;
			n->cap = tmp.cap;
			n->next = replaced;
			replaced = n;
			continue;
		}
		n->next = o->buckets[n->hash & o->mask];
		o->buckets[n->hash & o->mask] = n;
		mem_index_node(n);
		((struct mem_zone *)n->zone)->changed++;
		atomic_fetch_add_explicit(&o->count, 1, memory_order_release);
	}
	pthread_rwlock_unlock(&o->lock);
	mem_pending_free(replaced);
	free(txn);
	return true;
}

void
mem_txn_rollback(struct mem_txn *txn) {
	if (txn != NULL) {
		mem_pending_free(txn->pending);
		free(txn);
	}
}
