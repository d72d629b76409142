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
 *  3. more lookups in Z for the authority section (apex NS/SOA; with BIND's default
 *     minimal-responses no-auth-recursive only for queries without RD); for each
 *     additional-section name (NS, MX, SRV targets) lookups straight into Z without
 *     findzonedb: the target, and for MX/SRV "_tcp.<target>" and "_<port>._tcp.<target>"
 *     (TLSA); a CNAME or DNAME chain restarts at step 1 with the target.
 * A zone transfer is dlz_allowzonexfr, dlz_lookup("@"), dlz_allnodes, dlz_lookup("@").
 *
 * One backend round trip per DNS query: findzonedb(Q) fetches, in one call, which suffixes of
 * Q are zones and every row of the deepest zone owned by Q, an ancestor of Q or a wildcard
 * child of an ancestor, and keeps that in a per-thread memo for a short time (memo_ms). The
 * following findzonedb(parent) calls and every lookup of step 2 are answered from it. The
 * memo also knows which names exist, so a wildcard probe is answered only for the child of
 * the closest encloser: a probe sdlz makes above it is answered "not found" (RFC 4592).
 * Memos serve only the DNS query they were made for and only for memo_ms: the first
 * findzonedb of every query fetches, so a change committed to the store is seen by the next
 * query that starts after it, and no answer mixes data older than its query. (BIND does not
 * say where a query starts: a findzonedb of the parent of the previous findzonedb name, when
 * that was no zone, is taken as the same query. A new query for exactly that name within
 * memo_ms is answered from the memo: data at most memo_ms old, never older.)
 *
 * Step 3 and hints (hints.c). Any lookup the memo cannot answer makes its own fetch (and its
 * own memo: the name with its ancestors), and teaches the thread's hint table that BIND looked
 * that name up in Z during a query for Q. The first fetch of a later query for Q (or, once a
 * second query name needed it too, of any query in Z) asks for the hinted names as well, as
 * `extras`: each hinted name h becomes a chain of the memo (h, its ancestors down to Z and
 * their wildcard children), answered like Q's own chain, so the glue and target lookups of
 * step 3 cost no round trip. The table also remembers which suffix of Q was the deepest zone:
 * the next fetch asks about the suffixes down to it only (a new zone below it is still found;
 * if it is no zone any more, the fetch is repeated with every suffix). Hints are names only,
 * never data: every row still comes from the fetch of the query being answered, so a stale
 * hint costs one fallback fetch and nothing else. Bounds: hint_zones zones per thread (2-way
 * set associative, least recently used replaced; 0 turns hints off), HINTS_PER_ZONE names per
 * zone, HINT_DEPTH labels below the zone, DLZ_MAX_EXTRAS extra owners per fetch.
 *
 * The cache (cache=yes, for a backend with a change channel; cache.c). A fetch is then first
 * asked of the cache, and only what it cannot answer goes to the store, whose answer it keeps:
 * entries per (zone, owner) and per name (is it a zone), negative ones too. The memos work as
 * before on top of it. The store reports every change through the channel, an update through
 * this driver invalidates its owners at its commit, and while the channel is down or behind
 * the bound every fetch goes to the store: what the next query sees is never older than
 * cache_bound_ms, instead of never older than the query.
 *
 * A wildcard probe belongs to the name whose lookup just failed (sdlz probes right after it,
 * in the same call): it is matched first against the memo and chain that answered the last
 * lookup that was no probe, so a probe is judged against that name's closest encloser. What
 * is a probe is told by the order of the calls, not by the name: sdlz's getnodedata probes
 * only after a lookup of N answered ISC_R_NOTFOUND, and then exactly "*.<parent of N>",
 * "*.<grandparent>", ..., "*" at the apex, one after another until one succeeds, on the same
 * thread. A lookup of "*.w" at any other time is a lookup of that name (the walk down to
 * "x.*.w" passes it, and a wildcard NS or DNAME there is a zone cut or a redirection).
 *
 * A backend failure (a call returns DLZ_ERROR) closes that connection; the call is retried
 * once on a new connection unless the failed one was new itself or the store timed out, and a
 * query that still fails is answered SERVFAIL: never a crash, a hang or a wrong answer. A
 * store that times out or cannot be connected to is taken for down for down_interval_ms
 * (pool.c): SERVFAIL at once, and one try per interval. Data the backend cannot
 * use (DLZ_BAD_DATA: a malformed row) is answered SERVFAIL too, but the connection stays: a
 * new one would read the same row, at the price of a reconnect per query.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "core.h"

#define MEMO_RING 4
#define ENCLOSER_UNKNOWN (-2)
#define MAX_CHAINS (1 + HINTS_PER_ZONE)
#define MAX_OWNERS (2 * DLZ_MAX_LABELS - 1 + DLZ_MAX_EXTRAS)
#define DEFAULT_HINT_ZONES 4096
/*
 * How long a store that failed to connect or timed out is taken for down (pool.c): queries
 * are answered SERVFAIL at once meanwhile, and one thread tries again when it has passed. A
 * second: one bounded wait per second per named instead of one per query on every worker, and
 * a store that is back is served again within the second that test_drivers.py allows an
 * update to take.
 */
#define DEFAULT_DOWN_INTERVAL_MS 1000
/*
 * The cache (cache.c), off unless cache=yes: the plain driver measures its store on every
 * query. 64 MiB holds the rows of about half a million owners of a few records each;
 * cache_size_kb bounds it (its entries, their rows and their slots). cache_bound_ms is the
 * oldest a cached answer may be after a change was committed: a second, as the update
 * visibility the suite expects of every driver (tests/test_drivers.py).
 */
#define DEFAULT_CACHE_KB (64 * 1024)
#define DEFAULT_CACHE_BOUND_MS 1000

