/*
 * The zone search and the owner walk of the backends that look names up one at a time
 * (memory, filesystem, Berkeley DB): which names of a fetch they read, in what order, and
 * when they stop. One place for the rules the fetch contract (dlz_driver.h) states.
 */
#include "core.h"

bool
dlz_find_zone(const struct dlz_fetch_req *req, unsigned first, dlz_zone_probe *probe,
	      void *ctx, int *z) {
	bool given = req->zone_index >= 0;

	*z = -1;
	/* A given zone_index is probed alone, and not at all when it is below first. */
	for (unsigned i = given ? (unsigned)req->zone_index : first; i >= first && i < req->nnames;
	     i++) {
		switch (probe(ctx, i)) {
		case 1:
			*z = (int)i;
			return true;
		case 0:
			if (given) {
				return true;
			}
			break;
		default:
			return false;
		}
	}
	return true;
}

int
dlz_read_owners(const struct dlz_fetch_req *req, int z, int last, dlz_owner_reader *read,
		void *ctx) {
	int enc = -1;
	bool found;

	for (int i = z; i >= last; i--) {
		if (read(ctx, req->names[i], &found) != DLZ_OK) {
			return DLZ_ERROR;
		}
		if (!found) {
			break;
		}
		enc = i;
	}
	/* The wildcard child of the closest encloser; none when the walk reached names[last]. */
	if (enc > last && read(ctx, req->wilds[enc], &found) != DLZ_OK) {
		return DLZ_ERROR;
	}
	for (unsigned i = 0; z == req->extras_zone && i < req->nextras; i++) {
		if (read(ctx, req->extras[i], &found) != DLZ_OK) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

int
dlz_fetch_zone_owners(const struct dlz_fetch_req *req, struct dlz_rowset *out,
		      unsigned first, int last, dlz_zone_probe *probe, dlz_owner_reader *read,
		      void *ctx, const char **zone) {
	int z;

	if (!dlz_find_zone(req, first, probe, ctx, &z)) {
		return DLZ_ERROR;
	}
	if (z < 0) {
		return DLZ_OK;
	}
	/* Set before the reads: the readers put the zone into the rows they add. */
	if (zone != NULL) {
		*zone = req->names[z];
	}
	if (!dlz_rowset_add_zone_ref(out, req->names[z])) {
		return DLZ_ERROR;
	}
	return dlz_read_owners(req, z, last, read, ctx);
}
