/*
 * The record lines of the file-like stores (common/records.c): input is one node value. The
 * two readers of a node, dlz_rowset_add_node (a fetch: copies by length) and dlz_node_walk (a
 * zone transfer: NUL-terminates in place), must agree on whether it is malformed and, if not,
 * on every record; each line dlz_record_split takes has a type without a space, a TTL that is
 * the decimal digits between the two first spaces, and the rest as rdata. dlz_lines_contain
 * is held to a plain search of the lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/core.h"
#include "check.h"

#define MAX_RECS 4096

struct walked {
	char *lines[MAX_RECS];
	size_t count;
};

static int
collect(void *ctx, const char *owner, const char *type, uint32_t ttl, const char *rdata) {
	struct walked *w = ctx;
	char line[64];
	size_t need = strlen(type) + strlen(rdata) + sizeof(line);

	(void)owner;
	if (w->count == MAX_RECS) {
		return DLZ_ERROR;
	}
	w->lines[w->count] = malloc(need);
	if (w->lines[w->count] == NULL) {
		abort();
	}
	snprintf(w->lines[w->count++], need, "%s %u %s", type, ttl, rdata);
	return DLZ_OK;
}

static void
check_split(const char *line, size_t len) {
	struct dlz_record_line r;
	uint64_t ttl = 0;

	if (!dlz_record_split(line, len, &r)) {
		return;
	}
	if (r.type != line || r.type_len == 0 || memchr(r.type, ' ', r.type_len) != NULL ||
	    line[r.type_len] != ' ' || r.rdata + r.rdata_len != line + len || r.rdata[-1] != ' ') {
		fuzz_fail("\"%.*s\": type of %zu bytes, rdata of %zu", (int)len, line, r.type_len,
			  r.rdata_len);
	}
	for (const char *p = line + r.type_len + 1; p < r.rdata - 1; p++) {
		if (*p < '0' || *p > '9') {
			fuzz_fail("\"%.*s\": a TTL with a non-digit", (int)len, line);
		}
		ttl = ttl * 10 + (uint64_t)(*p - '0');
	}
	if (ttl != r.ttl || r.rdata - 1 == line + r.type_len + 1) {
		fuzz_fail("\"%.*s\": TTL %u, the digits say %llu", (int)len, line, r.ttl,
			  (unsigned long long)ttl);
	}
}

/* Plain search: is one of the LF-separated lines of list (len bytes) equal to line as C
 * strings? */
static bool
model_contains(const char *list, size_t len, const char *line) {
	const char *pos = list, *end = list + len;

	while (pos < end) {
		const char *lf = memchr(pos, '\n', (size_t)(end - pos));
		size_t n = lf != NULL ? (size_t)(lf - pos) : (size_t)(end - pos);
		char *copy = strndup(pos, n);
		bool same = copy != NULL && strcmp(copy, line) == 0;

		free(copy);
		if (same) {
			return true;
		}
		pos += n + 1;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static struct walked w;
	struct dlz_rowset rows = { 0 };
	char *value = malloc(size + 1), *copy = malloc(size + 1);
	const char *pos = (const char *)data, *end = pos + size;
	int added, walked;

	if (value == NULL || copy == NULL) {
		abort();
	}
	while (pos < end) {
		const char *lf = memchr(pos, '\n', (size_t)(end - pos));
		size_t n = lf != NULL ? (size_t)(lf - pos) : (size_t)(end - pos);
		check_split(pos, n);
		pos += n + 1;
	}
	memcpy(value, data, size);
	added = dlz_rowset_add_node(&rows, "zone", "owner.zone", value, size);
	w.count = 0;
	walked = dlz_node_walk("zone", "owner.zone", value, size, collect, &w);
	if (walked != DLZ_ERROR && (added == DLZ_OK) != (walked == DLZ_OK)) {
		fuzz_fail("a fetch reads the node with result %d, a transfer with %d", added, walked);
	}
	if (added == DLZ_OK && walked == DLZ_OK) {
		if (rows.nrows != w.count) {
			fuzz_fail("a fetch reads %zu records, a transfer %zu", rows.nrows, w.count);
		}
		for (size_t i = 0; i < rows.nrows; i++) {
			char line[64];
			size_t need = strlen(rows.rows[i].type) + strlen(rows.rows[i].rdata) + sizeof(line);
			char *mine = malloc(need);
			if (mine == NULL) {
				abort();
			}
			snprintf(mine, need, "%s %u %s", rows.rows[i].type, rows.rows[i].ttl,
				 rows.rows[i].rdata);
			if (strcmp(mine, w.lines[i]) != 0) {
				fuzz_fail("record %zu: a fetch reads \"%s\", a transfer \"%s\"", i, mine,
					  w.lines[i]);
			}
			free(mine);
		}
	}
	for (size_t i = 0; i < w.count; i++) {
		free(w.lines[i]);
	}
	/* The first line (up to LF) looked for in the whole value. */
	memcpy(copy, data, size);
	copy[size] = '\0';
	{
		char *lf = memchr(copy, '\n', size);
		char *needle = strndup(copy, lf != NULL ? (size_t)(lf - copy) : size);
		bool want = needle != NULL && model_contains((const char *)data, size, needle);
		if (needle == NULL || dlz_lines_contain(copy, size, needle) != want) {
			fuzz_fail("dlz_lines_contain(\"%s\") is not %d", needle != NULL ? needle : "",
				  want);
		}
		free(needle);
	}
	rowset_free(&rows);
	free(value);
	free(copy);
	return 0;
}