/* The arguments every driver takes (update.c reads the three update_ ones). */
static const struct dlz_arg_spec core_args[] = {
	DLZ_INT("connections", 1, 1, 4096,
		"connections to the store, each serving one query at a time (servers/dlz.py "
		"gives named's worker thread count)"),
	DLZ_INT("memo_ms", 100, 0, 60000,
		"ms for which one fetch's rows answer the further lookups of the DNS query it "
		"was made for"),
	DLZ_INT("hint_zones", DEFAULT_HINT_ZONES, 0, 1L << 24,
		"zones per thread whose additional-section names are fetched with the query "
		"name (0: no hints)"),
	DLZ_INT("down_interval_ms", DEFAULT_DOWN_INTERVAL_MS, 0, DLZ_MS_MAX,
		"ms for which a store that timed out or refused a connection is taken for down: "
		"SERVFAIL at once, one try per interval"),
	DLZ_YESNO("trace", false,
		  "log every call from named (findzonedb, lookup, transfers, updates) and every "
		  "fetch, at level info"),
	DLZ_TEXT("update_zones",
		 "Z1,Z2,...: the zones (without the final dot) that take RFC 2136 updates; an "
		 "error with a store that cannot write"),
	DLZ_TEXT("update_key",
		 "the TSIG key (a key statement of named.conf) granted every name in "
		 "update_zones; any other signer is refused"),
	DLZ_YESNO("update_unsigned", false,
		  "unsigned updates are granted too (named lets them through over TCP only)"),
	DLZ_YESNO("cache", false,
		  "answer from a cache in named's memory that the store keeps coherent through its "
		  "change channel (a driver without one refuses it)"),
	DLZ_INT("cache_size_kb", DEFAULT_CACHE_KB, 64, 1L << 30,
		"KiB the cache holds at most (its entries, their rows, their slots); CLOCK evicts "
		"beyond"),
	DLZ_INT("cache_bound_ms", DEFAULT_CACHE_BOUND_MS, 10, DLZ_MS_MAX,
		"ms a cached answer may be behind a committed change at most: the cache answers "
		"only while its channel has shown it is caught up within it"),
	DLZ_ARGS_END,
};

const struct dlz_arg_spec *
dlzbench_core_args(void) {
	return core_args;
}

const struct dlz_arg_spec *
dlzbench_driver_args(void) {
	return dlz_backend.args;
}

/*
 * A name a memo answers for, with its ancestors down to the memo's zone: the query name Q
 * (chain 0), or a hinted name fetched along with Q (an extra).
 */
struct chain {
	const char *leaf;
	size_t len;
	const unsigned *offs; /* ancestor i is leaf + offs[i]; ancestor zi is the zone */
	int zi;
	int encloser; /* index of the closest encloser of leaf, computed on first need */
	int hint;     /* -1 for Q; else the hint's ref (hints_used) */
};

struct memo {
	bool valid;
	bool failed; /* the fetch failed: lookups of this query fail too (SERVFAIL) */
	long stamp_ms;
	unsigned long generation; /* instance.generation before the fetch began */
	char q[DLZ_KEY_MAX];
	size_t qlen;
	unsigned nnames;
	unsigned offs[DLZ_MAX_LABELS];
	const char *names[DLZ_MAX_LABELS];
	const char *wilds[DLZ_MAX_LABELS];
	/* Q's names and wilds, then the extras; owner_lens[i] = strlen(owners[i]). */
	const char *owners[MAX_OWNERS];
	unsigned owner_lens[MAX_OWNERS];
	unsigned nowners;
	unsigned fetch_nnames; /* the fetch asks about names[0..fetch_nnames-1] */
	char *wildbuf;
	size_t wildcap;
	char *extrabuf; /* the extras' texts */
	size_t extracap;
	int extras_zone; /* index in names[] of the extras' zone; -1: none */
	struct chain chains[MAX_CHAINS];
	unsigned nchains;
	unsigned hint_offs[HINTS_PER_ZONE][HINT_DEPTH + 1];
	bool is_zone[DLZ_MAX_LABELS];
	int zone_index;     /* rows held are those of names[zone_index]; -1: no zone */
	int findzone_index; /* the last findzonedb this memo answered; -1: made by a lookup */
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
	uint64_t qhash; /* hash of the current query's name (hints); 0: no findzonedb began it */
	/* The memo and chain of the last lookup that was no wildcard probe: sdlz probes the
	 * wildcards of a name right after the lookup of that name failed. */
	struct memo *last_memo;
	unsigned last_chain;
	/* The key of the wildcard sdlz probes next if the last lookup on this thread failed
	 * (see the top); "": no probe is due. */
	char probe_next[DLZ_KEY_MAX];
	struct hint_table *hints;
	/* Fetches answered from the cache, from the store after a miss, and from the store with
	 * the cache bypassed: counted per thread, summed at dlz_destroy. */
	unsigned long cache_hits;
	unsigned long cache_misses;
	unsigned long cache_bypassed;
	struct memo memos[MEMO_RING];
};

struct instance {
	void *state;
	struct dlz_args *args;
	struct pool pool;
	bool pool_ready;
	dns_sdlz_putrr_t *putrr;
	dns_sdlz_putnamedrr_t *putnamedrr;
	dns_dlz_writeablezone_t *writeable_zone;
	struct updates *updates; /* NULL: read-only */
	struct cache *cache;     /* NULL: every fetch reads the store */
	/* Committed updates so far: a memo made before the latest commit is stale. */
	atomic_ulong generation;
	long memo_ms;
	long hint_zones;
	long down_interval_ms;
	bool trace;
	pthread_key_t key;
	bool key_ready;
	pthread_mutex_t threads_lock;
	struct thread_state *threads;
	atomic_uint next_home;
};

