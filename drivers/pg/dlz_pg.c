/*
 * The PostgreSQL driver (libpq) over schemas/pg.sql.
 *
 * Every statement is prepared once per connection and run with bound parameters; a name
 * from a DNS query never becomes SQL text. One DNS query costs one statement (FETCH_SQL):
 * both of its parameters are text[] values sent in PostgreSQL's *binary* array format, which
 * is a length-prefixed copy of each key. Keys are full of characters a text array literal
 * would have to escape (`\`, `"`, `{`, `,`, ...), so the binary form is both the simplest
 * correct encoding (nothing to escape) and the cheapest for the server (array_recv copies,
 * array_in would parse and unescape). Results come back in binary format as well: text
 * columns are then the same bytes as in text format, the TTL is four bytes instead of digits
 * to parse, and rows are handed to the core straight from the PGresult with their lengths.
 *
 * Two accounts: the pool's connections (queries, transfers) and the change channel's log in
 * as user, and the core's update connection (connect_writer) as writer_user, so that a store
 * whose reading role may not write takes updates through one connection that may
 * (databases/postgresql.py: dlz_reader and dlz_writer). libpq finds each one's password in
 * its password file (PGPASSFILE), never in named.conf.
 *
 * A zone transfer reads the zone through a cursor in batches (BEGIN, DECLARE, FETCH ...,
 * COMMIT): memory stays bounded whatever the zone's size, the transfer sees one snapshot,
 * and each statement stays short enough for the session's statement_timeout.
 *
 * Never a hang: the connection is made with libpq's non-blocking calls under a deadline
 * (connect_timeout_ms), the session's statement_timeout lets the server end a statement that
 * runs away, and every statement is waited for with poll() and a deadline (query_timeout_ms:
 * a stopped or unreachable server cannot answer with an error). A deadline that passes is
 * reported to the core (dlz_timed_out), which then takes the store for down for a while
 * instead of reconnecting on every query. A failure of the server or
 * the connection is DLZ_ERROR: the core drops the connection, answers SERVFAIL and reconnects
 * on the next use. A row the driver cannot use (a NULL column, a column of another type) is
 * DLZ_BAD_DATA: SERVFAIL, and the connection stays.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "../common/dlz_driver.h"

/* Built-in type OIDs (src/include/catalog/pg_type.dat); fixed in every PostgreSQL release. */
#define INT4OID 23
#define TEXTOID 25
#define TEXTARRAYOID 1009

/*
 * Default of connect_timeout_ms. libpq's own connect_timeout counts whole seconds, treats 1 as
 * 2 and applies per address, so the connection is made with PQconnectStartParams and
 * PQconnectPoll under our own deadline instead (libpq ignores connect_timeout there). A
 * connection to the suite's servers takes a few ms (trust authentication, a backend forked);
 * a second leaves room for a loaded host and for named under Valgrind, and is paid once per
 * down_interval_ms when the server does not answer.
 */
#define DEFAULT_CONNECT_TIMEOUT_MS 1000
/*
 * Default of query_timeout_ms: the longest a worker waits for one statement. A fetch takes
 * 0.1 to 0.3 ms of server time; 500 ms answers SERVFAIL before a resolver's first retry
 * (about 800 ms in BIND) would, against a frozen server.
 */
#define DEFAULT_QUERY_TIMEOUT_MS 500
/* SQLSTATE query_canceled: what statement_timeout ends a statement with. */
#define SQLSTATE_QUERY_CANCELED "57014"
/*
 * Session settings, sent in the startup packet (no extra statement):
 *  - statement_timeout (query_timeout_ms, prepended at init): the server's limit on one
 *    statement, the same as our wait for it, so the server stops working on a statement we
 *    gave up on; every statement here takes milliseconds (a zone transfer is many short
 *    FETCHes);
 *  - plan_cache_mode: the prepared statements' generic plans at once. PostgreSQL would
 *    otherwise keep re-planning the fetch for its values (custom plans) whenever their
 *    estimated cost is not clearly above the generic plan's; measured on 3,000 zones, that
 *    is 0.08-0.14 ms of planning for 0.04 ms of execution, per DNS query. The generic plans
 *    are index lookups by key whatever the values (see the notes on plans in the schema);
 *  - jit: a plan over a large table may cross the JIT threshold, and compiling takes far
 *    longer than any of these statements runs;
 *  - enable_seqscan, enable_hashjoin, enable_mergejoin, enable_bitmapscan: every statement
 *    here finds a few rows by key, and the plan wanted is index scans joined by a nested
 *    loop. On a zones table of a few thousand rows or less, the planner takes a Seq Scan
 *    filtered by "name = ANY($1)" for cheaper than zones_name_key, but it underestimates
 *    that filter: at 1,000 zones the scan compared every zone with every suffix of the query
 *    name and was most of the fetch (EXPLAIN ANALYZE: 0.20 ms of 0.32 ms; with the index,
 *    0.015 ms); the hash join it then chose built and scanned a 1,024-bucket table per
 *    query, and the bitmap scan a TID bitmap for a handful of rows. With these off, the
 *    fetch is Nested Loop Left Join (Index Scan zones_name_key, Index Scan records_name_zone):
 *    measured with 1,000 zones, 62 to 49 us of server CPU per DNS query.
 */
#define SESSION_OPTIONS                                                                   \
	" -c plan_cache_mode=force_generic_plan -c jit=off"                               \
	" -c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off"          \
	" -c enable_bitmapscan=off"
/* Rows per FETCH of a zone transfer. */
#define AXFR_BATCH 2000
#define STRINGIFY(x) #x
#define TEXT_OF(x) STRINGIFY(x)

/* ---- statements ------------------------------------------------------------------------- */

