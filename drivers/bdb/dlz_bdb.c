/*
 * The Berkeley DB driver for the `bdb` store (schemas/bdb.md): one unnamed database per file,
 * btree (bdb-btree) or hash (bdb-hash), keys
 *
 *     Z <zone>            the zone exists
 *     D <zone> <owner>    record lines of one node ("TYPE TTL rdata" LF each; empty: an ENT)
 *     A <zone>            client addresses allowed to transfer the zone, one per line
 *     X <zone>            owner keys of the zone, one per line (hash file only)
 *
 * Threads: every connection opens the file on its own, without an environment, so libdb gives
 * its handle a private cache, and owns its key and value buffers (DB_DBT_USERMEM, grown when a
 * value does not fit and then reused). Connections share nothing, not even a cache mutex, so
 * named's threads never wait for each other here and a query allocates nothing; the price is
 * one cache per connection (filled as pages are read). The file is only read, and Berkeley DB
 * without locking allows concurrent readers.
 *
 * The loader replaces the file by rename: a running named keeps reading the file it opened
 * until it is reloaded (the store's update_needs_reload() says so).
 */
#include <db.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/berkeley/berkeley.h"
#include "../common/dlz_driver.h"

/* Upper bound of each connection's cache (the loader's size): a private cache takes most of
 * its memory from the heap as pages are read (about 17 MB of tables up front). */
#define CACHE_BYTES (256U * 1024 * 1024)

/* One connection: its own handle (and so its own cache), its key and buffers. */
struct bdb_conn {
	struct dlz_bdb_conn bdb; /* first: the connection is freed through it */
	DB *db;
	DBTYPE type;
};

/* ---- keys and gets ---------------------------------------------------------------------- */

/* dlz_bdb_get_failed: rate-limited, as a failing store fails every query. */
static void
bdb_get_failed(struct dlz_bdb_conn *k, int rc) {
	dlz_log_error_limited("DB->get(%.*s): %s", (int)k->key_len, k->key, db_strerror(rc));
}

/* The key "<tag> <a>" or, when b is not NULL, "<tag> <a> <b>"; false if too long. */
static bool
bdb_make_key(struct bdb_conn *c, char tag, const char *a, size_t a_len, const char *b,
	     size_t b_len) {
	size_t len = 2 + a_len + (b != NULL ? 1 + b_len : 0);
	char *p = c->bdb.key;

	if (len > sizeof(c->bdb.key)) {
		return false;
	}
	*p++ = tag;
	*p++ = ' ';
	memcpy(p, a, a_len);
	p += a_len;
	if (b != NULL) {
		*p++ = ' ';
		memcpy(p, b, b_len);
	}
	c->bdb.key_len = len;
	return true;
}

/* Does key exist? One get whose value (empty for Z keys) lands in the value buffer. */
static enum dlz_bdb_found
bdb_key_exists(struct bdb_conn *c, char tag, const char *zone) {
	size_t len;

	if (!bdb_make_key(c, tag, zone, strlen(zone), NULL, 0)) {
		return DLZ_BDB_MISSING;
	}
	return dlz_bdb_lookup(&c->bdb, c->db, &c->bdb.value, &len);
}

/* ---- the backend ------------------------------------------------------------------------ */

static void
bdb_conn_free(struct bdb_conn *c) {
	if (c->db != NULL) {
		c->db->close(c->db, 0);
	}
	dlz_bdb_conn_free(&c->bdb);
}

static int
bdb_init(const struct dlz_args *args, void **state) {
	*state = strdup(dlz_arg_text(args, "file"));
	return *state != NULL ? DLZ_OK : DLZ_ERROR;
}

static void
bdb_fini(void *state) {
	free(state);
}

static int
bdb_connect(void *state, void **conn) {
	const char *path = state;
	struct bdb_conn *c = dlz_bdb_conn_new(sizeof(*c), bdb_get_failed);
	int rc;

	if (c == NULL) {
		return DLZ_ERROR;
	}
	rc = db_create(&c->db, NULL, 0);
	if (rc == 0) {
		c->db->set_errcall(c->db, dlz_bdb_errcall);
		rc = c->db->set_cachesize(c->db, 0, CACHE_BYTES, 1);
	}
	if (rc == 0) {
		/* DB_UNKNOWN: the file's meta page says whether it is a btree or a hash. */
		rc = c->db->open(c->db, NULL, path, NULL, DB_UNKNOWN, DB_RDONLY | DB_THREAD, 0);
	}
	if (rc == 0) {
		rc = c->db->get_type(c->db, &c->type);
	}
	if (rc != 0) {
		dlz_log(ISC_LOG_ERROR, "cannot open %s: %s", path, db_strerror(rc));
		goto fail;
	}
	if (c->type != DB_BTREE && c->type != DB_HASH) {
		dlz_log(ISC_LOG_ERROR, "%s is neither a btree nor a hash", path);
		goto fail;
	}
	*conn = c;
	return DLZ_OK;
fail:
	bdb_conn_free(c);
	return DLZ_ERROR;
}

