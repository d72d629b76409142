/*
 * The filesystem driver: reads the directory tree of schemas/filesystem.md (written by
 * loaders/fs.py).
 *
 * No process-wide state: every access is relative to a connection's own descriptor of the
 * root (O_PATH), never chdir. A connection is one thread's state at a time (the core's pool
 * locks it): the root descriptor, a read buffer that only grows, the split query name and the
 * generation directories it has open.
 *
 * One fetch (one DNS query):
 *  - one syscall per candidate zone, deepest first: a readlink of zones/<comps>/.zone until a
 *    zone is found (BIND asks about no suffix above the deepest zone). The link's target must
 *    be the layout's "../" x depth + "gen/<xx>/<id>" (checked, so it cannot lead out of the
 *    root); that generation directory is then opened with openat2(RESOLVE_BENEATH |
 *    RESOLVE_NO_SYMLINKS) (O_NOFOLLOW without openat2), or taken from the connection's cache:
 *    a generation never changes and its id is never reused, and the link is read on every
 *    fetch, so a replaced zone is seen at once;
 *  - from that directory (so every file of the answer comes from one generation even while
 *    the zone is being replaced), one open+read+close per existing owner from the apex down to
 *    the query name (the apex file, read by every fetch, stays open with its generation: one
 *    pread), stopping at the first missing one (names below a missing name cannot
 *    exist: empty non-terminals are files too), plus the wildcard child of the deepest
 *    existing one (the closest encloser). Wildcards of other ancestors are not read: the core
 *    answers a wildcard probe above the closest encloser "not found" (RFC 4592) without
 *    looking at rows;
 *  - one open+read+close per extra owner the core asks for (names it expects BIND to look up
 *    next in this zone, such as the name servers' addresses), from the same generation.
 *
 * A query name maps to components exactly as loaders/fs.py's key_labels/component: a label
 * that cannot be a component (empty, a byte BIND never writes, longer than NAME_MAX - 3,
 * starting with '.') makes every name containing it nonexistent, and nothing is opened for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/dlz_driver.h"

#define RR_SUFFIX ".rr"
#define ZONE_LINK ".zone"
#define ACL_FILE ".acl"
#define AXFR_FILE ".axfr"
#define WILD_FILE "*" RR_SUFFIX
/* A component plus ".rr" must fit one directory entry. */
#define COMP_MAX (NAME_MAX - (sizeof(RR_SUFFIX) - 1))
/* Every key byte becomes at most 4 component bytes ('/' -> "\047"); keys are shorter than
 * DLZ_KEY_MAX (split_key checks), so the components always fit. */
#define COMPS_MAX (4 * DLZ_KEY_MAX)
#define BUF_MIN 16384
/* openat2 with RESOLVE_BENEATH fails with EAGAIN when a rename raced a ".." step. */
#define EAGAIN_RETRIES 32
/*
 * Generation directories a connection keeps open, with their apex files: sets of GEN_WAYS
 * slots chosen by the zone's link, least recently used replaced. The number of sets is sized
 * at start-up from the process's descriptor limit (two descriptors per slot, half the limit
 * for all connections together), between GEN_SETS_MIN and GEN_SETS_MAX: a cache smaller than
 * the zones being queried reopens a generation and its apex file on most fetches.
 */
#define GEN_WAYS 4
#define GEN_SETS_MIN 4
#define GEN_SETS_MAX 1024
#define GEN_KEY_MAX 64

struct fs_state {
	char *root;
	bool openat2;
	unsigned gen_sets; /* a power of two */
};

/* A key split into path components; label 0 is the leftmost. */
struct fs_key {
	unsigned nlabels;
	int bad; /* the highest index of a label that is no valid component; -1: none */
	unsigned off[DLZ_MAX_LABELS];
	unsigned len[DLZ_MAX_LABELS];
	char comps[COMPS_MAX];
};

/*
 * An open generation directory, with its path relative to the root ("gen/<xx>/<id>"), and its
 * apex record file, which every fetch reads: both never change (see generation_fd).
 */
struct gen_slot {
	int fd;      /* -1: empty */
	int apex_fd; /* -1: not opened yet */
	uint64_t zone; /* hash of the link that named it */
	uint64_t used; /* the connection's fetch counter when last used */
	size_t len;
	char rel[GEN_KEY_MAX];
};

