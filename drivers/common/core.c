/*
 * The dlz_* entry points and the DNS logic shared by every driver.
 *
 * How BIND 9.18's sdlz layer drives us for one DNS query for Q (lib/dns/dlz.c,
 * lib/dns/sdlz.c; confirmed with trace=yes):
 *  1. dlz_findzonedb(Q), then findzonedb of each shorter suffix until one succeeds (never
 *     for the root);
 *  2. dlz_lookup(Z, n) for each name n from the zone apex Z ("@") down to Q, stopping at a
 *     delegation (NS) or DNAME; when a name is not found, sdlz itself probes the wildcards
 *     "*.<parent>", "*.<grandparent>", ..., "*" (deepest first) and takes the first that
 *     exists, whatever exists between: that is not RFC 4592, which only allows the wildcard
 *     child of the closest encloser;
 *  3. more lookups in Z for the authority section (apex NS/SOA); for each additional-section
 *     name (NS, MX, SRV targets) lookups straight into Z without findzonedb: the target, and
 *     for MX/SRV "_tcp.<target>" and "_<port>._tcp.<target>" (TLSA); a CNAME or DNAME chain
 *     restarts at step 1 with the target.
 * A zone transfer is dlz_allowzonexfr, dlz_lookup("@"), dlz_allnodes, dlz_lookup("@").
 *
 * One backend round trip per DNS query: findzonedb(Q) fetches, in one call, which suffixes of
 * Q are zones and every row of the deepest zone owned by Q, an ancestor of Q or a wildcard
 * child of an ancestor, and keeps that in a per-thread memo for a short time (memo_ms). The
 * following findzonedb(parent) calls and every lookup of step 2 are answered from it. The
 * memo also knows which names exist, so a wildcard probe is answered only for the child of
 * the closest encloser: a probe sdlz makes above it is answered "not found" (RFC 4592).
 * Any call the memo cannot answer makes its own fetch (and its own memo: a lookup for an
 * additional-section name fetches that name with its ancestors). Memos serve only the DNS
 * query they were made for and only for memo_ms: the first findzonedb of every query
 * fetches, so a change committed to the store is seen by the next query that starts after
 * it, and no answer mixes data older than its query. (BIND does not say where a query
 * starts: a findzonedb of the parent of the previous findzonedb name is taken as the same
 * query. A new query for exactly that name within memo_ms is answered from the memo: data
 * at most memo_ms old, never older.)
 *
 * A backend failure (a call returns DLZ_ERROR) closes that connection; the call is retried
 * once on a new connection unless the failed one was new itself, and a query that still
 * fails is answered SERVFAIL: never a crash, a hang or a wrong answer.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"

#define MEMO_RING 4
#define ENCLOSER_UNKNOWN (-2)

static const char *const core_keys[] = { "connections", "memo_ms", "trace", NULL };

struct memo {
	bool valid;
	bool failed; /* the fetch failed: lookups of this query fail too (SERVFAIL) */
	long stamp_ms;
	char q[DLZ_KEY_MAX];
	size_t qlen;
	unsigned nnames;
	unsigned offs[DLZ_MAX_LABELS];
	const char *names[DLZ_MAX_LABELS];
	const char *wilds[DLZ_MAX_LABELS];
	const char *owners[2 * DLZ_MAX_LABELS];
	char *wildbuf;
	size_t wildcap;
	bool is_zone[DLZ_MAX_LABELS];
	int zone_index;     /* rows held are those of names[zone_index]; -1: no zone */
	int findzone_index; /* the last findzonedb this memo answered; -1: made by a lookup */
	int encloser;       /* index of the closest encloser of Q, computed on first need */
	unsigned query;     /* the DNS query (thread_state.query) it was made for */
	struct dlz_rowset rows;
};

struct thread_state {
	struct thread_state *next;
	unsigned home;
	unsigned newest;
	/* Counts DNS queries: every findzonedb that is not the continuation of the previous one
	 * starts one. Memos serve only the query they were made for: no answer is built from
	 * data read before the query began. */
	unsigned query;
	struct memo memos[MEMO_RING];
};