static void
bdb_disconnect(void *state, void *conn) {
	(void)state;
	bdb_conn_free(conn);
}

/* One fetch: its zone, as bdb_probe_zone finds it and bdb_fetch_owner reads it. */
struct bdb_owner_read {
	struct bdb_conn *c;
	const struct dlz_fetch_req *req;
	const char *zone;
	struct dlz_rowset *out;
};

/* dlz_owner_reader: the rows of owner in the zone ("D <zone> <owner>"), if the node exists
 * (*found). */
static int
bdb_fetch_owner(void *ctx, const char *owner, bool *found) {
	const struct bdb_owner_read *r = ctx;
	struct bdb_conn *c = r->c;

	*found = false;
	if (!bdb_make_key(c, 'D', r->zone, strlen(r->zone), owner, strlen(owner))) {
		return DLZ_OK; /* longer than any key of the store */
	}
	return dlz_bdb_read_node(&c->bdb, c->db, r->zone, owner, r->out, found);
}

/* dlz_zone_probe: one get of "Z <names[i]>". */
static int
bdb_probe_zone(void *ctx, unsigned i) {
	const struct bdb_owner_read *r = ctx;

	return bdb_key_exists(r->c, 'Z', r->req->names[i]);
}

static int
bdb_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct bdb_owner_read r = { .c = conn, .req = req, .out = out };

	return dlz_fetch_zone_owners(req, out, 0, 0, bdb_probe_zone, bdb_fetch_owner, &r, &r.zone);
}

/*
 * One btree cursor step: DB_SET_RANGE seeks c->bdb.key, DB_NEXT moves on. The key lands in
 * key_buf, the value in c->bdb.value, both NUL-terminated. DB_BUFFER_SMALL: the buffers have
 * been grown and the caller seeks again (whether the cursor moved is not specified).
 */
static int
bdb_cursor_step(struct bdb_conn *c, DBC *cursor, struct dlz_bdb_buf *key_buf, uint32_t flags,
		size_t *key_len, size_t *value_len) {
	DBT key, value;
	int rc;

	dlz_bdb_dbt_user(&key, key_buf);
	dlz_bdb_dbt_user(&value, &c->bdb.value);
	if (flags == DB_SET_RANGE) {
		if (!dlz_bdb_buf_reserve(key_buf, c->bdb.key_len + 1)) {
			return ENOMEM;
		}
		key.data = key_buf->data;
		key.ulen = key_buf->cap - 1;
		memcpy(key_buf->data, c->bdb.key, c->bdb.key_len);
		key.size = (uint32_t)c->bdb.key_len;
	}
	rc = cursor->get(cursor, &key, &value, flags);
	if (rc == DB_BUFFER_SMALL) {
		if (!dlz_bdb_buf_reserve(key_buf, (size_t)key.size + 1) ||
		    !dlz_bdb_buf_reserve(&c->bdb.value, (size_t)value.size + 1)) {
			return ENOMEM;
		}
		return DB_BUFFER_SMALL;
	}
	if (rc == 0) {
		key_buf->data[key.size] = '\0';
		c->bdb.value.data[value.size] = '\0';
		*key_len = key.size;
		*value_len = value.size;
	}
	return rc;
}

/*
 * Btree: the nodes of the zone are the keys starting with "D <zone> ", contiguous in key
 * order (a child zone's keys differ right after "D "). c->bdb.key is where to seek again
 * after a buffer had to grow: first the prefix, then the successor of the last key returned
 * (that key plus a 0 byte); it always starts with the prefix.
 */
