/*
 * The BIND 9 "dlopen" DLZ driver interface, version 3, as named 9.18 calls it.
 *
 * Self-contained on purpose: BIND's own headers (dns/dlz_dlopen.h, dns/sdlz.h) need BIND's
 * config.h and libisc, which a driver must not depend on. Every number here was checked
 * against Debian bookworm's bind9-dev headers (isc/result.h, isc/log.h, dns/sdlz.h,
 * dns/dlz_dlopen.h): isc_result_t is an enum, so the values below are its first members.
 */
#ifndef DLZ_ABI_H
#define DLZ_ABI_H

#include <stdbool.h>
#include <stdint.h>

#define DLZ_DLOPEN_VERSION 3

/* isc_result_t: an int-sized enum in BIND; only the values a driver returns. */
typedef int isc_result_t;
#define ISC_R_SUCCESS        0
#define ISC_R_NOMEMORY       1
#define ISC_R_NOPERM         6
#define ISC_R_NOTFOUND       23
#define ISC_R_FAILURE        25
#define ISC_R_NOTIMPLEMENTED 27

/* Flags a driver may set from dlz_version(). */
#define DNS_SDLZFLAG_THREADSAFE    0x00000001U
#define DNS_SDLZFLAG_RELATIVEOWNER 0x00000002U
#define DNS_SDLZFLAG_RELATIVERDATA 0x00000004U

/* Levels of the log callback: negative are severities, positive are debug levels. */
#define ISC_LOG_INFO         (-1)
#define ISC_LOG_NOTICE       (-2)
#define ISC_LOG_WARNING      (-3)
#define ISC_LOG_ERROR        (-4)
#define ISC_LOG_CRITICAL     (-5)
#define ISC_LOG_DEBUG(level) (level)

typedef uint32_t dns_ttl_t;

/* Opaque to a driver: only passed back to BIND's callbacks. */
typedef struct dns_sdlzlookup dns_sdlzlookup_t;
typedef struct dns_sdlzallnodes dns_sdlzallnodes_t;
typedef struct dns_clientinfomethods dns_clientinfomethods_t;
typedef struct dns_clientinfo dns_clientinfo_t;
typedef struct dns_view dns_view_t;
typedef struct dns_dlzdb dns_dlzdb_t;

/*
 * Helpers named hands to dlz_create() as (const char *name, function pointer) pairs in the
 * varargs, terminated by a NULL name: "log", "putrr", "putnamedrr", "writeable_zone".
 */
typedef void log_t(int level, const char *fmt, ...);
typedef isc_result_t dns_sdlz_putrr_t(dns_sdlzlookup_t *lookup, const char *type,
				      dns_ttl_t ttl, const char *data);
typedef isc_result_t dns_sdlz_putnamedrr_t(dns_sdlzallnodes_t *allnodes, const char *name,
					   const char *type, dns_ttl_t ttl, const char *data);
typedef isc_result_t dns_dlz_writeablezone_t(dns_view_t *view, dns_dlzdb_t *dlzdb,
					     const char *zone_name);

#define DLZ_EXPORT __attribute__((visibility("default")))

/*
 * Entry points named looks up with dlsym(). Required: dlz_version, dlz_create, dlz_findzonedb,
 * dlz_lookup. dlz_allnodes is required once dlz_allowzonexfr exists. dlz_authority is optional
 * (named treats its absence as "lookup already returned SOA and NS").
 *
 * Names: `name` of dlz_findzonedb and `zone` everywhere are absolute names in presentation
 * form without the final dot (dns_name_totext: "@", "$" and the usual specials escaped),
 * lower-cased by BIND, except the wildcard probes of dlz_lookup, which keep the query's case. `name` of dlz_lookup is relative to `zone`
 * ("@" for the apex, "*" or "*.x" when BIND probes for a wildcard), because the dlopen
 * driver registers with DNS_SDLZFLAG_RELATIVEOWNER | DNS_SDLZFLAG_RELATIVERDATA.
 * argv[0] of dlz_create is the library path, argv[1..argc-1] the words that follow it.
 */
DLZ_EXPORT int dlz_version(unsigned int *flags);
DLZ_EXPORT isc_result_t dlz_create(const char *dlzname, unsigned int argc, char *argv[],
				   void **dbdata, ...);
DLZ_EXPORT void dlz_destroy(void *dbdata);
DLZ_EXPORT isc_result_t dlz_findzonedb(void *dbdata, const char *name,
				       dns_clientinfomethods_t *methods,
				       dns_clientinfo_t *clientinfo);
DLZ_EXPORT isc_result_t dlz_lookup(const char *zone, const char *name, void *dbdata,
				   dns_sdlzlookup_t *lookup, dns_clientinfomethods_t *methods,
				   dns_clientinfo_t *clientinfo);
DLZ_EXPORT isc_result_t dlz_authority(const char *zone, void *dbdata, dns_sdlzlookup_t *lookup);
DLZ_EXPORT isc_result_t dlz_allowzonexfr(void *dbdata, const char *name, const char *client);
DLZ_EXPORT isc_result_t dlz_allnodes(const char *zone, void *dbdata,
				     dns_sdlzallnodes_t *allnodes);

#endif /* DLZ_ABI_H */