struct fs_conn {
	const struct fs_state *state;
	int rootfd;
	char *buf;
	size_t cap;
	struct fs_key key;
	struct fs_key extra; /* an extra owner of the fetch, split */
	unsigned level_end[DLZ_MAX_LABELS + 1];
	char dirs[PATH_MAX];
	char link[PATH_MAX];
	char target[PATH_MAX];
	uint64_t fetches;
	struct gen_slot *gens; /* state->gen_sets * GEN_WAYS */
};

enum found { FOUND_ERROR = -1, FOUND_NONE = 0, FOUND_YES = 1 };

/* ---- key to components ------------------------------------------------------------------ */

static bool
printable(unsigned char c) {
	return c >= 0x21 && c <= 0x7e;
}

static bool
is_digit(char c) {
	return c >= '0' && c <= '9';
}

/*
 * One label of key from *pos (up to an unescaped dot or the end) appended to k->comps as its
 * component; false if it is no valid component. *pos ends on the dot or the NUL.
 */
static bool
split_label(const char *key, size_t *pos, struct fs_key *k, size_t *used) {
	size_t i = *pos, start = *used;
	bool ok = true;

	while (key[i] != '\0' && key[i] != '.') {
		const char *esc = NULL;
		size_t n = 1;

		if (!printable((unsigned char)key[i])) {
			ok = false;
		} else if (key[i] == '\\' && is_digit(key[i + 1]) && is_digit(key[i + 2]) &&
			   is_digit(key[i + 3])) {
			n = 4;
		} else if (key[i] == '\\') {
			/* An escape of anything but a printable character: reject, and let the
			 * loop look at that character itself (a dot still ends the label). */
			if (printable((unsigned char)key[i + 1])) {
				n = 2;
			} else {
				ok = false;
			}
		} else if (key[i] == '/') {
			esc = "\\047";
		}
		if (esc != NULL) {
			memcpy(k->comps + *used, esc, 4);
			*used += 4;
		} else {
			memcpy(k->comps + *used, key + i, n);
			*used += n;
		}
		i += n;
	}
	*pos = i;
	k->off[k->nlabels] = (unsigned)start;
	k->len[k->nlabels] = (unsigned)(*used - start);
	return ok && *used > start && *used - start <= COMP_MAX && k->comps[start] != '.';
}

/* Split key into k; false if the key as a whole is unusable (nothing may be opened). */
static bool
split_key(const char *key, struct fs_key *k) {
	size_t pos = 0, used = 0, key_len = strlen(key);

	k->nlabels = 0;
	k->bad = -1;
	if (key_len == 0 || key_len >= DLZ_KEY_MAX) {
		return false;
	}
	if (strcmp(key, ".") == 0) {
		return true; /* the root: no labels */
	}
	for (;;) {
		if (k->nlabels == DLZ_MAX_LABELS) {
			return false;
		}
		if (!split_label(key, &pos, k, &used)) {
			k->bad = (int)k->nlabels;
		}
		k->nlabels++;
		if (key[pos] == '\0') {
			return true;
		}
		pos++; /* the dot; a final dot gives an empty, hence bad, last label */
	}
}

/* ---- paths ------------------------------------------------------------------------------ */

static bool
path_append(char *path, size_t *len, const char *text, size_t n) {
	if (*len + n >= PATH_MAX) {
		return false;
	}
	memcpy(path + *len, text, n);
	*len += n;
	path[*len] = '\0';
	return true;
}

static bool
path_append_comp(char *path, size_t *len, const struct fs_key *k, unsigned label) {
	return path_append(path, len, k->comps + k->off[label], k->len[label]);
}

/*
 * conn->dirs = "zones/" + the components of conn->key's labels, rightmost first, each followed
 * by '/'; level_end[j] = the length up to label j's ('/' included), level_end[nlabels] that of
 * "zones/" (the root zone). A label whose directory would not fit PATH_MAX becomes bad.
 */
