/*
 * The LDAP driver: reads the `ldap` store (schemas/ldap/README.md) from slapd with OpenLDAP's
 * libldap.
 *
 * Each pooled connection is one LDAP* handle, LDAPv3, bound once with a simple bind and reused
 * for every query. One DNS query is one subtree search: an OR over the candidate zone names
 * (dlzZoneName) and candidate owners (dlzOwner), every assertion value escaped per RFC 4515.
 * Zones are replaced by generations, so the search result decides by itself what counts: the
 * deepest zone entry that has a dlzGeneration is the zone, and only owner entries of that zone
 * and of that generation become rows (the result is one LMDB snapshot, so the zone entry and
 * its owner entries always agree).
 *
 * Thread safety: libldap 2.5 is the reentrant library (libldap_r was merged into it), and the
 * core's pool hands each LDAP* to one thread at a time; libldap's one-time global set-up is
 * mutex-protected and in any case runs in dlz_create's first connection, before named's
 * workers call us. Options are only ever set on our own handles, never globally.
 *
 * Failures never hang a worker: connect() is bounded by LDAP_OPT_NETWORK_TIMEOUT
 * (connect_timeout_ms), every synchronous call (the bind included) by LDAP_OPT_TIMEOUT
 * (query_timeout_ms), a search also by a server-side time limit (whole seconds, at least one:
 * libldap's rounding), and every message of a zone transfer by the same time-out; both options
 * take a timeval, so both limits can be below a second. Any LDAP error is DLZ_ERROR: the core
 * answers SERVFAIL, drops the handle and connects again on next use; a time-out is reported
 * (dlz_timed_out), and so is a connection that failed (dlz_connection_failed: the server
 * gone, busy or unavailable), and the core then takes the server for down for a while. An
 * operation the server refused (its size limit, an access rule) takes nothing down.
 *
 * A zone transfer is one search, not pages (RFC 2696): one search is one read snapshot of the
 * server (slapd.conf's rtxnsize 0), so a transfer never mixes two generations of a zone, and
 * paging would not get past a size limit anyway: slapd counts every page against the bind
 * DN's hard size limit (size.prtotal defaults to it), 500 entries unless slapd.conf says
 * otherwise. The suite's slapd lifts the limit for the driver's DN (databases/slapd.py); a
 * lent server must too, for zones of more owners than its limit.
 *
 * Values are read in place from the result messages (ldap_get_attribute_ber), so a query
 * costs libldap's own allocations plus a BerElement per entry and a small array per
 * attribute, all freed before returning; the filter buffer and the entry table live with the
 * connection and are reused.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>

#include <lber.h>
#include <ldap.h>

#include "../common/dlz_driver.h"

/* Default of connect_timeout_ms: a TCP connect to the suite's slapd takes well under a ms; a
 * second leaves room for a loaded host, and is paid once per down_interval_ms when the server
 * does not answer. */
#define DEFAULT_CONNECT_TIMEOUT_MS 1000
/* Default of query_timeout_ms (the bind and every search): a fetch's search takes well under a
 * ms of slapd's time; 500 ms answers SERVFAIL before a resolver's first retry (about 800 ms in
 * BIND) would, against a frozen server. */
#define DEFAULT_QUERY_TIMEOUT_MS 500
/* Longest dlzXfrClient value compared as an address; longer ones are compared as text. */
#define ADDR_TEXT_MAX 64

struct ld_state {
	char *uri;
	char *base;
	char *binddn;
	char *password;
	/* starttls=yes: every connection runs StartTLS before its bind, the server's
	 * certificate verified (against tls_cacert=<file>, else libldap's default CAs), and a
	 * connection where either fails is not used: the password never travels in clear. */
	bool starttls;
	char *tls_cacert;
	struct timeval connect_timeout;
	struct timeval timeout; /* of every operation */
};

/* A growable byte buffer; failed stays set once an allocation failed. */
struct ld_buf {
	char *data;
	size_t len;
	size_t cap;
	bool failed;
};

/* The attributes of one search result entry, pointing into its message. */
struct ld_entry {
	struct berval zone_name;  /* dlzZoneName: set on a zone entry */
	struct berval zone;       /* dlzZone: set on an owner entry */
	struct berval owner;      /* dlzOwner */
	long long generation;     /* dlzGeneration; -1 if absent or malformed */
	struct berval *records;   /* dlzRecord values (in place); the array is ours to free */
	struct berval *clients;   /* dlzXfrClient values (in place); the array is ours to free */
};

struct ld_conn {
	LDAP *ld;
	const struct ld_state *st;
	struct ld_buf filter;
	struct ld_buf scratch;    /* NUL-terminated copies for allnodes' callback */
	struct ld_entry *entries;
	size_t entries_cap;
	LDAPMessage **pending;    /* allnodes: owner entries read before the zone entry */
	size_t pending_cap;
};

/* What a lookup and a transfer read: zone entries and owner entries alike. */
static char *ld_record_attrs[] = { "dlzZoneName", "dlzGeneration", "dlzZone", "dlzOwner",
				   "dlzRecord", NULL };
static char *ld_acl_attrs[] = { "dlzZoneName", "dlzGeneration", "dlzXfrClient", NULL };

/* ---- buffers and RFC 4515 escaping ------------------------------------------------------ */

static bool
ld_buf_reserve(struct ld_buf *b, size_t more) {
	if (!b->failed && !dlz_grow((void **)&b->data, &b->cap, b->len + more, 1)) {
		b->failed = true;
	}
	return !b->failed;
}

static void
ld_buf_put(struct ld_buf *b, const char *text, size_t len) {
	if (ld_buf_reserve(b, len)) {
		memcpy(b->data + b->len, text, len);
		b->len += len;
	}
}

static void
ld_buf_puts(struct ld_buf *b, const char *text) {
	ld_buf_put(b, text, strlen(text));
}

static void
ld_buf_reset(struct ld_buf *b) {
	b->len = 0;
	b->failed = false;
}

/* May byte c stand for itself in a filter assertion value? RFC 4515 requires escaping only
 * '*', '(', ')', '\' and NUL; every other byte outside printable ASCII is escaped as well,
 * so that the filter string is plain ASCII whatever the key holds. */
static bool
ld_filter_byte_safe(unsigned char c) {
	return c > 0x20 && c < 0x7f && c != '*' && c != '(' && c != ')' && c != '\\';
}

/*
 * value (len bytes) as an RFC 4515 assertion value: unsafe bytes as "\xx". Every value from
 * a query name or a zone name reaches a filter through this function only.
 */
static void
ld_buf_put_filter_value(struct ld_buf *b, const char *value, size_t len) {
	static const char hex[] = "0123456789abcdef";

	if (!ld_buf_reserve(b, 3 * len)) {
		return;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)value[i];
		if (ld_filter_byte_safe(c)) {
			b->data[b->len++] = (char)c;
		} else {
			b->data[b->len++] = '\\';
			b->data[b->len++] = hex[c >> 4];
			b->data[b->len++] = hex[c & 0xf];
		}
	}
}

/* "(attr=<escaped value>)" */
static void
ld_buf_put_assertion(struct ld_buf *b, const char *attr, const char *value) {
	ld_buf_puts(b, "(");
	ld_buf_puts(b, attr);
	ld_buf_puts(b, "=");
	ld_buf_put_filter_value(b, value, strlen(value));
	ld_buf_puts(b, ")");
}

/* The finished filter as a C string (NULL when out of memory). */
static const char *
ld_buf_finish(struct ld_buf *b) {
	ld_buf_put(b, "", 1);
	return b->failed ? NULL : b->data;
}

/* ---- reading entries -------------------------------------------------------------------- */

