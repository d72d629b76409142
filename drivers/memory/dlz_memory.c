/*
 * The in-memory reference driver: the whole data file (schemas/memory.md) is read once at
 * dlz_create into hash tables and never changes, so fetches are a few hash lookups with no
 * locking and rows point straight into the table (no copies). Dynamic updates go into an
 * overlay of changed owners beside it (mem_overlay.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory.h"

#define FILE_MAGIC "#dlzbench-memory 1"

/* ---- hashing ---------------------------------------------------------------------------- */

uint64_t
mem_hash_key(const char *key) {
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *key != '\0'; key++) {
		h ^= (unsigned char)*key;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static bool
mem_hash_init(struct mem_hash *h, size_t items) {
	size_t size = 16;

	while (size < 2 * items) {
		size *= 2;
	}
	h->slots = calloc(size, sizeof(*h->slots));
	h->hashes = calloc(size, sizeof(*h->hashes));
	h->mask = size - 1;
	return h->slots != NULL && h->hashes != NULL;
}

static void
mem_hash_free(struct mem_hash *h) {
	free(h->slots);
	free(h->hashes);
}

/* The slot of key: holding its item, or the empty slot where it belongs. Items start with
 * their key pointer (struct mem_zone and struct mem_owner both do). */
static size_t
mem_hash_slot(const struct mem_hash *h, const char *key, uint64_t hash) {
	size_t i = hash & h->mask;

	while (h->slots[i] != NULL &&
	       (h->hashes[i] != hash || strcmp(*(const char *const *)h->slots[i], key) != 0)) {
		i = (i + 1) & h->mask;
	}
	return i;
}

static void *
mem_hash_get(const struct mem_hash *h, const char *key) {
	return h->slots[mem_hash_slot(h, key, mem_hash_key(key))];
}

static struct mem_zone *
mem_zone_get(const struct mem_table *t, const char *key) {
	return mem_hash_get(&t->zone_index, key);
}

const struct mem_owner *
mem_owner_lookup(const struct mem_table *t, const char *key, uint64_t hash) {
	return t->owner_index.slots[mem_hash_slot(&t->owner_index, key, hash)];
}

/* ---- loading ---------------------------------------------------------------------------- */

static void
mem_table_free(struct mem_table *t) {
	if (t == NULL) {
		return;
	}
	for (size_t i = 0; t->zones != NULL && i < t->nzones; i++) {
		mem_zone_free_indexes(&t->zones[i]);
	}
	mem_overlay_free(&t->overlay);
	mem_hash_free(&t->zone_index);
	mem_hash_free(&t->owner_index);
	free(t->zones);
	free(t->owners);
	free(t->recs);
	free(t->acls);
	free(t->text);
	free(t);
}

static char *
mem_read_file(const char *path, size_t *len) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	size_t done = 0;

	if (fd < 0 || fstat(fd, &st) != 0) {
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL) {
		goto fail;
	}
	while (done < (size_t)st.st_size) {
		ssize_t got = read(fd, text + done, (size_t)st.st_size - done);
		if (got < 0 && errno == EINTR) {
			continue;
		}
		if (got <= 0) {
			goto fail;
		}
		done += (size_t)got;
	}
	close(fd);
	text[done] = '\0';
	*len = done;
	return text;
fail:
	dlz_log(ISC_LOG_ERROR, "cannot read %s: %s", path, strerror(errno));
	if (fd >= 0) {
		close(fd);
	}
	free(text);
	return NULL;
}

/* Split line (NUL-terminated) at tabs in place; the last field keeps any further tabs. */
static unsigned
mem_split_fields(char *line, char **fields, unsigned max) {
	unsigned n = 0;

	fields[n++] = line;
	while (n < max) {
		char *tab = strchr(fields[n - 1], '\t');
		if (tab == NULL) {
			break;
		}
		*tab = '\0';
		fields[n++] = tab + 1;
	}
	return n;
}

static bool
mem_parse_ttl(const char *text, uint32_t *ttl) {
	char *end = NULL;
	unsigned long value;

	errno = 0;
	value = strtoul(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > UINT32_MAX) {
		return false;
	}
	*ttl = (uint32_t)value;
	return true;
}