struct instance {
	void *state;
	struct dlz_args *args;
	struct pool pool;
	bool pool_ready;
	dns_sdlz_putrr_t *putrr;
	dns_sdlz_putnamedrr_t *putnamedrr;
	long memo_ms;
	bool trace;
	pthread_key_t key;
	bool key_ready;
	pthread_mutex_t threads_lock;
	struct thread_state *threads;
	atomic_uint next_home;
};

/* ---- time and per-thread state ---------------------------------------------------------- */

static long
now_ms(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool
memo_fresh(const struct instance *inst, const struct memo *m, long now) {
	return m->valid && now - m->stamp_ms < inst->memo_ms;
}

static struct thread_state *
thread_state(struct instance *inst) {
	struct thread_state *ts = pthread_getspecific(inst->key);

	if (ts != NULL) {
		return ts;
	}
	ts = calloc(1, sizeof(*ts));
	if (ts == NULL) {
		return NULL;
	}
	ts->home = atomic_fetch_add(&inst->next_home, 1) % inst->pool.count;
	if (pthread_setspecific(inst->key, ts) != 0) {
		free(ts);
		return NULL;
	}
	/* Registered once per thread so that dlz_destroy can free every thread's state. */
	pthread_mutex_lock(&inst->threads_lock);
	ts->next = inst->threads;
	inst->threads = ts;
	pthread_mutex_unlock(&inst->threads_lock);
	return ts;
}

static void
free_threads(struct instance *inst) {
	struct thread_state *ts = inst->threads, *next;

	for (; ts != NULL; ts = next) {
		next = ts->next;
		for (unsigned i = 0; i < MEMO_RING; i++) {
			rowset_free(&ts->memos[i].rows);
			free(ts->memos[i].wildbuf);
		}
		free(ts);
	}
	inst->threads = NULL;
}

/* ---- backend calls on a pooled connection ----------------------------------------------- */

typedef int conn_op(void *conn, void *arg);

/*
 * op on a pooled connection. DLZ_ERROR closes the connection; if it was not opened for this
 * call (a server restart breaks idle connections) the op runs once more on a new one.
 */
static int
run_on_conn(struct instance *inst, unsigned home, conn_op *op, void *arg, bool may_retry) {
	for (int attempt = 0; attempt < 2; attempt++) {
		struct pool_slot *slot = pool_checkout(&inst->pool, home);
		bool fresh;
		int rc;

		if (slot == NULL) {
			return DLZ_ERROR;
		}
		fresh = slot->fresh;
		rc = op(slot->conn, arg);
		pool_checkin(&inst->pool, slot, rc == DLZ_ERROR);
		if (rc != DLZ_ERROR || fresh || !may_retry) {
			return rc;
		}
	}
	return DLZ_ERROR;
}

/* ---- the memo: one fetch and what it says ----------------------------------------------- */

static bool
memo_prepare(struct memo *m, const char *key) {
	size_t need = 0, pos = 0;

	m->valid = false;
	if (!key_from_bind(m->q, key)) {
		return false;
	}
	m->qlen = strlen(m->q);
	m->nnames = key_ancestors(m->q, m->qlen, m->offs);
	if (m->nnames == 0) {
		return false;
	}
	for (unsigned i = 1; i < m->nnames; i++) {
		need += 2 + (m->qlen - m->offs[i]) + 1;
	}
	if (need > m->wildcap) {
		char *bigger = realloc(m->wildbuf, need);
		if (bigger == NULL) {
			return false;
		}
		m->wildbuf = bigger;
		m->wildcap = need;
	}
	m->wilds[0] = NULL;
	for (unsigned i = 0; i < m->nnames; i++) {
		m->names[i] = m->q + m->offs[i];
		m->owners[i] = m->names[i];
		if (i == 0) {
			continue;
		}
		m->wilds[i] = m->wildbuf + pos;
		m->wildbuf[pos++] = '*';
		m->wildbuf[pos++] = '.';
		memcpy(m->wildbuf + pos, m->names[i], m->qlen - m->offs[i] + 1);
		pos += m->qlen - m->offs[i] + 1;
		m->owners[m->nnames + i - 1] = m->wilds[i];
	}
	return true;
}

/* Index i of names[] equal to key (by length first: each ancestor has its own length). */
static int
memo_name_index(const struct memo *m, const char *key, size_t len) {
	for (unsigned i = 0; i < m->nnames; i++) {
		size_t name_len = m->qlen - m->offs[i];
		if (name_len == len) {
			return memcmp(m->names[i], key, len) == 0 ? (int)i : -1;
		}
		if (name_len < len) {
			return -1;
		}
	}
	return -1;
}

struct fetch_call {
	const struct dlz_fetch_req *req;
	struct dlz_rowset *rows;
};

static int
fetch_op(void *conn, void *arg) {
	struct fetch_call *call = arg;

	rowset_reset(call->rows);
	return dlz_backend.fetch(conn, call->req, call->rows);
}

/* Keep only the rows of the memo's zone, so that every later scan is by owner alone. */
static void
memo_keep_zone_rows(struct memo *m) {
	struct dlz_rowset *rs = &m->rows;
	const char *zone = m->zone_index >= 0 ? m->names[m->zone_index] : NULL;
	size_t kept = 0;

	for (size_t i = 0; i < rs->nrows; i++) {
		if (zone != NULL && strcmp(rs->rows[i].zone, zone) == 0 &&
		    dlz_key_in_zone(rs->rows[i].owner, zone)) {
			rs->rows[kept++] = rs->rows[i];
		}
	}
	rs->nrows = kept;
}

/* Fetch for m's Q: zone_index >= 0 asks for that zone's rows, -1 for the deepest zone's. */
static bool
memo_fetch(struct instance *inst, struct thread_state *ts, struct memo *m, int zone_index) {
	struct dlz_fetch_req req = {
		.qname = m->q,
		.nnames = m->nnames,
		.names = m->names,
		.wilds = m->wilds,
		.zone_index = zone_index,
		.nowners = 2 * m->nnames - 1,
		.owners = m->owners,
	};
	struct fetch_call call = { .req = &req, .rows = &m->rows };

	if (run_on_conn(inst, ts->home, fetch_op, &call, true) != DLZ_OK) {
		dlz_log_error_limited("fetch for %s failed; answering SERVFAIL", m->q);
		return false;
	}
	m->zone_index = zone_index;
	for (unsigned i = 0; i < m->nnames; i++) {
		m->is_zone[i] = rowset_has_zone(&m->rows, m->names[i]);
		if (m->zone_index < 0 && m->is_zone[i]) {
			m->zone_index = (int)i;
		}
	}
	memo_keep_zone_rows(m);
	m->encloser = ENCLOSER_UNKNOWN;
	m->stamp_ms = now_ms();
	m->valid = true;
	m->failed = false;
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "fetch %s zone=%s rows=%zu", m->q,
			m->zone_index >= 0 ? m->names[m->zone_index] : "(none)", m->rows.nrows);
	}
	return true;
}

