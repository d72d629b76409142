/*
 * Record text in one form per record, for updates (update.c):
 *  - the store form: what zonedata.model.from_rdata writes for every loader (dnspython 2's
 *    Rdata.to_text(origin=None, relativize=False)), made from the text named hands an update
 *    (dns_rdata_totext's single-line style) or from any other spelling of the record;
 *  - the match form: the store form with every domain name absolute and in lower case, so that
 *    a stored row and named's text of the record it read from that row come out the same
 *    whoever wrote the row (named deletes an RR by handing the driver its own text of it).
 *
 * named and dnspython agree on numbers, absolute names and quoted strings (the same escapes:
 * '"' and '\' escaped, bytes below 0x20 and from 0x7f as \DDD; in names also "().;@$"), and
 * differ in (tests/test_updates.py checks every type dnspython knows against named-rrchecker):
 *  - hexadecimal: named writes upper case, in words of 56 digits; dnspython lower case, DS,
 *    SSHFP, TLSA and the like in chunks of 128, the generic "\# n hex" in chunks of 32, and
 *    the NSEC3 salt and HIP HIT in one piece; base32hex (NSEC3's next owner) likewise;
 *  - base64: named in words of 58 characters; dnspython in chunks of 32 (DNSKEY, RRSIG, CERT,
 *    IPSECKEY, DHCID ...) or in one piece (OPENPGPKEY, HIP);
 *  - LOC: named writes sizes and precisions always, "20m"; dnspython "%.2fm", and leaves the
 *    three out when they are RFC 1876's defaults;
 *  - GPOS: named quotes the three numbers, dnspython does not;
 *  - SVCB/HTTPS: dnspython quotes every value and names keys 7 and 8 (dohpath, ohttp), named
 *    9.18 quotes some and writes key7;
 *  - NID/L64: named drops leading zeros of each 16-bit group, dnspython writes four digits;
 *  - CERT algorithms 4, 6, 7: dnspython ECC, DSANSEC3SHA1, RSASHA1NSEC3SHA1; named 4,
 *    NSEC3DSA, NSEC3RSASHA1.
 * A row written by anything else (a database lent with --store-url) may spell a record in any
 * way named reads: unquoted strings, upper-case AAAA, leading zeros, names relative to the
 * zone. Each type's fields are parsed and written again one way (struct type_form), so those
 * spellings come out alike too. Text that does not parse as its type is kept as it is, blanks
 * aside; the update then finds no row for named's text of it and fails rather than guess.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* ---- text out -------------------------------------------------------------------------- */

struct out {
	char *buf;
	size_t len, cap;
	bool ok; /* false once memory ran out */
};

