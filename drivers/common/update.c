/*
 * RFC 2136 dynamic updates through named's DLZ update path (dlz_driver.h, "writing"; the
 * entry points and how named 9.18 calls them: dlz_abi.h).
 *
 * named does the protocol: prerequisites, the policy check per RR (dlz_ssumatch), duplicate
 * records, RRset TTLs, CNAME conflicts and the SOA serial increment (lib/ns/update.c). It reads
 * the zone for that through dlz_lookup, and it changes it one RR at a time through
 * dlz_addrdataset and dlz_subrdataset, between dlz_newversion and dlz_closeversion. This file
 * makes that one database transaction on one connection, keeps the empty non-terminal marker
 * rows right, and writes records in the loaders' text form.
 *
 * Which lookups belong to the update: all of named's steps for one update message run in one
 * event on one thread, after dlz_newversion and before dlz_closeversion (update_action). Only
 * some of its lookups carry the open version in clientinfo (foreach_rr and foreach_rrset do;
 * the value prerequisites, the SOA serial update and dns_diff_apply look nodes up with
 * dns_db_findnode, without clientinfo), so the open transaction is found by thread instead:
 * while this thread has one, each of its lookups is answered from the transaction's
 * connection, which sees the update's own changes, and never from a memo.
 *
 * Exact names only during an update: named's sdlz layer probes wildcards after a lookup that
 * returned ISC_R_NOTFOUND (lib/dns/sdlz.c getnodedata: "*.<parent>", ... "*" at the apex, on
 * the same node, until one is found), also for the update's lookups, while native BIND's
 * update code sees only the name itself (rbtdb's findnode matches no wildcard). A wildcard
 * covering a name would make it exist for a prerequisite and hand its records to the
 * duplicate check. The probes cannot be told from the update's own lookups of a wildcard's
 * owner ("*.w" itself: its prerequisites, duplicate check and deletes), since both come as a
 * lookup of "*.w" after a name below w was not found; so during an update a name without
 * records is answered with an empty node (ISC_R_SUCCESS, no record), and sdlz never probes.
 * named's update code takes an empty node for a missing name at every step (lib/ns/update.c:
 * foreach_rrset and foreach_rr find no rdataset, temp_check and rr_exists NXRRSET, like
 * ISC_R_NOTFOUND; dns_diff_apply and the SOA update create the node anyway).
 *
 * Deletes: named deletes an RR (dlz_subrdataset) by handing over its own text of an RR it
 * read from the driver in this update. The row it came from is the one whose text means the
 * same record (rdtext.c's match form, whoever wrote the row). If no row can be found for it,
 * the update fails (SERVFAIL, rolled back): answering NOERROR and raising the serial while
 * the record stays would be silently wrong.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cache.h"
#include "core.h"

struct updates {
	const struct dlz_backend *backend;
	struct pool *pool;
	dns_sdlz_putrr_t *putrr;
	atomic_ulong *generation;
	bool trace;
	char **zones; /* keys */
	unsigned nzones;
	char key[DLZ_KEY_MAX]; /* update_key as a key */
	bool has_key;
	bool allow_unsigned;
	struct cache *cache; /* NULL: the driver does not cache */
};

/* One fetch on the transaction's connection: owner O, its ancestors down to the zone. */
struct chain_read {
	char key[DLZ_KEY_MAX];
	unsigned offs[DLZ_MAX_LABELS];
	const char *names[DLZ_MAX_LABELS];
	const char *wilds[DLZ_MAX_LABELS];
	const char *owners[2 * DLZ_MAX_LABELS];
	int z; /* names[z] is the zone */
	char *wildbuf;
	size_t wildcap;
	struct dlz_rowset rows;
	bool *gone; /* rows this update deleted since the read */
	size_t gone_cap;
	/* Nothing was written since the read: a read of the same key can use it. named looks a
	 * name up several times before it changes it (the duplicate and TTL check, the node for
	 * the change, CNAME conflicts), and each would be a round trip: with trace=yes, an update
	 * adding one A record made 16 reads, 12 of them answered by the read before (4 round
	 * trips); one adding ten, 52 and 39 (13 round trips). */
	bool current;
};

