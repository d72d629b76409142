/*
 * What one fetch returned. Rows point into a per-thread arena that is reset, not freed,
 * between fetches: after the first few queries a thread allocates nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define ARENA_MIN 4096

static char *
arena_alloc(struct dlz_rowset *rs, size_t size) {
	struct arena_chunk *chunk = rs->chunks;
	size_t want;

	if (chunk == NULL || chunk->size - chunk->used < size) {
		want = size > ARENA_MIN ? size : ARENA_MIN;
		if (chunk != NULL && want < 2 * chunk->size) {
			want = 2 * chunk->size;
		}
		chunk = malloc(sizeof(*chunk) + want);
		if (chunk == NULL) {
			return NULL;
		}
		chunk->size = want;
		chunk->used = 0;
		chunk->next = rs->chunks;
		rs->chunks = chunk;
	}
	chunk->used += size;
	return chunk->data + chunk->used - size;
}

static const char *
arena_strndup(struct dlz_rowset *rs, const char *text, size_t len) {
	char *copy = arena_alloc(rs, len + 1);

	if (copy != NULL) {
		memcpy(copy, text, len);
		copy[len] = '\0';
	}
	return copy;
}

void
rowset_reset(struct dlz_rowset *rs) {
	struct arena_chunk *chunk = rs->chunks, *next;
	size_t total = 0;

	rs->nrows = 0;
	rs->nzones = 0;
	if (chunk == NULL) {
		return;
	}
	if (chunk->next == NULL) {
		chunk->used = 0;
		return;
	}
	/* The last fetch outgrew the arena: replace its chunks by one that holds them all. */
	for (; chunk != NULL; chunk = next) {
		next = chunk->next;
		total += chunk->size;
		free(chunk);
	}
	rs->chunks = NULL;
	chunk = malloc(sizeof(*chunk) + total);
	if (chunk != NULL) {
		chunk->next = NULL;
		chunk->size = total;
		chunk->used = 0;
		rs->chunks = chunk;
	}
}

void
rowset_free(struct dlz_rowset *rs) {
	struct arena_chunk *chunk = rs->chunks, *next;

	for (; chunk != NULL; chunk = next) {
		next = chunk->next;
		free(chunk);
	}
	free(rs->rows);
	free(rs->zones);
	memset(rs, 0, sizeof(*rs));
}

bool
rowset_has_zone(const struct dlz_rowset *rs, const char *zone) {
	for (size_t i = 0; i < rs->nzones; i++) {
		if (strcmp(rs->zones[i], zone) == 0) {
			return true;
		}
	}
	return false;
}

bool
dlz_grow(void **array, size_t *cap, size_t need, size_t item) {
	size_t new_cap;
	void *bigger;

	if (need <= *cap) {
		return true;
	}
	new_cap = *cap != 0 ? *cap * 2 : 16;
	while (new_cap < need) {
		new_cap *= 2;
	}
	bigger = realloc(*array, new_cap * item);
	if (bigger == NULL) {
		return false;
	}
	*array = bigger;
	*cap = new_cap;
	return true;
}

bool
dlz_rowset_add_zone_ref(struct dlz_rowset *rs, const char *zone) {
	if (zone == NULL) {
		return false; /* the copy that failed */
	}
	if (rowset_has_zone(rs, zone)) {
		return true;
	}
	if (!dlz_grow((void **)&rs->zones, &rs->zones_cap, rs->nzones + 1, sizeof(*rs->zones))) {
		return false;
	}
	rs->zones[rs->nzones++] = zone;
	return true;
}

bool
dlz_rowset_add_zone(struct dlz_rowset *rs, const char *zone) {
	/* Checked before copying: a SQL backend reports a zone with each of its rows. */
	if (rowset_has_zone(rs, zone)) {
		return true;
	}
	return dlz_rowset_add_zone_ref(rs, arena_strndup(rs, zone, strlen(zone)));
}

bool
dlz_rowset_add_row_ref(struct dlz_rowset *rs, const char *zone, const char *owner,
		       const char *type, uint32_t ttl, const char *rdata) {
	struct dlz_row *row;

	if (zone == NULL || owner == NULL || type == NULL || rdata == NULL ||
	    !dlz_grow((void **)&rs->rows, &rs->rows_cap, rs->nrows + 1, sizeof(*rs->rows))) {
		return false;
	}
	row = &rs->rows[rs->nrows++];
	row->zone = zone;
	row->owner = owner;
	row->type = type;
	row->rdata = rdata;
	row->ttl = ttl;
	row->owner_len = (uint32_t)strlen(owner);
	row->zone_len = (uint32_t)strlen(zone);
	return true;
}

/*
 * A copy of text for a row, or the previous row's copy when it holds the same bytes: a
 * backend that copies gives every row its zone, and the rows of one owner usually come
 * together, so most rows then copy only their type and rdata.
 */
static const char *
row_strndup(struct dlz_rowset *rs, const char *prev, uint32_t prev_len, const char *text,
	    size_t len) {
	if (prev != NULL && prev_len == len && memcmp(prev, text, len) == 0) {
		return prev;
	}
	return arena_strndup(rs, text, len);
}

bool
dlz_rowset_add_row_n(struct dlz_rowset *rs, const char *zone, size_t zone_len,
		     const char *owner, size_t owner_len, const char *type, size_t type_len,
		     uint32_t ttl, const char *rdata, size_t rdata_len) {
	const struct dlz_row *prev = rs->nrows > 0 ? &rs->rows[rs->nrows - 1] : NULL;
	const char *zone_copy, *owner_copy;

	if (prev != NULL) {
		zone_copy = row_strndup(rs, prev->zone, prev->zone_len, zone, zone_len);
		owner_copy = row_strndup(rs, prev->owner, prev->owner_len, owner, owner_len);
	} else {
		zone_copy = arena_strndup(rs, zone, zone_len);
		owner_copy = arena_strndup(rs, owner, owner_len);
	}
	return dlz_rowset_add_row_ref(rs, zone_copy, owner_copy, arena_strndup(rs, type, type_len),
				      ttl, arena_strndup(rs, rdata, rdata_len));
}

bool
dlz_rowset_add_row_keys(struct dlz_rowset *rs, const char *zone, const char *owner,
			const char *type, size_t type_len, uint32_t ttl, const char *rdata,
			size_t rdata_len) {
	return dlz_rowset_add_row_ref(rs, zone, owner, arena_strndup(rs, type, type_len), ttl,
				      arena_strndup(rs, rdata, rdata_len));
}