static bool
mem_add_zone(struct mem_table *t, const char *key) {
	uint64_t hash = mem_hash_key(key);
	size_t slot = mem_hash_slot(&t->zone_index, key, hash);
	struct mem_zone *zone;

	if (t->zone_index.slots[slot] != NULL) {
		return true; /* declared again: the same zone */
	}
	zone = &t->zones[t->nzones++];
	zone->key = key;
	t->zone_index.slots[slot] = zone;
	t->zone_index.hashes[slot] = hash;
	return true;
}

static bool
mem_add_acl(struct mem_table *t, char **f) {
	struct mem_zone *zone = mem_zone_get(t, f[1]);
	struct mem_acl *acl;

	if (zone == NULL) {
		return false;
	}
	acl = &t->acls[t->nacls++];
	acl->client = f[2];
	acl->next = zone->acl;
	zone->acl = acl;
	return true;
}

static struct mem_owner *
mem_owner_get_or_add(struct mem_table *t, const char *key) {
	uint64_t hash = mem_hash_key(key);
	size_t slot = mem_hash_slot(&t->owner_index, key, hash);
	struct mem_owner *owner = t->owner_index.slots[slot];

	if (owner == NULL) {
		owner = &t->owners[t->nowners++];
		owner->key = key;
		owner->first = NULL;
		t->owner_index.slots[slot] = owner;
		t->owner_index.hashes[slot] = hash;
	}
	return owner;
}

static bool
mem_add_record(struct mem_table *t, char **f) {
	struct mem_zone *zone = mem_zone_get(t, f[1]);
	struct mem_rec *rec = &t->recs[t->nrecs];
	struct mem_owner *owner;

	if (zone == NULL || !mem_parse_ttl(f[3], &rec->ttl)) {
		return false;
	}
	t->nrecs++;
	owner = mem_owner_get_or_add(t, f[2]);
	rec->owner = owner->key;
	rec->type = f[4];
	rec->rdata = f[5];
	rec->zone = zone;
	rec->next_of_owner = owner->first;
	owner->first = rec;
	rec->next_in_zone = NULL;
	if (zone->last != NULL) {
		zone->last->next_in_zone = rec;
	} else {
		zone->first = rec;
	}
	zone->last = rec;
	return true;
}

static bool
mem_parse_line(struct mem_table *t, char *line) {
	char *f[6];
	unsigned n = mem_split_fields(line, f, 6);

	if (n == 2 && strcmp(f[0], "Z") == 0) {
		return mem_add_zone(t, f[1]);
	}
	if (n == 3 && strcmp(f[0], "X") == 0) {
		return mem_add_acl(t, f);
	}
	if (n == 6 && strcmp(f[0], "R") == 0) {
		return mem_add_record(t, f);
	}
	return false;
}

/* Count lines per kind, so every array is allocated once at its final size. */
static void
mem_count_lines(const char *text, size_t *zones, size_t *acls, size_t *recs) {
	const char *line = text;

	*zones = *acls = *recs = 0;
	while (*line != '\0') {
		*zones += line[0] == 'Z';
		*acls += line[0] == 'X';
		*recs += line[0] == 'R';
		line = strchr(line, '\n');
		if (line == NULL) {
			break;
		}
		line++;
	}
}

static bool
mem_table_allocate(struct mem_table *t) {
	size_t zones, acls, recs;

	mem_count_lines(t->text, &zones, &acls, &recs);
	t->zones = calloc(zones + 1, sizeof(*t->zones));
	t->acls = calloc(acls + 1, sizeof(*t->acls));
	t->recs = calloc(recs + 1, sizeof(*t->recs));
	t->owners = calloc(recs + 1, sizeof(*t->owners));
	return t->zones != NULL && t->acls != NULL && t->recs != NULL && t->owners != NULL &&
	       mem_hash_init(&t->zone_index, zones) && mem_hash_init(&t->owner_index, recs) &&
	       mem_overlay_init(&t->overlay);
}