struct txn {
	struct updates *u;
	struct pool_slot *slot;
	const char *zone;
	bool failed; /* a step failed: only a rollback is left */
	bool broken; /* the connection failed (DLZ_ERROR): drop it */
	struct chain_read chain;
	/* The owners this update may have written (keys, malloc'd), whose cache entries go at
	 * its commit. */
	char **written;
	size_t nwritten;
	size_t written_cap;
};

/* The update open on this thread (see above); one at a time, whatever the instance. */
static __thread struct txn *open_txn;

/* ---- arguments ------------------------------------------------------------------------- */

static bool
updates_parse_zones(struct updates *u, const char *list) {
	const char *p = list;

	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
		char text[DLZ_KEY_MAX], key[DLZ_KEY_MAX];
		char **bigger;

		if (len == 0 || len >= sizeof(text)) {
			dlz_log(ISC_LOG_ERROR, "update_zones: an empty or too long zone name");
			return false;
		}
		memcpy(text, p, len);
		text[len] = '\0';
		if (!key_from_bind(key, text) || strcmp(key, ".") == 0) {
			dlz_log(ISC_LOG_ERROR, "update_zones: %s cannot take updates", text);
			return false;
		}
		bigger = realloc(u->zones, (u->nzones + 1) * sizeof(*u->zones));
		if (bigger == NULL) {
			return false;
		}
		u->zones = bigger;
		u->zones[u->nzones] = strdup(key);
		if (u->zones[u->nzones] == NULL) {
			return false;
		}
		u->nzones++;
		p += len + (end != NULL ? 1 : 0);
	}
	return u->nzones > 0;
}

static bool
backend_can_write(const struct dlz_backend *b) {
	return b->begin != NULL && b->add != NULL && b->del != NULL && b->below != NULL &&
	       b->commit != NULL && b->rollback != NULL;
}

bool
updates_create(const struct dlz_args *args, const struct dlz_backend *backend,
	       struct updates **out) {
	const char *zones = dlz_arg_text(args, "update_zones");
	const char *key = dlz_arg_text(args, "update_key");
	struct updates *u;

	*out = NULL;
	if (zones == NULL) {
		if (key != NULL || dlz_arg_given(args, "update_unsigned")) {
			dlz_log(ISC_LOG_ERROR, "update_key and update_unsigned need update_zones");
			return false;
		}
		return true;
	}
	if (!backend_can_write(backend)) {
		dlz_log(ISC_LOG_ERROR, "update_zones: this store is read-only");
		return false;
	}
	u = calloc(1, sizeof(*u));
	if (u == NULL) {
		return false;
	}
	u->backend = backend;
	u->allow_unsigned = dlz_arg_yes(args, "update_unsigned");
	if (!updates_parse_zones(u, zones)) {
		updates_free(u);
		return false;
	}
	if (key != NULL && !key_from_bind(u->key, key)) {
		dlz_log(ISC_LOG_ERROR, "update_key: not a name");
		updates_free(u);
		return false;
	}
	u->has_key = key != NULL;
	if (!u->has_key && !u->allow_unsigned) {
		dlz_log(ISC_LOG_WARNING, "update_zones without update_key or update_unsigned: "
					 "every update is refused");
	}
	*out = u;
	return true;
}

void
updates_free(struct updates *u) {
	if (u == NULL) {
		return;
	}
	for (unsigned i = 0; i < u->nzones; i++) {
		free(u->zones[i]);
	}
	free(u->zones);
	free(u);
}

void
updates_attach(struct updates *u, struct pool *pool, dns_sdlz_putrr_t *putrr,
	       atomic_ulong *generation, bool trace) {
	u->pool = pool;
	u->putrr = putrr;
	u->generation = generation;
	u->trace = trace;
}

void
updates_attach_cache(struct updates *u, struct cache *cache) {
	u->cache = cache;
}

unsigned
updates_slots(const struct updates *u) {
	return u != NULL ? 1 : 0;
}

/* The update zone that is key, or NULL. */
static const char *
update_zone(const struct updates *u, const char *key) {
	for (unsigned i = 0; i < u->nzones; i++) {
		if (strcmp(u->zones[i], key) == 0) {
			return u->zones[i];
		}
	}
	return NULL;
}