/* ---- memo age and per-thread state ------------------------------------------------------ */

/*
 * A memo serves for memo_ms, and never past a committed update: lookups after the commit
 * see it. The counter is written once per update and read here with a plain load (relaxed:
 * the commit happened before named answered the update, and a query that starts after that
 * answer is ordered after it by the network round trip and named's own locking).
 */
static bool
memo_fresh(struct instance *inst, const struct memo *m, long now) {
	return m->valid && now - m->stamp_ms < inst->memo_ms &&
	       m->generation == atomic_load_explicit(&inst->generation, memory_order_relaxed);
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
	/* Without memory for hints the thread works without them. */
	ts->hints = hints_new((unsigned)inst->hint_zones);
	if (pthread_setspecific(inst->key, ts) != 0) {
		hints_free(ts->hints);
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
			free(ts->memos[i].extrabuf);
		}
		hints_free(ts->hints);
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

static void
memo_add_owner(struct memo *m, const char *owner, size_t len) {
	m->owners[m->nowners] = owner;
	m->owner_lens[m->nowners] = (unsigned)len;
	m->nowners++;
}

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
		if (i == 0) {
			continue;
		}
		m->wilds[i] = m->wildbuf + pos;
		m->wildbuf[pos++] = '*';
		m->wildbuf[pos++] = '.';
		memcpy(m->wildbuf + pos, m->names[i], m->qlen - m->offs[i] + 1);
		pos += m->qlen - m->offs[i] + 1;
	}
	m->fetch_nnames = m->nnames;
	m->extras_zone = -1;
	m->chains[0] = (struct chain){ .leaf = m->q, .len = m->qlen, .offs = m->offs, .zi = -1,
				       .encloser = ENCLOSER_UNKNOWN, .hint = -1 };
	m->nchains = 1;
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

/*
 * The fetch asks about names[0..count-1] only (the candidate zones; BIND never asks about a
 * suffix above the deepest zone), so its candidate owners are those names and their
 * wildcards: owners = names[0..count-1], wilds[1..count-1], and no extras yet.
 */
static void
memo_set_owners(struct memo *m, unsigned count) {
	m->fetch_nnames = count;
	m->nowners = 0;
	m->extras_zone = -1;
	m->nchains = 1;
	for (unsigned i = 0; i < count; i++) {
		memo_add_owner(m, m->names[i], m->qlen - m->offs[i]);
	}
	for (unsigned i = 1; i < count; i++) {
		memo_add_owner(m, m->wilds[i], m->qlen - m->offs[i] + 2);
	}
}

static bool
memo_has_owner(const struct memo *m, const char *owner, size_t len) {
	for (unsigned i = 0; i < m->nowners; i++) {
		if (m->owner_lens[i] == len && memcmp(m->owners[i], owner, len) == 0) {
			return true;
		}
	}
	return false;
}

/*
 * The labels of hinted name h (a key) below zone names[z]: its ancestors' offsets into offs
 * and their number below the zone, or 0 if h is not strictly inside that zone or is more than
 * HINT_DEPTH labels below it.
 */
static int
hint_depth(const struct memo *m, int z, const struct hint_pick *h,
	   unsigned offs[DLZ_MAX_LABELS]) {
	size_t zone_len = m->qlen - m->offs[z];
	unsigned n = key_ancestors(h->name, h->len, offs);
	int depth = (int)n - ((int)m->nnames - z);

	if (depth < 1 || depth > HINT_DEPTH || h->len - offs[depth] != zone_len ||
	    memcmp(h->name + offs[depth], m->names[z], zone_len) != 0) {
		return 0;
	}
	return depth;
}

/* Bytes the extras of a hint of the given depth take: the name and its wildcards. */
static size_t
hint_text_size(const struct hint_pick *h, const unsigned *offs, int depth) {
	size_t need = h->len + 1;

	for (int i = 1; i <= depth; i++) {
		need += 2 + (h->len - offs[i]) + 1;
	}
	return need;
}

/*
 * One hinted name as chain c of m: its text copied to *pos in extrabuf, and as extras every
 * candidate owner it brings that m does not ask for yet (itself, its ancestors below the
 * zone, their wildcard children). False (nothing added) if that would pass DLZ_MAX_EXTRAS.
 */
static bool
memo_add_chain(struct memo *m, unsigned c, const struct hint_pick *h, int depth, size_t *pos) {
	unsigned *offs = m->hint_offs[c - 1];
	unsigned before = m->nowners;
	size_t start = *pos;
	char *leaf = m->extrabuf + *pos;

	memcpy(leaf, h->name, h->len + 1);
	*pos += h->len + 1;
	for (int i = 0; i < depth; i++) {
		size_t len = h->len - offs[i];
		if (!memo_has_owner(m, leaf + offs[i], len)) {
			if (m->nowners == MAX_OWNERS) {
				goto undo;
			}
			memo_add_owner(m, leaf + offs[i], len);
		}
	}
	for (int i = 1; i <= depth; i++) {
		size_t len = h->len - offs[i] + 2;
		char *wild = m->extrabuf + *pos;

		wild[0] = '*';
		wild[1] = '.';
		memcpy(wild + 2, leaf + offs[i], len - 1);
		if (memo_has_owner(m, wild, len)) {
			continue;
		}
		if (m->nowners == MAX_OWNERS) {
			goto undo;
		}
		memo_add_owner(m, wild, len);
		*pos += len + 1;
	}
	m->chains[c] = (struct chain){ .leaf = leaf, .len = h->len, .offs = offs, .zi = depth,
				       .encloser = ENCLOSER_UNKNOWN, .hint = (int)h->ref };
	return true;
undo:
	m->nowners = before;
	*pos = start;
	return false;
}

