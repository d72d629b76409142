/*
 * A password read from a file named in named.conf (password_file=...), so that it is neither
 * in named.conf nor in named's environment, which stays readable for named's whole life
 * (/proc/PID/environ, a core dump). The suite writes the file mode 0600 for named's user.
 *
 * Like args.c, every message names the key and the file, never what the file holds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

bool
dlz_arg_secret_file(const struct dlz_args *args, const char *key, char **out) {
	const char *path = dlz_arg_text(args, key);
	char *line = NULL;
	size_t size = 0;
	ssize_t len;
	FILE *file;

	*out = NULL;
	if (path == NULL) {
		return true;
	}
	file = fopen(path, "re");
	if (file == NULL) {
		dlz_log(ISC_LOG_ERROR, "argument %s: cannot open %s: %s", key, path, strerror(errno));
		return false;
	}
	len = getline(&line, &size, file);
	fclose(file);
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
		line[--len] = '\0';
	}
	if (len <= 0) {
		dlz_secret_free(line);
		dlz_log(ISC_LOG_ERROR, "argument %s: %s holds no password on its first line", key,
			path);
		return false;
	}
	*out = line;
	return true;
}

void
dlz_secret_free(char *secret) {
	if (secret != NULL) {
		explicit_bzero(secret, strlen(secret));
		free(secret);
	}
}
