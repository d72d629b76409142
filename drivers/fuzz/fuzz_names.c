/*
 * Keys (common/names.c): key_ancestors, key_from_bind, key_absolute and dlz_key_in_zone,
 * held to each other. Input "zone LF name": key_from_bind lowers exactly the letters; every
 * ancestor key_ancestors finds contains the key, and a key lies in a (well-formed) zone
 * exactly when that zone is the root or one of those ancestors; key_absolute joins a
 * relative name to its zone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/core.h"
#include "check.h"

static void
check_lowered(const char *src, const char *dst) {
	size_t len = strlen(src);

	for (size_t i = 0; i <= len; i++) {
		char want = src[i] >= 'A' && src[i] <= 'Z' ? (char)(src[i] + 32) : src[i];
		if (dst[i] != want) {
			fuzz_fail("\"%s\" lowered is \"%s\"", src, dst);
		}
	}
}

/* Every ancestor contains key and its own descendants' ancestors, never the reverse. */
static void
check_ancestors(const char *key, const unsigned *offs, unsigned n) {
	if (n > DLZ_MAX_LABELS || offs[0] != 0) {
		fuzz_fail("%s: %u ancestors, the first at %u", key, n, offs[0]);
	}
	for (unsigned i = 0; i < n; i++) {
		if (i > 0 && (offs[i] <= offs[i - 1] || key[offs[i] - 1] != '.')) {
			fuzz_fail("%s: ancestor %u at %u", key, i, offs[i]);
		}
		for (unsigned j = i; j < n; j++) {
			if (!dlz_key_in_zone(key + offs[i], key + offs[j])) {
				fuzz_fail("%s is not in its ancestor %s", key + offs[i], key + offs[j]);
			}
			if (j > i && dlz_key_in_zone(key + offs[j], key + offs[i])) {
				fuzz_fail("%s is in its descendant %s", key + offs[j], key + offs[i]);
			}
		}
	}
}

/* Has the key (its ancestors offs[0..n-1]) an empty label (".x", "x..y")? BIND's text of a
 * name never has, so keys never have; key_ancestors splits them, dlz_key_in_zone does not
 * promise anything about them. */
static bool
has_empty_label(const char *key, const unsigned *offs, unsigned n) {
	for (unsigned i = 0; i < n; i++) {
		if (key[offs[i]] == '.') {
			return true;
		}
	}
	return false;
}

/* key in zone exactly when zone is the root or one of key's ancestors. */
static void
check_in_zone(const char *key, const unsigned *offs, unsigned n, const char *zone) {
	unsigned zoffs[DLZ_MAX_LABELS];
	bool ancestor = strcmp(zone, ".") == 0;

	unsigned zn = strcmp(zone, ".") == 0 ? 0 : key_ancestors(zone, strlen(zone), zoffs);

	if (strcmp(zone, ".") != 0 && (zn == 0 || has_empty_label(zone, zoffs, zn))) {
		return; /* not a key: nothing is promised */
	}
	for (unsigned i = 0; i < n && !ancestor; i++) {
		ancestor = strcmp(key + offs[i], zone) == 0;
	}
	if (dlz_key_in_zone(key, zone) != ancestor) {
		fuzz_fail("dlz_key_in_zone(%s, %s) is %d, key_ancestors says %d", key, zone,
			  dlz_key_in_zone(key, zone), ancestor);
	}
}

static void
check_absolute(const char *zone, const char *relative) {
	char dst[DLZ_KEY_MAX], joined[2 * DLZ_KEY_MAX + 2];

	if (!key_absolute(dst, zone, relative)) {
		return;
	}
	if (strcmp(relative, "@") == 0) {
		snprintf(joined, sizeof(joined), "%s", zone);
	} else if (strcmp(zone, ".") == 0) {
		snprintf(joined, sizeof(joined), "%s", relative);
	} else {
		snprintf(joined, sizeof(joined), "%s.%s", relative, zone);
	}
	check_lowered(joined, dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	char input[2 * DLZ_KEY_MAX], key[DLZ_KEY_MAX], zone_key[DLZ_KEY_MAX], *name, *lf;
	unsigned offs[DLZ_MAX_LABELS], n;

	if (size >= sizeof(input)) {
		return 0;
	}
	memcpy(input, data, size);
	input[size] = '\0';
	lf = strchr(input, '\n');
	name = lf != NULL ? lf + 1 : input;
	if (lf != NULL) {
		*lf = '\0';
	}
	check_absolute(input, name);
	if (!key_from_bind(key, name) || !key_from_bind(zone_key, input)) {
		return 0;
	}
	check_lowered(name, key);
	n = key_ancestors(key, strlen(key), offs);
	if (n > 0 && !has_empty_label(key, offs, n)) {
		check_ancestors(key, offs, n);
		check_in_zone(key, offs, n, zone_key);
	}
	return 0;
}
