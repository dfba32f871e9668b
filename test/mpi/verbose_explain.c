/*
 * verbose_explain: the protocol table of pml_rdrp_verbose 10 and the plan
 * lines of coll_cdag_verbose 10 tell the truth.
 *
 * Run with --mca pml rdrp --mca pml_rdrp_verbose 10 and (optionally)
 * --mca coll_cdag_priority 100 --mca coll_cdag_verbose 10.  Every rank
 * sends its stderr (where the verbose output goes) to a file of its own
 * before MPI_Init, then:
 *  - pml/rdrp: rank 0 sends messages of sizes around every threshold to
 *    rank 1, each after rank 1's 0-byte message saying the receive is
 *    posted (so eager messages have credit, and each answers one of rank
 *    1's: the table is a ping-pong's, pml_rdrp_request.h eager_past_cma); for each,
 *    the MPI_T counters say which protocol and data path it really took,
 *    and the row of rank 0's table to rank 1 that covers the size must say
 *    the same.  The table appears exactly once per peer although many
 *    messages went there, and its rows cover 0.. without a gap.  Each peer
 *    connected has a "peer ...:" line saying its data path and why, and
 *    its eager limit and where it comes from (issue 21).
 *  - coll/cdag (when it runs): every compiled plan printed exactly one
 *    "plan:" line (lines == MPI_T coll_cdag_schedules_compiled), each
 *    naming its algorithm, radix, segment and window; with
 *    MPITEST_EXPECT_PLAN="Allreduce:Ring" every Allreduce plan says Ring.
 */
#include "mpitest_mpit.h"

#include <fcntl.h>
#include <unistd.h>

#define MAXLINES 4096
static char *lines[MAXLINES];
static int nlines;

static void slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[1024];
    if (!f) return;
    while (nlines < MAXLINES && fgets(buf, sizeof buf, f)) lines[nlines++] = strdup(buf);
    fclose(f);
}

static void trim(char *s)
{
    char *e;
    while (*s == ' ') memmove(s, s + 1, strlen(s));
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\n')) *--e = 0;
}

/* a row of the table to peer `to`: "... [me->to ...] LO .. HI | proto | path | first | chunk | window" */
typedef struct {
    unsigned long long lo, hi;  /* hi = ~0 for the open-ended last row */
    char proto[16], path[8];
} row_t;

static int table_rows(int me, int to, row_t *rows, int max, int *headers)
{
    char tag[32];
    int n = 0, i;
    snprintf(tag, sizeof tag, "[%d->%d ", me, to);
    *headers = 0;
    for (i = 0; i < nlines; i++) {
        char *p = strstr(lines[i], tag), *f[6], *save = NULL, copy[1024];
        int k = 0;
        if (!p) continue;
        if (strstr(p, "protocols by message size")) {
            ++*headers;
            continue;
        }
        p = strchr(p, ']');
        if (!p) continue;
        snprintf(copy, sizeof copy, "%s", p + 1);
        for (char *t = strtok_r(copy, "|", &save); t && k < 6; t = strtok_r(NULL, "|", &save)) f[k++] = t;
        if (k != 6) continue;
        for (k = 0; k < 6; k++) trim(f[k]);
        if (strcmp(f[0], "size") == 0) continue;
        if (n == max) break;
        if (sscanf(f[0], "%llu .. %llu", &rows[n].lo, &rows[n].hi) == 2) {
        } else if (sscanf(f[0], "%llu ..", &rows[n].lo) == 1) {
            rows[n].hi = ~0ull;
        } else {
            continue;
        }
        snprintf(rows[n].proto, sizeof rows[n].proto, "%s", f[1]);
        snprintf(rows[n].path, sizeof rows[n].path, "%s", f[2]);
        n++;
    }
    return n;
}

