/*
 * The differential tests' door to the drivers' pure functions (tests/test_fuzz_harness.py):
 * one request a line on stdin, one answer a line on stdout, every string in hexadecimal so
 * that any octet passes.
 *
 *   fuzzcli rdtext       "TYPE TEXT"             -> rdata_store_form(TYPE, TEXT)
 *   fuzzcli ownerlist    "+OWNER LIST" or "-..." -> bdbhpt's owner list with OWNER put in or
 *                                                   taken out (read into an update's set,
 *                                                   edited, written back: bdbhpt_owners_*)
 */
#include "../bdbhpt/dlz_bdbhpt.c"
#include "../common/core.h"

#include <stdio.h>

/* hex (NUL-terminated) decoded into a new string, its length in *len; NULL if not hex. */
static char *
unhex(const char *hex, size_t *len) {
	size_t n = strlen(hex) / 2;
	char *out = malloc(n + 1);

	if (out == NULL || strlen(hex) % 2 != 0) {
		free(out);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned byte;
		if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
			free(out);
			return NULL;
		}
		out[i] = (char)byte;
	}
	out[n] = '\0';
	*len = n;
	return out;
}

static void
put_hex(const char *data, size_t len) {
	for (size_t i = 0; i < len; i++) {
		printf("%02x", (unsigned char)data[i]);
	}
	putchar('\n');
}

static bool
rdtext(char *a, char *b) {
	size_t type_len, text_len;
	char *type = unhex(a, &type_len), *text = unhex(b, &text_len), *out;

	if (type == NULL || text == NULL) {
		return false;
	}
	out = rdata_store_form(type, text);
	if (out == NULL) {
		return false;
	}
	put_hex(out, strlen(out));
	free(out);
	free(type);
	free(text);
	return true;
}

static bool
ownerlist(char *a, char *b) {
	size_t owner_len, list_len, out_len;
	char *owner = a[0] == '+' || a[0] == '-' ? unhex(a + 1, &owner_len) : NULL;
	char *list = unhex(b, &list_len), *out;
	struct bdbhpt_owners set = { 0 };

	if (owner == NULL || list == NULL || !bdbhpt_owners_parse(&set, list, list_len) ||
	    !bdbhpt_owners_edit(&set, owner, a[0] == '+') ||
	    (out = bdbhpt_owners_text(&set, &out_len)) == NULL) {
		return false;
	}
	put_hex(out, out_len);
	bdbhpt_owners_free(&set);
	free(out);
	free(owner);
	free(list);
	return true;
}

int
main(int argc, char **argv) {
	bool (*answer)(char *, char *);
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (argc != 2 || (strcmp(argv[1], "rdtext") != 0 && strcmp(argv[1], "ownerlist") != 0)) {
		fprintf(stderr, "usage: fuzzcli rdtext|ownerlist < requests\n");
		return 2;
	}
	answer = strcmp(argv[1], "rdtext") == 0 ? rdtext : ownerlist;
	while ((len = getline(&line, &cap, stdin)) > 0) {
		char *space;
		line[strcspn(line, "\n")] = '\0';
		space = strchr(line, ' ');
		if (space == NULL) {
			fprintf(stderr, "fuzzcli: a request is two fields\n");
			return 2;
		}
		*space = '\0';
		if (!answer(line, space + 1)) {
			fprintf(stderr, "fuzzcli: a field is not hexadecimal\n");
			return 2;
		}
	}
	free(line);
	return 0;
}
