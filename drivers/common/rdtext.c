/*
 * Record text as the stores keep it: what zonedata.model.from_rdata writes for every loader
 * (dnspython 2's Rdata.to_text(origin=None, relativize=False)), from the text named gives an
 * update (dns_master_rdatasettotext without line splitting).
 *
 * The two agree on everything the suite's zones hold (numbers, absolute names, quoted strings
 * with the same escapes: '"' and '\' escaped, bytes below 0x20 and from 0x7f as \DDD; AAAA in
 * RFC 5952 form) except the binary fields at the end of some types:
 *  - hexadecimal (DS, CDS, DLV, TA, SSHFP, TLSA, SMIMEA, ZONEMD, and the generic "\# n hex"
 *    of an unknown type): named writes upper case in one piece, dnspython lower case in
 *    chunks of 128 digits (of 32 for the generic form) separated by spaces;
 *  - base64 (DNSKEY, CDNSKEY, KEY, RRSIG, SIG): named writes one piece, dnspython chunks of
 *    32 separated by spaces;
 *  - LOC: named always writes size and precisions ("1m 10000m 10m", "0.50m"), dnspython
 *    "%.2fm" and leaves the three out when they are the defaults.
 * Any text already in the loaders' form comes out unchanged, so the same function turns a
 * stored row and named's text into one form for comparing them.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

struct blob_rule {
	const char *type;
	unsigned fixed; /* fields before the binary tail */
	bool hex;       /* else base64 */
	unsigned chunk; /* dnspython's chunk size */
};

static const struct blob_rule blob_rules[] = {
	{ "DS", 3, true, 128 },	    { "CDS", 3, true, 128 },	 { "DLV", 3, true, 128 },
	{ "TA", 3, true, 128 },	    { "SSHFP", 2, true, 128 },	 { "TLSA", 3, true, 128 },
	{ "SMIMEA", 3, true, 128 }, { "ZONEMD", 3, true, 128 },	 { "DNSKEY", 3, false, 32 },
	{ "CDNSKEY", 3, false, 32 }, { "KEY", 3, false, 32 },	 { "RRSIG", 8, false, 32 },
	{ "SIG", 8, false, 32 },
};

/* The generic form of any type (RFC 3597): "\# length hex", hex in chunks of 32. */
static const struct blob_rule generic_rule = { "", 2, true, 32 };

static const char *
skip_space(const char *p) {
	while (*p == ' ' || *p == '\t') {
		p++;
	}
	return p;
}

/* Copy the first `fixed` fields, one space after each; the position after them. */
static const char *
copy_fields(const char *p, unsigned fixed, char **out) {
	for (unsigned i = 0; i < fixed; i++) {
		p = skip_space(p);
		while (*p != '\0' && *p != ' ' && *p != '\t') {
			*(*out)++ = *p++;
		}
		*(*out)++ = ' ';
	}
	return p;
}

static void
blob_form(const struct blob_rule *rule, const char *text, char *out) {
	const char *p = copy_fields(text, rule->fixed, &out);
	unsigned in_chunk = 0;

	for (; *p != '\0'; p++) {
		if (*p == ' ' || *p == '\t') {
			continue;
		}
		if (in_chunk == rule->chunk) {
			*out++ = ' ';
			in_chunk = 0;
		}
		*out++ = rule->hex ? (char)tolower((unsigned char)*p) : *p;
		in_chunk++;
	}
	if (in_chunk == 0 && out[-1] == ' ') {
		out--; /* no tail at all */
	}
	*out = '\0';
}

