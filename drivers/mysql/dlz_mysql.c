/*
 * The MariaDB/MySQL driver: schemas/mysql.sql read through the libmysqlclient API (on Debian
 * the MariaDB Connector/C implements it).
 *
 * Every statement is a server-side prepared statement with bound parameters, prepared on
 * first use on each connection (a new connection after a failure prepares them again); a
 * query name only ever travels as a parameter value. One DNS query is one execution of the
 * fetch statement (schemas/mysql.sql, statement 1): zones joined with records on the
 * candidate owner names. A prepared statement has a fixed number of placeholders, so there
 * is one fetch statement per size class: zone places for up to 4, 8, 16, 32 or 128 names,
 * owner places for up to 8, 16, 32, 64, 128 or 320 owners (a query name of k labels has
 * 2k - 1 candidate owners, plus the extras the core asks for). A query takes the smallest
 * class that fits and binds '' (never a key: the root's key is ".") to the places it does
 * not need. Almost every name has at most 4 labels and at most 16 owners with the extras, so
 * a connection usually prepares two or three statements.
 *
 * Result rows are read unbuffered straight into buffers bound once per connection; a value
 * longer than its buffer (MYSQL_DATA_TRUNCATED: a long TXT rdata) grows the buffer and that
 * column is fetched again, so the connection's buffers end up as large as its largest row.
 *
 * Connections run in autocommit mode (the server's default; nothing is sent to set it), so
 * each statement reads the latest committed data and costs no BEGIN/COMMIT round trip. No
 * automatic reconnect (MYSQL_OPT_RECONNECT stays off, its default): a lost connection fails
 * the call, the core drops it and connects anew, and the new connection re-prepares.
 */
#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/dlz_driver.h"

/*
 * Time-outs: a dead or stuck server costs a named worker at most these per call.
 *
 * connect_timeout_ms (default 1000): MYSQL_OPT_CONNECT_TIMEOUT counts whole seconds, so it is
 * rounded up to one; a connection to the suite's servers takes a few ms.
 *
 * query_timeout_ms (default 500): the server ends a statement that runs longer
 * (max_statement_time, in seconds with microseconds, MariaDB 10.1 and later; a zone transfer
 * excepted, see XFR_SQL) with ER_STATEMENT_TIMEOUT; the client waits for the server at most
 * query_timeout_ms rounded up to whole seconds (MYSQL_OPT_READ_TIMEOUT and _WRITE_TIMEOUT
 * count whole seconds; MariaDB Connector/C waits once, it does not retry a read as Oracle's
 * client does), so a frozen server costs a second, and a slow statement ends with the
 * server's error first. A fetch takes 0.1 to 0.2 ms of server time; 500 ms answers SERVFAIL
 * before a resolver's first retry (about 800 ms in BIND).
 */
#define DEFAULT_CONNECT_TIMEOUT_MS 1000
#define DEFAULT_QUERY_TIMEOUT_MS 500
/* The coarse clock's resolution (a few ms) and scheduling, when a read time-out is told from
 * a lost connection by the time a statement took. */
#define TIMEOUT_SLACK_MS 50

/*
 * Session settings, sent once per connection (MYSQL_INIT_COMMAND). MariaDB optimizes a
 * prepared statement again on every execution, and for the fetch (two tables, IN lists on
 * unique keys, FORCE INDEX) most of what its default optimizer does per execution decides
 * nothing: it reads column statistics and estimates condition selectivity
 * (optimizer_use_condition_selectivity 4, use_stat_tables), dives into the index once per IN
 * value to count rows (eq_range_index_dive_limit) and sets up a join buffer for one or two
 * zone rows (join_cache_level). Measured with 1,000 zones: 129 to 110 us of server CPU per
 * DNS query; the plan stays the same (ranges on zones_name and on records' PRIMARY).
 */
#define SESSION_SETTINGS                                                                    \
	"SET SESSION optimizer_use_condition_selectivity = 1, use_stat_tables = 'NEVER',"  \
	" eq_range_index_dive_limit = 1, join_cache_level = 0, max_statement_time = %.3f"

/* Placeholder classes of the fetch statement: zone places (names) and owner places. */
static const unsigned my_zone_classes[] = { 4, 8, 16, 32, DLZ_MAX_LABELS };
static const unsigned my_owner_classes[] = { 8, 16, 32, 64, 128, 320 };
#define NZONE_CLASSES (sizeof(my_zone_classes) / sizeof(my_zone_classes[0]))
#define NOWNER_CLASSES (sizeof(my_owner_classes) / sizeof(my_owner_classes[0]))
#define NCLASSES (NZONE_CLASSES * NOWNER_CLASSES)
#define MAX_OWNERS 320
#define MAX_PARAMS (DLZ_MAX_LABELS + MAX_OWNERS)
_Static_assert(2 * DLZ_MAX_LABELS - 1 + DLZ_MAX_EXTRAS <= MAX_OWNERS,
	       "the largest owner class holds every owner a fetch can have");

/* Initial buffer sizes; keys are at most 1,100 bytes (VARBINARY(1100)), so only rdata can
 * outgrow its buffer in practice. */
#define KEY_BUF 1104
#define TYPE_BUF 32
#define DATA_BUF 2048

/* The flag type MYSQL_BIND points to: my_bool in Connector/C, bool in MySQL 8's client. */
typedef __typeof__(*((MYSQL_BIND *)NULL)->is_null) my_bind_flag;

/* Every record of a zone by owner (schemas/mysql.sql, statement 2): ref on records_zone,
 * whose entries are in (zone_id, name) order, so no sort. No row: no such zone (a zone in the
 * store has its SOA at least).
 *
 * Without the session's max_statement_time: a transfer is one statement, read unbuffered as
 * named takes the records, so it lasts as long as the zone takes named to consume, seconds for
 * a large one, and a limit meant for one query's rows would end every transfer of a zone past
 * some size. Each read still has to bring the next rows within the read time-out
 * (MYSQL_OPT_READ_TIMEOUT), so a server that stops sending is still given up on. */
static const char XFR_SQL[] =
	"SET STATEMENT max_statement_time = 0 FOR"
	" SELECT r.name, r.type, r.ttl, r.data FROM records r"
	" WHERE r.zone_id = (SELECT id FROM zones WHERE name = ?) AND r.type <> 'ENT'"
	" ORDER BY r.name";

/* One row: 1 if the client may transfer the zone, else 0; no row: no such zone. */
static const char ACL_SQL[] =
	"SELECT x.client IS NOT NULL"
	" FROM zones z LEFT JOIN xfr_clients x ON x.zone_id = z.id AND x.client = ?"
	" WHERE z.name = ?";

