/*
 * rdata_store_form (common/rdtext.c), the normaliser that turns named's record text and a
 * stored row into one form: input "TYPE LF text". It must not fail and must be idempotent (its
 * output is in the form, and text in the form comes back unchanged). It parses each type's
 * fields and writes them one way (quotes, escapes, leading zeros, case and chunking all
 * change), so what the form must be is held by tests/test_fuzz_harness.py and
 * tests/test_updates.py against dnspython's and named's own text, not here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/core.h"
#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	char *input = malloc(size + 1), *type, *text, *lf, *once, *twice;

	if (input == NULL) {
		abort();
	}
	memcpy(input, data, size);
	input[size] = '\0';
	lf = strchr(input, '\n');
	type = input;
	text = lf != NULL ? lf + 1 : input + strlen(input);
	if (lf != NULL) {
		*lf = '\0';
	}
	once = rdata_store_form(type, text);
	if (once == NULL) {
		fuzz_fail("%s: NULL (only out of memory may give NULL)", type);
	}
	twice = rdata_store_form(type, once);
	if (twice == NULL || strcmp(once, twice) != 0) {
		fuzz_fail("%s: not idempotent: \"%s\" -> \"%s\" -> \"%s\"", type, text, once,
			  twice != NULL ? twice : "(NULL)");
	}
	free(twice);
	free(once);
	free(input);
	return 0;
}
