/* Internal to src/config: the one table that describes every configuration key (path,
 * type, default, limits, where it lives in ht_config, what it means), and the small
 * helpers the loader, the schema printer and the config writer share. */
#ifndef HT_CONFIG_SCHEMA_H
#define HT_CONFIG_SCHEMA_H

#include <stddef.h>

typedef enum {
    HT_CK_INT,  /* int; libconfig int or int64 that fits */
    HT_CK_U64,  /* uint64_t; libconfig int or int64 >= 0 (write 42L past 2^31) */
    HT_CK_NUM,  /* double; libconfig float, or an int literal */
    HT_CK_BOOL, /* int 0/1; libconfig true/false */
    HT_CK_STR,  /* char[size]; longer values are errors, never truncated */
    HT_CK_INTS, /* int[size / sizeof(int)] plus a count at off_count; array or list */
    HT_CK_NUMS, /* double[size / sizeof(double)] plus a count at off_count; array or list */
    HT_CK_STRS, /* char[max][size / max] plus a count at off_count; array or list; each
                   element checked by ht_ckey_check_elem */
    HT_CK_ENUM, /* an enum (int) parsed from a string: the index of its name in choices plus
                   min (config/modes.h's tables; pipe.schedule's "none" is -1) */
} ht_ckind;

/* Flags: required, and the range [min, max] with each bound optional and either
 * inclusive (GE/LE) or exclusive (GT/LT). For HT_CK_INTS and HT_CK_NUMS the range is per element. */
enum {
    HT_CF_REQ = 1 << 0,
    HT_CF_GE = 1 << 1,
    HT_CF_GT = 1 << 2,
    HT_CF_LE = 1 << 3,
    HT_CF_LT = 1 << 4,
};

typedef struct {
    const char *path; /* "group.key" */
    ht_ckind kind;
    int flags;                  /* HT_CF_* */
    const char *def;            /* default in libconfig syntax ("\"mlp\"", "[128]"); NULL: none */
    double min, max;            /* bounds, used when the GE/GT/LE/LT flags say so */
    const char *const *choices; /* strings: NULL-terminated allowed values, or NULL (free text) */
    size_t off, size;           /* field offset and size in ht_config */
    size_t off_count;           /* HT_CK_INTS: offset of the int element count */
    const char *doc;            /* one line */
} ht_ckey;

extern const ht_ckey ht_config_keys[];
extern const int ht_config_nkeys;
extern const char *const ht_config_groups[]; /* NULL-terminated, in table order */

/* HT_CK_STRS: bytes per element. */
size_t ht_ckey_elem(const ht_ckey *k);
/* HT_CK_STRS: checks one element against the key's grammar (model.layers: nn/layer_spec.h);
 * HT_OK, or HT_EINPUT with what was expected written into err. */
int ht_ckey_check_elem(const ht_ckey *k, const char *value, char *err, size_t n);

/* The key with this "group.key" path, or -1. */
int ht_ckey_find(const char *path);
/* "integer", "number", "boolean", "string", "int array", "string array". */
const char *ht_ckey_type_name(ht_ckind kind);
/* What a valid value looks like, e.g. "a number > 0", "an integer >= 0 and < 10",
 * "one of \"sgd\", \"adamw\"". For HT_CK_INTS, describes one element. */
void ht_ckey_expect(const ht_ckey *k, char *buf, size_t n);
/* A double in the fewest digits that read back to the same value (%.15g or %.17g). */
void ht_fmt_num(double v, char *buf, size_t n);
/* Optimal-string-alignment edit distance (a swap of neighbours counts 1). */
int ht_edit_distance(const char *a, const char *b);
/* The candidate closest to name, or NULL when none is close enough to suggest. */
const char *ht_closest(const char *name, const char *const *cand, int ncand);
/* Best "group.key" for an unknown key written as group.leaf (group may be "" at top
 * level): close in full, or the same leaf in another group. NULL if nothing is close. */
const char *ht_closest_key(const char *group, const char *leaf);

/* The cross-key rules of the modes without the world size (config/crosskey.c; those with it
 * are ht_config_check_world's): HT_OK, or HT_EINPUT with *key the key to locate and msg the
 * message without its place. */
struct ht_config;
int ht_config_mode_rules(const struct ht_config *c, const char **key, char *msg, size_t n);

#endif
