/*
 * Hints: names BIND looks up in a zone after the first fetch of a DNS query, learned per
 * thread so that the next query's fetch can ask for them too (see core.c).
 *
 * What BIND looks up for the additional section of an answer depends on the data (the zone's
 * NS targets for every positive answer; an MX or SRV target and its "_tcp." TLSA probes for
 * that one owner), so it is learned: a lookup that no memo could answer (a fallback fetch) is
 * remembered as (zone, name, the query name that needed it). Hints of a zone are offered to
 * every later query of that name; a name that a second, different query name needs as well
 * (the NS targets) is then offered to every query of the zone.
 *
 * Only names are kept, never data: rows always come from the fetch of the query being
 * answered, so a hint that went stale costs a fallback fetch and nothing else.
 *
 * Bounds: a table of `slots` zones (2-way set associative, least recently used replaced),
 * at most HINTS_PER_ZONE names per zone (least recently used replaced), names at most
 * HINT_DEPTH labels below their zone. Per thread, so no locking.
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

#define HINT_ANY 0 /* trigger of a name every query of the zone needs */

struct hint {
	uint64_t trigger; /* hash of the query name that needed it; HINT_ANY: every query */
	uint32_t used;    /* query counter when last learned or used */
	uint16_t off;     /* the name (an absolute key) at text + off */
	uint16_t len;
};

struct hint_zone {
	uint64_t hash;
	uint32_t used;
	unsigned nhints;
	char *text; /* the zone key, NUL, then the hinted names, each NUL-terminated */
	size_t text_len;
	size_t text_cap;
	size_t zone_len;
	struct hint hints[HINTS_PER_ZONE];
};

struct hint_table {
	size_t mask; /* slots - 1; slots is a power of two, at least 2 */
	struct hint_zone **slots;
};

uint64_t
hint_hash(const char *key, size_t len) {
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3ULL;
	}
	/* 0 stays free for an empty slot and for HINT_ANY. */
	return h != 0 ? h : 1;
}

struct hint_table *
hints_new(unsigned zones) {
	struct hint_table *t;
	size_t slots = 2;

	if (zones == 0) {
		return NULL;
	}
	while (slots < zones) {
		slots *= 2;
	}
	t = calloc(1, sizeof(*t));
	if (t == NULL) {
		return NULL;
	}
	t->slots = calloc(slots, sizeof(*t->slots));
	if (t->slots == NULL) {
		free(t);
		return NULL;
	}
	t->mask = slots - 1;
	return t;
}

static void
zone_free(struct hint_zone *z) {
	if (z != NULL) {
		free(z->text);
		free(z);
	}
}

void
hints_free(struct hint_table *t) {
	if (t == NULL) {
		return;
	}
	for (size_t i = 0; i <= t->mask; i++) {
		zone_free(t->slots[i]);
	}
	free(t->slots);
	free(t);
}

/* The two slots a zone may occupy. */
static size_t
first_slot(const struct hint_table *t, uint64_t hash) {
	return (size_t)hash & t->mask & ~(size_t)1;
}

static struct hint_zone *
zone_find(const struct hint_table *t, const char *zone, size_t zone_len, uint64_t hash,
	  size_t *slot) {
	size_t first = first_slot(t, hash);

	for (size_t i = first; i < first + 2; i++) {
		struct hint_zone *z = t->slots[i];
		if (z != NULL && z->hash == hash && z->zone_len == zone_len &&
		    memcmp(z->text, zone, zone_len) == 0) {
			*slot = i;
			return z;
		}
	}
	return NULL;
}

static bool
text_append(struct hint_zone *z, const char *s, size_t len) {
	if (!dlz_grow((void **)&z->text, &z->text_cap, z->text_len + len + 1, 1)) {
		return false;
	}
	memcpy(z->text + z->text_len, s, len);
	z->text[z->text_len + len] = '\0';
	z->text_len += len + 1;
	return true;
}

/* A new entry for zone in the less recently used of its two slots. */
static struct hint_zone *
zone_add(struct hint_table *t, const char *zone, size_t zone_len, uint64_t hash,
	 uint32_t now) {
	size_t first = first_slot(t, hash), victim = first;
	struct hint_zone *z;

	if (t->slots[first] != NULL &&
	    (t->slots[first + 1] == NULL || t->slots[first + 1]->used < t->slots[first]->used)) {
		victim = first + 1;
	}
	z = calloc(1, sizeof(*z));
	if (z == NULL || !text_append(z, zone, zone_len)) {
		zone_free(z);
		return NULL;
	}
	z->hash = hash;
	z->zone_len = zone_len;
	z->used = now;
	zone_free(t->slots[victim]);
	t->slots[victim] = z;
	return z;
}

/* Drop hint i (its text stays until the entry's text is compacted). */
static void
hint_drop(struct hint_zone *z, unsigned i) {
	z->hints[i] = z->hints[--z->nhints];
}

