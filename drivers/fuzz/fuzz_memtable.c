/*
 * The memory driver's table parser (memory/dlz_memory.c, included: its functions are static).
 * Input: a data file (schemas/memory.md). Parsed or refused, never a crash; a table that
 * parsed is whole: every record sits in its zone's list and in its owner's chain, found again
 * by the owner's hash, and every zone by its key.
 */
#include "../memory/dlz_memory.c"
#include "../common/core.h"
#include "check.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
quiet(int level, const char *fmt, ...) {
	(void)level;
	(void)fmt;
}

static void
check_table(const struct mem_table *t) {
	size_t in_zones = 0, in_owners = 0;

	for (size_t i = 0; i < t->nzones; i++) {
		const struct mem_zone *z = &t->zones[i];
		if (mem_zone_get(t, z->key) != z) {
			fuzz_fail("zone %s is not found by its key", z->key);
		}
		for (const struct mem_rec *r = z->first; r != NULL; r = r->next_in_zone) {
			if (r->zone != z || (r->next_in_zone == NULL && r != z->last)) {
				fuzz_fail("zone %s: record %s %s in the wrong list", z->key, r->owner,
					  r->type);
			}
			in_zones++;
		}
	}
	for (size_t i = 0; i < t->nowners; i++) {
		const struct mem_owner *o = &t->owners[i];
		if (mem_owner_lookup(t, o->key, mem_hash_key(o->key)) != o) {
			fuzz_fail("owner %s is not found by its hash", o->key);
		}
		for (const struct mem_rec *r = o->first; r != NULL; r = r->next_of_owner) {
			if (strcmp(r->owner, o->key) != 0) {
				fuzz_fail("owner %s chains a record of %s", o->key, r->owner);
			}
			in_owners++;
		}
	}
	if (in_zones != t->nrecs || in_owners != t->nrecs) {
		fuzz_fail("%zu records: %zu in zone lists, %zu in owner chains", t->nrecs, in_zones,
			  in_owners);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct mem_table *t = calloc(1, sizeof(*t));

	log_setup(quiet, "memory");
	if (t == NULL || (t->text = malloc(size + 1)) == NULL) {
		abort();
	}
	t->path = "fuzz input";
	memcpy(t->text, data, size);
	t->text[size] = '\0';
	if (!mem_table_allocate(t)) {
		abort();
	}
	if (mem_table_parse(t)) {
		check_table(t);
	}
	mem_table_free(t);
	return 0;
}