/* The update zone that holds key, or NULL. */
static const char *
update_zone_of(const struct updates *u, const char *key) {
	const char *best = NULL;

	for (unsigned i = 0; i < u->nzones; i++) {
		if (dlz_key_in_zone(key, u->zones[i]) &&
		    (best == NULL || strlen(u->zones[i]) > strlen(best))) {
			best = u->zones[i];
		}
	}
	return best;
}

isc_result_t
updates_configure(struct updates *u, dns_dlz_writeablezone_t *writeable_zone, dns_view_t *view,
		  dns_dlzdb_t *dlzdb) {
	if (writeable_zone == NULL) {
		dlz_log(ISC_LOG_ERROR, "named did not pass writeable_zone: no zone takes updates");
		return ISC_R_FAILURE;
	}
	for (unsigned i = 0; i < u->nzones; i++) {
		isc_result_t result = writeable_zone(view, dlzdb, u->zones[i]);
		if (result != ISC_R_SUCCESS) {
			dlz_log(ISC_LOG_ERROR, "zone %s cannot take updates%s", u->zones[i],
				result == ISC_R_EXISTS ? ": the view has that zone already" : "");
			return result;
		}
	}
	dlz_log(ISC_LOG_INFO, "%u zone(s) take updates (%s%s)", u->nzones,
		u->has_key ? "signed by update_key" : "no key",
		u->allow_unsigned ? ", unsigned too" : "");
	return ISC_R_SUCCESS;
}

/*
 * The policy, as native BIND's `update-policy { grant KEY zonesub ANY; };` for every update
 * zone: the signer update_key may change any name inside them; an unsigned update only with
 * update_unsigned=yes. named asks once per RR of the update section, with the RR's owner.
 */
bool
updates_ssumatch(const struct updates *u, const char *signer, const char *name,
		 const char *tcpaddr, const char *type) {
	char key[DLZ_KEY_MAX], signer_key[DLZ_KEY_MAX];
	bool granted;

	if (!key_from_bind(key, name) || update_zone_of(u, key) == NULL) {
		granted = false;
	} else if (signer[0] == '\0') {
		granted = u->allow_unsigned;
	} else {
		granted = u->has_key && key_from_bind(signer_key, signer) &&
			  strcmp(signer_key, u->key) == 0;
	}
	if (u->trace) {
		dlz_log(ISC_LOG_INFO, "ssumatch %s %s by \"%s\" from %s -> %s", name, type, signer,
			tcpaddr, granted ? "granted" : "refused");
	}
	return granted;
}

/* ---- reading inside the transaction ----------------------------------------------------- */

static void
chain_free(struct chain_read *c) {
	rowset_free(&c->rows);
	free(c->wildbuf);
	free(c->gone);
}

/*
 * Fetch owner key and its ancestors down to zone (with their wildcard children, as the fetch
 * contract has it) on the transaction's connection. DLZ_OK, or the backend's failure.
 */
static int
chain_load(struct txn *t, const char *key) {
	struct chain_read *c = &t->chain;
	size_t len = strlen(key), zone_len = strlen(t->zone), need = 0, pos = 0;
	unsigned n;
	int rc;
	struct dlz_fetch_req req = { .zone_index = -1, .extras_zone = -1 };

	if (c->current && strcmp(c->key, key) == 0) {
		if (t->u->trace) {
			dlz_log(ISC_LOG_INFO, "update read %s (the last read)", key);
		}
		return DLZ_OK;
	}
	c->current = false;
	memcpy(c->key, key, len + 1);
	n = key_ancestors(c->key, len, c->offs);
	c->z = -1;
	for (unsigned i = 0; i < n; i++) {
		c->names[i] = c->key + c->offs[i];
		if (len - c->offs[i] == zone_len && strcmp(c->names[i], t->zone) == 0) {
			c->z = (int)i;
			break;
		}
	}
	if (c->z < 0) {
		return DLZ_BAD_DATA; /* not inside the zone: callers check before */
	}
	for (int i = 1; i <= c->z; i++) {
		need += 2 + (len - c->offs[i]) + 1;
	}
	if (!dlz_grow((void **)&c->wildbuf, &c->wildcap, need > 0 ? need : 1, 1)) {
		return DLZ_ERROR;
	}
	c->wilds[0] = NULL;
	for (int i = 0; i <= c->z; i++) {
		c->owners[i] = c->names[i];
		if (i == 0) {
			continue;
		}
		c->wilds[i] = c->wildbuf + pos;
		memcpy(c->wildbuf + pos, "*.", 2);
		memcpy(c->wildbuf + pos + 2, c->names[i], len - c->offs[i] + 1);
		pos += 2 + (len - c->offs[i]) + 1;
		c->owners[c->z + i] = c->wilds[i];
	}
	req.qname = c->key;
	req.nnames = (unsigned)c->z + 1;
	req.names = c->names;
	req.wilds = c->wilds;
	req.zone_index = c->z;
	req.nowners = 2 * (unsigned)c->z + 1;
	req.owners = c->owners;
	req.extras = c->owners + req.nowners;
	rowset_reset(&c->rows);
	rc = t->u->backend->fetch(t->slot->conn, &req, &c->rows);
	if (t->u->trace) {
		dlz_log(ISC_LOG_INFO, "update read %s -> %zu rows", key, c->rows.nrows);
	}
	if (rc == DLZ_OK && !dlz_grow((void **)&c->gone, &c->gone_cap, c->rows.nrows + 1,
				      sizeof(*c->gone))) {
		rc = DLZ_ERROR;
	}
	if (rc == DLZ_OK) {
		memset(c->gone, 0, (c->rows.nrows + 1) * sizeof(*c->gone));
		c->current = true;
	}
	return rc;
}

