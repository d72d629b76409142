/*
 * The in-memory reference driver: the whole data file (schemas/memory.md) is read once at
 * dlz_create into hash tables and never changes, so fetches are a few hash lookups with no
 * locking and rows point straight into the table (no copies).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/dlz_driver.h"

#define FILE_MAGIC "#dlzbench-memory 1"

struct macl {
	const char *client;
	struct macl *next;
};

struct mrec {
	const char *owner;
	const char *type;
	const char *rdata;
	uint32_t ttl;
	struct mzone *zone;
	struct mrec *next_of_owner;
	struct mrec *next_in_zone;
};

struct mzone {
	const char *key;
	struct mrec *first;
	struct mrec *last;
	struct macl *acl;
};

struct mowner {
	const char *key;
	struct mrec *first;
};

/* Open addressing over pointers; keys are compared after the hash. */
struct mhash {
	void **slots;
	uint64_t *hashes;
	size_t mask;
};

struct mtable {
	const char *path;
	const char *outage_file; /* while it exists, the "database" is down (tests) */
	char *text;
	struct mzone *zones;
	size_t nzones;
	struct mowner *owners;
	size_t nowners;
	struct mrec *recs;
	size_t nrecs;
	struct macl *acls;
	size_t nacls;
	struct mhash zone_index;
	struct mhash owner_index;
};

/* ---- hashing ---------------------------------------------------------------------------- */

