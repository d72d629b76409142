#include "berkeley.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../dlz_driver.h"

/* A get that keeps losing deadlocks to a loader's transactions gives up (and the query gets
 * SERVFAIL) instead of spinning. */
#define DEADLOCK_RETRIES 100

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
