/* Records out to BIND: putrr for a lookup, putnamedrr for a zone transfer. */
#include <string.h>

#include "core.h"

/*
 * The TTL a stored one is served with. RFC 2181 (8): a TTL with the most significant bit set
 * is taken as zero, as native BIND loads one from a zone file ("$TTL > MAXTTL, setting $TTL
 * to 0"). A store may hold one: PostgreSQL's integer column is signed (-1 reads as
 * 4294967295), MariaDB's INT UNSIGNED reaches 4294967295; sdlz hands it on unchanged.
 */
static uint32_t
served_ttl(uint32_t ttl) {
	return ttl > INT32_MAX ? 0 : ttl;
}

bool
emit_rr(dns_sdlz_putrr_t *putrr, dns_sdlzlookup_t *lookup, const struct dlz_row *row) {
	isc_result_t result = putrr(lookup, row->type, served_ttl(row->ttl), row->rdata);

	if (result != ISC_R_SUCCESS) {
		dlz_log(ISC_LOG_ERROR, "BIND rejected %s %u %s %s (isc_result %d)", row->owner,
			row->ttl, row->type, row->rdata, result);
		return false;
	}
	return true;
}

bool
emit_named(dns_sdlz_putnamedrr_t *putnamedrr, dns_sdlzallnodes_t *allnodes, const char *owner,
	   const char *type, uint32_t ttl, const char *rdata) {
	char name[DLZ_KEY_MAX + 2];
	size_t len = strlen(owner);
	isc_result_t result;

	/* BIND parses the owner relative to the zone (RELATIVEOWNER): give it absolute, with the
	 * final dot (the root's key "." already is one). Keys are in BIND's own escaping. */
	if (len + 2 > sizeof(name)) {
		dlz_log(ISC_LOG_ERROR, "owner name too long in zone transfer: %s", owner);
		return false;
	}
	memcpy(name, owner, len + 1);
	if (strcmp(name, ".") != 0) {
		name[len++] = '.';
		name[len] = '\0';
	}
	result = putnamedrr(allnodes, name, type, served_ttl(ttl), rdata);
	if (result != ISC_R_SUCCESS) {
		dlz_log(ISC_LOG_ERROR, "BIND rejected %s %u %s %s in a zone transfer (isc_result %d)",
			name, ttl, type, rdata, result);
		return false;
	}
	return true;
}