static bool
mem_table_parse(struct mem_table *t) {
	char *line = t->text, *next;
	unsigned lineno = 0;

	for (; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL) {
			*next++ = '\0';
		}
		lineno++;
		if (lineno == 1 && strcmp(line, FILE_MAGIC) != 0) {
			dlz_log(ISC_LOG_ERROR, "%s is not a dlzbench memory file (no '%s' line)",
				t->path, FILE_MAGIC);
			return false;
		}
		if (line[0] == '#' || line[0] == '\0') {
			continue;
		}
		if (!mem_parse_line(t, line)) {
			dlz_log(ISC_LOG_ERROR, "%s:%u: malformed line, or a zone used before its Z line",
				t->path, lineno);
			return false;
		}
	}
	if (lineno == 0) {
		dlz_log(ISC_LOG_ERROR, "%s is empty", t->path);
		return false;
	}
	return true;
}

static struct mem_table *
mem_table_load(const char *path) {
	struct mem_table *t = calloc(1, sizeof(*t));
	size_t len;

	if (t == NULL) {
		return NULL;
	}
	t->path = path;
	t->text = mem_read_file(path, &len);
	if (t->text == NULL) {
		mem_table_free(t);
		return NULL;
	}
	if (!mem_table_allocate(t)) {
		dlz_log(ISC_LOG_ERROR, "out of memory loading %s", path);
		mem_table_free(t);
		return NULL;
	}
	if (!mem_table_parse(t)) {
		mem_table_free(t);
		return NULL;
	}
	return t;
}

/* ---- the backend ------------------------------------------------------------------------ */

static int
mem_init(const struct dlz_args *args, void **state) {
	const char *path = dlz_arg_text(args, "file");
	struct mem_table *t = mem_table_load(path);

	if (t == NULL) {
		return DLZ_ERROR;
	}
	t->outage_file = dlz_arg_text(args, "outage_file");
	t->refuse_file = dlz_arg_text(args, "refuse_file");
	dlz_log(ISC_LOG_INFO, "loaded %zu zones, %zu rows from %s", t->nzones, t->nrecs, path);
	*state = t;
	return DLZ_OK;
}

static void
mem_fini(void *state) {
	mem_table_free(state);
}

/*
 * Tests of the core's failure handling need a backend that fails on demand: with
 * outage_file=<path>, every call fails while that file exists, as with a database that is
 * down, and works again once it is gone.
 */
static bool
mem_in_outage(const struct mem_table *t) {
	return t->outage_file != NULL && access(t->outage_file, F_OK) == 0;
}

/* A connection: the table, and the update in progress on it (between newversion and
 * closeversion the core keeps the connection checked out, and reads through it see the
 * update's own changes). */
struct mem_conn {
	struct mem_table *t;
	struct mem_txn *txn;
};

static int
mem_connect(void *state, void **conn) {
	struct mem_conn *c;

	if (mem_in_outage(state)) {
		return DLZ_ERROR;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		return DLZ_ERROR;
	}
	c->t = state;
	*conn = c;
	return DLZ_OK;
}

static void
mem_disconnect(void *state, void *conn) {
	struct mem_conn *c = conn;

	(void)state;
	mem_txn_rollback(c->txn);
	free(c);
}

/* One fetch: its zone, as mem_probe_zone finds it and mem_add_owner_rows reads it. */
struct mem_owner_read {
	const struct mem_table *t;
	const struct mem_txn *txn;
	const struct dlz_fetch_req *req;
	const struct mem_zone *zone;
	struct dlz_rowset *out;
};