static int
bdb_allnodes_btree(struct bdb_conn *c, const char *zone, dlz_node_cb *cb, void *ctx) {
	size_t prefix_len, key_len = 0, value_len = 0;
	struct dlz_bdb_buf *key_buf = &c->bdb.list;
	uint32_t flags = DB_SET_RANGE;
	DBC *cursor = NULL;
	int rc, result = DLZ_OK;

	if (!bdb_make_key(c, 'D', zone, strlen(zone), "", 0)) {
		return DLZ_NOTFOUND;
	}
	prefix_len = c->bdb.key_len;
	rc = c->db->cursor(c->db, NULL, &cursor, 0);
	if (rc != 0) {
		dlz_log(ISC_LOG_ERROR, "DB->cursor: %s", db_strerror(rc));
		return DLZ_ERROR;
	}
	for (;;) {
		rc = bdb_cursor_step(c, cursor, key_buf, flags, &key_len, &value_len);
		if (rc == DB_BUFFER_SMALL) {
			flags = DB_SET_RANGE;
			continue;
		}
		if (rc == DB_NOTFOUND) {
			break;
		}
		if (rc != 0) {
			dlz_log(ISC_LOG_ERROR, "cursor walk of zone %s: %s", zone, db_strerror(rc));
			result = DLZ_ERROR;
			break;
		}
		if (key_len < prefix_len || memcmp(key_buf->data, c->bdb.key, prefix_len) != 0) {
			break;
		}
		if (key_len + 1 > sizeof(c->bdb.key)) {
			dlz_log(ISC_LOG_ERROR, "zone %s: key longer than a name allows", zone);
			result = DLZ_BAD_DATA;
			break;
		}
		memcpy(c->bdb.key, key_buf->data, key_len);
		c->bdb.key[key_len] = '\0';
		c->bdb.key_len = key_len + 1;
		result = dlz_node_walk(zone, key_buf->data + prefix_len, c->bdb.value.data,
				       value_len, cb, ctx);
		if (result != DLZ_OK) {
			break;
		}
		flags = DB_NEXT;
	}
	cursor->close(cursor);
	return result;
}

/* Hash: the owner list "X <zone>", then one get of "D <zone> <owner>" per owner. */
static int
bdb_allnodes_hash(struct bdb_conn *c, const char *zone, dlz_node_cb *cb, void *ctx) {
	size_t zone_len = strlen(zone), list_len;
	enum dlz_bdb_found list;
	const char *gone;
	int rc;

	if (!bdb_make_key(c, 'X', zone, zone_len, NULL, 0)) {
		return DLZ_NOTFOUND;
	}
	list = dlz_bdb_lookup(&c->bdb, c->db, &c->bdb.list, &list_len);
	if (list == DLZ_BDB_MISSING) {
		dlz_log(ISC_LOG_ERROR, "zone %s has no owner list (X key)", zone);
		return DLZ_BAD_DATA;
	}
	if (list != DLZ_BDB_FOUND) {
		return DLZ_ERROR;
	}
	bdb_make_key(c, 'D', zone, zone_len, "", 0); /* fits: a zone is shorter than a key */
	rc = dlz_bdb_walk_owners(&c->bdb, c->db, zone, list_len, cb, ctx, &gone);
	if (gone != NULL) {
		dlz_log(ISC_LOG_ERROR, "zone %s lists owner %s without its node", zone, gone);
	}
	return rc;
}

static int
bdb_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct bdb_conn *c = conn;
	int rc = dlz_bdb_if_zone(bdb_key_exists(c, 'Z', zone), DLZ_OK);

	if (rc != DLZ_OK) {
		return rc;
	}
	return c->type == DB_BTREE ? bdb_allnodes_btree(c, zone, cb, ctx)
				   : bdb_allnodes_hash(c, zone, cb, ctx);
}

static int
bdb_allowxfr(void *conn, const char *zone, const char *client) {
	struct bdb_conn *c = conn;
	int rc;

	if (!bdb_make_key(c, 'A', zone, strlen(zone), NULL, 0)) {
		return DLZ_NOTFOUND;
	}
	rc = dlz_bdb_acl_check(&c->bdb, c->db, client);
	if (rc != DLZ_NOTFOUND) {
		return rc;
	}
	/* No ACL: nobody may transfer the zone, if it exists at all. */
	return dlz_bdb_if_zone(bdb_key_exists(c, 'Z', zone), DLZ_DENIED);
}

static const struct dlz_arg_spec bdb_args[] = {
	DLZ_TEXT_REQUIRED("file", "the database file, a btree or a hash (its meta page tells)"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "bdb",
	.thread_safe = true,
	.args = bdb_args,
	.init = bdb_init,
	.fini = bdb_fini,
	.connect = bdb_connect,
	.disconnect = bdb_disconnect,
	.fetch = bdb_fetch,
	.allnodes = bdb_allnodes,
	.allowxfr = bdb_allowxfr,
};