/* A LOC length "[-]N[.D[D]][m]" in centimetres; false if it is none. */
static bool
loc_cm(const char *tok, size_t len, long *cm) {
	char buf[32];
	char *end;
	bool negative;
	long metres, frac = 0;

	if (len == 0 || len >= sizeof(buf)) {
		return false;
	}
	memcpy(buf, tok, len);
	buf[len] = '\0';
	if (buf[len - 1] == 'm' || buf[len - 1] == 'M') {
		buf[--len] = '\0';
	}
	negative = buf[0] == '-';
	metres = strtol(negative ? buf + 1 : buf, &end, 10);
	if (end == (negative ? buf + 1 : buf) || metres < 0) {
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
	return true;
}

static int
put_metres(char *out, size_t cap, long cm) {
	return snprintf(out, cap, " %s%ld.%02ldm", cm < 0 ? "-" : "", labs(cm) / 100, labs(cm) % 100);
}

#define LOC_MAX_TOKENS 12

/* The blank-separated tokens of text (at most LOC_MAX_TOKENS); false if there are more. */
static bool
loc_tokens(const char *text, const char **tok, size_t *len, unsigned *n) {
	const char *p = skip_space(text);

	*n = 0;
	while (*p != '\0') {
		if (*n == LOC_MAX_TOKENS) {
			return false;
		}
		tok[*n] = p;
		while (*p != '\0' && *p != ' ' && *p != '\t') {
			p++;
		}
		len[*n] = (size_t)(p - tok[*n]);
		(*n)++;
		p = skip_space(p);
	}
	return true;
}

/* Index of the first of tokens [from, from + 4) that is one of the letters, else n. */
static unsigned
loc_letter(const char *const *tok, const size_t *len, unsigned n, unsigned from,
	   const char *letters) {
	for (unsigned i = from; i < n && i < from + 4; i++) {
		if (len[i] == 1 && strchr(letters, tok[i][0]) != NULL) {
			return i;
		}
	}
	return n;
}

/*
 * LOC: the position fields (degrees, and the minutes and seconds either may leave out, up to
 * each hemisphere letter) copied, then altitude, size, horizontal and vertical precision as
 * dnspython writes them. Text that does not parse is copied unchanged.
 */
static void
loc_form(const char *text, char *out, size_t cap) {
	const char *tok[LOC_MAX_TOKENS];
	size_t len[LOC_MAX_TOKENS];
	long cm[4] = { 0, 100, 1000000, 1000 }; /* RFC 1876 defaults: 1m 10000m 10m */
	unsigned n, lat, lon;
	char *o = out;

	if (!loc_tokens(text, tok, len, &n) || (lat = loc_letter(tok, len, n, 0, "NSns")) == n ||
	    (lon = loc_letter(tok, len, n, lat + 1, "EWew")) == n || lon + 2 > n ||
	    n - (lon + 1) > 4) {
		snprintf(out, cap, "%s", text);
		return;
	}
	for (unsigned k = lon + 1; k < n; k++) {
		if (!loc_cm(tok[k], len[k], &cm[k - (lon + 1)])) {
			snprintf(out, cap, "%s", text);
			return;
		}
	}
	for (unsigned k = 0; k <= lon; k++) {
		o += snprintf(o, cap - (size_t)(o - out), "%s%.*s", k > 0 ? " " : "", (int)len[k],
			      tok[k]);
	}
	o += put_metres(o, cap - (size_t)(o - out), cm[0]);
	if (cm[1] != 100 || cm[2] != 1000000 || cm[3] != 1000) {
		for (unsigned f = 1; f < 4; f++) {
			o += put_metres(o, cap - (size_t)(o - out), cm[f]);
		}
	}
}

static const struct blob_rule *
blob_rule_of(const char *type, const char *text) {
	if (strncmp(skip_space(text), "\\# ", 3) == 0) {
		return &generic_rule;
	}
	for (size_t i = 0; i < sizeof(blob_rules) / sizeof(blob_rules[0]); i++) {
		if (strcasecmp(type, blob_rules[i].type) == 0) {
			return &blob_rules[i];
		}
	}
	return NULL;
}

char *
rdata_store_form(const char *type, const char *text) {
	const struct blob_rule *rule = blob_rule_of(type, text);
	/* Chunking adds at most one space per chunk; LOC at most 4 fields of "%ld.%02ldm". */
	size_t cap = 2 * strlen(text) + 128;
	char *out = malloc(cap);
	size_t len;

	if (out == NULL) {
		return NULL;
	}
	if (rule != NULL) {
		blob_form(rule, text, out);
	} else if (strcasecmp(type, "LOC") == 0) {
		loc_form(text, out, cap);
	} else {
		snprintf(out, cap, "%s", skip_space(text));
	}
	len = strlen(out);
	while (len > 0 && (out[len - 1] == ' ' || out[len - 1] == '\t')) {
		out[--len] = '\0';
	}
	return out;
}
