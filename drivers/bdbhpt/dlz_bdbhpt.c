/*
 * The Berkeley DB driver for the `bdbhpt` store (schemas/bdb.md): databases in dns.db inside
 * one environment home per mode,
 *
 *     dns_zone    <zone>          -> <gen>          the zone's live generation
 *     dns_data    <gen> <owner>   -> record lines   ("TYPE TTL rdata" LF each; empty: an ENT)
 *     dns_xfr     <gen>           -> owner keys     one per line
 *     dns_client  <zone>          -> client addresses allowed to transfer, one per line
 *
 * A fetch is one dns_zone get per candidate zone, deepest first, until a zone is found, then
 * dns_data gets (the candidate owners and the core's extras) under the generation of the zone
 * that was read, so a zone switched by the loader (one dns_zone put) is seen old or new, never
 * mixed.
 *
 * Threads: each connection opens its own DB handles and owns its key and value buffers
 * (DB_DBT_USERMEM, grown when a value does not fit, then reused): a query allocates nothing
 * and no two threads share a handle mutex. Every mode is safe for concurrent readers, so the
 * driver is declared thread-safe to named:
 *  - transactional and concurrent: the environment is a region shared with the loader, which
 *    writes while named reads (every get sees committed data, so an update is visible at
 *    once); it is opened once per process with DB_THREAD and its locking serializes readers
 *    against the writer;
 *  - private: DB_PRIVATE has no locking and reads a file nobody writes (the loader renames a
 *    new one into place: named sees it after a reload). Each connection opens its own private
 *    environment, so threads share no cache and no mutex at all (the cost: one cache per
 *    connection, filled as pages are read).
 *
 * Stuck writers. In transactional mode a get waits for a page lock a writer's transaction
 * holds. So the environment gets a lock time-out (lock_timeout_ms) and DB_TIME_NOTGRANTED: a
 * lock not granted in time fails the get with DB_LOCK_NOTGRANTED, the query gets SERVFAIL and
 * the core takes the store for down for a while. Berkeley DB checks time-outs only when its
 * deadlock detector runs (a waiting get alone waits for ever: seen with a SIGKILLed writer), so
 * a thread of ours runs it (DB_LOCK_EXPIRE) every quarter of the time-out.
 *
 * Dead writers. A writer that dies inside its transaction (a loader SIGKILLed mid-zone) holds
 * its locks until somebody aborts the transaction: time-outs alone made every later read of
 * that zone SERVFAIL for good (bench faults: all 959 queries after a writer-kill). Berkeley DB
 * aborts it in DB_ENV->failchk, which finds threads of control that died with an unresolved
 * transaction (it aborts it, releasing its locks) or holding read locks (released), and
 * returns DB_RUNRECOVERY only when one died inside the library or holding a non-transactional
 * write lock. It needs thread tracking in every process of the environment, so the loader's
 * DB_CONFIG sets set_thread_count (read by every DB_ENV->open, the loader's too), and an
 * is_alive callback in the process calling it (ours: kill(pid, 0)). A get that fails on a
 * lock marks the environment stuck, a zone lookup that succeeds unmarks it, and while it is
 * marked every tick of the expiry thread runs failchk: so a writer killed while the store is
 * taken for down (no get runs then) is aborted within a tick of its death, and the next try
 * finds the zone free. Only then: failchk took 2.0-2.8 ms a call here (a 1,000-zone home,
 * its 256 MiB cache), too much for every tick of a store that works. After DB_RUNRECOVERY the
 * environment is marked failed (logged once) and answers SERVFAIL until named is reloaded.
 *
 * Concurrent (CDB) mode has neither time-outs nor a detector, and failchk is not wired there:
 * a writer killed while it holds CDB's write lock blocks readers until the environment is
 * recovered (CDB's lock is not transactional, so failchk would answer DB_RUNRECOVERY anyway).
 * Reads take no transaction, so DB_READ_COMMITTED or a DB_TXN_SNAPSHOT (the loader's databases
 * are not DB_MULTIVERSION) change nothing here.
 */
#include <db.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/berkeley/berkeley.h"
#include "../common/dlz_driver.h"

#define DATA_FILE "dns.db"
/* A generation id is 16 hex digits; anything much longer is not ours. */
#define GEN_MAX 64
/*
 * Default of lock_timeout_ms, the longest a get waits for a writer's lock: a loader's
 * transaction writes one zone and holds its locks for milliseconds with the suite's zones,
 * and 500 ms is the other drivers' query_timeout_ms (SERVFAIL before a resolver's first retry,
 * about 800 ms in BIND). The first instance of a process sets it for the process's handle of
 * the environment.
 */
#define DEFAULT_LOCK_TIMEOUT_MS 500

struct bdbhpt_mode {
	const char *name;
	uint32_t env_flags; /* exactly the loader's (loaders/bdbhpt.py ENV_FLAGS) */
	bool shared;        /* a region other processes use: one handle per process */
	bool lock_timeout;  /* locks, Berkeley DB's time-outs for them and failchk (the top) */
};

static const struct bdbhpt_mode bdbhpt_modes[] = {
	/* DB_REGISTER with DB_RECOVER: recovery only if a registered process died, so named
	 * and a loader join each other's environment instead of recreating it. */
	{ "transactional",
	  DB_CREATE | DB_INIT_TXN | DB_INIT_LOG | DB_INIT_LOCK | DB_INIT_MPOOL | DB_REGISTER |
		  DB_RECOVER | DB_THREAD,
	  true, true },
	{ "concurrent", DB_CREATE | DB_INIT_CDB | DB_INIT_MPOOL | DB_THREAD, true, false },
	{ "private", DB_CREATE | DB_PRIVATE | DB_INIT_MPOOL | DB_THREAD, false, false },
};

/*
 * An open environment. A shared-region environment is opened once per process and counted:
 * named creates a new driver instance before it destroys the old one on reload, and a second
 * DB_REGISTER handle of the same process would look like a dead process to the registry and
 * run recovery under the first. A private environment belongs to one connection (and a reload
 * reads the file the loader renamed into place, not an old cache).
 */
struct bdbhpt_env {
	struct bdbhpt_env *next;
	const struct bdbhpt_mode *mode;
	char *home; /* real path */
	DB_ENV *handle;
	unsigned refs;
	atomic_bool failed; /* DB_RUNRECOVERY seen: never hand it to a new instance */
	/* A get failed on a lock since the last zone lookup that did not: while set, every tick
	 * of the expiry thread runs failchk. */
	atomic_bool lock_stuck;
	/* The thread that expires locks held past the time-out (mode->lock_timeout). */
	bool expiry_running;
	pthread_t expiry;
	long expiry_ms;
	pthread_mutex_t expiry_lock;
	pthread_cond_t expiry_stop; /* signalled when expiry_stopping is set */
	bool expiry_stopping;
};

static pthread_mutex_t bdbhpt_envs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bdbhpt_env *bdbhpt_envs;

/* What dlz_create sets up: the shared environment, or where connections open theirs. */
struct bdbhpt_state {
	const struct bdbhpt_mode *mode;
	char *home; /* real path */
	long lock_timeout_ms;
	struct bdbhpt_env *shared;
};

/*
 * A generation's owner list as an update holds it in memory (see "the owner list of an
 * update" below): the keys of the list as read, and those put in since, as a sorted set.
 */
struct bdbhpt_owners {
	char *text;         /* the list as read, each line NUL-terminated in place */
	const char **keys;  /* the set, sorted bytewise, each key once */
	size_t n, cap;
	const char **by_end; /* the same keys sorted from their last byte back; NULL until below() */
	size_t by_end_cap;
	char **added; /* the keys put in, which the set owns */
	size_t nadded, added_cap;
	bool changed; /* a key was put in or taken out since the list was read */
};

/*
 * An RFC 2136 update in progress on a connection (see "writing" below): the zone it writes
 * and the generation its writes go to, once the first write or below() named the zone; and
 * that generation's owner list, once the first node that appears or goes (or below()) needed
 * it.
 */
struct bdbhpt_update {
	bool active;
	DB_TXN *txn;                 /* transactional mode: the update's transaction */
	char zone[DLZ_KEY_MAX];      /* "" until the first write */
	char live_gen[GEN_MAX + 1];  /* the zone's generation when the update began writing */
	char gen[GEN_MAX + 1];       /* where it writes: live_gen (transactional) or a copy */
	bool owners_read;            /* owners holds gen's owner list */
	struct bdbhpt_owners owners;
};