/*
 * BIND answers REFUSED ("not authoritative") when findzonedb fails. To make a backend
 * failure a SERVFAIL ("try again") instead, findzonedb claims Q as the zone and this memo
 * makes the lookups of the same query fail without asking the backend again.
 */
static void
memo_mark_failed(struct memo *m) {
	rowset_reset(&m->rows);
	m->zone_index = 0;
	m->findzone_index = -1;
	m->encloser = ENCLOSER_UNKNOWN;
	m->stamp_ms = now_ms();
	m->valid = true;
	m->failed = true;
}

static struct memo *
memo_new(struct thread_state *ts) {
	ts->newest = (ts->newest + 1) % MEMO_RING;
	ts->memos[ts->newest].query = ts->query;
	return &ts->memos[ts->newest];
}

static bool
owner_exists(const struct memo *m, const char *owner) {
	size_t len = strlen(owner);

	for (size_t i = 0; i < m->rows.nrows; i++) {
		const struct dlz_row *row = &m->rows.rows[i];
		if (row->owner_len == len && memcmp(row->owner, owner, len) == 0) {
			return true;
		}
	}
	return false;
}

/* The deepest of Q and its ancestors inside the zone that exists (data or ENT). */
static int
memo_encloser(struct memo *m) {
	if (m->encloser == ENCLOSER_UNKNOWN) {
		m->encloser = m->zone_index;
		for (int i = 0; i < m->zone_index; i++) {
			if (owner_exists(m, m->names[i])) {
				m->encloser = i;
				break;
			}
		}
	}
	return m->encloser;
}