static bool
ld_bv_equals(const struct berval *bv, const char *text, size_t len) {
	return bv->bv_val != NULL && bv->bv_len == len && memcmp(bv->bv_val, text, len) == 0;
}

static bool
ld_bv_equals_str(const struct berval *bv, const char *text) {
	return ld_bv_equals(bv, text, strlen(text));
}

static bool
ld_attr_is(const struct berval *attr, const char *name) {
	return attr->bv_len == strlen(name) && strncasecmp(attr->bv_val, name, attr->bv_len) == 0;
}

/* A non-negative decimal INTEGER value; -1 if it is not one. */
static long long
ld_parse_generation(const struct berval *bv) {
	long long value = 0;

	if (bv->bv_len == 0 || bv->bv_len > 18) {
		return -1;
	}
	for (ber_len_t i = 0; i < bv->bv_len; i++) {
		char c = bv->bv_val[i];
		if (c < '0' || c > '9') {
			return -1;
		}
		value = value * 10 + (c - '0');
	}
	return value;
}

static void
ld_entry_clear(struct ld_entry *e) {
	ber_memfree(e->records);
	ber_memfree(e->clients);
	memset(e, 0, sizeof(*e));
	e->generation = -1;
}

/* Keep the first value of a single-valued attribute; the array itself is freed. */
static void
ld_take_single(struct berval *dst, struct berval *vals) {
	if (vals != NULL && vals[0].bv_val != NULL) {
		*dst = vals[0];
	}
	ber_memfree(vals);
}

/* The attributes of one entry, in place; false on a decoding error (logged). */
static bool
ld_entry_read(LDAP *ld, LDAPMessage *msg, struct ld_entry *e) {
	BerElement *ber = NULL;
	struct berval dn, attr, *vals = NULL;
	int rc;

	ld_entry_clear(e);
	rc = ldap_get_dn_ber(ld, msg, &ber, &dn);
	while (rc == LDAP_SUCCESS) {
		vals = NULL;
		rc = ldap_get_attribute_ber(ld, msg, ber, &attr, &vals);
		if (rc != LDAP_SUCCESS || attr.bv_val == NULL) {
			ber_memfree(vals);
			break;
		}
		if (ld_attr_is(&attr, "dlzRecord") && e->records == NULL) {
			e->records = vals;
		} else if (ld_attr_is(&attr, "dlzXfrClient") && e->clients == NULL) {
			e->clients = vals;
		} else if (ld_attr_is(&attr, "dlzGeneration")) {
			struct berval gen = { 0, NULL };
			ld_take_single(&gen, vals);
			e->generation = gen.bv_val != NULL ? ld_parse_generation(&gen) : -1;
		} else {
			struct berval *dst = ld_attr_is(&attr, "dlzZoneName") ? &e->zone_name
					     : ld_attr_is(&attr, "dlzZone")   ? &e->zone
					     : ld_attr_is(&attr, "dlzOwner")  ? &e->owner
									   : NULL;
			if (dst != NULL) {
				ld_take_single(dst, vals);
			} else {
				ber_memfree(vals);
			}
		}
	}
	if (ber != NULL) {
		ber_free(ber, 0);
	}
	if (rc != LDAP_SUCCESS) {
		dlz_log_error_limited("cannot decode a search result entry: %s",
				      ldap_err2string(rc));
		return false;
	}
	return true;
}

/*
 * Split a dlzRecord value "TYPE TTL rdata" at its first two spaces (rdata may be empty).
 * false if it is malformed.
 */
static bool
ld_record_split(const struct berval *v, struct berval *type, uint32_t *ttl, struct berval *rdata) {
	char *p = v->bv_val, *end = v->bv_val + v->bv_len;
	char *sp1 = memchr(p, ' ', v->bv_len), *q;
	uint64_t value = 0;

	if (sp1 == NULL || sp1 == p) {
		return false;
	}
	q = sp1 + 1;
	if (q == end || *q == ' ') {
		return false;
	}
	for (; q < end && *q != ' '; q++) {
		if (*q < '0' || *q > '9' || (value = value * 10 + (uint64_t)(*q - '0')) > UINT32_MAX) {
			return false;
		}
	}
	if (q == end) {
		return false;
	}
	type->bv_val = p;
	type->bv_len = (ber_len_t)(sp1 - p);
	*ttl = (uint32_t)value;
	rdata->bv_val = q + 1;
	rdata->bv_len = (ber_len_t)(end - (q + 1));
	return true;
}

/* ---- searches --------------------------------------------------------------------------- */

/* Did the connection or the server fail, rather than answer this one operation with an
 * error (a size limit, an access rule)? */
static bool
ld_connection_failed(int rc) {
	return rc == LDAP_SERVER_DOWN || rc == LDAP_CONNECT_ERROR || rc == LDAP_BUSY ||
	       rc == LDAP_UNAVAILABLE;
}

static bool
ld_rc_ok(int rc, const char *what, const char *key) {
	if (rc == LDAP_SUCCESS) {
		return true;
	}
	/* No answer in time (ours), or the server's time limit. */
	if (rc == LDAP_TIMEOUT || rc == LDAP_TIMELIMIT_EXCEEDED) {
		dlz_timed_out();
	} else if (ld_connection_failed(rc)) {
		dlz_connection_failed();
	}
	if (rc == LDAP_SIZELIMIT_EXCEEDED || rc == LDAP_ADMINLIMIT_EXCEEDED) {
		/* A transfer reads every entry of the zone in one search, for one snapshot. */
		dlz_log_error_limited("%s %s: %s (%d): the server limits the entries one search of "
				      "the bind DN may return (slapd: limits ... size=unlimited)",
				      what, key, ldap_err2string(rc), rc);
		return false;
	}
	dlz_log_error_limited("%s %s: %s (%d)", what, key, ldap_err2string(rc), rc);
	return false;
}

/* One synchronous subtree search from the base, bounded by the timeout (client and server). */
static int
ld_search_all(struct ld_conn *c, const char *filter, char **attrs, LDAPMessage **res) {
	struct timeval tv = c->st->timeout;

	*res = NULL;
	return ldap_search_ext_s(c->ld, c->st->base, LDAP_SCOPE_SUBTREE, filter, attrs, 0, NULL,
				 NULL, &tv, LDAP_NO_LIMIT, res);
}

/* Room for n parsed entries in c->entries. */
static bool
ld_entries_reserve(struct ld_conn *c, size_t n) {
	if (n > c->entries_cap) {
		struct ld_entry *bigger = realloc(c->entries, n * sizeof(*bigger));
		if (bigger == NULL) {
			return false;
		}
		for (size_t i = c->entries_cap; i < n; i++) {
			memset(&bigger[i], 0, sizeof(bigger[i]));
		}
		c->entries = bigger;
		c->entries_cap = n;
	}
	return true;
}

/* Every entry of a search result into c->entries; their count, or -1 on error. */
static long
ld_entries_read_all(struct ld_conn *c, LDAPMessage *res) {
	size_t n = 0;
	int count = ldap_count_entries(c->ld, res);

	if (count < 0 || !ld_entries_reserve(c, (size_t)count)) {
		return -1;
	}
	for (LDAPMessage *msg = ldap_first_entry(c->ld, res); msg != NULL && n < (size_t)count;
	     msg = ldap_next_entry(c->ld, msg)) {
		if (!ld_entry_read(c->ld, msg, &c->entries[n++])) {
			for (size_t i = 0; i < n; i++) {
				ld_entry_clear(&c->entries[i]);
			}
			return -1;
		}
	}
	return (long)n;
}

static void
ld_entries_clear(struct ld_conn *c, size_t n) {
	for (size_t i = 0; i < n; i++) {
		ld_entry_clear(&c->entries[i]);
	}
}