/* The result columns the fetch statement returns; zone transfer returns COL_OWNER on. */
enum { COL_ZONE, COL_OWNER, COL_TYPE, COL_TTL, COL_DATA, NCOLS };

struct my_settings {
	const char *host;
	const char *socket;
	const char *user;
	const char *password;
	/* The account updates write as (see "writing"); NULL: the store takes no updates. */
	const char *writer_user;
	const char *writer_password;
	/* What password_file= and writer_password_file= name, read at init (the two above
	 * point here then): passwords kept out of named.conf and named's environment. */
	char *password_read;
	char *writer_password_read;
	/* tls_ca=<file>: every connection demands TLS and verifies the server's certificate,
	 * host name included, against this CA (a lent server's); NULL: the client library's
	 * default (no TLS unless the server demands it, nothing verified). */
	const char *tls_ca;
	const char *database;
	unsigned port;
	unsigned connect_timeout_s;
	unsigned io_timeout_s;
	long poll_ms; /* the change channel's: between two reads of the change log */
	char session_settings[sizeof(SESSION_SETTINGS) + 16]; /* with max_statement_time */
	char *fetch_sql[NCLASSES];
};

struct my_stmt {
	MYSQL_STMT *handle;
	unsigned bound_gen; /* the conn's buffer generation its result is bound to */
};

struct my_conn {
	const struct my_settings *settings;
	MYSQL *db;
	struct my_stmt fetch[NCLASSES];
	struct my_stmt xfr;
	struct my_stmt acl;
	/* Writing (a writer connection's only): its statements, the update's zone. */
	struct my_stmt zone_id;
	struct my_stmt insert;
	struct my_stmt delete;
	struct my_stmt below;
	uint32_t int_params[2];
	MYSQL_BIND id_col;
	uint32_t id;
	my_bind_flag id_null;
	char upd_zone[DLZ_KEY_MAX];
	uint32_t upd_zone_id;
	/* A reader connection's writer, opened at its first update and kept; in_update: between
	 * begin and commit or rollback, when fetch reads through it. */
	struct my_conn *writer;
	bool in_update;
	MYSQL_BIND params[MAX_PARAMS];
	unsigned long param_lens[MAX_PARAMS];
	/* Result buffers shared by the fetch and transfer statements. */
	MYSQL_BIND cols[NCOLS];
	char *bufs[NCOLS];
	size_t caps[NCOLS];
	unsigned long lens[NCOLS];
	my_bind_flag nulls[NCOLS];
	my_bind_flag errors[NCOLS];
	uint32_t ttl;
	unsigned gen; /* changes whenever a buffer moves: statements bound earlier rebind */
	long started_ms; /* when the statement in progress was sent */
	MYSQL_BIND acl_col;
	int32_t acl_allowed; /* MYSQL_TYPE_LONG: 32 bits */
	my_bind_flag acl_null;
};

/* ---- the client library: once per process, and per thread ------------------------------- */

/*
 * libmysqlclient asks every thread that uses it to call mysql_thread_init first and
 * mysql_thread_end before it exits. named's worker threads are not ours, so a thread attaches
 * on its first call into this driver and a thread-specific key's destructor detaches it.
 * (MariaDB Connector/C 3.x keeps no per-thread state: both are no-ops there, and this costs
 * one thread-local read per call.) The key lives while any instance does: deleting it before
 * the library can be unloaded means no destructor of ours runs after that.
 */
static pthread_mutex_t my_lib_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned my_lib_users;
static atomic_uint my_lib_generation;
static pthread_key_t my_thread_end_key;
static __thread unsigned my_thread_generation;

static void
my_thread_detach(void *unused) {
	(void)unused;
	mysql_thread_end();
}

static bool
my_library_acquire(void) {
	bool ok = true;

	pthread_mutex_lock(&my_lib_lock);
	if (my_lib_users == 0) {
		if (mysql_library_init(0, NULL, NULL) != 0) {
			ok = false;
		} else if (pthread_key_create(&my_thread_end_key, my_thread_detach) != 0) {
			mysql_library_end();
			ok = false;
		} else {
			atomic_fetch_add(&my_lib_generation, 1);
		}
	}
	if (ok) {
		my_lib_users++;
	}
	pthread_mutex_unlock(&my_lib_lock);
	return ok;
}

static void
my_library_release(void) {
	pthread_mutex_lock(&my_lib_lock);
	if (--my_lib_users == 0) {
		pthread_key_delete(my_thread_end_key);
		mysql_library_end();
	}
	pthread_mutex_unlock(&my_lib_lock);
}

static bool
my_thread_attach(void) {
	unsigned gen = atomic_load_explicit(&my_lib_generation, memory_order_relaxed);

	if (my_thread_generation == gen) {
		return true;
	}
	if (mysql_thread_init() != 0) {
		dlz_log_error_limited("mysql_thread_init failed");
		return false;
	}
	pthread_setspecific(my_thread_end_key, &my_thread_generation);
	my_thread_generation = gen;
	return true;
}

/* ---- settings ------------------------------------------------------------------------- */

/* "?, ?, ?" with n places onto text at *pos. */
static void
my_append_places(char *text, size_t *pos, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		if (i > 0) {
			memcpy(text + *pos, ", ", 2);
			*pos += 2;
		}
		text[(*pos)++] = '?';
	}
}

/* schemas/mysql.sql statement 1 for k names and o owners. */
static char *
my_fetch_sql(unsigned k, unsigned o) {
	static const char head[] =
		"SELECT z.name, r.name, r.type, r.ttl, r.data"
		" FROM zones z LEFT JOIN records r FORCE INDEX (PRIMARY)"
		" ON r.zone_id = z.id AND r.name IN (";
	static const char middle[] = ") WHERE z.name IN (";
	char *text = malloc(sizeof(head) + sizeof(middle) + 3 * (k + o) + 2);
	size_t pos;

	if (text == NULL) {
		return NULL;
	}
	pos = (size_t)sprintf(text, "%s", head);
	my_append_places(text, &pos, o);
	pos += (size_t)sprintf(text + pos, "%s", middle);
	my_append_places(text, &pos, k);
	sprintf(text + pos, ")");
	return text;
}

/* Whole seconds, rounded up, of a time-out in ms (the client library's unit). */
static unsigned
my_seconds_of(long ms) {
	return (unsigned)((ms + 999) / 1000);
}