/*
 * What the first fetch of a DNS query asks for, from the thread's hints. When a suffix of Q
 * was a zone before (the deepest such, H = names[h]), the fetch asks about names[0..h] only:
 * a zone below H would be found all the same, and a zone above H is looked for again only
 * if H is no zone any more (memo_fetch). The names hinted for H's zone are asked for too,
 * each as a chain of its own, so that the lookups BIND makes for them in this DNS query are
 * answered from this memo.
 */
static void
memo_plan_first_fetch(struct memo *m, struct thread_state *ts) {
	struct hint_pick picks[HINTS_PER_ZONE];
	unsigned lens[DLZ_MAX_LABELS], offs[DLZ_MAX_LABELS];
	int depths[HINTS_PER_ZONE], z;
	unsigned n;
	size_t need = 0, pos = 0;

	for (unsigned i = 0; i < m->nnames; i++) {
		lens[i] = (unsigned)(m->qlen - m->offs[i]);
	}
	n = hints_for(ts->hints, m->names, lens, m->nnames, ts->qhash, ts->query, picks, &z);
	memo_set_owners(m, z >= 0 ? (unsigned)z + 1 : m->nnames);
	for (unsigned k = 0; k < n; k++) {
		/* A name Q's own fetch asks for needs no chain. */
		depths[k] = memo_name_index(m, picks[k].name, picks[k].len) >= 0
				    ? 0
				    : hint_depth(m, z, &picks[k], offs);
		if (depths[k] > 0) {
			need += hint_text_size(&picks[k], offs, depths[k]);
		}
	}
	if (need == 0) {
		return;
	}
	if (need > m->extracap) {
		char *bigger = realloc(m->extrabuf, need);
		if (bigger == NULL) {
			return; /* no hints for this query */
		}
		m->extrabuf = bigger;
		m->extracap = need;
	}
	for (unsigned k = 0; k < n; k++) {
		if (depths[k] > 0) {
			key_ancestors(picks[k].name, picks[k].len, offs);
			memcpy(m->hint_offs[m->nchains - 1], offs,
			       (size_t)(depths[k] + 1) * sizeof(offs[0]));
			if (memo_add_chain(m, m->nchains, &picks[k], depths[k], &pos)) {
				m->nchains++;
			}
		}
	}
	if (m->nchains > 1) {
		m->extras_zone = z;
	}
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

/*
 * The rows call->req asks for: from the cache when it holds every fact they need (*source
 * says which), else from the store, whose answer then goes into the cache.
 */
static int
fetch_rows(struct instance *inst, struct thread_state *ts, struct fetch_call *call,
	   const char **source) {
	struct cache_ticket ticket = { .live = false };
	int rc;

	*source = "store";
	if (inst->cache != NULL) {
		rowset_reset(call->rows);
		switch (cache_fetch(inst->cache, call->req, call->rows)) {
		case CACHE_HIT:
			ts->cache_hits++;
			*source = "cache";
			return DLZ_OK;
		case CACHE_MISS:
			ts->cache_misses++;
			*source = "store, not cached";
			break;
		case CACHE_BYPASSED:
			ts->cache_bypassed++;
			*source = "store, cache bypassed";
			break;
		}
		ticket = cache_ticket(inst->cache);
	}
	rc = run_on_conn(inst, ts->home, fetch_op, call, true);
	if (rc == DLZ_OK && inst->cache != NULL) {
		cache_store(inst->cache, call->req, call->rows, ticket);
	}
	return rc;
}

/* Keep only the rows of the memo's zone, so that every later scan is by owner alone. */
static void
memo_keep_zone_rows(struct memo *m) {
	struct dlz_rowset *rs = &m->rows;
	const char *zone = m->zone_index >= 0 ? m->names[m->zone_index] : NULL;
	size_t zone_len = zone != NULL ? m->qlen - m->offs[m->zone_index] : 0, kept = 0;

	for (size_t i = 0; i < rs->nrows; i++) {
		if (zone != NULL && rs->rows[i].zone_len == zone_len &&
		    memcmp(rs->rows[i].zone, zone, zone_len) == 0 &&
		    dlz_key_in_zone(rs->rows[i].owner, zone)) {
			rs->rows[kept++] = rs->rows[i];
		}
	}
	rs->nrows = kept;
}

/* One backend call for what m asks (see memo_set_owners); false if it failed (logged). */
static bool
memo_fetch_once(struct instance *inst, struct thread_state *ts, struct memo *m,
		int zone_index) {
	unsigned base = 2 * m->fetch_nnames - 1;
	struct dlz_fetch_req req = {
		.qname = m->q,
		.nnames = m->fetch_nnames,
		.names = m->names,
		.wilds = m->wilds,
		.zone_index = zone_index,
		.nowners = m->nowners,
		.owners = m->owners,
		.extras_zone = m->extras_zone,
		.nextras = m->nowners - base,
		.extras = m->owners + base,
	};
	struct fetch_call call = { .req = &req, .rows = &m->rows };
	const char *source;

	m->generation = atomic_load_explicit(&inst->generation, memory_order_relaxed);
	if (fetch_rows(inst, ts, &call, &source) != DLZ_OK) {
		dlz_log_error_limited("fetch for %s failed; answering SERVFAIL", m->q);
		return false;
	}
	m->zone_index = zone_index;
	for (unsigned i = 0; i < m->nnames; i++) {
		m->is_zone[i] = i < m->fetch_nnames && rowset_has_zone(&m->rows, m->names[i]);
		if (m->zone_index < 0 && m->is_zone[i]) {
			m->zone_index = (int)i;
		}
	}
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "fetch %s zone=%s rows=%zu extras=%u (%s)", m->q,
			m->zone_index >= 0 ? m->names[m->zone_index] : "(none)", m->rows.nrows,
			req.nextras, source);
	}
	return true;
}