/* One DNS query. $1: names[] (the candidate zones); $2: owners[] (Q, its ancestors and their
 * wildcard children). Each zone among $1 comes back at least once (r.* NULL when none of its
 * owners matched). */
#define FETCH_SQL                                                                     \
	"SELECT z.name, r.name, r.type, r.ttl, r.data"                                \
	" FROM zones z LEFT JOIN records r ON r.zone_id = z.id AND r.name = ANY($2)" \
	" WHERE z.name = ANY($1)"

/* allowzonexfr: no row, no zone; else whether client $2 is in zone $1's ACL. */
#define ALLOWXFR_SQL                                                                        \
	"SELECT EXISTS (SELECT 1 FROM xfr_clients x WHERE x.zone_id = z.id AND x.client = $2)" \
	" FROM zones z WHERE z.name = $1"

/* Zone transfer: every record of zone $1 in owner order (the subquery lets the planner read
 * records_zone_name in order, see the schema). ENT markers are not records. */
#define AXFR_DECLARE_SQL                                                         \
	"DECLARE dlz_axfr NO SCROLL CURSOR FOR"                                  \
	" SELECT r.name, r.type, r.ttl, r.data FROM records r"                   \
	" WHERE r.zone_id = (SELECT id FROM zones WHERE name = $1)"              \
	" AND r.type <> '" DLZ_ENT_TYPE "' ORDER BY r.name"
#define AXFR_FETCH_SQL "FETCH FORWARD " TEXT_OF(AXFR_BATCH) " FROM dlz_axfr"

/* Does zone $1 exist? Only asked when a transfer found no record at all. */
#define ZONE_SQL "SELECT 1 FROM zones WHERE name = $1"

/*
 * Updates (RFC 2136, through the core's update.c), inside one transaction per update message
 * (BEGIN ... COMMIT or ROLLBACK) on the update connection. Rows are found by zone name through
 * zones_name_key and by owner through records_name_zone, as the fetch does. Only the writer
 * role may run them (loaders/pg.py: INSERT and DELETE on records, nothing else, and only rows
 * of the update zones: row-level security), and only the update connection logs in as it.
 */
#define ADD_SQL                                                                \
	"INSERT INTO records (zone_id, name, type, ttl, data)"                  \
	" SELECT id, $2, $3, $4, $5 FROM zones WHERE name = $1"
#define DEL_SQL                                                                      \
	"DELETE FROM records WHERE zone_id = (SELECT id FROM zones WHERE name = $1)" \
	" AND name = $2 AND type = $3 AND data = $4"
/*
 * Names below owner O in zone $1: each is "<labels>.O", so its reversed key starts with
 * reverse(O) || '.'; $2 = reverse(O) || '.' and $3 = reverse(O) || '/' ('/' follows '.' in
 * bytes) bound that prefix as a range on records_rname (reverse(name)): O's subtree, a few
 * index pages whatever the zone's size. "zone_id + 0" keeps the planner off
 * records_zone_name, which its generic plan prefers for an average zone of a few rows and
 * which would read every row of a large one. A key whose label ends in an escaped dot
 * ("x\.O") falls in the range without being below O: the driver checks each name it gets.
 */
#define BELOW_SQL                                                                         \
	"SELECT name FROM records WHERE zone_id + 0 = (SELECT id FROM zones WHERE name = $1)" \
	" AND reverse(name) >= $2 COLLATE \"C\" AND reverse(name) < $3 COLLATE \"C\""         \
	" LIMIT " TEXT_OF(BELOW_LIMIT)
#define BELOW_LIMIT 64
/*
 * The first statement of every update: the update's zone locked until the transaction ends
 * (an advisory lock, which needs no privilege; keyed by LOCK_SPACE and the zone's id). Updates
 * run at READ COMMITTED and decide on what they read: which empty non-terminal markers to add
 * or to delete. Two nameds updating one zone at once would each decide on what the other has
 * not yet committed (one deleting the last name below b.Z and with it b.Z's marker, the other
 * adding c.b.Z because b.Z's marker is still there: b.Z lost, NXDOMAIN above a name that
 * exists). With the lock, the second update reads only after the first committed. A wait
 * counts against statement_timeout, like any statement's.
 */
#define LOCK_ZONE_SQL                                                        \
	"SELECT pg_advisory_xact_lock(" TEXT_OF(LOCK_SPACE) ", id) FROM zones" \
	" WHERE name = $1"
#define LOCK_SPACE 1685814132 /* "dlzt" */

struct pg_statement {
	const char *name;
	const char *sql;
	int nparams;
	Oid types[5];
};

enum {
	ST_FETCH,
	ST_ALLOWXFR,
	ST_ZONE,
	ST_BEGIN,
	ST_DECLARE,
	ST_FETCH_BATCH,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_ADD,
	ST_DEL,
	ST_BELOW,
	ST_LOCK_ZONE,
	ST_COUNT
};

static const struct pg_statement pg_statements[ST_COUNT] = {
	[ST_FETCH] = { "dlz_fetch", FETCH_SQL, 2, { TEXTARRAYOID, TEXTARRAYOID } },
	[ST_ALLOWXFR] = { "dlz_allowxfr", ALLOWXFR_SQL, 2, { TEXTOID, TEXTOID } },
	[ST_ZONE] = { "dlz_zone", ZONE_SQL, 1, { TEXTOID } },
	[ST_BEGIN] = { "dlz_begin", "BEGIN", 0, { 0 } },
	[ST_DECLARE] = { "dlz_declare", AXFR_DECLARE_SQL, 1, { TEXTOID } },
	[ST_FETCH_BATCH] = { "dlz_batch", AXFR_FETCH_SQL, 0, { 0 } },
	[ST_COMMIT] = { "dlz_commit", "COMMIT", 0, { 0 } },
	[ST_ROLLBACK] = { "dlz_rollback", "ROLLBACK", 0, { 0 } },
	[ST_ADD] = { "dlz_add", ADD_SQL, 5, { TEXTOID, TEXTOID, TEXTOID, INT4OID, TEXTOID } },
	[ST_DEL] = { "dlz_del", DEL_SQL, 4, { TEXTOID, TEXTOID, TEXTOID, TEXTOID } },
	[ST_BELOW] = { "dlz_below", BELOW_SQL, 3, { TEXTOID, TEXTOID, TEXTOID } },
	[ST_LOCK_ZONE] = { "dlz_lock_zone", LOCK_ZONE_SQL, 1, { TEXTOID } },
};

