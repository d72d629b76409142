/*
 * The key=value words after the library path on named.conf's `database` line, parsed against
 * the core's and the driver's argument tables (dlz_driver.h: struct dlz_arg_spec).
 *
 * A value may be a secret (password=...), and a mistyped key (pasword=...) is not known to be
 * one: every message here names the key, or the word's position, and never shows a value.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core.h"

/* The entry of table named key (len bytes), or NULL. */
static const struct dlz_arg_spec *
spec_in(const struct dlz_arg_spec *table, const char *key, size_t len) {
	for (; table != NULL && table->name != NULL; table++) {
		if (strlen(table->name) == len && memcmp(table->name, key, len) == 0) {
			return table;
		}
	}
	return NULL;
}

/* The declaration of key: the driver's, which may replace the core's of the same name. */
static const struct dlz_arg_spec *
spec_of(const struct dlz_args *args, const char *key, size_t len) {
	const struct dlz_arg_spec *spec = spec_in(args->driver, key, len);
	return spec != NULL ? spec : spec_in(args->core, key, len);
}

static const char *
args_given(const struct dlz_args *args, const char *key) {
	for (unsigned i = 0; i < args->count; i++) {
		if (strcmp(args->keys[i], key) == 0) {
			return args->values[i];
		}
	}
	return NULL;
}

static bool
parse_long(const char *text, long *out) {
	char *end = NULL;

	errno = 0;
	*out = strtol(text, &end, 10);
	return errno == 0 && end != text && *end == '\0';
}

static bool
parse_yesno(const char *text, bool *out) {
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

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
	return false;
}

/* text is a value of spec's type (within its bounds); false (logged) if not. */
static bool
value_fits(const struct dlz_arg_spec *spec, const char *text) {
	long number;
	bool flag;

	switch (spec->type) {
	case DLZ_ARG_INT:
		if (!parse_long(text, &number) || number < spec->min || number > spec->max) {
			dlz_log(ISC_LOG_ERROR, "argument %s: expected an integer from %ld to %ld",
				spec->name, spec->min, spec->max);
			return false;
		}
		return true;
	case DLZ_ARG_YESNO:
		if (!parse_yesno(text, &flag)) {
			dlz_log(ISC_LOG_ERROR, "argument %s: expected yes or no", spec->name);
			return false;
		}
		return true;
	case DLZ_ARG_TEXT:
		return true;
	}
	return false;
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
args_add(struct dlz_args *args, unsigned position, const char *word) {
	const char *eq = strchr(word, '=');
	const struct dlz_arg_spec *spec;
	size_t key_len;

	if (eq == NULL || eq == word) {
		/* Without its '=' a word may be a value that lost its key: not shown. */
		dlz_log(ISC_LOG_ERROR, "argument %u is not key=value", position);
		return false;
	}
	key_len = (size_t)(eq - word);
	spec = spec_of(args, word, key_len);
	if (spec == NULL) {
		dlz_log(ISC_LOG_ERROR, "unknown argument '%.*s'", (int)key_len, word);
		return false;
	}
	if (args_given(args, spec->name) != NULL) {
		dlz_log(ISC_LOG_ERROR, "argument '%s' given twice", spec->name);
		return false;
	}
	if (!value_fits(spec, eq + 1)) {
		return false;
	}
	args->keys[args->count] = strdup(spec->name);
	args->values[args->count] = strdup(eq + 1);
	if (args->keys[args->count] == NULL || args->values[args->count] == NULL) {
		free(args->keys[args->count]);
		free(args->values[args->count]);
		dlz_log(ISC_LOG_ERROR, "out of memory parsing arguments");
		return false;
	}
	args->count++;
	return true;
}

/* Every required argument of table (unless replaced by the driver's) was given; else false
 * (logged with the first one missing). */
static bool
args_complete(const struct dlz_args *args, const struct dlz_arg_spec *table) {
	for (; table != NULL && table->name != NULL; table++) {
		if (table->required && spec_of(args, table->name, strlen(table->name)) == table &&
		    args_given(args, table->name) == NULL) {
			dlz_log(ISC_LOG_ERROR, "argument %s is required: %s", table->name,
				table->help);
			return false;
		}
	}
	return true;
}

struct dlz_args *
args_parse(unsigned argc, char *const argv[], const struct dlz_arg_spec *core,
	   const struct dlz_arg_spec *driver) {
	struct dlz_args *args = calloc(1, sizeof(*args));

	if (args == NULL) {
		return NULL;
	}
	args->core = core;
	args->driver = driver;
	args->keys = calloc(argc + 1, sizeof(char *));
	args->values = calloc(argc + 1, sizeof(char *));
	if (args->keys == NULL || args->values == NULL) {
		args_free(args);
		return NULL;
	}
	for (unsigned i = 0; i < argc; i++) {
		if (!args_add(args, i + 1, argv[i])) {
			args_free(args);
			return NULL;
		}
	}
	if (!args_complete(args, core) || !args_complete(args, driver)) {
		args_free(args);
		return NULL;
	}
	return args;
}

/*
 * The declaration of key as a type-argument. A call naming an argument that no table declares,
 * or as another type, is a bug of the caller, met at the driver's first start in the tests:
 * it stops the process rather than read a value nobody can give.
 */
static const struct dlz_arg_spec *
declared(const struct dlz_args *args, const char *key, enum dlz_arg_type type) {
	const struct dlz_arg_spec *spec = spec_of(args, key, strlen(key));

	if (spec == NULL || spec->type != type) {
		dlz_log(ISC_LOG_CRITICAL, "argument %s is read but not declared so", key);
		abort();
	}
	return spec;
}

const char *
dlz_arg_text(const struct dlz_args *args, const char *key) {
	declared(args, key, DLZ_ARG_TEXT);
	return args_given(args, key);
}

long
dlz_arg_int(const struct dlz_args *args, const char *key) {
	const struct dlz_arg_spec *spec = declared(args, key, DLZ_ARG_INT);
	const char *text = args_given(args, key);
	long value = spec->def;

	if (text != NULL) {
		(void)parse_long(text, &value); /* it parsed in args_add */
	}
	return value;
}

bool
dlz_arg_yes(const struct dlz_args *args, const char *key) {
	const struct dlz_arg_spec *spec = declared(args, key, DLZ_ARG_YESNO);
	const char *text = args_given(args, key);
	bool value = spec->def != 0;

	if (text != NULL) {
		(void)parse_yesno(text, &value); /* it parsed in args_add */
	}
	return value;
}

bool
dlz_arg_given(const struct dlz_args *args, const char *key) {
	if (spec_of(args, key, strlen(key)) == NULL) {
		dlz_log(ISC_LOG_CRITICAL, "argument %s is read but not declared", key);
		abort();
	}
	return args_given(args, key) != NULL;
}