/* Row i of the last read, if it is of the zone and owned by owner (deleted since or not). */
static bool
row_at(const struct txn *t, size_t i, const char *owner) {
	const struct dlz_row *row = &t->chain.rows.rows[i];

	return strcmp(row->owner, owner) == 0 && strcmp(row->zone, t->zone) == 0;
}

/* Row i of the last read, if it is of the zone and owned by owner, and still there. */
static bool
row_of(const struct txn *t, size_t i, const char *owner) {
	return !t->chain.gone[i] && row_at(t, i, owner);
}

struct owner_rows {
	unsigned data; /* records */
	unsigned ent;  /* ENT markers */
};

static struct owner_rows
count_rows(const struct txn *t, const char *owner) {
	struct owner_rows n = { 0, 0 };

	for (size_t i = 0; i < t->chain.rows.nrows; i++) {
		if (row_of(t, i, owner)) {
			if (strcmp(t->chain.rows.rows[i].type, DLZ_ENT_TYPE) == 0) {
				n.ent++;
			} else {
				n.data++;
			}
		}
	}
	return n;
}

/* The transaction of version, if it is open on this thread and nothing failed yet. */
static struct txn *
txn_usable(const struct updates *u, void *version) {
	struct txn *t = version;

	return t != NULL && t == open_txn && t->u == u && !t->failed ? t : NULL;
}

/* A backend call's result on the transaction: false (and the update fails) unless DLZ_OK. */
static bool
step_ok(struct txn *t, int rc, const char *what, const char *owner) {
	if (rc == DLZ_OK) {
		return true;
	}
	t->failed = true;
	t->broken = t->broken || rc != DLZ_BAD_DATA;
	dlz_log_error_limited("update of %s: %s %s failed; the update is rolled back", t->zone,
			      what, owner);
	return false;
}

bool
updates_active(const struct updates *u) {
	return open_txn != NULL && open_txn->u == u;
}

isc_result_t
updates_lookup(struct updates *u, const char *zone, const char *key, dns_sdlzlookup_t *lookup) {
	struct txn *t = open_txn;
	bool found = false;

	if (t->failed || strcmp(zone, t->zone) != 0 || !dlz_key_in_zone(key, zone)) {
		return ISC_R_FAILURE; /* named reads only the zone it updates */
	}
	if (!step_ok(t, chain_load(t, key), "reading", key)) {
		return ISC_R_FAILURE;
	}
	for (size_t i = 0; i < t->chain.rows.nrows; i++) {
		const struct dlz_row *row = &t->chain.rows.rows[i];
		if (!row_of(t, i, key)) {
			continue;
		}
		found = true;
		if (strcmp(row->type, DLZ_ENT_TYPE) != 0 && !emit_rr(u->putrr, lookup, row)) {
			return ISC_R_FAILURE;
		}
	}
	if (u->trace) {
		dlz_log(ISC_LOG_INFO, "update lookup %s -> %s", key,
			found ? "found" : "no record (an empty node)");
	}
	return ISC_R_SUCCESS; /* never ISC_R_NOTFOUND: no wildcard probes (see above) */
}

