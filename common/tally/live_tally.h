/*
 * common/tally: the finalize leak check of every component.
 *
 * At finalize, after its own draining and cleanup, a component fills a
 * tally with the objects still alive (requests, unreceived messages,
 * fragments, control messages, registrations, UCX endpoints, rkeys and
 * requests), each named and marked as held by the application (a request
 * it never freed, a message it never received: MPI leaves those to the
 * program) or by us only (any of those left is our bug).  The tally says
 * what the `<component>_finalize_check` level asks of it and formats the
 * non-zero counts for the component's "finalize-leak" help message.
 * No Open MPI types; the counters themselves live in the components.
 */
#ifndef RDRP_LIVE_TALLY_H
#define RDRP_LIVE_TALLY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDRP_TALLY_MAX 16

typedef enum { RDRP_TALLY_OURS = 0, RDRP_TALLY_APP = 1 } rdrp_tally_owner_t;

typedef struct rdrp_tally_item {
    const char *name;  /* static string, e.g. "control messages" */
    uint64_t    count;
    int         owner; /* rdrp_tally_owner_t */
} rdrp_tally_item_t;

typedef struct rdrp_tally {
    rdrp_tally_item_t items[RDRP_TALLY_MAX];
    int               n;
    int               overflow;  /* more adds than RDRP_TALLY_MAX: counted as ours */
} rdrp_tally_t;

/* <prefix>_finalize_check levels */
#define RDRP_FINALIZE_CHECK_OFF    0
#define RDRP_FINALIZE_CHECK_REPORT 1  /* one help message when anything is left */
#define RDRP_FINALIZE_CHECK_STRICT 2  /* ... and the component's finalize step fails */

void rdrp_tally_init(rdrp_tally_t *t);
/* Record a count (zero counts are recorded too and never reported). */
void rdrp_tally_add(rdrp_tally_t *t, const char *name, uint64_t count, rdrp_tally_owner_t owner);
/* Sum of the non-zero counts of one owner (or of both with owner < 0). */
uint64_t rdrp_tally_sum(const rdrp_tally_t *t, int owner);

/* What a check at `level` does with t: 0 nothing, 1 report, 2 report and
 * fail (only at RDRP_FINALIZE_CHECK_STRICT and when something is left). */
int rdrp_tally_verdict(const rdrp_tally_t *t, int level);

/* The non-zero counts of one owner as "name N, name N" (empty string when
 * none), NUL-terminated and truncated to len.  Returns the length the full
 * text would need (like snprintf). */
size_t rdrp_tally_format(const rdrp_tally_t *t, int owner, char *buf, size_t len);

/* The report's one line, greppable and exact (test/mpi/leak_* compare it):
 *   "leak-check <component> rank <R>: application: <counts|none>; <component>: <counts|none>"
 * Returns the length the full text would need. */
size_t rdrp_tally_report_line(const rdrp_tally_t *t, const char *component, int rank, char *buf,
                              size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RDRP_LIVE_TALLY_H */