static uint64_t
hash_key(const char *key) {
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (; *key != '\0'; key++) {
		h ^= (unsigned char)*key;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static bool
mhash_init(struct mhash *h, size_t items) {
	size_t size = 16;

	while (size < 2 * items) {
		size *= 2;
	}
	h->slots = calloc(size, sizeof(*h->slots));
	h->hashes = calloc(size, sizeof(*h->hashes));
	h->mask = size - 1;
	return h->slots != NULL && h->hashes != NULL;
}

static void
mhash_free(struct mhash *h) {
	free(h->slots);
	free(h->hashes);
}

/* The slot of key: holding its item, or the empty slot where it belongs. Items start with
 * their key pointer (struct mzone and struct mowner both do). */
static size_t
mhash_slot(const struct mhash *h, const char *key, uint64_t hash) {
	size_t i = hash & h->mask;

	while (h->slots[i] != NULL &&
	       (h->hashes[i] != hash || strcmp(*(const char *const *)h->slots[i], key) != 0)) {
		i = (i + 1) & h->mask;
	}
	return i;
}

static void *
mhash_get(const struct mhash *h, const char *key) {
	return h->slots[mhash_slot(h, key, hash_key(key))];
}

static struct mzone *
zone_get(const struct mtable *t, const char *key) {
	return mhash_get(&t->zone_index, key);
}

/* ---- loading ---------------------------------------------------------------------------- */

static void
table_free(struct mtable *t) {
	if (t == NULL) {
		return;
	}
	mhash_free(&t->zone_index);
	mhash_free(&t->owner_index);
	free(t->zones);
	free(t->owners);
	free(t->recs);
	free(t->acls);
	free(t->text);
	free(t);
}

static char *
read_file(const char *path, size_t *len) {
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	size_t done = 0;

	if (fd < 0 || fstat(fd, &st) != 0) {
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	if (text == NULL) {
		goto fail;
	}
	while (done < (size_t)st.st_size) {
		ssize_t got = read(fd, text + done, (size_t)st.st_size - done);
		if (got < 0 && errno == EINTR) {
			continue;
		}
		if (got <= 0) {
			goto fail;
		}
		done += (size_t)got;
	}
	close(fd);
	text[done] = '\0';
	*len = done;
	return text;
fail:
	dlz_log(ISC_LOG_ERROR, "cannot read %s: %s", path, strerror(errno));
	if (fd >= 0) {
		close(fd);
	}
	free(text);
	return NULL;
}

/* Split line (NUL-terminated) at tabs in place; the last field keeps any further tabs. */
static unsigned
split_fields(char *line, char **fields, unsigned max) {
	unsigned n = 0;

	fields[n++] = line;
	while (n < max) {
		char *tab = strchr(fields[n - 1], '\t');
		if (tab == NULL) {
			break;
		}
		*tab = '\0';
		fields[n++] = tab + 1;
	}
	return n;
}

static bool
parse_ttl(const char *text, uint32_t *ttl) {
	char *end = NULL;
	unsigned long value;

	errno = 0;
	value = strtoul(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value > UINT32_MAX) {
		return false;
	}
	*ttl = (uint32_t)value;
	return true;
}

static bool
add_zone(struct mtable *t, const char *key) {
	uint64_t hash = hash_key(key);
	size_t slot = mhash_slot(&t->zone_index, key, hash);
	struct mzone *zone;

	if (t->zone_index.slots[slot] != NULL) {
		return true; /* declared again: the same zone */
	}
	zone = &t->zones[t->nzones++];
	zone->key = key;
	t->zone_index.slots[slot] = zone;
	t->zone_index.hashes[slot] = hash;
	return true;
}

static bool
add_acl(struct mtable *t, char **f) {
	struct mzone *zone = zone_get(t, f[1]);
	struct macl *acl;

	if (zone == NULL) {
		return false;
	}
	acl = &t->acls[t->nacls++];
	acl->client = f[2];
	acl->next = zone->acl;
	zone->acl = acl;
	return true;
}

static struct mowner *
owner_get_or_add(struct mtable *t, const char *key) {
	uint64_t hash = hash_key(key);
	size_t slot = mhash_slot(&t->owner_index, key, hash);
	struct mowner *owner = t->owner_index.slots[slot];

	if (owner == NULL) {
		owner = &t->owners[t->nowners++];
		owner->key = key;
		owner->first = NULL;
		t->owner_index.slots[slot] = owner;
		t->owner_index.hashes[slot] = hash;
	}
	return owner;
}

static bool
add_record(struct mtable *t, char **f) {
	struct mzone *zone = zone_get(t, f[1]);
	struct mrec *rec = &t->recs[t->nrecs];
	struct mowner *owner;

	if (zone == NULL || !parse_ttl(f[3], &rec->ttl)) {
		return false;
	}
	t->nrecs++;
	owner = owner_get_or_add(t, f[2]);
	rec->owner = owner->key;
	rec->type = f[4];
	rec->rdata = f[5];
	rec->zone = zone;
	rec->next_of_owner = owner->first;
	owner->first = rec;
	rec->next_in_zone = NULL;
	if (zone->last != NULL) {
		zone->last->next_in_zone = rec;
	} else {
		zone->first = rec;
	}
	zone->last = rec;
	return true;
}

static bool
parse_line(struct mtable *t, char *line) {
	char *f[6];
	unsigned n = split_fields(line, f, 6);

	if (n == 2 && strcmp(f[0], "Z") == 0) {
		return add_zone(t, f[1]);
	}
	if (n == 3 && strcmp(f[0], "X") == 0) {
		return add_acl(t, f);
	}
	if (n == 6 && strcmp(f[0], "R") == 0) {
		return add_record(t, f);
	}
	return false;
}

/* Count lines per kind, so every array is allocated once at its final size. */
static void
count_lines(const char *text, size_t *zones, size_t *acls, size_t *recs) {
	const char *line = text;

	*zones = *acls = *recs = 0;
	while (*line != '\0') {
		*zones += line[0] == 'Z';
		*acls += line[0] == 'X';
		*recs += line[0] == 'R';
		line = strchr(line, '\n');
		if (line == NULL) {
			break;
		}
		line++;
	}
}

static bool
table_allocate(struct mtable *t) {
	size_t zones, acls, recs;

	count_lines(t->text, &zones, &acls, &recs);
	t->zones = calloc(zones + 1, sizeof(*t->zones));
	t->acls = calloc(acls + 1, sizeof(*t->acls));
	t->recs = calloc(recs + 1, sizeof(*t->recs));
	t->owners = calloc(recs + 1, sizeof(*t->owners));
	return t->zones != NULL && t->acls != NULL && t->recs != NULL && t->owners != NULL &&
	       mhash_init(&t->zone_index, zones) && mhash_init(&t->owner_index, recs);
}

static bool
table_parse(struct mtable *t) {
	char *line = t->text, *next;
	unsigned lineno = 0;

	for (; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL) {
			*next++ = '\0';
		}
		lineno++;
		if (lineno == 1 && strcmp(line, FILE_MAGIC) != 0) {
			dlz_log(ISC_LOG_ERROR, "%s is not a dlzbench memory file (no '%s' line)",
				t->path, FILE_MAGIC);
			return false;
		}
		if (line[0] == '#' || line[0] == '\0') {
			continue;
		}
		if (!parse_line(t, line)) {
			dlz_log(ISC_LOG_ERROR, "%s:%u: malformed line, or a zone used before its Z line",
				t->path, lineno);
			return false;
		}
	}
	if (lineno == 0) {
		dlz_log(ISC_LOG_ERROR, "%s is empty", t->path);
		return false;
	}
	return true;
}

static struct mtable *
table_load(const char *path) {
	struct mtable *t = calloc(1, sizeof(*t));
	size_t len;

	if (t == NULL) {
		return NULL;
	}
	t->path = path;
	t->text = read_file(path, &len);
	if (t->text == NULL) {
		table_free(t);
		return NULL;
	}
	if (!table_allocate(t)) {
		dlz_log(ISC_LOG_ERROR, "out of memory loading %s", path);
		table_free(t);
		return NULL;
	}
	if (!table_parse(t)) {
		table_free(t);
		return NULL;
	}
	return t;
}

/* ---- the backend ------------------------------------------------------------------------ */

static int
memory_init(const struct dlz_args *args, void **state) {
	const char *path = dlz_arg_str(args, "file", NULL);
	struct mtable *t;

	if (path == NULL) {
		dlz_log(ISC_LOG_ERROR, "argument file=<data file> is required");
		return DLZ_ERROR;
	}
	t = table_load(path);
	if (t == NULL) {
		return DLZ_ERROR;
	}
	t->outage_file = dlz_arg_str(args, "outage_file", NULL);
	dlz_log(ISC_LOG_INFO, "loaded %zu zones, %zu rows from %s", t->nzones, t->nrecs, path);
	*state = t;
	return DLZ_OK;
}

static void
memory_fini(void *state) {
	table_free(state);
}

/*
 * Tests of the core's failure handling need a backend that fails on demand: with
 * outage_file=<path>, every call fails while that file exists, as with a database that is
 * down, and works again once it is gone.
 */
static bool
in_outage(const struct mtable *t) {
	return t->outage_file != NULL && access(t->outage_file, F_OK) == 0;
}

/* The table is immutable after load: every "connection" is the table itself. */
static int
memory_connect(void *state, void **conn) {
	*conn = state;
	return in_outage(state) ? DLZ_ERROR : DLZ_OK;
}

static void
memory_disconnect(void *state, void *conn) {
	(void)state;
	(void)conn;
}

/* One fetch: its zone, as probe_zone finds it and add_owner_rows reads it. */
struct owner_read {
	const struct mtable *t;
	const struct dlz_fetch_req *req;
	const struct mzone *zone;
	struct dlz_rowset *out;
};

/* dlz_owner_reader: the rows of owner key in the fetch's zone; *found if it has any. */
static int
add_owner_rows(void *ctx, const char *key, bool *found) {
	const struct owner_read *r = ctx;
	const struct mzone *zone = r->zone;
	const struct mowner *owner = mhash_get(&r->t->owner_index, key);

	*found = false;
	for (const struct mrec *rec = owner != NULL ? owner->first : NULL; rec != NULL;
	     rec = rec->next_of_owner) {
		if (rec->zone != zone) {
			continue;
		}
		*found = true;
		if (!dlz_rowset_add_row_ref(r->out, zone->key, rec->owner, rec->type, rec->ttl,
					    rec->rdata)) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

/* dlz_zone_probe: is names[i] a zone? Remembers it in the owner_read. */
static int
probe_zone(void *ctx, unsigned i) {
	struct owner_read *r = ctx;

	r->zone = zone_get(r->t, r->req->names[i]);
	return r->zone != NULL;
}

static int
memory_fetch(void *conn, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct owner_read r = { .t = conn, .req = req, .out = out };
	int z;

	if (in_outage(r.t)) {
		return DLZ_ERROR;
	}
	dlz_find_zone(req, 0, probe_zone, &r, &z); /* a memory probe cannot fail */
	if (z < 0) {
		return DLZ_OK;
	}
	if (!dlz_rowset_add_zone_ref(out, r.zone->key)) {
		return DLZ_ERROR;
	}
	return dlz_read_owners(req, z, 0, add_owner_rows, &r);
}

static int
memory_allnodes(void *conn, const char *zone_key, dlz_node_cb *cb, void *ctx) {
	const struct mzone *zone = zone_get(conn, zone_key);

	if (in_outage(conn)) {
		return DLZ_ERROR;
	}
	if (zone == NULL) {
		return DLZ_NOTFOUND;
	}
	for (const struct mrec *rec = zone->first; rec != NULL; rec = rec->next_in_zone) {
		int rc = cb(ctx, rec->owner, rec->type, rec->ttl, rec->rdata);
		if (rc != DLZ_OK) {
			return rc;
		}
	}
	return DLZ_OK;
}

static int
memory_allowxfr(void *conn, const char *zone_key, const char *client) {
	const struct mzone *zone = zone_get(conn, zone_key);

	if (in_outage(conn)) {
		return DLZ_ERROR;
	}
	if (zone == NULL) {
		return DLZ_NOTFOUND;
	}
	for (const struct macl *acl = zone->acl; acl != NULL; acl = acl->next) {
		if (strcmp(acl->client, client) == 0) {
			return DLZ_OK;
		}
	}
	return DLZ_DENIED;
}

static const char *const memory_keys[] = { "file", "outage_file", NULL };

const struct dlz_backend dlz_backend = {
	.name = "memory",
	.thread_safe = true,
	.arg_keys = memory_keys,
	.init = memory_init,
	.fini = memory_fini,
	.connect = memory_connect,
	.disconnect = memory_disconnect,
	.fetch = memory_fetch,
	.allnodes = memory_allnodes,
	.allowxfr = memory_allowxfr,
};