static int
my_init(const struct dlz_args *args, void **state) {
	struct my_settings *s;
	long query_timeout_ms = dlz_arg_int(args, "query_timeout_ms");

	/* dlz_version already told named we are thread-safe: refuse a client that is not. */
	if (!mysql_thread_safe()) {
		dlz_log(ISC_LOG_ERROR, "the client library %s is not thread-safe",
			mysql_get_client_info());
		return DLZ_ERROR;
	}
	if (!my_library_acquire()) {
		dlz_log(ISC_LOG_ERROR, "mysql_library_init failed");
		return DLZ_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		my_library_release();
		return DLZ_ERROR;
	}
	*state = s; /* from here on the core calls fini, also on failure */
	s->host = dlz_arg_text(args, "host");
	s->socket = dlz_arg_text(args, "socket");
	s->user = dlz_arg_text(args, "user");
	s->password = dlz_arg_text(args, "password");
	s->database = dlz_arg_text(args, "database");
	s->writer_user = dlz_arg_text(args, "writer_user");
	s->tls_ca = dlz_arg_text(args, "tls_ca");
	if (!dlz_arg_secret_file(args, "password_file", &s->password_read) ||
	    !dlz_arg_secret_file(args, "writer_password_file", &s->writer_password_read)) {
		return DLZ_ERROR;
	}
	if (s->password_read != NULL) {
		s->password = s->password_read;
	}
	s->writer_password = s->writer_password_read;
	s->port = (unsigned)dlz_arg_int(args, "port");
	s->connect_timeout_s = my_seconds_of(dlz_arg_int(args, "connect_timeout_ms"));
	s->io_timeout_s = my_seconds_of(query_timeout_ms);
	s->poll_ms = dlz_arg_int(args, "cache_poll_ms");
	/* Half the bound at most: a read of the log that is late once still leaves the cache
	 * caught up within it. */
	if (dlz_arg_yes(args, "cache") && 2 * s->poll_ms > dlz_arg_int(args, "cache_bound_ms")) {
		dlz_log(ISC_LOG_ERROR, "cache_poll_ms is more than half of cache_bound_ms");
		return DLZ_ERROR;
	}
	snprintf(s->session_settings, sizeof(s->session_settings), SESSION_SETTINGS,
		 (double)query_timeout_ms / 1000);
	for (unsigned i = 0; i < NCLASSES; i++) {
		s->fetch_sql[i] = my_fetch_sql(my_zone_classes[i / NOWNER_CLASSES],
					       my_owner_classes[i % NOWNER_CLASSES]);
		if (s->fetch_sql[i] == NULL) {
			return DLZ_ERROR;
		}
	}
	dlz_log(ISC_LOG_INFO, "client library %s", mysql_get_client_info());
	return DLZ_OK;
}

static void
my_fini(void *state) {
	struct my_settings *s = state;

	for (unsigned i = 0; i < NCLASSES; i++) {
		free(s->fetch_sql[i]);
	}
	dlz_secret_free(s->password_read);
	dlz_secret_free(s->writer_password_read);
	free(s);
	my_library_release();
}

/* ---- connections ------------------------------------------------------------------------- */

static void
my_close_stmt(struct my_stmt *st) {
	if (st->handle != NULL) {
		mysql_stmt_close(st->handle);
		st->handle = NULL;
	}
}

static void
my_conn_free(struct my_conn *c) {
	if (c->writer != NULL) {
		my_conn_free(c->writer); /* closing it ends (rolls back) an open transaction */
	}
	for (unsigned i = 0; i < NCLASSES; i++) {
		my_close_stmt(&c->fetch[i]);
	}
	my_close_stmt(&c->xfr);
	my_close_stmt(&c->acl);
	my_close_stmt(&c->zone_id);
	my_close_stmt(&c->insert);
	my_close_stmt(&c->delete);
	my_close_stmt(&c->below);
	if (c->db != NULL) {
		mysql_close(c->db);
	}
	for (unsigned i = 0; i < NCOLS; i++) {
		free(c->bufs[i]);
	}
	free(c);
}

static void
my_bind_string_col(struct my_conn *c, unsigned col, size_t cap) {
	MYSQL_BIND *b = &c->cols[col];

	c->caps[col] = cap;
	b->buffer_type = MYSQL_TYPE_BLOB;
	b->buffer = c->bufs[col];
	b->buffer_length = cap - 1; /* room for the NUL the transfer callback needs */
	b->length = &c->lens[col];
	b->is_null = &c->nulls[col];
	b->error = &c->errors[col];
}

/* The result buffers, allocated once for the connection's life. */
static bool
my_conn_buffers(struct my_conn *c) {
	static const size_t sizes[NCOLS] = { KEY_BUF, KEY_BUF, TYPE_BUF, 0, DATA_BUF };

	for (unsigned col = 0; col < NCOLS; col++) {
		if (col == COL_TTL) {
			continue;
		}
		c->bufs[col] = malloc(sizes[col]);
		if (c->bufs[col] == NULL) {
			return false;
		}
		my_bind_string_col(c, col, sizes[col]);
	}
	c->cols[COL_TTL].buffer_type = MYSQL_TYPE_LONG;
	c->cols[COL_TTL].is_unsigned = 1;
	c->cols[COL_TTL].buffer = &c->ttl;
	c->cols[COL_TTL].is_null = &c->nulls[COL_TTL];
	c->cols[COL_TTL].error = &c->errors[COL_TTL];
	c->acl_col.buffer_type = MYSQL_TYPE_LONG;
	c->acl_col.buffer = &c->acl_allowed;
	c->acl_col.is_null = &c->acl_null;
	c->id_col.buffer_type = MYSQL_TYPE_LONG;
	c->id_col.is_unsigned = 1;
	c->id_col.buffer = &c->id;
	c->id_col.is_null = &c->id_null;
	c->gen = 1; /* statements start at 0: each binds before its first execution */
	return true;
}

/* TLS demanded, the server's certificate and host name verified against tls_ca. */
static bool
my_set_tls_options(MYSQL *db, const struct my_settings *s) {
	my_bool on = 1;

	return mysql_options(db, MYSQL_OPT_SSL_ENFORCE, &on) == 0 &&
	       mysql_options(db, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on) == 0 &&
	       mysql_options(db, MYSQL_OPT_SSL_CA, s->tls_ca) == 0;
}

static bool
my_set_options(MYSQL *db, const struct my_settings *s) {
	unsigned connect_timeout = s->connect_timeout_s, io_timeout = s->io_timeout_s;
	unsigned no_infile = 0;
	my_bind_flag report_truncation = 1;

	/* Keys are ASCII; any ASCII-compatible client character set compares them as bytes
	 * against the VARBINARY columns. */
	return mysql_options(db, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout) == 0 &&
	       mysql_options(db, MYSQL_OPT_READ_TIMEOUT, &io_timeout) == 0 &&
	       mysql_options(db, MYSQL_OPT_WRITE_TIMEOUT, &io_timeout) == 0 &&
	       mysql_options(db, MYSQL_REPORT_DATA_TRUNCATION, &report_truncation) == 0 &&
	       /* The server never gets to read a file of named's. */
	       mysql_options(db, MYSQL_OPT_LOCAL_INFILE, &no_infile) == 0 &&
	       mysql_options(db, MYSQL_SET_CHARSET_NAME, "utf8mb4") == 0 &&
	       mysql_options(db, MYSQL_INIT_COMMAND, s->session_settings) == 0 &&
	       (s->tls_ca == NULL || my_set_tls_options(db, s));
}

