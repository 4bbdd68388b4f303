/* libconfig 1.5 reads an integer literal without the L suffix into 32 bits and silently
 * wraps it (hidden = [4294967312] reads as 16), and clamps one past 64 bits (with L) to
 * INT64_MAX. Every reader of libconfig files (the job config, profiles) asks here, with the
 * setting's file and line, whether the value it got is such a lost literal, so that the
 * error can quote what the user wrote instead of using a different number. */
#ifndef HT_CORE_INTLIT_H
#define HT_CORE_INTLIT_H

#include <stddef.h>

/* Scans line `line` of `file` for an integer literal that libconfig could not hold: without
 * L, outside 32 bits and wrapping to `got`; with L (is64), outside 64 bits and clamped to
 * `got`. With name (a scalar setting), only the literal after "name =" counts; with NULL (an
 * array element), any literal on the line outside strings and comments. Returns 1 and copies
 * the literal's text into text (n bytes) when one is found, else 0 (also when the file cannot
 * be read). */
int ht_int_literal_lost(const char *file, int line, const char *name, long long got, int is64,
                        char *text, size_t n);

/* The same within one line of text (a --set value). */
int ht_int_literal_lost_in(const char *line, const char *name, long long got, int is64,
                           char *text, size_t n);

/* The same for a literal given as a whole string (a --set value): 1 when s is an integer
 * literal (optional L) beyond 64 bits. */
int ht_int_text_beyond64(const char *s);

#endif