struct bdbhpt_conn {
	struct dlz_bdb_conn bdb; /* first: the connection is freed through it */
	struct bdbhpt_env *env;
	bool own_env;
	DB *zone_db;
	DB *data_db;
	DB *xfr_db;
	DB *client_db;
	/* Handles that may write (opened at the connection's first update), and the update. */
	DB *zone_w;
	DB *data_w;
	DB *xfr_w;
	DB *retired_w;
	struct bdbhpt_update upd;
};

/* ---- the owner list of an update, in memory -----------------------------------------------
 *
 * An update message reads its generation's owner list once, at the first node that appears or
 * goes (or its first below()), keeps it as a sorted set, puts owners into it and takes them
 * out by binary search, answers below() from it, and writes it back once, at commit, if it
 * changed: in the loader's layout (one key per line, sorted bytewise, every line ending in
 * LF). Each edit used to read the whole list, rewrite it and put it back, and each below() to
 * read it and scan it line by line: an update of N names in a zone of M owners copied N x M
 * bytes and, in transactional mode, logged N puts of the whole list, with every lock it took
 * held until the commit. Kept apart from the database calls so that
 * drivers/fuzz/fuzz_ownerlist.c can hold it to a model of a sorted set.
 */

/* An order of keys: strcmp's is bytewise (bytes compared as unsigned char), the loader's. */
typedef int bdbhpt_key_cmp(const char *a, const char *b);

static int
bdbhpt_qsort_bytes(const void *a, const void *b) {
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first of n keys (sorted by cmp) that is not before key. */
static size_t
bdbhpt_keys_find(const char *const *keys, size_t n, const char *key, bdbhpt_key_cmp *cmp) {
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cmp(keys[mid], key) < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

/* key into n keys sorted by cmp, where it is not yet (room for it reserved). */
static void
bdbhpt_keys_insert(const char **keys, size_t n, const char *key, bdbhpt_key_cmp *cmp) {
	size_t at = bdbhpt_keys_find(keys, n, key, cmp);

	memmove(&keys[at + 1], &keys[at], (n - at) * sizeof(*keys));
	keys[at] = key;
}

/* key out of n keys sorted by cmp, where it is. */
static void
bdbhpt_keys_remove(const char **keys, size_t n, const char *key, bdbhpt_key_cmp *cmp) {
	size_t at = bdbhpt_keys_find(keys, n, key, cmp);

	memmove(&keys[at], &keys[at + 1], (n - at - 1) * sizeof(*keys));
}

static void
bdbhpt_owners_free(struct bdbhpt_owners *o) {
	for (size_t i = 0; i < o->nadded; i++) {
		free(o->added[i]);
	}
	free(o->added);
	free(o->by_end);
	free(o->keys);
	free(o->text);
	memset(o, 0, sizeof(*o));
}

static bool
bdbhpt_keys_sorted_once(const char *const *keys, size_t n) {
	for (size_t i = 1; i < n; i++) {
		if (strcmp(keys[i - 1], keys[i]) >= 0) {
			return false;
		}
	}
	return true;
}

/* Sorted bytewise, each key once: how the loader writes a list, checked, and made so when
 * another writer did not. */
static void
bdbhpt_owners_sort(struct bdbhpt_owners *o) {
	size_t kept = 0;

	if (bdbhpt_keys_sorted_once(o->keys, o->n)) {
		return;
	}
	qsort(o->keys, o->n, sizeof(*o->keys), bdbhpt_qsort_bytes);
	for (size_t i = 0; i < o->n; i++) {
		if (kept == 0 || strcmp(o->keys[kept - 1], o->keys[i]) != 0) {
			o->keys[kept++] = o->keys[i];
		}
	}
	o->n = kept;
}

/* o (freed or zeroed) made the set of the list's lines (len bytes, one key per line; an empty
 * line holds no key). False when out of memory (then free o). */
static bool
bdbhpt_owners_parse(struct bdbhpt_owners *o, const char *list, size_t len) {
	char *pos, *end, *line;

	o->text = malloc(len + 1);
	if (o->text == NULL) {
		return false;
	}
	memcpy(o->text, list, len);
	o->text[len] = '\0';
	pos = o->text;
	end = pos + len;
	while ((line = dlz_next_line(&pos, end)) != NULL) {
		if (line[0] == '\0') {
			continue;
		}
		if (!dlz_grow((void **)&o->keys, &o->cap, o->n + 1, sizeof(*o->keys))) {
			return false;
		}
		o->keys[o->n++] = line;
	}
	bdbhpt_owners_sort(o);
	return true;
}

/* The keys sorted from the end, for below(), made at its first call. */
static bool
bdbhpt_owners_index(struct bdbhpt_owners *o) {
	if (!dlz_grow((void **)&o->by_end, &o->by_end_cap, o->n + 1, sizeof(*o->by_end))) {
		return false;
	}
	if (o->n > 0) { /* keys is NULL in a set that never held one */
		memcpy(o->by_end, o->keys, o->n * sizeof(*o->keys));
		qsort(o->by_end, o->n, sizeof(*o->by_end), dlz_key_qsort_from_end);
	}
	return true;
}

static bool
bdbhpt_owners_has(const struct bdbhpt_owners *o, const char *owner) {
	size_t at = bdbhpt_keys_find(o->keys, o->n, owner, strcmp);

	return at < o->n && strcmp(o->keys[at], owner) == 0;
}

/* A copy of owner put into the set (not in it yet). False when out of memory. */
static bool
bdbhpt_owners_put(struct bdbhpt_owners *o, const char *owner) {
	char *copy;

	if (!dlz_grow((void **)&o->keys, &o->cap, o->n + 1, sizeof(*o->keys)) ||
	    (o->by_end != NULL &&
	     !dlz_grow((void **)&o->by_end, &o->by_end_cap, o->n + 1, sizeof(*o->by_end))) ||
	    !dlz_grow((void **)&o->added, &o->added_cap, o->nadded + 1, sizeof(*o->added)) ||
	    (copy = strdup(owner)) == NULL) {
		return false;
	}
	o->added[o->nadded++] = copy;
	bdbhpt_keys_insert(o->keys, o->n, copy, strcmp);
	if (o->by_end != NULL) {
		bdbhpt_keys_insert(o->by_end, o->n, copy, dlz_key_cmp_from_end);
	}
	o->n++;
	return true;
}

/* owner put into the set (present) or taken out of it. False when out of memory. */
static bool
bdbhpt_owners_edit(struct bdbhpt_owners *o, const char *owner, bool present) {
	if (bdbhpt_owners_has(o, owner) == present) {
		return true;
	}
	o->changed = true;
	if (present) {
		return bdbhpt_owners_put(o, owner);
	}
	bdbhpt_keys_remove(o->keys, o->n, owner, strcmp);
	if (o->by_end != NULL) {
		bdbhpt_keys_remove(o->by_end, o->n, owner, dlz_key_cmp_from_end);
	}
	o->n--; /* its copy, if it was put in, stays in added until the set is freed */
	return true;
}

static bool
bdbhpt_ends_with(const char *key, const char *suffix, size_t suffix_len) {
	size_t len = strlen(key);

	return len >= suffix_len && memcmp(key + len - suffix_len, suffix, suffix_len) == 0;
}

/* Does the set hold a key strictly below owner? Only the run of keys ending in "." and owner
 * is read. 1, 0, or DLZ_ERROR when out of memory. */
static int
bdbhpt_owners_below(struct bdbhpt_owners *o, const char *owner) {
	char suffix[DLZ_KEY_MAX + 1];
	size_t owner_len = strlen(owner), suffix_len;

	if (o->by_end == NULL && !bdbhpt_owners_index(o)) {
		return DLZ_ERROR;
	}
	if (owner_len >= DLZ_KEY_MAX) {
		return 0; /* no key is longer: nothing is below it */
	}
	/* Below the root (".") is every name: the empty suffix. */
	suffix_len = strcmp(owner, ".") == 0 ? 0 : owner_len + 1;
	suffix[0] = '.';
	memcpy(suffix + 1, owner, owner_len + 1);
	suffix[suffix_len] = '\0';
	for (size_t i = bdbhpt_keys_find(o->by_end, o->n, suffix, dlz_key_cmp_from_end);
	     i < o->n && bdbhpt_ends_with(o->by_end[i], suffix, suffix_len); i++) {
		if (dlz_key_below(o->by_end[i], owner)) {
			return 1;
		}
	}
	return 0;
}

/* The set as the loader writes a list: one key per line, sorted bytewise, each line ending in
 * LF. A new buffer, its length in *len; NULL when out of memory. */
static char *
bdbhpt_owners_text(const struct bdbhpt_owners *o, size_t *len) {
	size_t size = 0, at = 0;
	char *out;

	for (size_t i = 0; i < o->n; i++) {
		size += strlen(o->keys[i]) + 1;
	}
	out = malloc(size + 1);
	if (out == NULL) {
		return NULL;
	}
	for (size_t i = 0; i < o->n; i++) {
		size_t key_len = strlen(o->keys[i]);
		memcpy(out + at, o->keys[i], key_len);
		at += key_len;
		out[at++] = '\n';
	}
	*len = at;
	return out;
}

/* ---- keys and gets ---------------------------------------------------------------------- */

static void
bdbhpt_env_failed(struct bdbhpt_env *env, int rc) {
	if (rc == DB_RUNRECOVERY && !atomic_exchange(&env->failed, true)) {
		dlz_log(ISC_LOG_ERROR, "environment %s needs recovery: reload named", env->home);
	}
}

/* dlz_bdb_get_failed: marks an environment that needs recovery; rate-limited, as a failing
 * store fails every query. */
static void
bdbhpt_get_failed(struct dlz_bdb_conn *k, int rc) {
	const struct bdbhpt_conn *c = (const struct bdbhpt_conn *)k; /* k is its first member */

	bdbhpt_env_failed(c->env, rc);
	if (rc == DB_LOCK_NOTGRANTED || rc == DB_LOCK_DEADLOCK) {
		atomic_store(&c->env->lock_stuck, true); /* perhaps held by a dead writer */
	}
	dlz_log_error_limited("get %.*s: %s", (int)k->key_len, k->key, db_strerror(rc));
}

/* A zone was read: the environment's locks are not stuck (failchk can rest). Loaded first, as
 * every query passes here and a store that works is never marked. */
static void
bdbhpt_env_unstuck(struct bdbhpt_env *env) {
	if (atomic_load_explicit(&env->lock_stuck, memory_order_relaxed)) {
		atomic_store(&env->lock_stuck, false);
	}
}

/* The key a, or "a b" when b is not NULL; false if too long for any key of the store. */
static bool
bdbhpt_make_key(struct bdbhpt_conn *c, const char *a, size_t a_len, const char *b, size_t b_len) {
	size_t len = a_len + (b != NULL ? 1 + b_len : 0);
	char *key = c->bdb.key;

	if (len > sizeof(c->bdb.key)) {
		return false;
	}
	memcpy(key, a, a_len);
	if (b != NULL) {
		key[a_len] = ' ';
		memcpy(key + a_len + 1, b, b_len);
	}
	c->bdb.key_len = len;
	return true;
}

/* The generation of zone into gen (NUL-terminated, at most GEN_MAX). */
static enum dlz_bdb_found
bdbhpt_zone_generation(struct bdbhpt_conn *c, const char *zone, char gen[GEN_MAX + 1]) {
	enum dlz_bdb_found found;
	size_t len;

	if (!bdbhpt_make_key(c, zone, strlen(zone), NULL, 0)) {
		return DLZ_BDB_MISSING;
	}
	found = dlz_bdb_lookup(&c->bdb, c->zone_db, &c->bdb.value, &len);
	if (found != DLZ_BDB_ERROR) {
		bdbhpt_env_unstuck(c->env);
	}
	if (found != DLZ_BDB_FOUND) {
		return found;
	}
	if (len == 0 || len > GEN_MAX || memchr(c->bdb.value.data, ' ', len) != NULL) {
		dlz_log_error_limited("zone %s has a malformed generation id", zone);
		return DLZ_BDB_BAD_DATA;
	}
	memcpy(gen, c->bdb.value.data, len + 1);
	return DLZ_BDB_FOUND;
}

/* ---- environments ----------------------------------------------------------------------- */

/* DB_ENV->set_isalive: whether the thread of control that Berkeley DB recorded in the
 * environment still runs. Our own threads do (named's workers end only with the process);
 * another process is alive while it exists, even if it is not ours to signal. */
static int
bdbhpt_is_alive(DB_ENV *handle, pid_t pid, db_threadid_t tid, uint32_t flags) {
	(void)handle;
	(void)tid;
	(void)flags;
	return pid == getpid() || kill(pid, 0) == 0 || errno == EPERM;
}

/* DB_ENV->set_msgcall: what failchk reports (the threads whose transactions it aborted). */
static void
bdbhpt_msgcall(const DB_ENV *handle, const char *message) {
	(void)handle;
	dlz_log(ISC_LOG_INFO, "Berkeley DB: %s", message);
}

/* Releases what dead threads of control left in the environment's lock region (see the top);
 * DB_RUNRECOVERY marks the environment failed, which is logged once. */
static void
bdbhpt_failchk(struct bdbhpt_env *env) {
	int rc = env->handle->failchk(env->handle, 0);

	if (rc == DB_RUNRECOVERY) {
		bdbhpt_env_failed(env, rc);
	} else if (rc != 0) {
		dlz_log_error_limited("failchk of %s: %s", env->home, db_strerror(rc));
	}
}

/* Every expiry_ms, the deadlock detector in DB_LOCK_EXPIRE mode: it fails the lock requests
 * that have waited past the lock time-out, which Berkeley DB checks only then; and failchk
 * while the environment is marked stuck. */
static void *
bdbhpt_expiry_run(void *arg) {
	struct bdbhpt_env *env = arg;
	struct timespec next;

	pthread_mutex_lock(&env->expiry_lock);
	while (!env->expiry_stopping) {
		clock_gettime(CLOCK_MONOTONIC, &next);
		next.tv_sec += env->expiry_ms / 1000;
		next.tv_nsec += (env->expiry_ms % 1000) * 1000000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&env->expiry_stop, &env->expiry_lock, &next);
		if (!env->expiry_stopping) {
			env->handle->lock_detect(env->handle, 0, DB_LOCK_EXPIRE, NULL);
			if (atomic_load(&env->lock_stuck)) {
				bdbhpt_failchk(env);
			}
		}
	}
	pthread_mutex_unlock(&env->expiry_lock);
	return NULL;
}

static bool
bdbhpt_expiry_start(struct bdbhpt_env *env, long lock_timeout_ms) {
	pthread_condattr_t attr;
	bool ok;

	env->expiry_ms = lock_timeout_ms / 4 > 0 ? lock_timeout_ms / 4 : 1;
	if (pthread_condattr_init(&attr) != 0) {
		return false;
	}
	ok = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) == 0 &&
	     pthread_cond_init(&env->expiry_stop, &attr) == 0;
	pthread_condattr_destroy(&attr);
	if (!ok) {
		return false;
	}
	pthread_mutex_init(&env->expiry_lock, NULL);
	if (pthread_create(&env->expiry, NULL, bdbhpt_expiry_run, env) != 0) {
		pthread_cond_destroy(&env->expiry_stop);
		pthread_mutex_destroy(&env->expiry_lock);
		return false;
	}
	env->expiry_running = true;
	return true;
}