/* ---- state and connections -------------------------------------------------------------- */

/* Every text argument but writer_user is a conninfo key the store passes (loaders/pg.py:
 * PgLoader.dlz_args), handed to libpq as it is; writer_user replaces user on the update
 * connection; the two time-outs are the driver's own. */
#define WRITER_USER "writer_user"
static const struct dlz_arg_spec pg_args[] = {
	DLZ_TEXT("host", "libpq's host: a server name, an address or a socket directory"),
	DLZ_TEXT("port", "libpq's port (or the socket file's number)"),
	DLZ_TEXT("dbname", "libpq's dbname: the database holding the dlz tables"),
	DLZ_TEXT("user", "libpq's user (its password from libpq's password file: PGPASSFILE)"),
	DLZ_TEXT(WRITER_USER,
		 "with update_zones: the role the update connection, and no other, logs in as (its "
		 "password from PGPASSFILE too); none: user"),
	DLZ_INT("connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a connection may take, under the driver's own deadline"),
	DLZ_INT("query_timeout_ms", DEFAULT_QUERY_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a statement may take: the session's statement_timeout"),
	DLZ_ARGS_END,
};

#define MAX_PARAMS 16
/* application_name of the change channel's connection (and "dlz_pg" of the pool's). */
#define LISTENER_APPLICATION "dlz_pg_cache"

struct pg_state {
	const char *keys[MAX_PARAMS];
	const char *values[MAX_PARAMS];
	/* The change channel's connection: the same values but for its application_name. */
	const char *listener_values[MAX_PARAMS];
	/* The update connection's: the same values but for its user (writer_user). */
	const char *writer_values[MAX_PARAMS];
	char options[256]; /* the options conninfo value: statement_timeout, SESSION_OPTIONS */
	long connect_timeout_ms;
	long query_timeout_ms;
};

struct pg_connection {
	PGconn *pg;
	long query_timeout_ms;
	char *buf; /* the fetch's binary array parameters, reused from query to query */
	size_t cap;
	bool in_update;   /* between begin and commit or rollback */
	bool zone_locked; /* the update's zone is locked (LOCK_ZONE_SQL) */
};

static void
pg_log_error(const char *what, const PGconn *pg, const PGresult *res) {
	const char *msg = res != NULL ? PQresultErrorMessage(res) : PQerrorMessage(pg);
	size_t len = strlen(msg);

	while (len > 0 && (msg[len - 1] == '\n' || msg[len - 1] == ' ')) {
		len--;
	}
	/* The connection is gone, not one statement refused by the server. */
	if (PQstatus(pg) == CONNECTION_BAD) {
		dlz_connection_failed();
	}
	dlz_log_error_limited("%s: %.*s", what, (int)len, len > 0 ? msg : "unknown error");
}

/* Wait until libpq has a whole result (or the end of them) to give; false on timeout or a
 * broken connection. The deadline (timeout_ms) restarts whenever data arrives. */
static bool
pg_wait_result(PGconn *pg, const char *what, long timeout_ms) {
	long deadline = dlz_now_ms() + timeout_ms;

	while (PQisBusy(pg)) {
		struct pollfd pfd = { .fd = PQsocket(pg), .events = POLLIN };
		long left = deadline - dlz_now_ms();
		int rc;

		if (pfd.fd < 0) {
			pg_log_error(what, pg, NULL);
			return false;
		}
		rc = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		if (rc < 0 && errno == EINTR) {
			continue;
		}
		if (rc == 0) {
			dlz_timed_out();
			dlz_log_error_limited("%s: no answer from the server within %ld ms", what,
					      timeout_ms);
			return false;
		}
		if (rc < 0 || !PQconsumeInput(pg)) {
			pg_log_error(what, pg, NULL);
			return false;
		}
		deadline = dlz_now_ms() + timeout_ms;
	}
	return true;
}

/* Did the server end the statement of res for running past statement_timeout? */
static bool
pg_statement_timed_out(const PGresult *res) {
	const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return state != NULL && strcmp(state, SQLSTATE_QUERY_CANCELED) == 0;
}

/* The result of the statement just sent, with status want; NULL (logged) otherwise. Reads
 * up to the end of the statement's results, so the connection is ready for the next one. */
static PGresult *
pg_collect_result(PGconn *pg, const char *what, ExecStatusType want, long timeout_ms) {
	PGresult *first = NULL, *res;

	for (;;) {
		if (!pg_wait_result(pg, what, timeout_ms)) {
			PQclear(first);
			return NULL;
		}
		res = PQgetResult(pg);
		if (res == NULL) {
			break;
		}
		if (first == NULL) {
			first = res;
		} else {
			PQclear(res);
		}
	}
	if (first == NULL || PQresultStatus(first) != want) {
		if (pg_statement_timed_out(first)) {
			dlz_timed_out();
		}
		pg_log_error(what, pg, first);
		PQclear(first);
		return NULL;
	}
	return first;
}

/* Run a prepared statement with binary parameters and binary results. */
static PGresult *
pg_run_prepared(struct pg_connection *c, int st, const char *const *values, const int *lengths,
		ExecStatusType want) {
	static const int binary[5] = { 1, 1, 1, 1, 1 };
	const struct pg_statement *s = &pg_statements[st];

	if (!PQsendQueryPrepared(c->pg, s->name, s->nparams, values, lengths, binary, 1)) {
		pg_log_error(s->name, c->pg, NULL);
		return NULL;
	}
	return pg_collect_result(c->pg, s->name, want, c->query_timeout_ms);
}

/* A statement without a result set (BEGIN, COMMIT, DECLARE); false (logged) on failure. */
static bool
pg_run_command(struct pg_connection *c, int st, const char *const *values, const int *lengths) {
	PGresult *res = pg_run_prepared(c, st, values, lengths, PGRES_COMMAND_OK);

	PQclear(res);
	return res != NULL;
}

static bool
pg_prepare_all(PGconn *pg, long timeout_ms) {
	for (int i = 0; i < ST_COUNT; i++) {
		const struct pg_statement *s = &pg_statements[i];
		PGresult *res;

		if (!PQsendPrepare(pg, s->name, s->sql, s->nparams, s->types)) {
			pg_log_error(s->name, pg, NULL);
			return false;
		}
		res = pg_collect_result(pg, s->name, PGRES_COMMAND_OK, timeout_ms);
		if (res == NULL) {
			return false;
		}
		PQclear(res);
	}
	return true;
}

/* One conninfo key. A value NULL (an argument not given) is libpq's default, as if the key
 * were absent: every connection's values have the same keys, so the writer's user has its
 * place whether user is given or not. */
static bool
pg_state_add(struct pg_state *s, unsigned *n, const char *key, const char *value) {
	if (*n + 1 >= MAX_PARAMS) {
		return false;
	}
	s->keys[*n] = key;
	s->values[*n] = value;
	(*n)++;
	return true;
}

/* Another connection's values into out: the pool's, with key's replaced by value. */
static void
pg_values_but(const struct pg_state *s, const char *key, const char *value, const char **out) {
	for (unsigned i = 0; i < MAX_PARAMS; i++) {
		bool hit = s->keys[i] != NULL && strcmp(s->keys[i], key) == 0;

		out[i] = hit ? value : s->values[i];
	}
}

static int
pg_init(const struct dlz_args *args, void **state) {
	const char *writer = dlz_arg_text(args, WRITER_USER);
	struct pg_state *s;
	unsigned n = 0;
	bool ok = true;

	if (!PQisthreadsafe()) {
		dlz_log(ISC_LOG_ERROR, "this libpq is not thread-safe");
		return DLZ_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		return DLZ_ERROR;
	}
	s->connect_timeout_ms = dlz_arg_int(args, "connect_timeout_ms");
	s->query_timeout_ms = dlz_arg_int(args, "query_timeout_ms");
	snprintf(s->options, sizeof(s->options), "-c statement_timeout=%ld%s", s->query_timeout_ms,
		 SESSION_OPTIONS);
	/* Values go to libpq one by one (PQconnectStartParams): never pasted into a conninfo
	 * string, so no value can smuggle in another setting. */
	for (const struct dlz_arg_spec *arg = pg_args; arg->name != NULL; arg++) {
		if (arg->type == DLZ_ARG_TEXT && strcmp(arg->name, WRITER_USER) != 0) {
			ok = ok && pg_state_add(s, &n, arg->name, dlz_arg_text(args, arg->name));
		}
	}
	ok = ok && pg_state_add(s, &n, "options", s->options) &&
	     pg_state_add(s, &n, "client_encoding", "UTF8") &&
	     pg_state_add(s, &n, "application_name", "dlz_pg");
	if (!ok) {
		free(s);
		return DLZ_ERROR;
	}
	s->keys[n] = NULL;
	s->values[n] = NULL;
	/* pg_stat_activity tells the listener by its application_name, the writer by its user. */
	pg_values_but(s, "application_name", LISTENER_APPLICATION, s->listener_values);
	pg_values_but(s, "user", writer != NULL ? writer : dlz_arg_text(args, "user"),
		      s->writer_values);
	*state = s;
	return DLZ_OK;
}

static void
pg_fini(void *state) {
	free(state);
}

/* Drive PQconnectPoll until the connection is made or fails, or the deadline passes (then
 * reported as a time-out); true when connected. */
static bool
pg_connect_poll(PGconn *pg, long timeout_ms) {
	long deadline = dlz_now_ms() + timeout_ms;
	/* Before the first PQconnectPoll, wait as if it had asked for writing (libpq's docs). */
	PostgresPollingStatusType status =
		PQstatus(pg) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;

	while (status == PGRES_POLLING_READING || status == PGRES_POLLING_WRITING) {
		/* The socket may change from one call to the next (libpq tries each address). */
		struct pollfd pfd = { .fd = PQsocket(pg),
				      .events = status == PGRES_POLLING_READING ? POLLIN : POLLOUT };
		long left = deadline - dlz_now_ms();
		int rc = left > 0 ? poll(&pfd, 1, (int)left) : 0;

		if (rc < 0 && errno == EINTR) {
			continue;
		}
		if (rc == 0) {
			dlz_timed_out();
			dlz_log_error_limited("connect: no connection within %ld ms", timeout_ms);
			return false;
		}
		status = rc > 0 ? PQconnectPoll(pg) : PGRES_POLLING_FAILED;
	}
	if (status != PGRES_POLLING_OK) {
		pg_log_error("connect", pg, NULL);
		return false;
	}
	return true;
}

/* A connection with values (the pool's or the writer's), its statements prepared. */
static int
pg_connect_with(const struct pg_state *s, const char *const *values, void **conn) {
	struct pg_connection *c = calloc(1, sizeof(*c));

	if (c == NULL) {
		return DLZ_ERROR;
	}
	c->query_timeout_ms = s->query_timeout_ms;
	/* A host given by name is resolved here, blocking: the suite passes addresses and
	 * socket directories. */
	c->pg = PQconnectStartParams(s->keys, values, 0);
	if (c->pg == NULL || !pg_connect_poll(c->pg, s->connect_timeout_ms)) {
		PQfinish(c->pg);
		free(c);
		return DLZ_ERROR;
	}
	if (!pg_prepare_all(c->pg, c->query_timeout_ms)) {
		PQfinish(c->pg);
		free(c);
		return DLZ_ERROR;
	}
	*conn = c;
	return DLZ_OK;
}

static int
pg_connect(void *state, void **conn) {
	struct pg_state *s = state;

	return pg_connect_with(s, s->values, conn);
}

/* The core's update connection: as writer_user, the one connection that may write. */
static int
pg_connect_writer(void *state, void **conn) {
	struct pg_state *s = state;

	return pg_connect_with(s, s->writer_values, conn);
}

static void
pg_disconnect(void *state, void *conn) {
	struct pg_connection *c = conn;

	(void)state;
	PQfinish(c->pg);
	free(c->buf);
	free(c);
}

/* ---- fetch ------------------------------------------------------------------------------ */

static char *
pg_put_u32(char *p, uint32_t value) {
	uint32_t net = htonl(value);

	memcpy(p, &net, sizeof(net));
	return p + sizeof(net);
}

static size_t
pg_text_array_size(const char *const *items, unsigned n) {
	size_t size = 5 * 4; /* ndim, flags, element type, length and lower bound of the dim */

	for (unsigned i = 0; i < n; i++) {
		size += 4 + strlen(items[i]);
	}
	return size;
}

/* items as a one-dimensional text[] in array_send's format; returns the end. */
static char *
pg_put_text_array(char *p, const char *const *items, unsigned n) {
	p = pg_put_u32(p, 1);       /* dimensions */
	p = pg_put_u32(p, 0);       /* no NULL elements */
	p = pg_put_u32(p, TEXTOID); /* element type */
	p = pg_put_u32(p, n);       /* length of the dimension */
	p = pg_put_u32(p, 1);       /* its lower bound */
	for (unsigned i = 0; i < n; i++) {
		size_t len = strlen(items[i]);
		p = pg_put_u32(p, (uint32_t)len);
		memcpy(p, items[i], len);
		p += len;
	}
	return p;
}

static bool
pg_ttl_of(const PGresult *res, int row, int col, uint32_t *ttl) {
	uint32_t net;

	if (PQgetlength(res, row, col) != (int)sizeof(net)) {
		return false;
	}
	memcpy(&net, PQgetvalue(res, row, col), sizeof(net));
	*ttl = ntohl(net);
	return true;
}

/* Is any of the columns [first, first + n) of row NULL? */
static bool
pg_null_among(const PGresult *res, int row, int first, int n) {
	for (int col = first; col < first + n; col++) {
		if (PQgetisnull(res, row, col)) {
			return true;
		}
	}
	return false;
}

static int
pg_rows_to_rowset(const PGresult *res, struct dlz_rowset *out) {
	int nrows = PQntuples(res);

	if (PQnfields(res) != 5) {
		dlz_log_error_limited("fetch: %d columns instead of 5", PQnfields(res));
		return DLZ_BAD_DATA;
	}
	for (int i = 0; i < nrows; i++) {
		const char *zone = PQgetvalue(res, i, 0); /* NUL-terminated in binary format too */
		uint32_t ttl;

		if (PQgetisnull(res, i, 0)) {
			dlz_log_error_limited("fetch: a zone without a name");
			return DLZ_BAD_DATA;
		}
		/* Each row comes with its zone: reported once (the rowset ignores repeats). */
		if (!dlz_rowset_add_zone(out, zone)) {
			return DLZ_ERROR;
		}
		if (PQgetisnull(res, i, 1)) {
			continue; /* the zone, and none of its candidate owners */
		}
		if (pg_null_among(res, i, 2, 3) || !pg_ttl_of(res, i, 3, &ttl)) {
			dlz_log_error_limited("fetch: a record of %s with a NULL or non-integer column",
					      PQgetvalue(res, i, 1));
			return DLZ_BAD_DATA;
		}
		if (!dlz_rowset_add_row_n(out, zone, (size_t)PQgetlength(res, i, 0),
					  PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1),
					  PQgetvalue(res, i, 2), (size_t)PQgetlength(res, i, 2), ttl,
					  PQgetvalue(res, i, 4), (size_t)PQgetlength(res, i, 4))) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

static bool pg_lock_update_zone(struct pg_connection *c, const char *zone);

static int
pg_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct pg_connection *c = conn;
	size_t names_size = pg_text_array_size(req->names, req->nnames);
	size_t owners_size = pg_text_array_size(req->owners, req->nowners);
	const char *values[2];
	int lengths[2];
	PGresult *res;
	int rc;

	/* An update's reads come with its zone (update.c): locked before the first of them. */
	if (c->in_update && (req->zone_index < 0 ||
			     !pg_lock_update_zone(c, req->names[req->zone_index]))) {
		return DLZ_ERROR;
	}
	if (names_size + owners_size > (size_t)INT32_MAX ||
	    !dlz_grow((void **)&c->buf, &c->cap, names_size + owners_size, 1)) {
		return DLZ_ERROR;
	}
	pg_put_text_array(c->buf, req->names, req->nnames);
	pg_put_text_array(c->buf + names_size, req->owners, req->nowners);
	values[0] = c->buf;
	values[1] = c->buf + names_size;
	lengths[0] = (int)names_size;
	lengths[1] = (int)owners_size;
	res = pg_run_prepared(c, ST_FETCH, values, lengths, PGRES_TUPLES_OK);
	if (res == NULL) {
		return DLZ_ERROR;
	}
	rc = pg_rows_to_rowset(res, out);
	PQclear(res);
	return rc;
}

/* ---- zone transfer ---------------------------------------------------------------------- */

static int
pg_zone_exists(struct pg_connection *c, const char *zone) {
	const char *values[1] = { zone };
	int lengths[1] = { (int)strlen(zone) };
	PGresult *res = pg_run_prepared(c, ST_ZONE, values, lengths, PGRES_TUPLES_OK);
	int rc;

	if (res == NULL) {
		return DLZ_ERROR;
	}
	rc = PQntuples(res) > 0 ? DLZ_OK : DLZ_NOTFOUND;
	PQclear(res);
	return rc;
}

/* One batch of the cursor to cb; *count gets its number of rows. */
static int
pg_axfr_batch(struct pg_connection *c, dlz_node_cb *cb, void *ctx, int *count) {
	PGresult *res = pg_run_prepared(c, ST_FETCH_BATCH, NULL, NULL, PGRES_TUPLES_OK);
	int rc = DLZ_OK;

	if (res == NULL) {
		return DLZ_ERROR;
	}
	*count = PQntuples(res);
	if (PQnfields(res) != 4) {
		rc = DLZ_BAD_DATA;
	}
	for (int i = 0; i < *count && rc == DLZ_OK; i++) {
		uint32_t ttl;

		if (pg_null_among(res, i, 0, 4) || !pg_ttl_of(res, i, 2, &ttl)) {
			dlz_log_error_limited("allnodes: a record with a NULL or non-integer column");
			rc = DLZ_BAD_DATA;
			break;
		}
		rc = cb(ctx, PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), ttl,
			PQgetvalue(res, i, 3));
	}
	PQclear(res);
	return rc;
}

