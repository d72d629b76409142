/*
 * The zone search and the owner walk of the backends that look names up one at a time
 * (memory, filesystem, Berkeley DB): which names of a fetch they read, in what order, and
 * when they stop. One place for the rules the fetch contract (dlz_driver.h) states.
 */
#include "core.h"

int
dlz_find_zone(const struct dlz_fetch_req *req, unsigned first, dlz_zone_probe *probe,
	      void *ctx, int *z) {
	bool given = req->zone_index >= 0;

	*z = -1;
	/* A given zone_index is probed alone, and not at all when it is below first. */
	for (unsigned i = given ? (unsigned)req->zone_index : first; i >= first && i < req->nnames;
	     i++) {
		int rc = probe(ctx, i);

		switch (rc) {
		case 1:
			*z = (int)i;
			return DLZ_OK;
		case 0:
			if (given) {
				return DLZ_OK;
			}
			break;
		default:
			return rc;
		}
	}
	return DLZ_OK;
}

int
dlz_read_owners(const struct dlz_fetch_req *req, int z, int last, dlz_owner_reader *read,
		void *ctx) {
	int enc = -1, rc;
	bool found;

	for (int i = z; i >= last; i--) {
		rc = read(ctx, req->names[i], &found);
		if (rc != DLZ_OK) {
			return rc;
		}
		if (!found) {
			break;
		}
		enc = i;
	}
	/* The wildcard child of the closest encloser; none when the walk reached names[last]. */
	if (enc > last && (rc = read(ctx, req->wilds[enc], &found)) != DLZ_OK) {
		return rc;
	}
	for (unsigned i = 0; z == req->extras_zone && i < req->nextras; i++) {
		rc = read(ctx, req->extras[i], &found);
		if (rc != DLZ_OK) {
			return rc;
		}
	}
	return DLZ_OK;
}

int
dlz_fetch_zone_owners(const struct dlz_fetch_req *req, struct dlz_rowset *out,
		      unsigned first, int last, dlz_zone_probe *probe, dlz_owner_reader *read,
		      void *ctx, const char **zone) {
	int z, rc = dlz_find_zone(req, first, probe, ctx, &z);

	if (rc != DLZ_OK) {
		return rc;
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
