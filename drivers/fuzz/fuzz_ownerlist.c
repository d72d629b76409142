/*
 * bdbhpt's owner-list edit (bdbhpt/dlz_bdbhpt.c bdbhpt_list_edit, included: it is static),
 * held to a model written here: the list's lines without those equal to the owner, and when
 * the owner is put in, it goes before the first line that sorts at or after it (bytewise), else
 * last. Input "+owner LF list" or "-owner LF list" (owners are keys: no NUL, no LF). For a
 * sorted list without repeats that is the sorted set with the owner added or taken out;
 * tests/test_fuzz_harness.py holds it to Python's sorted set (fuzzcli.c).
 */
#include "../bdbhpt/dlz_bdbhpt.c"
#include "check.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytewise order of a line (n bytes) against owner, as memcmp then length. */
static int
model_cmp(const char *line, size_t n, const char *owner, size_t owner_len) {
	int cmp = memcmp(line, owner, n < owner_len ? n : owner_len);

	return cmp != 0 ? cmp : n == owner_len ? 0 : n < owner_len ? -1 : 1;
}

static void
model_put(char *out, size_t *len, const char *text, size_t n) {
	memcpy(out + *len, text, n);
	*len += n;
	out[(*len)++] = '\n';
}

static size_t
model_edit(const char *list, size_t len, const char *owner, bool present, char *out) {
	size_t owner_len = strlen(owner), out_len = 0;
	const char *pos = list, *end = list + len;
	bool placed = false;

	while (pos < end) {
		const char *lf = memchr(pos, '\n', (size_t)(end - pos));
		size_t n = lf != NULL ? (size_t)(lf - pos) : (size_t)(end - pos);
		int cmp = model_cmp(pos, n, owner, owner_len);

		if (present && !placed && cmp >= 0) {
			model_put(out, &out_len, owner, owner_len);
			placed = true;
		}
		if (cmp != 0) {
			model_put(out, &out_len, pos, n);
		}
		pos += n + 1;
	}
	if (present && !placed) {
		model_put(out, &out_len, owner, owner_len);
	}
	return out_len;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	const char *lf = memchr(data, '\n', size);
	char *owner, *list, *got, *want;
	size_t owner_len, list_len, got_len, want_len;
	bool present;

	if (size == 0 || lf == NULL || (data[0] != '+' && data[0] != '-')) {
		return 0;
	}
	present = data[0] == '+';
	owner_len = (size_t)(lf - (const char *)data) - 1;
	list_len = size - owner_len - 2;
	if (memchr(data, '\0', size) != NULL) {
		return 0; /* neither a key nor a list line holds a NUL */
	}
	owner = strndup((const char *)data + 1, owner_len);
	list = malloc(list_len + 1);
	/* Exactly what bdbhpt_upd_list allocates: ASan sees a write past it. */
	got = malloc(list_len + owner_len + 2);
	want = malloc(list_len + owner_len + 2);
	if (owner == NULL || list == NULL || got == NULL || want == NULL) {
		abort();
	}
	memcpy(list, lf + 1, list_len);
	list[list_len] = '\0'; /* the driver's lists are NUL-terminated (bdbhpt_upd_get) */
	got_len = bdbhpt_list_edit(list, list_len, owner, present, got);
	want_len = model_edit(list, list_len, owner, present, want);
	if (got_len != want_len || memcmp(got, want, got_len) != 0) {
		fuzz_fail("%c%s: the edit gives %zu bytes \"%.*s\", the model %zu \"%.*s\"",
			  data[0], owner, got_len, (int)got_len, got, want_len, (int)want_len, want);
	}
	free(owner);
	free(list);
	free(got);
	free(want);
	return 0;
}
