/* Keys: BIND's presentation text of a name, lower case, without the final dot. */
#include <string.h>

#include "core.h"

/* Is the dot at key[pos] a label separator (not escaped by an odd run of backslashes)? */
static bool
dot_separates(const char *key, size_t pos) {
	size_t backslashes = 0;

	while (pos > backslashes && key[pos - backslashes - 1] == '\\') {
		backslashes++;
	}
	return backslashes % 2 == 0;
}

unsigned
key_ancestors(const char *key, size_t len, unsigned offs[DLZ_MAX_LABELS]) {
	unsigned count = 0;

	if (len == 0 || (len == 1 && key[0] == '.')) {
		return 0;
	}
	offs[count++] = 0;
	for (size_t i = 0; i < len; i++) {
		if (key[i] == '\\') {
			i++; /* the escaped character, or the first digit of \DDD */
		} else if (key[i] == '.') {
			if (count == DLZ_MAX_LABELS || i + 1 >= len) {
				return 0; /* more labels than a name can have, or a final dot */
			}
			offs[count++] = (unsigned)(i + 1);
		}
	}
	return count;
}

bool
key_from_bind(char *dst, const char *src) {
	size_t len = strlen(src);

	if (len >= DLZ_KEY_MAX) {
		return false;
	}
	/* Keys are BIND's own text (zonedata.model.name_key); only the case differs, in the
	 * wildcard probes and findzonedb names BIND does not lower-case. Escapes are left alone:
	 * a letter is never escaped, so lowering the text lowers exactly the name's letters. */
	for (size_t i = 0; i <= len; i++) {
		char c = src[i];
		dst[i] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
	}
	return true;
}

bool
key_absolute(char *dst, const char *zone, const char *relative) {
	char joined[DLZ_KEY_MAX];
	size_t rel_len = strlen(relative), zone_len = strlen(zone);

	/* A lone "@" is the apex; a label "@" reaches us escaped ("\\@"). */
	if (strcmp(relative, "@") == 0) {
		return key_from_bind(dst, zone);
	}
	if (strcmp(zone, ".") == 0) {
		return key_from_bind(dst, relative);
	}
	if (rel_len + 1 + zone_len + 1 > sizeof(joined)) {
		return false;
	}
	memcpy(joined, relative, rel_len);
	joined[rel_len] = '.';
	memcpy(joined + rel_len + 1, zone, zone_len + 1);
	return key_from_bind(dst, joined);
}

bool
dlz_key_in_zone(const char *key, const char *zone) {
	size_t key_len = strlen(key), zone_len = strlen(zone);

	if (strcmp(zone, ".") == 0 || strcmp(key, zone) == 0) {
		return true;
	}
	if (key_len <= zone_len + 1 || strcmp(key + key_len - zone_len, zone) != 0) {
		return false;
	}
	return key[key_len - zone_len - 1] == '.' && dot_separates(key, key_len - zone_len - 1);
}

bool
dlz_key_below(const char *key, const char *owner) {
	return strcmp(key, owner) != 0 && dlz_key_in_zone(key, owner);
}

int
dlz_key_cmp_from_end(const char *a, const char *b) {
	size_t i = strlen(a), j = strlen(b);

	while (i > 0 && j > 0) {
		unsigned char x = (unsigned char)a[--i], y = (unsigned char)b[--j];
		if (x != y) {
			return x < y ? -1 : 1;
		}
	}
	return i == j ? 0 : i < j ? -1 : 1;
}

int
dlz_key_qsort_from_end(const void *a, const void *b) {
	return dlz_key_cmp_from_end(*(const char *const *)a, *(const char *const *)b);
}
