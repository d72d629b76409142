/*
 * The filesystem driver: reads the one-file-per-zone tree of schemas/fs.md (written by
 * loaders/fs.py).
 *
 * No process-wide state: every access is relative to a connection's own descriptor of the
 * root (O_PATH), never chdir. A connection is one thread's state at a time (the core's pool
 * locks it): the root descriptor, the split query name and copies of a few zone files.
 *
 * One fetch (one DNS query):
 *  - one openat2 per candidate zone, deepest first, of zones/<comps>/.zone until a zone is
 *    found (BIND asks about no suffix above the deepest zone); a missing file means "no zone".
 *    The file is fstat'ed, read whole with pread into memory of the connection and closed. A
 *    small file (most zones) is read on every use; a large one is kept, and taken from the
 *    connection's cache while the same inode has the same size and mtime. A replaced zone is
 *    seen at once: the loader renames a new file (a new inode) over the old one. Zone files
 *    are never mapped: a file truncated in place under a mapping kills named with SIGBUS,
 *    where a read just comes up short (bad data: SERVFAIL);
 *  - from that one copy (so every row of the answer comes from one version of the zone, even
 *    while it is being replaced), a binary search of the sorted record lines per owner:
 *    the names from the apex down to the query name while they exist (empty non-terminals
 *    have marker lines), the wildcard child of the deepest that exists (the closest encloser;
 *    the core answers wildcards above it "not found" without rows, RFC 4592), and the extra
 *    owners the core asks for (names it expects BIND to look up next in this zone).
 *
 * A query name maps to components exactly as loaders/fs.py's key_labels/component: a label
 * that cannot be a component (empty, a byte BIND never writes, longer than COMP_MAX) makes
 * every name containing it nonexistent, and nothing is opened for it.
 *
 * A zone file that is empty, does not end in a line feed (truncated), lacks the ";xfr" header
 * or holds a line without its fields, or anything but a regular file where a zone file
 * belongs, is bad data (DLZ_BAD_DATA): logged, and the query gets SERVFAIL; the connection (the
 * root's descriptor) stays.
 * Every read of a copy is bounded by its size, whatever the file holds.
 *
 * Every open stays inside the root: openat2 (Linux 5.6) with RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS does it in one system call; without openat2 (an older kernel, a seccomp
 * filter, or Valgrind, which does not know the call: test_drivers.py runs this driver under
 * it) the path is walked one component at a time with O_NOFOLLOW (fs_open_walk).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/dlz_driver.h"

#define ZONE_FILE ".zone"
/* First line of a zone file: this tag, then one " <client address>" per transfer client. */
#define XFR_HEADER ";xfr"
/* The longest label text: 63 octets, each at most 4 characters ("\DDD" or '/' as "\047"). */
#define COMP_MAX 252
/* Every key byte becomes at most 4 component bytes ('/' -> "\047"); keys are shorter than
 * DLZ_KEY_MAX (fs_split_key checks), so the components always fit. */
#define COMPS_MAX (4 * DLZ_KEY_MAX)
/* openat2 with RESOLVE_BENEATH fails with EAGAIN when a rename raced a ".." step. */
#define EAGAIN_RETRIES 32
/* Zone files up to this size are read on every use (openat2, fstat, read, close) into one
 * buffer of the connection: most zones are a few hundred bytes, and keeping copies of them
 * would only cost memory. */
#define READ_MAX (64 * 1024)
/* Copies of larger zone files a connection keeps, least recently used replaced: a hot large
 * zone then costs openat2 + fstat + close per query, no read, and no descriptor stays open.
 * The price is memory: up to ZONE_CACHE copies per connection (the page cache's pages are
 * shared, these are not). */
#define ZONE_CACHE 4

struct fs_state {
	char *root;
	bool openat2;
};

/* A key split into path components; label 0 is the leftmost. */
struct fs_key {
	unsigned nlabels;
	int bad; /* the highest index of a label that is no valid component; -1: none */
	unsigned off[DLZ_MAX_LABELS];
	unsigned len[DLZ_MAX_LABELS];
	char comps[COMPS_MAX];
};

/* A zone file read into memory; a kept copy is named by its inode (see the top). */
struct fs_zone_copy {
	const char *data; /* NULL: an empty slot; a kept copy is the slot's own malloc */
	size_t size;
	size_t body; /* offset of the first record line, after the header */
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	uint64_t used; /* the connection's use counter when last used */
};