/*
 * ld_search_all, then its entries read into c->entries: their count, or -1 when the search
 * (logged as what and key) or the reading failed. On success the entries point into *res:
 * the caller frees it with ldap_msgfree after ld_entries_clear.
 */
static long
ld_search_entries(struct ld_conn *c, const char *filter, char **attrs, const char *what,
		  const char *key, LDAPMessage **res) {
	int rc = ld_search_all(c, filter, attrs, res);
	long n = ld_rc_ok(rc, what, key) ? ld_entries_read_all(c, *res) : -1;

	if (n < 0) {
		ldap_msgfree(*res);
	}
	return n;
}

/* ---- instance --------------------------------------------------------------------------- */

static void
ld_state_free(struct ld_state *st) {
	if (st == NULL) {
		return;
	}
	free(st->uri);
	free(st->base);
	free(st->binddn);
	dlz_secret_free(st->password);
	free(st->tls_cacert);
	free(st);
}

static struct timeval
ld_timeval_of(long ms) {
	return (struct timeval){ .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
}

static int
ld_init(const struct dlz_args *args, void **state) {
	const char *uri = dlz_arg_text(args, "uri");
	const char *base = dlz_arg_text(args, "base");
	const char *binddn = dlz_arg_text(args, "binddn");
	const char *password = dlz_arg_text(args, "password");
	const char *tls_cacert = dlz_arg_text(args, "tls_cacert");
	long connect_timeout_ms = dlz_arg_int(args, "connect_timeout_ms");
	long query_timeout_ms = dlz_arg_int(args, "query_timeout_ms");
	bool starttls = dlz_arg_yes(args, "starttls");
	char *password_read;
	struct ld_state *st;

	if (tls_cacert != NULL && !starttls) {
		dlz_log(ISC_LOG_ERROR, "argument tls_cacert needs starttls=yes");
		return DLZ_ERROR;
	}
	/*
	 * No binddn: an anonymous simple bind (empty name and password). The password comes
	 * from password= or, kept out of named.conf and named's environment, from the file
	 * password_file= names (read once, here: named has not started its workers yet).
	 */
	if (binddn == NULL) {
		binddn = "";
	}
	if (!dlz_arg_secret_file(args, "password_file", &password_read)) {
		return DLZ_ERROR;
	}
	st = calloc(1, sizeof(*st));
	if (st == NULL) {
		dlz_secret_free(password_read);
		return DLZ_ERROR;
	}
	st->uri = strdup(uri);
	st->base = strdup(base);
	st->binddn = strdup(binddn);
	st->password = password_read != NULL ? password_read
					     : strdup(password != NULL ? password : "");
	st->starttls = starttls;
	st->tls_cacert = tls_cacert != NULL ? strdup(tls_cacert) : NULL;
	st->connect_timeout = ld_timeval_of(connect_timeout_ms);
	st->timeout = ld_timeval_of(query_timeout_ms);
	if (st->uri == NULL || st->base == NULL || st->binddn == NULL || st->password == NULL ||
	    (tls_cacert != NULL && st->tls_cacert == NULL)) {
		ld_state_free(st);
		return DLZ_ERROR;
	}
	dlz_log(ISC_LOG_INFO, "LDAP store %s base %s, time-outs: connect %ld ms, query %ld ms", uri,
		base, connect_timeout_ms, query_timeout_ms);
	*state = st;
	return DLZ_OK;
}

static void
ld_fini(void *state) {
	ld_state_free(state);
}

/* ---- connections ------------------------------------------------------------------------ */

static void
ld_conn_free(struct ld_conn *c) {
	if (c->ld != NULL) {
		ldap_unbind_ext_s(c->ld, NULL, NULL);
	}
	free(c->filter.data);
	free(c->scratch.data);
	free(c->entries);
	free(c->pending);
	free(c);
}

/* The handle's own TLS context: the certificate demanded and verified (tls_cacert, if given,
 * the only CA trusted); NEWCTX makes a context of these settings for this handle alone. */
static bool
ld_set_tls_options(LDAP *ld, const struct ld_state *st) {
	int demand = LDAP_OPT_X_TLS_DEMAND, server = 0;

	return ldap_set_option(ld, LDAP_OPT_X_TLS_REQUIRE_CERT, &demand) == LDAP_OPT_SUCCESS &&
	       (st->tls_cacert == NULL ||
		ldap_set_option(ld, LDAP_OPT_X_TLS_CACERTFILE, st->tls_cacert) ==
			LDAP_OPT_SUCCESS) &&
	       ldap_set_option(ld, LDAP_OPT_X_TLS_NEWCTX, &server) == LDAP_OPT_SUCCESS;
}

static bool
ld_set_options(LDAP *ld, const struct ld_state *st) {
	int version = LDAP_VERSION3;

	return ldap_set_option(ld, LDAP_OPT_PROTOCOL_VERSION, &version) == LDAP_OPT_SUCCESS &&
	       ldap_set_option(ld, LDAP_OPT_REFERRALS, LDAP_OPT_OFF) == LDAP_OPT_SUCCESS &&
	       /* a signal arriving in a worker must not fail its query */
	       ldap_set_option(ld, LDAP_OPT_RESTART, LDAP_OPT_ON) == LDAP_OPT_SUCCESS &&
	       ldap_set_option(ld, LDAP_OPT_NETWORK_TIMEOUT, &st->connect_timeout) ==
		       LDAP_OPT_SUCCESS &&
	       ldap_set_option(ld, LDAP_OPT_TIMEOUT, &st->timeout) == LDAP_OPT_SUCCESS &&
	       (!st->starttls || ld_set_tls_options(ld, st));
}

static int
ld_connect(void *state, void **connp) {
	const struct ld_state *st = state;
	struct ld_conn *c = calloc(1, sizeof(*c));
	struct berval cred;
	int rc;

	if (c == NULL) {
		return DLZ_ERROR;
	}
	c->st = st;
	rc = ldap_initialize(&c->ld, st->uri);
	if (rc != LDAP_SUCCESS) {
		dlz_log_error_limited("ldap_initialize(%s): %s", st->uri, ldap_err2string(rc));
		c->ld = NULL;
		ld_conn_free(c);
		return DLZ_ERROR;
	}
	if (!ld_set_options(c->ld, st)) {
		dlz_log_error_limited("cannot set the LDAP options of a connection to %s", st->uri);
		ld_conn_free(c);
		return DLZ_ERROR;
	}
	if (st->starttls && (rc = ldap_start_tls_s(c->ld, NULL, NULL)) != LDAP_SUCCESS) {
		dlz_log_error_limited("StartTLS with %s failed: %s (%d)", st->uri,
				      ldap_err2string(rc), rc);
		ld_conn_free(c);
		return DLZ_ERROR;
	}
	cred.bv_val = st->password;
	cred.bv_len = strlen(st->password);
	rc = ldap_sasl_bind_s(c->ld, st->binddn, LDAP_SASL_SIMPLE, &cred, NULL, NULL, NULL);
	if (rc != LDAP_SUCCESS) {
		dlz_log_error_limited("bind to %s as '%s' failed: %s (%d)", st->uri, st->binddn,
				      ldap_err2string(rc), rc);
		ld_conn_free(c);
		return DLZ_ERROR;
	}
	*connp = c;
	return DLZ_OK;
}

static void
ld_disconnect(void *state, void *conn) {
	(void)state;
	ld_conn_free(conn);
}

/* ---- fetch: one search per DNS query ----------------------------------------------------- */

/*
 * (|(dlzZoneName=names[i])... (dlzOwner=o)...) over every candidate zone and the candidate
 * owners: all of them, or only those inside names[zone_index] when the zone is given; then
 * the core's extras.
 */
static const char *
ld_fetch_filter(struct ld_conn *c, const struct dlz_fetch_req *req) {
	struct ld_buf *b = &c->filter;
	unsigned deepest_zone = req->zone_index >= 0 ? (unsigned)req->zone_index
						     : req->nnames - 1;

	ld_buf_reset(b);
	ld_buf_puts(b, "(|");
	for (unsigned i = 0; i < req->nnames; i++) {
		ld_buf_put_assertion(b, "dlzZoneName", req->names[i]);
	}
	for (unsigned i = 0; i <= deepest_zone; i++) {
		ld_buf_put_assertion(b, "dlzOwner", req->names[i]);
		if (i > 0) {
			ld_buf_put_assertion(b, "dlzOwner", req->wilds[i]);
		}
	}
	for (unsigned i = 0; i < req->nextras; i++) {
		ld_buf_put_assertion(b, "dlzOwner", req->extras[i]);
	}
	ld_buf_puts(b, ")");
	return ld_buf_finish(b);
}

/* Index of the candidate zone equal to bv, or -1. */
static int
ld_name_index(const struct dlz_fetch_req *req, const struct berval *bv) {
	for (unsigned i = 0; i < req->nnames; i++) {
		if (ld_bv_equals_str(bv, req->names[i])) {
			return (int)i;
		}
	}
	return -1;
}

/*
 * Report the live zones among the entries and choose the zone whose rows are wanted: *z its
 * index (-1: none), *gen its live generation. false when out of memory.
 */
static bool
ld_report_zones(const struct ld_conn *c, size_t n, const struct dlz_fetch_req *req,
		struct dlz_rowset *out, int *z, long long *gen) {
	*z = -1;
	*gen = -1;
	for (size_t k = 0; k < n; k++) {
		const struct ld_entry *e = &c->entries[k];
		int i;

		/* A zone entry without a generation is still being written: not served yet. */
		if (e->zone_name.bv_val == NULL || e->generation < 0) {
			continue;
		}
		i = ld_name_index(req, &e->zone_name);
		if (i < 0) {
			continue;
		}
		if (!dlz_rowset_add_zone_ref(out, req->names[i])) {
			return false;
		}
		if (req->zone_index >= 0 ? i == req->zone_index : (*z < 0 || i < *z)) {
			*z = i;
			*gen = e->generation;
		}
	}
	return true;
}

/* The records of one owner entry as rows of zone; false when out of memory. */
static bool
ld_add_owner_rows(const struct ld_entry *e, const char *zone, size_t zone_len,
		  struct dlz_rowset *out) {
	for (const struct berval *v = e->records; v != NULL && v->bv_val != NULL; v++) {
		struct berval type, rdata;
		uint32_t ttl;

		if (!ld_record_split(v, &type, &ttl, &rdata)) {
			dlz_log_error_limited("skipping malformed dlzRecord value '%.*s' of %.*s",
					      (int)v->bv_len, v->bv_val, (int)e->owner.bv_len,
					      e->owner.bv_val);
			continue;
		}
		if (!dlz_rowset_add_row_n(out, zone, zone_len, e->owner.bv_val, e->owner.bv_len,
					  type.bv_val, type.bv_len, ttl, rdata.bv_val,
					  rdata.bv_len)) {
			return false;
		}
	}
	return true;
}

/* Rows of the owner entries of zone names[z] at generation gen; stale generations dropped. */
static bool
ld_add_zone_rows(const struct ld_conn *c, size_t n, const char *zone, long long gen,
		 struct dlz_rowset *out) {
	size_t zone_len = strlen(zone);

	for (size_t k = 0; k < n; k++) {
		const struct ld_entry *e = &c->entries[k];
		if (e->owner.bv_val == NULL || e->generation != gen ||
		    !ld_bv_equals(&e->zone, zone, zone_len)) {
			continue;
		}
		if (!ld_add_owner_rows(e, zone, zone_len, out)) {
			return false;
		}
	}
	return true;
}

static int
ld_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct ld_conn *c = conn;
	const char *filter = ld_fetch_filter(c, req);
	LDAPMessage *res = NULL;
	long n;
	int z;
	long long gen;
	bool ok;

	if (filter == NULL) {
		dlz_log_error_limited("out of memory building the filter for %s", req->qname);
		return DLZ_ERROR;
	}
	n = ld_search_entries(c, filter, ld_record_attrs, "search for", req->qname, &res);
	if (n < 0) {
		return DLZ_ERROR;
	}
	ok = ld_report_zones(c, (size_t)n, req, out, &z, &gen) &&
	     (z < 0 || ld_add_zone_rows(c, (size_t)n, req->names[z], gen, out));
	ld_entries_clear(c, (size_t)n);
	ldap_msgfree(res);
	if (!ok) {
		dlz_log_error_limited("out of memory storing the rows for %s", req->qname);
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

/* ---- allnodes: one search for the whole zone ------------------------------------------- */

struct ld_xfr {
	struct ld_conn *c;
	const char *zone;
	long long gen;       /* the zone entry's live generation; -1 until seen */
	bool zone_seen;
	size_t npending;
	dlz_node_cb *cb;
	void *ctx;
};

/* NUL-terminated owner, type and rdata of one record for the callback. */
static int
ld_xfr_emit_record(struct ld_xfr *x, const struct berval *owner, const struct berval *v) {
	struct ld_buf *s = &x->c->scratch;
	struct berval type, rdata;
	uint32_t ttl;
	size_t type_at, rdata_at;

	if (!ld_record_split(v, &type, &ttl, &rdata)) {
		dlz_log_error_limited("skipping malformed dlzRecord value '%.*s' of %.*s",
				      (int)v->bv_len, v->bv_val, (int)owner->bv_len, owner->bv_val);
		return DLZ_OK;
	}
	ld_buf_reset(s);
	ld_buf_put(s, owner->bv_val, owner->bv_len);
	ld_buf_put(s, "", 1);
	type_at = s->len;
	ld_buf_put(s, type.bv_val, type.bv_len);
	ld_buf_put(s, "", 1);
	rdata_at = s->len;
	ld_buf_put(s, rdata.bv_val, rdata.bv_len);
	ld_buf_put(s, "", 1);
	if (s->failed) {
		dlz_log_error_limited("out of memory in the transfer of %s", x->zone);
		return DLZ_ERROR;
	}
	return x->cb(x->ctx, s->data, s->data + type_at, ttl, s->data + rdata_at);
}

/* Every record of one owner entry if it is of the zone's live generation. */
static int
ld_xfr_emit_entry(struct ld_xfr *x, LDAPMessage *msg) {
	struct ld_entry e = { .generation = -1 };
	int rc = DLZ_OK;

	if (!ld_entry_read(x->c->ld, msg, &e)) {
		return DLZ_ERROR;
	}
	if (e.owner.bv_val != NULL && e.generation == x->gen && ld_bv_equals_str(&e.zone, x->zone)) {
		for (const struct berval *v = e.records; v != NULL && v->bv_val != NULL; v++) {
			rc = ld_xfr_emit_record(x, &e.owner, v);
			if (rc != DLZ_OK) {
				break;
			}
		}
	}
	ld_entry_clear(&e);
	return rc;
}

static void
ld_xfr_drop_pending(struct ld_xfr *x) {
	for (size_t i = 0; i < x->npending; i++) {
		ldap_msgfree(x->c->pending[i]);
	}
	x->npending = 0;
}

/* Owner entries that arrived before the zone entry, now that its generation is known. */
static int
ld_xfr_flush_pending(struct ld_xfr *x) {
	int rc = DLZ_OK;

	for (size_t i = 0; i < x->npending && rc == DLZ_OK; i++) {
		rc = ld_xfr_emit_entry(x, x->c->pending[i]);
	}
	ld_xfr_drop_pending(x);
	return rc;
}

static bool
ld_xfr_keep_pending(struct ld_xfr *x, LDAPMessage *msg) {
	struct ld_conn *c = x->c;

	if (x->npending == c->pending_cap) {
		size_t cap = c->pending_cap != 0 ? 2 * c->pending_cap : 64;
		LDAPMessage **bigger = realloc(c->pending, cap * sizeof(*bigger));
		if (bigger == NULL) {
			return false;
		}
		c->pending = bigger;
		c->pending_cap = cap;
	}
	c->pending[x->npending++] = msg;
	return true;
}

/* One search result entry of the transfer; takes msg. */
static int
ld_xfr_entry(struct ld_xfr *x, LDAPMessage *msg) {
	struct ld_entry e = { .generation = -1 };
	int rc;

	if (x->zone_seen) {
		rc = ld_xfr_emit_entry(x, msg);
		ldap_msgfree(msg);
		return rc;
	}
	if (!ld_entry_read(x->c->ld, msg, &e)) {
		ldap_msgfree(msg);
		return DLZ_ERROR;
	}
	if (e.zone_name.bv_val != NULL && ld_bv_equals_str(&e.zone_name, x->zone)) {
		x->zone_seen = true;
		x->gen = e.generation;
		ld_entry_clear(&e);
		ldap_msgfree(msg);
		/* A zone entry without a generation is still being written: no zone yet. */
		return x->gen < 0 ? DLZ_NOTFOUND : ld_xfr_flush_pending(x);
	}
	ld_entry_clear(&e);
	if (!ld_xfr_keep_pending(x, msg)) {
		ldap_msgfree(msg);
		dlz_log_error_limited("out of memory in the transfer of %s", x->zone);
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

/* The messages of search msgid until its final result; DLZ_OK when it succeeded. */
static int
ld_xfr_read(struct ld_xfr *x, int msgid) {
	LDAP *ld = x->c->ld;

	for (;;) {
		struct timeval tv = x->c->st->timeout;
		LDAPMessage *msg = NULL;
		int err = LDAP_SUCCESS, type = ldap_result(ld, msgid, LDAP_MSG_ONE, &tv, &msg);
		int rc;

		if (type <= 0) {
			/* -1: the connection failed; 0: no message within the time-out. */
			ldap_get_option(ld, LDAP_OPT_RESULT_CODE, &err);
			ld_rc_ok(type == 0 ? LDAP_TIMEOUT : err != LDAP_SUCCESS ? err : LDAP_SERVER_DOWN,
				"transfer of", x->zone);
			ldap_msgfree(msg);
			return DLZ_ERROR;
		}
		if (type == LDAP_RES_SEARCH_ENTRY) {
			rc = ld_xfr_entry(x, msg);
			if (rc != DLZ_OK) {
				ldap_abandon_ext(ld, msgid, NULL, NULL);
				return rc;
			}
			continue;
		}
		if (type == LDAP_RES_SEARCH_RESULT) {
			rc = ldap_parse_result(ld, msg, &err, NULL, NULL, NULL, NULL, 1);
			return ld_rc_ok(rc != LDAP_SUCCESS ? rc : err, "transfer of", x->zone)
				       ? DLZ_OK
				       : DLZ_ERROR;
		}
		ldap_msgfree(msg); /* a search reference: there are none in this store */
	}
}

static int
ld_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct ld_conn *c = conn;
	struct ld_xfr x = { .c = c, .zone = zone, .gen = -1, .cb = cb, .ctx = ctx };
	struct ld_buf *b = &c->filter;
	const char *filter;
	int msgid = -1, rc;

	ld_buf_reset(b);
	ld_buf_puts(b, "(|");
	ld_buf_put_assertion(b, "dlzZoneName", zone);
	ld_buf_put_assertion(b, "dlzZone", zone);
	ld_buf_puts(b, ")");
	filter = ld_buf_finish(b);
	if (filter == NULL) {
		return DLZ_ERROR;
	}
	/* No server time limit: a large zone may take longer than one query's budget; each
	 * message still has to arrive within the time-out (ld_xfr_read). */
	rc = ldap_search_ext(c->ld, c->st->base, LDAP_SCOPE_SUBTREE, filter, ld_record_attrs, 0, NULL,
			     NULL, NULL, LDAP_NO_LIMIT, &msgid);
	if (!ld_rc_ok(rc, "transfer of", zone)) {
		return DLZ_ERROR;
	}
	rc = ld_xfr_read(&x, msgid);
	ld_xfr_drop_pending(&x);
	return rc == DLZ_OK && !x.zone_seen ? DLZ_NOTFOUND : rc;
}

/* ---- allowxfr --------------------------------------------------------------------------- */

/* Address text to bytes (IPv4-mapped IPv6 as IPv4): the family, or 0 if not an address. */
static int
ld_addr_parse(const char *text, unsigned char addr[16]) {
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (inet_pton(AF_INET, text, addr) == 1) {
		return AF_INET;
	}
	if (inet_pton(AF_INET6, text, addr) != 1) {
		return 0;
	}
	if (memcmp(addr, mapped, sizeof(mapped)) == 0) {
		memmove(addr, addr + 12, 4);
		return AF_INET;
	}
	return AF_INET6;
}

/* Does a dlzXfrClient value name client? Addresses compare by value ("::1" = "0::1"). */
static bool
ld_client_matches(const char *client, const struct berval *value) {
	char text[ADDR_TEXT_MAX];
	unsigned char a[16], b[16];
	int fa, fb;

	if (value->bv_len >= sizeof(text)) {
		return false;
	}
	memcpy(text, value->bv_val, value->bv_len);
	text[value->bv_len] = '\0';
	fa = ld_addr_parse(client, a);
	fb = ld_addr_parse(text, b);
	if (fa != 0 && fb != 0) {
		return fa == fb && memcmp(a, b, fa == AF_INET ? 4 : 16) == 0;
	}
	return strcasecmp(client, text) == 0;
}

static int
ld_allowxfr(void *conn, const char *zone, const char *client) {
	struct ld_conn *c = conn;
	struct ld_buf *b = &c->filter;
	LDAPMessage *res = NULL;
	const char *filter;
	int verdict = DLZ_NOTFOUND;
	long n;

	ld_buf_reset(b);
	ld_buf_put_assertion(b, "dlzZoneName", zone);
	filter = ld_buf_finish(b);
	if (filter == NULL) {
		return DLZ_ERROR;
	}
	n = ld_search_entries(c, filter, ld_acl_attrs, "transfer ACL of", zone, &res);
	if (n < 0) {
		return DLZ_ERROR;
	}
	for (size_t k = 0; k < (size_t)n; k++) {
		const struct ld_entry *e = &c->entries[k];
		if (e->generation < 0 || !ld_bv_equals_str(&e->zone_name, zone)) {
			continue; /* not live yet: not a zone */
		}
		verdict = DLZ_DENIED;
		for (const struct berval *v = e->clients; v != NULL && v->bv_val != NULL; v++) {
			if (ld_client_matches(client, v)) {
				verdict = DLZ_OK;
				break;
			}
		}
	}
	ld_entries_clear(c, (size_t)n);
	ldap_msgfree(res);
	return verdict;
}

/* ---- the change channel (the core's cache: drivers/common/cache.c) ------------------------- */

/*
 * RFC 4533 content synchronisation from slapd's syncprov overlay (databases/slapd.py), in
 * refreshAndPersist mode, on a connection of the driver's own. It starts from a cookie at the
 * suffix's contextCSN, so the refresh sends nothing and the search goes straight on to
 * persist: slapd sends every entry added or modified after that (with the attributes that say
 * what it is) and every entry deleted (its DN), each with a cookie carrying its CSN.
 *  - A zone entry (dlzZoneName): anything in the zone (a new generation went live, the zone
 *    came or went). An owner entry added or changed (dlzZone, dlzOwner): that owner.
 *  - A deleted entry names only its DN, whose values are hashes (keys never appear in DNs):
 *    dlzId=<generation>-<H(owner)>,dlzId=<H(zone)>. The zone is found by its hash (learnt from
 *    the stream, else one base search of its entry): a generation that is not the live one
 *    changes no answer (the old entries a zone replacement deletes), a live owner gone is
 *    reported as its whole zone (its key is unknown), a zone gone as that zone, and one
 *    whose hash is unknown as everything.
 * Caught up: every bound/4 the driver reads the suffix's contextCSN (a base search on the
 * same connection); once the stream's cookies reach it, every change committed before the
 * read was sent has been reported. One that does not within bound/2 takes the channel down,
 * as does a lost connection or the end of the search; it reconnects every bound/2.
 */
#define LD_CSN_MAX 64
#define LD_ZONES_MAX 65536
#define LD_ZONE_BUCKETS 4096

/* A zone entry's hash (its RDN value), zone key and live generation, as last seen. */
struct ld_zone_seen {
	struct ld_zone_seen *next;
	char *hash;
	char *zone;
	long long generation;
};

struct ld_sync {
	struct ld_conn *c;
	struct dlz_channel *ch;
	int sync_id;
	int beat_id;
	char csn[LD_CSN_MAX];      /* the stream's: every change up to it reported */
	char beat_csn[LD_CSN_MAX]; /* the contextCSN the last heartbeat read */
	bool waiting;              /* a heartbeat is on its way */
	bool beat_read;            /* its search has ended */
	long sent_ms;
	long next_ms;
	long interval_ms;
	long patience_ms;
	struct ld_zone_seen *zones[LD_ZONE_BUCKETS];
	unsigned nzones;
};

static char *ld_sync_attrs[] = { "dlzZoneName", "dlzGeneration", "dlzZone", "dlzOwner", NULL };
static char *ld_csn_attrs[] = { "contextCSN", NULL };

static unsigned
ld_zone_bucket(const char *hash) {
	unsigned h = 2166136261u;

	for (; *hash != '\0'; hash++) {
		h = (h ^ (unsigned char)*hash) * 16777619u;
	}
	return h % LD_ZONE_BUCKETS;
}

static struct ld_zone_seen *
ld_zone_find(struct ld_sync *y, const char *hash) {
	struct ld_zone_seen *z = y->zones[ld_zone_bucket(hash)];

	while (z != NULL && strcmp(z->hash, hash) != 0) {
		z = z->next;
	}
	return z;
}

static void
ld_zones_clear(struct ld_sync *y) {
	for (unsigned b = 0; b < LD_ZONE_BUCKETS; b++) {
		struct ld_zone_seen *z = y->zones[b], *next;
		for (; z != NULL; z = next) {
			next = z->next;
			free(z->hash);
			free(z->zone);
			free(z);
		}
		y->zones[b] = NULL;
	}
	y->nzones = 0;
}

/* Remember hash -> (zone, generation); forgotten all at once past LD_ZONES_MAX (a forgotten
 * zone costs one base search when it is next needed). Out of memory: not remembered. */
static void
ld_zone_note(struct ld_sync *y, const char *hash, const char *zone, size_t zone_len,
	     long long generation) {
	struct ld_zone_seen *z = ld_zone_find(y, hash);

	if (z != NULL && strlen(z->zone) == zone_len && memcmp(z->zone, zone, zone_len) == 0) {
		z->generation = generation;
		return;
	}
	if (y->nzones >= LD_ZONES_MAX) {
		ld_zones_clear(y);
	}
	z = calloc(1, sizeof(*z));
	if (z == NULL || (z->hash = strdup(hash)) == NULL || (z->zone = strndup(zone, zone_len)) == NULL) {
		if (z != NULL) {
			free(z->hash);
			free(z);
		}
		return;
	}
	z->generation = generation;
	z->next = y->zones[ld_zone_bucket(hash)];
	y->zones[ld_zone_bucket(hash)] = z;
	y->nzones++;
}

/* The CSN of a cookie ("rid=000,csn=<CSN>[;<CSN>...]", the greatest), into csn if newer. */
static void
ld_cookie_csn(const struct berval *cookie, char *csn) {
	const char *p = cookie->bv_val, *end = cookie->bv_val + cookie->bv_len;

	for (; p + 4 <= end; p++) {
		if (memcmp(p, "csn=", 4) == 0) {
			break;
		}
	}
	for (p += 4; p < end && *p != ',';) {
		const char *stop = p;
		char one[LD_CSN_MAX];

		while (stop < end && *stop != ',' && *stop != ';') {
			stop++;
		}
		if ((size_t)(stop - p) < sizeof(one)) {
			memcpy(one, p, (size_t)(stop - p));
			one[stop - p] = '\0';
			/* CSNs of one server are fixed-width timestamps first: bytewise order. */
			if (strcmp(one, csn) > 0) {
				strcpy(csn, one);
			}
		}
		p = stop < end && *stop == ';' ? stop + 1 : stop;
	}
}

/* The greatest contextCSN value of an entry, into csn (emptied first). */
static void
ld_context_csn(LDAP *ld, LDAPMessage *entry, char *csn) {
	struct berval **vals = ldap_get_values_len(ld, entry, "contextCSN");

	csn[0] = '\0';
	for (int i = 0; vals != NULL && vals[i] != NULL; i++) {
		if (vals[i]->bv_len < LD_CSN_MAX && strncmp(vals[i]->bv_val, csn, vals[i]->bv_len) > 0) {
			memcpy(csn, vals[i]->bv_val, vals[i]->bv_len);
			csn[vals[i]->bv_len] = '\0';
		}
	}
	ldap_value_free_len(vals);
}

/* The suffix's contextCSN now, synchronously; false if it could not be read. */
static bool
ld_read_context_csn(struct ld_conn *c, char *csn) {
	struct timeval tv = c->st->timeout;
	LDAPMessage *res = NULL, *entry;
	int rc = ldap_search_ext_s(c->ld, c->st->base, LDAP_SCOPE_BASE, "(objectClass=*)",
				   ld_csn_attrs, 0, NULL, NULL, &tv, 1, &res);

	entry = rc == LDAP_SUCCESS ? ldap_first_entry(c->ld, res) : NULL;
	if (entry != NULL) {
		ld_context_csn(c->ld, entry, csn);
	}
	ldap_msgfree(res);
	return entry != NULL && csn[0] != '\0';
}

/* The persistent search, from a cookie at csn; false if it could not be sent. */
static bool
ld_sync_start(struct ld_sync *y) {
	char cookie_text[LD_CSN_MAX + 16];
	struct berval cookie, value = { 0, NULL };
	BerElement *ber = ber_alloc_t(LBER_USE_DER);
	LDAPControl *ctrl = NULL, *ctrls[2] = { NULL, NULL };
	int rc = LDAP_NO_MEMORY;

	snprintf(cookie_text, sizeof(cookie_text), "rid=000,csn=%s", y->csn);
	cookie.bv_val = cookie_text;
	cookie.bv_len = strlen(cookie_text);
	if (ber != NULL && ber_printf(ber, "{eON}", (ber_int_t)LDAP_SYNC_REFRESH_AND_PERSIST,
				      &cookie) != -1 &&
	    ber_flatten2(ber, &value, 0) == 0 &&
	    ldap_control_create(LDAP_CONTROL_SYNC, 1, &value, 1, &ctrl) == LDAP_SUCCESS) {
		ctrls[0] = ctrl;
		rc = ldap_search_ext(y->c->ld, y->c->st->base, LDAP_SCOPE_SUBTREE, "(objectClass=*)",
				     ld_sync_attrs, 0, ctrls, NULL, NULL, 0, &y->sync_id);
	}
	ldap_control_free(ctrl);
	if (ber != NULL) {
		ber_free(ber, 1);
	}
	return rc == LDAP_SUCCESS;
}

/* The suffix of dn after base's "," (DNs compared as given: the server writes them as the
 * driver's base was given), NULL when dn is not below base. */
static char *
ld_dn_below_base(char *dn, const char *base) {
	size_t len = strlen(dn), base_len = strlen(base);

	if (len <= base_len + 1 || strcasecmp(dn + len - base_len, base) != 0 ||
	    dn[len - base_len - 1] != ',') {
		return NULL;
	}
	dn[len - base_len - 1] = '\0';
	return dn; /* now "dlzId=...[,dlzId=...]" */
}

/* A zone entry found by its hash: noted and returned, NULL if there is none (or failure). */
static struct ld_zone_seen *
ld_zone_lookup(struct ld_sync *y, const char *hash) {
	struct ld_zone_seen *z = ld_zone_find(y, hash);
	struct timeval tv = y->c->st->timeout;
	LDAPMessage *res = NULL, *entry;
	struct ld_entry e = { .generation = -1 };
	char dn[512];

	if (z != NULL) {
		return z;
	}
	snprintf(dn, sizeof(dn), "dlzId=%s,%s", hash, y->c->st->base);
	if (ldap_search_ext_s(y->c->ld, dn, LDAP_SCOPE_BASE, "(objectClass=*)", ld_sync_attrs, 0,
			      NULL, NULL, &tv, 1, &res) == LDAP_SUCCESS &&
	    (entry = ldap_first_entry(y->c->ld, res)) != NULL && ld_entry_read(y->c->ld, entry, &e) &&
	    e.zone_name.bv_val != NULL) {
		ld_zone_note(y, hash, e.zone_name.bv_val, e.zone_name.bv_len, e.generation);
	}
	ld_entry_clear(&e);
	ldap_msgfree(res);
	return ld_zone_find(y, hash);
}

/* A deleted entry (rdns: "dlzId=X" or "dlzId=X,dlzId=Y" below the base). */
static void
ld_deleted(struct ld_sync *y, char *rdns) {
	char *comma = strchr(rdns, ',');
	const char *zone_hash = comma != NULL ? comma + 1 : rdns;
	struct ld_zone_seen *z;

	if (comma != NULL) {
		*comma = '\0';
	}
	if (strncasecmp(zone_hash, "dlzId=", 6) != 0 || strncasecmp(rdns, "dlzId=", 6) != 0) {
		return; /* not the store's (the reader's own entry) */
	}
	zone_hash += 6;
	z = ld_zone_lookup(y, zone_hash);
	if (z == NULL) {
		dlz_channel_changed(y->ch, NULL, NULL); /* a zone not found: it could be any */
		return;
	}
	if (comma == NULL) {
		/* The zone entry itself: that zone, as when it came or its generation changed. (It
		 * once flushed everything: at 100 writes/s a fifth of them zone deletions, 359
		 * flushes in 53 s, and ldap+cache answered little more than the plain ldap row.) */
		dlz_channel_changed(y->ch, z->zone, NULL);
		return;
	}
	if (strtoll(rdns + 6, NULL, 10) == z->generation) {
		dlz_channel_changed(y->ch, z->zone, NULL); /* a live owner, its key unknown */
	}
}

/* An entry added or modified: what it says. */
static void
ld_changed(struct ld_sync *y, LDAPMessage *msg, char *rdns) {
	struct ld_entry e = { .generation = -1 };
	char zone[DLZ_KEY_MAX], owner[DLZ_KEY_MAX];

	if (!ld_entry_read(y->c->ld, msg, &e)) {
		dlz_channel_changed(y->ch, NULL, NULL);
	} else if (e.zone_name.bv_val != NULL && e.zone_name.bv_len < sizeof(zone)) {
		memcpy(zone, e.zone_name.bv_val, e.zone_name.bv_len);
		zone[e.zone_name.bv_len] = '\0';
		if (strncasecmp(rdns, "dlzId=", 6) == 0 && strchr(rdns, ',') == NULL) {
			ld_zone_note(y, rdns + 6, zone, strlen(zone), e.generation);
		}
		dlz_channel_changed(y->ch, zone, NULL);
	} else if (e.zone.bv_val != NULL && e.owner.bv_val != NULL && e.zone.bv_len < sizeof(zone) &&
		   e.owner.bv_len < sizeof(owner)) {
		memcpy(zone, e.zone.bv_val, e.zone.bv_len);
		zone[e.zone.bv_len] = '\0';
		memcpy(owner, e.owner.bv_val, e.owner.bv_len);
		owner[e.owner.bv_len] = '\0';
		dlz_channel_changed(y->ch, zone, owner);
	} else if (e.zone_name.bv_val != NULL || e.zone.bv_val != NULL) {
		dlz_channel_changed(y->ch, NULL, NULL); /* a key too long to hold: everything */
	}
	ld_entry_clear(&e);
}

/* One entry of the synchronisation: its state, cookie and what changed. */
static void
ld_sync_entry(struct ld_sync *y, LDAPMessage *msg) {
	LDAPControl **ctrls = NULL, *state;
	BerElement *ber = NULL;
	struct berval uuid, cookie;
	ber_int_t kind = -1;
	ber_len_t len;
	char *dn = ldap_get_dn(y->c->ld, msg), *rdns;

	if (ldap_get_entry_controls(y->c->ld, msg, &ctrls) == LDAP_SUCCESS &&
	    (state = ldap_control_find(LDAP_CONTROL_SYNC_STATE, ctrls, NULL)) != NULL &&
	    (ber = ber_init(&state->ldctl_value)) != NULL &&
	    ber_scanf(ber, "{em", &kind, &uuid) != LBER_ERROR &&
	    ber_peek_tag(ber, &len) == LDAP_TAG_SYNC_COOKIE && ber_scanf(ber, "m", &cookie) != LBER_ERROR) {
		ld_cookie_csn(&cookie, y->csn);
	}
	rdns = dn != NULL ? ld_dn_below_base(dn, y->c->st->base) : NULL;
	if (rdns == NULL) {
		/* the base entry itself, or a DN not understood */
	} else if (kind == LDAP_SYNC_DELETE) {
		ld_deleted(y, rdns);
	} else if (kind == LDAP_SYNC_ADD || kind == LDAP_SYNC_MODIFY) {
		ld_changed(y, msg, rdns);
	}
	if (ber != NULL) {
		ber_free(ber, 1);
	}
	ldap_controls_free(ctrls);
	ldap_memfree(dn);
}

/* A Sync Info message: its cookie; deleted entries named by UUID only: everything. */
static void
ld_sync_info(struct ld_sync *y, LDAPMessage *msg) {
	char *oid = NULL;
	struct berval *data = NULL, cookie;
	BerElement *ber = NULL;
	ber_tag_t tag;
	ber_len_t len;
	ber_int_t deletes = 0;

	if (ldap_parse_intermediate(y->c->ld, msg, &oid, &data, NULL, 0) != LDAP_SUCCESS ||
	    oid == NULL || strcmp(oid, LDAP_SYNC_INFO) != 0 || data == NULL ||
	    (ber = ber_init(data)) == NULL) {
		goto done;
	}
	tag = ber_peek_tag(ber, &len);
	if (tag == LDAP_TAG_SYNC_NEW_COOKIE) {
		if (ber_scanf(ber, "m", &cookie) != LBER_ERROR) {
			ld_cookie_csn(&cookie, y->csn);
		}
	} else if (ber_scanf(ber, "{") != LBER_ERROR) {
		if (ber_peek_tag(ber, &len) == LDAP_TAG_SYNC_COOKIE &&
		    ber_scanf(ber, "m", &cookie) != LBER_ERROR) {
			ld_cookie_csn(&cookie, y->csn);
		}
		if (tag == LDAP_TAG_SYNC_ID_SET && ber_peek_tag(ber, &len) == LBER_BOOLEAN) {
			ber_scanf(ber, "b", &deletes);
		}
		if (deletes) {
			dlz_channel_changed(y->ch, NULL, NULL);
		}
	}
done:
	if (ber != NULL) {
		ber_free(ber, 1);
	}
	ldap_memfree(oid);
	ber_bvfree(data);
}

/* One message of either search; false: the channel went down. */
static bool
ld_sync_message(struct ld_sync *y, LDAPMessage *msg) {
	int type = ldap_msgtype(msg), id = ldap_msgid(msg), err = LDAP_OTHER;

	if (id == y->beat_id && type == LDAP_RES_SEARCH_ENTRY) {
		ld_context_csn(y->c->ld, msg, y->beat_csn);
	} else if (id == y->beat_id && type == LDAP_RES_SEARCH_RESULT) {
		y->beat_read = true;
	} else if (id == y->sync_id && type == LDAP_RES_SEARCH_ENTRY) {
		ld_sync_entry(y, msg);
	} else if (id == y->sync_id && type == LDAP_RES_INTERMEDIATE) {
		ld_sync_info(y, msg);
	} else if (id == y->sync_id && type == LDAP_RES_SEARCH_RESULT) {
		ldap_parse_result(y->c->ld, msg, &err, NULL, NULL, NULL, NULL, 0);
		dlz_channel_down(y->ch, "slapd ended the synchronisation: %s (%d)",
				 ldap_err2string(err), err);
		return false;
	}
	return true;
}

/* Every message libldap has or can read now; false: the channel went down. */
static bool
ld_sync_drain(struct ld_sync *y) {
	struct timeval zero = { 0, 0 };
	LDAPMessage *msg = NULL;
	int type;

	while ((type = ldap_result(y->c->ld, LDAP_RES_ANY, LDAP_MSG_ONE, &zero, &msg)) > 0) {
		bool up = ld_sync_message(y, msg);

		ldap_msgfree(msg);
		msg = NULL;
		if (!up) {
			return false;
		}
	}
	if (type < 0) {
		int err = LDAP_OTHER;

		ldap_get_option(y->c->ld, LDAP_OPT_RESULT_CODE, &err);
		dlz_channel_down(y->ch, "the connection to slapd failed: %s (%d)",
				 ldap_err2string(err), err);
		return false;
	}
	return true;
}

static bool
ld_send_heartbeat(struct ld_sync *y, long now) {
	int rc = ldap_search_ext(y->c->ld, y->c->st->base, LDAP_SCOPE_BASE, "(objectClass=*)",
				 ld_csn_attrs, 0, NULL, NULL, NULL, 1, &y->beat_id);

	if (rc != LDAP_SUCCESS) {
		dlz_channel_down(y->ch, "cannot ask slapd for its contextCSN: %s (%d)",
				 ldap_err2string(rc), rc);
		return false;
	}
	y->beat_csn[0] = '\0';
	y->waiting = true;
	y->beat_read = false;
	y->sent_ms = now;
	return true;
}

/* Follow the synchronisation until it fails (down) or the driver stops. */
static void
ld_sync_follow(struct ld_sync *y) {
	int fd = -1;

	ldap_get_option(y->c->ld, LDAP_OPT_DESC, &fd);
	y->waiting = false;
	y->next_ms = dlz_now_ms();
	dlz_channel_up(y->ch);
	dlz_log(ISC_LOG_INFO, "cache: following slapd's content synchronisation from %s", y->csn);
	for (;;) {
		long now = dlz_now_ms(), wait;
		int rc;

		if (y->waiting && y->beat_read && y->beat_csn[0] != '\0' &&
		    strcmp(y->csn, y->beat_csn) >= 0) {
			dlz_channel_synced(y->ch, y->sent_ms);
			y->waiting = false;
			y->next_ms = y->sent_ms + y->interval_ms;
		}
		if (y->waiting && now - y->sent_ms > y->patience_ms) {
			dlz_channel_down(y->ch, "slapd's synchronisation did not reach its contextCSN "
						"within %ld ms", y->patience_ms);
			return;
		}
		if (!y->waiting && now >= y->next_ms && !ld_send_heartbeat(y, now)) {
			return;
		}
		wait = y->waiting ? y->sent_ms + y->patience_ms - now : y->next_ms - now;
		rc = dlz_channel_wait(y->ch, fd, POLLIN, wait > 1 ? wait : 1);
		if (rc < 0 || !ld_sync_drain(y)) {
			return;
		}
	}
}

static void
ld_watch(void *state, struct dlz_channel *ch) {
	long bound = dlz_channel_bound_ms(ch);
	struct ld_sync *y = calloc(1, sizeof(*y));

	if (y == NULL) {
		dlz_channel_down(ch, "out of memory");
		return;
	}
	y->ch = ch;
	y->interval_ms = bound / 4;
	y->patience_ms = bound / 2;
	do {
		void *conn = NULL;

		if (ld_connect(state, &conn) != DLZ_OK) {
			dlz_channel_down(ch, "cannot connect to slapd");
			continue;
		}
		y->c = conn;
		y->csn[0] = '\0';
		if (!ld_read_context_csn(y->c, y->csn) || !ld_sync_start(y)) {
			dlz_channel_down(ch, "cannot start slapd's content synchronisation (is the "
					     "syncprov overlay on?)");
		} else {
			ld_sync_follow(y);
		}
		ld_conn_free(y->c);
		y->c = NULL;
	} while (dlz_channel_wait(ch, -1, 0, bound / 2) == 0);
	ld_zones_clear(y);
	free(y);
}

static const struct dlz_arg_spec ld_args[] = {
	DLZ_TEXT_REQUIRED("uri", "the server's URI as libldap takes it: ldap://host:port"),
	DLZ_TEXT_REQUIRED("base", "the DN under which the zones' entries are"),
	DLZ_TEXT("binddn", "the DN of a simple bind (none: an anonymous bind)"),
	DLZ_TEXT("password", "the bind's password (the suite gives password_file instead)"),
	DLZ_TEXT("password_file",
		 "a file whose first line is the bind's password, kept out of named.conf and "
		 "named's environment; replaces password"),
	DLZ_YESNO("starttls", 0,
		  "StartTLS before every bind, the server's certificate verified (against "
		  "tls_cacert, else libldap's default CAs)"),
	DLZ_TEXT("tls_cacert", "with starttls=yes: the CA file the server's certificate is "
			       "verified against"),
	DLZ_INT("connect_timeout_ms", DEFAULT_CONNECT_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a connection may take"),
	DLZ_INT("query_timeout_ms", DEFAULT_QUERY_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms the bind and each search may take"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "ldap",
	.thread_safe = true,
	.args = ld_args,
	.init = ld_init,
	.fini = ld_fini,
	.connect = ld_connect,
	.disconnect = ld_disconnect,
	.fetch = ld_fetch,
	.allnodes = ld_allnodes,
	.allowxfr = ld_allowxfr,
	.watch = ld_watch,
};
