/* Internals of the shared core; drivers include dlz_driver.h only. */
#ifndef DLZ_CORE_H
#define DLZ_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlz_driver.h"

/* ---- log.c ------------------------------------------------------------------------------ */

/* Route dlz_log through BIND's callback (NULL: stderr) with "dlz_<name>: " in front. */
void log_setup(log_t *callback, const char *backend_name);

/* ---- args.c ----------------------------------------------------------------------------- */

struct dlz_args {
	const struct dlz_arg_spec *core;   /* the tables the words were parsed against */
	const struct dlz_arg_spec *driver;
	unsigned count; /* the words given: keys[i]=values[i] */
	char **keys;
	char **values;
};

/* Parse argv[0..argc-1] ("key=value" words) against the core's and the driver's tables: a word
 * without '=', a key neither declares, a repeated key, a value not of its argument's type or a
 * required argument missing is an error, logged with its key or position (never a value). NULL
 * on error. */
struct dlz_args *args_parse(unsigned argc, char *const argv[], const struct dlz_arg_spec *core,
			    const struct dlz_arg_spec *driver);
void args_free(struct dlz_args *args);
/* The tables, for docs/driver-arguments.md (servers/driver_arguments.py reads them through
 * ctypes; core.c defines them beside the core's table). */
DLZ_EXPORT const struct dlz_arg_spec *dlzbench_core_args(void);
DLZ_EXPORT const struct dlz_arg_spec *dlzbench_driver_args(void);

/* ---- rowset.c --------------------------------------------------------------------------- */

struct dlz_row {
	const char *zone;
	const char *owner;
	const char *type;
	const char *rdata;
	uint32_t ttl;
	uint32_t owner_len;
	uint32_t zone_len;
};

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	size_t used;
	char data[];
};

struct dlz_rowset {
	struct dlz_row *rows;
	size_t nrows;
	size_t rows_cap;
	const char **zones;
	size_t nzones;
	size_t zones_cap;
	struct arena_chunk *chunks; /* newest first */
};

/* Forget the rows, keep (and merge) the memory for the next fetch. */
void rowset_reset(struct dlz_rowset *rs);
void rowset_free(struct dlz_rowset *rs);
/* Is zone among the zones the fetch reported? */
bool rowset_has_zone(const struct dlz_rowset *rs, const char *zone);

/* ---- names.c ---------------------------------------------------------------------------- */

/* Offsets of the names of key (key itself, then each ancestor) into offs[]; their count.
 * Dots escaped with a backslash do not separate labels. The root "." has none. */
unsigned key_ancestors(const char *key, size_t len, unsigned offs[DLZ_MAX_LABELS]);
/* A name as BIND writes it (dns_name_totext, maybe upper case, as in wildcard probes) into a
 * key (dst of DLZ_KEY_MAX): the same text in lower case. False if too long. */
bool key_from_bind(char *dst, const char *src);
/* dst = key of the absolute name of relative (BIND's text, "@" = the apex) in zone (a key). */
bool key_absolute(char *dst, const char *zone, const char *relative);

/* ---- hints.c ---------------------------------------------------------------------------- */

/* Names remembered per zone; names at most HINT_DEPTH labels below their zone. */
#define HINTS_PER_ZONE 8
#define HINT_DEPTH 8
/* Bytes of names per zone entry (offsets are 16 bits). */
#define HINT_TEXT_MAX 16384

struct hint_table;

struct hint_pick {
	const char *name; /* absolute key, valid until the next hints_learn */
	size_t len;
	unsigned ref;     /* for hints_used */
};

/* FNV-1a of a key, never 0. */
uint64_t hint_hash(const char *key, size_t len);
/* A table of at most `zones` zones (rounded up to a power of two); NULL when zones is 0. */
struct hint_table *hints_new(unsigned zones);
void hints_free(struct hint_table *t);
/* In zone, BIND looked up name and no memo could answer it, in the DNS query whose name
 * hashes to trigger; now is the thread's query counter. */
void hints_learn(struct hint_table *t, const char *zone, const char *name, uint64_t trigger,
		 uint32_t now);
/* A fetch found zone: later queries below it ask about no suffix above it. */
void hints_note_zone(struct hint_table *t, const char *zone, size_t zone_len, uint32_t now);
/* zone is no zone any more: forget it and its hints. */
void hints_forget_zone(struct hint_table *t, const char *zone, size_t zone_len);
/* The hints for a query (trigger: its name's hash) from the deepest of names[0..nnames-1]
 * (lengths lens) that has an entry: their number, out[] (room for HINTS_PER_ZONE), and
 * *zone_index that name's index (-1: none). */
unsigned hints_for(struct hint_table *t, const char *const *names, const unsigned *lens,
		   unsigned nnames, uint64_t trigger, uint32_t now, struct hint_pick *out,
		   int *zone_index);
/* A hint offered by hints_for answered a lookup: it stays (least recently used goes first). */
void hints_used(struct hint_table *t, unsigned ref, const char *name, size_t len, uint32_t now);

