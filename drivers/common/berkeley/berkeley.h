/*
 * What the two Berkeley DB drivers (bdb, bdbhpt) share: value buffers that Berkeley DB fills
 * in place, a get that grows them, a connection's key and buffers, the reads of a node, an
 * owner list and a transfer ACL, and Berkeley DB's messages in named's log. Linked into
 * those two drivers only: it needs libdb.
 */
#ifndef DLZ_BERKELEY_H
#define DLZ_BERKELEY_H

#include <db.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../dlz_driver.h"

#define DLZ_BDB_BUF_INITIAL 4096
/* The longest key either store is asked for: bdb's "D <zone> <owner>" (two keys, three
 * separators; bdbhpt's "<gen> <owner>" is shorter). */
#define DLZ_BDB_KEY_CAP (2 * DLZ_KEY_MAX + 4)

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
 * shared environments) a few times; a lock not granted within the environment's lock
 * time-out is reported as a time-out (dlz_timed_out). Returns 0, DB_NOTFOUND, ENOMEM or
 * Berkeley DB's error.
 */
int dlz_bdb_get(DB *db, const char *key, size_t key_len, struct dlz_bdb_buf *b, size_t *len);
/* For set_errcall: Berkeley DB's own messages into named's log. */
void dlz_bdb_errcall(const DB_ENV *env, const char *prefix, const char *message);

/* ---- a connection's lookups ------------------------------------------------------------- */

/* A lookup's answer; the values are dlz_zone_probe's, so a probe can return it as it is. */
enum dlz_bdb_found {
	DLZ_BDB_ERROR = DLZ_ERROR,
	DLZ_BDB_BAD_DATA = DLZ_BAD_DATA, /* a value the store should not hold */
	DLZ_BDB_MISSING = 0,
	DLZ_BDB_FOUND = 1,
};

struct dlz_bdb_conn;
/* A get failed with rc (not DB_NOTFOUND). The driver's: each logs it in its own words, and
 * bdbhpt first marks an environment that needs recovery. */
typedef void dlz_bdb_get_failed(struct dlz_bdb_conn *c, int rc);

/*
 * The first member of each driver's connection: the key of the next get, and the buffers
 * values land in, owned by the connection and reused by every query (a query allocates
 * nothing).
 */
struct dlz_bdb_conn {
	char key[DLZ_BDB_KEY_CAP];
	size_t key_len;
	struct dlz_bdb_buf value; /* a node's record lines (and a zone's value) */
	struct dlz_bdb_buf list;  /* an owner list, a transfer ACL */
	dlz_bdb_get_failed *get_failed;
};

/* A zeroed connection of size bytes (the driver's, which starts with a struct dlz_bdb_conn)
 * with its buffers; NULL (logged) when out of memory. */
void *dlz_bdb_conn_new(size_t size, dlz_bdb_get_failed *get_failed);
/* Frees the buffers and the connection (the driver has closed its handles). */
void dlz_bdb_conn_free(struct dlz_bdb_conn *c);
/* The value of c->key in db into b (NUL-terminated, its length in *len). */
enum dlz_bdb_found dlz_bdb_lookup(struct dlz_bdb_conn *c, DB *db, struct dlz_bdb_buf *b,
				  size_t *len);
/* dlz_owner_reader's read once c->key names the node of owner in db: its records as rows of
 * zone, if it exists (*found). DLZ_OK, DLZ_ERROR or DLZ_BAD_DATA. */
int dlz_bdb_read_node(struct dlz_bdb_conn *c, DB *db, const char *zone, const char *owner,
		      struct dlz_rowset *out, bool *found);
/*
 * allnodes over the owner list in c->list (list_len bytes, one owner per line), while c->key
 * holds the nodes' key prefix ("D <zone> " or "<gen> "): for each owner, the node
 * "<prefix><owner>" in db, its records to cb. A listed owner without a node stops the walk with
 * DLZ_BAD_DATA and *gone = that owner (the driver says why), else *gone = NULL. Returns DLZ_OK,
 * DLZ_ERROR, DLZ_BAD_DATA or cb's non-zero return.
 */
int dlz_bdb_walk_owners(struct dlz_bdb_conn *c, DB *db, const char *zone, size_t list_len,
			dlz_node_cb *cb, void *ctx, const char **gone);
/* allowxfr once c->key names the zone's ACL in db: DLZ_OK if client is one of its lines,
 * DLZ_DENIED if not, DLZ_NOTFOUND when the zone has no ACL, DLZ_ERROR. */
int dlz_bdb_acl_check(struct dlz_bdb_conn *c, DB *db, const char *client);
/* What a zone lookup means to allnodes and allowxfr: answer when the zone exists,
 * DLZ_NOTFOUND when it does not, DLZ_ERROR or DLZ_BAD_DATA when the lookup failed. */
int dlz_bdb_if_zone(enum dlz_bdb_found zone, int answer);

#endif /* DLZ_BERKELEY_H */