int
mem_table_rows(const struct mem_table *t, const struct mem_zone *zone, const char *key,
	       uint64_t hash, struct dlz_rowset *out, bool *found) {
	const struct mem_owner *owner = mem_owner_lookup(t, key, hash);

	*found = false;
	for (const struct mem_rec *rec = owner != NULL ? owner->first : NULL; rec != NULL;
	     rec = rec->next_of_owner) {
		if (rec->zone != zone) {
			continue;
		}
		*found = true;
		if (!dlz_rowset_add_row_ref(out, zone->key, rec->owner, rec->type, rec->ttl,
					    rec->rdata)) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

/* dlz_owner_reader: the rows of owner key in the fetch's zone; *found if it has any. */
static int
mem_add_owner_rows(void *ctx, const char *key, bool *found) {
	const struct mem_owner_read *r = ctx;

	return mem_table_rows(r->t, r->zone, key, mem_hash_key(key), r->out, found);
}

/* dlz_owner_reader once updates have changed owners: the update's, the overlay's or the
 * table's rows (the overlay's lock held by mem_fetch). */
static int
mem_add_changed_owner_rows(void *ctx, const char *key, bool *found) {
	const struct mem_owner_read *r = ctx;

	return mem_owner_rows(r->t, r->txn, r->zone, key, r->out, found);
}

/* dlz_zone_probe: is names[i] a zone? Remembers it in the owner_read. */
static int
mem_probe_zone(void *ctx, unsigned i) {
	struct mem_owner_read *r = ctx;

	r->zone = mem_zone_get(r->t, r->req->names[i]);
	return r->zone != NULL;
}

static int
mem_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct mem_conn *c = conn;
	struct mem_owner_read r = { .t = c->t, .txn = c->txn, .req = req, .out = out };
	struct mem_overlay *o = &c->t->overlay;
	int rc;

	if (mem_in_outage(r.t)) {
		return DLZ_ERROR;
	}
	/* The probe leaves the zone in r (a memory probe cannot fail). Until an update has
	 * committed (and outside one) the table alone answers, with no lock. */
	if (c->txn == NULL && !mem_overlay_used(o)) {
		return dlz_fetch_zone_owners(req, out, 0, 0, mem_probe_zone, mem_add_owner_rows, &r,
					     NULL);
	}
	pthread_rwlock_rdlock(&o->lock);
	rc = dlz_fetch_zone_owners(req, out, 0, 0, mem_probe_zone, mem_add_changed_owner_rows, &r,
				   NULL);
	pthread_rwlock_unlock(&o->lock);
	return rc;
}

static int
mem_allnodes(void *conn, const char *zone_key, dlz_node_cb *cb, void *ctx) {
	struct mem_table *t = ((struct mem_conn *)conn)->t;
	const struct mem_zone *zone = mem_zone_get(t, zone_key);
	int rc = DLZ_OK;

	if (mem_in_outage(t)) {
		return DLZ_ERROR;
	}
	if (zone == NULL) {
		return DLZ_NOTFOUND;
	}
	if (mem_overlay_used(&t->overlay)) {
		pthread_rwlock_rdlock(&t->overlay.lock);
		rc = mem_overlay_allnodes(t, zone, cb, ctx);
		pthread_rwlock_unlock(&t->overlay.lock);
		return rc;
	}
	for (const struct mem_rec *rec = zone->first; rc == DLZ_OK && rec != NULL;
	     rec = rec->next_in_zone) {
		rc = cb(ctx, rec->owner, rec->type, rec->ttl, rec->rdata);
	}
	return rc;
}

static int
mem_allowxfr(void *conn, const char *zone_key, const char *client) {
	const struct mem_table *t = ((struct mem_conn *)conn)->t;
	const struct mem_zone *zone = mem_zone_get(t, zone_key);

	if (mem_in_outage(t)) {
		return DLZ_ERROR;
	}
	if (zone == NULL) {
		return DLZ_NOTFOUND;
	}
	for (const struct mem_acl *acl = zone->acl; acl != NULL; acl = acl->next) {
		if (strcmp(acl->client, client) == 0) {
			return DLZ_OK;
		}
	}
	return DLZ_DENIED;
}

/* ---- writing: RFC 2136 updates through the core (mem_overlay.c) ------------------------- */

static int
mem_begin(void *conn) {
	struct mem_conn *c = conn;

	if (mem_in_outage(c->t)) {
		return DLZ_ERROR;
	}
	mem_txn_rollback(c->txn); /* none is left open by the core; nothing if so */
	c->txn = mem_txn_begin(c->t);
	return c->txn != NULL ? DLZ_OK : DLZ_ERROR;
}

/* The pending node of owner in zone_key for an add or a delete; NULL (logged) when there is
 * no transaction, no such zone, no memory, or the "database" is down. */
static struct mem_node *
mem_update_node(struct mem_conn *c, const char *zone_key, const char *owner) {
	const struct mem_zone *zone = mem_zone_get(c->t, zone_key);
	struct mem_node *n;

	if (c->txn == NULL || zone == NULL || mem_in_outage(c->t)) {
		dlz_log(ISC_LOG_ERROR, "update of %s in %s: %s", owner, zone_key,
			c->txn == NULL ? "no transaction" : zone == NULL ? "no such zone" : "outage");
		return NULL;
	}
	n = mem_txn_node(c->txn, zone, owner);
	if (n == NULL) {
		dlz_log(ISC_LOG_ERROR, "update of %s in %s: out of memory", owner, zone_key);
	}
	return n;
}

/*
 * Tests of an update that fails half-way need a write the store refuses: with
 * refuse_file=<path>, while that file exists, an add whose rdata is the file's first line
 * fails (as a database's constraint or full disk would), after the update's earlier writes.
 */
static bool
mem_refuses(const struct mem_table *t, const char *rdata) {
	char line[DLZ_KEY_MAX];
	FILE *f;
	bool refused = false;

	if (t->refuse_file == NULL || (f = fopen(t->refuse_file, "r")) == NULL) {
		return false;
	}
	if (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		refused = strcmp(line, rdata) == 0;
	}
	fclose(f);
	return refused;
}

static int
mem_add(void *conn, const char *zone, const char *owner, const char *type, uint32_t ttl,
	const char *rdata) {
	struct mem_conn *c = conn;
	struct mem_node *n = mem_update_node(c, zone, owner);

	if (n != NULL && mem_refuses(c->t, rdata)) {
		dlz_log(ISC_LOG_ERROR, "update of %s in %s: refused (refuse_file)", owner, zone);
		return DLZ_ERROR;
	}
	return n != NULL && mem_node_add(n, type, ttl, rdata) ? DLZ_OK : DLZ_ERROR;
}

static int
mem_del(void *conn, const char *zone, const char *owner, const char *type, const char *rdata) {
	struct mem_node *n = mem_update_node(conn, zone, owner);

	if (n == NULL) {
		return DLZ_ERROR;
	}
	mem_node_remove(n, type, rdata);
	return DLZ_OK;
}

static int
mem_has_below(void *conn, const char *zone_key, const char *owner) {
	struct mem_conn *c = conn;
	const struct mem_zone *zone = mem_zone_get(c->t, zone_key);

	if (c->txn == NULL || zone == NULL || mem_in_outage(c->t)) {
		return DLZ_ERROR;
	}
	return mem_txn_has_descendant(c->txn, zone, owner);
}

static int
mem_commit(void *conn) {
	struct mem_conn *c = conn;
	struct mem_txn *txn = c->txn;

	c->txn = NULL;
	if (txn == NULL) {
		return DLZ_ERROR;
	}
	if (mem_in_outage(c->t)) {
		mem_txn_rollback(txn);
		return DLZ_ERROR;
	}
	return mem_txn_commit(txn) ? DLZ_OK : DLZ_ERROR;
}

static int
mem_rollback(void *conn) {
	struct mem_conn *c = conn;

	mem_txn_rollback(c->txn);
	c->txn = NULL;
	return DLZ_OK;
}

static const struct dlz_arg_spec mem_args[] = {
	DLZ_TEXT_REQUIRED("file", "the data file (loaders/memory.py), read once at start"),
	DLZ_TEXT("outage_file",
		 "while this file exists, every call fails as with a database down (for tests)"),
	DLZ_TEXT("refuse_file",
		 "while this file exists, an add whose rdata is its first line fails (for tests)"),
	/* Reads only its own memory: a failure costs no wait, so there is nothing to spare by
	 * taking the store for down. */
	DLZ_INT("down_interval_ms", 0, 0, DLZ_MS_MAX,
		"as the core's, but 0 by default: a failure of this store (named's own memory) "
		"costs no wait to spare"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "memory",
	.thread_safe = true,
	.args = mem_args,
	.init = mem_init,
	.fini = mem_fini,
	.connect = mem_connect,
	.disconnect = mem_disconnect,
	.fetch = mem_fetch,
	.allnodes = mem_allnodes,
	.allowxfr = mem_allowxfr,
	.begin = mem_begin,
	.add = mem_add,
	.del = mem_del,
	.below = mem_has_below,
	.commit = mem_commit,
	.rollback = mem_rollback,
};
