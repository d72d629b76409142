/*
 * What a dlzbench DLZ driver implements and what the shared core gives it.
 *
 * The core (drivers/common) owns every dlz_* entry point and all of the DNS logic: how BIND's
 * sdlz layer calls a driver, zone finding, wildcards (RFC 4592 closest encloser), empty
 * non-terminals, the per-thread memo that makes one backend round trip per DNS query, the
 * connection pool, reconnects, argument parsing and logging. A driver is one `struct
 * dlz_backend` named `dlz_backend` that reads its store; it never sees a BIND type.
 *
 * Names are *keys*, spelled as zonedata.model.name_key makes them for every loader
 * (loaders/<backend>.py) to write into its store: absolute names in presentation form without
 * the final dot, lower case ("www.example.com", "a\\032b.example", "*.w.example"), with "@"
 * and "$" unescaped; the root is ".". The core turns BIND's spelling (which escapes "@" and
 * "$") into keys, so every lookup a backend makes is an exact match on keys.
 */
#ifndef DLZ_DRIVER_H
#define DLZ_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlz_abi.h"

/* Return values of the backend functions. */
enum {
	DLZ_OK = 0,
	DLZ_ERROR = -1,    /* backend failure: the core drops the connection and answers SERVFAIL */
	/* The store holds data the backend cannot use (a malformed row or record line, a NULL
	 * column, a broken zone file): the core answers SERVFAIL and keeps the connection, which
	 * is fine, and a new one would read the same data. */
	DLZ_BAD_DATA = -2,
	DLZ_NOTFOUND = 1,  /* allowxfr/allnodes: no such zone */
	DLZ_DENIED = 2,    /* allowxfr: zone exists, client not in its ACL */
};

/* Longest key text: a 255-octet name written with \DDD escapes stays below this. */
#define DLZ_KEY_MAX 1024
/* A name has at most 127 labels besides the root. */
#define DLZ_MAX_LABELS 128
/* Marker type of an empty non-terminal row: the name exists but owns no record. */
#define DLZ_ENT_TYPE "ENT"

/* ---- logging: "dlz_<backend name>: " is prefixed ------------------------------------------ */