/* A connection as user (NULL: the client library's default) with password (NULL: none; the
 * client library would take MYSQL_PWD from named's environment, which the suite never sets). */
static struct my_conn *
my_connect_as(const struct my_settings *s, const char *user, const char *password) {
	struct my_conn *c;

	if (!my_thread_attach()) {
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL || !my_conn_buffers(c)) {
		dlz_log_error_limited("out of memory for a connection");
		goto fail;
	}
	c->settings = s;
	c->db = mysql_init(NULL);
	if (c->db == NULL || !my_set_options(c->db, s)) {
		dlz_log_error_limited("cannot set up a connection handle");
		goto fail;
	}
	if (mysql_real_connect(c->db, s->host, user, password, s->database, s->port, s->socket,
			       0) == NULL) {
		dlz_log_error_limited("cannot connect to %s: %s",
				      s->socket != NULL ? s->socket
				      : s->host != NULL ? s->host
							: "localhost",
				      mysql_error(c->db));
		goto fail;
	}
	return c;
fail:
	if (c != NULL) {
		my_conn_free(c);
	}
	return NULL;
}

static int
my_connect(void *state, void **out) {
	const struct my_settings *s = state;

	*out = my_connect_as(s, s->user, s->password);
	return *out != NULL ? DLZ_OK : DLZ_ERROR;
}

static void
my_disconnect(void *state, void *conn) {
	(void)state;
	my_thread_attach(); /* closing needs it too; a failure is logged, the memory freed anyway */
	my_conn_free(conn);
}

/* ---- statements ------------------------------------------------------------------------- */

/*
 * Did the statement fail for time? The server's max_statement_time, or no answer within the
 * read time-out, which Connector/C reports as CR_SERVER_LOST like a dropped connection: told
 * apart by the time the statement has taken.
 */
static bool
my_timed_out(const struct my_conn *c, unsigned err) {
	long waited = dlz_now_ms() - c->started_ms;

	return err == ER_STATEMENT_TIMEOUT ||
	       (err == CR_SERVER_LOST &&
		waited >= 1000L * c->settings->io_timeout_s - TIMEOUT_SLACK_MS);
}

/*
 * Did the connection fail, rather than the server answer this statement with an error? The
 * client library's own errors (CR_*: the server gone or lost, no connection, a packet out of
 * order) and a server that is shutting down or killed the session.
 */
static bool
my_connection_failed(unsigned err) {
	return (err >= CR_MIN_ERROR && err <= CR_MAX_ERROR) || err == ER_SERVER_SHUTDOWN ||
	       err == ER_CONNECTION_KILLED;
}

static int
my_stmt_failed(const struct my_conn *c, const struct my_stmt *st, const char *what) {
	unsigned err = st->handle != NULL ? mysql_stmt_errno(st->handle) : 0;
	const char *text = err != 0 ? mysql_stmt_error(st->handle) : NULL;

	/* An error packet that ends an unbuffered result is the connection's, not the
	 * statement's (Connector/C sets it on the MYSQL handle only). */
	if (err == 0) {
		err = mysql_errno(c->db);
		text = mysql_error(c->db);
	}
	if (my_timed_out(c, err)) {
		dlz_timed_out();
	} else if (my_connection_failed(err)) {
		dlz_connection_failed();
	}
	dlz_log_error_limited("%s failed: %s (%u)", what, text, err);
	return DLZ_ERROR;
}

/* The statement prepared on this connection (now, the first time). */
static bool
my_stmt_ready(struct my_conn *c, struct my_stmt *st, const char *sql, unsigned nparams) {
	if (st->handle != NULL) {
		return true;
	}
	c->started_ms = dlz_now_ms();
	st->handle = mysql_stmt_init(c->db);
	if (st->handle == NULL) {
		my_stmt_failed(c, st, "mysql_stmt_init");
		return false;
	}
	if (mysql_stmt_prepare(st->handle, sql, (unsigned long)strlen(sql)) != 0) {
		my_stmt_failed(c, st, "prepare");
		my_close_stmt(st);
		return false;
	}
	if (mysql_stmt_param_count(st->handle) != nparams) {
		dlz_log_error_limited("prepared statement has %lu parameters, not %u",
				      mysql_stmt_param_count(st->handle), nparams);
		my_close_stmt(st);
		return false;
	}
	return true;
}

/* Make the statement's result point at the current buffers (after growth moved them). */
static bool
my_stmt_bind_result(struct my_conn *c, struct my_stmt *st, MYSQL_BIND *cols) {
	if (st->bound_gen == c->gen) {
		return true;
	}
	if (mysql_stmt_bind_result(st->handle, cols) != 0) {
		my_stmt_failed(c, st, "bind result");
		return false;
	}
	st->bound_gen = c->gen;
	return true;
}

static void
my_set_param(struct my_conn *c, unsigned i, const char *text) {
	MYSQL_BIND *b = &c->params[i];

	c->param_lens[i] = (unsigned long)strlen(text);
	b->buffer_type = MYSQL_TYPE_STRING;
	b->buffer = (void *)text;
	b->buffer_length = c->param_lens[i];
	b->length = &c->param_lens[i];
}

/* Bind params[0..n-1] and execute: one round trip. */
static bool
my_stmt_execute(struct my_conn *c, struct my_stmt *st, const char *what) {
	c->started_ms = dlz_now_ms();
	if (mysql_stmt_bind_param(st->handle, c->params) != 0 ||
	    mysql_stmt_execute(st->handle) != 0) {
		my_stmt_failed(c, st, what);
		return false;
	}
	return true;
}

/* Grow col's buffer to hold need bytes and a NUL; every statement must then rebind. */
static bool
my_grow_col(struct my_conn *c, unsigned col, size_t need) {
	size_t cap = c->caps[col];
	char *bigger;

	while (cap < need + 1) {
		cap *= 2;
	}
	bigger = realloc(c->bufs[col], cap);
	if (bigger == NULL) {
		dlz_log_error_limited("out of memory for a %zu-byte value", need);
		return false;
	}
	c->bufs[col] = bigger;
	my_bind_string_col(c, col, cap);
	c->gen++;
	return true;
}

