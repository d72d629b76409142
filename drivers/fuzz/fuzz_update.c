/*
 * The update path (common/update.c: named's rdatastr lines, the empty non-terminal markers,
 * the transaction) over the memory store, through the dlz_* entry points as named calls them
 * (standin.c stands in for named). Each input is a fresh instance over the same small zone
 * and a script, one operation a line:
 *
 *   + NAME RDATASTR   dlz_addrdataset (RDATASTR as named writes it, '|' for a line break)
 *   - NAME RDATASTR   dlz_subrdataset
 *   x NAME TYPE       dlz_delrdataset
 *   ? NAME            dlz_lookup during the update
 *   c                 commit the update, begin the next
 *   r                 roll it back, begin the next
 *
 * As named does, an update whose step failed is rolled back. After every commit the zone must
 * be whole: every owner inside it, every name between an owner and the apex existing, every
 * name that exists without records (an empty non-terminal) having an owner below it, and a
 * lookup of a name finding records exactly when the zone transfer lists them. After every
 * rollback the zone must be as it was before the update began.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/core.h"
#include "check.h"
#include "standin.h"

#define ZONE "fz.test"
#define MAX_NAMES 256

static const char zone_file[] =
	"#dlzbench-memory 1\n"
	"Z\tfz.test\n"
	"X\tfz.test\t127.0.0.1\n"
	"R\tfz.test\tfz.test\t3600\tSOA\tns.fz.test. admin.fz.test. 1 3600 600 86400 300\n"
	"R\tfz.test\tfz.test\t3600\tNS\tns.fz.test.\n"
	"R\tfz.test\tns.fz.test\t3600\tA\t192.0.2.53\n"
	"R\tfz.test\twww.fz.test\t300\tA\t192.0.2.1\n"
	"R\tfz.test\twww.fz.test\t300\tA\t192.0.2.2\n"
	"R\tfz.test\tc.fz.test\t0\tENT\t\n"
	"R\tfz.test\tb.c.fz.test\t0\tENT\t\n"
	"R\tfz.test\ta.b.c.fz.test\t300\tTXT\t\"deep\"\n"
	"R\tfz.test\tw.fz.test\t0\tENT\t\n"
	"R\tfz.test\t*.w.fz.test\t300\tA\t192.0.2.3\n"
	"R\tfz.test\tsub.fz.test\t300\tNS\tns.sub.fz.test.\n"
	"Z\tother.test\n"
	"R\tother.test\tother.test\t3600\tSOA\tns.other.test. admin.other.test. 1 3600 600 86400 300\n"
	"R\tother.test\twww.other.test\t300\tA\t192.0.2.9\n";

static char data_path[64];

/* The names a script touched (keys), whose existence the checks look at. */
struct names {
	char *keys[MAX_NAMES];
	unsigned count;
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv) {
	int fd;

	(void)argc;
	(void)argv;
	snprintf(data_path, sizeof(data_path), "/tmp/dlzfuzz-update-%d.tsv", (int)getpid());
	fd = open(data_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, zone_file, sizeof(zone_file) - 1) != (ssize_t)sizeof(zone_file) - 1) {
		abort();
	}
	close(fd);
	return 0;
}

static void
names_add(struct names *n, const char *key) {
	for (unsigned i = 0; i < n->count; i++) {
		if (strcmp(n->keys[i], key) == 0) {
			return;
		}
	}
	if (n->count < MAX_NAMES && (n->keys[n->count] = strdup(key)) != NULL) {
		n->count++;
	}
}

/* key and its ancestors inside the zone. */
static void
names_add_chain(struct names *n, const char *key) {
	unsigned offs[DLZ_MAX_LABELS], count = key_ancestors(key, strlen(key), offs);

	for (unsigned i = 0; i < count; i++) {
		if (dlz_key_in_zone(key + offs[i], ZONE)) {
			names_add(n, key + offs[i]);
		}
	}
}

static void
names_free(struct names *n) {
	for (unsigned i = 0; i < n->count; i++) {
		free(n->keys[i]);
	}
}

