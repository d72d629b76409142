/*
 * What named hands a driver, for the harnesses that drive one through its dlz_* entry points
 * without named (fuzz_update.c, tsan_pool.c): the helper functions dlz_create takes (log,
 * putrr, putnamedrr, writeable_zone) and the lookup and zone-transfer objects they fill.
 * named's own objects are opaque to a driver (dlz_abi.h), so these are the harness's.
 */
#ifndef DLZ_FUZZ_STANDIN_H
#define DLZ_FUZZ_STANDIN_H

#include <stdbool.h>
#include <stddef.h>

#include "../common/dlz_abi.h"

/* What putrr received for one dlz_lookup. */
struct dns_sdlzlookup {
	unsigned records;
};

/* What putnamedrr received for one dlz_allnodes: "owner type ttl rdata" lines. */
struct dns_sdlzallnodes {
	char **lines;
	size_t count;
	size_t cap;
};

/* dlz_create for driver name (argv[0]) with the words of args, the stand-in's helpers
 * appended; quiet: the driver's log goes nowhere (a fuzzer's log would be its bulk). */
isc_result_t standin_create(const char *name, unsigned argc, char *argv[], void **dbdata,
			    bool quiet);
/* dlz_allnodes of zone into out (emptied first); the result. */
isc_result_t standin_allnodes(const char *zone, void *dbdata, struct dns_sdlzallnodes *out);
void standin_allnodes_free(struct dns_sdlzallnodes *out);
/* The lines of out sorted (a zone's records in a comparable order). */
void standin_allnodes_sort(struct dns_sdlzallnodes *out);
/* Do a and b hold the same lines (both sorted)? */
bool standin_allnodes_equal(const struct dns_sdlzallnodes *a, const struct dns_sdlzallnodes *b);

#endif /* DLZ_FUZZ_STANDIN_H */