static void
bdbhpt_expiry_stop(struct bdbhpt_env *env) {
	if (!env->expiry_running) {
		return;
	}
	pthread_mutex_lock(&env->expiry_lock);
	env->expiry_stopping = true;
	pthread_cond_signal(&env->expiry_stop);
	pthread_mutex_unlock(&env->expiry_lock);
	pthread_join(env->expiry, NULL);
	pthread_cond_destroy(&env->expiry_stop);
	pthread_mutex_destroy(&env->expiry_lock);
	env->expiry_running = false;
}

static void
bdbhpt_env_free(struct bdbhpt_env *env) {
	bdbhpt_expiry_stop(env);
	if (env->handle != NULL) {
		env->handle->close(env->handle, 0);
	}
	free(env->home);
	free(env);
}

/* The lock time-out of a mode that has one; DB_TIME_NOTGRANTED tells its failures apart from
 * deadlocks (DB_LOCK_NOTGRANTED, not retried, instead of DB_LOCK_DEADLOCK). And what failchk
 * needs, set before the open as a process joining a thread-tracked environment must. */
static int
bdbhpt_env_set_locking(struct bdbhpt_env *env, long lock_timeout_ms) {
	DB_ENV *h = env->handle;
	int rc;

	if (!env->mode->lock_timeout) {
		return 0;
	}
	rc = h->set_timeout(h, (db_timeout_t)lock_timeout_ms * 1000, DB_SET_LOCK_TIMEOUT);
	if (rc == 0) {
		rc = h->set_flags(h, DB_TIME_NOTGRANTED, 1);
	}
	if (rc == 0) {
		h->set_msgcall(h, bdbhpt_msgcall);
		rc = h->set_isalive(h, bdbhpt_is_alive);
	}
	return rc;
}