struct fs_conn {
	const struct fs_state *state;
	int rootfd;
	struct fs_key key;
	unsigned level_end[DLZ_MAX_LABELS + 1];
	char dirs[PATH_MAX];
	char path[PATH_MAX];
	uint64_t uses;
	struct fs_zone_copy zones[ZONE_CACHE]; /* copies of large files */
	struct fs_zone_copy small;             /* the file last read, in small_buf */
	char *small_buf;                      /* READ_MAX bytes, from the first read on */
	char *line; /* zone transfer: one line copied, to be NUL-terminated */
	size_t line_cap;
};

/* dlz_zone_probe's values: a probe returns them as they are. */
enum fs_found { FOUND_BAD = DLZ_BAD_DATA, FOUND_ERROR = DLZ_ERROR, FOUND_NONE = 0, FOUND_YES = 1 };

/* ---- key to components ------------------------------------------------------------------ */

static bool
fs_printable(unsigned char c) {
	return c >= 0x21 && c <= 0x7e;
}

static bool
fs_is_digit(char c) {
	return c >= '0' && c <= '9';
}

/*
 * One label of key from *pos (up to an unescaped dot or the end) appended to k->comps as its
 * component; false if it is no valid component. *pos ends on the dot or the NUL.
 */
static bool
fs_split_label(const char *key, size_t *pos, struct fs_key *k, size_t *used) {
	size_t i = *pos, start = *used;
	bool ok = true;

	while (key[i] != '\0' && key[i] != '.') {
		const char *esc = NULL;
		size_t n = 1;

		if (!fs_printable((unsigned char)key[i])) {
			ok = false;
		} else if (key[i] == '\\' && fs_is_digit(key[i + 1]) && fs_is_digit(key[i + 2]) &&
			   fs_is_digit(key[i + 3])) {
			n = 4;
		} else if (key[i] == '\\') {
			/* An escape of anything but a printable character: reject, and let the
			 * loop look at that character itself (a dot still ends the label). "\/"
			 * too: BIND never escapes '/', and copied as it is the '/' would split the
			 * component in two. */
			if (fs_printable((unsigned char)key[i + 1]) && key[i + 1] != '/') {
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
fs_split_key(const char *key, struct fs_key *k) {
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
		if (!fs_split_label(key, &pos, k, &used)) {
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
fs_path_append(char *path, size_t *len, const char *text, size_t n) {
	if (*len + n >= PATH_MAX) {
		return false;
	}
	memcpy(path + *len, text, n);
	*len += n;
	path[*len] = '\0';
	return true;
}

/*
 * conn->dirs = "zones/" + the components of conn->key's labels, rightmost first, each followed
 * by '/'; level_end[j] = the length up to label j's ('/' included), level_end[nlabels] that of
 * "zones/" (the root zone). A label whose directory would not fit PATH_MAX becomes bad.
 */
static void
fs_index_dirs(struct fs_conn *conn) {
	struct fs_key *k = &conn->key;
	size_t len = 0;

	fs_path_append(conn->dirs, &len, "zones/", 6);
	conn->level_end[k->nlabels] = (unsigned)len;
	for (int l = (int)k->nlabels - 1; l > k->bad; l--) {
		/* room for ".zone" after the last component's '/' */
		if (len + k->len[l] + 1 + sizeof(ZONE_FILE) >= PATH_MAX) {
			k->bad = l;
			return;
		}
		fs_path_append(conn->dirs, &len, k->comps + k->off[l], k->len[l]);
		fs_path_append(conn->dirs, &len, "/", 1);
		conn->level_end[l] = (unsigned)len;
	}
}

/* conn->path = the zone file of level j (the name made of labels j.. of conn->key). */
static void
fs_zone_file_path(struct fs_conn *conn, unsigned j) {
	size_t end = conn->level_end[j];

	memcpy(conn->path, conn->dirs, end);
	memcpy(conn->path + end, ZONE_FILE, sizeof(ZONE_FILE));
}

/* ---- opening beneath the root ----------------------------------------------------------- */

static int
fs_openat2(int dirfd, const char *path, uint64_t flags, uint64_t resolve) {
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

/* Is errno the answer "no such zone" (as opposed to a failure of the store)? */
static bool
fs_errno_missing(void) {
	return errno == ENOENT || errno == ENOTDIR;
}

/* Is errno a refusal to leave the tree (a symlink where the layout has none, or outside)? */
static bool
fs_errno_escape(void) {
	return errno == ELOOP || errno == EXDEV;
}

/*
 * A zone file (path relative to the root), no symlink anywhere on the way. O_NONBLOCK: a FIFO
 * planted as .zone must not hang the thread (it is then refused as no regular file).
 */
/* close(fd) keeping errno, which tells why the open that follows failed */
static void
fs_close_quietly(int fd) {
	int saved = errno;

	close(fd);
	errno = saved;
}

/*
 * openat2's guarantee without openat2: path (relative to rootfd, components separated by
 * single '/') opened one component at a time, each directory with O_PATH | O_NOFOLLOW |
 * O_DIRECTORY relative to the one before. No component is "", "." or ".." and none holds a
 * '/' (fs_split_label), so the walk never leaves the tree; a symlink anywhere is refused: as
 * the file, by O_NOFOLLOW (ELOOP), as a directory, because O_PATH | O_NOFOLLOW opens the link
 * itself, which is no directory (ENOTDIR: no zone). Mount points inside the tree are crossed
 * (RESOLVE_NO_XDEV has no equivalent here); only root can make them.
 */
static int
fs_open_walk(int rootfd, const char *path, int flags) {
	char comp[NAME_MAX + 1];
	const char *pos = path, *slash;
	int dirfd = rootfd, fd;

	while ((slash = strchr(pos, '/')) != NULL) {
		size_t len = (size_t)(slash - pos);

		if (len == 0 || len > NAME_MAX) {
			fd = -1;
			errno = ENOENT;
		} else {
			memcpy(comp, pos, len);
			comp[len] = '\0';
			fd = openat(dirfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (dirfd != rootfd) {
			fs_close_quietly(dirfd);
		}
		if (fd < 0) {
			return -1;
		}
		dirfd = fd;
		pos = slash + 1;
	}
	fd = openat(dirfd, pos, flags);
	if (dirfd != rootfd) {
		fs_close_quietly(dirfd);
	}
	return fd;
}

static int
fs_open_zone_file(const struct fs_conn *conn, const char *path) {
	int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;

	if (conn->state->openat2) {
		return fs_openat2(conn->rootfd, path, (uint64_t)flags,
				  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
	}
	return fs_open_walk(conn->rootfd, path, flags);
}

/* ---- the cache of large zone files ------------------------------------------------------ */

static void
fs_zone_drop(struct fs_zone_copy *zm) {
	free((void *)zm->data);
	zm->data = NULL;
}

/*
 * The slot for the file st describes: the one holding that inode (*hit), else an empty slot
 * or the least recently used one. A slot of the same inode whose size or mtime changed (the
 * file was written in place, which the loader never does) is reused for a fresh copy.
 */
static struct fs_zone_copy *
fs_zone_slot(struct fs_conn *conn, const struct stat *st, bool *hit) {
	struct fs_zone_copy *victim = &conn->zones[0];

	*hit = false;
	for (unsigned i = 0; i < ZONE_CACHE; i++) {
		struct fs_zone_copy *zm = &conn->zones[i];

		if (zm->data != NULL && zm->dev == st->st_dev && zm->ino == st->st_ino) {
			*hit = zm->size == (size_t)st->st_size &&
			       zm->mtime.tv_sec == st->st_mtim.tv_sec &&
			       zm->mtime.tv_nsec == st->st_mtim.tv_nsec;
			return zm;
		}
	}
	for (unsigned i = 0; i < ZONE_CACHE; i++) {
		struct fs_zone_copy *zm = &conn->zones[i];

		if (zm->data == NULL) {
			return zm;
		}
		if (zm->used < victim->used) {
			victim = zm;
		}
	}
	return victim;
}

/* The offset of the first record line, after a valid header; 0 if the header is invalid. */
static size_t
fs_header_end(const char *data, size_t size) {
	size_t tag = sizeof(XFR_HEADER) - 1;
	const char *lf = memchr(data, '\n', size);

	if (lf == NULL || (size_t)(lf - data) < tag || memcmp(data, XFR_HEADER, tag) != 0 ||
	    (data[tag] != ' ' && data[tag] != '\n')) {
		return 0;
	}
	return (size_t)(lf - data) + 1;
}

/* The offset of data's first record line; 0 (logged) if data is no zone file. */
static size_t
fs_zone_body(const struct fs_conn *conn, const char *data, size_t size) {
	size_t body = fs_header_end(data, size);

	if (body == 0 || data[size - 1] != '\n') {
		dlz_log_error_limited("%s/%s is no zone file (%s)", conn->state->root, conn->path,
				      body == 0 ? "no " XFR_HEADER " header line"
						: "truncated: no final line feed");
		return 0;
	}
	return body;
}

/* The size bytes of the zone file fd (named conn->path) into buf; false (logged) when the file
 * is shorter than that (truncated since its fstat: the loader never writes in place) or
 * cannot be read. */
static bool
fs_read_whole(const struct fs_conn *conn, int fd, char *buf, size_t size) {
	size_t got = 0;
	ssize_t n = 0;

	while (got < size && (n = pread(fd, buf + got, size - got, (off_t)got)) > 0) {
		got += (size_t)n;
	}
	if (got < size) {
		dlz_log_error_limited("cannot read %s/%s: %s", conn->state->root, conn->path,
				      n < 0 ? strerror(errno) : "shorter than its size");
		return false;
	}
	return true;
}

/* A copy of the large zone file fd (described by st, named conn->path) into zm; false
 * (logged) if unusable. */
static bool
fs_zone_copy_file(struct fs_conn *conn, int fd, const struct stat *st, struct fs_zone_copy *zm) {
	size_t size = (size_t)st->st_size;
	char *data = malloc(size);

	if (data == NULL) {
		dlz_log_error_limited("out of memory for %s/%s (%zu bytes)", conn->state->root,
				      conn->path, size);
		return false;
	}
	if (!fs_read_whole(conn, fd, data, size) ||
	    (zm->body = fs_zone_body(conn, data, size)) == 0) {
		free(data);
		return false;
	}
	zm->data = data;
	zm->size = size;
	zm->dev = st->st_dev;
	zm->ino = st->st_ino;
	zm->mtime = st->st_mtim;
	return true;
}

/* Read the small zone file fd (st_size bytes, named conn->path) into conn->small; false
 * (logged) if unusable. */
static bool
fs_zone_read_file(struct fs_conn *conn, int fd, const struct stat *st) {
	size_t size = (size_t)st->st_size;

	if (conn->small_buf == NULL && (conn->small_buf = malloc(READ_MAX)) == NULL) {
		return false;
	}
	conn->small.data = NULL;
	if (!fs_read_whole(conn, fd, conn->small_buf, size)) {
		return false;
	}
	conn->small.body = fs_zone_body(conn, conn->small_buf, size);
	if (conn->small.body == 0) {
		return false;
	}
	conn->small.data = conn->small_buf;
	conn->small.size = size;
	return true;
}

/* The zone file fd (named conn->path): read, or from the cache or copied into it. */
static enum fs_found
fs_zone_of_fd(struct fs_conn *conn, int fd, struct fs_zone_copy **zone) {
	struct stat st;
	struct fs_zone_copy *zm;
	bool hit;

	if (fstat(fd, &st) != 0) {
		dlz_log_error_limited("cannot stat %s/%s: %s", conn->state->root, conn->path,
				      strerror(errno));
		return FOUND_ERROR;
	}
	if (!S_ISREG(st.st_mode)) {
		dlz_log_error_limited("%s/%s is no regular file", conn->state->root, conn->path);
		return FOUND_BAD;
	}
	if (st.st_size == 0) {
		dlz_log_error_limited("%s/%s is empty: no zone file", conn->state->root, conn->path);
		return FOUND_BAD;
	}
	if (st.st_size <= READ_MAX) {
		*zone = &conn->small;
		return fs_zone_read_file(conn, fd, &st) ? FOUND_YES : FOUND_BAD;
	}
	zm = fs_zone_slot(conn, &st, &hit);
	if (!hit) {
		fs_zone_drop(zm);
		if (!fs_zone_copy_file(conn, fd, &st, zm)) {
			return FOUND_BAD;
		}
	}
	zm->used = ++conn->uses;
	*zone = zm;
	return FOUND_YES;
}

/*
 * The zone of level j (read by the connection): one openat2 of its file.
 * FOUND_NONE if level j is no zone.
 */
static enum fs_found
fs_zone_at(struct fs_conn *conn, unsigned j, struct fs_zone_copy **zone) {
	enum fs_found found;
	int fd;

	fs_zone_file_path(conn, j);
	fd = fs_open_zone_file(conn, conn->path);
	if (fd < 0) {
		if (fs_errno_missing()) {
			return FOUND_NONE;
		}
		if (fs_errno_escape()) {
			dlz_log_error_limited("%s in %s is or passes a symlink; treated as no zone",
					      conn->path, conn->state->root);
			return FOUND_NONE;
		}
		dlz_log_error_limited("cannot open %s/%s: %s", conn->state->root, conn->path,
				      strerror(errno));
		return FOUND_ERROR;
	}
	found = fs_zone_of_fd(conn, fd, zone);
	close(fd);
	return found;
}

/* ---- connections and set-up ------------------------------------------------------------- */

static int
fs_open_root(const char *root) {
	return open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Does this kernel (and any seccomp filter) let us use openat2 with RESOLVE_BENEATH? */
static bool
fs_probe_openat2(int rootfd) {
	int fd = fs_openat2(rootfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC, RESOLVE_BENEATH);

	if (fd < 0) {
		return false;
	}
	close(fd);
	return true;
}

static int
fs_init(const struct dlz_args *args, void **state_out) {
	const char *root = dlz_arg_text(args, "root");
	struct fs_state *s;
	struct stat st;
	int fd;

	if (root[0] != '/') {
		dlz_log(ISC_LOG_ERROR, "argument root: expected an absolute directory");
		return DLZ_ERROR;
	}
	fd = fs_open_root(root);
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
	s->openat2 = fs_probe_openat2(fd);
	close(fd);
	dlz_log(ISC_LOG_INFO, "store %s; zone files opened with %s; %d large ones kept per "
			      "connection",
		root,
		s->openat2 ? "openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)"
			   : "openat(O_NOFOLLOW), a component at a time (no openat2 here)",
		ZONE_CACHE);
	*state_out = s;
	return DLZ_OK;
}

static void
fs_fini(void *state) {
	struct fs_state *s = state;

	free(s->root);
	free(s);
}

static int
fs_connect(void *state, void **conn_out) {
	const struct fs_state *s = state;
	struct fs_conn *conn = calloc(1, sizeof(*conn));

	if (conn == NULL) {
		return DLZ_ERROR;
	}
	conn->state = s;
	conn->rootfd = fs_open_root(s->root);
	if (conn->rootfd < 0) {
		dlz_log_error_limited("cannot open root %s: %s", s->root, strerror(errno));
		free(conn);
		return DLZ_ERROR;
	}
	*conn_out = conn;
	return DLZ_OK;
}

static void
fs_disconnect(void *state, void *c) {
	struct fs_conn *conn = c;

	(void)state;
	for (unsigned i = 0; i < ZONE_CACHE; i++) {
		fs_zone_drop(&conn->zones[i]);
	}
	close(conn->rootfd);
	free(conn->small_buf);
	free(conn->line);
	free(conn);
}

/* ---- searching a zone file -------------------------------------------------------------- */

/* The offset of the line feed ending the line at pos (the size if there is none). */
static size_t
fs_line_end(const struct fs_zone_copy *zm, size_t pos) {
	const char *lf = memchr(zm->data + pos, '\n', zm->size - pos);

	return lf != NULL ? (size_t)(lf - zm->data) : zm->size;
}

/* The start of the line holding offset pos, not looking before lo (itself a line start). */
static size_t
fs_line_start(const struct fs_zone_copy *zm, size_t lo, size_t pos) {
	const char *lf = memrchr(zm->data + lo, '\n', pos - lo);

	return lf != NULL ? (size_t)(lf - zm->data) + 1 : lo;
}

/*
 * *cmp = the order of the owner of line [start, end) against key: bytewise, the shorter first
 * on a common prefix (Python's order of the keys, which the loader sorts by). False (logged)
 * if the line has no owner field.
 */
static bool
fs_owner_cmp(const struct fs_zone_copy *zm, size_t start, size_t end, const char *key,
	     size_t key_len, int *cmp) {
	const char *line = zm->data + start;
	const char *sp = memchr(line, ' ', end - start);
	size_t owner_len;
	int c;

	if (sp == NULL || sp == line) {
		dlz_log_error_limited("malformed zone file line (no owner field): %.*s",
				      (int)(end - start), line);
		return false;
	}
	owner_len = (size_t)(sp - line);
	c = memcmp(line, key, owner_len < key_len ? owner_len : key_len);
	*cmp = c != 0 ? c : (owner_len > key_len) - (owner_len < key_len);
	return true;
}

/*
 * *at = the first record line whose owner is not below key (the size if none): a binary
 * search over byte offsets that keeps lo and hi on line starts. False on a malformed line.
 */
static bool
fs_first_line_from(const struct fs_zone_copy *zm, const char *key, size_t key_len, size_t *at) {
	size_t lo = zm->body, hi = zm->size;

	while (lo < hi) {
		size_t start = fs_line_start(zm, lo, lo + (hi - lo) / 2);
		size_t end = fs_line_end(zm, start);
		int cmp;

		if (!fs_owner_cmp(zm, start, end, key, key_len, &cmp)) {
			return false;
		}
		if (cmp < 0) {
			lo = end < zm->size ? end + 1 : zm->size;
		} else {
			hi = start;
		}
	}
	*at = lo;
	return true;
}

/* The record line [start, end) (owner already matched, owner_len long) as a row of owner:
 * DLZ_OK, DLZ_BAD_DATA (malformed, logged) or DLZ_ERROR (no memory). */
static int
fs_add_line(struct dlz_rowset *out, const struct fs_zone_copy *zm, size_t start, size_t end,
	    size_t owner_len, const char *zone, const char *owner) {
	const char *record = zm->data + start + owner_len + 1;
	struct dlz_record_line r;

	if (!dlz_record_split(record, end - (start + owner_len + 1), &r)) {
		dlz_log_error_limited("malformed record line of %s in zone %s: %.*s", owner, zone,
				      (int)(end - start), zm->data + start);
		return DLZ_BAD_DATA;
	}
	return dlz_rowset_add_row_keys(out, zone, owner, r.type, r.type_len, r.ttl, r.rdata,
				       r.rdata_len)
		       ? DLZ_OK
		       : DLZ_ERROR;
}

/* One fetch: its zone, as fs_probe_zone finds it and fs_read_owner reads it. */
struct fs_owner_read {
	struct fs_conn *conn;
	struct fs_zone_copy *zm;
	const char *zone;
	struct dlz_rowset *out;
};

/*
 * dlz_owner_reader: every record line of owner (a string of the request) in the zone file as
 * rows (copied: the mapping may be gone by the time the core reads them); ENT marker lines
 * become ENT rows.
 */
static int
fs_read_owner(void *ctx, const char *owner, bool *found) {
	const struct fs_owner_read *r = ctx;
	const struct fs_zone_copy *zm = r->zm;
	size_t key_len = strlen(owner), pos;
	int rc;

	*found = false;
	if (!fs_first_line_from(zm, owner, key_len, &pos)) {
		return DLZ_BAD_DATA;
	}
	while (pos < zm->size) {
		size_t end = fs_line_end(zm, pos);
		int cmp;

		if (!fs_owner_cmp(zm, pos, end, owner, key_len, &cmp)) {
			return DLZ_BAD_DATA;
		}
		if (cmp != 0) {
			break;
		}
		rc = fs_add_line(r->out, zm, pos, end, key_len, r->zone, owner);
		if (rc != DLZ_OK) {
			return rc;
		}
		*found = true;
		pos = end + 1;
	}
	return DLZ_OK;
}

/* ---- fetch ------------------------------------------------------------------------------ */

/* dlz_zone_probe: one openat2 of names[i]'s zone file; the zone is then r->zm. */
static int
fs_probe_zone(void *ctx, unsigned i) {
	struct fs_owner_read *r = ctx;

	return fs_zone_at(r->conn, i, &r->zm);
}

static int
fs_fetch(void *c, const struct dlz_fetch_req *req, struct dlz_rowset *out) {
	struct fs_owner_read r = { .conn = c, .out = out };
	const struct fs_key *k = &r.conn->key;

	/* The core splits names the same way (and may ask about the deeper suffixes only); a
	 * mismatch would mean a key no store holds. */
	if (!fs_split_key(req->qname, &r.conn->key) || k->nlabels < req->nnames) {
		return DLZ_OK;
	}
	fs_index_dirs(r.conn);
	/* A label that cannot be a path component cannot be in a zone's name either (the zone
	 * search starts below it), and no name below it exists: the owner walk stops above it,
	 * so it is answered NXDOMAIN, not by a wildcard. */
	return dlz_fetch_zone_owners(req, out, (unsigned)(k->bad + 1), k->bad + 1, fs_probe_zone,
				     fs_read_owner, &r, &r.zone);
}

/* ---- zone transfer ---------------------------------------------------------------------- */

/* The file of zone zone_key, read (or a kept copy); DLZ_NOTFOUND when there is no such zone. */
static int
fs_zone_of_key(struct fs_conn *conn, const char *zone_key, struct fs_zone_copy **zm) {
	enum fs_found found;

	if (!fs_split_key(zone_key, &conn->key) || conn->key.bad >= 0) {
		return DLZ_NOTFOUND;
	}
	fs_index_dirs(conn);
	if (conn->key.bad >= 0) {
		return DLZ_NOTFOUND;
	}
	found = fs_zone_at(conn, 0, zm);
	if (found != FOUND_YES) {
		return found == FOUND_NONE ? DLZ_NOTFOUND : (int)found;
	}
	return DLZ_OK;
}

/* conn->line = the line [start, end) of zm, NUL-terminated; false when out of memory. */
static bool
fs_copy_line(struct fs_conn *conn, const struct fs_zone_copy *zm, size_t start, size_t end) {
	size_t len = end - start;

	if (!dlz_grow((void **)&conn->line, &conn->line_cap, len + 1, 1)) {
		return false;
	}
	memcpy(conn->line, zm->data + start, len);
	conn->line[len] = '\0';
	return true;
}

/* "<owner> SP <TYPE> SP <TTL> SP <rdata>" in conn->line to the callback. */
static int
fs_transfer_line(struct fs_conn *conn, size_t len, dlz_node_cb *cb, void *ctx) {
	char *line = conn->line, *sp = memchr(line, ' ', len), *type;
	struct dlz_record_line r;

	if (sp == NULL || sp == line || !dlz_record_split(sp + 1, len - (size_t)(sp + 1 - line), &r)) {
		dlz_log_error_limited("malformed zone file line: %s", line);
		return DLZ_BAD_DATA;
	}
	*sp = '\0';
	type = sp + 1;
	type[r.type_len] = '\0'; /* the space before the TTL */
	return cb(ctx, line, type, r.ttl, r.rdata);
}

static int
fs_allnodes(void *c, const char *zone_key, dlz_node_cb *cb, void *ctx) {
	struct fs_conn *conn = c;
	struct fs_zone_copy *zm;
	int rc = fs_zone_of_key(conn, zone_key, &zm);

	if (rc != DLZ_OK) {
		return rc;
	}
	for (size_t pos = zm->body; rc == DLZ_OK && pos < zm->size;) {
		size_t end = fs_line_end(zm, pos);

		if (!fs_copy_line(conn, zm, pos, end)) {
			return DLZ_ERROR;
		}
		rc = fs_transfer_line(conn, end - pos, cb, ctx);
		pos = end + 1;
	}
	return rc;
}

/* Is client one of the addresses of the header line [0, end) ("<tag> <addr> <addr>...")? */
static bool
fs_header_lists(const char *header, size_t end, const char *client) {
	size_t client_len = strlen(client), pos = sizeof(XFR_HEADER) - 1;

	while (pos < end) {
		const char *word = header + pos + 1; /* after the space */
		const char *sp = memchr(word, ' ', end - pos - 1);
		size_t word_len = sp != NULL ? (size_t)(sp - word) : end - pos - 1;

		if (word_len == client_len && memcmp(word, client, client_len) == 0) {
			return true;
		}
		pos += 1 + word_len;
	}
	return false;
}

static int
fs_allowxfr(void *c, const char *zone_key, const char *client) {
	struct fs_conn *conn = c;
	struct fs_zone_copy *zm;
	int rc = fs_zone_of_key(conn, zone_key, &zm);

	if (rc != DLZ_OK) {
		return rc;
	}
	/* body - 1: the header's line feed */
	return fs_header_lists(zm->data, zm->body - 1, client) ? DLZ_OK : DLZ_DENIED;
}

static const struct dlz_arg_spec fs_args[] = {
	DLZ_TEXT_REQUIRED("root", "the store's directory, absolute (it holds zones/)"),
	DLZ_ARGS_END,
};

const struct dlz_backend dlz_backend = {
	.name = "fs",
	.thread_safe = true,
	.args = fs_args,
	.init = fs_init,
	.fini = fs_fini,
	.connect = fs_connect,
	.disconnect = fs_disconnect,
	.fetch = fs_fetch,
	.allnodes = fs_allnodes,
	.allowxfr = fs_allowxfr,
};
