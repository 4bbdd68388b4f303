/* Every number written in a libconfig file, as written. libconfig 1.5 reads an integer
 * literal without the L suffix into 32 bits and silently wraps it (hidden = [4294967312]
 * reads as 16, 0xFFFFFFFF as -1), clamps one past 64 bits (with L) to INT64_MAX, and reads
 * 1e999 as inf and 1e-400 as 0. Its settings keep no trace of what was written, and their
 * line is the key's, not the digits' (a value on the next line, an array over several
 * lines, an @included file).
 *
 * So every reader of a libconfig file (the job config and its --set values, hetprof
 * profiles, hetsim cluster descriptions, tuning files) lexes the same text again here, as
 * libconfig's scanner does (comments, strings, names, @include), collects every numeric
 * literal with its own file and line, and binds each numeric setting, in document order, to
 * its literal. A literal libconfig could not hold is then an error quoting what was written,
 * at the line the digits stand on, whatever position the number has in the file. */
#ifndef HT_CORE_INTLIT_H
#define HT_CORE_INTLIT_H

#include <libconfig.h>
#include <stddef.h>

enum { HT_LIT_INT, HT_LIT_INT64, HT_LIT_FLOAT };

typedef struct ht_numlit {
    const char *file; /* the file the digits are in, as opened (main file: as given) */
    int line;         /* their line */
    int kind;         /* HT_LIT_*: what libconfig makes of it (hex: INT, hex with L: INT64) */
    int lost;         /* 1: libconfig holds another value than the one written */
    int beyond64;     /* an integer outside 64 bits (signed; hex: unsigned without L) */
    long long ival;   /* libconfig 1.5's value (INT, INT64) */
    long long tval;   /* the value written, unless beyond64 */
    double fval;      /* libconfig's value (FLOAT) */
    char text[44];    /* as written ("..." when longer) */
    const config_setting_t *setting; /* what ht_numlits_bind bound it to, or NULL */
} ht_numlit;

typedef struct ht_numlits {
    ht_numlit *v;
    int n, cap;
    char **files; /* owned names, one per file read */
    int nfiles;
    int bound; /* ht_numlits_bind matched every numeric setting to its literal */
} ht_numlits;

/* Lexes path (and, depth-first, the files it @includes: relative to incdir when it is
 * not NULL or "", else as written) and appends every numeric literal. 0, or -1 when a file
 * cannot be read (the literals found so far stay). */
int ht_numlits_scan_file(ht_numlits *L, const char *path, const char *incdir);
/* The same for text in memory (a --set value), its literals named `name`, line 1 on. */
void ht_numlits_scan_text(ht_numlits *L, const char *text, const char *name);
void ht_numlits_free(ht_numlits *L);

/* Binds every INT, INT64 and FLOAT setting under root, in document order, to its literal
 * (the literal's setting; with hooks, also the setting's hook, so that L must outlive the
 * config). Only when the counts, kinds and values all agree (L->bound = 1); otherwise
 * nothing is bound. Returns L->bound. */
int ht_numlits_bind(ht_numlits *L, config_setting_t *root, int hooks);
/* The literal bound to s, or NULL. */
const ht_numlit *ht_numlit_of(const config_setting_t *s);
/* The first literal libconfig lost, or NULL. */
const ht_numlit *ht_numlits_first_lost(const ht_numlits *L);
/* What happened to a lost literal and what to write instead, e.g. "found 4294967312,
 * which libconfig reads as a 32-bit integer (16); expected an integer from -2147483648 to
 * 2147483647, or 4294967312L for 64 bits". */
void ht_numlit_why(const ht_numlit *l, char *buf, size_t n);
/* The setting's place, as the readers name keys: "devices[0].samples_per_s[1].batch". */
void ht_cfg_setting_path(const config_setting_t *s, char *buf, size_t n);

#endif
