/*
 * What the two Berkeley DB drivers (bdb, bdbhpt) share: value buffers that Berkeley DB fills
 * in place, a get that grows them, and Berkeley DB's messages in named's log. Linked into
 * those two drivers only: it needs libdb.
 */
#ifndef DLZ_BERKELEY_H
#define DLZ_BERKELEY_H

#include <db.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DLZ_BDB_BUF_INITIAL 4096

/* A value buffer handed to Berkeley DB as DB_DBT_USERMEM, owned by one connection and reused
 * by every get (a query allocates nothing). A DBT's length is 32 bits, hence the cap's type;
 * one byte always stays free so that a value can be NUL-terminated in place. */
struct dlz_bdb_buf {
	char *data;
	uint32_t cap;
};

/* Room for need bytes (need - 1 of value and the NUL); false when out of memory. */
bool dlz_bdb_buf_reserve(struct dlz_bdb_buf *b, size_t need);
/* A DBT over b, for Berkeley DB to fill. */
void dlz_bdb_dbt_user(DBT *dbt, struct dlz_bdb_buf *b);
/*
 * The value of key in db into b, NUL-terminated, its length in *len. Grows b when the value
 * does not fit; retries a get that lost a deadlock against a writer's transaction (bdbhpt's
 * shared environments). Returns 0, DB_NOTFOUND, ENOMEM or Berkeley DB's error.
 */
int dlz_bdb_get(DB *db, const char *key, size_t key_len, struct dlz_bdb_buf *b, size_t *len);
/* For set_errcall: Berkeley DB's own messages into named's log. */
void dlz_bdb_errcall(const DB_ENV *env, const char *prefix, const char *message);

#endif /* DLZ_BERKELEY_H */
