/*
 * The record-line format the file-like stores share (filesystem zone-file lines, Berkeley DB node
 * values; schemas/fs.md, schemas/bdb.md): one record per line, "TYPE SP TTL SP rdata",
 * lines separated by LF; an empty node value is an empty non-terminal.
 */
#include <string.h>

#include "core.h"

bool
dlz_record_split(const char *line, size_t len, struct dlz_record_line *r) {
	const char *end = line + len, *sp1 = memchr(line, ' ', len), *p;
	uint64_t ttl = 0;

	if (sp1 == NULL || sp1 == line) {
		return false;
	}
	for (p = sp1 + 1; p < end && *p >= '0' && *p <= '9'; p++) {
		ttl = ttl * 10 + (uint64_t)(*p - '0');
		if (ttl > UINT32_MAX) {
			return false;
		}
	}
	if (p == sp1 + 1 || p == end || *p != ' ') {
		return false;
	}
	r->type = line;
	r->type_len = (size_t)(sp1 - line);
	r->ttl = (uint32_t)ttl;
	r->rdata = p + 1;
	r->rdata_len = (size_t)(end - r->rdata);
	return true;
}

/* The length of the line at pos (up to LF or end). */
static size_t
line_length(const char *pos, const char *end) {
	const char *lf = memchr(pos, '\n', (size_t)(end - pos));

	return lf != NULL ? (size_t)(lf - pos) : (size_t)(end - pos);
}

int
dlz_rowset_add_node(struct dlz_rowset *out, const char *zone, const char *owner,
		    const char *value, size_t len) {
	const char *pos = value, *end = value + len;

	if (len == 0) {
		return dlz_rowset_add_row_ref(out, zone, owner, DLZ_ENT_TYPE, 0, "") ? DLZ_OK
											: DLZ_ERROR;
	}
	while (pos < end) {
		size_t line_len = line_length(pos, end);
		struct dlz_record_line r;

		if (!dlz_record_split(pos, line_len, &r)) {
			dlz_log_error_limited("malformed record line in node %s of zone %s: %.*s",
					      owner, zone, (int)line_len, pos);
			return DLZ_BAD_DATA;
		}
		if (!dlz_rowset_add_row_keys(out, zone, owner, r.type, r.type_len, r.ttl, r.rdata,
					     r.rdata_len)) {
			return DLZ_ERROR;
		}
		pos += line_len + 1;
	}
	return DLZ_OK;
}

int
dlz_node_walk(const char *zone, const char *owner, char *value, size_t len, dlz_node_cb *cb,
	      void *ctx) {
	char *pos = value, *end = value + len;

	if (len == 0) {
		return cb(ctx, owner, DLZ_ENT_TYPE, 0, "");
	}
	while (pos < end) {
		size_t line_len = line_length(pos, end);
		struct dlz_record_line r;
		int rc;

		if (!dlz_record_split(pos, line_len, &r)) {
			dlz_log(ISC_LOG_ERROR, "malformed record line in node %s of zone %s", owner,
				zone);
			return DLZ_BAD_DATA;
		}
		pos[r.type_len] = '\0';   /* the space before the TTL */
		pos[line_len] = '\0';     /* the LF, or the byte the caller reserved at the end */
		rc = cb(ctx, owner, r.type, r.ttl, r.rdata);
		if (rc != DLZ_OK) {
			return rc;
		}
		pos += line_len + 1;
	}
	return DLZ_OK;
}

bool
dlz_lines_contain(char *list, size_t len, const char *line) {
	char *pos = list, *end = list + len, *next;

	while ((next = dlz_next_line(&pos, end)) != NULL) {
		if (strcmp(next, line) == 0) {
			return true;
		}
	}
	return false;
}

char *
dlz_next_line(char **pos, char *end) {
	char *line = *pos;
	size_t len;

	if (line >= end) {
		return NULL;
	}
	len = line_length(line, end);
	line[len] = '\0';
	*pos = line + len < end ? line + len + 1 : end;
	return line;
}
