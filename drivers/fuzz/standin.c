/* named's side of the dlopen interface, for harnesses without named (standin.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static void
standin_log(int level, const char *fmt, ...) {
	va_list ap;

	fprintf(stderr, "log %d: ", level);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
standin_quiet(int level, const char *fmt, ...) {
	(void)level;
	(void)fmt;
}

/* named's putrr parses the text; a driver must hand it a type and some text at least. */
static isc_result_t
standin_putrr(dns_sdlzlookup_t *lookup, const char *type, dns_ttl_t ttl, const char *data) {
	(void)ttl;
	if (type == NULL || type[0] == '\0' || data == NULL) {
		return ISC_R_FAILURE;
	}
	lookup->records++;
	return ISC_R_SUCCESS;
}

static isc_result_t
standin_putnamedrr(dns_sdlzallnodes_t *all, const char *name, const char *type, dns_ttl_t ttl,
		   const char *data) {
	size_t need = strlen(name) + strlen(type) + strlen(data) + 16;
	char *line;

	if (all->count == all->cap) {
		size_t cap = all->cap > 0 ? 2 * all->cap : 16;
		char **bigger = realloc(all->lines, cap * sizeof(*bigger));
		if (bigger == NULL) {
			return ISC_R_NOMEMORY;
		}
		all->lines = bigger;
		all->cap = cap;
	}
	line = malloc(need);
	if (line == NULL) {
		return ISC_R_NOMEMORY;
	}
	snprintf(line, need, "%s %s %u %s", name, type, ttl, data);
	all->lines[all->count++] = line;
	return ISC_R_SUCCESS;
}

static isc_result_t
standin_writeable_zone(dns_view_t *view, dns_dlzdb_t *dlzdb, const char *zone) {
	(void)view;
	(void)dlzdb;
	(void)zone;
	return ISC_R_SUCCESS;
}

isc_result_t
standin_create(const char *name, unsigned argc, char *argv[], void **dbdata, bool quiet) {
	log_t *log = quiet ? standin_quiet : standin_log;

	return dlz_create(name, argc, argv, dbdata, "log", log, "putrr", standin_putrr,
			  "putnamedrr", standin_putnamedrr, "writeable_zone",
			  standin_writeable_zone, (const char *)NULL);
}

void
standin_allnodes_free(struct dns_sdlzallnodes *out) {
	for (size_t i = 0; i < out->count; i++) {
		free(out->lines[i]);
	}
	free(out->lines);
	out->lines = NULL;
	out->count = out->cap = 0;
}

isc_result_t
standin_allnodes(const char *zone, void *dbdata, struct dns_sdlzallnodes *out) {
	standin_allnodes_free(out);
	return dlz_allnodes(zone, dbdata, out);
}

static int
line_cmp(const void *a, const void *b) {
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void
standin_allnodes_sort(struct dns_sdlzallnodes *out) {
	if (out->count > 0) {
		qsort(out->lines, out->count, sizeof(*out->lines), line_cmp);
	}
}

bool
standin_allnodes_equal(const struct dns_sdlzallnodes *a, const struct dns_sdlzallnodes *b) {
	if (a->count != b->count) {
		return false;
	}
	for (size_t i = 0; i < a->count; i++) {
		if (strcmp(a->lines[i], b->lines[i]) != 0) {
			return false;
		}
	}
	return true;
}