/* ---- what an update wrote, for the cache ------------------------------------------------------ */

/*
 * The owner of the last read and its ancestors below the zone (the apex when it is the
 * owner): every row an add or delete at that owner writes is one of theirs (its records, the
 * ENT markers of make_owner_exist and settle_empty_owner). False (the update fails) when out
 * of memory; nothing to note without a cache.
 */
static bool
txn_note_written(struct txn *t) {
	const struct chain_read *c = &t->chain;
	int last = c->z > 0 ? c->z - 1 : 0;

	if (t->u->cache == NULL) {
		return true;
	}
	for (int i = 0; i <= last; i++) {
		char *copy;

		if (!dlz_grow((void **)&t->written, &t->written_cap, t->nwritten + 1,
			      sizeof(*t->written)) ||
		    (copy = strdup(c->names[i])) == NULL) {
			return step_ok(t, DLZ_ERROR, "noting the owners written for the cache",
				       c->names[i]);
		}
		t->written[t->nwritten++] = copy;
	}
	return true;
}

/* At the commit, before named answers the update: no lookup after it is answered from an
 * entry read before it. (The store's channel reports the same owners later.) */
static void
txn_invalidate_written(struct txn *t) {
	for (size_t i = 0; i < t->nwritten; i++) {
		cache_invalidate(t->u->cache, t->zone, t->written[i]);
	}
}

static void
txn_free_written(struct txn *t) {
	for (size_t i = 0; i < t->nwritten; i++) {
		free(t->written[i]);
	}
	free(t->written);
}

/* ---- versions ----------------------------------------------------------------------------- */

/*
 * Check out the update slot and begin. A connection that was idle since the last update may
 * have been cut (a server restart): like a query (core.c run_on_conn), the update then tries
 * once more on a new connection before it fails.
 */
static bool
txn_begin(struct txn *t) {
	struct updates *u = t->u;

	for (int attempt = 0; attempt < 2; attempt++) {
		bool fresh;

		t->slot = pool_checkout_update(u->pool, u->backend->thread_safe);
		if (t->slot == NULL) {
			return false;
		}
		fresh = t->slot->fresh;
		if (u->backend->begin(t->slot->conn) == DLZ_OK) {
			return true;
		}
		pool_checkin_update(u->pool, t->slot, true);
		t->slot = NULL;
		if (fresh) {
			return false;
		}
	}
	return false;
}

isc_result_t
updates_newversion(struct updates *u, const char *zone, void **versionp) {
	char key[DLZ_KEY_MAX];
	const char *zone_key;
	struct txn *t;

	if (!key_from_bind(key, zone) || (zone_key = update_zone(u, key)) == NULL) {
		return ISC_R_NOTFOUND;
	}
	if (open_txn != NULL) {
		dlz_log(ISC_LOG_ERROR, "update of %s: another update is open on this thread", key);
		return ISC_R_FAILURE;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		return ISC_R_NOMEMORY;
	}
	t->u = u;
	t->zone = zone_key;
	if (!txn_begin(t)) {
		dlz_log_error_limited("update of %s: cannot begin a transaction; SERVFAIL", key);
		free(t);
		return ISC_R_FAILURE;
	}
	open_txn = t;
	*versionp = t;
	if (u->trace) {
		dlz_log(ISC_LOG_INFO, "newversion %s", key);
	}
	return ISC_R_SUCCESS;
}

void
updates_closeversion(struct updates *u, const char *zone, bool commit, void **versionp) {
	struct txn *t = *versionp;
	bool committed = false;

	(void)zone;
	if (t == NULL) {
		return;
	}
	if (commit && !t->failed) {
		committed = u->backend->commit(t->slot->conn) == DLZ_OK;
		if (!committed) {
			/* named has answered NOERROR already: closeversion cannot say otherwise. */
			dlz_log(ISC_LOG_ERROR, "update of %s: the commit failed, nothing of the "
					       "update was written", t->zone);
			t->broken = true;
		}
	} else if (u->backend->rollback(t->slot->conn) != DLZ_OK) {
		t->broken = true;
	}
	if (committed) {
		/* Every memo made before this instant is stale from now on (memo_fresh). */
		atomic_fetch_add(u->generation, 1);
		txn_invalidate_written(t);
	}
	if (u->trace) {
		dlz_log(ISC_LOG_INFO, "closeversion %s -> %s", t->zone,
			committed ? "committed" : "rolled back");
	}
	pool_checkin_update(u->pool, t->slot, t->broken);
	chain_free(&t->chain);
	txn_free_written(t);
	open_txn = NULL;
	free(t);
	*versionp = NULL;
}