/* Rewrite the entry's text with only the names still hinted. */
static bool
zone_compact(struct hint_zone *z) {
	size_t need = z->zone_len + 1, pos;
	char *text;

	for (unsigned i = 0; i < z->nhints; i++) {
		need += z->hints[i].len + 1U;
	}
	text = malloc(need);
	if (text == NULL) {
		return false;
	}
	memcpy(text, z->text, z->zone_len + 1);
	pos = z->zone_len + 1;
	for (unsigned i = 0; i < z->nhints; i++) {
		memcpy(text + pos, z->text + z->hints[i].off, z->hints[i].len + 1U);
		z->hints[i].off = (uint16_t)pos;
		pos += z->hints[i].len + 1U;
	}
	free(z->text);
	z->text = text;
	z->text_len = z->text_cap = need;
	return true;
}

void
hints_learn(struct hint_table *t, const char *zone, const char *name, uint64_t trigger,
	    uint32_t now) {
	size_t zone_len = strlen(zone), len = strlen(name), slot;
	uint64_t hash = hint_hash(zone, zone_len);
	struct hint_zone *z;
	unsigned oldest = 0;

	if (t == NULL || len >= DLZ_KEY_MAX || zone_len >= DLZ_KEY_MAX) {
		return;
	}
	z = zone_find(t, zone, zone_len, hash, &slot);
	if (z == NULL) {
		z = zone_add(t, zone, zone_len, hash, now);
		if (z == NULL) {
			return;
		}
	}
	z->used = now;
	for (unsigned i = 0; i < z->nhints; i++) {
		struct hint *h = &z->hints[i];
		if (h->len == len && memcmp(z->text + h->off, name, len) == 0) {
			/* Needed by another query name too: offer it to the whole zone. */
			if (h->trigger != trigger) {
				h->trigger = HINT_ANY;
			}
			h->used = now;
			return;
		}
		if (h->used < z->hints[oldest].used) {
			oldest = i;
		}
	}
	if (z->nhints == HINTS_PER_ZONE) {
		hint_drop(z, oldest);
	}
	/* Texts of dropped names pile up until they are compacted away. */
	if (z->text_len + len + 1 > HINT_TEXT_MAX && !zone_compact(z)) {
		return;
	}
	if (z->text_len + len + 1 > HINT_TEXT_MAX) {
		return;
	}
	z->hints[z->nhints].off = (uint16_t)z->text_len;
	if (!text_append(z, name, len)) {
		return;
	}
	z->hints[z->nhints].len = (uint16_t)len;
	z->hints[z->nhints].trigger = trigger;
	z->hints[z->nhints].used = now;
	z->nhints++;
}

void
hints_note_zone(struct hint_table *t, const char *zone, size_t zone_len, uint32_t now) {
	uint64_t hash;
	struct hint_zone *z;
	size_t slot;

	if (t == NULL || zone_len >= DLZ_KEY_MAX) {
		return;
	}
	hash = hint_hash(zone, zone_len);
	z = zone_find(t, zone, zone_len, hash, &slot);
	if (z == NULL) {
		z = zone_add(t, zone, zone_len, hash, now);
	}
	if (z != NULL) {
		z->used = now;
	}
}

void
hints_forget_zone(struct hint_table *t, const char *zone, size_t zone_len) {
	struct hint_zone *z;
	size_t slot;

	if (t == NULL || zone_len >= DLZ_KEY_MAX) {
		return;
	}
	z = zone_find(t, zone, zone_len, hint_hash(zone, zone_len), &slot);
	if (z != NULL) {
		zone_free(z);
		t->slots[slot] = NULL;
	}
}

unsigned
hints_for(struct hint_table *t, const char *const *names, const unsigned *lens,
	  unsigned nnames, uint64_t trigger, uint32_t now, struct hint_pick *out,
	  int *zone_index) {
	*zone_index = -1;
	if (t == NULL) {
		return 0;
	}
	for (unsigned i = 0; i < nnames; i++) {
		size_t slot;
		struct hint_zone *z = zone_find(t, names[i], lens[i], hint_hash(names[i], lens[i]),
						&slot);
		unsigned n = 0;

		if (z == NULL) {
			continue;
		}
		z->used = now;
		for (unsigned k = 0; k < z->nhints; k++) {
			const struct hint *h = &z->hints[k];
			if (h->trigger == HINT_ANY || h->trigger == trigger) {
				out[n].name = z->text + h->off;
				out[n].len = h->len;
				out[n].ref = (unsigned)(slot * HINTS_PER_ZONE + k);
				n++;
			}
		}
		*zone_index = (int)i;
		return n;
	}
	return 0;
}

void
hints_used(struct hint_table *t, unsigned ref, const char *name, size_t len, uint32_t now) {
	struct hint_zone *z;
	struct hint *h;

	if (t == NULL || ref / HINTS_PER_ZONE > t->mask) {
		return;
	}
	z = t->slots[ref / HINTS_PER_ZONE];
	if (z == NULL || ref % HINTS_PER_ZONE >= z->nhints) {
		return;
	}
	/* The table may have changed since the fetch: only the same name is touched. */
	h = &z->hints[ref % HINTS_PER_ZONE];
	if (h->len == len && memcmp(z->text + h->off, name, len) == 0) {
		h->used = now;
		z->used = now;
	}
}
