/*
 * The key=value words after the library path on named.conf's `database` line.
 *
 * A value may be a secret (password=...), and a mistyped key (pasword=...) is not known to be
 * one: every message here names the key, or the word's position, and never shows a value.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

static bool
key_listed(const char *key, size_t len, const char *const *list) {
	for (; list != NULL && *list != NULL; list++) {
		if (strlen(*list) == len && memcmp(*list, key, len) == 0) {
			return true;
		}
	}
	return false;
}

static const char *
args_find(const struct dlz_args *args, const char *key) {
	for (unsigned i = 0; i < args->count; i++) {
		if (strcmp(args->keys[i], key) == 0) {
			return args->values[i];
		}
	}
	return NULL;
}

void
args_free(struct dlz_args *args) {
	if (args == NULL) {
		return;
	}
	for (unsigned i = 0; i < args->count; i++) {
		free(args->keys[i]);
		free(args->values[i]);
	}
	free(args->keys);
	free(args->values);
	free(args);
}

/* Argument word number position (from 1) into args->keys[args->count]; false (logged) if bad. */
static bool
args_add(struct dlz_args *args, unsigned position, const char *word,
	 const char *const *core_keys, const char *const *backend_keys) {
	const char *eq = strchr(word, '=');
	size_t key_len;

	if (eq == NULL || eq == word) {
		/* Without its '=' a word may be a value that lost its key: not shown. */
		dlz_log(ISC_LOG_ERROR, "argument %u is not key=value", position);
		return false;
	}
	key_len = (size_t)(eq - word);
	if (!key_listed(word, key_len, core_keys) && !key_listed(word, key_len, backend_keys)) {
		dlz_log(ISC_LOG_ERROR, "unknown argument '%.*s'", (int)key_len, word);
		return false;
	}
	args->keys[args->count] = strndup(word, key_len);
	args->values[args->count] = strdup(eq + 1);
	if (args->keys[args->count] == NULL || args->values[args->count] == NULL) {
		free(args->keys[args->count]);
		free(args->values[args->count]);
		dlz_log(ISC_LOG_ERROR, "out of memory parsing arguments");
		return false;
	}
	if (args_find(args, args->keys[args->count]) != NULL) {
		dlz_log(ISC_LOG_ERROR, "argument '%s' given twice", args->keys[args->count]);
		free(args->keys[args->count]);
		free(args->values[args->count]);
		return false;
	}
	args->count++;
	return true;
}

struct dlz_args *
args_parse(unsigned argc, char *const argv[], const char *const *core_keys,
	   const char *const *backend_keys) {
	struct dlz_args *args = calloc(1, sizeof(*args));

	if (args == NULL) {
		return NULL;
	}
	args->keys = calloc(argc + 1, sizeof(char *));
	args->values = calloc(argc + 1, sizeof(char *));
	if (args->keys == NULL || args->values == NULL) {
		args_free(args);
		return NULL;
	}
	for (unsigned i = 0; i < argc; i++) {
		if (!args_add(args, i + 1, argv[i], core_keys, backend_keys)) {
			args_free(args);
			return NULL;
		}
	}
	return args;
}

const char *
dlz_arg_str(const struct dlz_args *args, const char *key, const char *def) {
	const char *value = args_find(args, key);
	return value != NULL ? value : def;
}

bool
dlz_arg_long(const struct dlz_args *args, const char *key, long def, long min, long max,
	     long *out) {
	const char *text = args_find(args, key);
	char *end = NULL;
	long value;

	if (text == NULL) {
		*out = def;
		return true;
	}
	errno = 0;
	value = strtol(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0' || value < min || value > max) {
		dlz_log(ISC_LOG_ERROR, "argument %s: expected an integer from %ld to %ld", key, min,
			max);
		return false;
	}
	*out = value;
	return true;
}

bool
dlz_arg_bool(const struct dlz_args *args, const char *key, bool def, bool *out) {
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };
	const char *text = args_find(args, key);

	if (text == NULL) {
		*out = def;
		return true;
	}
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*out = true;
			return true;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*out = false;
			return true;
		}
	}
	dlz_log(ISC_LOG_ERROR, "argument %s: expected yes or no", key);
	return false;
}