static int
pg_axfr_walk(struct pg_connection *c, const char *zone, dlz_node_cb *cb, void *ctx) {
	const char *values[1] = { zone };
	int lengths[1] = { (int)strlen(zone) };
	int count = AXFR_BATCH, total = 0, rc = DLZ_OK;

	if (!pg_run_command(c, ST_DECLARE, values, lengths)) {
		return DLZ_ERROR;
	}
	while (rc == DLZ_OK && count == AXFR_BATCH) {
		rc = pg_axfr_batch(c, cb, ctx, &count);
		total += count;
	}
	if (rc == DLZ_OK && total == 0) {
		rc = pg_zone_exists(c, zone); /* a zone without records, or no zone */
	}
	return rc;
}

static int
pg_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct pg_connection *c = conn;
	int rc;

	if (!pg_run_command(c, ST_BEGIN, NULL, NULL)) {
		return DLZ_ERROR;
	}
	rc = pg_axfr_walk(c, zone, cb, ctx);
	if (rc == DLZ_ERROR) {
		return DLZ_ERROR; /* the core drops the connection, and the transaction with it */
	}
	/* Ends the transaction and closes the cursor, also when cb stopped the walk. */
	if (!pg_run_command(c, ST_COMMIT, NULL, NULL)) {
		return DLZ_ERROR;
	}
	return rc;
}

