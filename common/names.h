/*
 * The rule for the names people give organisations, projects and users: one
 * rule, so the CLI's early usage error and the API's 400 never disagree.
 */
#ifndef ISC_COMMON_NAMES_H
#define ISC_COMMON_NAMES_H

/* 1..64 printable characters, no spaces, slashes, backslashes or commas (CSV cells and
 * paths stay unambiguous). NULL is not a valid name. */
int isc_name_valid(const char *name);

#endif