/* ---- changes ------------------------------------------------------------------------------ */

/* One line of named's rdatastr: "OWNER TTL CLASS TYPE RDATA" (tab-separated; any blanks
 * accepted). NUL-terminates the fields in place. */
struct rr_line {
	char *type;
	uint32_t ttl;
	char *rdata;
};

static char *
next_field(char **p) {
	char *start = *p + strspn(*p, " \t"), *end = start + strcspn(start, " \t");

	if (*start == '\0') {
		return NULL;
	}
	*p = *end != '\0' ? end + 1 : end;
	*end = '\0';
	return start;
}

static bool
parse_line(char *line, struct rr_line *rr) {
	char *p = line, *owner = next_field(&p), *ttl = next_field(&p), *class = next_field(&p);
	char *end;
	unsigned long value;

	rr->type = next_field(&p);
	if (owner == NULL || ttl == NULL || class == NULL || rr->type == NULL) {
		return false;
	}
	value = strtoul(ttl, &end, 10);
	if (*end != '\0' || value > UINT32_MAX) {
		return false;
	}
	rr->ttl = (uint32_t)value;
	rr->rdata = p + strspn(p, " \t");
	return true;
}

/* The owner key of named's name inside the transaction's zone; false if it is none. */
static bool
owner_key(const struct txn *t, const char *name, char *key) {
	return key_from_bind(key, name) && dlz_key_in_zone(key, t->zone);
}

/*
 * Before records are added at owner (names[0] of the last read): a marker for each missing
 * name between it and the zone, and its own marker gone. A backend that reads name by name
 * stops at the first missing ancestor (the fetch contract): the names below it are missing
 * too, since every store marks empty non-terminals.
 */
static bool
make_owner_exist(struct txn *t) {
	const struct chain_read *c = &t->chain;
	const struct dlz_backend *b = t->u->backend;
	void *conn = t->slot->conn;

	for (int i = 1; i < c->z; i++) {
		struct owner_rows n = count_rows(t, c->names[i]);
		if (n.data + n.ent == 0 &&
		    !step_ok(t, b->add(conn, t->zone, c->names[i], DLZ_ENT_TYPE, 0, ""),
			     "marking empty non-terminal", c->names[i])) {
			return false;
		}
	}
	if (count_rows(t, c->names[0]).ent > 0) {
		return step_ok(t, b->del(conn, t->zone, c->names[0], DLZ_ENT_TYPE, ""),
			       "unmarking", c->names[0]);
	}
	return true;
}

/*
 * After the last record of owner (names[0], not the apex) went: a marker for it if a name
 * lies below it; else the markers of the ancestors that nothing lies below any more, from the
 * parent up to the first ancestor that holds records or has another name below it.
 */
static bool
settle_empty_owner(struct txn *t) {
	const struct chain_read *c = &t->chain;
	const struct dlz_backend *b = t->u->backend;
	void *conn = t->slot->conn;
	int rc = b->below(conn, t->zone, c->names[0]);

	if (rc == 1) {
		return step_ok(t, b->add(conn, t->zone, c->names[0], DLZ_ENT_TYPE, 0, ""),
			       "marking empty non-terminal", c->names[0]);
	}
	if (rc != 0) {
		return step_ok(t, rc == DLZ_OK ? DLZ_ERROR : rc, "looking below", c->names[0]);
	}
	for (int i = 1; i < c->z; i++) {
		struct owner_rows n = count_rows(t, c->names[i]);
		if (n.data > 0 || n.ent == 0) {
			break;
		}
		rc = b->below(conn, t->zone, c->names[i]);
		if (rc == 1) {
			break;
		}
		if (rc != 0) {
			return step_ok(t, rc == DLZ_OK ? DLZ_ERROR : rc, "looking below", c->names[i]);
		}
		if (!step_ok(t, b->del(conn, t->zone, c->names[i], DLZ_ENT_TYPE, ""),
			     "unmarking", c->names[i])) {
			return false;
		}
	}
	return true;
}

