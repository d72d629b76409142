/*
 * The filesystem driver's key splitting (fs/dlz_fs.c fs_split_key, included here with the
 * rest of the driver: its functions are static). Input: a key. A split key has the labels
 * key_ancestors finds; every component it marks usable is one a path may hold: 1 to COMP_MAX
 * bytes, printable, no '/', not starting with '.' (so never "." or ".."); and the components
 * of the labels before a bad one are the same whatever follows.
 */
#include "../fs/dlz_fs.c"
#include "../common/core.h"
#include "check.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_component(const struct fs_key *k, unsigned i) {
	const char *c = k->comps + k->off[i];

	if (k->len[i] == 0 || k->len[i] > COMP_MAX || c[0] == '.' ||
	    k->off[i] + k->len[i] > COMPS_MAX) {
		fuzz_fail("label %u: component of %u bytes at %u", i, k->len[i], k->off[i]);
	}
	for (unsigned j = 0; j < k->len[i]; j++) {
		if (!fs_printable((unsigned char)c[j]) || c[j] == '/') {
			fuzz_fail("label %u: component \"%.*s\" holds byte %u", i, (int)k->len[i], c,
				  (unsigned char)c[j]);
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static struct fs_key k;
	char key[DLZ_KEY_MAX + 1];
	unsigned offs[DLZ_MAX_LABELS], n;

	if (size > DLZ_KEY_MAX) {
		return 0;
	}
	memcpy(key, data, size);
	key[size] = '\0';
	if (!fs_split_key(key, &k)) {
		return 0;
	}
	if (k.nlabels > DLZ_MAX_LABELS || k.bad >= (int)k.nlabels) {
		fuzz_fail("%s: %u labels, bad %d", key, k.nlabels, k.bad);
	}
	n = key_ancestors(key, strlen(key), offs);
	if (n > 0 && strchr(key, '\\') == NULL && n != k.nlabels) {
		/* without escapes, both split at every dot */
		fuzz_fail("%s: %u labels, key_ancestors finds %u", key, k.nlabels, n);
	}
	for (unsigned i = 0; i < k.nlabels; i++) {
		if ((int)i > k.bad) {
			check_component(&k, i);
		}
	}
	return 0;
}
