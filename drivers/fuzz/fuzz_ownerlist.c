/*
 * bdbhpt's owner list as an update holds it (bdbhpt/dlz_bdbhpt.c, "the owner list of an
 * update", included: it is static): the list read into a set, an owner put in or taken out,
 * the set written back as text, and below() asked of the owner and of every key. Held to a
 * model written here: the list's lines (an empty line holds no key) sorted bytewise, each
 * once, with the owner put in or taken out; and a name below another is one found by a scan of
 * every line, as below() answered before it had an index. Input "+owner LF list" or
 * "-owner LF list" (owners are keys: not empty, no NUL, no LF). For a sorted list without
 * repeats (the loader's) that is the sorted set with the owner added or taken out;
 * tests/test_fuzz_harness.py holds it to Python's sorted set (fuzzcli.c).
 */
#include "../bdbhpt/dlz_bdbhpt.c"
#include "check.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct model {
	char *text; /* the list's lines, NUL-terminated in place */
	const char **lines;
	size_t n;
};

static int
model_cmp(const void *a, const void *b) {
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	size_t nx = strlen(x), ny = strlen(y);
	int cmp = memcmp(x, y, nx < ny ? nx : ny);

	return cmp != 0 ? cmp : nx == ny ? 0 : nx < ny ? -1 : 1;
}

/* The list's non-empty lines and the owner (when put in), sorted, each once, without the
 * owner when it is taken out. */
static void
model_make(struct model *m, const char *list, size_t len, const char *owner, bool present) {
	size_t kept = 0;

	m->text = malloc(len + 1);
	m->lines = malloc((len + 2) * sizeof(*m->lines));
	if (m->text == NULL || m->lines == NULL) {
		abort();
	}
	memcpy(m->text, list, len);
	m->text[len] = '\0';
	m->n = 0;
	for (char *pos = m->text, *lf; pos < m->text + len; pos = lf + 1) {
		lf = memchr(pos, '\n', (size_t)(m->text + len - pos));
		lf = lf != NULL ? lf : m->text + len;
		*lf = '\0';
		if (lf > pos) {
			m->lines[m->n++] = pos;
		}
	}
	if (present) {
		m->lines[m->n++] = owner;
	}
	qsort(m->lines, m->n, sizeof(*m->lines), model_cmp);
	for (size_t i = 0; i < m->n; i++) {
		if ((kept == 0 || strcmp(m->lines[kept - 1], m->lines[i]) != 0) &&
		    (present || strcmp(m->lines[i], owner) != 0)) {
			m->lines[kept++] = m->lines[i];
		}
	}
	m->n = kept;
}

/* Is a line of the model strictly below owner: every line looked at. */
static int
model_below(const struct model *m, const char *owner) {
	for (size_t i = 0; i < m->n; i++) {
		if (dlz_key_below(m->lines[i], owner)) {
			return 1;
		}
	}
	return 0;
}

static char *
model_text(const struct model *m, size_t *len) {
	size_t at = 0, size = 1;
	char *out;

	for (size_t i = 0; i < m->n; i++) {
		size += strlen(m->lines[i]) + 1;
	}
	out = malloc(size);
	if (out == NULL) {
		abort();
	}
	for (size_t i = 0; i < m->n; i++) {
		memcpy(out + at, m->lines[i], strlen(m->lines[i]));
		at += strlen(m->lines[i]);
		out[at++] = '\n';
	}
	*len = at;
	return out;
}

/* below() of name in the set against the model's scan (names as long as no key is skipped:
 * the driver is never asked about one). */
static void
check_below(struct bdbhpt_owners *o, const struct model *m, const char *name) {
	int got, want;

	if (strlen(name) >= DLZ_KEY_MAX) {
		return;
	}
	got = bdbhpt_owners_below(o, name);
	want = model_below(m, name);
	if (got != want) {
		fuzz_fail("below(%s): the set says %d, a scan of every key %d", name, got, want);
	}
}

static void
check_list(const char *list, size_t list_len, const char *owner, bool present) {
	struct bdbhpt_owners o = { 0 };
	struct model m;
	size_t got_len, want_len;
	char *got, *want;

	model_make(&m, list, list_len, owner, present);
	if (!bdbhpt_owners_parse(&o, list, list_len) || !bdbhpt_owners_edit(&o, owner, present) ||
	    (got = bdbhpt_owners_text(&o, &got_len)) == NULL) {
		abort();
	}
	want = model_text(&m, &want_len);
	if (got_len != want_len || memcmp(got, want, got_len) != 0) {
		fuzz_fail("%c%s: the set gives %zu bytes \"%.*s\", the model %zu \"%.*s\"",
			  present ? '+' : '-', owner, got_len, (int)got_len, got, want_len,
			  (int)want_len, want);
	}
	check_below(&o, &m, owner);
	for (size_t i = 0; i < m.n; i++) {
		check_below(&o, &m, m.lines[i]);
	}
	bdbhpt_owners_free(&o);
	free(got);
	free(want);
	free(m.text);
	free(m.lines);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	const char *lf = memchr(data, '\n', size);
	size_t owner_len;
	char *owner;

	if (size == 0 || lf == NULL || (data[0] != '+' && data[0] != '-')) {
		return 0;
	}
	owner_len = (size_t)(lf - (const char *)data) - 1;
	if (owner_len == 0 || memchr(data, '\0', size) != NULL) {
		return 0; /* no key is empty; neither a key nor a list line holds a NUL */
	}
	owner = strndup((const char *)data + 1, owner_len);
	if (owner == NULL) {
		abort();
	}
	check_list(lf + 1, size - owner_len - 2, owner, data[0] == '+');
	free(owner);
	return 0;
}