/* The columns of this row that did not fit, fetched again into grown buffers. */
static bool
my_refetch_truncated(struct my_conn *c, struct my_stmt *st, unsigned first) {
	for (unsigned col = first; col < NCOLS; col++) {
		if (col == COL_TTL || !c->errors[col]) {
			continue;
		}
		if (!my_grow_col(c, col, c->lens[col]) ||
		    mysql_stmt_fetch_column(st->handle, &c->cols[col], col - first, 0) != 0) {
			my_stmt_failed(c, st, "fetch of a long column");
			return false;
		}
		c->errors[col] = 0;
	}
	/* Rebinding between fetches is allowed: the next rows land in the grown buffers. */
	return my_stmt_bind_result(c, st, &c->cols[first]);
}

typedef int my_row_fn(struct my_conn *c, void *ctx);

/* fn stopped the walk with rc: read and drop the rest, so the connection stays in step with
 * the server (and usable for the next statement). */
static int
my_stop_walk(struct my_conn *c, struct my_stmt *st, int rc) {
	if (mysql_stmt_free_result(st->handle) != 0) {
		return my_stmt_failed(c, st, "discarding the rest of a result");
	}
	return rc;
}

/* Every row of the executed statement (result bound from column first on) to fn; fn's
 * non-DLZ_OK return stops the walk (the rest is read and dropped) and is returned. */
static int
my_fetch_all(struct my_conn *c, struct my_stmt *st, unsigned first, my_row_fn *fn, void *ctx) {
	for (;;) {
		int rc = mysql_stmt_fetch(st->handle);

		if (rc == MYSQL_NO_DATA) {
			return DLZ_OK;
		}
		if (rc == 1) {
			return my_stmt_failed(c, st, "fetch");
		}
		if (rc == MYSQL_DATA_TRUNCATED && !my_refetch_truncated(c, st, first)) {
			return DLZ_ERROR;
		}
		for (unsigned col = first; col < NCOLS; col++) {
			if (col != COL_TTL) {
				c->bufs[col][c->nulls[col] ? 0 : c->lens[col]] = '\0';
			}
		}
		rc = fn(c, ctx);
		if (rc != DLZ_OK) {
			return rc == DLZ_ERROR ? rc : my_stop_walk(c, st, rc);
		}
	}
}

/* Is any of the record columns type, ttl, data of the fetched row NULL? */
static bool
my_record_has_null(const struct my_conn *c) {
	return c->nulls[COL_TYPE] || c->nulls[COL_TTL] || c->nulls[COL_DATA];
}

/* ---- fetch: one DNS query ---------------------------------------------------------------- */

static int
my_fetch_row(struct my_conn *c, void *ctx) {
	struct dlz_rowset *out = ctx;

	if (c->nulls[COL_ZONE]) {
		dlz_log_error_limited("fetch: a zone without a name");
		return DLZ_BAD_DATA;
	}
	/* Each row comes with its zone: reported once (the rowset ignores repeats). */
	if (!dlz_rowset_add_zone(out, c->bufs[COL_ZONE])) {
		return DLZ_ERROR;
	}
	if (c->nulls[COL_OWNER]) {
		return DLZ_OK; /* the zone matched, none of the owners in it did */
	}
	if (my_record_has_null(c)) {
		dlz_log_error_limited("fetch: a record of %s with a NULL column", c->bufs[COL_OWNER]);
		return DLZ_BAD_DATA;
	}
	if (!dlz_rowset_add_row_n(out, c->bufs[COL_ZONE], c->lens[COL_ZONE],
				  c->bufs[COL_OWNER], c->lens[COL_OWNER], c->bufs[COL_TYPE],
				  c->lens[COL_TYPE], c->ttl, c->bufs[COL_DATA],
				  c->lens[COL_DATA])) {
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

/* The smallest class index with at least n places. */
static unsigned
my_smallest_class(const unsigned *classes, unsigned n) {
	unsigned i = 0;

	while (classes[i] < n) {
		i++;
	}
	return i;
}

static struct my_conn *my_update_writer(struct my_conn *c, const char *zone);

static int
my_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct my_conn *c = conn;
	unsigned cls, k, nowner_places;
	struct my_stmt *st;

	if (!my_thread_attach() || req->nnames == 0 || req->nnames > DLZ_MAX_LABELS ||
	    req->nowners > MAX_OWNERS) {
		return DLZ_ERROR;
	}
	/* In an update its own connection reads, which sees the update's uncommitted rows; an
	 * update's reads come with its zone (update.c), locked before the first of them. */
	if (c->in_update) {
		c = req->zone_index >= 0 ? my_update_writer(c, req->names[req->zone_index]) : NULL;
		if (c == NULL) {
			return DLZ_ERROR;
		}
	}
	cls = my_smallest_class(my_zone_classes, req->nnames) * NOWNER_CLASSES +
	      my_smallest_class(my_owner_classes, req->nowners);
	k = my_zone_classes[cls / NOWNER_CLASSES];
	nowner_places = my_owner_classes[cls % NOWNER_CLASSES];
	st = &c->fetch[cls];
	if (!my_stmt_ready(c, st, c->settings->fetch_sql[cls], nowner_places + k)) {
		return DLZ_ERROR;
	}
	/* Owner places come first in the statement's text, then the zone places. */
	for (unsigned i = 0; i < nowner_places; i++) {
		my_set_param(c, i, i < req->nowners ? req->owners[i] : "");
	}
	for (unsigned i = 0; i < k; i++) {
		my_set_param(c, nowner_places + i, i < req->nnames ? req->names[i] : "");
	}
	if (!my_stmt_bind_result(c, st, &c->cols[COL_ZONE]) || !my_stmt_execute(c, st, "fetch")) {
		return DLZ_ERROR;
	}
	return my_fetch_all(c, st, COL_ZONE, my_fetch_row, out);
}

/* ---- zone transfer ----------------------------------------------------------------------- */

struct my_xfr_ctx {
	dlz_node_cb *cb;
	void *cb_ctx;
	bool zone_found;
};

static int
my_xfr_row(struct my_conn *c, void *ctx) {
	struct my_xfr_ctx *x = ctx;

	if (c->nulls[COL_OWNER] || my_record_has_null(c)) {
		dlz_log_error_limited("zone transfer: a record with a NULL column");
		return DLZ_BAD_DATA;
	}
	x->zone_found = true;
	return x->cb(x->cb_ctx, c->bufs[COL_OWNER], c->bufs[COL_TYPE], c->ttl, c->bufs[COL_DATA]);
}

static int
my_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct my_conn *c = conn;
	struct my_xfr_ctx x = { .cb = cb, .cb_ctx = ctx };
	int rc;

	if (!my_thread_attach() || !my_stmt_ready(c, &c->xfr, XFR_SQL, 1)) {
		return DLZ_ERROR;
	}
	my_set_param(c, 0, zone);
	if (!my_stmt_bind_result(c, &c->xfr, &c->cols[COL_OWNER]) ||
	    !my_stmt_execute(c, &c->xfr, "zone transfer")) {
		return DLZ_ERROR;
	}
	rc = my_fetch_all(c, &c->xfr, COL_OWNER, my_xfr_row, &x);
	return rc == DLZ_OK && !x.zone_found ? DLZ_NOTFOUND : rc;
}