/*
 * Fetch for m's Q: zone_index >= 0 asks for that zone's rows, -1 for the deepest zone's.
 * A first fetch that asked about the suffixes up to a zone known from earlier queries and
 * found none of them a zone (that zone is gone) asks again about all of them.
 */
static bool
memo_fetch(struct instance *inst, struct thread_state *ts, struct memo *m, int zone_index) {
	if (!memo_fetch_once(inst, ts, m, zone_index)) {
		return false;
	}
	if (m->zone_index < 0 && m->fetch_nnames < m->nnames) {
		unsigned h = m->fetch_nnames - 1;

		hints_forget_zone(ts->hints, m->names[h], m->qlen - m->offs[h]);
		memo_set_owners(m, m->nnames);
		if (!memo_fetch_once(inst, ts, m, zone_index)) {
			return false;
		}
	}
	memo_keep_zone_rows(m);
	m->chains[0].zi = m->zone_index;
	/* Hinted names of another zone than the one found answer nothing. */
	if (m->zone_index < 0 || m->zone_index != m->extras_zone) {
		m->nchains = 1;
	}
	for (unsigned c = 0; c < m->nchains; c++) {
		m->chains[c].encloser = ENCLOSER_UNKNOWN;
	}
	m->stamp_ms = dlz_now_ms();
	m->valid = true;
	m->failed = false;
	return true;
}

/*
 * BIND answers REFUSED ("not authoritative") when findzonedb fails. To make a backend
 * failure a SERVFAIL ("try again") instead, findzonedb claims Q as the zone and this memo
 * makes the lookups of the same query fail without asking the backend again.
 */
static void
memo_mark_failed(struct instance *inst, struct memo *m) {
	m->generation = atomic_load_explicit(&inst->generation, memory_order_relaxed);
	rowset_reset(&m->rows);
	m->zone_index = 0;
	m->findzone_index = -1;
	m->nchains = 1;
	m->chains[0].zi = 0;
	m->chains[0].encloser = ENCLOSER_UNKNOWN;
	m->stamp_ms = dlz_now_ms();
	m->valid = true;
	m->failed = true;
}

static struct memo *
memo_new(struct thread_state *ts) {
	ts->newest = (ts->newest + 1) % MEMO_RING;
	if (ts->last_memo == &ts->memos[ts->newest]) {
		ts->last_memo = NULL;
	}
	ts->memos[ts->newest].query = ts->query;
	return &ts->memos[ts->newest];
}

static bool
owner_exists(const struct memo *m, const char *owner, size_t len) {
	for (size_t i = 0; i < m->rows.nrows; i++) {
		const struct dlz_row *row = &m->rows.rows[i];
		if (row->owner_len == len && memcmp(row->owner, owner, len) == 0) {
			return true;
		}
	}
	return false;
}

/* The deepest of c's leaf and its ancestors inside the zone that exists (data or ENT). */
static int
chain_encloser(const struct memo *m, struct chain *c) {
	if (c->encloser == ENCLOSER_UNKNOWN) {
		c->encloser = c->zi;
		for (int i = 0; i < c->zi; i++) {
			if (owner_exists(m, c->leaf + c->offs[i], c->len - c->offs[i])) {
				c->encloser = i;
				break;
			}
		}
	}
	return c->encloser;
}

/* Index i <= zi of c's ancestor equal to key, or -1. */
static int
chain_name_index(const struct chain *c, const char *key, size_t len) {
	for (int i = 0; i <= c->zi; i++) {
		size_t name_len = c->len - c->offs[i];
		if (name_len == len) {
			return memcmp(c->leaf + c->offs[i], key, len) == 0 ? i : -1;
		}
		if (name_len < len) {
			return -1;
		}
	}
	return -1;
}

/* ---- answering a lookup from a memo ----------------------------------------------------- */

enum match { MATCH_NONE, MATCH_NAME, MATCH_WILD, MATCH_ABSENT };

/*
 * How key relates to chain c inside m's zone: its leaf or an ancestor (MATCH_NAME), or, when
 * the lookup is sdlz's wildcard probe (probe), the wildcard child "*." of a strict ancestor,
 * *index set to that ancestor (MATCH_WILD). A key equal to the leaf is always MATCH_NAME: a
 * memo fetched for the probe itself (none was fresh) has it as its leaf. A name below the
 * leaf when the leaf does not exist cannot exist either, since every store marks empty
 * non-terminals (MATCH_ABSENT): BIND's additional-section lookups of "_tcp.<target>" and then
 * "_<port>._tcp.<target>" (TLSA) cost one fetch instead of two.
 */
static enum match
chain_match(const struct memo *m, struct chain *c, const char *key, size_t len, bool probe,
	    int *index) {
	int i;

	if (len == c->len && memcmp(key, c->leaf, len) == 0) {
		*index = 0;
		return MATCH_NAME;
	}
	if (probe && len > 2 && key[0] == '*' && key[1] == '.') {
		i = chain_name_index(c, key + 2, len - 2);
		if (i >= 1) {
			*index = i;
			return MATCH_WILD;
		}
	}
	i = chain_name_index(c, key, len);
	if (i >= 0) {
		*index = i;
		return MATCH_NAME;
	}
	if (dlz_key_in_zone(key, c->leaf) && chain_encloser(m, c) != 0) {
		return MATCH_ABSENT;
	}
	return MATCH_NONE;
}

