/*
 * common/params: range and word checks of MCA parameter values, shared by
 * pml/rdrp, btl/credit and coll/cdag (no Open MPI type in this interface).
 *
 * Each component lists its parameters in a table of rules (name, where the
 * value is stored, the valid range or words) and calls rdrp_param_check at
 * open time, before any traffic.  A value is refused when
 *   - the text the user gave (the OMPI_MCA_<name> environment variable:
 *     mpirun passes --mca settings that way) is not a number where a
 *     number belongs, or not one of the words of a word parameter (Open
 *     MPI itself refuses a word for an integer variable, but then goes on
 *     with the default and strtod() reads any word as 0), or
 *   - the value stored (from any source, including parameter files) lies
 *     outside the range.
 * The caller turns the first refusal into one opal_show_help message
 * naming the parameter, the value and the valid range, and fails the job.
 */
#ifndef RDRP_PARAM_CHECK_H
#define RDRP_PARAM_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    RDRP_PARAM_INT,     /* int, range [lo, hi] */
    RDRP_PARAM_ULL,     /* unsigned long long, range [ulo, uhi] */
    RDRP_PARAM_U32,     /* unsigned int (uint32_t), range [ulo, uhi] */
    RDRP_PARAM_SIZE,    /* size_t, range [ulo, uhi] */
    RDRP_PARAM_DOUBLE,  /* double, range [lo, hi] */
    RDRP_PARAM_ENUM,    /* int stored by Open MPI's enumerator: words (or their numbers) in `words` */
    RDRP_PARAM_WORD,    /* char *: one of `words` */
    RDRP_PARAM_WORDS,   /* char *: a comma list of `words` */
    RDRP_PARAM_FLAGS    /* unsigned int bit set (Open MPI flag enumerator): every bit in uhi, the bits
                         * of ulo all set; words "1=send|2=put|4=get" are the bits allowed */
} rdrp_param_kind_t;

typedef struct {
    const char *name;   /* full MCA name, e.g. "pml_rdrp_chunk_size" */
    rdrp_param_kind_t kind;
    const void *value;  /* int *, unsigned long long *, size_t *, double * or char ** */
    double lo, hi;      /* INT, DOUBLE */
    unsigned long long ulo, uhi;  /* ULL, SIZE */
    const char *words;  /* ENUM, WORD, WORDS: "auto|rdrp|get|put"; for ENUM "0=static|1=dynamic" */
} rdrp_param_rule_t;

/* What rdrp_param_check found wrong with a value, as text for the message. */
typedef struct {
    const char *name;   /* the rule's name */
    char value[128];    /* the value as the user gave it (or as stored) */
    char valid[256];    /* the valid range or words */
} rdrp_param_error_t;

/* Checks rules[0..n) in order.  env_prefix is prepended to a rule's name to
 * find the text the user gave ("OMPI_MCA_"; NULL: only stored values are
 * checked).  Returns the index of the first refused rule, with *err filled,
 * or -1 when every value is valid. */
int rdrp_param_check(const rdrp_param_rule_t *rules, int n, const char *env_prefix,
                     rdrp_param_error_t *err);

/* The valid range or words of one rule as text ("1..1048576", "auto | get"),
 * the form the help strings and messages use. */
void rdrp_param_describe(const rdrp_param_rule_t *rule, char *buf, size_t len);

/* help followed by " (valid: <range>)" when rules[0..n) has a rule named
 * prefix + name (the parameter's help string at registration: the range
 * is documented where it is enforced, from the same table).  Returns buf. */
const char *rdrp_param_help(const rdrp_param_rule_t *rules, int n, const char *prefix,
                            const char *name, const char *help, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