static void
out_bytes(struct out *o, const char *p, size_t n) {
	if (!o->ok) {
		return;
	}
	if (o->len + n + 1 > o->cap) {
		size_t cap = o->cap * 2 > o->len + n + 1 ? o->cap * 2 : o->len + n + 1;
		char *bigger = realloc(o->buf, cap);
		if (bigger == NULL) {
			o->ok = false;
			return;
		}
		o->buf = bigger;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	o->buf[o->len] = '\0';
}

static void
out_str(struct out *o, const char *s) {
	out_bytes(o, s, strlen(s));
}

static void
out_char(struct out *o, char c) {
	out_bytes(o, &c, 1);
}

static void
out_fmt(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
out_fmt(struct out *o, const char *fmt, ...) {
	char buf[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		o->ok = false;
		return;
	}
	out_bytes(o, buf, (size_t)n);
}

/* A blank between fields: before every field but the first. */
static void
out_sep(struct out *o) {
	if (o->len > 0) {
		out_char(o, ' ');
	}
}

/* ---- tokens ----------------------------------------------------------------------------- */

/*
 * The text as named's lexer splits rdata read from a driver: fields separated by blanks, a
 * quoted string one field with its blanks; a backslash escapes the next character. A quote
 * inside a field ('alpn="h2 h3"' of SVCB) runs to its closing quote. No parentheses and no
 * comments: named reads a row's text without either.
 */
struct token {
	const char *p;
	size_t len;
};

struct tokens {
	struct token *t;
	size_t n, cap;
};

static bool
is_blank(char c) {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The end of the field at p; NULL if a quote is not closed. */
static const char *
field_end(const char *p) {
	bool quoted = false;

	for (; *p != '\0'; p++) {
		if (*p == '\\') {
			if (p[1] == '\0') {
				return NULL;
			}
			p++;
		} else if (*p == '"') {
			quoted = !quoted;
		} else if (!quoted && is_blank(*p)) {
			break;
		}
	}
	return quoted ? NULL : p;
}

static bool
tokenize(const char *text, struct tokens *ts) {
	const char *p = text;

	ts->n = 0;
	for (;;) {
		const char *end;

		while (is_blank(*p)) {
			p++;
		}
		if (*p == '\0') {
			return true;
		}
		end = field_end(p);
		if (end == NULL || !dlz_grow((void **)&ts->t, &ts->cap, ts->n + 1, sizeof(*ts->t))) {
			return false;
		}
		ts->t[ts->n].p = p;
		ts->t[ts->n].len = (size_t)(end - p);
		ts->n++;
		p = end;
	}
}

/* ---- decoding one field ----------------------------------------------------------------- */

#define FIELD_MAX 65536 /* no rdata field is longer than an rdata */

/*
 * The bytes a field stands for: \DDD and \X resolved, and with quoting, quotes removed (a
 * name has none: a quote in it is a byte). *n their count; false if an escape is bad or the
 * field too long. Stops at stop (unescaped, unquoted) when it is not '\0': *used then says
 * how much of the field was read.
 */
static bool
decode_until(const char *p, size_t len, char stop, bool quoting, unsigned char *bytes,
	     size_t *n, size_t *used) {
	bool quoted = false;
	size_t i = 0;

	*n = 0;
	while (i < len) {
		unsigned char c = (unsigned char)p[i];
		if (quoting && c == '"') {
			quoted = !quoted;
			i++;
			continue;
		}
		if (!quoted && stop != '\0' && c == (unsigned char)stop) {
			break;
		}
		if (*n == FIELD_MAX) {
			return false;
		}
		if (c == '\\') {
			if (i + 3 < len && isdigit((unsigned char)p[i + 1]) &&
			    isdigit((unsigned char)p[i + 2]) && isdigit((unsigned char)p[i + 3])) {
				unsigned v = (unsigned)(p[i + 1] - '0') * 100 +
					     (unsigned)(p[i + 2] - '0') * 10 + (unsigned)(p[i + 3] - '0');
				if (v > 255) {
					return false;
				}
				bytes[(*n)++] = (unsigned char)v;
				i += 4;
				continue;
			}
			if (i + 1 >= len || isdigit((unsigned char)p[i + 1])) {
				return false;
			}
			bytes[(*n)++] = (unsigned char)p[i + 1];
			i += 2;
			continue;
		}
		bytes[(*n)++] = c;
		i++;
	}
	if (used != NULL) {
		*used = i;
	}
	return true;
}

static bool
decode(const struct token *t, unsigned char *bytes, size_t *n) {
	return decode_until(t->p, t->len, '\0', true, bytes, n, NULL);
}

/* ---- the canonicaliser -------------------------------------------------------------------- */

struct canon {
	const struct tokens *ts;
	size_t next;      /* the next token */
	const char *zone; /* the match form's zone (names relative to it); NULL: store form */
	struct out *o;
	unsigned char *bytes; /* FIELD_MAX of scratch */
	unsigned long nums[16]; /* the numeric fields so far, by field index */
	unsigned nfields;
};

static const struct token *
take(struct canon *c) {
	return c->next < c->ts->n ? &c->ts->t[c->next++] : NULL;
}

static bool
all_of(const char *p, size_t len, int (*ok)(int)) {
	for (size_t i = 0; i < len; i++) {
		if (!ok((unsigned char)p[i])) {
			return false;
		}
	}
	return len > 0;
}

/* A decimal number of at most max (leading zeros allowed, as named reads them). */
static bool
parse_number(const struct token *t, unsigned long max, unsigned long *value) {
	char buf[24];
	char *end;

	if (t->len == 0 || t->len >= sizeof(buf) || !all_of(t->p, t->len, isdigit)) {
		return false;
	}
	memcpy(buf, t->p, t->len);
	buf[t->len] = '\0';
	*value = strtoul(buf, &end, 10);
	return *value <= max;
}

/* ---- names ---- */

/* A name's byte as named and dnspython write it. */
static void
out_name_byte(struct out *o, unsigned char b, bool fold) {
	if (fold && b >= 'A' && b <= 'Z') {
		b = (unsigned char)(b + 32);
	}
	if (strchr("\"().;\\@$", b) != NULL && b != '\0') {
		out_char(o, '\\');
		out_char(o, (char)b);
	} else if (b > 0x20 && b < 0x7f) {
		out_char(o, (char)b);
	} else {
		out_fmt(o, "\\%03u", b);
	}
}

/*
 * The labels of name text p (len) out, a dot between two; *absolute whether the text ended
 * with a dot (the root, ".", writes nothing). False if it is no name (an empty label, a bad
 * escape).
 */
static bool
out_labels(struct out *o, const char *p, size_t len, bool fold, unsigned char *bytes,
	   bool *absolute) {
	size_t at = 0;

	*absolute = len == 1 && p[0] == '.';
	while (at < len && !*absolute) {
		size_t n, used;
		if (!decode_until(p + at, len - at, '.', false, bytes, &n, &used) || n == 0 ||
		    n > 63) {
			return false;
		}
		if (at > 0) {
			out_char(o, '.');
		}
		for (size_t i = 0; i < n; i++) {
			out_name_byte(o, bytes[i], fold);
		}
		at += used;
		if (at < len) {
			at++; /* the dot */
			*absolute = at == len;
		}
	}
	return true;
}

/* A domain name: absolute as it is; relative ("@": the apex) made absolute in the match
 * form's zone, kept relative in the store form (named never writes one). */
static bool
canon_name_text(struct canon *c, const char *p, size_t len) {
	bool absolute;

	if (len == 1 && p[0] == '@') {
		if (c->zone == NULL) {
			out_char(c->o, '@');
			return true;
		}
		len = 0; /* the zone alone */
	}
	if (len > 0) {
		if (!out_labels(c->o, p, len, c->zone != NULL, c->bytes, &absolute)) {
			return false;
		}
		if (absolute || c->zone == NULL) {
			if (absolute) {
				out_char(c->o, '.');
			}
			return true;
		}
		if (strcmp(c->zone, ".") != 0) {
			out_char(c->o, '.');
		}
	}
	if (!out_labels(c->o, c->zone, strlen(c->zone), true, c->bytes, &absolute)) {
		return false;
	}
	out_char(c->o, '.');
	return true;
}

static bool
f_name(struct canon *c, const struct token *t) {
	if (t->p[0] == '"') {
		return false; /* named reads no quoted name */
	}
	return canon_name_text(c, t->p, t->len);
}

/* ---- strings ---- */

static void
out_string_bytes(struct out *o, const unsigned char *b, size_t n) {
	out_char(o, '"');
	for (size_t i = 0; i < n; i++) {
		if (b[i] == '"' || b[i] == '\\') {
			out_char(o, '\\');
			out_char(o, (char)b[i]);
		} else if (b[i] >= 0x20 && b[i] < 0x7f) {
			out_char(o, (char)b[i]);
		} else {
			out_fmt(o, "\\%03u", b[i]);
		}
	}
	out_char(o, '"');
}

static bool
f_string(struct canon *c, const struct token *t) {
	size_t n;

	if (!decode(t, c->bytes, &n) || n > 255) {
		return false;
	}
	out_string_bytes(c->o, c->bytes, n);
	return true;
}

/* GPOS: the number the string holds, unquoted (dnspython's form). */
static bool
f_gpos(struct canon *c, const struct token *t) {
	size_t n;

	if (!decode(t, c->bytes, &n) || n == 0) {
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (!isdigit(c->bytes[i]) && c->bytes[i] != '.' && c->bytes[i] != '-' &&
		    c->bytes[i] != '+') {
			return false;
		}
	}
	out_bytes(c->o, (const char *)c->bytes, n);
	return true;
}

/* ---- numbers and mnemonics ---- */

static bool
f_number(struct canon *c, const struct token *t) {
	unsigned long v;

	if (!parse_number(t, UINT32_MAX, &v)) {
		return false;
	}
	if (c->nfields < sizeof(c->nums) / sizeof(c->nums[0])) {
		c->nums[c->nfields] = v;
	}
	out_fmt(c->o, "%lu", v);
	return true;
}

/* A TTL-like duration (SOA timers): a number, or BIND's units ("1h30m", "2W"). */
static bool
f_duration(struct canon *c, const struct token *t) {
	unsigned long long total = 0, part = 0;
	bool digits = false;

	for (size_t i = 0; i < t->len; i++) {
		char ch = (char)tolower((unsigned char)t->p[i]);
		const char *units = "smhdw";
		static const unsigned long seconds[] = { 1, 60, 3600, 86400, 604800 };
		const char *u = strchr(units, ch);
		if (isdigit((unsigned char)ch)) {
			part = part * 10 + (unsigned)(ch - '0');
			digits = true;
		} else if (u != NULL && ch != '\0' && digits) {
			total += part * seconds[u - units];
			part = 0;
			digits = false;
		} else {
			return false;
		}
		if (part > UINT32_MAX || total > UINT32_MAX) {
			return false;
		}
	}
	total += part;
	if (t->len == 0 || total > UINT32_MAX) {
		return false;
	}
	out_fmt(c->o, "%llu", total);
	return true;
}

struct mnemonic {
	unsigned value;
	const char *name;
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* DNSSEC algorithm numbers by the names named and dnspython (dns.dnssectypes.Algorithm) both
 * read and write; first in the table, the name written. */
static const struct mnemonic algorithms[] = {
	{ 1, "RSAMD5" },	   { 2, "DH" },		     { 3, "DSA" },
	{ 5, "RSASHA1" },	   { 8, "RSASHA256" },	     { 10, "RSASHA512" },
	{ 12, "ECCGOST" },	   { 13, "ECDSAP256SHA256" }, { 14, "ECDSAP384SHA384" },
	{ 15, "ED25519" },	   { 16, "ED448" },	     { 252, "INDIRECT" },
	{ 253, "PRIVATEDNS" },	   { 254, "PRIVATEOID" },
};
/* Names only one of them knows: read, and written as the number, which both read. */
static const struct mnemonic algorithms_one_side[] = {
	{ 4, "ECC" },	       { 6, "DSANSEC3SHA1" }, { 7, "RSASHA1NSEC3SHA1" },
	{ 6, "NSEC3DSA" },     { 7, "NSEC3RSASHA1" },
};

/* CERT certificate types (RFC 4398), as both name them. */
static const struct mnemonic cert_types[] = {
	{ 1, "PKIX" },	 { 2, "SPKI" },	   { 3, "PGP" },     { 4, "IPKIX" },	{ 5, "ISPKI" },
	{ 6, "IPGP" },	 { 7, "ACPKIX" },  { 8, "IACPKIX" }, { 253, "URI" },	{ 254, "OID" },
};

static bool
mnemonic_lookup(const struct token *t, const struct mnemonic *table, size_t n,
		unsigned long *value) {
	for (size_t i = 0; i < n; i++) {
		if (strlen(table[i].name) == t->len && strncasecmp(table[i].name, t->p, t->len) == 0) {
			*value = table[i].value;
			return true;
		}
	}
	return false;
}

/* The field as a number: decimal or one of the table's names (for algorithms, also the names
 * one side only knows). */
static bool
mnemonic_value(const struct token *t, const struct mnemonic *table, size_t n, unsigned long max,
	       unsigned long *value) {
	return parse_number(t, max, value) || mnemonic_lookup(t, table, n, value) ||
	       (table == algorithms &&
		mnemonic_lookup(t, algorithms_one_side, COUNT(algorithms_one_side), value));
}

static const char *
mnemonic_name(const struct mnemonic *table, size_t n, unsigned long value) {
	for (size_t i = 0; i < n; i++) {
		if (table[i].value == value) {
			return table[i].name;
		}
	}
	return NULL;
}

/* A DNSSEC algorithm written as its number (DNSKEY, DS, RRSIG ...). */
static bool
f_algorithm_number(struct canon *c, const struct token *t) {
	unsigned long v;

	if (!mnemonic_value(t, algorithms, COUNT(algorithms), 255, &v)) {
		return false;
	}
	out_fmt(c->o, "%lu", v);
	return true;
}

/* A number written as its name when the table has one (CERT's type and algorithm). */
static bool
out_mnemonic(struct canon *c, const struct token *t, const struct mnemonic *table, size_t n,
	     unsigned long max) {
	unsigned long v;
	const char *name;

	if (!mnemonic_value(t, table, n, max, &v)) {
		return false;
	}
	name = mnemonic_name(table, n, v);
	if (name != NULL) {
		out_str(c->o, name);
	} else {
		out_fmt(c->o, "%lu", v);
	}
	return true;
}

static bool
f_cert_type(struct canon *c, const struct token *t) {
	return out_mnemonic(c, t, cert_types, COUNT(cert_types), 65535);
}

static bool
f_cert_algorithm(struct canon *c, const struct token *t) {
	return out_mnemonic(c, t, algorithms, COUNT(algorithms), 255);
}

/* An RR type mnemonic (or TYPEnnn), in upper case. */
static bool
f_type(struct canon *c, const struct token *t) {
	if (!all_of(t->p, t->len, isalnum) && memchr(t->p, '-', t->len) == NULL) {
		return false;
	}
	for (size_t i = 0; i < t->len; i++) {
		out_char(c->o, (char)toupper((unsigned char)t->p[i]));
	}
	return true;
}

/* ---- addresses ---- */

static bool
f_address(struct canon *c, const struct token *t, int family) {
	char text[INET6_ADDRSTRLEN], in[INET6_ADDRSTRLEN];
	unsigned char bin[16];

	if (t->len >= sizeof(in)) {
		return false;
	}
	memcpy(in, t->p, t->len);
	in[t->len] = '\0';
	if (inet_pton(family, in, bin) != 1 || inet_ntop(family, bin, text, sizeof(text)) == NULL) {
		return false;
	}
	out_str(c->o, text);
	return true;
}

static bool
f_ipv4(struct canon *c, const struct token *t) {
	return f_address(c, t, AF_INET);
}

static bool
f_ipv6(struct canon *c, const struct token *t) {
	return f_address(c, t, AF_INET6);
}

/* NID and L64: four groups of 16 bits, each written in four lower-case hex digits. */
static bool
f_locator64(struct canon *c, const struct token *t) {
	size_t at = 0;

	for (int group = 0; group < 4; group++) {
		size_t n = 0;
		unsigned v = 0;
		while (at + n < t->len && isxdigit((unsigned char)t->p[at + n])) {
			char d = (char)tolower((unsigned char)t->p[at + n]);
			v = v * 16 + (unsigned)(isdigit((unsigned char)d) ? d - '0' : d - 'a' + 10);
			n++;
		}
		if (n == 0 || n > 4 || (group < 3 && (at + n >= t->len || t->p[at + n] != ':'))) {
			return false;
		}
		out_fmt(c->o, "%s%04x", group > 0 ? ":" : "", v);
		at += n + (group < 3 ? 1 : 0);
	}
	return at == t->len;
}

/* EUI48, EUI64: hex pairs joined by '-', in lower case. */
static bool
f_eui(struct canon *c, const struct token *t) {
	for (size_t i = 0; i < t->len; i++) {
		if (!isxdigit((unsigned char)t->p[i]) && t->p[i] != '-') {
			return false;
		}
		out_char(c->o, (char)tolower((unsigned char)t->p[i]));
	}
	return true;
}

/* ---- binary fields ---- */

static int
is_base64_char(int ch) {
	return isalnum(ch) || ch == '+' || ch == '/' || ch == '=';
}

static int
is_base32hex_char(int ch) {
	return isdigit(ch) || (tolower(ch) >= 'a' && tolower(ch) <= 'v') || ch == '=';
}

/*
 * The rest of the fields as one binary value (hex, lower-cased, or base64), in chunks of
 * `chunk` characters (0: one piece); nothing when there is no field left.
 */
static bool
rest_blob(struct canon *c, bool hex, unsigned chunk) {
	unsigned in_chunk = 0;
	const struct token *t;
	bool any = false;

	while ((t = take(c)) != NULL) {
		if (!all_of(t->p, t->len, hex ? isxdigit : is_base64_char)) {
			return false;
		}
		if (!any) {
			out_sep(c->o);
			any = true;
		}
		for (size_t i = 0; i < t->len; i++) {
			if (chunk > 0 && in_chunk == chunk) {
				out_char(c->o, ' ');
				in_chunk = 0;
			}
			out_char(c->o, hex ? (char)tolower((unsigned char)t->p[i]) : t->p[i]);
			in_chunk++;
		}
	}
	return true;
}

/* One hexadecimal field (HIP's HIT, NSEC3's salt: "-" for none), in lower case. */
static bool
f_hex(struct canon *c, const struct token *t) {
	if (t->len == 1 && t->p[0] == '-') {
		out_char(c->o, '-');
		return true;
	}
	if (!all_of(t->p, t->len, isxdigit)) {
		return false;
	}
	for (size_t i = 0; i < t->len; i++) {
		out_char(c->o, (char)tolower((unsigned char)t->p[i]));
	}
	return true;
}

/* One base32hex field (NSEC3's next hashed owner), in lower case. */
static bool
f_base32(struct canon *c, const struct token *t) {
	if (!all_of(t->p, t->len, is_base32hex_char)) {
		return false;
	}
	for (size_t i = 0; i < t->len; i++) {
		out_char(c->o, (char)tolower((unsigned char)t->p[i]));
	}
	return true;
}

/* One base64 field (HIP's public key). */
static bool
f_base64(struct canon *c, const struct token *t) {
	if (!all_of(t->p, t->len, is_base64_char)) {
		return false;
	}
	out_bytes(c->o, t->p, t->len);
	return true;
}

/* NSAP: "0x" and the hex digits, without the dots named reads between them. */
static bool
f_nsap(struct canon *c, const struct token *t) {
	if (t->len < 3 || t->p[0] != '0' || (t->p[1] != 'x' && t->p[1] != 'X')) {
		return false;
	}
	out_str(c->o, "0x");
	for (size_t i = 2; i < t->len; i++) {
		if (t->p[i] == '.') {
			continue;
		}
		if (!isxdigit((unsigned char)t->p[i])) {
			return false;
		}
		out_char(c->o, (char)tolower((unsigned char)t->p[i]));
	}
	return true;
}

/* A field kept as it is (WKS ports, APL items, CAA's tag). */
static bool
f_verbatim(struct canon *c, const struct token *t) {
	out_bytes(c->o, t->p, t->len);
	return true;
}

/* ---- SVCB and HTTPS ---- */

/* SvcParamKeys by number as dnspython names them (dns.rdtypes.svcbbase.ParamKey). */
static const char *const svc_keys[] = { "mandatory", "alpn",	 "no-default-alpn",
					"port",	     "ipv4hint", "ech",
					"ipv6hint",  "dohpath",	 "ohttp" };

/* The number of SvcParamKey p (len): its name's, or N of "keyN"; -1 if it is no key. */
static long
svc_key_number(const char *p, size_t len) {
	char buf[16];
	unsigned long v;

	if (len > 3 && len < sizeof(buf) && strncasecmp(p, "key", 3) == 0 &&
	    all_of(p + 3, len - 3, isdigit)) {
		memcpy(buf, p + 3, len - 3);
		buf[len - 3] = '\0';
		v = strtoul(buf, NULL, 10);
		return v > 65535 ? -1 : (long)v;
	}
	for (size_t i = 0; i < COUNT(svc_keys); i++) {
		if (strlen(svc_keys[i]) == len && strncasecmp(svc_keys[i], p, len) == 0) {
			return (long)i;
		}
	}
	return -1;
}

/* Key number key as dnspython writes it: its name for keys 0-8, "keyNNNNN" for the others. */
static void
out_svc_key(struct out *o, long key) {
	if ((size_t)key < COUNT(svc_keys)) {
		out_str(o, svc_keys[key]);
	} else {
		out_fmt(o, "key%ld", key);
	}
}

/* mandatory's value: a comma-separated list of keys. */
static bool
out_svc_key_list(struct out *o, const char *p, size_t len) {
	size_t at = 0;

	while (at <= len) {
		const char *comma = memchr(p + at, ',', len - at);
		size_t n = comma != NULL ? (size_t)(comma - (p + at)) : len - at;
		long key = svc_key_number(p + at, n);

		if (key < 0) {
			return false;
		}
		if (at > 0) {
			out_char(o, ',');
		}
		out_svc_key(o, key);
		at += n + 1;
	}
	return true;
}

/* Is there a quote in p (len) that no backslash escapes? */
static bool
has_bare_quote(const char *p, size_t len) {
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\\') {
			i++;
		} else if (p[i] == '"') {
			return true;
		}
	}
	return false;
}

/* The params: key=value, every value quoted (dnspython's form), keys by name. */
static bool
rest_svc_params(struct canon *c) {
	const struct token *t;

	while ((t = take(c)) != NULL) {
		const char *eq = memchr(t->p, '=', t->len);
		size_t key_len = eq != NULL ? (size_t)(eq - t->p) : t->len;
		const char *value = eq != NULL ? eq + 1 : NULL;
		size_t value_len = eq != NULL ? t->len - key_len - 1 : 0;
		/* By number: "key0" is mandatory too, and written so. */
		long key = svc_key_number(t->p, key_len);
		bool mandatory = key == 0;

		out_sep(c->o);
		if (key < 0) {
			return false;
		}
		out_svc_key(c->o, key);
		if (value == NULL) {
			continue;
		}
		if (value_len >= 2 && value[0] == '"' && value[value_len - 1] == '"') {
			value++;
			value_len -= 2;
		}
		if (has_bare_quote(value, value_len)) {
			return false; /* a quote left inside: not a spelling this knows */
		}
		out_str(c->o, "=\"");
		if (mandatory) {
			if (!out_svc_key_list(c->o, value, value_len)) {
				return false;
			}
		} else {
			out_bytes(c->o, value, value_len);
		}
		out_char(c->o, '"');
	}
	return true;
}

/* ---- LOC ---- */

/*
 * LOC's lengths as named reads them (lib/dns/rdata/generic/loc_29.c): the altitude from
 * -100000.00m to 42849672.95m, sizes and precisions from 0 to 90000000m and a fraction (named
 * keeps one significant digit of them). Beyond, named refuses the record, and its text is kept
 * as it is.
 */
#define LOC_ALTITUDE_MIN_CM (-10000000L)
#define LOC_ALTITUDE_MAX_CM 4284967295L
#define LOC_SIZE_MAX_METRES 90000000L

/* A LOC length "[-]N[.D[D]][m]" in centimetres, the altitude (altitude) or a size or
 * precision; false if it is none named reads. */
static bool
loc_cm(const struct token *t, bool altitude, long *cm) {
	char buf[32];
	char *end;
	bool negative;
	long metres, frac = 0;
	size_t len = t->len;

	if (len == 0 || len >= sizeof(buf)) {
		return false;
	}
	memcpy(buf, t->p, len);
	buf[len] = '\0';
	if (buf[len - 1] == 'm' || buf[len - 1] == 'M') {
		buf[--len] = '\0';
	}
	negative = buf[0] == '-';
	if (!isdigit((unsigned char)buf[negative ? 1 : 0])) {
		return false;
	}
	metres = strtol(negative ? buf + 1 : buf, &end, 10);
	/* Checked before any arithmetic: strtol saturates a longer number at LONG_MAX. */
	if (metres < 0 || metres > LOC_SIZE_MAX_METRES || (negative && !altitude)) {
		return false;
	}
	if (*end == '.') {
		const char *d = end + 1;
		if (!isdigit((unsigned char)d[0]) || (d[1] != '\0' && !isdigit((unsigned char)d[1])) ||
		    (d[1] != '\0' && d[2] != '\0')) {
			return false;
		}
		frac = (d[0] - '0') * 10 + (d[1] != '\0' ? d[1] - '0' : 0);
	} else if (*end != '\0') {
		return false;
	}
	*cm = (metres * 100 + frac) * (negative ? -1 : 1);
	return !altitude || (*cm >= LOC_ALTITUDE_MIN_CM && *cm <= LOC_ALTITUDE_MAX_CM);
}

static void
out_metres(struct out *o, long cm) {
	out_fmt(o, " %s%ld.%02ldm", cm < 0 ? "-" : "", labs(cm) / 100, labs(cm) % 100);
}

/* Seconds of arc "S[.fff]" in thousandths. */
static bool
loc_millis(const struct token *t, unsigned long *ms) {
	size_t dot = 0;
	unsigned long whole = 0, frac = 0;
	unsigned digits = 0;

	while (dot < t->len && t->p[dot] != '.') {
		if (!isdigit((unsigned char)t->p[dot]) || dot >= 2) {
			return false;
		}
		whole = whole * 10 + (unsigned)(t->p[dot++] - '0');
	}
	if (dot == 0) {
		return false;
	}
	for (size_t i = dot + 1; i < t->len; i++) {
		if (!isdigit((unsigned char)t->p[i]) || ++digits > 3) {
			return false;
		}
		frac = frac * 10 + (unsigned)(t->p[i] - '0');
	}
	while (digits++ < 3) {
		frac *= 10;
	}
	*ms = whole * 1000 + frac;
	return true;
}

/* One coordinate: degrees [minutes [seconds]] then the hemisphere letter, as
 * "D M S.SSS H". */
static bool
loc_coordinate(struct canon *c, const char *letters, unsigned long max_degrees) {
	unsigned long part[2] = { 0, 0 }, ms = 0;
	const struct token *t;

	for (int i = 0; i < 4; i++) {
		if ((t = take(c)) == NULL) {
			return false;
		}
		if (t->len == 1 && strchr(letters, t->p[0]) != NULL && i > 0) {
			out_fmt(c->o, "%s%lu %lu %lu.%03lu %c", c->o->len > 0 ? " " : "", part[0],
				part[1], ms / 1000, ms % 1000, toupper((unsigned char)t->p[0]));
			return part[0] <= max_degrees && part[1] < 60 && ms < 60000;
		}
		if (i < 2 ? !parse_number(t, 180, &part[i]) : (i == 2 && !loc_millis(t, &ms))) {
			return false;
		}
		if (i == 3) {
			return false;
		}
	}
	return false;
}

/*
 * LOC: the position as "D M S.SSS H" twice, then altitude, size, horizontal and vertical
 * precision as dnspython writes them: "%.2fm", the last three left out when they are the
 * defaults (1m 10000m 10m).
 */
static bool
rest_loc(struct canon *c) {
	long cm[4] = { 0, 100, 1000000, 1000 };
	unsigned n = 0;
	const struct token *t;

	if (!loc_coordinate(c, "NSns", 90) || !loc_coordinate(c, "EWew", 180)) {
		return false;
	}
	while ((t = take(c)) != NULL) {
		if (n == 4 || !loc_cm(t, n == 0, &cm[n])) {
			return false;
		}
		n++;
	}
	if (n == 0) {
		return false;
	}
	out_metres(c->o, cm[0]);
	if (cm[1] != 100 || cm[2] != 1000000 || cm[3] != 1000) {
		for (unsigned f = 1; f < 4; f++) {
			out_metres(c->o, cm[f]);
		}
	}
	return true;
}

/* ---- the types ---------------------------------------------------------------------------- */

/*
 * Fields of each type, one letter each (the per-field functions above):
 *   n name   i number   d duration   A DNSSEC algorithm (as a number)   s string
 *   u GPOS number   4 IPv4   6 IPv6   l NID/L64 locator   e EUI   p NSAP
 *   h hex field   3 base32hex field   k base64 field   T RR type   w kept as it is
 *   c CERT type   a CERT algorithm   g gateway or relay (its kind: field gw_field)
 * and one that takes the rest of the fields:
 *   S strings   N names   t RR types   W kept as they are   x hex (chunks of 128)
 *   b base64 (chunks of 32)   B base64 (one piece)   V SVCB params   L LOC (the whole text)
 */
struct type_form {
	const char *type;
	const char *fields;
	unsigned gw_field;
};

static const struct type_form type_forms[] = {
	{ "A", "4", 0 },	       { "NS", "n", 0 },	      { "MD", "n", 0 },
	{ "MF", "n", 0 },	       { "CNAME", "n", 0 },	      { "SOA", "nnidddd", 0 },
	{ "MB", "n", 0 },	       { "MG", "n", 0 },	      { "MR", "n", 0 },
	{ "WKS", "4iW", 0 },	       { "PTR", "n", 0 },	      { "HINFO", "ss", 0 },
	{ "MINFO", "nn", 0 },	       { "MX", "in", 0 },	      { "TXT", "S", 0 },
	{ "RP", "nn", 0 },	       { "AFSDB", "in", 0 },	      { "X25", "s", 0 },
	{ "ISDN", "S", 0 },	       { "RT", "in", 0 },	      { "NSAP", "p", 0 },
	{ "NSAP-PTR", "n", 0 },	       { "SIG", "TAiiwwinb", 0 },     { "KEY", "iiAb", 0 },
	{ "PX", "inn", 0 },	       { "GPOS", "uuu", 0 },	      { "AAAA", "6", 0 },
	{ "LOC", "L", 0 },	       { "NXT", "nt", 0 },	      { "SRV", "iiin", 0 },
	{ "NAPTR", "iisssn", 0 },      { "KX", "in", 0 },	      { "CERT", "ciab", 0 },
	{ "DNAME", "n", 0 },	       { "APL", "W", 0 },	      { "DS", "iAix", 0 },
	{ "SSHFP", "iix", 0 },	       { "IPSECKEY", "iiigb", 1 },    { "RRSIG", "TAiiwwinb", 0 },
	{ "NSEC", "nt", 0 },	       { "DNSKEY", "iiAb", 0 },	      { "DHCID", "b", 0 },
	{ "NSEC3", "iiih3t", 0 },      { "NSEC3PARAM", "iiih", 0 },   { "TLSA", "iiix", 0 },
	{ "SMIMEA", "iiix", 0 },       { "HIP", "ihkN", 0 },	      { "NINFO", "S", 0 },
	{ "TALINK", "nn", 0 },	       { "CDS", "iAix", 0 },	      { "CDNSKEY", "iiAb", 0 },
	{ "OPENPGPKEY", "B", 0 },      { "CSYNC", "iit", 0 },	      { "ZONEMD", "iiix", 0 },
	{ "SVCB", "inV", 0 },	       { "HTTPS", "inV", 0 },	      { "SPF", "S", 0 },
	{ "NID", "il", 0 },	       { "L32", "i4", 0 },	      { "L64", "il", 0 },
	{ "LP", "in", 0 },	       { "EUI48", "e", 0 },	      { "EUI64", "e", 0 },
	{ "URI", "iis", 0 },	       { "CAA", "iws", 0 },	      { "AVC", "S", 0 },
	{ "AMTRELAY", "iiig", 2 },     { "RESINFO", "S", 0 },	      { "WALLET", "S", 0 },
	{ "TA", "iAix", 0 },	       { "DLV", "iAix", 0 },
};

typedef bool field_fn(struct canon *c, const struct token *t);

static field_fn *
one_field(char code) {
	switch (code) {
	case 'n': return f_name;
	case 'i': return f_number;
	case 'd': return f_duration;
	case 'A': return f_algorithm_number;
	case 's': return f_string;
	case 'u': return f_gpos;
	case '4': return f_ipv4;
	case '6': return f_ipv6;
	case 'l': return f_locator64;
	case 'e': return f_eui;
	case 'p': return f_nsap;
	case 'h': return f_hex;
	case '3': return f_base32;
	case 'k': return f_base64;
	case 'T': return f_type;
	case 'w': return f_verbatim;
	case 'c': return f_cert_type;
	case 'a': return f_cert_algorithm;
	default: return NULL;
	}
}

/* IPSECKEY's gateway, AMTRELAY's relay: none ("."), IPv4, IPv6 or a name, by kind. */
static bool
f_gateway(struct canon *c, const struct token *t, unsigned long kind) {
	switch (kind) {
	case 0: return t->len == 1 && t->p[0] == '.' && f_verbatim(c, t);
	case 1: return f_ipv4(c, t);
	case 2: return f_ipv6(c, t);
	case 3: return f_name(c, t);
	default: return false;
	}
}

/* Every remaining field through fn, one blank before each. */
static bool
rest_each(struct canon *c, field_fn *fn) {
	const struct token *t;

	while ((t = take(c)) != NULL) {
		out_sep(c->o);
		if (!fn(c, t)) {
			return false;
		}
	}
	return true;
}

static bool
rest_fields(struct canon *c, char code) {
	switch (code) {
	case 'S': return rest_each(c, f_string);
	case 'N': return rest_each(c, f_name);
	case 't': return rest_each(c, f_type);
	case 'W': return rest_each(c, f_verbatim);
	case 'x': return rest_blob(c, true, 128);
	case 'b': return rest_blob(c, false, 32);
	case 'B': return rest_blob(c, false, 0);
	case 'V': return rest_svc_params(c);
	case 'L': return rest_loc(c);
	default: return false;
	}
}

/* The fields of text by the type's form into c->o; false if the text is not of that form. */
static bool
canon_fields(struct canon *c, const struct type_form *form) {
	for (const char *code = form->fields; *code != '\0'; code++) {
		field_fn *fn = one_field(*code);
		const struct token *t;

		if (fn == NULL && *code != 'g') {
			return rest_fields(c, *code) && c->next == c->ts->n;
		}
		if ((t = take(c)) == NULL) {
			return false;
		}
		out_sep(c->o);
		if (*code == 'g' ? !f_gateway(c, t, c->nums[form->gw_field]) : !fn(c, t)) {
			return false;
		}
		c->nfields++;
	}
	return c->next == c->ts->n;
}

static const struct type_form *
type_form_of(const char *type) {
	for (size_t i = 0; i < COUNT(type_forms); i++) {
		if (strcasecmp(type, type_forms[i].type) == 0) {
			return &type_forms[i];
		}
	}
	return NULL;
}

/* RFC 3597's "\# length hex" of any type: the hex in lower case, in chunks of 32. */
static bool
canon_generic(struct canon *c) {
	const struct token *mark = take(c), *length = take(c);

	if (mark == NULL || length == NULL) {
		return false;
	}
	out_str(c->o, "\\#");
	out_sep(c->o);
	if (!f_number(c, length)) {
		return false;
	}
	return rest_blob(c, true, 32);
}

/* The fields kept as they are, one blank between them. */
static bool
canon_verbatim(struct canon *c) {
	c->next = 0;
	c->o->len = 0;
	if (c->o->buf != NULL) {
		c->o->buf[0] = '\0';
	}
	return rest_each(c, f_verbatim);
}

static char *
canonical(const char *zone, const char *type, const char *text) {
	struct tokens ts = { NULL, 0, 0 };
	struct out o = { NULL, 0, 0, true };
	struct canon c = { .ts = &ts, .zone = zone, .o = &o };
	const struct type_form *form = type_form_of(type);
	bool done;

	out_str(&o, ""); /* an empty text is an empty string */
	c.bytes = malloc(FIELD_MAX);
	if (c.bytes == NULL || !o.ok) {
		free(c.bytes);
		free(o.buf);
		return NULL;
	}
	if (!tokenize(text, &ts)) {
		/* An unclosed quote (or no memory for the fields): the text as it is, but for blanks
		 * at either end. */
		const char *start = text + strspn(text, " \t\r\n");
		size_t len = strlen(start);
		while (len > 0 && is_blank(start[len - 1])) {
			len--;
		}
		out_bytes(&o, start, len);
		done = true;
	} else if (ts.n > 0 && ts.t[0].len == 2 && memcmp(ts.t[0].p, "\\#", 2) == 0) {
		done = canon_generic(&c) && c.next == ts.n;
	} else {
		done = form != NULL && canon_fields(&c, form);
	}
	if (!done) {
		canon_verbatim(&c);
	}
	free(c.bytes);
	free(ts.t);
	if (!o.ok) {
		free(o.buf);
		return NULL;
	}
	return o.buf;
}

char *
rdata_store_form(const char *type, const char *text) {
	return canonical(NULL, type, text);
}

char *
rdata_match_form(const char *zone, const char *type, const char *text) {
	return canonical(zone, type, text);
}
