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
/* "D <zone> <owner>": two keys and three separators. */
#define KEY_CAP (2 * DLZ_KEY_MAX + 4)

enum bdb_get_result { GET_ERROR = -1, GET_MISSING = 0, GET_FOUND = 1 };

/* One connection: its own handle (and so its own cache) and buffers. */
struct bdb_conn {
	DB *db;
	DBTYPE type;
	char key[KEY_CAP];
	size_t key_len;
	struct dlz_bdb_buf value;
	struct dlz_bdb_buf list;
};

/* ---- buffers and gets ------------------------------------------------------------------- */

/* The value of c->key into b (NUL-terminated, length in *len). */
static enum bdb_get_result
bdb_get_into(struct bdb_conn *c, struct dlz_bdb_buf *b, size_t *len) {
	int rc = dlz_bdb_get(c->db, c->key, c->key_len, b, len);

	if (rc == DB_NOTFOUND) {
		return GET_MISSING;
	}
	if (rc != 0) {
		dlz_log_error_limited("DB->get(%.*s): %s", (int)c->key_len, c->key,
				      db_strerror(rc));
		return GET_ERROR;
	}
	return GET_FOUND;
}

/* c->key = "<tag> <a>" or, when b is not NULL, "<tag> <a> <b>"; false if too long. */
static bool
bdb_make_key(struct bdb_conn *c, char tag, const char *a, size_t a_len, const char *b,
	     size_t b_len) {
	size_t len = 2 + a_len + (b != NULL ? 1 + b_len : 0);
	char *p = c->key;

	if (len > sizeof(c->key)) {
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
	c->key_len = len;
	return true;
}

/* Does key exist? One get whose value (empty for Z keys) lands in the value buffer. */
static enum bdb_get_result
bdb_key_exists(struct bdb_conn *c, char tag, const char *zone) {
	size_t len;

	if (!bdb_make_key(c, tag, zone, strlen(zone), NULL, 0)) {
		return GET_MISSING;
	}
	return bdb_get_into(c, &c->value, &len);
}

/* ---- the backend ------------------------------------------------------------------------ */

static void
bdb_conn_free(struct bdb_conn *c) {
	if (c->db != NULL) {
		c->db->close(c->db, 0);
	}
	free(c->value.data);
	free(c->list.data);
	free(c);
}

static int
bdb_init(const struct dlz_args *args, void **state) {
	const char *path = dlz_arg_str(args, "file", NULL);

	if (path == NULL) {
		dlz_log(ISC_LOG_ERROR, "argument file=<btree.db or hash.db> is required");
		return DLZ_ERROR;
	}
	*state = strdup(path);
	return *state != NULL ? DLZ_OK : DLZ_ERROR;
}

static void
bdb_fini(void *state) {
	free(state);
}

static int
bdb_connect(void *state, void **conn) {
	const char *path = state;
	struct bdb_conn *c = calloc(1, sizeof(*c));
	int rc;

	if (c == NULL || !dlz_bdb_buf_reserve(&c->value, DLZ_BDB_BUF_INITIAL) ||
	    !dlz_bdb_buf_reserve(&c->list, DLZ_BDB_BUF_INITIAL)) {
		dlz_log(ISC_LOG_ERROR, "out of memory");
		goto fail;
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
	if (c != NULL) {
		bdb_conn_free(c);
	}
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
	size_t len;

	*found = false;
	if (!bdb_make_key(c, 'D', r->zone, strlen(r->zone), owner, strlen(owner))) {
		return DLZ_OK; /* longer than any key of the store */
	}
	switch (bdb_get_into(c, &c->value, &len)) {
	case GET_MISSING:
		return DLZ_OK;
	case GET_FOUND:
		*found = true;
		return dlz_rowset_add_node(r->out, r->zone, owner, c->value.data, len) ? DLZ_OK
											: DLZ_ERROR;
	default:
		return DLZ_ERROR;
	}
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
 * One btree cursor step: DB_SET_RANGE seeks c->key, DB_NEXT moves on. The key lands in
 * key_buf, the value in c->value, both NUL-terminated. DB_BUFFER_SMALL: the buffers have
 * been grown and the caller seeks again (whether the cursor moved is not specified).
 */
static int
bdb_cursor_step(struct bdb_conn *c, DBC *cursor, struct dlz_bdb_buf *key_buf, uint32_t flags,
		size_t *key_len, size_t *value_len) {
	DBT key, value;
	int rc;

	dlz_bdb_dbt_user(&key, key_buf);
	dlz_bdb_dbt_user(&value, &c->value);
	if (flags == DB_SET_RANGE) {
		if (!dlz_bdb_buf_reserve(key_buf, c->key_len + 1)) {
			return ENOMEM;
		}
		key.data = key_buf->data;
		key.ulen = key_buf->cap - 1;
		memcpy(key_buf->data, c->key, c->key_len);
		key.size = (uint32_t)c->key_len;
	}
	rc = cursor->get(cursor, &key, &value, flags);
	if (rc == DB_BUFFER_SMALL) {
		if (!dlz_bdb_buf_reserve(key_buf, (size_t)key.size + 1) ||
		    !dlz_bdb_buf_reserve(&c->value, (size_t)value.size + 1)) {
			return ENOMEM;
		}
		return DB_BUFFER_SMALL;
	}
	if (rc == 0) {
		key_buf->data[key.size] = '\0';
		c->value.data[value.size] = '\0';
		*key_len = key.size;
		*value_len = value.size;
	}
	return rc;
}

/*
 * Btree: the nodes of the zone are the keys starting with "D <zone> ", contiguous in key
 * order (a child zone's keys differ right after "D "). c->key is where to seek again after
 * a buffer had to grow: first the prefix, then the successor of the last key returned (that
 * key plus a 0 byte); it always starts with the prefix.
 */
static int
bdb_allnodes_btree(struct bdb_conn *c, const char *zone, dlz_node_cb *cb, void *ctx) {
	size_t prefix_len, key_len = 0, value_len = 0;
	struct dlz_bdb_buf *key_buf = &c->list;
	uint32_t flags = DB_SET_RANGE;
	DBC *cursor = NULL;
	int rc, result = DLZ_OK;

	if (!bdb_make_key(c, 'D', zone, strlen(zone), "", 0)) {
		return DLZ_NOTFOUND;
	}
	prefix_len = c->key_len;
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
		if (key_len < prefix_len || memcmp(key_buf->data, c->key, prefix_len) != 0) {
			break;
		}
		if (key_len + 1 > sizeof(c->key)) {
			dlz_log(ISC_LOG_ERROR, "zone %s: key longer than a name allows", zone);
			result = DLZ_ERROR;
			break;
		}
		memcpy(c->key, key_buf->data, key_len);
		c->key[key_len] = '\0';
		c->key_len = key_len + 1;
		result = dlz_node_walk(zone, key_buf->data + prefix_len, c->value.data, value_len, cb,
				   ctx);
		if (result != DLZ_OK) {
			break;
		}
		flags = DB_NEXT;
	}
	cursor->close(cursor);
	return result;
}

/* Hash: the owner list "X <zone>", then one get per owner. */
static int
bdb_allnodes_hash(struct bdb_conn *c, const char *zone, dlz_node_cb *cb, void *ctx) {
	size_t zone_len = strlen(zone), list_len, value_len;
	char *pos, *end, *owner;

	if (!bdb_make_key(c, 'X', zone, zone_len, NULL, 0)) {
		return DLZ_NOTFOUND;
	}
	switch (bdb_get_into(c, &c->list, &list_len)) {
	case GET_MISSING:
		dlz_log(ISC_LOG_ERROR, "zone %s has no owner list (X key)", zone);
		return DLZ_ERROR;
	case GET_ERROR:
		return DLZ_ERROR;
	case GET_FOUND:
		break;
	}
	pos = c->list.data;
	end = pos + list_len;
	while ((owner = dlz_next_line(&pos, end)) != NULL) {
		int rc;

		if (!bdb_make_key(c, 'D', zone, zone_len, owner, strlen(owner))) {
			return DLZ_ERROR;
		}
		switch (bdb_get_into(c, &c->value, &value_len)) {
		case GET_MISSING:
			dlz_log(ISC_LOG_ERROR, "zone %s lists owner %s without its node", zone,
				owner);
			return DLZ_ERROR;
		case GET_ERROR:
			return DLZ_ERROR;
		case GET_FOUND:
			break;
		}
		rc = dlz_node_walk(zone, owner, c->value.data, value_len, cb, ctx);
		if (rc != DLZ_OK) {
			return rc;
		}
	}
	return DLZ_OK;
}

static int
bdb_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct bdb_conn *c = conn;

	switch (bdb_key_exists(c, 'Z', zone)) {
	case GET_MISSING:
		return DLZ_NOTFOUND;
	case GET_ERROR:
		return DLZ_ERROR;
	case GET_FOUND:
		break;
	}
	return c->type == DB_BTREE ? bdb_allnodes_btree(c, zone, cb, ctx)
				   : bdb_allnodes_hash(c, zone, cb, ctx);
}

static int
bdb_allowxfr(void *conn, const char *zone, const char *client) {
	struct bdb_conn *c = conn;
	size_t len;

	if (!bdb_make_key(c, 'A', zone, strlen(zone), NULL, 0)) {
		return DLZ_NOTFOUND;
	}
	switch (bdb_get_into(c, &c->list, &len)) {
	case GET_ERROR:
		return DLZ_ERROR;
	case GET_MISSING:
		/* No ACL: nobody may transfer the zone, if it exists at all. */
		switch (bdb_key_exists(c, 'Z', zone)) {
		case GET_FOUND:
			return DLZ_DENIED;
		case GET_MISSING:
			return DLZ_NOTFOUND;
		default:
			return DLZ_ERROR;
		}
	case GET_FOUND:
		break;
	}
	return dlz_lines_contain(c->list.data, len, client) ? DLZ_OK : DLZ_DENIED;
}

static const char *const bdb_keys[] = { "file", NULL };

const struct dlz_backend dlz_backend = {
	.name = "bdb",
	.thread_safe = true,
	.arg_keys = bdb_keys,
	.init = bdb_init,
	.fini = bdb_fini,
	.connect = bdb_connect,
	.disconnect = bdb_disconnect,
	.fetch = bdb_fetch,
	.allnodes = bdb_allnodes,
	.allowxfr = bdb_allowxfr,
};