static struct bdbhpt_env *
bdbhpt_env_open(const struct bdbhpt_mode *mode, char *home, long lock_timeout_ms) {
	struct bdbhpt_env *env = calloc(1, sizeof(*env));
	int rc;

	if (env == NULL) {
		free(home);
		return NULL;
	}
	env->mode = mode;
	env->home = home;
	env->refs = 1;
	atomic_init(&env->failed, false);
	atomic_init(&env->lock_stuck, false);
	rc = db_env_create(&env->handle, 0);
	if (rc == 0) {
		env->handle->set_errcall(env->handle, dlz_bdb_errcall);
		rc = bdbhpt_env_set_locking(env, lock_timeout_ms);
	}
	if (rc == 0) {
		/* Cache and lock sizes come from the home's DB_CONFIG, as for the loader. */
		rc = env->handle->open(env->handle, home, mode->env_flags, 0);
	}
	if (rc != 0) {
		dlz_log(ISC_LOG_ERROR, "cannot open the %s environment %s: %s", mode->name, home,
			db_strerror(rc));
		bdbhpt_env_free(env);
		return NULL;
	}
	if (mode->lock_timeout && !bdbhpt_expiry_start(env, lock_timeout_ms)) {
		dlz_log(ISC_LOG_ERROR, "cannot start the lock expiry thread of %s", home);
		bdbhpt_env_free(env);
		return NULL;
	}
	return env;
}

/* The process's environment for a shared mode and home, opened or counted once more. */
static struct bdbhpt_env *
bdbhpt_env_acquire(const struct bdbhpt_mode *mode, const char *home, long lock_timeout_ms) {
	struct bdbhpt_env *env;
	char *copy;

	pthread_mutex_lock(&bdbhpt_envs_lock);
	for (env = bdbhpt_envs; env != NULL; env = env->next) {
		if (env->mode == mode && strcmp(env->home, home) == 0 &&
		    !atomic_load(&env->failed)) {
			env->refs++;
			break;
		}
	}
	if (env == NULL && (copy = strdup(home)) != NULL) {
		env = bdbhpt_env_open(mode, copy, lock_timeout_ms);
		if (env != NULL) {
			env->next = bdbhpt_envs;
			bdbhpt_envs = env;
		}
	}
	pthread_mutex_unlock(&bdbhpt_envs_lock);
	return env;
}

static void
bdbhpt_env_release(struct bdbhpt_env *env) {
	struct bdbhpt_env **link;

	pthread_mutex_lock(&bdbhpt_envs_lock);
	if (--env->refs == 0) {
		for (link = &bdbhpt_envs; *link != NULL; link = &(*link)->next) {
			if (*link == env) {
				*link = env->next;
				break;
			}
		}
		bdbhpt_env_free(env);
	}
	pthread_mutex_unlock(&bdbhpt_envs_lock);
}

/* ---- the backend ------------------------------------------------------------------------ */

static const struct bdbhpt_mode *
bdbhpt_mode_named(const char *name) {
	for (size_t i = 0; i < sizeof(bdbhpt_modes) / sizeof(bdbhpt_modes[0]); i++) {
		if (strcmp(bdbhpt_modes[i].name, name) == 0) {
			return &bdbhpt_modes[i];
		}
	}
	return NULL;
}

static int
bdbhpt_init(const struct dlz_args *args, void **state) {
	const char *mode_name = dlz_arg_text(args, "mode");
	const char *home = dlz_arg_text(args, "env");
	long lock_timeout_ms = dlz_arg_int(args, "lock_timeout_ms");
	const struct bdbhpt_mode *mode = bdbhpt_mode_named(mode_name);
	char *real, data[PATH_MAX + sizeof(DATA_FILE) + 1];
	struct bdbhpt_state *s;
	struct stat st;

	if (mode == NULL) {
		dlz_log(ISC_LOG_ERROR, "mode=%s: expected transactional, concurrent or private",
			mode_name);
		return DLZ_ERROR;
	}
	if (!mode->shared && dlz_arg_text(args, "update_zones") != NULL) {
		dlz_log(ISC_LOG_ERROR, "mode=private takes no updates (update_zones): its "
				       "environment has no locking; use transactional or concurrent");
		return DLZ_ERROR;
	}
	real = realpath(home, NULL);
	if (real == NULL) {
		dlz_log(ISC_LOG_ERROR, "env=%s: %s", home, strerror(errno));
		return DLZ_ERROR;
	}
	/* DB_CREATE would make an empty environment in a wrong directory: check first. */
	snprintf(data, sizeof(data), "%s/%s", real, DATA_FILE);
	if (stat(data, &st) != 0) {
		dlz_log(ISC_LOG_ERROR, "%s: %s (not a loaded bdbhpt home)", data, strerror(errno));
		free(real);
		return DLZ_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		free(real);
		return DLZ_ERROR;
	}
	s->mode = mode;
	s->home = real;
	s->lock_timeout_ms = lock_timeout_ms;
	if (mode->shared && (s->shared = bdbhpt_env_acquire(mode, real, lock_timeout_ms)) == NULL) {
		free(real);
		free(s);
		return DLZ_ERROR;
	}
	*state = s;
	return DLZ_OK;
}

static void
bdbhpt_fini(void *state) {
	struct bdbhpt_state *s = state;

	if (s->shared != NULL) {
		bdbhpt_env_release(s->shared);
	}
	free(s->home);
	free(s);
}

static void
bdbhpt_close_db(DB **db) {
	if (*db != NULL) {
		(*db)->close(*db, 0);
		*db = NULL;
	}
}

static void
bdbhpt_conn_free(struct bdbhpt_conn *c) {
	if (c->upd.txn != NULL) {
		c->upd.txn->abort(c->upd.txn);
	}
	bdbhpt_owners_free(&c->upd.owners);
	bdbhpt_close_db(&c->zone_w);
	bdbhpt_close_db(&c->data_w);
	bdbhpt_close_db(&c->xfr_w);
	bdbhpt_close_db(&c->retired_w);
	bdbhpt_close_db(&c->zone_db);
	bdbhpt_close_db(&c->data_db);
	bdbhpt_close_db(&c->xfr_db);
	bdbhpt_close_db(&c->client_db);
	if (c->own_env && c->env != NULL) {
		bdbhpt_env_free(c->env);
	}
	dlz_bdb_conn_free(&c->bdb);
}