static int
pg_allowxfr(void *conn, const char *zone, const char *client) {
	struct pg_connection *c = conn;
	const char *values[2] = { zone, client };
	int lengths[2] = { (int)strlen(zone), (int)strlen(client) };
	PGresult *res = pg_run_prepared(c, ST_ALLOWXFR, values, lengths, PGRES_TUPLES_OK);
	int rc;

	if (res == NULL) {
		return DLZ_ERROR;
	}
	if (PQntuples(res) == 0) {
		rc = DLZ_NOTFOUND;
	} else if (PQgetlength(res, 0, 0) == 1) {
		rc = PQgetvalue(res, 0, 0)[0] != 0 ? DLZ_OK : DLZ_DENIED; /* binary bool */
	} else {
		rc = DLZ_BAD_DATA;
	}
	PQclear(res);
	return rc;
}

/* ---- updates ----------------------------------------------------------------------------- */

static int
pg_begin(void *conn) {
	struct pg_connection *c = conn;

	if (!pg_run_command(c, ST_BEGIN, NULL, NULL)) {
		return DLZ_ERROR;
	}
	c->in_update = true;
	c->zone_locked = false;
	return DLZ_OK;
}

/* The update's zone locked (LOCK_ZONE_SQL), once per update; false (logged) on failure. */
static bool
pg_lock_update_zone(struct pg_connection *c, const char *zone) {
	const char *values[1] = { zone };
	int lengths[1] = { (int)strlen(zone) };
	PGresult *res;

	if (c->zone_locked) {
		return true;
	}
	res = pg_run_prepared(c, ST_LOCK_ZONE, values, lengths, PGRES_TUPLES_OK);
	c->zone_locked = res != NULL;
	PQclear(res);
	return c->zone_locked;
}