/* ---- answering a lookup from a memo ----------------------------------------------------- */

enum match { MATCH_NONE, MATCH_NAME, MATCH_WILD, MATCH_ABSENT };

/*
 * How key relates to m's candidates inside m's zone: Q or an ancestor (MATCH_NAME), or the
 * wildcard child "*." of a strict ancestor, *index set to that ancestor (MATCH_WILD). A key
 * equal to Q is always MATCH_NAME, even if it starts with "*": that is a direct query.
 * A name below Q when Q does not exist cannot exist either, since every store marks empty
 * non-terminals (MATCH_ABSENT): BIND's additional-section lookups of "_tcp.<target>" and then
 * "_<port>._tcp.<target>" (TLSA) cost one fetch instead of two.
 */
static enum match
memo_match(struct memo *m, const char *zone, const char *key, int *index) {
	size_t len = strlen(key);
	int i;

	if (!m->valid || m->zone_index < 0 || strcmp(m->names[m->zone_index], zone) != 0) {
		return MATCH_NONE;
	}
	if (len == m->qlen && memcmp(key, m->q, len) == 0) {
		*index = 0;
		return MATCH_NAME;
	}
	if (len > 2 && key[0] == '*' && key[1] == '.') {
		i = memo_name_index(m, key + 2, len - 2);
		if (i >= 1 && i <= m->zone_index) {
			*index = i;
			return MATCH_WILD;
		}
	}
	i = memo_name_index(m, key, len);
	if (i >= 0 && i <= m->zone_index) {
		*index = i;
		return MATCH_NAME;
	}
	if (dlz_key_in_zone(key, m->q) && memo_encloser(m) != 0) {
		return MATCH_ABSENT;
	}
	return MATCH_NONE;
}

/* Put the records of owner to BIND; SUCCESS if the owner exists (an ENT has no records). */
static isc_result_t
memo_answer(struct instance *inst, const struct memo *m, const char *owner,
	    dns_sdlzlookup_t *lookup) {
	size_t len = strlen(owner);
	bool found = false;

	for (size_t i = 0; i < m->rows.nrows; i++) {
		const struct dlz_row *row = &m->rows.rows[i];
		if (row->owner_len != len || memcmp(row->owner, owner, len) != 0) {
			continue;
		}
		found = true;
		if (strcmp(row->type, DLZ_ENT_TYPE) != 0 && !emit_rr(inst->putrr, lookup, row)) {
			return ISC_R_FAILURE;
		}
	}
	return found ? ISC_R_SUCCESS : ISC_R_NOTFOUND;
}

static const char *
result_text(isc_result_t result) {
	switch (result) {
	case ISC_R_SUCCESS:
		return "success";
	case ISC_R_NOTFOUND:
		return "not found";
	case ISC_R_NOPERM:
		return "denied";
	default:
		return "failure";
	}
}

/* ---- entry points ------------------------------------------------------------------------ */

int
dlz_version(unsigned int *flags) {
	if (dlz_backend.thread_safe) {
		*flags |= DNS_SDLZFLAG_THREADSAFE;
	}
	return DLZ_DLOPEN_VERSION;
}

static void
instance_free(struct instance *inst) {
	if (inst->pool_ready) {
		pool_destroy(&inst->pool);
	}
	if (inst->state != NULL && dlz_backend.fini != NULL) {
		dlz_backend.fini(inst->state);
	}
	free_threads(inst);
	if (inst->key_ready) {
		pthread_key_delete(inst->key);
	}
	pthread_mutex_destroy(&inst->threads_lock);
	args_free(inst->args);
	free(inst);
}