/*
 * The open transaction of `version`, with the owner `name` (its key in `owner`) read into it
 * and marked as about to be written: what adding, subtracting and deleting each need first.
 * NULL when there is no usable transaction or the owner cannot be read (the transaction is
 * then failed, and rolls back at closeversion).
 */
static struct txn *
txn_at_owner(struct updates *u, void *version, const char *name, char *owner) {
	struct txn *t = txn_usable(u, version);

	if (t == NULL) {
		return NULL;
	}
	if (!owner_key(t, name, owner)) {
		t->failed = true;
		return NULL;
	}
	if (!step_ok(t, chain_load(t, owner), "reading", owner) || !txn_note_written(t)) {
		return NULL;
	}
	t->chain.current = false; /* written by the caller */
	return t;
}

/* The records of named's rdatastr (one per line), read before anything is written. */
struct rr_lines {
	char *text; /* the rdatastr's copy, split in place */
	struct rr_line *rrs;
	size_t n, cap;
};

static void
rr_lines_free(struct rr_lines *l) {
	free(l->text);
	free(l->rrs);
}

/* Every line of rdatastr into l (none is fine); false (the update fails) if a line is no
 * record or memory ran out. */
static bool
read_rr_lines(struct txn *t, const char *owner, const char *rdatastr, struct rr_lines *l) {
	char *line, *pos;

	l->text = strdup(rdatastr);
	if (l->text == NULL) {
		t->failed = true;
		return false;
	}
	for (pos = l->text; (line = strsep(&pos, "\n")) != NULL;) {
		if (*line == '\0') {
			continue;
		}
		if (!dlz_grow((void **)&l->rrs, &l->cap, l->n + 1, sizeof(*l->rrs))) {
			t->failed = true;
			return false;
		}
		if (!parse_line(line, &l->rrs[l->n])) {
			dlz_log(ISC_LOG_ERROR, "update of %s: cannot read named's record text", owner);
			t->failed = true;
			return false;
		}
		l->n++;
	}
	return true;
}

/* One record at owner (names[0] of the last read), in the store form. */
static bool
add_record(struct txn *t, const char *owner, const struct rr_line *rr) {
	char *data = rdata_store_form(rr->type, rr->rdata);
	bool ok;

	if (data == NULL) {
		t->failed = true;
		return false;
	}
	ok = step_ok(t, t->u->backend->add(t->slot->conn, t->zone, owner, rr->type, rr->ttl, data),
		     "adding a record at", owner);
	if (ok && t->u->trace) {
		dlz_log(ISC_LOG_INFO, "add %s %u %s %s", owner, rr->ttl, rr->type, data);
	}
	free(data);
	return ok;
}

/*
 * The lines are read first and the owner made to exist only then, when there is a record to
 * add: an rdatastr without a line (named always hands over at least one RR, and a harness
 * need not) adds nothing and marks nothing.
 */
isc_result_t
updates_add(struct updates *u, const char *name, const char *rdatastr, void *version) {
	char owner[DLZ_KEY_MAX];
	struct txn *t = txn_at_owner(u, version, name, owner);
	struct rr_lines lines = { NULL, NULL, 0, 0 };
	bool ok;

	if (t == NULL) {
		return ISC_R_FAILURE;
	}
	ok = read_rr_lines(t, owner, rdatastr, &lines) && (lines.n == 0 || make_owner_exist(t));
	for (size_t i = 0; ok && i < lines.n; i++) {
		ok = add_record(t, owner, &lines.rrs[i]);
	}
	rr_lines_free(&lines);
	return ok ? ISC_R_SUCCESS : ISC_R_FAILURE;
}

/* Is row (of the owner and type) the record whose match form is want (NULL: any)? -1 when
 * out of memory. */
static int
row_means(const struct txn *t, const struct dlz_row *row, const char *want) {
	char *have;
	int same;

	if (want == NULL) {
		return 1;
	}
	have = rdata_match_form(t->zone, row->type, row->rdata);
	if (have == NULL) {
		return -1;
	}
	same = strcmp(have, want) == 0;
	free(have);
	return same;
}