void dlz_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Like dlz_log at ERROR, but at most one message per second per format string (outages). */
void dlz_log_error_limited(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- time --------------------------------------------------------------------------------- */

/* Milliseconds of the monotonic clock (a few ms of resolution): for ages and deadlines. */
long dlz_now_ms(void);
/* The backend gave up on the store because it did not answer within a time-out (connect,
 * statement, lock): called before returning DLZ_ERROR, it makes the core take the store for
 * down (down_interval_ms) rather than try a new connection at once. */
void dlz_timed_out(void);
/* The connection itself failed (lost, closed by the server, a server that is shutting down or
 * refuses work), not one statement on it: called before returning DLZ_ERROR. On a connection
 * opened for the call it makes the core take the store for down, as a time-out does. A
 * statement the server answered with an error (a size or time limit, a missing privilege, a
 * constraint) says nothing about the store: the core answers SERVFAIL and reconnects, and
 * takes nothing down. */
void dlz_connection_failed(void);

/* ---- arguments: the key=value words after the library path in named.conf ------------------ */

/*
 * Every argument is declared once, in a table: the core's (core.c: connections, memo_ms, ...)
 * and the driver's own (dlz_backend.args). The table is what the parser accepts (any other key
 * stops named with "unknown argument 'KEY'"), checks (an integer out of its bounds, a yes/no
 * that is neither, a required argument missing) and defaults from, and what
 * docs/driver-arguments.md is generated from (servers/driver_arguments.py reads it through
 * dlzbench_core_args and dlzbench_driver_args). A driver's entry with a core argument's name
 * replaces the core's for that driver (memory: down_interval_ms defaults to 0).
 */
enum dlz_arg_type {
	DLZ_ARG_TEXT,  /* any text; no default: absent is NULL */
	DLZ_ARG_INT,   /* a decimal integer in [min, max] */
	DLZ_ARG_YESNO, /* yes/no/true/false/on/off/1/0 */
};

struct dlz_arg_spec {
	const char *name; /* NULL ends a table */
	enum dlz_arg_type type;
	bool required;    /* named does not start without it (a text argument) */
	long def;         /* DLZ_ARG_INT: the default; DLZ_ARG_YESNO: 1 (yes) or 0 (no) */
	long min, max;    /* DLZ_ARG_INT: the bounds */
	const char *help; /* one line for docs/driver-arguments.md */
};

/* The longest time-out or interval in ms any argument takes: ten minutes. */
#define DLZ_MS_MAX 600000
/* One line of a table each, so a table reads like the reference it becomes. */
#define DLZ_TEXT_REQUIRED(name, help) { name, DLZ_ARG_TEXT, true, 0, 0, 0, help }
#define DLZ_TEXT(name, help) { name, DLZ_ARG_TEXT, false, 0, 0, 0, help }
#define DLZ_INT(name, def, min, max, help) { name, DLZ_ARG_INT, false, def, min, max, help }
#define DLZ_YESNO(name, def, help) { name, DLZ_ARG_YESNO, false, def, 0, 1, help }
#define DLZ_ARGS_END { NULL, DLZ_ARG_TEXT, false, 0, 0, 0, NULL }

struct dlz_args;
/* The value given for a text argument, or NULL. */
const char *dlz_arg_text(const struct dlz_args *args, const char *key);
/* An integer argument: the value given (checked against its bounds when parsed) or its
 * default. */
long dlz_arg_int(const struct dlz_args *args, const char *key);
/* A yes/no argument: the value given or its default. */
bool dlz_arg_yes(const struct dlz_args *args, const char *key);
/* Was the argument given at all (whatever its type)? */
bool dlz_arg_given(const struct dlz_args *args, const char *key);
/* The first line of the file that the text argument key names (a password kept out of
 * named.conf and named's environment), into *out (NULL when key is absent); false (logged) if
 * it cannot be read or is empty. common/secret.c. */
bool dlz_arg_secret_file(const struct dlz_args *args, const char *key, char **out);
/* Zero and free what dlz_arg_secret_file read (NULL: nothing). */
void dlz_secret_free(char *secret);

/* ---- one fetch: everything one DNS query needs, in one round trip -------------------------- */

/*
 * The query name Q and its ancestors: names[0] = Q, names[i] = Q without its i leftmost
 * labels, down to names[nnames - 1]: the last (top-level) label, or a shallower suffix that
 * the core knows from earlier queries to be a zone (a zone below it would still be found;
 * if none of the names is a zone the core asks again with all of them). Every names[i] is a
 * candidate zone. wilds[i] = "*." + names[i] for i >= 1 (wilds[0] is NULL): the wildcards
 * that may cover Q.
 *
 * The zone whose rows are wanted, Z = names[z]: z = zone_index if zone_index >= 0, else the
 * smallest i for which names[i] is a zone in the store (the deepest zone). The candidate
 * owners inside Z are names[0..z] and wilds[1..z].
 *
 * extras[0..nextras-1]: more owner keys, all inside names[extras_zone], that BIND is expected
 * to look up in the same DNS query (the core learned them from earlier queries: glue of the
 * zone's name servers, MX and SRV targets). When z == extras_zone their rows are wanted too;
 * otherwise they may be ignored. They are distinct from each other and from every names[i]
 * and wilds[i]; nextras is 0 (extras_zone -1) when there are none, and at most DLZ_MAX_EXTRAS.
 *
 * For a one-round-trip backend, `owners` lists all names and all wilds (deepest first), then
 * the extras: nowners = 2 * nnames - 1 + nextras, and extras == owners + 2 * nnames - 1.
 *
 * Every string of the request (qname, names, wilds, extras) stays valid for as long as the
 * rows this fetch reports: a backend may hand them to the _ref and _keys variants below.
 */
#define DLZ_MAX_EXTRAS 64
struct dlz_fetch_req {
	const char *qname;
	unsigned nnames;
	const char *const *names;
	const char *const *wilds;
	int zone_index;
	unsigned nowners;
	const char *const *owners;
	int extras_zone;
	unsigned nextras;
	const char *const *extras;
};

/*
 * What fetch reports. Contract:
 *  - dlz_rowset_add_zone() for Z: for the deepest names[i] that is a zone in the store, or
 *    for names[zone_index] if that is one. Other zones among the names may be reported too
 *    (any order) and need not be looked for: BIND asks about no suffix above the deepest
 *    zone, so a backend that checks the names one by one stops at the first zone it finds.
 *    A zone reported again is ignored: a backend may report it with each of its rows;
 *  - dlz_rowset_add_row_*() for every record of Z (see above) whose owner is a candidate owner
 *    inside Z or (when z == extras_zone) one of the extras, ENT marker rows included. Rows of
 *    other zones may be added too (a single SQL query may find them): the core ignores them.
 *    Records in any order, each owner's records once. A backend that reads owner by owner
 *    may read names[z], names[z-1], ... only while they exist (no name below a missing one
 *    exists: every store marks empty non-terminals) and of the wildcards only wilds[e] for
 *    the deepest existing names[e], e >= 1 (the core answers a wildcard probe above the
 *    closest encloser "not found" without looking at rows, RFC 4592).
 * The _ref variants store the pointers without copying: only for strings that outlive the
 * next fetch on this thread (the memory backend's immutable table, the request's own
 * strings). The _keys variant takes zone and owner from the request (uncopied) and copies
 * type and rdata. dlz_rowset_add_zone and _row_n copy into per-thread buffers that are reused
 * from query to query. Each returns false when out of memory; fetch then returns DLZ_ERROR.
 */
struct dlz_rowset;
/* Make *array (of *cap items of size item) hold at least need items, doubling its capacity;
 * false when out of memory (the array is then unchanged). */
bool dlz_grow(void **array, size_t *cap, size_t need, size_t item);
bool dlz_rowset_add_zone(struct dlz_rowset *rs, const char *zone);
bool dlz_rowset_add_zone_ref(struct dlz_rowset *rs, const char *zone);
bool dlz_rowset_add_row_ref(struct dlz_rowset *rs, const char *zone, const char *owner,
			    const char *type, uint32_t ttl, const char *rdata);
/* Rows whose strings come with lengths (not NUL-terminated): copied. */
bool dlz_rowset_add_row_n(struct dlz_rowset *rs, const char *zone, size_t zone_len,
			  const char *owner, size_t owner_len, const char *type, size_t type_len,
			  uint32_t ttl, const char *rdata, size_t rdata_len);
/* zone and owner are strings of the request (not copied); type and rdata are copied. */
bool dlz_rowset_add_row_keys(struct dlz_rowset *rs, const char *zone, const char *owner,
			     const char *type, size_t type_len, uint32_t ttl, const char *rdata,
			     size_t rdata_len);

/* allnodes: one call per record of the zone, owner as an absolute key; ENT rows allowed. */
typedef int dlz_node_cb(void *ctx, const char *owner, const char *type, uint32_t ttl,
			const char *rdata);

/* ---- the change channel: how a store tells the driver's cache of changes (cache.c) ------- */

/*
 * A backend that defines watch() lets the core cache fetch results (core argument cache=yes):
 * watch runs in a thread of the core's from dlz_create to dlz_destroy, holds a connection of
 * its own to the store and reports through these calls, in this order:
 *   dlz_channel_up       once the store will report every change committed from now on (the
 *                        connection is listening); the cache answers nothing before:
 *   dlz_channel_synced   every change committed before since_ms (dlz_now_ms) has been
 *                        reported; the cache answers only while the last such instant lies
 *                        within cache_bound_ms, and says so in named's log when it starts to;
 *   dlz_channel_changed  a change: owner key in zone key (owner NULL: anything in the zone,
 *                        and whether it is a zone; zone NULL: anything at all), reported after
 *                        its commit, in commit order with the other reports;
 *   dlz_channel_down     the channel lost (why: one line for named's log): the cache is
 *                        flushed and answers nothing until up and synced again.
 * watch returns when dlz_channel_wait says so (the driver is being destroyed); it reconnects
 * by itself after a failure, waiting with dlz_channel_wait.
 */
struct dlz_channel;
void dlz_channel_up(struct dlz_channel *ch);
void dlz_channel_synced(struct dlz_channel *ch, long since_ms);
void dlz_channel_changed(struct dlz_channel *ch, const char *zone, const char *owner);
void dlz_channel_down(struct dlz_channel *ch, const char *why_fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* cache_bound_ms: a channel that cannot show it is caught up within it reports itself down. */
long dlz_channel_bound_ms(const struct dlz_channel *ch);
/* Wait until fd (if >= 0) has one of events (poll's), or timeout_ms has passed: 1 fd ready, 0
 * time out, -1 watch must return now. */
int dlz_channel_wait(struct dlz_channel *ch, int fd, short events, long timeout_ms);

/* ---- the backend a driver defines ----------------------------------------------------------- */

struct dlz_backend {
	const char *name;             /* log prefix "dlz_<name>" */
	bool thread_safe;             /* different connections may be used concurrently */
	const struct dlz_arg_spec *args; /* its arguments besides the core's, DLZ_ARGS_END last */

	/* Once at dlz_create, after arguments are checked; *state goes to connect(). */
	int (*init)(const struct dlz_args *args, void **state);
	void (*fini)(void *state);

	/* One connection (any pointer the other calls get as conn); DLZ_OK or DLZ_ERROR. */
	int (*connect)(void *state, void **conn);
	void (*disconnect)(void *state, void *conn);
	/* The connection of the core's update slot (see "writing"), made as the account that
	 * writes, where the one that reads may not; NULL: connect. */
	int (*connect_writer)(void *state, void **conn);

	/* DLZ_OK (even when nothing matched), DLZ_ERROR or DLZ_BAD_DATA. */
	int (*fetch)(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out);
	/* DLZ_OK, DLZ_NOTFOUND (no such zone), DLZ_ERROR, DLZ_BAD_DATA; cb's non-zero return
	 * stops the walk and is returned. */
	int (*allnodes)(void *conn, const char *zone, dlz_node_cb *cb, void *ctx);
	/* DLZ_OK (allowed), DLZ_DENIED, DLZ_NOTFOUND (no such zone), DLZ_ERROR, DLZ_BAD_DATA. */
	int (*allowxfr)(void *conn, const char *zone, const char *client);

	/*
	 * Writing: RFC 2136 dynamic updates (see "writing" below). All NULL in a read-only
	 * store; a store that defines one defines all five. Each returns DLZ_OK or DLZ_ERROR
	 * (anything else is taken for DLZ_ERROR); below also returns 1 or 0.
	 *
	 * begin: start a transaction on conn. Until commit or rollback, every call on conn
	 *   belongs to it, and fetch on conn sees its own uncommitted adds and deletes.
	 * add: one row (zone, owner, type, ttl, rdata); an ENT marker row is type
	 *   DLZ_ENT_TYPE, ttl 0, rdata "".
	 * del: every row of zone with exactly this owner, type and rdata (any ttl); rdata is
	 *   text the core read back from this store with fetch, so the match is bytewise. No
	 *   such row is not an error.
	 * below: 1 if zone holds any row (ENT markers included) whose owner lies strictly below
	 *   owner ("x.owner", "y.x.owner", ...), else 0.
	 * commit / rollback: end the transaction. After a failed commit the transaction is
	 *   over and nothing of it was written; rollback is also called on a connection whose
	 *   last call failed, and its own failure only makes the core drop the connection.
	 */
	int (*begin)(void *conn);
	int (*add)(void *conn, const char *zone, const char *owner, const char *type, uint32_t ttl,
		   const char *rdata);
	int (*del)(void *conn, const char *zone, const char *owner, const char *type,
		   const char *rdata);
	int (*below)(void *conn, const char *zone, const char *owner);
	int (*commit)(void *conn);
	int (*rollback)(void *conn);

	/* The store's change channel (see above); NULL: the driver cannot cache. */
	void (*watch)(void *state, struct dlz_channel *ch);
};

/*
 * ---- writing: what the core does with a writable store ----------------------------------
 *
 * Which zones take updates: the core argument update_zones=a.example,b.example (keys,
 * comma-separated; default none, and then the store is read-only as before whatever it
 * defines). Only those zones are registered with named (dlz_configure calls named's
 * "writeable_zone" for each), so a store of a million zones costs a million zone objects
 * only if it asks for them. update_zones with a backend whose write members are NULL is
 * an error at start-up.
 *
 * Who may update: update_key=NAME grants the TSIG key NAME (a `key` statement of
 * named.conf) every name inside every update zone, as native BIND's
 * `update-policy { grant NAME zonesub ANY; };`; no signature or any other key is REFUSED.
 * update_unsigned=yes grants unsigned updates as well (named lets an unsigned update reach
 * the driver's policy over TCP only: over UDP it answers REFUSED itself).
 *
 * One update message is one transaction: dlz_newversion checks a connection out of the
 * core's pool (a slot kept for updates, so that queries never wait behind an update and an
 * update never waits behind queries; opened with connect_writer when the backend has one,
 * so that no other connection may write) and calls begin; every add, delete and lookup of
 * that update runs on it; dlz_closeversion calls commit (or rollback) and checks the
 * connection in. A connection that cannot be had there fails the update alone: the store is
 * not taken for down on an update's account (pool.c). A failure anywhere (DLZ_ERROR) makes
 * the rest of the update fail, named answers SERVFAIL and the core rolls back: a bad update
 * changes nothing. Prerequisites (RFC 2136 section 3.2), duplicate records, TTL changes of an
 * RRset, CNAME conflicts and the SOA serial increment are named's own work
 * (lib/ns/update.c): it reads the zone through dlz_lookup during the update, and the core
 * answers those lookups from the transaction (fetch on its connection), never from a memo.
 *
 * Record text: the core turns named's rdata text into the form the loaders write
 * (zonedata.model.from_rdata: dnspython's presentation form, names absolute; named's
 * hexadecimal fields are written in lower case, DNSKEY-style base64 in chunks of 32), and
 * owners into keys (zonedata.model.name_key). For a delete it finds the stored row that
 * means the same record as named's text and passes the stored text to del.
 *
 * Empty non-terminals: the core keeps the DLZ_ENT_TYPE marker rows right in the same
 * transaction. Adding a record at owner O adds a marker for every missing name between O and
 * its zone and deletes O's own marker; deleting the last record of O adds a marker for O if
 * below() finds a name below it, else deletes the markers of the ancestors that are left
 * with nothing below them. The apex is never marked.
 *
 * Reads after a commit: every memo made before a commit is stale from the moment the commit
 * returns, so no lookup after it answers from data older than the update.
 */

/* Each driver defines exactly this object. */
extern const struct dlz_backend dlz_backend;

/* ---- small helpers for backends ------------------------------------------------------------- */

/* Is req->names[i] a zone in the store? 1 yes, 0 no, DLZ_ERROR or DLZ_BAD_DATA the lookup
 * failed (logged). */
typedef int dlz_zone_probe(void *ctx, unsigned i);
/*
 * The zone of a fetch, for a backend that looks names up one at a time: names[zone_index]
 * when the request gives one (and it is a zone), otherwise the deepest zone, probing
 * names[first], names[first + 1], ... (deepest first) and stopping at the first found: BIND
 * asks about no suffix above the deepest zone. first is 0, or one past the deepest name a
 * backend knows to be no zone (see dlz_read_owners' last). *z = the index, or -1 when no
 * name is a zone. DLZ_OK, or the failure a probe returned.
 */
int dlz_find_zone(const struct dlz_fetch_req *req, unsigned first, dlz_zone_probe *probe,
		  void *ctx, int *z);

/* Reads the rows of one owner key into the backend's rowset; *found = the owner exists.
 * DLZ_OK, DLZ_ERROR or DLZ_BAD_DATA. */
typedef int dlz_owner_reader(void *ctx, const char *owner, bool *found);
/*
 * The owners a one-name-at-a-time backend reads for zone req->names[z], per the fetch
 * contract: names[z], names[z-1], ... down to names[last] while they exist, then the wildcard
 * child of the deepest that exists (the closest encloser; none if that is names[last], or if
 * not even the apex exists), then the extras when z == req->extras_zone. last is 0, or the
 * index of the deepest name a backend knows to hold no name below it (the filesystem: names
 * whose labels are no path component). DLZ_OK, or the failure a read returned.
 */
int dlz_read_owners(const struct dlz_fetch_req *req, int z, int last, dlz_owner_reader *read,
		    void *ctx);
/*
 * The whole fetch of such a backend: dlz_find_zone from first; when a zone is found, it is
 * reported (req->names[z], also put in *zone unless zone is NULL, before the first read) and
 * its owners are read by dlz_read_owners down to last. DLZ_OK (also when no name is a zone),
 * or the failure a probe or a read returned (DLZ_ERROR also when out of memory).
 */
int dlz_fetch_zone_owners(const struct dlz_fetch_req *req, struct dlz_rowset *out,
			  unsigned first, int last, dlz_zone_probe *probe, dlz_owner_reader *read,
			  void *ctx, const char **zone);

/* Does key lie in zone (equal or below)? Both keys; the root "." contains everything. */
bool dlz_key_in_zone(const char *key, const char *zone);

/* Does key lie strictly below owner (in it, not it)? Both keys. */
bool dlz_key_below(const char *key, const char *owner);

/* Keys compared from their last byte back (bytes as unsigned char): the keys below an owner
 * all end in "." and the owner, so in this order they sort together, right after that suffix
 * itself; a binary search then finds them (the memory and bdbhpt drivers' below()). */
int dlz_key_cmp_from_end(const char *a, const char *b);

/* dlz_key_cmp_from_end over two `const char *` array elements, for qsort. */
int dlz_key_qsort_from_end(const void *a, const void *b);

/*
 * The record lines of the file-like stores (filesystem, Berkeley DB): "TYPE SP TTL SP rdata"
 * per line, lines separated by LF, an empty node value marks an empty non-terminal.
 */
struct dlz_record_line {
	const char *type;
	size_t type_len;
	uint32_t ttl;
	const char *rdata;
	size_t rdata_len;
};
/* Split one line (len bytes, no LF) into r; false if it is malformed. */
bool dlz_record_split(const char *line, size_t len, struct dlz_record_line *r);
/* Every record of one node value as rows of owner in zone (the fetch request's strings, which
 * outlive the rows; type and rdata are copied). DLZ_OK, DLZ_BAD_DATA on a malformed line
 * (logged) or DLZ_ERROR when out of memory. */
int dlz_rowset_add_node(struct dlz_rowset *out, const char *zone, const char *owner,
			 const char *value, size_t len);
/* Every record of one node value to cb, NUL-terminating in place: value[len] must be
 * writable. Returns DLZ_OK, DLZ_BAD_DATA (malformed, logged) or cb's non-zero return. */
int dlz_node_walk(const char *zone, const char *owner, char *value, size_t len,
		  dlz_node_cb *cb, void *ctx);
/* The next LF-separated line at *pos (before end), NUL-terminated in place; NULL at the end. */
char *dlz_next_line(char **pos, char *end);
/* Is line one of the LF-separated lines of list[0..len) (NUL-terminated in place)? */
bool dlz_lines_contain(char *list, size_t len, const char *line);

#endif /* DLZ_DRIVER_H */