/* How m can answer key in zone: *chain the chain that can (prefer's first, if >= 0). */
static enum match
memo_match(struct memo *m, const char *zone, const char *key, bool probe, int prefer,
	   unsigned *chain, int *index) {
	size_t len = strlen(key);
	enum match match;

	if (!m->valid || m->zone_index < 0 || strcmp(m->names[m->zone_index], zone) != 0) {
		return MATCH_NONE;
	}
	if (prefer >= 0 && (unsigned)prefer < m->nchains) {
		match = chain_match(m, &m->chains[prefer], key, len, probe, index);
		if (match != MATCH_NONE) {
			*chain = (unsigned)prefer;
			return match;
		}
	}
	for (unsigned c = 0; c < m->nchains; c++) {
		if ((int)c == prefer) {
			continue;
		}
		match = chain_match(m, &m->chains[c], key, len, probe, index);
		if (match != MATCH_NONE) {
			*chain = c;
			return match;
		}
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

/* What the cache did, summed over named's threads (which no longer run). */
static void
log_cache_counts(struct instance *inst) {
	unsigned long hits = 0, misses = 0, bypassed = 0;
	struct cache_counts n;

	for (struct thread_state *ts = inst->threads; ts != NULL; ts = ts->next) {
		hits += ts->cache_hits;
		misses += ts->cache_misses;
		bypassed += ts->cache_bypassed;
	}
	cache_counts(inst->cache, &n);
	dlz_log(ISC_LOG_INFO,
		"cache: %lu fetches answered from the cache, %lu from the store (not cached), %lu "
		"from the store (cache bypassed); %lu entries held (%lu of %zu bytes), %lu "
		"inserted, %lu evicted; %lu changes applied, %lu flushes",
		hits, misses, bypassed, n.entries, n.bytes, cache_budget(inst->cache), n.inserted,
		n.evicted, n.invalidations, n.flushes);
}

static void
instance_free(struct instance *inst) {
	/* The channel's watcher uses the backend's state: it stops before anything goes. */
	cache_free(inst->cache);
	if (inst->pool_ready) {
		pool_destroy(&inst->pool);
	}
	if (inst->state != NULL && dlz_backend.fini != NULL) {
		dlz_backend.fini(inst->state);
	}
	updates_free(inst->updates);
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
		} else if (strcmp(helper, "writeable_zone") == 0) {
			inst->writeable_zone = (dns_dlz_writeablezone_t *)fn;
		}
	}
}

/* cache=yes, cache_size_kb, cache_bound_ms: inst->cache, or NULL when off. */
static bool
instance_configure_cache(struct instance *inst) {
	if (!dlz_arg_yes(inst->args, "cache")) {
		if (dlz_arg_given(inst->args, "cache_size_kb") ||
		    dlz_arg_given(inst->args, "cache_bound_ms")) {
			dlz_log(ISC_LOG_ERROR, "cache_size_kb and cache_bound_ms need cache=yes");
			return false;
		}
		return true;
	}
	if (dlz_backend.watch == NULL) {
		dlz_log(ISC_LOG_ERROR, "cache=yes: the %s store cannot tell the driver of its "
				       "changes, so the driver cannot cache",
			dlz_backend.name);
		return false;
	}
	inst->cache = cache_new((size_t)dlz_arg_int(inst->args, "cache_size_kb") * 1024,
				dlz_arg_int(inst->args, "cache_bound_ms"));
	if (inst->cache == NULL) {
		dlz_log(ISC_LOG_ERROR, "cannot allocate the cache");
		return false;
	}
	return true;
}

static bool
instance_configure(struct instance *inst) {
	long connections = dlz_arg_int(inst->args, "connections");

	inst->down_interval_ms = dlz_arg_int(inst->args, "down_interval_ms");
	inst->memo_ms = dlz_arg_int(inst->args, "memo_ms");
	inst->hint_zones = dlz_arg_int(inst->args, "hint_zones");
	inst->trace = dlz_arg_yes(inst->args, "trace");
	if (!instance_configure_cache(inst) ||
	    !updates_create(inst->args, &dlz_backend, &inst->updates)) {
		return false;
	}
	if (dlz_backend.init != NULL && dlz_backend.init(inst->args, &inst->state) != DLZ_OK) {
		return false;
	}
	if (!pool_init(&inst->pool, &dlz_backend, inst->state, (unsigned)connections,
		       updates_slots(inst->updates), inst->down_interval_ms)) {
		dlz_log(ISC_LOG_ERROR, "cannot create %ld connection slots", connections);
		return false;
	}
	inst->pool_ready = true;
	if (inst->updates != NULL) {
		updates_attach(inst->updates, &inst->pool, inst->putrr, &inst->generation,
			       inst->trace);
		updates_attach_cache(inst->updates, inst->cache);
	}
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
	atomic_init(&inst->generation, 0);
	va_start(ap, dbdata);
	take_helpers(ap, &log_fn, inst);
	va_end(ap);
	log_setup(log_fn, dlz_backend.name);
	if (inst->putrr == NULL || inst->putnamedrr == NULL) {
		dlz_log(ISC_LOG_ERROR, "named did not pass putrr and putnamedrr");
		instance_free(inst);
		return ISC_R_FAILURE;
	}
	inst->args = args_parse(argc > 0 ? argc - 1 : 0, argc > 0 ? argv + 1 : argv, core_args,
				dlz_backend.args);
	if (inst->args == NULL || !instance_configure(inst) || !instance_first_connection(inst) ||
	    (inst->cache != NULL &&
	     !cache_watch_start(inst->cache, &dlz_backend, inst->state))) {
		dlz_log(ISC_LOG_ERROR, "dlz \"%s\" not started", dlzname);
		instance_free(inst);
		return ISC_R_FAILURE;
	}
	dlz_log(ISC_LOG_INFO,
		"dlz \"%s\" ready: connections=%u memo_ms=%ld hint_zones=%ld down_interval_ms=%ld%s%s",
		dlzname, inst->pool.count, inst->memo_ms, inst->hint_zones, inst->down_interval_ms,
		dlz_backend.thread_safe ? " thread-safe" : "",
		inst->trace ? " trace" : "");
	if (inst->cache != NULL) {
		dlz_log(ISC_LOG_INFO, "dlz \"%s\": cache of %zu KiB, answers at most %ld ms behind "
				      "the store; bypassed until the change channel is up",
			dlzname, cache_budget(inst->cache) / 1024, cache_bound_ms(inst->cache));
	}
	*dbdata = inst;
	return ISC_R_SUCCESS;
}