/* ---- zone transfer ACL ------------------------------------------------------------------- */

static int
my_allowxfr(void *conn, const char *zone, const char *client) {
	struct my_conn *c = conn;
	int rc, verdict = DLZ_NOTFOUND;

	if (!my_thread_attach() || !my_stmt_ready(c, &c->acl, ACL_SQL, 2)) {
		return DLZ_ERROR;
	}
	if (c->acl.bound_gen == 0) {
		if (mysql_stmt_bind_result(c->acl.handle, &c->acl_col) != 0) {
			return my_stmt_failed(c, &c->acl, "bind result");
		}
		c->acl.bound_gen = 1; /* its integer column never moves */
	}
	my_set_param(c, 0, client);
	my_set_param(c, 1, zone);
	if (!my_stmt_execute(c, &c->acl, "allowzonexfr")) {
		return DLZ_ERROR;
	}
	/* zones.name is unique and (zone_id, client) the ACL's key: at most one row. */
	while ((rc = mysql_stmt_fetch(c->acl.handle)) == 0) {
		verdict = !c->acl_null && c->acl_allowed != 0 ? DLZ_OK : DLZ_DENIED;
	}
	if (rc != MYSQL_NO_DATA) {
		return my_stmt_failed(c, &c->acl, "allowzonexfr fetch");
	}
	return verdict;
}

/* ---- writing: RFC 2136 updates through the core -------------------------------------------
 *
 * One update message is one InnoDB transaction (REPEATABLE READ, the server's default) on a
 * connection of its own: the driver reads as an account that may only read (dlz_reader), so
 * updates write as another, writer_user=<name>, whose password comes from the file
 * writer_password_file=<path> names (as the reader's from password_file=<path>), never from
 * named.conf or named's environment. The reader connection the core holds for updates opens
 * it at its first update and keeps it; between begin and commit every fetch on that connection reads through the
 * writer, so the update's own lookups (named's prerequisite checks, the SOA serial) see its
 * uncommitted rows. A row's `seq` is one more than the highest of its owner in the zone
 * (schemas/mysql.sql: it only makes the key unique).
 *
 * The first statement of an update, before any read, locks the zone's row FOR UPDATE until
 * the transaction ends. An update decides on what it reads which empty non-terminal markers to
 * add or delete, and two nameds updating one zone at once would each decide on a snapshot
 * without the other's changes (one deleting the last name below b.Z and with it b.Z's marker,
 * the other adding c.b.Z because the marker was still there: b.Z lost, NXDOMAIN above a name
 * that exists). With the lock the second waits for the first to commit, and its snapshot
 * (REPEATABLE READ: taken at the first plain read, which comes after the locking one) holds
 * what the first wrote. A loader replacing the zone (DELETE, cascading to its records) waits
 * too. A wait counts against max_statement_time, like any statement's.
 */
static const char ZONE_ID_SQL[] = "SELECT id FROM zones WHERE name = ? FOR UPDATE";
static const char INSERT_SQL[] =
	"INSERT INTO records (zone_id, name, seq, type, ttl, data)"
	" SELECT ?, ?, COALESCE(MAX(seq) + 1, 0), ?, ?, ? FROM records"
	" WHERE name = ? AND zone_id = ?";
static const char DELETE_SQL[] =
	"DELETE FROM records WHERE name = ? AND zone_id = ? AND type = ? AND data = ?";
/*
 * Candidates for below(): names of the zone ending in ".<owner>", whose reversed keys (rname)
 * start with reverse(owner) || '.': the range [that, reverse(owner) || '/') ('/' follows '.')
 * of records_rname, the owner's subtree and nothing else of the zone. A key whose label ends
 * in an escaped dot ("x\\.owner") falls in the range without being below the owner: the
 * driver checks each name with dlz_key_in_zone, and takes a whole batch of such names for a
 * name below (a marker too many, never a name lost).
 */
#define BELOW_LIMIT 64
#define TEXT_OF(x) STRINGIFY(x)
#define STRINGIFY(x) #x
static const char BELOW_SQL[] =
	"SELECT r.name, r.type, r.ttl, r.data FROM records r FORCE INDEX (records_rname)"
	" WHERE r.zone_id = ? AND r.rname >= ? AND r.rname < ? LIMIT " TEXT_OF(BELOW_LIMIT);

static void
my_set_uint_param(struct my_conn *c, unsigned i, unsigned slot, uint32_t value) {
	MYSQL_BIND *b = &c->params[i];

	c->int_params[slot] = value;
	memset(b, 0, sizeof(*b));
	b->buffer_type = MYSQL_TYPE_LONG;
	b->is_unsigned = 1;
	b->buffer = &c->int_params[slot];
}

/* A statement on the writer's session: START TRANSACTION, COMMIT, ROLLBACK. */
static int
my_session(struct my_conn *w, const char *sql) {
	w->started_ms = dlz_now_ms();
	if (mysql_query(w->db, sql) != 0) {
		struct my_stmt none = { 0 };
		return my_stmt_failed(w, &none, sql);
	}
	return DLZ_OK;
}

static int
my_begin(void *conn) {
	struct my_conn *c = conn;
	const struct my_settings *s = c->settings;

	if (!my_thread_attach()) {
		return DLZ_ERROR;
	}
	if (s->writer_user == NULL) {
		dlz_log(ISC_LOG_ERROR, "no writer_user: the store takes no updates");
		return DLZ_ERROR;
	}
	/* A kept writer may have been cut since its last update (a server restart, its idle
	 * time-out): then it is replaced once, as the core replaces a reader. */
	if (c->writer != NULL && my_session(c->writer, "START TRANSACTION") != DLZ_OK) {
		my_conn_free(c->writer);
		c->writer = NULL;
	} else if (c->writer != NULL) {
		c->writer->upd_zone[0] = '\0';
		c->in_update = true;
		return DLZ_OK;
	}
	c->writer = my_connect_as(s, s->writer_user, s->writer_password);
	if (c->writer == NULL || my_session(c->writer, "START TRANSACTION") != DLZ_OK) {
		return DLZ_ERROR;
	}
	c->in_update = true;
	return DLZ_OK;
}

