/*
 * Record text as an update stores and compares it (common/rdtext.c), for the tests: each line
 * "TYPE<TAB>TEXT" of stdin gives one line of stdout, TEXT in the stored form
 * (rdata_store_form), or with "--match ZONE" in the match form of that zone's rows
 * (rdata_match_form). Built with AddressSanitizer and UndefinedBehaviorSanitizer (make -C
 * drivers tools), so that any bad access or overflow in the normaliser aborts the run instead
 * of printing a wrong line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/core.h"

int
main(int argc, char *argv[]) {
	const char *zone = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	if (argc == 3 && strcmp(argv[1], "--match") == 0) {
		zone = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: rdtext_form [--match ZONE] < TYPE<TAB>TEXT lines\n");
		return 2;
	}
	while ((len = getline(&line, &cap, stdin)) != -1) {
		char *tab, *form;

		if (len > 0 && line[len - 1] == '\n') {
			line[len - 1] = '\0';
		}
		tab = strchr(line, '\t');
		if (tab == NULL) {
			fprintf(stderr, "rdtext_form: a line without TYPE<TAB>TEXT\n");
			return 2;
		}
		*tab = '\0';
		form = zone != NULL ? rdata_match_form(zone, line, tab + 1)
				    : rdata_store_form(line, tab + 1);
		if (form == NULL) {
			fprintf(stderr, "rdtext_form: out of memory\n");
			return 1;
		}
		printf("%s\n", form);
		free(form);
	}
	free(line);
	return 0;
}
