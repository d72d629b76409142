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

struct bdbhpt_conn {
	struct dlz_bdb_conn bdb; /* first: the connection is freed through it */
	struct bdbhpt_env *env;
	bool own_env;
	DB *zone_db;
	DB *data_db;
	DB *xfr_db;
	DB *client_db;
};

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
	const char *mode_name = dlz_arg_str(args, "mode", NULL);
	const char *home = dlz_arg_str(args, "env", NULL);
	const struct bdbhpt_mode *mode;
	char *real, data[PATH_MAX + sizeof(DATA_FILE) + 1];
	struct bdbhpt_state *s;
	struct stat st;

	long lock_timeout_ms;

	if (!dlz_arg_long(args, "lock_timeout_ms", DEFAULT_LOCK_TIMEOUT_MS, 1, 600000,
			  &lock_timeout_ms)) {
		return DLZ_ERROR;
	}
	if (mode_name == NULL || home == NULL) {
		dlz_log(ISC_LOG_ERROR, "arguments mode=transactional|concurrent|private and "
				       "env=<environment home> are required");
		return DLZ_ERROR;
	}
	mode = bdbhpt_mode_named(mode_name);
	if (mode == NULL) {
		dlz_log(ISC_LOG_ERROR, "mode=%s: expected transactional, concurrent or private",
			mode_name);
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

static int
bdbhpt_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct bdbhpt_owner_read r = { .c = conn, .req = req, .out = out };

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

static const char *const bdbhpt_keys[] = { "mode", "env", "lock_timeout_ms", NULL };

const struct dlz_backend dlz_backend = {
	.name = "bdbhpt",
	.thread_safe = true,
	.arg_keys = bdbhpt_keys,
	.init = bdbhpt_init,
	.fini = bdbhpt_fini,
	.connect = bdbhpt_connect,
	.disconnect = bdbhpt_disconnect,
	.fetch = bdbhpt_fetch,
	.allnodes = bdbhpt_allnodes,
	.allowxfr = bdbhpt_allowxfr,
};
