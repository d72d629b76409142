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
#define ISC_R_EXISTS         18 /* after ISC_R_SUSPEND, an alias of ISC_R_RELOAD (16) */
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
 * varargs, terminated by a NULL name: "log", "putrr", "putnamedrr", "writeable_zone"
 * (dns_dlz_writeablezone, for dlz_configure below).
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

/*
 * The update entry points (all optional; named looks each up by name and supports updates
 * when dlz_newversion is there). Signatures as dns/dlz_dlopen.h of bind9-dev 9.18 types them
 * (dlz_dlopen_*_t); how named 9.18 calls them (lib/dns/sdlz.c, lib/dns/dlz.c, lib/dns/ssu.c,
 * lib/ns/update.c, bin/named/dlz_dlopen_driver.c):
 *
 * dlz_configure: once per view at start-up, after dlz_create. The driver calls the
 *   "writeable_zone" helper (dns_dlz_writeablezone) for each zone that takes updates; named
 *   then creates a zone object of type dlz for it with a policy table holding one rule that
 *   calls dlz_ssumatch, and answers queries for that zone through it (dlz_lookup without a
 *   dlz_findzonedb for the apex). writeable_zone returns ISC_R_EXISTS when the view has that
 *   zone already.
 * dlz_ssumatch: named's policy check (dns_ssutable_checkrules), once per RR of the update
 *   section, before dlz_newversion. signer: the TSIG key's name (dns_name_format: no final
 *   dot), "" when the update is not signed; name: the RR's owner, same form; tcpaddr: the
 *   client's address as isc_netaddr_format writes it (named passes it over UDP too);
 *   type: the RR type mnemonic; key: dst_key_format of the key ("" without one); keydata:
 *   a GSS-TSIG token, NULL otherwise. Unsigned updates reach it only over TCP: named answers
 *   an unsigned UDP update to a zone with a policy REFUSED itself (ns/update.c
 *   checkupdateacl), and an unknown key or a bad signature NOTAUTH before any of this.
 * dlz_newversion: named's dns_db_newversion, once per update message, before the
 *   prerequisites are checked; zone as dns_name_format (no final dot). *versionp is the
 *   driver's, handed back to the calls below and to dlz_closeversion.
 * dlz_closeversion: once per dlz_newversion, commit true when every step succeeded; it
 *   returns nothing, so a commit that fails there cannot change named's answer (NOERROR):
 *   a driver does all its work before it. It must set *versionp to NULL (named logs an
 *   error otherwise).
 * dlz_addrdataset / dlz_subrdataset: name as dns_name_format (absolute, no final dot, the
 *   case of the update message); rdatastr is dns_master_rdatasettotext of the RRset with a
 *   style of no columns and no line splitting: one line per RR,
 *   "OWNER.<TAB>TTL<TAB>CLASS<TAB>TYPE<TAB>RDATA", owner with its final dot, names in RDATA
 *   absolute, lines separated by LF (named's update code passes one RR per call, but
 *   dns_diff_apply groups consecutive RRs of one name and type). subrdataset gets the RRs
 *   as named read them from the zone (their TTL is the stored one).
 * dlz_delrdataset: every RR of one type at name; type as dns_rdatatype_format. named's
 *   update code deletes RRsets RR by RR (subrdataset) instead, but the entry point exists.
 * Lookups during an update: update.c's foreach_rr/foreach_rrset pass a clientinfo whose
 *   dbversion is the open version; its prerequisite check of values (temp_check), the SOA
 *   serial update (dns_db_createsoatuple) and dns_diff_apply look nodes up with
 *   dns_db_findnode, whose clientinfo is NULL. All of them run in named's update event,
 *   on the thread that called dlz_newversion, before dlz_closeversion.
 */
DLZ_EXPORT isc_result_t dlz_configure(dns_view_t *view, dns_dlzdb_t *dlzdb, void *dbdata);
DLZ_EXPORT bool dlz_ssumatch(const char *signer, const char *name, const char *tcpaddr,
			     const char *type, const char *key, uint32_t keydatalen,
			     unsigned char *keydata, void *dbdata);
DLZ_EXPORT isc_result_t dlz_newversion(const char *zone, void *dbdata, void **versionp);
DLZ_EXPORT void dlz_closeversion(const char *zone, bool commit, void *dbdata, void **versionp);
DLZ_EXPORT isc_result_t dlz_addrdataset(const char *name, const char *rdatastr, void *dbdata,
					void *version);
DLZ_EXPORT isc_result_t dlz_subrdataset(const char *name, const char *rdatastr, void *dbdata,
					void *version);
DLZ_EXPORT isc_result_t dlz_delrdataset(const char *name, const char *type, void *dbdata,
					void *version);

#endif /* DLZ_ABI_H */