/* Ends the update with statement st (ST_COMMIT or ST_ROLLBACK). */
static int
pg_end_update(struct pg_connection *c, int st) {
	c->in_update = false;
	return pg_run_command(c, st, NULL, NULL) ? DLZ_OK : DLZ_ERROR;
}

static int
pg_commit(void *conn) {
	return pg_end_update(conn, ST_COMMIT);
}

static int
pg_rollback(void *conn) {
	return pg_end_update(conn, ST_ROLLBACK);
}

/* Parameters in binary: text is its bytes; an int4 its four bytes in network order. */
static int
pg_add(void *conn, const char *zone, const char *owner, const char *type, uint32_t ttl,
       const char *rdata) {
	char ttl_net[4];
	const char *values[5] = { zone, owner, type, ttl_net, rdata };
	int lengths[5] = { (int)strlen(zone), (int)strlen(owner), (int)strlen(type), 4,
			   (int)strlen(rdata) };
	PGresult *res;
	int rc;

	if (ttl > INT32_MAX) {
		return DLZ_ERROR; /* RFC 2181: a TTL is at most 2^31 - 1; named keeps to it */
	}
	if (!pg_lock_update_zone(conn, zone)) {
		return DLZ_ERROR;
	}
	pg_put_u32(ttl_net, ttl);
	res = pg_run_prepared(conn, ST_ADD, values, lengths, PGRES_COMMAND_OK);
	if (res == NULL) {
		return DLZ_ERROR;
	}
	/* One row, or none when the zone is gone: then the update cannot be made. */
	rc = strcmp(PQcmdTuples(res), "1") == 0 ? DLZ_OK : DLZ_ERROR;
	if (rc != DLZ_OK) {
		dlz_log_error_limited("update: zone %s is not in the store", zone);
	}
	PQclear(res);
	return rc;
}