/* The (name, function) pairs named appends to dlz_create's arguments. */
static void
take_helpers(va_list ap, log_t **log_fn, struct instance *inst) {
	typedef void (*any_fn)(void);
	const char *helper;

	while ((helper = va_arg(ap, const char *)) != NULL) {
		any_fn fn = va_arg(ap, any_fn);
		if (strcmp(helper, "log") == 0) {
			*log_fn = (log_t *)fn;
		} else if (strcmp(helper, "putrr") == 0) {
			inst->putrr = (dns_sdlz_putrr_t *)fn;
		} else if (strcmp(helper, "putnamedrr") == 0) {
			inst->putnamedrr = (dns_sdlz_putnamedrr_t *)fn;
		}
	}
}

static bool
instance_configure(struct instance *inst) {
	long connections;

	if (!dlz_arg_long(inst->args, "connections", 1, 1, 4096, &connections) ||
	    !dlz_arg_long(inst->args, "memo_ms", 100, 0, 60000, &inst->memo_ms) ||
	    !dlz_arg_bool(inst->args, "trace", false, &inst->trace)) {
		return false;
	}
	if (dlz_backend.init != NULL && dlz_backend.init(inst->args, &inst->state) != DLZ_OK) {
		return false;
	}
	if (!pool_init(&inst->pool, &dlz_backend, inst->state, (unsigned)connections)) {
		dlz_log(ISC_LOG_ERROR, "cannot create %ld connection slots", connections);
		return false;
	}
	inst->pool_ready = true;
	if (pthread_key_create(&inst->key, NULL) != 0) {
		return false;
	}
	inst->key_ready = true;
	return true;
}

/* One connection now, so that a wrong address or password stops named at start-up. */
static bool
instance_first_connection(struct instance *inst) {
	struct pool_slot *slot = pool_checkout(&inst->pool, 0);

	if (slot == NULL) {
		dlz_log(ISC_LOG_ERROR, "cannot connect to the backend");
		return false;
	}
	pool_checkin(&inst->pool, slot, false);
	return true;
}

isc_result_t
dlz_create(const char *dlzname, unsigned int argc, char *argv[], void **dbdata, ...) {
	struct instance *inst = calloc(1, sizeof(*inst));
	log_t *log_fn = NULL;
	va_list ap;

	if (inst == NULL) {
		return ISC_R_NOMEMORY;
	}
	pthread_mutex_init(&inst->threads_lock, NULL);
	va_start(ap, dbdata);
	take_helpers(ap, &log_fn, inst);
	va_end(ap);
	log_setup(log_fn, dlz_backend.name);
	if (inst->putrr == NULL || inst->putnamedrr == NULL) {
		dlz_log(ISC_LOG_ERROR, "named did not pass putrr and putnamedrr");
		instance_free(inst);
		return ISC_R_FAILURE;
	}
	inst->args = args_parse(argc > 0 ? argc - 1 : 0, argc > 0 ? argv + 1 : argv, core_keys,
				dlz_backend.arg_keys);
	if (inst->args == NULL || !instance_configure(inst) || !instance_first_connection(inst)) {
		dlz_log(ISC_LOG_ERROR, "dlz \"%s\" not started", dlzname);
		instance_free(inst);
		return ISC_R_FAILURE;
	}
	dlz_log(ISC_LOG_INFO, "dlz \"%s\" ready: connections=%u memo_ms=%ld%s%s", dlzname,
		inst->pool.count, inst->memo_ms, dlz_backend.thread_safe ? " thread-safe" : "",
		inst->trace ? " trace" : "");
	*dbdata = inst;
	return ISC_R_SUCCESS;
}

void
dlz_destroy(void *dbdata) {
	instance_free(dbdata);
}