int main(int argc, char **argv)
{
    char path[64];
    int saved, fd, provided, i;
    pvar_t eager, am, rma, get, put, cma, plans;
    const char *names[] = {"pml_rdrp_eager_sent", "pml_rdrp_rndv_am", "pml_rdrp_rndv_rma", "pml_rdrp_rndv_get",
                           "pml_rdrp_rndv_put", "pml_rdrp_rndv_cma"};
    pvar_t *pv[] = {&eager, &am, &rma, &get, &put, &cma};
    long long eager_limit = 0, first_chunk = 0, rma_min = 0, get_limit = 0, shm_eager = 0;

    snprintf(path, sizeof path, "/tmp/verbose_explain.%d.err", (int)getpid());
    saved = dup(2);
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 2) < 0) {
        perror("verbose_explain: redirecting stderr");
        return 2;
    }
    close(fd);

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "verbose_explain");
    for (i = 0; i < 6; i++) pvar_open(pv[i], names[i]);
    pvar_open(&plans, "coll_cdag_schedules_compiled");
    cvar_int("pml_rdrp_eager_limit", &eager_limit);
    cvar_int("pml_rdrp_shm_eager_limit", &shm_eager);
    cvar_int("pml_rdrp_rndv_first_chunk", &first_chunk);
    cvar_int("pml_rdrp_auto_rma_min", &rma_min);
    cvar_int("pml_rdrp_get_limit", &get_limit);

    /* ---------------------------------------------------------- pml/rdrp */
    const int is_rdrp = mt_pml_is("rdrp");
    unsigned long long sizes[40];
    int ns = 0;
    const unsigned long long fixed[] = {0, 1, 100, 65536, 65537, 1048576, 4194307};
    for (i = 0; i < (int)(sizeof fixed / sizeof fixed[0]); i++) sizes[ns++] = fixed[i];
    const long long around[] = {eager_limit, first_chunk, rma_min, get_limit, shm_eager};
    for (i = 0; i < 5; i++) {
        if (around[i] <= 0 || around[i] > 16 * 1048576) continue;
        sizes[ns++] = (unsigned long long)around[i];
        sizes[ns++] = (unsigned long long)around[i] + 1;
    }
    char got[32][24];  /* rank 0: "proto path" each message really took */
    unsigned char *buf = mt_malloc(16 * 1048576 + 2);
    mt_section("pml sends");
    for (i = 0; i < ns; i++) {
        size_t n = (size_t)sizes[i];
        got[i][0] = 0;
        if (mt_rank == 1) {
            MPI_Request rq;
            CHECK_MPI(MPI_Irecv(buf, (int)n, MPI_BYTE, 0, i, MPI_COMM_WORLD, &rq));
            CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 1000 + i, MPI_COMM_WORLD));  /* posted */
            CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
            CHECK_BUF(buf, n, 0, i, 0, "size %zu", n);
        } else if (mt_rank == 0) {
            unsigned long before[6], after[6];
            int k;
            mt_fill(buf, n, 0, i, 0);
            CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, 1, 1000 + i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (k = 0; k < 6; k++) before[k] = pvar_read(pv[k]);
            CHECK_MPI(MPI_Send(buf, (int)n, MPI_BYTE, 1, i, MPI_COMM_WORLD));
            for (k = 0; k < 6; k++) after[k] = pvar_read(pv[k]);
            if (after[0] > before[0]) snprintf(got[i], sizeof got[i], "eager am");
            else if (after[3] > before[3]) snprintf(got[i], sizeof got[i], "get rma");
            else if (after[4] > before[4]) snprintf(got[i], sizeof got[i], "put rma");
            else if (after[2] > before[2]) snprintf(got[i], sizeof got[i], "rdrp rma");
            else if (after[5] > before[5]) snprintf(got[i], sizeof got[i], "rdrp cma");
            else if (after[1] > before[1]) snprintf(got[i], sizeof got[i], "rdrp am");
        }
    }

    /* ---------------------------------------------------------- coll/cdag */
    mt_section("collectives");
    unsigned long plans0 = pvar_read(&plans);
    const int counts[] = {1, 1000, 100000};
    int *a = mt_malloc(100000 * sizeof(int)), *b = mt_malloc(100000 * sizeof(int));
    for (i = 0; i < 100000; i++) a[i] = i + mt_rank;
    for (int rep = 0; rep < 3; rep++) {
        for (i = 0; i < 3; i++) {
            CHECK_MPI(MPI_Allreduce(a, b, counts[i], MPI_INT, MPI_SUM, MPI_COMM_WORLD));
            CHECK(b[counts[i] - 1] == mt_size * (counts[i] - 1) + mt_size * (mt_size - 1) / 2,
                  "allreduce count %d: got %d", counts[i], b[counts[i] - 1]);
        }
        CHECK_MPI(MPI_Bcast(b, 4096, MPI_INT, 0, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    unsigned long compiled = pvar_read(&plans);  /* all plans so far: every one printed a line */
    (void)plans0;

    /* ---------------------------------------------------------- the output */
    mt_section("read the verbose output");
    fflush(stderr);
    dup2(saved, 2);  /* failures below go to the real stderr */
    close(saved);
    slurp(path);
    unlink(path);
    /* checks that failed while stderr went to the file: show them */
    for (i = 0; i < nlines; i++)
        if (strstr(lines[i], "FAIL") || strstr(lines[i], "WATCHDOG")) fputs(lines[i], stderr);

    if (is_rdrp) {
        row_t rows[64];
        int peer, headers, nr;
        for (peer = 0; peer < mt_size; peer++) {
            nr = table_rows(mt_rank, peer, rows, 64, &headers);
            /* every rank talked to its ring neighbours and in the collectives;
             * rank 0 certainly to rank 1 */
            if (headers == 0 && !(mt_rank == 0 && peer == 1)) continue;
            CHECK(headers == 1, "rank %d: table to peer %d printed %d times (want once)", mt_rank, peer, headers);
            CHECK(nr > 0, "rank %d: table to peer %d has no rows", mt_rank, peer);
            if (nr == 0) continue;
            CHECK(rows[0].lo == 0, "table to %d starts at %llu", peer, rows[0].lo);
            for (i = 1; i < nr; i++)
                CHECK(rows[i].lo == rows[i - 1].hi + 1, "table to %d: row %d starts at %llu after %llu", peer, i,
                      rows[i].lo, rows[i - 1].hi);
            CHECK(rows[nr - 1].hi == ~0ull, "table to %d: last row is not open-ended", peer);
            CHECK(strcmp(rows[0].proto, "eager") == 0 || eager_limit == 0, "table to %d: 0 bytes go by %s",
                  peer, rows[0].proto);
        }
        int tables = 0, reasons = 0;
        for (peer = 0; peer < mt_size; peer++) {
            table_rows(mt_rank, peer, rows, 64, &headers);
            tables += headers;
        }
        for (i = 0; i < nlines; i++) {
            const char *p = strstr(lines[i], "pml:rdrp: peer ");
            if (p && strstr(p, "rendezvous data by ")) {
                ++reasons;
                CHECK(strstr(p, " because ") && strstr(p, "; eager limit "),
                      "rank %d: a peer line without its reason or eager limit: %s", mt_rank, p);
            }
        }
        CHECK(reasons >= tables, "rank %d: %d peer lines (data path and why) for %d peers with a table", mt_rank,
              reasons, tables);
        if (mt_rank == 0) {
            nr = table_rows(0, 1, rows, 64, &headers);
            for (i = 0; i < ns; i++) {
                int r;
                char want[24] = "";
                for (r = 0; r < nr; r++)
                    if (sizes[i] >= rows[r].lo && sizes[i] <= rows[r].hi)
                        snprintf(want, sizeof want, "%s %s", rows[r].proto, rows[r].path);
                CHECK(got[i][0] != 0, "size %llu: no MPI_T counter moved", sizes[i]);
                CHECK(strcmp(want, got[i]) == 0, "size %llu: the table says '%s', the message went by '%s'",
                      sizes[i], want, got[i]);
                if (mt_verbose) fprintf(stderr, "size %llu: table '%s', sent '%s'\n", sizes[i], want, got[i]);
            }
        }
    }

    if (mt_failures && mt_verbose)
        for (i = 0; i < nlines; i++) fputs(lines[i], stderr);

    long long cdag_priority = -1;
    cvar_int("coll_cdag_priority", &cdag_priority);
    if (plans.ok && cdag_priority > 30) {  /* coll/cdag runs the collectives */
        const char *expect = getenv("MPITEST_EXPECT_PLAN");  /* "Coll:Algo" */
        char ecoll[32] = "", ealgo[32] = "";
        unsigned long nplan = 0, nexpect = 0;
        if (expect) sscanf(expect, "%31[^:]:%31s", ecoll, ealgo);
        for (i = 0; i < nlines; i++) {
            char *p = strstr(lines[i], "coll:cdag: plan: ");
            char want[64];
            if (!p) continue;
            nplan++;
            CHECK(strstr(p, "algorithm ") && strstr(p, ", radix ") && strstr(p, ", segment ") &&
                      strstr(p, ", window ") && strstr(p, " vertices"),
                  "plan line lacks a field: %s", p);
            snprintf(want, sizeof want, ": %s ", ecoll);
            if (ecoll[0] && strstr(p, want)) {
                char walgo[64];
                snprintf(walgo, sizeof walgo, "algorithm %s,", ealgo);
                nexpect++;
                CHECK(strstr(p, walgo) != NULL, "want %s for %s: %s", walgo, ecoll, p);
            }
        }
        CHECK(compiled > 0, "coll/cdag compiled no plan (is it selected?)");
        CHECK(nplan == compiled, "rank %d: %lu plan lines for %lu compiled plans", mt_rank, nplan, compiled);
        if (ecoll[0]) CHECK(nexpect > 0, "no %s plan printed", ecoll);
    }

    for (i = 0; i < 6; i++) pvar_close(pv[i]);
    pvar_close(&plans);
    MPI_T_finalize();
    free(buf);
    free(a);
    free(b);
    return mt_finalize();
}