static int
pg_del(void *conn, const char *zone, const char *owner, const char *type, const char *rdata) {
	const char *values[4] = { zone, owner, type, rdata };
	int lengths[4] = { (int)strlen(zone), (int)strlen(owner), (int)strlen(type),
			   (int)strlen(rdata) };
	PGresult *res;

	if (!pg_lock_update_zone(conn, zone)) {
		return DLZ_ERROR;
	}
	res = pg_run_prepared(conn, ST_DEL, values, lengths, PGRES_COMMAND_OK);

	PQclear(res);
	return res != NULL ? DLZ_OK : DLZ_ERROR;
}

/* text reversed into out (len bytes, then suffix and a NUL). */
static void
pg_reversed(const char *text, size_t len, char suffix, char *out) {
	for (size_t i = 0; i < len; i++) {
		out[i] = text[len - 1 - i];
	}
	out[len] = suffix;
	out[len + 1] = '\0';
}

static int
pg_below(void *conn, const char *zone, const char *owner) {
	size_t len = strlen(owner);
	char low[DLZ_KEY_MAX + 2], high[DLZ_KEY_MAX + 2];
	const char *values[3] = { zone, low, high };
	int lengths[3] = { (int)strlen(zone), (int)len + 1, (int)len + 1 };
	PGresult *res;
	int rc = 0;

	if (len >= DLZ_KEY_MAX || !pg_lock_update_zone(conn, zone)) {
		return DLZ_ERROR;
	}
	pg_reversed(owner, len, '.', low);
	pg_reversed(owner, len, '/', high);
	res = pg_run_prepared(conn, ST_BELOW, values, lengths, PGRES_TUPLES_OK);
	if (res == NULL) {
		return DLZ_ERROR;
	}
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		const char *name = PQgetvalue(res, i, 0);
		rc = dlz_key_below(name, owner) ? 1 : 0;
	}
	/* A full batch of false hits (labels ending in escaped dots) is taken for a name below:
	 * a marker too many, never a name lost. */
	if (rc == 0 && PQntuples(res) == BELOW_LIMIT) {
		rc = 1;
	}
	PQclear(res);
	return rc;
}

/* ---- the change channel (the core's cache: drivers/common/cache.c) ------------------------- */

/*
 * The store's triggers (schemas/pg_notify.sql) send NOTIFY dlz_cache after every change,
 * with the payload "ZONE<TAB>OWNER" for a records row, "ZONE" for a zones row (a zone added,
 * removed or replaced whole: everything in it) and "" for a TRUNCATE (everything).
 *
 * The listener is a connection of the driver's own (application_name dlz_pg_cache) that
 * LISTENs, and every bound/4 sends itself NOTIFY dlz_cache_sync with a counter.
 * PostgreSQL delivers the notifications of every channel in the order their transactions
 * committed, so when its own counter comes back, every change committed before it sent it
 * has been reported: the channel is caught up as of that send (dlz_channel_synced). A
 * heartbeat that is not back within bound/2 takes the channel down (a frozen server or a
 * cut link shows no error), so a caught-up instant is never more than 3/4 of the bound old
 * while the channel is up; a lost connection takes it down at once. It reconnects every
 * bound/2 until it is up again.
 */
#define CHANGE_CHANNEL "dlz_cache"
#define SYNC_CHANNEL "dlz_cache_sync"

struct pg_listener {
	PGconn *pg;
	struct dlz_channel *ch;
	long interval_ms; /* from one heartbeat's return to the next one's send */
	long patience_ms; /* for a heartbeat to come back */
	int pid;          /* the listener's backend: its own heartbeats come from it */
	unsigned long sent; /* the counter of the last heartbeat sent */
	long sent_ms;
	long next_ms;   /* when the next heartbeat goes */
	bool waiting;   /* a heartbeat is on its way */
	bool busy;      /* the NOTIFY statement's result is not read yet */
};

/* libpq's last error on pg, one line, into buf. */
static const char *
pg_error_text(const PGconn *pg, char *buf, size_t size) {
	size_t len;

	snprintf(buf, size, "%s", pg != NULL ? PQerrorMessage(pg) : "out of memory");
	len = strlen(buf);
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' ')) {
		buf[--len] = '\0';
	}
	return len > 0 ? buf : "unknown error";
}

static bool
pg_listen_to(PGconn *pg, const char *sql, long timeout_ms) {
	PGresult *res;

	if (!PQsendQuery(pg, sql)) {
		return false;
	}
	res = pg_collect_result(pg, "listen", PGRES_COMMAND_OK, timeout_ms);
	PQclear(res);
	return res != NULL;
}

