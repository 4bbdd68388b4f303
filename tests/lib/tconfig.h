/* Config loading for the unit tests of src/config. */
#ifndef HT_TESTS_TCONFIG_H
#define HT_TESTS_TCONFIG_H

#include "config/config.h"

/* ht_config_load with the overrides given as a NULL-terminated list (at most 16), the error
 * state cleared first. */
int cfg_load(ht_config *c, const char *path, ...);
/* The load failed with HT_EINPUT and the message holds a and each of b, c that is not NULL;
 * prints the message if not. */
void cfg_refused(int rc, const char *what, const char *a, const char *b, const char *c);

#endif