void
dlz_destroy(void *dbdata) {
	struct instance *inst = dbdata;

	if (inst->cache != NULL) {
		log_cache_counts(inst);
	}
	instance_free(inst);
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
	ts->probe_next[0] = '\0'; /* no probe comes before a lookup */
	if (!key_from_bind(key, name)) {
		return ISC_R_NOTFOUND;
	}
	m = &ts->memos[ts->newest];
	/* BIND's next call for the same DNS query asks for the parent of the previous name,
	 * and only when that was no zone (so no fetch needs to know about zones above the
	 * deepest one). */
	if (memo_fresh(inst, m, dlz_now_ms()) && m->findzone_index >= 0 &&
	    !m->is_zone[m->findzone_index] && (unsigned)m->findzone_index + 1 < m->nnames &&
	    strcmp(m->names[m->findzone_index + 1], key) == 0) {
		m->findzone_index++;
		from_memo = true;
	} else {
		ts->query++;
		ts->qhash = hint_hash(key, strlen(key));
		m = memo_new(ts);
		if (!memo_prepare(m, key)) {
			return ISC_R_NOTFOUND;
		}
		memo_plan_first_fetch(m, ts);
		if (!memo_fetch(inst, ts, m, -1)) {
			memo_mark_failed(inst, m);
			if (inst->trace) {
				dlz_log(ISC_LOG_INFO, "findzonedb %s -> success (fetch failed)", key);
			}
			return ISC_R_SUCCESS;
		}
		m->findzone_index = 0;
		if (m->zone_index >= 0) {
			hints_note_zone(ts->hints, m->names[m->zone_index],
					m->qlen - m->offs[m->zone_index], ts->query);
		}
	}
	result = m->is_zone[m->findzone_index] ? ISC_R_SUCCESS : ISC_R_NOTFOUND;
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "findzonedb %s -> %s (%s)", key, result_text(result),
			from_memo ? "memo" : "fetched");
	}
	return result;
}

/* m is fresh and made for the current DNS query. */
static bool
memo_current(struct instance *inst, const struct thread_state *ts, const struct memo *m,
	     long now) {
	return m->query == ts->query && memo_fresh(inst, m, now);
}

/*
 * A fresh memo of the current DNS query that can answer (zone, key), newest first; sdlz's
 * wildcard probe (probe) goes first to the memo and chain of the name whose lookup it follows.
 */
static struct memo *
find_memo(struct instance *inst, struct thread_state *ts, const char *zone, const char *key,
	  bool probe, enum match *match, unsigned *chain, int *index) {
	long now = dlz_now_ms();
	struct memo *m = ts->last_memo;

	if (probe && m != NULL && memo_current(inst, ts, m, now)) {
		*match = memo_match(m, zone, key, true, (int)ts->last_chain, chain, index);
		if (*match != MATCH_NONE) {
			return m;
		}
	}
	for (unsigned k = 0; k < MEMO_RING; k++) {
		m = &ts->memos[(ts->newest + MEMO_RING - k) % MEMO_RING];
		if (memo_current(inst, ts, m, now)) {
			*match = memo_match(m, zone, key, probe, -1, chain, index);
			if (*match != MATCH_NONE) {
				return m;
			}
		}
	}
	return NULL;
}

/*
 * A lookup no memo covers: fetch key itself, with the rows of the zone BIND named, and
 * remember key as a hint for the next query of this name (or, once a second query name
 * needed it too, of this zone).
 */
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
	memo_set_owners(m, (unsigned)zone_index + 1);
	if (!memo_fetch(inst, ts, m, zone_index)) {
		*failure = ISC_R_FAILURE;
		return NULL;
	}
	m->findzone_index = -1;
	if (zone_index > 0 && ts->qhash != 0) {
		hints_learn(ts->hints, zone, m->q, ts->qhash, ts->query);
	}
	return m;
}

/*
 * After a lookup of key in zone (sdlz's wildcard probe when probe) answered result: the
 * wildcard sdlz probes next, into ts->probe_next (see the top). After a lookup of N that was
 * not found, "*.<parent of N>"; after a probe of "*.S" that found nothing (sdlz goes on after
 * any result but success), "*.<parent of S>"; none after the apex's ("*" at the root's).
 */
static void
expect_probe(struct thread_state *ts, const char *zone, const char *key, bool probe,
	     isc_result_t result) {
	const char *base = !probe ? key : key[1] == '.' ? key + 2 : ".";
	unsigned offs[DLZ_MAX_LABELS];
	unsigned n;

	ts->probe_next[0] = '\0';
	if (result == ISC_R_SUCCESS || (!probe && result != ISC_R_NOTFOUND) ||
	    strcmp(base, zone) == 0 || !dlz_key_in_zone(base, zone)) {
		return;
	}
	n = key_ancestors(base, strlen(base), offs);
	if (n > 1) {
		/* A strict suffix of base, itself shorter than a key: "*." fits. */
		size_t len = strlen(base + offs[1]);
		memcpy(ts->probe_next, "*.", 2);
		memcpy(ts->probe_next + 2, base + offs[1], len + 1);
	} else if (n == 1) {
		memcpy(ts->probe_next, "*", 2); /* a name of one label: in the root zone */
	}
}