/* The writer of an update in progress, with the id of zone (read once per update). */
static struct my_conn *
my_update_writer(struct my_conn *c, const char *zone) {
	struct my_conn *w = c->writer;
	int rc, rows = 0;

	if (!my_thread_attach() || !c->in_update || w == NULL) {
		dlz_log(ISC_LOG_ERROR, "a write to %s outside an update", zone);
		return NULL;
	}
	if (strcmp(w->upd_zone, zone) == 0) {
		return w;
	}
	if (strlen(zone) >= sizeof(w->upd_zone) || !my_stmt_ready(w, &w->zone_id, ZONE_ID_SQL, 1)) {
		return NULL;
	}
	if (w->zone_id.bound_gen == 0) {
		if (mysql_stmt_bind_result(w->zone_id.handle, &w->id_col) != 0) {
			my_stmt_failed(w, &w->zone_id, "bind result");
			return NULL;
		}
		w->zone_id.bound_gen = 1; /* its integer column never moves */
	}
	my_set_param(w, 0, zone);
	if (!my_stmt_execute(w, &w->zone_id, "zone id")) {
		return NULL;
	}
	while ((rc = mysql_stmt_fetch(w->zone_id.handle)) == 0) {
		rows++;
	}
	if (rc != MYSQL_NO_DATA) {
		my_stmt_failed(w, &w->zone_id, "zone id fetch");
		return NULL;
	}
	if (rows != 1 || w->id_null) {
		dlz_log(ISC_LOG_ERROR, "update: no zone %s in the store", zone);
		return NULL;
	}
	strcpy(w->upd_zone, zone);
	w->upd_zone_id = w->id;
	return w;
}