static void
index_dirs(struct fs_conn *conn) {
	struct fs_key *k = &conn->key;
	size_t len = 0;

	path_append(conn->dirs, &len, "zones/", 6);
	conn->level_end[k->nlabels] = (unsigned)len;
	for (int l = (int)k->nlabels - 1; l > k->bad; l--) {
		/* room for "/.zone" after the last component */
		if (len + k->len[l] + 1 + sizeof(ZONE_LINK) >= PATH_MAX) {
			k->bad = l;
			return;
		}
		path_append_comp(conn->dirs, &len, k, (unsigned)l);
		path_append(conn->dirs, &len, "/", 1);
		conn->level_end[l] = (unsigned)len;
	}
}

/* conn->link = the .zone link of level j (the name made of labels j.. of conn->key). */
static void
link_path(struct fs_conn *conn, unsigned j) {
	size_t end = conn->level_end[j];

	memcpy(conn->link, conn->dirs, end);
	memcpy(conn->link + end, ZONE_LINK, sizeof(ZONE_LINK));
}

/* ---- opening beneath a directory -------------------------------------------------------- */

static int
sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
	struct open_how how = { .flags = flags, .resolve = resolve };
	long fd;

	for (int attempt = 0; attempt < EAGAIN_RETRIES; attempt++) {
		fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0 || errno != EAGAIN) {
			break;
		}
	}
	return (int)fd;
}

/* Is errno the answer "no such name" (as opposed to a failure of the store)? */
static bool
errno_missing(void) {
	return errno == ENOENT || errno == ENOTDIR;
}

/* Is errno a refusal to leave the tree (a symlink where the layout has none, or outside)? */
static bool
errno_escape(void) {
	return errno == ELOOP || errno == EXDEV;
}

/* Each component of rel (relative, '/'-separated) is non-empty and does not start with '.'. */
static bool
plain_relative(const char *rel) {
	if (*rel == '\0') {
		return false;
	}
	for (const char *c = rel; *c != '\0'; c++) {
		if ((c == rel || c[-1] == '/') && (*c == '/' || *c == '.')) {
			return false;
		}
	}
	return rel[strlen(rel) - 1] != '/';
}

/*
 * The generation a .zone link's target names, relative to the root: the target must be "../"
 * once per directory of the link's own path (so that it starts again at the root) followed by
 * plain components; NULL if it is anything else (it might lead out of the tree).
 */
static const char *
generation_of(const char *target, unsigned depth) {
	const char *rel = target;

	for (unsigned d = 0; d < depth; d++, rel += 3) {
		if (strncmp(rel, "../", 3) != 0) {
			return NULL;
		}
	}
	return plain_relative(rel) && strlen(rel) < GEN_KEY_MAX ? rel : NULL;
}