static int
bdbhpt_open_db(struct bdbhpt_env *env, const char *name, DB **db) {
	int rc = db_create(db, env->handle, 0);

	if (rc == 0) {
		/* Read-only, no transaction: each get sees committed data only. */
		rc = (*db)->open(*db, NULL, DATA_FILE, name, DB_UNKNOWN, DB_RDONLY | DB_THREAD, 0);
	}
	if (rc != 0) {
		bdbhpt_env_failed(env, rc);
		dlz_log(ISC_LOG_ERROR, "cannot open database %s in %s/%s: %s", name, env->home,
			DATA_FILE, db_strerror(rc));
		bdbhpt_close_db(db);
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

static int
bdbhpt_connect(void *state, void **conn) {
	struct bdbhpt_state *s = state;
	struct bdbhpt_conn *c = dlz_bdb_conn_new(sizeof(*c), bdbhpt_get_failed);
	char *home;

	if (c == NULL) {
		return DLZ_ERROR;
	}
	if (s->shared != NULL) {
		c->env = s->shared;
	} else {
		c->own_env = true;
		home = strdup(s->home);
		c->env = home != NULL ? bdbhpt_env_open(s->mode, home, s->lock_timeout_ms) : NULL;
		if (c->env == NULL) {
			goto fail;
		}
	}
	if (bdbhpt_open_db(c->env, "dns_zone", &c->zone_db) != DLZ_OK ||
	    bdbhpt_open_db(c->env, "dns_data", &c->data_db) != DLZ_OK ||
	    bdbhpt_open_db(c->env, "dns_xfr", &c->xfr_db) != DLZ_OK ||
	    bdbhpt_open_db(c->env, "dns_client", &c->client_db) != DLZ_OK) {
		goto fail;
	}
	*conn = c;
	return DLZ_OK;
fail:
	bdbhpt_conn_free(c);
	return DLZ_ERROR;
}

static void
bdbhpt_disconnect(void *state, void *conn) {
	(void)state;
	bdbhpt_conn_free(conn);
}

/* One fetch: its zone and the generation it is read under, as bdbhpt_probe_zone finds them and
 * bdbhpt_fetch_owner reads them. */
struct bdbhpt_owner_read {
	struct bdbhpt_conn *c;
	const struct dlz_fetch_req *req;
	char gen[GEN_MAX + 1];
	const char *zone;
	struct dlz_rowset *out;
};

/* dlz_owner_reader: the rows of owner under the generation ("<gen> <owner>"), if the node
 * exists (*found). */
static int
bdbhpt_fetch_owner(void *ctx, const char *owner, bool *found) {
	const struct bdbhpt_owner_read *r = ctx;
	struct bdbhpt_conn *c = r->c;

	*found = false;
	if (!bdbhpt_make_key(c, r->gen, strlen(r->gen), owner, strlen(owner))) {
		return DLZ_OK; /* longer than any key of the store */
	}
	return dlz_bdb_read_node(&c->bdb, c->data_db, r->zone, owner, r->out, found);
}

/* dlz_zone_probe: one dns_zone get of names[i]; its generation is then r->gen. */
static int
bdbhpt_probe_zone(void *ctx, unsigned i) {
	struct bdbhpt_owner_read *r = ctx;

	return bdbhpt_zone_generation(r->c, r->req->names[i], r->gen);
}

/* ---- writing: RFC 2136 updates through the core -------------------------------------------
 *
 * One update message is one Berkeley DB unit of work on the connection the core holds for it,
 * in the loader's layout (schemas/bdb.md), so loaders/bdbhpt.py reads it back as it wrote it:
 * an add appends a record line to the node "<gen> <owner>" (an ENT marker is an empty node), a
 * delete removes its line (the node goes when its last line does), and a node that appears
 * or goes is added to or removed from the generation's sorted owner list in dns_xfr: in
 * memory, the list read once per update message and written back once, at commit (see "the
 * owner list of an update").
 *
 *  - transactional: in place, in the zone's live generation, inside one DB_TXN begun at
 *    begin(): every read of the update (the core's lookups, below()) is made in it too, so
 *    the update sees its own writes, holds what it read until commit, and readers of other
 *    threads see all of it at commit or none of it. dns_zone is read with DB_RMW, so a loader
 *    replacing the zone meanwhile waits for the update (or deadlocks and one of them fails).
 *    A failure aborts the transaction: nothing was written.
 *  - concurrent (CDB): no transactions and no rollback, and readers are not kept out between
 *    two puts. So the first write copies the zone's live generation into a new one (owner list
 *    first, as the loader writes, then the nodes), the update edits the copy, which nobody
 *    reads, and commit switches dns_zone to it with one put under a DB_WRITECURSOR (CDB's one
 *    writer: a loader's put waits) after checking that nobody replaced the zone meanwhile,
 *    then retires the old generation in dns_retired as the loader does; generations retired
 *    10 s ago or more are purged at commit (a few per commit), as the loader's next load
 *    would. A failed or rolled-back update retires its copy instead.
 *    The cost is a copy of the zone per update message: fine for the zones updates are for,
 *    not for a 30,000-record zone (use transactional mode there).
 *  - private: no locking at all (named and a writer would corrupt each other's view), so
 *    updates are refused: at start-up when update_zones is given, and by begin().
 */

static bool
bdbhpt_transactional(const struct bdbhpt_conn *c) {
	return (c->env->mode->env_flags & DB_INIT_TXN) != 0;
}

static int
bdbhpt_upd_failed(struct bdbhpt_conn *c, const char *what, int rc) {
	bdbhpt_env_failed(c->env, rc);
	dlz_log(ISC_LOG_ERROR, "update of zone %s: %s: %s", c->upd.zone[0] ? c->upd.zone : "?",
		what, rc == ENOMEM ? "out of memory" : db_strerror(rc));
	return DLZ_ERROR;
}

static DBT
bdbhpt_dbt(const char *data, size_t len) {
	DBT d;

	memset(&d, 0, sizeof(d));
	d.data = (void *)data;
	d.size = (uint32_t)len;
	return d;
}

/* The value of c->bdb.key in db within the update (its transaction; DB_RMW in flags locks it
 * for the write that follows) into b, NUL-terminated. 0, DB_NOTFOUND, ENOMEM or the error. */
static int
bdbhpt_upd_get(struct bdbhpt_conn *c, DB *db, struct dlz_bdb_buf *b, size_t *len,
	       uint32_t flags) {
	DBT key = bdbhpt_dbt(c->bdb.key, c->bdb.key_len), value;
	int rc;

	for (;;) {
		dlz_bdb_dbt_user(&value, b);
		rc = db->get(db, c->upd.txn, &key, &value, c->upd.txn != NULL ? flags : 0);
		if (rc != DB_BUFFER_SMALL) {
			break;
		}
		if (!dlz_bdb_buf_reserve(b, (size_t)value.size + 1)) {
			return ENOMEM;
		}
	}
	if (rc == 0) {
		b->data[value.size] = '\0';
		*len = value.size;
	}
	return rc;
}

static int
bdbhpt_upd_put(struct bdbhpt_conn *c, DB *db, const char *value, size_t len) {
	DBT key = bdbhpt_dbt(c->bdb.key, c->bdb.key_len), data = bdbhpt_dbt(value, len);

	return db->put(db, c->upd.txn, &key, &data, 0);
}

static int
bdbhpt_upd_delete(struct bdbhpt_conn *c, DB *db) {
	DBT key = bdbhpt_dbt(c->bdb.key, c->bdb.key_len);
	int rc = db->del(db, c->upd.txn, &key, 0);

	return rc == DB_NOTFOUND ? 0 : rc;
}

/* A handle of database name that may write: in transactional mode every write without an
 * explicit transaction would be its own (DB_AUTO_COMMIT); the update always passes one. */
static int
bdbhpt_open_writer(struct bdbhpt_conn *c, const char *name, DB **db) {
	uint32_t flags = DB_THREAD | (bdbhpt_transactional(c) ? DB_AUTO_COMMIT : 0);
	int rc;

	if (*db != NULL) {
		return DLZ_OK;
	}
	rc = db_create(db, c->env->handle, 0);
	if (rc == 0) {
		rc = (*db)->open(*db, NULL, DATA_FILE, name, DB_UNKNOWN, flags, 0);
	}
	if (rc != 0) {
		bdbhpt_close_db(db);
		return bdbhpt_upd_failed(c, "opening a database for writing", rc);
	}
	return DLZ_OK;
}

static void
bdbhpt_upd_end(struct bdbhpt_conn *c) {
	bdbhpt_owners_free(&c->upd.owners);
	c->upd.owners_read = false;
	c->upd.active = false;
	c->upd.txn = NULL;
	c->upd.zone[0] = c->upd.gen[0] = c->upd.live_gen[0] = '\0';
}

static int
bdbhpt_begin(void *conn) {
	struct bdbhpt_conn *c = conn;
	int rc;

	if (!c->env->mode->shared) {
		dlz_log(ISC_LOG_ERROR, "mode=private takes no updates: its environment has no "
				       "locking (use mode=transactional or concurrent)");
		return DLZ_ERROR;
	}
	if (c->upd.txn != NULL) {
		c->upd.txn->abort(c->upd.txn);
	}
	bdbhpt_upd_end(c);
	if (bdbhpt_open_writer(c, "dns_zone", &c->zone_w) != DLZ_OK ||
	    bdbhpt_open_writer(c, "dns_data", &c->data_w) != DLZ_OK ||
	    bdbhpt_open_writer(c, "dns_xfr", &c->xfr_w) != DLZ_OK ||
	    bdbhpt_open_writer(c, "dns_retired", &c->retired_w) != DLZ_OK) {
		return DLZ_ERROR;
	}
	if (bdbhpt_transactional(c) &&
	    (rc = c->env->handle->txn_begin(c->env->handle, NULL, &c->upd.txn, 0)) != 0) {
		c->upd.txn = NULL;
		return bdbhpt_upd_failed(c, "txn_begin", rc);
	}
	c->upd.active = true;
	return DLZ_OK;
}

/* The generation id in c->bdb.value (len bytes) into gen, if it is one. */
static bool
bdbhpt_take_gen(struct bdbhpt_conn *c, size_t len, char gen[GEN_MAX + 1]) {
	if (len == 0 || len > GEN_MAX || memchr(c->bdb.value.data, ' ', len) != NULL) {
		return false;
	}
	memcpy(gen, c->bdb.value.data, len + 1);
	return true;
}

/* A fresh generation id: 16 lowercase hex digits, as the loader makes them. */
static bool
bdbhpt_new_gen(char gen[GEN_MAX + 1]) {
	unsigned char bytes[8];

	if (getrandom(bytes, sizeof(bytes), 0) != (ssize_t)sizeof(bytes)) {
		return false;
	}
	for (size_t i = 0; i < sizeof(bytes); i++) {
		snprintf(gen + 2 * i, 3, "%02x", bytes[i]);
	}
	return true;
}

/* The update's owner list (see "the owner list of an update") made of the list in c->bdb.list
 * (len bytes). */
static int
bdbhpt_upd_take_owners(struct bdbhpt_conn *c, size_t len) {
	if (!bdbhpt_owners_parse(&c->upd.owners, c->bdb.list.data, len)) {
		bdbhpt_owners_free(&c->upd.owners);
		return bdbhpt_upd_failed(c, "the owner list", ENOMEM);
	}
	c->upd.owners_read = true;
	return DLZ_OK;
}

/* The update's owner list, read at its first need (DB_RMW: the commit may write it). In
 * concurrent mode the copy of the generation took it already. */
static int
bdbhpt_upd_owners(struct bdbhpt_conn *c) {
	size_t len;
	int rc;

	if (c->upd.owners_read) {
		return DLZ_OK;
	}
	bdbhpt_make_key(c, c->upd.gen, strlen(c->upd.gen), NULL, 0);
	if ((rc = bdbhpt_upd_get(c, c->xfr_w, &c->bdb.list, &len, DB_RMW)) != 0) {
		return bdbhpt_upd_failed(c, "reading the owner list", rc);
	}
	return bdbhpt_upd_take_owners(c, len);
}

/* owner put into (present) or taken out of the update's owner list, in memory. */
static int
bdbhpt_upd_list(struct bdbhpt_conn *c, const char *owner, bool present) {
	int rc = bdbhpt_upd_owners(c);

	if (rc != DLZ_OK) {
		return rc;
	}
	if (!bdbhpt_owners_edit(&c->upd.owners, owner, present)) {
		return bdbhpt_upd_failed(c, "the owner list", ENOMEM);
	}
	return DLZ_OK;
}

/* The update's owner list written back (once, at the end of the update), if it changed: into
 * the transaction, or into the copy. 0, ENOMEM or Berkeley DB's error (logged). */
static int
bdbhpt_upd_write_owners(struct bdbhpt_conn *c) {
	size_t len;
	char *text;
	int rc;

	if (!c->upd.owners.changed) {
		return 0;
	}
	text = bdbhpt_owners_text(&c->upd.owners, &len);
	if (text == NULL) {
		bdbhpt_upd_failed(c, "the owner list", ENOMEM);
		return ENOMEM;
	}
	bdbhpt_make_key(c, c->upd.gen, strlen(c->upd.gen), NULL, 0);
	rc = bdbhpt_upd_put(c, c->xfr_w, text, len);
	free(text);
	if (rc != 0) {
		bdbhpt_upd_failed(c, "writing the owner list", rc);
	}
	return rc;
}

/* Concurrent mode: the live generation's owner list and nodes copied under c->upd.gen. */
static int
bdbhpt_copy_generation(struct bdbhpt_conn *c) {
	const char *live = c->upd.live_gen, *gen = c->upd.gen;
	size_t list_len, len;
	char *pos, *end, *owner;
	int rc;

	if (!bdbhpt_new_gen(c->upd.gen)) {
		return bdbhpt_upd_failed(c, "a new generation id", errno);
	}
	bdbhpt_make_key(c, live, strlen(live), NULL, 0);
	if ((rc = bdbhpt_upd_get(c, c->xfr_w, &c->bdb.list, &list_len, 0)) != 0) {
		return bdbhpt_upd_failed(c, "reading the owner list", rc);
	}
	if ((rc = bdbhpt_upd_take_owners(c, list_len)) != DLZ_OK) {
		return rc; /* the update's owner list: this one, read once */
	}
	/* The list first: a copy that fails half-way can be found and purged, as the loader's. */
	bdbhpt_make_key(c, gen, strlen(gen), NULL, 0);
	if ((rc = bdbhpt_upd_put(c, c->xfr_w, c->bdb.list.data, list_len)) != 0) {
		return bdbhpt_upd_failed(c, "writing the copy's owner list", rc);
	}
	pos = c->bdb.list.data;
	end = pos + list_len;
	while ((owner = dlz_next_line(&pos, end)) != NULL) {
		bdbhpt_make_key(c, live, strlen(live), owner, strlen(owner));
		if ((rc = bdbhpt_upd_get(c, c->data_w, &c->bdb.value, &len, 0)) != 0) {
			return bdbhpt_upd_failed(c, "reading a node to copy", rc);
		}
		bdbhpt_make_key(c, gen, strlen(gen), owner, strlen(owner));
		if ((rc = bdbhpt_upd_put(c, c->data_w, c->bdb.value.data, len)) != 0) {
			return bdbhpt_upd_failed(c, "writing a node of the copy", rc);
		}
	}
	return DLZ_OK;
}

/* The update's zone: at its first write (or below()) zone becomes it, with the generation its
 * writes go to. An update message writes one zone. */
static int
bdbhpt_upd_zone(struct bdbhpt_conn *c, const char *zone) {
	size_t len;
	int rc;

	if (!c->upd.active) {
		dlz_log(ISC_LOG_ERROR, "a write to %s outside an update", zone);
		return DLZ_ERROR;
	}
	if (c->upd.zone[0] != '\0') {
		if (strcmp(c->upd.zone, zone) == 0) {
			return DLZ_OK;
		}
		dlz_log(ISC_LOG_ERROR, "one update writes to %s and %s", c->upd.zone, zone);
		return DLZ_ERROR;
	}
	if (!bdbhpt_make_key(c, zone, strlen(zone), NULL, 0) || strlen(zone) >= DLZ_KEY_MAX) {
		return DLZ_ERROR;
	}
	rc = bdbhpt_upd_get(c, c->zone_w, &c->bdb.value, &len, DB_RMW);
	if (rc != 0) {
		return bdbhpt_upd_failed(c, rc == DB_NOTFOUND ? "no such zone" : "reading the zone", rc);
	}
	if (!bdbhpt_take_gen(c, len, c->upd.live_gen)) {
		dlz_log(ISC_LOG_ERROR, "zone %s has a malformed generation id", zone);
		return DLZ_BAD_DATA;
	}
	strcpy(c->upd.zone, zone);
	if (bdbhpt_transactional(c)) {
		strcpy(c->upd.gen, c->upd.live_gen);
		return DLZ_OK;
	}
	return bdbhpt_copy_generation(c);
}

/* c->bdb.value = the node of owner in the update's generation; *exists, its length *len. */
static int
bdbhpt_upd_node(struct bdbhpt_conn *c, const char *owner, bool *exists, size_t *len) {
	int rc;

	if (!bdbhpt_make_key(c, c->upd.gen, strlen(c->upd.gen), owner, strlen(owner))) {
		return DLZ_ERROR;
	}
	rc = bdbhpt_upd_get(c, c->data_w, &c->bdb.value, len, DB_RMW);
	*exists = rc == 0;
	if (rc == DB_NOTFOUND) {
		*len = 0;
		return DLZ_OK;
	}
	return rc == 0 ? DLZ_OK : bdbhpt_upd_failed(c, "reading a node", rc);
}

/* Length of the line at pos (up to LF or end). */
static size_t
bdbhpt_line_len(const char *pos, const char *end) {
	const char *lf = memchr(pos, '\n', (size_t)(end - pos));

	return lf != NULL ? (size_t)(lf - pos) : (size_t)(end - pos);
}

/* The node of owner written anew (value, len bytes) or, when gone, deleted; the owner list (in
 * memory) follows a node that appears or goes. */
static int
bdbhpt_upd_write_node(struct bdbhpt_conn *c, const char *owner, bool existed, bool gone,
		      const char *value, size_t len) {
	int rc;

	bdbhpt_make_key(c, c->upd.gen, strlen(c->upd.gen), owner, strlen(owner));
	rc = gone ? bdbhpt_upd_delete(c, c->data_w) : bdbhpt_upd_put(c, c->data_w, value, len);
	if (rc != 0) {
		return bdbhpt_upd_failed(c, gone ? "deleting a node" : "writing a node", rc);
	}
	return existed == !gone ? DLZ_OK : bdbhpt_upd_list(c, owner, !gone);
}

static int
bdbhpt_add(void *conn, const char *zone, const char *owner, const char *type, uint32_t ttl,
	   const char *rdata) {
	struct bdbhpt_conn *c = conn;
	size_t len, line_max;
	bool exists;
	char *value;
	int rc;

	if ((rc = bdbhpt_upd_zone(c, zone)) != DLZ_OK ||
	    (rc = bdbhpt_upd_node(c, owner, &exists, &len)) != DLZ_OK) {
		return rc;
	}
	if (strcmp(type, DLZ_ENT_TYPE) == 0) {
		/* A marker is an empty node; a node with records exists already. */
		return exists ? DLZ_OK : bdbhpt_upd_write_node(c, owner, false, false, "", 0);
	}
	line_max = strlen(type) + strlen(rdata) + 16;
	value = malloc(len + line_max);
	if (value == NULL) {
		return bdbhpt_upd_failed(c, "a node", ENOMEM);
	}
	memcpy(value, c->bdb.value.data, len);
	len += (size_t)snprintf(value + len, line_max, "%s %u %s\n", type, ttl, rdata);
	rc = bdbhpt_upd_write_node(c, owner, exists, false, value, len);
	free(value);
	return rc;
}

static int
bdbhpt_del(void *conn, const char *zone, const char *owner, const char *type,
	   const char *rdata) {
	struct bdbhpt_conn *c = conn;
	size_t len, out_len = 0, type_len = strlen(type), rdata_len = strlen(rdata);
	const char *pos, *end;
	bool exists, removed = false;
	char *out;
	int rc;

	if ((rc = bdbhpt_upd_zone(c, zone)) != DLZ_OK ||
	    (rc = bdbhpt_upd_node(c, owner, &exists, &len)) != DLZ_OK || !exists) {
		return rc;
	}
	if (strcmp(type, DLZ_ENT_TYPE) == 0) {
		return len == 0 ? bdbhpt_upd_write_node(c, owner, true, true, NULL, 0) : DLZ_OK;
	}
	out = malloc(len + 1);
	if (out == NULL) {
		return bdbhpt_upd_failed(c, "a node", ENOMEM);
	}
	for (pos = c->bdb.value.data, end = pos + len; pos < end;) {
		size_t line_len = bdbhpt_line_len(pos, end);
		struct dlz_record_line r;

		if (!dlz_record_split(pos, line_len, &r)) {
			dlz_log(ISC_LOG_ERROR, "malformed record line in node %s of zone %s", owner,
				zone);
			free(out);
			return DLZ_BAD_DATA;
		}
		if (r.type_len == type_len && memcmp(r.type, type, type_len) == 0 &&
		    r.rdata_len == rdata_len && memcmp(r.rdata, rdata, rdata_len) == 0) {
			removed = true;
		} else {
			memcpy(out + out_len, pos, line_len);
			out_len += line_len;
			out[out_len++] = '\n';
		}
		pos += line_len + 1;
	}
	rc = removed ? bdbhpt_upd_write_node(c, owner, true, out_len == 0, out, out_len) : DLZ_OK;
	free(out);
	return rc;
}

static int
bdbhpt_below(void *conn, const char *zone, const char *owner) {
	struct bdbhpt_conn *c = conn;
	int rc;

	if ((rc = bdbhpt_upd_zone(c, zone)) != DLZ_OK || (rc = bdbhpt_upd_owners(c)) != DLZ_OK) {
		return rc;
	}
	rc = bdbhpt_owners_below(&c->upd.owners, owner);
	return rc != DLZ_ERROR ? rc : bdbhpt_upd_failed(c, "the owner list's index", ENOMEM);
}

/* dns_retired[gen] = when (the loader's bookkeeping: its purge deletes gen's rows). */
static int
bdbhpt_retire(struct bdbhpt_conn *c, const char *gen, bool now) {
	struct timespec ts;
	char when[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(when, sizeof(when), "%lld.%03ld", now ? (long long)ts.tv_sec : 0LL,
		 now ? ts.tv_nsec / 1000000 : 0L);
	bdbhpt_make_key(c, gen, strlen(gen), NULL, 0);
	return bdbhpt_upd_put(c, c->retired_w, when, strlen(when));
}

/*
 * Concurrent mode: generations retired at least RETIRE_GRACE_S ago deleted (their nodes, owner
 * list and dns_retired entry), at most PURGE_PER_COMMIT per commit: what the loader's purge
 * does at its next load (loaders/bdbhpt.py), done here too, since every update retires a
 * whole generation and a store that takes updates between loads would otherwise grow by a
 * zone per update. The grace is the loader's: a lookup that read the old generation's id a
 * moment before the switch still finds its nodes. The cursor is closed before the first
 * delete (in CDB a thread holding a read cursor must not write).
 */
#define RETIRE_GRACE_S 10
#define PURGE_PER_COMMIT 4

static unsigned
bdbhpt_expired_generations(struct bdbhpt_conn *c, char gens[PURGE_PER_COMMIT][GEN_MAX + 1]) {
	struct timespec now;
	DBC *cursor = NULL;
	DBT key, value;
	unsigned n = 0;

	clock_gettime(CLOCK_REALTIME, &now);
	if (c->retired_w->cursor(c->retired_w, NULL, &cursor, 0) != 0) {
		return 0;
	}
	memset(&key, 0, sizeof(key));
	memset(&value, 0, sizeof(value));
	key.flags = value.flags = DB_DBT_REALLOC; /* a DB_THREAD handle returns no pointers in */
	while (n < PURGE_PER_COMMIT && cursor->get(cursor, &key, &value, DB_NEXT) == 0) {
		char when[32];
		size_t len = value.size < sizeof(when) - 1 ? value.size : sizeof(when) - 1;

		memcpy(when, value.data, len);
		when[len] = '\0';
		if (key.size == 0 || key.size > GEN_MAX ||
		    strtod(when, NULL) > (double)(now.tv_sec - RETIRE_GRACE_S)) {
			continue;
		}
		memcpy(gens[n], key.data, key.size);
		gens[n++][key.size] = '\0';
	}
	cursor->close(cursor);
	free(key.data);
	free(value.data);
	return n;
}

/* One retired generation's rows deleted, its owner list last but for its dns_retired entry,
 * so that a purge cut short is finished by the next. */
static int
bdbhpt_purge_generation(struct bdbhpt_conn *c, const char *gen) {
	size_t len;
	char *pos, *end, *owner;
	int rc;

	bdbhpt_make_key(c, gen, strlen(gen), NULL, 0);
	rc = bdbhpt_upd_get(c, c->xfr_w, &c->bdb.list, &len, 0);
	if (rc == 0) {
		pos = c->bdb.list.data;
		end = pos + len;
		while ((owner = dlz_next_line(&pos, end)) != NULL) {
			bdbhpt_make_key(c, gen, strlen(gen), owner, strlen(owner));
			if ((rc = bdbhpt_upd_delete(c, c->data_w)) != 0) {
				return rc;
			}
		}
		bdbhpt_make_key(c, gen, strlen(gen), NULL, 0);
		rc = bdbhpt_upd_delete(c, c->xfr_w);
	} else if (rc == DB_NOTFOUND) {
		rc = 0;
	}
	return rc != 0 ? rc : bdbhpt_upd_delete(c, c->retired_w);
}

static void
bdbhpt_purge_retired(struct bdbhpt_conn *c) {
	char gens[PURGE_PER_COMMIT][GEN_MAX + 1];
	unsigned n = bdbhpt_expired_generations(c, gens);

	for (unsigned i = 0; i < n; i++) {
		int rc = bdbhpt_purge_generation(c, gens[i]);
		if (rc != 0) {
			dlz_log_error_limited("purging generation %s: %s", gens[i], db_strerror(rc));
			return;
		}
	}
}

/* Concurrent mode: dns_zone switched from the live generation to the copy, under CDB's write
 * cursor so that no other writer (a loader) puts between the check and the switch. */
static int
bdbhpt_switch_generation(struct bdbhpt_conn *c) {
	DBT key = bdbhpt_dbt(c->upd.zone, strlen(c->upd.zone)), value;
	DBC *cursor = NULL;
	int rc;

	rc = c->zone_w->cursor(c->zone_w, NULL, &cursor, DB_WRITECURSOR);
	if (rc == 0) {
		dlz_bdb_dbt_user(&value, &c->bdb.value);
		rc = cursor->get(cursor, &key, &value, DB_SET);
	}
	if (rc == 0 && (value.size != strlen(c->upd.live_gen) ||
			memcmp(value.data, c->upd.live_gen, value.size) != 0)) {
		dlz_log(ISC_LOG_ERROR, "zone %s was replaced during the update: not applied",
			c->upd.zone);
		rc = DB_KEYEXIST;
	} else if (rc == 0) {
		value = bdbhpt_dbt(c->upd.gen, strlen(c->upd.gen));
		rc = cursor->put(cursor, &key, &value, DB_CURRENT);
	}
	if (cursor != NULL) {
		int closed = cursor->close(cursor);
		rc = rc != 0 ? rc : closed;
	}
	return rc;
}

static int
bdbhpt_commit(void *conn) {
	struct bdbhpt_conn *c = conn;
	int rc = 0;

	if (!c->upd.active) {
		return DLZ_ERROR;
	}
	/* Into the transaction, or into the copy before the switch. */
	rc = bdbhpt_upd_write_owners(c);
	if (c->upd.txn != NULL) {
		if (rc == 0) {
			rc = c->upd.txn->commit(c->upd.txn, 0);
		} else {
			c->upd.txn->abort(c->upd.txn);
		}
		c->upd.txn = NULL; /* a failed commit aborted it: the handle is gone either way */
	} else if (c->upd.gen[0] != '\0') {
		rc = rc != 0 ? rc : bdbhpt_switch_generation(c);
		if (rc == 0) {
			rc = bdbhpt_retire(c, c->upd.live_gen, true);
		} else {
			bdbhpt_retire(c, c->upd.gen, false);
		}
		bdbhpt_purge_retired(c); /* its failures are logged: the update is in */
	}
	if (rc != 0) {
		bdbhpt_upd_failed(c, "commit", rc);
	}
	bdbhpt_upd_end(c);
	return rc == 0 ? DLZ_OK : DLZ_ERROR;
}

static int
bdbhpt_rollback(void *conn) {
	struct bdbhpt_conn *c = conn;
	int rc = 0;

	if (c->upd.txn != NULL) {
		rc = c->upd.txn->abort(c->upd.txn);
	} else if (c->upd.active && c->upd.gen[0] != '\0') {
		/* The copy, purged by the next load, which deletes the nodes its list names: the
		 * list names those the update added too. */
		bdbhpt_upd_write_owners(c);
		rc = bdbhpt_retire(c, c->upd.gen, false);
	}
	bdbhpt_upd_end(c);
	return rc == 0 ? DLZ_OK : DLZ_ERROR;
}

/* ---- reads inside an update: its transaction, its copy ------------------------------------ */

/* dlz_zone_probe in an update: names[i]'s generation as the update sees it. */
static int
bdbhpt_upd_probe_zone(void *ctx, unsigned i) {
	struct bdbhpt_owner_read *r = ctx;
	struct bdbhpt_conn *c = r->c;
	const char *name = r->req->names[i];
	size_t len;
	int rc;

	if (c->upd.gen[0] != '\0' && strcmp(name, c->upd.zone) == 0) {
		strcpy(r->gen, c->upd.gen);
		return 1;
	}
	if (!bdbhpt_make_key(c, name, strlen(name), NULL, 0)) {
		return 0;
	}
	rc = bdbhpt_upd_get(c, c->zone_w, &c->bdb.value, &len, 0);
	if (rc == DB_NOTFOUND) {
		return 0;
	}
	if (rc != 0) {
		return bdbhpt_upd_failed(c, "reading a zone", rc);
	}
	return bdbhpt_take_gen(c, len, r->gen) ? 1 : DLZ_BAD_DATA;
}

/* dlz_owner_reader in an update. */
static int
bdbhpt_upd_fetch_owner(void *ctx, const char *owner, bool *found) {
	struct bdbhpt_owner_read *r = ctx;
	struct bdbhpt_conn *c = r->c;
	size_t len;
	int rc;

	*found = false;
	if (!bdbhpt_make_key(c, r->gen, strlen(r->gen), owner, strlen(owner))) {
		return DLZ_OK;
	}
	rc = bdbhpt_upd_get(c, c->data_w, &c->bdb.value, &len, 0);
	if (rc == DB_NOTFOUND) {
		return DLZ_OK;
	}
	if (rc != 0) {
		return bdbhpt_upd_failed(c, "reading a node", rc);
	}
	*found = true;
	return dlz_rowset_add_node(r->out, r->zone, owner, c->bdb.value.data, len);
}

static int
bdbhpt_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct bdbhpt_owner_read r = { .c = conn, .req = req, .out = out };

	if (r.c->upd.active) {
		return dlz_fetch_zone_owners(req, out, 0, 0, bdbhpt_upd_probe_zone,
					     bdbhpt_upd_fetch_owner, &r, &r.zone);
	}
	/* Every node is read under the one generation the probe read: the zone as it was then. */
	return dlz_fetch_zone_owners(req, out, 0, 0, bdbhpt_probe_zone, bdbhpt_fetch_owner, &r,
				     &r.zone);
}

/* The owner list of one generation, then one dns_data get of "<gen> <owner>" per owner. */
static int
bdbhpt_allnodes(void *conn, const char *zone, dlz_node_cb *cb, void *ctx) {
	struct bdbhpt_conn *c = conn;
	char gen[GEN_MAX + 1];
	enum dlz_bdb_found list;
	size_t gen_len, list_len;
	const char *gone;
	int rc = dlz_bdb_if_zone(bdbhpt_zone_generation(c, zone, gen), DLZ_OK);

	if (rc != DLZ_OK) {
		return rc;
	}
	gen_len = strlen(gen);
	bdbhpt_make_key(c, gen, gen_len, NULL, 0);
	list = dlz_bdb_lookup(&c->bdb, c->xfr_db, &c->bdb.list, &list_len);
	if (list == DLZ_BDB_MISSING) {
		dlz_log(ISC_LOG_ERROR, "zone %s: generation %s has no owner list", zone, gen);
		return DLZ_BAD_DATA;
	}
	if (list != DLZ_BDB_FOUND) {
		return DLZ_ERROR;
	}
	bdbhpt_make_key(c, gen, gen_len, "", 0);
	rc = dlz_bdb_walk_owners(&c->bdb, c->data_db, zone, list_len, cb, ctx, &gone);
	if (gone != NULL) {
		/* The generation was purged during the transfer (replaced > 10 s ago). */
		dlz_log(ISC_LOG_ERROR, "zone %s: node %s of generation %s is gone", zone, gone,
			gen);
	}
	return rc;
}

static int
bdbhpt_allowxfr(void *conn, const char *zone, const char *client) {
	struct bdbhpt_conn *c = conn;
	char gen[GEN_MAX + 1];
	int rc;

	if (!bdbhpt_make_key(c, zone, strlen(zone), NULL, 0)) {
		return DLZ_NOTFOUND;
	}
	rc = dlz_bdb_acl_check(&c->bdb, c->client_db, client);
	if (rc != DLZ_NOTFOUND) {
		return rc;
	}
	/* No ACL: nobody may transfer the zone, if it exists at all. */
	return dlz_bdb_if_zone(bdbhpt_zone_generation(c, zone, gen), DLZ_DENIED);
}

static const struct dlz_arg_spec bdbhpt_args[] = {
	DLZ_TEXT_REQUIRED("mode", "transactional, concurrent or private: how the environment is "
				  "opened, as the loader made it"),
	DLZ_TEXT_REQUIRED("env", "the environment's home directory"),
	DLZ_INT("lock_timeout_ms", DEFAULT_LOCK_TIMEOUT_MS, 1, DLZ_MS_MAX,
		"ms a read may wait for a writer's lock"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "bdbhpt",
	.thread_safe = true,
	.args = bdbhpt_args,
	.init = bdbhpt_init,
	.fini = bdbhpt_fini,
	.connect = bdbhpt_connect,
	.disconnect = bdbhpt_disconnect,
	.fetch = bdbhpt_fetch,
	.allnodes = bdbhpt_allnodes,
	.allowxfr = bdbhpt_allowxfr,
	.begin = bdbhpt_begin,
	.add = bdbhpt_add,
	.del = bdbhpt_del,
	.below = bdbhpt_below,
	.commit = bdbhpt_commit,
	.rollback = bdbhpt_rollback,
};