/* dlz_lookup of key (BIND's name) in zone (keys), a probe or not, from the memos. */
static isc_result_t
lookup_key(struct instance *inst, struct thread_state *ts, const char *zone, const char *key,
	   const char *name, bool probe, dns_sdlzlookup_t *lookup) {
	enum match match = MATCH_NAME;
	isc_result_t result;
	struct memo *m;
	struct chain *c;
	unsigned chain = 0;
	int index = 0;
	bool from_memo = true;

	m = find_memo(inst, ts, zone, key, probe, &match, &chain, &index);
	if (m != NULL && m->failed) {
		return ISC_R_FAILURE;
	}
	if (m == NULL) {
		from_memo = false;
		m = fetch_for_lookup(inst, ts, zone, key, &result);
		if (m == NULL) {
			return result;
		}
		match = memo_match(m, zone, key, probe, -1, &chain, &index);
	}
	c = &m->chains[chain];
	if (match == MATCH_ABSENT) {
		result = ISC_R_NOTFOUND;
	} else if (match == MATCH_WILD && index != chain_encloser(m, c)) {
		/* sdlz probing a wildcard above the closest encloser: RFC 4592 says no. */
		result = ISC_R_NOTFOUND;
	} else {
		result = memo_answer(inst, m, key, lookup);
	}
	if (!probe) {
		ts->last_memo = m;
		ts->last_chain = chain;
	}
	if (c->hint >= 0) {
		hints_used(ts->hints, (unsigned)c->hint, c->leaf, c->len, ts->query);
	}
	if (inst->trace) {
		dlz_log(ISC_LOG_INFO, "lookup %s in %s -> %s (%s%s%s)", name, zone,
			result_text(result), from_memo ? "memo" : "fetched",
			c->hint >= 0 ? ", hint" : "",
			match == MATCH_ABSENT ? ", below a missing name"
			: probe		      ? ", wildcard probe"
					      : "");
	}
	return result;
}

isc_result_t
dlz_lookup(const char *zone, const char *name, void *dbdata, dns_sdlzlookup_t *lookup,
	   dns_clientinfomethods_t *methods, dns_clientinfo_t *clientinfo) {
	struct instance *inst = dbdata;
	struct thread_state *ts = thread_state(inst);
	char key[DLZ_KEY_MAX], zone_key[DLZ_KEY_MAX];
	isc_result_t result;
	bool probe;

	(void)methods;
	(void)clientinfo;
	if (ts == NULL) {
		return ISC_R_NOMEMORY;
	}
	if (!key_from_bind(zone_key, zone) || !key_absolute(key, zone_key, name)) {
		ts->probe_next[0] = '\0';
		return ISC_R_NOTFOUND;
	}
	probe = strcmp(key, ts->probe_next) == 0;
	if (inst->updates != NULL && updates_active(inst->updates)) {
		result = updates_lookup(inst->updates, zone_key, key, lookup);
	} else {
		result = lookup_key(inst, ts, zone_key, key, name, probe, lookup);
	}
	expect_probe(ts, zone_key, key, probe, result);
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
	/* A zone transfer starts here, not with findzonedb: its lookups get no earlier memo
	 * and teach no hints. */
	ts->query++;
	ts->qhash = 0;
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

/* ---- updates (update.c) --------------------------------------------------------------------- */

isc_result_t
dlz_configure(dns_view_t *view, dns_dlzdb_t *dlzdb, void *dbdata) {
	struct instance *inst = dbdata;

	if (inst->updates == NULL) {
		return ISC_R_SUCCESS; /* read-only: no zone registered */
	}
	return updates_configure(inst->updates, inst->writeable_zone, view, dlzdb);
}

bool
dlz_ssumatch(const char *signer, const char *name, const char *tcpaddr, const char *type,
	     const char *key, uint32_t keydatalen, unsigned char *keydata, void *dbdata) {
	struct instance *inst = dbdata;

	(void)key;
	(void)keydatalen;
	(void)keydata;
	return inst->updates != NULL &&
	       updates_ssumatch(inst->updates, signer, name, tcpaddr, type);
}

isc_result_t
dlz_newversion(const char *zone, void *dbdata, void **versionp) {
	struct instance *inst = dbdata;

	if (inst->updates == NULL) {
		return ISC_R_NOTIMPLEMENTED;
	}
	return updates_newversion(inst->updates, zone, versionp);
}

void
dlz_closeversion(const char *zone, bool commit, void *dbdata, void **versionp) {
	struct instance *inst = dbdata;

	if (inst->updates != NULL) {
		updates_closeversion(inst->updates, zone, commit, versionp);
	}
}

isc_result_t
dlz_addrdataset(const char *name, const char *rdatastr, void *dbdata, void *version) {
	struct instance *inst = dbdata;

	return inst->updates != NULL ? updates_add(inst->updates, name, rdatastr, version)
				     : ISC_R_NOTIMPLEMENTED;
}

isc_result_t
dlz_subrdataset(const char *name, const char *rdatastr, void *dbdata, void *version) {
	struct instance *inst = dbdata;

	return inst->updates != NULL ? updates_sub(inst->updates, name, rdatastr, version)
				     : ISC_R_NOTIMPLEMENTED;
}

isc_result_t
dlz_delrdataset(const char *name, const char *type, void *dbdata, void *version) {
	struct instance *inst = dbdata;

	return inst->updates != NULL ? updates_del(inst->updates, name, type, version)
				     : ISC_R_NOTIMPLEMENTED;
}
