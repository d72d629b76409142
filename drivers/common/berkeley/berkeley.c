#include "berkeley.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../dlz_driver.h"

/* A get holds one lock at a time, so it loses a deadlock only when the detector picks it as
 * the victim against a loader's transaction: tried again at once, but a get that keeps
 * losing gives up (the query gets SERVFAIL) instead of spinning. */
#define DEADLOCK_RETRIES 3

bool
dlz_bdb_buf_reserve(struct dlz_bdb_buf *b, size_t need) {
	char *bigger;
	size_t cap = b->cap != 0 ? b->cap : DLZ_BDB_BUF_INITIAL;

	if (need <= b->cap) {
		return true;
	}
	while (cap < need) {
		cap *= 2;
	}
	if (cap > UINT32_MAX) {
		return false;
	}
	bigger = realloc(b->data, cap);
	if (bigger == NULL) {
		return false;
	}
	b->data = bigger;
	b->cap = (uint32_t)cap;
	return true;
}

void
dlz_bdb_dbt_user(DBT *dbt, struct dlz_bdb_buf *b) {
	memset(dbt, 0, sizeof(*dbt));
	dbt->data = b->data;
	dbt->ulen = b->cap - 1;
	dbt->flags = DB_DBT_USERMEM;
}

int
dlz_bdb_get(DB *db, const char *key, size_t key_len, struct dlz_bdb_buf *b, size_t *len) {
	DBT k, value;
	int rc, deadlocks = 0;

	memset(&k, 0, sizeof(k));
	k.data = (void *)key;
	k.size = (uint32_t)key_len;
	for (;;) {
		dlz_bdb_dbt_user(&value, b);
		rc = db->get(db, NULL, &k, &value, 0);
		if (rc == DB_BUFFER_SMALL) {
			if (!dlz_bdb_buf_reserve(b, (size_t)value.size + 1)) {
				return ENOMEM;
			}
		} else if (rc != DB_LOCK_DEADLOCK || ++deadlocks > DEADLOCK_RETRIES) {
			break;
		}
	}
	if (rc == DB_LOCK_NOTGRANTED) {
		dlz_timed_out(); /* a lock held past the lock time-out: the store is stuck */
	}
	if (rc == 0) {
		b->data[value.size] = '\0';
		*len = value.size;
	}
	return rc;
}

void
dlz_bdb_errcall(const DB_ENV *env, const char *prefix, const char *message) {
	(void)env;
	(void)prefix;
	dlz_log(ISC_LOG_ERROR, "Berkeley DB: %s", message);
}

void *
dlz_bdb_conn_new(size_t size, dlz_bdb_get_failed *get_failed) {
	struct dlz_bdb_conn *c = calloc(1, size);

	if (c == NULL || !dlz_bdb_buf_reserve(&c->value, DLZ_BDB_BUF_INITIAL) ||
	    !dlz_bdb_buf_reserve(&c->list, DLZ_BDB_BUF_INITIAL)) {
		dlz_log(ISC_LOG_ERROR, "out of memory");
		if (c != NULL) {
			dlz_bdb_conn_free(c);
		}
		return NULL;
	}
	c->get_failed = get_failed;
	return c;
}

void
dlz_bdb_conn_free(struct dlz_bdb_conn *c) {
	free(c->value.data);
	free(c->list.data);
	free(c);
}

enum dlz_bdb_found
dlz_bdb_lookup(struct dlz_bdb_conn *c, DB *db, struct dlz_bdb_buf *b, size_t *len) {
	int rc = dlz_bdb_get(db, c->key, c->key_len, b, len);

	if (rc == DB_NOTFOUND) {
		return DLZ_BDB_MISSING;
	}
	if (rc != 0) {
		c->get_failed(c, rc);
		return DLZ_BDB_ERROR;
	}
	return DLZ_BDB_FOUND;
}

int
dlz_bdb_read_node(struct dlz_bdb_conn *c, DB *db, const char *zone, const char *owner,
		  struct dlz_rowset *out, bool *found) {
	size_t len;

	*found = false;
	switch (dlz_bdb_lookup(c, db, &c->value, &len)) {
	case DLZ_BDB_MISSING:
		return DLZ_OK;
	case DLZ_BDB_FOUND:
		*found = true;
		return dlz_rowset_add_node(out, zone, owner, c->value.data, len);
	default:
		return DLZ_ERROR;
	}
}

/* c->key = the prefix it holds (prefix_len bytes) followed by owner; false if too long. */
static bool
dlz_bdb_key_append(struct dlz_bdb_conn *c, size_t prefix_len, const char *owner) {
	size_t owner_len = strlen(owner);

	if (prefix_len + owner_len > sizeof(c->key)) {
		return false;
	}
	memcpy(c->key + prefix_len, owner, owner_len);
	c->key_len = prefix_len + owner_len;
	return true;
}

int
dlz_bdb_walk_owners(struct dlz_bdb_conn *c, DB *db, const char *zone, size_t list_len,
		    dlz_node_cb *cb, void *ctx, const char **gone) {
	size_t prefix_len = c->key_len, value_len;
	char *pos = c->list.data, *end = pos + list_len, *owner;

	*gone = NULL;
	while ((owner = dlz_next_line(&pos, end)) != NULL) {
		int rc;

		if (!dlz_bdb_key_append(c, prefix_len, owner)) {
			return DLZ_ERROR;
		}
		switch (dlz_bdb_lookup(c, db, &c->value, &value_len)) {
		case DLZ_BDB_MISSING:
			*gone = owner;
			return DLZ_BAD_DATA;
		case DLZ_BDB_FOUND:
			break;
		default:
			return DLZ_ERROR;
		}
		rc = dlz_node_walk(zone, owner, c->value.data, value_len, cb, ctx);
		if (rc != DLZ_OK) {
			return rc;
		}
	}
	return DLZ_OK;
}

int
dlz_bdb_acl_check(struct dlz_bdb_conn *c, DB *db, const char *client) {
	size_t len;

	switch (dlz_bdb_lookup(c, db, &c->list, &len)) {
	case DLZ_BDB_MISSING:
		return DLZ_NOTFOUND;
	case DLZ_BDB_FOUND:
		return dlz_lines_contain(c->list.data, len, client) ? DLZ_OK : DLZ_DENIED;
	default:
		return DLZ_ERROR;
	}
}

int
dlz_bdb_if_zone(enum dlz_bdb_found zone, int answer) {
	switch (zone) {
	case DLZ_BDB_FOUND:
		return answer;
	case DLZ_BDB_MISSING:
		return DLZ_NOTFOUND;
	default:
		return (int)zone; /* DLZ_BDB_ERROR, DLZ_BDB_BAD_DATA: the backend's codes */
	}
}