/* A new listener connection, listening; NULL (the channel then down, saying why) if not. */
static PGconn *
pg_listener_connect(struct pg_state *s, struct dlz_channel *ch) {
	PGconn *pg = PQconnectStartParams(s->keys, s->listener_values, 0);
	char why[256];

	if (pg == NULL || !pg_connect_poll(pg, s->connect_timeout_ms) ||
	    !pg_listen_to(pg, "LISTEN " CHANGE_CHANNEL, s->query_timeout_ms) ||
	    !pg_listen_to(pg, "LISTEN " SYNC_CHANNEL, s->query_timeout_ms)) {
		dlz_channel_down(ch, "cannot listen to PostgreSQL: %s",
				 pg_error_text(pg, why, sizeof(why)));
		PQfinish(pg);
		return NULL;
	}
	return pg;
}

/* A change's payload to the cache: "ZONE<TAB>OWNER", "ZONE" or "". */
static void
pg_report_change(struct dlz_channel *ch, const char *payload) {
	char buf[2 * DLZ_KEY_MAX + 2];
	size_t len = strlen(payload);
	char *tab;

	if (len >= sizeof(buf)) {
		dlz_channel_changed(ch, NULL, NULL); /* no trigger sends one: everything, to be safe */
		return;
	}
	memcpy(buf, payload, len + 1);
	tab = strchr(buf, '\t');
	if (tab != NULL) {
		*tab = '\0';
	}
	dlz_channel_changed(ch, buf, tab != NULL ? tab + 1 : NULL);
}

static void
pg_notified(struct pg_listener *l, const PGnotify *n) {
	if (strcmp(n->relname, CHANGE_CHANNEL) == 0) {
		pg_report_change(l->ch, n->extra);
	} else if (strcmp(n->relname, SYNC_CHANNEL) == 0 && n->be_pid == l->pid && l->waiting &&
		   strtoul(n->extra, NULL, 10) == l->sent) {
		dlz_channel_synced(l->ch, l->sent_ms);
		l->waiting = false;
		l->next_ms = l->sent_ms + l->interval_ms;
	}
}

static bool
pg_send_heartbeat(struct pg_listener *l, long now) {
	char sql[64], why[256];

	snprintf(sql, sizeof(sql), "NOTIFY " SYNC_CHANNEL ", '%lu'", l->sent + 1);
	if (!PQsendQuery(l->pg, sql)) {
		dlz_channel_down(l->ch, "PostgreSQL's connection failed: %s",
				 pg_error_text(l->pg, why, sizeof(why)));
		return false;
	}
	l->sent++;
	l->sent_ms = now;
	l->waiting = l->busy = true;
	return true;
}

/* What arrived: the heartbeat statement's result, notifications. False: the channel went
 * down. */
static bool
pg_listener_read(struct pg_listener *l) {
	char why[256];
	PGnotify *n;

	if (!PQconsumeInput(l->pg)) {
		dlz_channel_down(l->ch, "PostgreSQL's connection failed: %s",
				 pg_error_text(l->pg, why, sizeof(why)));
		return false;
	}
	while (l->busy && !PQisBusy(l->pg)) {
		PGresult *res = PQgetResult(l->pg);
		bool failed = res != NULL && PQresultStatus(res) != PGRES_COMMAND_OK;

		l->busy = res != NULL;
		PQclear(res);
		if (failed) {
			dlz_channel_down(l->ch, "PostgreSQL refused the heartbeat: %s",
					 pg_error_text(l->pg, why, sizeof(why)));
			return false;
		}
	}
	while ((n = PQnotifies(l->pg)) != NULL) {
		pg_notified(l, n);
		PQfreemem(n);
	}
	return true;
}

/* Serve the channel on a listening connection until it fails (down) or the driver stops. */
static void
pg_listen(struct pg_listener *l) {
	l->pid = PQbackendPID(l->pg);
	l->waiting = l->busy = false;
	l->next_ms = dlz_now_ms();
	dlz_channel_up(l->ch);
	dlz_log(ISC_LOG_INFO, "cache: listening to PostgreSQL's notifications (backend %d)",
		l->pid);
	for (;;) {
		long now = dlz_now_ms(), wait;
		int rc;

		if (l->waiting && now - l->sent_ms > l->patience_ms) {
			dlz_channel_down(l->ch, "no heartbeat back from PostgreSQL within %ld ms",
					 l->patience_ms);
			return;
		}
		if (!l->waiting && !l->busy && now >= l->next_ms && !pg_send_heartbeat(l, now)) {
			return;
		}
		wait = l->waiting ? l->sent_ms + l->patience_ms - now : l->next_ms - now;
		rc = dlz_channel_wait(l->ch, PQsocket(l->pg), POLLIN, wait > 1 ? wait : 1);
		if (rc < 0 || (rc > 0 && !pg_listener_read(l))) {
			return;
		}
	}
}

static void
pg_watch(void *state, struct dlz_channel *ch) {
	long bound = dlz_channel_bound_ms(ch);
	struct pg_listener l = { .ch = ch, .interval_ms = bound / 4, .patience_ms = bound / 2 };

	do {
		l.pg = pg_listener_connect(state, ch);
		if (l.pg != NULL) {
			pg_listen(&l);
			PQfinish(l.pg);
		}
	} while (dlz_channel_wait(ch, -1, 0, bound / 2) == 0);
}

const struct dlz_backend dlz_backend = {
	.name = "pg",
	.thread_safe = true,
	.args = pg_args,
	.init = pg_init,
	.fini = pg_fini,
	.connect = pg_connect,
	.disconnect = pg_disconnect,
	.connect_writer = pg_connect_writer,
	.fetch = pg_fetch,
	.allnodes = pg_allnodes,
	.allowxfr = pg_allowxfr,
	.begin = pg_begin,
	.add = pg_add,
	.del = pg_del,
	.below = pg_below,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.watch = pg_watch,
};