static int
my_add(void *conn, const char *zone, const char *owner, const char *type, uint32_t ttl,
       const char *rdata) {
	struct my_conn *w = my_update_writer(conn, zone);

	if (w == NULL || !my_stmt_ready(w, &w->insert, INSERT_SQL, 7)) {
		return DLZ_ERROR;
	}
	my_set_uint_param(w, 0, 0, w->upd_zone_id);
	my_set_param(w, 1, owner);
	my_set_param(w, 2, type);
	my_set_uint_param(w, 3, 1, ttl);
	my_set_param(w, 4, rdata);
	my_set_param(w, 5, owner);
	my_set_uint_param(w, 6, 0, w->upd_zone_id);
	if (!my_stmt_execute(w, &w->insert, "insert")) {
		return DLZ_ERROR;
	}
	if (mysql_stmt_affected_rows(w->insert.handle) != 1) {
		dlz_log(ISC_LOG_ERROR, "insert of a record of %s stored no row", owner);
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

static int
my_del(void *conn, const char *zone, const char *owner, const char *type, const char *rdata) {
	struct my_conn *w = my_update_writer(conn, zone);

	if (w == NULL || !my_stmt_ready(w, &w->delete, DELETE_SQL, 4)) {
		return DLZ_ERROR;
	}
	my_set_param(w, 0, owner);
	my_set_uint_param(w, 1, 0, w->upd_zone_id);
	my_set_param(w, 2, type);
	my_set_param(w, 3, rdata);
	return my_stmt_execute(w, &w->delete, "delete") ? DLZ_OK : DLZ_ERROR;
}

struct my_below_walk {
	const char *owner;
	unsigned rows;
};

/* my_row_fn for below(): stops the walk (1) at the first name truly below the owner. */
static int
my_below_row(struct my_conn *c, void *ctx) {
	struct my_below_walk *walk = ctx;

	walk->rows++;
	return !c->nulls[COL_OWNER] && dlz_key_in_zone(c->bufs[COL_OWNER], walk->owner) ? 1
										      : DLZ_OK;
}

/* text reversed into out (len bytes, then suffix and a NUL). */
static void
my_reversed(const char *text, size_t len, char suffix, char *out) {
	for (size_t i = 0; i < len; i++) {
		out[i] = text[len - 1 - i];
	}
	out[len] = suffix;
	out[len + 1] = '\0';
}

static int
my_below(void *conn, const char *zone, const char *owner) {
	struct my_conn *w = my_update_writer(conn, zone);
	struct my_below_walk walk = { .owner = owner };
	size_t len = strlen(owner); /* never the root: it takes no updates (update.c) */
	char low[DLZ_KEY_MAX + 2], high[DLZ_KEY_MAX + 2];
	int rc;

	if (w == NULL || len >= DLZ_KEY_MAX || !my_stmt_ready(w, &w->below, BELOW_SQL, 3)) {
		return DLZ_ERROR;
	}
	my_reversed(owner, len, '.', low);
	my_reversed(owner, len, '/', high);
	my_set_uint_param(w, 0, 0, w->upd_zone_id);
	my_set_param(w, 1, low);
	my_set_param(w, 2, high);
	if (!my_stmt_bind_result(w, &w->below, &w->cols[COL_OWNER]) ||
	    !my_stmt_execute(w, &w->below, "below")) {
		return DLZ_ERROR;
	}
	rc = my_fetch_all(w, &w->below, COL_OWNER, my_below_row, &walk);
	return rc == DLZ_OK && walk.rows == BELOW_LIMIT ? 1 : rc;
}

/* Ends the update with sql (COMMIT or ROLLBACK). */
static int
my_end_update(struct my_conn *c, const char *sql) {
	bool was = c->in_update;

	c->in_update = false;
	if (!my_thread_attach() || c->writer == NULL) {
		return was ? DLZ_ERROR : DLZ_OK;
	}
	c->writer->upd_zone[0] = '\0';
	if (my_session(c->writer, sql) != DLZ_OK) {
		/* A writer in an unknown state is not reused: the next update connects anew. */
		my_conn_free(c->writer);
		c->writer = NULL;
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

static int
my_commit(void *conn) {
	return my_end_update(conn, "COMMIT");
}

static int
my_rollback(void *conn) {
	return my_end_update(conn, "ROLLBACK");
}

/* ---- the backend ------------------------------------------------------------------------- */

/* ---- the change channel (the core's cache: drivers/common/cache.c) ------------------------- */

/*
 * MariaDB has no push channel: schemas/mysql_changes.sql's triggers log every change, each
 * with the next number of a sequence that writing transactions take in commit order, and the
 * driver polls that log every cache_poll_ms on a connection of its own. Each poll reads the
 * last number committed, N, and then the changes after the last one it read up to N: every
 * change committed before the poll began is among them, so the channel is caught up as of
 * the poll's start (dlz_channel_synced). A poll that fails, or a connection lost, takes the
 * channel down (flushed, bypassed); fewer changes than numbers read mean the log was pruned
 * past the driver (it keeps the last 100,000): the cache is flushed and reading goes on from
 * N. It reconnects every bound/2. Stated as what it is: polling, so a change reaches the cache
 * within cache_poll_ms and a round trip, and the cache costs the server a statement or two
 * per poll whatever the load.
 */
#define CHANGE_NUMBER_SQL "SELECT seq FROM dlz_change_seq WHERE id = 1"
#define CHANGES_SQL                                                                       \
	"SELECT seq, zone, owner FROM dlz_changes WHERE seq > %llu AND seq <= %llu ORDER BY seq"

/* The last change number committed; false (the channel then down) on failure. */
static bool
my_change_number(struct my_conn *c, struct dlz_channel *ch, unsigned long long *number) {
	MYSQL_RES *res;
	MYSQL_ROW row;
	bool ok;

	if (mysql_query(c->db, CHANGE_NUMBER_SQL) != 0 || (res = mysql_store_result(c->db)) == NULL) {
		dlz_channel_down(ch, "reading MariaDB's change log failed: %s", mysql_error(c->db));
		return false;
	}
	row = mysql_fetch_row(res);
	ok = row != NULL && row[0] != NULL;
	if (ok) {
		*number = strtoull(row[0], NULL, 10);
	} else {
		dlz_channel_down(ch, "MariaDB's change log has no number row (schemas/mysql_changes.sql)");
	}
	mysql_free_result(res);
	return ok;
}

/* One logged change's column (NULL or a key) into buf; false if it does not fit. */
static bool
my_change_key(const char *value, unsigned long len, char *buf, const char **out) {
	if (value == NULL) {
		*out = NULL;
		return true;
	}
	if (len >= DLZ_KEY_MAX) {
		return false;
	}
	memcpy(buf, value, len);
	buf[len] = '\0';
	*out = buf;
	return true;
}

/* The changes numbered (from, to] reported in order; their count, or -1 (the channel then
 * down) on failure. */
static long long
my_report_changes(struct my_conn *c, struct dlz_channel *ch, unsigned long long from,
		  unsigned long long to) {
	char sql[sizeof(CHANGES_SQL) + 40], zone[DLZ_KEY_MAX], owner[DLZ_KEY_MAX];
	long long count = 0;
	MYSQL_RES *res;
	MYSQL_ROW row;

	snprintf(sql, sizeof(sql), CHANGES_SQL, from, to);
	if (mysql_query(c->db, sql) != 0 || (res = mysql_store_result(c->db)) == NULL) {
		dlz_channel_down(ch, "reading MariaDB's change log failed: %s", mysql_error(c->db));
		return -1;
	}
	while ((row = mysql_fetch_row(res)) != NULL) {
		unsigned long *lens = mysql_fetch_lengths(res);
		const char *z, *o;

		/* A zone of NULL (its row gone) or a key too long: everything, to be safe. */
		if (!my_change_key(row[1], lens[1], zone, &z) ||
		    !my_change_key(row[2], lens[2], owner, &o) || z == NULL) {
			z = o = NULL;
		}
		dlz_channel_changed(ch, z, o);
		count++;
	}
	mysql_free_result(res);
	return count;
}

/* Poll the log on c until it fails (the channel then down) or the driver stops. */
static void
my_poll_changes(struct my_conn *c, struct dlz_channel *ch, long poll_ms) {
	unsigned long long last, number;

	if (!my_change_number(c, ch, &last)) {
		return;
	}
	/* Every change after `last` will be read: the cache may take store results from now. */
	dlz_channel_up(ch);
	dlz_log(ISC_LOG_INFO, "cache: polling MariaDB's change log every %ld ms (connection %lu)",
		poll_ms, mysql_thread_id(c->db));
	do {
		long since = dlz_now_ms();
		long long count;

		if (!my_change_number(c, ch, &number)) {
			return;
		}
		if (number > last) {
			count = my_report_changes(c, ch, last, number);
			if (count < 0) {
				return;
			}
			if ((unsigned long long)count != number - last) {
				dlz_channel_down(ch, "MariaDB's change log was pruned past the %llu "
						     "changes the driver had not read",
						 number - last);
				dlz_channel_up(ch);
			}
			last = number;
		}
		dlz_channel_synced(ch, since);
	} while (dlz_channel_wait(ch, -1, 0, poll_ms) == 0);
}

static void
my_watch(void *state, struct dlz_channel *ch) {
	const struct my_settings *s = state;
	long retry_ms = dlz_channel_bound_ms(ch) / 2;

	do {
		struct my_conn *c = my_connect_as(s, s->user, s->password);

		if (c == NULL) {
			dlz_channel_down(ch, "cannot connect to MariaDB to read its change log");
			continue;
		}
		my_poll_changes(c, ch, s->poll_ms);
		my_conn_free(c);
	} while (dlz_channel_wait(ch, -1, 0, retry_ms) == 0);
}

static const struct dlz_arg_spec my_args[] = {
	DLZ_TEXT("host", "the server's name or address (neither host nor socket: the client "
			 "library's default)"),
	DLZ_INT("port", 0, 0, 65535, "the server's TCP port (0: the client library's default)"),
	DLZ_TEXT("socket", "the server's unix socket"),
	DLZ_TEXT("user", "the account that reads"),
	DLZ_TEXT("password", "its password (the suite gives password_file instead)"),
	DLZ_TEXT("password_file",
		 "a file whose first line is the reader's password, kept out of named.conf and "
		 "named's environment; replaces password"),
	DLZ_TEXT_REQUIRED("database", "the database holding the dlz tables"),
	DLZ_INT("connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a connection may take, rounded up to whole seconds by the client library"),
	DLZ_INT("query_timeout_ms", DEFAULT_QUERY_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a statement may take (the server's max_statement_time; the client waits "
		"whole seconds)"),
	DLZ_TEXT("writer_user",
		 "the account that writes RFC 2136 updates, its password in writer_password_file; "
		 "none: no updates"),
	DLZ_TEXT("writer_password_file", "a file whose first line is writer_user's password"),
	DLZ_TEXT("tls_ca",
		 "a CA file: every connection demands TLS and verifies the server's certificate "
		 "and name against it"),
	DLZ_INT("cache_poll_ms", 100, 1, DLZ_MS_MAX,
		"with cache=yes: ms between two reads of the change log (MariaDB has no push "
		"channel), at most half of cache_bound_ms"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "mysql",
	/* One MYSQL handle per pooled connection, used by one thread at a time: safe with a
	 * thread-safe client library, which init checks (mysql_thread_safe). */
	.thread_safe = true,
	.args = my_args,
	.init = my_init,
	.fini = my_fini,
	.connect = my_connect,
	.disconnect = my_disconnect,
	.fetch = my_fetch,
	.allnodes = my_allnodes,
	.allowxfr = my_allowxfr,
	.begin = my_begin,
	.add = my_add,
	.del = my_del,
	.below = my_below,
	.commit = my_commit,
	.rollback = my_rollback,
	.watch = my_watch,
};