/*
 * dlz_lookup of key (inside the zone) as named asks in a DNS query for key: findzonedb of key,
 * then the lookup relative to the zone. key is often the parent of the name checked before,
 * so the core may take findzonedb(key) for the next step of that query's walk up its name and
 * answer from the same memos: the answers must be right either way (a lookup of a wildcard
 * owner "*.w" after one of "x.*.w" is a lookup of "*.w", not sdlz's wildcard probe).
 */
static isc_result_t
lookup(void *db, const char *key, unsigned *records) {
	size_t len = strlen(key), zone_len = strlen(ZONE);
	char relative[DLZ_KEY_MAX];
	struct dns_sdlzlookup found = { 0 };
	isc_result_t result;

	if (len == zone_len) {
		snprintf(relative, sizeof(relative), "@");
	} else {
		snprintf(relative, sizeof(relative), "%.*s", (int)(len - zone_len - 1), key);
	}
	dlz_findzonedb(db, key, NULL, NULL);
	result = dlz_lookup(ZONE, relative, db, &found, NULL, NULL);
	*records = found.records;
	return result;
}

/* The owner key of an allnodes line ("owner. TYPE TTL RDATA"), into key. */
static void
line_owner(const char *line, char *key) {
	size_t len = strcspn(line, " ");

	snprintf(key, DLZ_KEY_MAX, "%.*s", (int)(len > 1 ? len - 1 : len), line);
}

static bool
has_owner_below(const struct dns_sdlzallnodes *all, const char *key) {
	char owner[DLZ_KEY_MAX];

	for (size_t i = 0; i < all->count; i++) {
		line_owner(all->lines[i], owner);
		if (dlz_key_below(owner, key)) {
			return true;
		}
	}
	return false;
}

static bool
is_owner(const struct dns_sdlzallnodes *all, const char *key) {
	char owner[DLZ_KEY_MAX];

	for (size_t i = 0; i < all->count; i++) {
		line_owner(all->lines[i], owner);
		if (strcmp(owner, key) == 0) {
			return true;
		}
	}
	return false;
}

/* The zone is whole (see the top); its records into all, sorted. */
static void
check_zone(void *db, struct names *touched, struct dns_sdlzallnodes *all) {
	char owner[DLZ_KEY_MAX];
	unsigned records;

	if (standin_allnodes(ZONE, db, all) != ISC_R_SUCCESS) {
		fuzz_fail("no zone transfer of %s", ZONE);
	}
	standin_allnodes_sort(all);
	for (size_t i = 0; i < all->count; i++) {
		line_owner(all->lines[i], owner);
		if (!dlz_key_in_zone(owner, ZONE)) {
			fuzz_fail("an owner outside the zone: %s", all->lines[i]);
		}
		names_add_chain(touched, owner);
	}
	for (unsigned i = 0; i < touched->count; i++) {
		const char *key = touched->keys[i];
		bool owns = is_owner(all, key), below = has_owner_below(all, key);
		isc_result_t result = lookup(db, key, &records);

		if (result != ISC_R_SUCCESS && result != ISC_R_NOTFOUND) {
			fuzz_fail("lookup of %s: result %d", key, result);
		}
		/* A name exists exactly when it owns records or a name below it does (the apex
		 * always); it has records exactly when the transfer lists them. */
		if ((result == ISC_R_SUCCESS) != (owns || below || strcmp(key, ZONE) == 0) ||
		    (records > 0) != owns) {
			fuzz_fail("%s: lookup %s with %u records; the transfer: %s records, %s below",
				  key, result == ISC_R_SUCCESS ? "found" : "not found", records,
				  owns ? "has" : "no", below ? "a name" : "nothing");
		}
	}
}

/*
 * Could name be BIND's text of an absolute name (dns_name_format)? Not with an empty label
 * (".x", "x..y") or an unescaped '@' or '$' (BIND escapes both, and a key keeps the escape):
 * named never hands such a name over, and "@" alone is the apex to dlz_lookup.
 */
static bool
is_bind_text(const char *name) {
	unsigned offs[DLZ_MAX_LABELS], n = key_ancestors(name, strlen(name), offs);

	for (unsigned i = 0; i < n; i++) {
		if (name[offs[i]] == '.') {
			return false;
		}
	}
	for (const char *p = name; *p != '\0'; p++) {
		if (*p == '\\' && p[1] != '\0') {
			p++;
		} else if (*p == '@' || *p == '$') {
			return false;
		}
	}
	return true;
}