isc_result_t
dlz_findzonedb(void *dbdata, const char *name, dns_clientinfomethods_t *methods,
	       dns_clientinfo_t *clientinfo) {
	struct instance *inst = dbdata;
	struct thread_state *ts = thread_state(inst);
	char key[DLZ_KEY_MAX];
	struct memo *m;
	isc_result_t result;
	bool from_memo = false;

	(void)methods;
	(void)clientinfo;
	if (ts == NULL) {
		return ISC_R_NOMEMORY;
	}
	if (!key_from_bind(key, name)) {
		return ISC_R_NOTFOUND;
	}
	m = &ts->memos[ts->newest];
	/* BIND's next call for the same DNS query asks for the parent of the previous name. */
	if (memo_fresh(inst, m, now_ms()) && m->findzone_index >= 0 &&
	    (unsigned)m->findzone_index + 1 < m->nnames &&
	    strcmp(m->names[m->findzone_index + 1], key) == 0) {
		m->findzone_index++;
		from_memo = true;
	} else {
		ts->query++;
		m = memo_new(ts);
		if (!memo_prepare(m, key)) {
			return ISC_R_NOTFOUND;
		}
		if (!memo_fetch(inst, ts, m, -1)) {
			memo_mark_failed(m);
			if (inst->trace) {
				dlz_log(ISC_LOG_INFO, "findzonedb %s -> success (fetch failed)", key);
			}
			return ISC_R_SUCCESS;
		}
		m->findzone_index = 0;
	}
	result = m->is_zone[m->findzone_index] ? ISC_R_SUCCESS : ISC_R_NOTFOUND;
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "findzonedb %s -> %s (%s)", key, result_text(result),
			from_memo ? "memo" : "fetched");
	}
	return result;
}

/* A fresh memo of the current DNS query that can answer (zone, key), newest first. */
static struct memo *
find_memo(struct instance *inst, struct thread_state *ts, const char *zone, const char *key,
	  enum match *match, int *index) {
	long now = now_ms();

	for (unsigned k = 0; k < MEMO_RING; k++) {
		struct memo *m = &ts->memos[(ts->newest + MEMO_RING - k) % MEMO_RING];
		if (m->query == ts->query && memo_fresh(inst, m, now)) {
			*match = memo_match(m, zone, key, index);
			if (*match != MATCH_NONE) {
				return m;
			}
		}
	}
	return NULL;
}

/* A lookup no memo covers: fetch key itself, with the rows of the zone BIND named. */
static struct memo *
fetch_for_lookup(struct instance *inst, struct thread_state *ts, const char *zone,
		 const char *key, isc_result_t *failure) {
	struct memo *m = memo_new(ts);
	int zone_index;

	*failure = ISC_R_NOTFOUND;
	if (!memo_prepare(m, key)) {
		return NULL;
	}
	zone_index = memo_name_index(m, zone, strlen(zone));
	if (zone_index < 0) {
		return NULL;
	}
	if (!memo_fetch(inst, ts, m, zone_index)) {
		*failure = ISC_R_FAILURE;
		return NULL;
	}
	m->findzone_index = -1;
	return m;
}

isc_result_t
dlz_lookup(const char *zone, const char *name, void *dbdata, dns_sdlzlookup_t *lookup,
	   dns_clientinfomethods_t *methods, dns_clientinfo_t *clientinfo) {
	struct instance *inst = dbdata;
	struct thread_state *ts = thread_state(inst);
	char key[DLZ_KEY_MAX], zone_key[DLZ_KEY_MAX];
	enum match match = MATCH_NAME;
	isc_result_t result;
	struct memo *m;
	int index = 0;
	bool from_memo = true;

	(void)methods;
	(void)clientinfo;
	if (ts == NULL) {
		return ISC_R_NOMEMORY;
	}
	if (!key_from_bind(zone_key, zone) || !key_absolute(key, zone_key, name)) {
		return ISC_R_NOTFOUND;
	}
	m = find_memo(inst, ts, zone_key, key, &match, &index);
	if (m != NULL && m->failed) {
		return ISC_R_FAILURE;
	}
	if (m == NULL) {
		from_memo = false;
		m = fetch_for_lookup(inst, ts, zone_key, key, &result);
		if (m == NULL) {
			return result;
		}
		match = memo_match(m, zone_key, key, &index);
	}
	if (match == MATCH_ABSENT) {
		result = ISC_R_NOTFOUND;
	} else if (match == MATCH_WILD && index != memo_encloser(m)) {
		/* sdlz probing a wildcard above the closest encloser: RFC 4592 says no. */
		result = ISC_R_NOTFOUND;
	} else {
		result = memo_answer(inst, m, key, lookup);
	}
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "lookup %s in %s -> %s (%s%s)", name, zone_key,
			result_text(result), from_memo ? "memo" : "fetched",
			match == MATCH_WILD     ? ", wildcard probe"
			: match == MATCH_ABSENT ? ", below a missing name"
						: "");
	}
	return result;
}

