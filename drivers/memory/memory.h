/*
 * The memory driver's table (dlz_memory.c) and the overlay of owners that dynamic updates
 * changed (mem_overlay.c), shared between its two files.
 */
#ifndef DLZ_MEMORY_H
#define DLZ_MEMORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/dlz_driver.h"

struct mem_acl {
	const char *client;
	struct mem_acl *next;
};

struct mem_rec {
	const char *owner;
	const char *type;
	const char *rdata;
	uint32_t ttl;
	struct mem_zone *zone;
	struct mem_rec *next_of_owner;
	struct mem_rec *next_in_zone;
};

struct mem_zone {
	const char *key;
	struct mem_rec *first;
	struct mem_rec *last;
	struct mem_acl *acl;
	size_t changed; /* nodes of this zone in the overlay (under the overlay's lock) */
	/* The names below an owner, for updates (mem_txn_has_descendant), are one run of each
	 * list sorted by their keys read from the end: the zone's owners in the table, made at
	 * the first need (under the overlay's index_lock; the table never changes), and its
	 * nodes in the overlay, kept by every commit (under the overlay's lock). */
	const char **table_owners;
	size_t ntable_owners;
	bool table_owners_made;
	struct mem_node **nodes;
	size_t nnodes;
	size_t nodes_cap;
};

struct mem_owner {
	const char *key;
	struct mem_rec *first;
};

/* Open addressing over pointers; keys are compared after the hash. */
struct mem_hash {
	void **slots;
	uint64_t *hashes;
	size_t mask;
};

/* One record an update wrote: owned strings, unlike the table's, which point into its file. */
struct mem_nrec {
	char *type;
	char *rdata;
	uint32_t ttl;
};

/* One owner of one zone as updates left it: it replaces every table record of that owner in
 * that zone. No record: the owner no longer exists there. */
struct mem_node {
	struct mem_node *next; /* the overlay's hash chain, or a transaction's list */
	const struct mem_zone *zone;
	char *owner;
	uint64_t hash; /* of owner */
	struct mem_nrec *recs;
	size_t nrecs;
	size_t cap;
};

/*
 * The owners that committed updates changed, over the immutable table. Readers hold `lock`
 * for reading while they copy rows out of it; a commit holds it for writing while it swaps
 * nodes in. `count` is read without the lock first: while no update has committed it is 0 and
 * a fetch takes no lock at all (nodes are never removed, so it never returns to 0).
 */
struct mem_overlay {
	pthread_rwlock_t lock;
	atomic_size_t count;
	struct mem_node **buckets;
	size_t mask;
	pthread_mutex_t index_lock; /* the making of a zone's table_owners */
};

struct mem_table {
	const char *path;
	const char *outage_file; /* while it exists, the "database" is down (tests) */
	const char *refuse_file; /* while it exists, an add of its rdata fails (tests) */
	char *text;
	struct mem_zone *zones;
	size_t nzones;
	struct mem_owner *owners;
	size_t nowners;
	struct mem_rec *recs;
	size_t nrecs;
	struct mem_acl *acls;
	size_t nacls;
	struct mem_hash zone_index;
	struct mem_hash owner_index;
	struct mem_overlay overlay;
};

/* An update in progress: the owners it changed (in any zone), complete, until it commits or
 * rolls back. */
struct mem_txn {
	struct mem_table *t;
	struct mem_node *pending;
};

uint64_t mem_hash_key(const char *key);
/* The table's entry of owner key, whose hash is given. */
const struct mem_owner *mem_owner_lookup(const struct mem_table *t, const char *key,
					 uint64_t hash);
/* The table's rows of owner (a key of the request, hash its hash) in zone, by reference;
 * *found if any. */
int mem_table_rows(const struct mem_table *t, const struct mem_zone *zone, const char *owner,
		   uint64_t hash, struct dlz_rowset *out, bool *found);

/* ---- mem_overlay.c ------------------------------------------------------------------------ */

bool mem_overlay_init(struct mem_overlay *o);
void mem_overlay_free(struct mem_overlay *o);
/* Has any update committed? Then readers must take the overlay's lock. */
bool mem_overlay_used(struct mem_overlay *o);
/* The node of owner in zone, or NULL; the caller holds the lock (or is the only writer). */
struct mem_node *mem_overlay_find(const struct mem_overlay *o, const struct mem_zone *zone,
				  const char *owner, uint64_t hash);

/* Rows of owner (a key of the request) in zone as txn (may be NULL) and the overlay see it,
 * falling back to the table; *found if it has any. Overlay locked by the caller if used. */
int mem_owner_rows(const struct mem_table *t, const struct mem_txn *txn,
		   const struct mem_zone *zone, const char *owner, struct dlz_rowset *out,
		   bool *found);
/* allnodes for zone with the overlay's changes; the caller holds the lock. */
int mem_overlay_allnodes(const struct mem_table *t, const struct mem_zone *zone,
			 dlz_node_cb *cb, void *ctx);

struct mem_txn *mem_txn_begin(struct mem_table *t);
/* The pending node of owner in zone, made from the current records if new; NULL when out of
 * memory. */
struct mem_node *mem_txn_node(struct mem_txn *txn, const struct mem_zone *zone,
			      const char *owner);
bool mem_node_add(struct mem_node *n, const char *type, uint32_t ttl, const char *rdata);
/* Removes the records of type (all when rdata is NULL, else the one whose rdata is equal);
 * how many went. */
size_t mem_node_remove(struct mem_node *n, const char *type, const char *rdata);
/* Does a name strictly below owner have a record in zone (as txn sees it)? 1 or 0;
 * DLZ_ERROR when out of memory. */
int mem_txn_has_descendant(struct mem_txn *txn, const struct mem_zone *zone, const char *owner);
/* The zone's indexes of the names below an owner freed (the overlay's nodes stay). */
void mem_zone_free_indexes(struct mem_zone *zone);
/* Publishes the pending nodes (the overlay's write lock, briefly) and frees txn. False when
 * out of memory: then nothing is published (rolled back). */
bool mem_txn_commit(struct mem_txn *txn);
void mem_txn_rollback(struct mem_txn *txn);

#endif /* DLZ_MEMORY_H */