/* The script's NAME field as a key inside the zone, if it is one (for the checks). */
static void
note_name(struct names *touched, const char *name) {
	char key[DLZ_KEY_MAX];
	size_t len;

	if (!is_bind_text(name) || !key_from_bind(key, name)) {
		return;
	}
	len = strlen(key);
	if (len > 1 && key[len - 1] == '.') {
		key[len - 1] = '\0';
	}
	if (dlz_key_in_zone(key, ZONE)) {
		names_add_chain(touched, key);
	}
}

struct run {
	void *db;
	void *version;
	struct names touched;
	struct dns_sdlzallnodes before; /* the zone when the update began */
	struct dns_sdlzallnodes now;
};

static void
begin(struct run *r) {
	check_zone(r->db, &r->touched, &r->before);
	if (dlz_newversion(ZONE, r->db, &r->version) != ISC_R_SUCCESS) {
		fuzz_fail("newversion failed");
	}
}

static void
end(struct run *r, bool commit) {
	dlz_closeversion(ZONE, commit, r->db, &r->version);
	if (r->version != NULL) {
		fuzz_fail("closeversion left the version set (named logs an error)");
	}
	check_zone(r->db, &r->touched, &r->now);
	if (!commit && !standin_allnodes_equal(&r->before, &r->now)) {
		fuzz_fail("a rolled-back update changed the zone (%zu records before, %zu after)",
			  r->before.count, r->now.count);
	}
}

/* One script line; false when the step failed (named then rolls the update back). */
static bool
step(struct run *r, char *line) {
	char op = line[0], *name, *rest;

	if (op == 'c' || op == 'r') {
		end(r, op == 'c');
		begin(r);
		return true;
	}
	if (line[0] == '\0' || line[1] != ' ') {
		return true;
	}
	name = line + 2;
	rest = strchr(name, ' ');
	if (rest != NULL) {
		*rest++ = '\0';
	} else {
		rest = name + strlen(name);
	}
	if (op != '?' && !is_bind_text(name)) {
		return true;
	}
	note_name(&r->touched, name);
	for (char *p = rest; *p != '\0'; p++) {
		*p = *p == '|' ? '\n' : *p;
	}
	switch (op) {
	case '+':
		return dlz_addrdataset(name, rest, r->db, r->version) == ISC_R_SUCCESS;
	case '-':
		return dlz_subrdataset(name, rest, r->db, r->version) == ISC_R_SUCCESS;
	case 'x':
		return dlz_delrdataset(name, rest, r->db, r->version) == ISC_R_SUCCESS;
	case '?': {
		struct dns_sdlzlookup found = { 0 };
		isc_result_t result = dlz_lookup(ZONE, name, r->db, &found, NULL, NULL);

		return result == ISC_R_SUCCESS || result == ISC_R_NOTFOUND;
	}
	default:
		return true;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	char path_arg[96];
	char *argv[] = { "dlz_memory.so", path_arg, "update_zones=" ZONE, "update_unsigned=yes" };
	struct run r = { 0 };
	char *script = malloc(size + 1), *pos, *line;

	if (script == NULL) {
		abort();
	}
	memcpy(script, data, size);
	script[size] = '\0';
	snprintf(path_arg, sizeof(path_arg), "file=%s", data_path);
	if (standin_create("fuzz", 4, argv, &r.db, true) != ISC_R_SUCCESS ||
	    dlz_configure(NULL, NULL, r.db) != ISC_R_SUCCESS) {
		fuzz_fail("dlz_create over %s failed", data_path);
	}
	begin(&r);
	for (pos = script; (line = strsep(&pos, "\n")) != NULL;) {
		if (!step(&r, line)) {
			end(&r, false);
			begin(&r);
		}
	}
	end(&r, true);
	names_free(&r.touched);
	standin_allnodes_free(&r.before);
	standin_allnodes_free(&r.now);
	dlz_destroy(r.db);
	free(script);
	return 0;
}