/*
 * Delete the stored rows of owner (names[0] of the last read) of type that are the record
 * whose match form is want (NULL: every row of the type). *matched: the rows that are it,
 * those an earlier line of the same call deleted included (named may pass an RR twice when
 * the store held it twice, and del took every row of its text at once).
 */
static bool
delete_matching(struct txn *t, const char *type, const char *want, unsigned *matched) {
	struct chain_read *c = &t->chain;
	const char *owner = c->names[0];

	*matched = 0;
	for (size_t i = 0; i < c->rows.nrows; i++) {
		const struct dlz_row *row = &c->rows.rows[i];
		int means;

		if (!row_at(t, i, owner) || strcasecmp(row->type, type) != 0) {
			continue;
		}
		means = row_means(t, row, want);
		if (means < 0) {
			t->failed = true;
			return false;
		}
		if (means == 0) {
			continue;
		}
		(*matched)++;
		if (c->gone[i]) {
			continue;
		}
		if (!step_ok(t, t->u->backend->del(t->slot->conn, t->zone, owner, row->type,
						   row->rdata),
			     "deleting a record at", owner)) {
			return false;
		}
		/* del took every row with this text: mark them all. */
		for (size_t j = i; j < c->rows.nrows; j++) {
			if (row_of(t, j, owner) && strcmp(c->rows.rows[j].type, row->type) == 0 &&
			    strcmp(c->rows.rows[j].rdata, row->rdata) == 0) {
				c->gone[j] = true;
			}
		}
		if (t->u->trace) {
			dlz_log(ISC_LOG_INFO, "delete %s %s %s", owner, row->type, row->rdata);
		}
	}
	return true;
}

/* After deletes at owner: settle the markers if it has no record left (never the apex). */
static bool
after_deletes(struct txn *t, unsigned left) {
	return left > 0 || t->chain.z == 0 || settle_empty_owner(t);
}

/*
 * Delete the row of one RR named read from owner (a line of its text). No row that is that
 * record: the update fails (see "Deletes" above), never a NOERROR that deleted nothing.
 */
static bool
delete_rr(struct txn *t, const char *owner, const struct rr_line *rr) {
	char *want;
	unsigned matched;
	bool ok;

	want = rdata_match_form(t->zone, rr->type, rr->rdata);
	if (want == NULL) {
		t->failed = true;
		return false;
	}
	ok = delete_matching(t, rr->type, want, &matched);
	if (ok && matched == 0) {
		dlz_log_error_limited("update of %s: no stored row of %s is the %s record named "
				      "deletes (%s); the update fails",
				      t->zone, owner, rr->type, rr->rdata);
		t->failed = true;
		ok = false;
	}
	free(want);
	return ok;
}

/* Every line is read before anything is deleted; with no line, nothing is deleted and there
 * is nothing to settle. */
isc_result_t
updates_sub(struct updates *u, const char *name, const char *rdatastr, void *version) {
	char owner[DLZ_KEY_MAX];
	struct txn *t = txn_at_owner(u, version, name, owner);
	struct rr_lines lines = { NULL, NULL, 0, 0 };
	bool ok;

	if (t == NULL) {
		return ISC_R_FAILURE;
	}
	ok = read_rr_lines(t, owner, rdatastr, &lines);
	for (size_t i = 0; ok && i < lines.n; i++) {
		ok = delete_rr(t, owner, &lines.rrs[i]);
	}
	ok = ok && (lines.n == 0 || after_deletes(t, count_rows(t, owner).data));
	rr_lines_free(&lines);
	return ok ? ISC_R_SUCCESS : ISC_R_FAILURE;
}

isc_result_t
updates_del(struct updates *u, const char *name, const char *type, void *version) {
	char owner[DLZ_KEY_MAX];
	struct txn *t = txn_at_owner(u, version, name, owner);
	unsigned matched;

	if (t == NULL) {
		return ISC_R_FAILURE;
	}
	/* No row of the type: nothing deleted, nothing to settle. */
	if (!delete_matching(t, type, NULL, &matched) ||
	    (matched > 0 && !after_deletes(t, count_rows(t, owner).data))) {
		return ISC_R_FAILURE;
	}
	return ISC_R_SUCCESS;
}