static uint64_t
hash_text(const char *text, size_t len) {
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)text[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static void
gen_slot_clear(struct gen_slot *slot) {
	if (slot->apex_fd >= 0) {
		close(slot->apex_fd);
	}
	if (slot->fd >= 0) {
		close(slot->fd);
	}
	slot->fd = slot->apex_fd = -1;
}

/*
 * The slot for generation rel of the zone whose link hashes to zone: the one holding it, else
 * (to be filled) the zone's slot for an older generation, an empty one, or the least recently
 * used of the set.
 */
static struct gen_slot *
gen_slot_for(struct fs_conn *conn, uint64_t zone, const char *rel, size_t len, bool *hit) {
	struct gen_slot *set = &conn->gens[(zone & (conn->state->gen_sets - 1)) * GEN_WAYS];
	struct gen_slot *victim = &set[0];
	unsigned w;

	*hit = true;
	for (w = 0; w < GEN_WAYS; w++) {
		if (set[w].fd >= 0 && set[w].len == len && memcmp(set[w].rel, rel, len) == 0) {
			return &set[w];
		}
	}
	*hit = false;
	for (w = 0; w < GEN_WAYS; w++) {
		if (set[w].fd >= 0 && set[w].zone == zone) {
			return &set[w];
		}
	}
	for (w = 0; w < GEN_WAYS; w++) {
		if (set[w].fd < 0) {
			return &set[w];
		}
		if (set[w].used < victim->used) {
			victim = &set[w];
		}
	}
	return victim;
}

/*
 * Generation directory rel, named by the link conn->link, from the connection's cache or
 * opened (and cached). The loader builds a generation completely before it links it, never
 * writes to it afterwards, and never reuses its random id, so descriptors of it (the
 * directory's and the apex file's) stay right for as long as a .zone link names it, and every
 * fetch reads the link. A zone's new generation takes the slot of its old one at once.
 */
static enum found
generation_fd(struct fs_conn *conn, const char *rel, struct gen_slot **gen) {
	size_t len = strlen(rel);
	uint64_t zone = hash_text(conn->link, strlen(conn->link));
	bool hit;
	struct gen_slot *slot = gen_slot_for(conn, zone, rel, len, &hit);
	int fd;

	slot->used = ++conn->fetches;
	if (hit) {
		*gen = slot;
		return FOUND_YES;
	}
	if (conn->state->openat2) {
		fd = sys_openat2(conn->rootfd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC,
				 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	} else {
		fd = openat(conn->rootfd, rel, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0) {
		if (errno_missing() || errno_escape()) {
			dlz_log_error_limited("%s in %s: generation %s: %s; treated as no zone",
					      conn->link, conn->state->root, rel, strerror(errno));
			return FOUND_NONE;
		}
		dlz_log_error_limited("cannot open %s/%s: %s", conn->state->root, rel,
				      strerror(errno));
		return FOUND_ERROR;
	}
	gen_slot_clear(slot);
	slot->fd = fd;
	slot->zone = zone;
	slot->len = len;
	memcpy(slot->rel, rel, len);
	*gen = slot;
	return FOUND_YES;
}

/*
 * The generation of level j's zone (owned by the connection's cache):
 * one readlink of its .zone link, whose target is checked before anything is opened.
 * FOUND_NONE if level j is no zone (or its link is no symlink of the layout's form).
 */
static enum found
zone_generation(struct fs_conn *conn, unsigned j, struct gen_slot **gen) {
	const char *rel;
	ssize_t n;

	link_path(conn, j);
	n = readlinkat(conn->rootfd, conn->link, conn->target, sizeof(conn->target) - 1);
	if (n < 0) {
		if (errno_missing()) {
			return FOUND_NONE;
		}
		if (errno == EINVAL) {
			dlz_log_error_limited("%s in %s is no symlink; treated as no zone", conn->link,
					      conn->state->root);
			return FOUND_NONE;
		}
		dlz_log_error_limited("cannot read link %s in %s: %s", conn->link,
				      conn->state->root, strerror(errno));
		return FOUND_ERROR;
	}
	conn->target[n] = '\0';
	/* The link is in zones/ plus one directory per label of the zone. */
	rel = generation_of(conn->target, conn->key.nlabels - j + 1);
	if (rel == NULL) {
		dlz_log_error_limited("%s in %s points to %s, not to a generation of the tree; "
				      "treated as no zone", conn->link, conn->state->root,
				      conn->target);
		return FOUND_NONE;
	}
	return generation_fd(conn, rel, gen);
}

/* A file of a generation directory, no symlink anywhere on the way. */
static int
open_in_zone(const struct fs_conn *conn, int zfd, const char *rel) {
	if (conn->state->openat2) {
		return sys_openat2(zfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
				   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	}
	return openat(zfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

/* ---- reading ---------------------------------------------------------------------------- */

static bool
buf_grow(struct fs_conn *conn) {
	size_t cap = conn->cap * 2;
	char *bigger = realloc(conn->buf, cap);

	if (bigger == NULL) {
		return false;
	}
	conn->buf = bigger;
	conn->cap = cap;
	return true;
}

/*
 * One read from fd into the free end of conn->buf (*len grows); *eof at the end of the file.
 * offset < 0: from the file position, else from that offset.
 */
static bool
read_some(struct fs_conn *conn, int fd, off_t offset, size_t *len, bool *eof) {
	for (;;) {
		ssize_t got = offset < 0 ? read(fd, conn->buf + *len, conn->cap - *len)
					 : pread(fd, conn->buf + *len, conn->cap - *len, offset);
		if (got < 0 && errno == EINTR) {
			continue;
		}
		if (got < 0) {
			return false;
		}
		*eof = got == 0;
		*len += (size_t)got;
		return true;
	}
}

/*
 * The whole file into conn->buf (from offset 0, whatever fd's position). A read that does not
 * fill the buffer reached the end of a regular file, so a file smaller than the buffer costs
 * one read.
 */
static bool
read_whole(struct fs_conn *conn, int fd, size_t *len) {
	bool eof = false;

	*len = 0;
	for (;;) {
		size_t before = *len;
		if (!read_some(conn, fd, (off_t)before, len, &eof)) {
			return false;
		}
		if (eof || *len - before < conn->cap - before) {
			return true;
		}
		if (!buf_grow(conn)) {
			errno = ENOMEM;
			return false;
		}
	}
}

/* Open node file rel of generation zfd into *fd. */
static enum found
open_node(struct fs_conn *conn, int zfd, const char *rel, int *fd) {
	*fd = open_in_zone(conn, zfd, rel);
	if (*fd >= 0) {
		return FOUND_YES;
	}
	if (errno_missing()) {
		return FOUND_NONE;
	}
	if (errno_escape()) {
		dlz_log_error_limited("symlink at %s in a zone of %s: treated as missing", rel,
				      conn->state->root);
		return FOUND_NONE;
	}
	dlz_log_error_limited("cannot open %s in a zone of %s: %s", rel, conn->state->root,
			      strerror(errno));
	return FOUND_ERROR;
}

static enum found
read_open_node(struct fs_conn *conn, int fd, const char *rel, size_t *len) {
	if (read_whole(conn, fd, len)) {
		return FOUND_YES;
	}
	dlz_log_error_limited("cannot read %s in a zone of %s: %s", rel, conn->state->root,
			      strerror(errno));
	return FOUND_ERROR;
}

/* Node file rel of generation gen into conn->buf: open, read, close; the apex file is kept
 * open in gen instead (read on every fetch). */
static enum found
read_node(struct fs_conn *conn, struct gen_slot *gen, const char *rel, bool apex, size_t *len) {
	enum found found;
	int fd;

	if (apex && gen->apex_fd >= 0) {
		return read_open_node(conn, gen->apex_fd, rel, len);
	}
	found = open_node(conn, gen->fd, rel, &fd);
	if (found != FOUND_YES) {
		return found;
	}
	found = read_open_node(conn, fd, rel, len);
	if (apex && found == FOUND_YES) {
		gen->apex_fd = fd;
	} else {
		close(fd);
	}
	return found;
}

typedef int line_fn(void *ctx, char *line, size_t len);

/*
 * Each line of fd (NUL-terminated in place, without its LF) to fn, reading in buffer-sized
 * chunks so that a zone transfer file of any size needs no more memory than its longest line.
 * fn's non-zero return stops and is returned; DLZ_ERROR if reading fails.
 */
static int
for_each_line(struct fs_conn *conn, int fd, line_fn *fn, void *ctx) {
	size_t len = 0, start;
	bool eof = false;

	while (!eof) {
		if (len == conn->cap && !buf_grow(conn)) {
			return DLZ_ERROR; /* one line longer than the buffer */
		}
		if (!read_some(conn, fd, -1, &len, &eof)) {
			dlz_log_error_limited("cannot read in %s: %s", conn->state->root,
					      strerror(errno));
			return DLZ_ERROR;
		}
		start = 0;
		for (;;) {
			char *lf = memchr(conn->buf + start, '\n', len - start);
			size_t end = lf != NULL ? (size_t)(lf - conn->buf) : len;
			int rc;

			if (lf == NULL && (!eof || start == len)) {
				break;
			}
			if (end == conn->cap && !buf_grow(conn)) {
				return DLZ_ERROR; /* room for the NUL of a last line without LF */
			}
			conn->buf[end] = '\0';
			rc = fn(ctx, conn->buf + start, end - start);
			if (rc != DLZ_OK) {
				return rc;
			}
			start = lf != NULL ? end + 1 : len;
		}
		memmove(conn->buf, conn->buf + start, len - start);
		len -= start;
	}
	return DLZ_OK;
}

/* ---- fetch ------------------------------------------------------------------------------ */

/* Read the node file rel (a path below the zone) and add its rows for owner. */
static enum found
read_owner(struct fs_conn *conn, struct gen_slot *gen, const char *rel, bool apex,
	   const char *zone, const char *owner, struct dlz_rowset *out) {
	size_t len;
	enum found found = read_node(conn, gen, rel, apex, &len);

	if (found == FOUND_YES && !dlz_rowset_add_node(out, zone, owner, conn->buf, len)) {
		return FOUND_ERROR;
	}
	return found;
}

/*
 * The rows of zone names[z] (generation gen): names[z], names[z-1], ... while they exist, then
 * those of the wildcard child of the deepest one that exists (the closest encloser).
 */
static int
read_owners(struct fs_conn *conn, struct gen_slot *gen, const struct dlz_fetch_req *req, int z,
	    struct dlz_rowset *out) {
	const struct fs_key *k = &conn->key;
	const char *zone = req->names[z];
	char rel[PATH_MAX];
	size_t len = 0, enc_len = 0;
	int enc = -1;

	rel[0] = '\0';
	for (int i = z; i > k->bad; i--) {
		size_t dir_len;
		enum found found;

		if (i < z && ((len > 0 && !path_append(rel, &len, "/", 1)) ||
			      !path_append_comp(rel, &len, k, (unsigned)i))) {
			break;
		}
		dir_len = len;
		if (!path_append(rel, &len, RR_SUFFIX, sizeof(RR_SUFFIX) - 1)) {
			break;
		}
		found = read_owner(conn, gen, rel, i == z, zone, req->names[i], out);
		if (found == FOUND_ERROR) {
			return DLZ_ERROR;
		}
		if (found == FOUND_NONE) {
			break;
		}
		len = dir_len;
		rel[len] = '\0';
		enc = i;
		enc_len = len;
	}
	/* No wildcard when the query name exists, when not even the apex does, or when the walk
	 * stopped at a label that cannot be a component: such a name is answered NXDOMAIN. */
	if (enc < 1 || enc == k->bad + 1) {
		return DLZ_OK;
	}
	len = enc_len;
	if ((len > 0 && !path_append(rel, &len, "/", 1)) ||
	    !path_append(rel, &len, WILD_FILE, sizeof(WILD_FILE) - 1)) {
		return DLZ_OK;
	}
	return read_owner(conn, gen, rel, false, zone, req->wilds[enc], out) == FOUND_ERROR
		       ? DLZ_ERROR
		       : DLZ_OK;
}

/*
 * The rows of one extra owner (a key strictly inside zone names[z]) from generation gen: one
 * open+read+close of its node file. A name with a label that cannot be a component does not
 * exist.
 */
static int
read_extra(struct fs_conn *conn, struct gen_slot *gen, const struct dlz_fetch_req *req, int z,
	   const char *owner, struct dlz_rowset *out) {
	struct fs_key *k = &conn->extra;
	char rel[PATH_MAX];
	size_t len = 0;
	int depth;

	if (!split_key(owner, k) || k->bad >= 0) {
		return DLZ_OK;
	}
	depth = (int)k->nlabels - ((int)conn->key.nlabels - z); /* labels below names[z] */
	if (depth < 1) {
		return DLZ_OK;
	}
	rel[0] = '\0';
	for (int l = depth - 1; l >= 0; l--) {
		if ((len > 0 && !path_append(rel, &len, "/", 1)) ||
		    !path_append_comp(rel, &len, k, (unsigned)l)) {
			return DLZ_OK; /* longer than any path of the tree */
		}
	}
	if (!path_append(rel, &len, RR_SUFFIX, sizeof(RR_SUFFIX) - 1)) {
		return DLZ_OK;
	}
	return read_owner(conn, gen, rel, false, req->names[z], owner, out) == FOUND_ERROR
		       ? DLZ_ERROR
		       : DLZ_OK;
}

static int
fs_fetch(void *c, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct fs_conn *conn = c;
	const struct fs_key *k = &conn->key;
	struct gen_slot *gen = NULL;
	int z = -1;

	/* The core splits names the same way (and may ask about the deeper suffixes only); a
	 * mismatch would mean a key no store holds. */
	if (!split_key(req->qname, &conn->key) || k->nlabels < req->nnames) {
		return DLZ_OK;
	}
	index_dirs(conn);
	/* The given zone, or the deepest: one readlink per candidate, deepest first, until a
	 * zone is found (no suffix above it is asked about). */
	for (int j = req->zone_index >= 0 ? req->zone_index : k->bad + 1;
	     z < 0 && j > k->bad && j < (int)req->nnames; j++) {
		enum found found = zone_generation(conn, (unsigned)j, &gen);

		if (found == FOUND_ERROR) {
			return DLZ_ERROR;
		}
		if (found == FOUND_YES) {
			z = j;
		} else if (req->zone_index >= 0) {
			break;
		}
	}
	if (z < 0) {
		return DLZ_OK;
	}
	if (!dlz_rowset_add_zone_ref(out, req->names[z]) ||
	    read_owners(conn, gen, req, z, out) != DLZ_OK) {
		return DLZ_ERROR;
	}
	for (unsigned i = 0; z == req->extras_zone && i < req->nextras; i++) {
		if (read_extra(conn, gen, req, z, req->extras[i], out) != DLZ_OK) {
			return DLZ_ERROR;
		}
	}
	return DLZ_OK;
}

/* ---- zone transfer ---------------------------------------------------------------------- */

/* Open file name of zone_key's generation; DLZ_NOTFOUND when there is no such zone. */
static int
open_zone_file(struct fs_conn *conn, const char *zone_key, const char *name, int *fd) {
	struct gen_slot *gen;
	enum found found;

	if (!split_key(zone_key, &conn->key) || conn->key.bad >= 0) {
		return DLZ_NOTFOUND;
	}
	index_dirs(conn);
	if (conn->key.bad >= 0) {
		return DLZ_NOTFOUND;
	}
	found = zone_generation(conn, 0, &gen);
	if (found != FOUND_YES) {
		return found == FOUND_ERROR ? DLZ_ERROR : DLZ_NOTFOUND;
	}
	*fd = open_in_zone(conn, gen->fd, name);
	if (*fd < 0) {
		dlz_log_error_limited("cannot open %s of zone %s in %s: %s", name, zone_key,
				      conn->state->root, strerror(errno));
		return DLZ_ERROR;
	}
	return DLZ_OK;
}

struct axfr_walk {
	dlz_node_cb *cb;
	void *ctx;
};

/* "<owner> SP <TYPE> SP <TTL> SP <rdata>" to the callback. */
static int
axfr_line(void *ctx, char *line, size_t len) {
	struct axfr_walk *walk = ctx;
	char *sp = memchr(line, ' ', len);
	struct dlz_record_line r;
	char *type;

	if (sp == NULL || sp == line || !dlz_record_split(sp + 1, len - (size_t)(sp + 1 - line), &r)) {
		dlz_log_error_limited("malformed zone transfer line: %s", line);
		return DLZ_ERROR;
	}
	*sp = '\0';
	type = sp + 1;
	type[r.type_len] = '\0'; /* the space before the TTL */
	return walk->cb(walk->ctx, line, type, r.ttl, r.rdata);
}

static int
fs_allnodes(void *c, const char *zone_key, dlz_node_cb *cb, void *ctx) {
	struct fs_conn *conn = c;
	struct axfr_walk walk = { .cb = cb, .ctx = ctx };
	int fd, rc = open_zone_file(conn, zone_key, AXFR_FILE, &fd);

	if (rc != DLZ_OK) {
		return rc;
	}
	rc = for_each_line(conn, fd, axfr_line, &walk);
	close(fd);
	return rc;
}

/* What acl_line returns to stop the walk at the client's line. */
#define ACL_MATCH 100

static int
acl_line(void *ctx, char *line, size_t len) {
	const char *client = ctx;

	(void)len;
	return strcmp(line, client) == 0 ? ACL_MATCH : DLZ_OK;
}

static int
fs_allowxfr(void *c, const char *zone_key, const char *client) {
	struct fs_conn *conn = c;
	int fd, rc = open_zone_file(conn, zone_key, ACL_FILE, &fd);

	if (rc != DLZ_OK) {
		return rc;
	}
	rc = for_each_line(conn, fd, acl_line, (void *)client);
	close(fd);
	if (rc == DLZ_ERROR) {
		return DLZ_ERROR;
	}
	return rc == ACL_MATCH ? DLZ_OK : DLZ_DENIED;
}

/* ---- connections and set-up ------------------------------------------------------------- */

static int
open_root(const char *root) {
	return open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static int
fs_connect(void *state, void **conn_out) {
	const struct fs_state *s = state;
	struct fs_conn *conn = calloc(1, sizeof(*conn));

	if (conn == NULL) {
		return DLZ_ERROR;
	}
	conn->state = s;
	conn->gens = calloc((size_t)s->gen_sets * GEN_WAYS, sizeof(*conn->gens));
	for (unsigned i = 0; conn->gens != NULL && i < s->gen_sets * GEN_WAYS; i++) {
		conn->gens[i].fd = conn->gens[i].apex_fd = -1;
	}
	conn->cap = BUF_MIN;
	conn->buf = malloc(conn->cap);
	conn->rootfd = open_root(s->root);
	if (conn->gens == NULL || conn->buf == NULL || conn->rootfd < 0) {
		dlz_log_error_limited("cannot open root %s: %s", s->root, strerror(errno));
		if (conn->rootfd >= 0) {
			close(conn->rootfd);
		}
		free(conn->gens);
		free(conn->buf);
		free(conn);
		return DLZ_ERROR;
	}
	*conn_out = conn;
	return DLZ_OK;
}

static void
fs_disconnect(void *state, void *c) {
	struct fs_conn *conn = c;

	for (unsigned i = 0; i < ((const struct fs_state *)state)->gen_sets * GEN_WAYS; i++) {
		gen_slot_clear(&conn->gens[i]);
	}
	close(conn->rootfd);
	free(conn->gens);
	free(conn->buf);
	free(conn);
}

/* Does this kernel (and any seccomp filter) let us use openat2 with RESOLVE_BENEATH? */
static bool
probe_openat2(int rootfd) {
	int fd = sys_openat2(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_BENEATH);

	if (fd < 0) {
		return false;
	}
	close(fd);
	return true;
}

/* Sets of the generation cache: two descriptors per slot, half the process's limit for all
 * connections (named's own sockets and files need the rest). */
static unsigned
gen_cache_sets(const struct dlz_args *args) {
	struct rlimit lim;
	long connections;
	unsigned sets = GEN_SETS_MIN;
	rlim_t budget;

	if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) {
		lim.rlim_cur = 1024;
	}
	if (!dlz_arg_long(args, "connections", 1, 1, 4096, &connections)) {
		connections = 1;
	}
	budget = lim.rlim_cur / 2 / (rlim_t)connections / (2 * GEN_WAYS);
	while (sets < GEN_SETS_MAX && (rlim_t)sets * 2 <= budget) {
		sets *= 2;
	}
	return sets;
}

static int
fs_init(const struct dlz_args *args, void **state_out) {
	const char *root = dlz_arg_str(args, "root", NULL);
	struct fs_state *s;
	struct stat st;
	int fd;

	if (root == NULL || root[0] != '/') {
		dlz_log(ISC_LOG_ERROR, "argument root=<absolute directory> is required");
		return DLZ_ERROR;
	}
	fd = open_root(root);
	if (fd < 0 || fstatat(fd, "zones", &st, AT_SYMLINK_NOFOLLOW) != 0) {
		dlz_log(ISC_LOG_ERROR, "%s is no filesystem store (no %s/zones): %s", root, root,
			strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return DLZ_ERROR;
	}
	if (!S_ISDIR(st.st_mode)) {
		dlz_log(ISC_LOG_ERROR, "%s is no filesystem store (%s/zones is no directory)", root,
			root);
		close(fd);
		return DLZ_ERROR;
	}
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->root = strdup(root)) == NULL) {
		free(s);
		close(fd);
		return DLZ_ERROR;
	}
	s->openat2 = probe_openat2(fd);
	s->gen_sets = gen_cache_sets(args);
	close(fd);
	dlz_log(ISC_LOG_INFO, "store %s; files opened with %s; %u zone generations cached", root,
		s->openat2 ? "openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)"
			   : "openat(O_NOFOLLOW) (this kernel has no openat2)",
		s->gen_sets * GEN_WAYS);
	*state_out = s;
	return DLZ_OK;
}

static void
fs_fini(void *state) {
	struct fs_state *s = state;

	free(s->root);
	free(s);
}

static const char *const fs_keys[] = { "root", NULL };

const struct dlz_backend dlz_backend = {
	.name = "filesystem",
	.thread_safe = true,
	.arg_keys = fs_keys,
	.init = fs_init,
	.fini = fs_fini,
	.connect = fs_connect,
	.disconnect = fs_disconnect,
	.fetch = fs_fetch,
	.allnodes = fs_allnodes,
	.allowxfr = fs_allowxfr,
};