/* ---- pool.c ----------------------------------------------------------------------------- */

struct pool_slot {
	pthread_mutex_t lock;
	void *conn;
	bool fresh; /* connected for this checkout: a failure is not a stale connection */
	bool probe; /* this checkout tries a store that is down */
} __attribute__((aligned(64)));

struct pool {
	const struct dlz_backend *backend;
	void *state;
	unsigned count;        /* read slots: slots[0..count-1] */
	unsigned update_count; /* update slots: slots[count..count+update_count-1] */
	struct pool_slot *slots;
	long down_ms;           /* how long the pool stays down (down_interval_ms); 0: never */
	atomic_long down_until; /* 0: up; else the time (dlz_now_ms) the next probe may start */
	atomic_bool probing;    /* a thread is trying the store while the pool is down */
};

bool pool_init(struct pool *pool, const struct dlz_backend *backend, void *state,
	       unsigned count, unsigned update_count, long down_ms);
void pool_destroy(struct pool *pool);
/* A locked slot with an open connection: the thread's home slot if free, else any free one,
 * else waits for home. NULL at once while the pool is down (unless this thread is the probe),
 * and when no connection could be opened (logged; the pool is then down). */
struct pool_slot *pool_checkout(struct pool *pool, unsigned home);
/* A locked update slot with an open connection, the backend's writer's where it has one (see
 * pool.c); NULL when none could be had, also when another update held it for longer than a
 * bounded wait (the pool stays up). */
struct pool_slot *pool_checkout_update(struct pool *pool, bool wait);
/* Unlock an update slot; a broken connection is closed (the pool stays up). */
void pool_checkin_update(struct pool *pool, struct pool_slot *slot, bool broken);
/* Unlock; a broken connection is closed and reopened on the next checkout. A broken
 * connection that timed out, or that had just been opened and failed as a connection
 * (dlz_connection_failed), takes the pool down; a probe that was not broken brings it up. */
void pool_checkin(struct pool *pool, struct pool_slot *slot, bool broken);

/* ---- emit.c ----------------------------------------------------------------------------- */

/* One record to a lookup; false (logged) if BIND rejected it. */
bool emit_rr(dns_sdlz_putrr_t *putrr, dns_sdlzlookup_t *lookup, const struct dlz_row *row);
/* One record of a zone transfer, owner given as an absolute key. */
bool emit_named(dns_sdlz_putnamedrr_t *putnamedrr, dns_sdlzallnodes_t *allnodes,
		const char *owner, const char *type, uint32_t ttl, const char *rdata);

/* ---- rdtext.c --------------------------------------------------------------------------- */

/* Record text of type (named's, a loader's or any other spelling of it) in the form the
 * loaders write (malloc'd; NULL when out of memory). Idempotent. Text that does not parse as
 * its type comes back as it is, but for blanks. */
char *rdata_store_form(const char *type, const char *text);
/* The store form with every name absolute (a relative one taken in zone, a key) and in lower
 * case: two texts of one record have the same match form (malloc'd; NULL: out of memory). */
char *rdata_match_form(const char *zone, const char *type, const char *text);

/* ---- update.c --------------------------------------------------------------------------- */

struct updates;

/* The update arguments (update_zones, update_key, update_unsigned); *out NULL when no zone
 * takes updates. False (logged) if they are wrong or the backend cannot write. */
bool updates_create(const struct dlz_args *args, const struct dlz_backend *backend,
		    struct updates **out);
void updates_free(struct updates *u);
/* What the updates need of the instance, once its pool exists. */
void updates_attach(struct updates *u, struct pool *pool, dns_sdlz_putrr_t *putrr,
		    atomic_ulong *generation, bool trace);
/* The driver's cache (NULL: none), whose entries of the owners an update wrote go at its
 * commit. */
struct cache;
void updates_attach_cache(struct updates *u, struct cache *cache);
/* Update slots the pool needs: 1 when zones take updates, else 0. */
unsigned updates_slots(const struct updates *u);
isc_result_t updates_configure(struct updates *u, dns_dlz_writeablezone_t *writeable_zone,
			       dns_view_t *view, dns_dlzdb_t *dlzdb);
bool updates_ssumatch(const struct updates *u, const char *signer, const char *name,
		      const char *tcpaddr, const char *type);
isc_result_t updates_newversion(struct updates *u, const char *zone, void **versionp);
void updates_closeversion(struct updates *u, const char *zone, bool commit, void **versionp);
isc_result_t updates_add(struct updates *u, const char *name, const char *rdatastr,
			 void *version);
isc_result_t updates_sub(struct updates *u, const char *name, const char *rdatastr,
			 void *version);
isc_result_t updates_del(struct updates *u, const char *name, const char *type, void *version);
/* Is an update of u open on this thread? Then every lookup is part of it. */
bool updates_active(const struct updates *u);
/* A lookup during the update: answered from the transaction, exact names only. */
isc_result_t updates_lookup(struct updates *u, const char *zone, const char *key,
			    dns_sdlzlookup_t *lookup);

#endif /* DLZ_CORE_H */