struct allnodes_call {
	struct instance *inst;
	dns_sdlzallnodes_t *allnodes;
	const char *zone;
	size_t emitted;
	bool rejected;
};

static int
allnodes_record(void *ctx, const char *owner, const char *type, uint32_t ttl,
		const char *rdata) {
	struct allnodes_call *call = ctx;

	if (strcmp(type, DLZ_ENT_TYPE) == 0) {
		return DLZ_OK;
	}
	if (!emit_named(call->inst->putnamedrr, call->allnodes, owner, type, ttl, rdata)) {
		call->rejected = true;
		return DLZ_DENIED; /* stops the walk without blaming the connection */
	}
	call->emitted++;
	return DLZ_OK;
}

static int
allnodes_op(void *conn, void *arg) {
	struct allnodes_call *call = arg;

	return dlz_backend.allnodes(conn, call->zone, allnodes_record, call);
}

isc_result_t
dlz_allnodes(const char *zone, void *dbdata, dns_sdlzallnodes_t *allnodes) {
	struct instance *inst = dbdata;
	struct thread_state *ts = thread_state(inst);
	char zone_key[DLZ_KEY_MAX];
	struct allnodes_call call = { .inst = inst, .allnodes = allnodes, .zone = zone_key };
	isc_result_t result;
	int rc;

	if (ts == NULL) {
		return ISC_R_NOMEMORY;
	}
	if (dlz_backend.allnodes == NULL || !key_from_bind(zone_key, zone)) {
		return ISC_R_NOTFOUND;
	}
	/* No retry: records already handed to BIND cannot be taken back. */
	rc = run_on_conn(inst, ts->home, allnodes_op, &call, false);
	result = rc == DLZ_OK ? ISC_R_SUCCESS : rc == DLZ_NOTFOUND ? ISC_R_NOTFOUND
								     : ISC_R_FAILURE;
	if (inst->trace || result == ISC_R_FAILURE) {
		dlz_log(result == ISC_R_FAILURE ? ISC_LOG_ERROR : ISC_LOG_INFO,
			"allnodes %s -> %s (%zu records)", zone_key, result_text(result),
			call.emitted);
	}
	return result;
}

struct allowxfr_call {
	const char *zone;
	const char *client;
};

static int
allowxfr_op(void *conn, void *arg) {
	struct allowxfr_call *call = arg;

	return dlz_backend.allowxfr(conn, call->zone, call->client);
}

isc_result_t
dlz_allowzonexfr(void *dbdata, const char *name, const char *client) {
	struct instance *inst = dbdata;
	struct thread_state *ts = thread_state(inst);
	char zone_key[DLZ_KEY_MAX];
	struct allowxfr_call call = { .zone = zone_key, .client = client };
	isc_result_t result;
	int rc;

	if (ts == NULL) {
		return ISC_R_NOMEMORY;
	}
	if (dlz_backend.allowxfr == NULL || !key_from_bind(zone_key, name)) {
		return ISC_R_NOTFOUND;
	}
	/* A zone transfer starts here, not with findzonedb: its lookups get no earlier memo. */
	ts->query++;
	rc = run_on_conn(inst, ts->home, allowxfr_op, &call, true);
	switch (rc) {
	case DLZ_OK:
		result = ISC_R_SUCCESS;
		break;
	case DLZ_DENIED:
		result = ISC_R_NOPERM;
		break;
	case DLZ_NOTFOUND:
		result = ISC_R_NOTFOUND;
		break;
	default:
		result = ISC_R_FAILURE;
	}
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "allowzonexfr %s client %s -> %s", zone_key, client,
			result_text(result));
	}
	return result;
}
