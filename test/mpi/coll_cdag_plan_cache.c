/*
 * coll_cdag_plan_cache: coll/cdag keeps compiled schedules of v-variant
 * calls keyed by their counts and displacements, and the cache stays
 * bounded however many distinct count vectors an application uses.
 *
 * On a dup of COMM_WORLD: allgatherv with max(2 x C + 5, 40) distinct
 * count vectors, then alltoallv with as many (C: the parameter
 * coll_cdag_v_plan_cache, read through MPI_T): after every call the plans
 * the cache holds (MPI_T coll_cdag_cached_plans, a level) grew by at most
 * C, and by exactly C once more than C distinct vectors ran, and
 * coll_cdag_plans_evicted counts the rest.  The last C allgatherv vectors
 * called again compile nothing (coll_cdag_schedules_compiled), the first
 * (long evicted) compiles again.  Freeing the communicator gives its
 * plans back.  Every result is checked.
 *
 * Skipped (passes) when coll/cdag is not the component in use.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

static int rank, size;
static MPI_Comm comm;
static int *sb, *rb;
static int counts[64], displs[64], scounts[64], sdispls[64], rcounts[64], rdispls[64];

static int val(int from, int to, int i, int iter) { return from * 1000003 + to * 10007 + i * 3 + iter; }

/* vector number v: every one different from every other */
static void agv_layout(int v)
{
    int at = 0;
    for (int j = 0; j < size; j++) {
        counts[j] = 1 + v + (j * 3) % 7;
        displs[j] = at;
        at += counts[j] + 1;
    }
}

static void allgatherv(int v, int iter)
{
    agv_layout(v);
    for (int i = 0; i < counts[rank]; i++) sb[i] = val(rank, 0, i, iter);
    CHECK_MPI(MPI_Allgatherv(sb, counts[rank], MPI_INT, rb, counts, displs, MPI_INT, comm));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < counts[j]; i++)
            if (rb[displs[j] + i] != val(j, 0, i, iter)) {
                CHECK(0, "allgatherv vector %d: rank %d's element %d is %d, expected %d", v, j, i,
                      rb[displs[j] + i], val(j, 0, i, iter));
                return;
            }
}

/* what a sends to b in vector v */
static int a2a(int v, int a, int b) { return 1 + v + (a + 2 * b) % 3; }

static void alltoallv(int v, int iter)
{
    int s = 0, r = 0;
    for (int j = 0; j < size; j++) {
        scounts[j] = a2a(v, rank, j);
        sdispls[j] = s;
        s += scounts[j] + 2;
        rcounts[j] = a2a(v, j, rank);
        rdispls[j] = r;
        r += rcounts[j] + 1;
    }
    for (int j = 0; j < size; j++)
        for (int i = 0; i < scounts[j]; i++) sb[sdispls[j] + i] = val(rank, j, i, iter);
    CHECK_MPI(MPI_Alltoallv(sb, scounts, sdispls, MPI_INT, rb, rcounts, rdispls, MPI_INT, comm));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < rcounts[j]; i++)
            if (rb[rdispls[j] + i] != val(j, rank, i, iter)) {
                CHECK(0, "alltoallv vector %d: rank %d's element %d is %d, expected %d", v, j, i,
                      rb[rdispls[j] + i], val(j, rank, i, iter));
                return;
            }
}

int main(int argc, char **argv)
{
    int provided;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "coll_cdag_plan_cache");
    rank = mt_rank;
    size = mt_size;
    pvar_t cached, compiled, evicted, runs;
    pvar_open(&cached, "coll_cdag_cached_plans");
    pvar_open(&compiled, "coll_cdag_schedules_compiled");
    pvar_open(&evicted, "coll_cdag_plans_evicted");
    pvar_open(&runs, "coll_cdag_runs");
    long long cap = -1;
    if (cached.ok && compiled.ok && evicted.ok && runs.ok && cvar_int("coll_cdag_v_plan_cache", &cap) &&
        size <= 64) {
        /* more than twice the cache, and more than the 16 finished
         * executors a communicator keeps (they match their call too, so
         * vector 0 must have left them before it is called again) */
        int nvec = 2 * (int)cap + 5 > 40 ? 2 * (int)cap + 5 : 40;
        size_t n = (size_t)size * (size_t)(nvec + 16) * 2;
        sb = mt_malloc(n * sizeof(int));
        rb = mt_malloc(n * sizeof(int));
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
        unsigned long base = pvar_read(&cached), ev0 = pvar_read(&evicted), r0 = pvar_read(&runs);

        mt_section("allgatherv, distinct vectors");
        for (int v = 0; v < nvec; v++) {
            allgatherv(v, v);
            unsigned long held = pvar_read(&cached) - base;
            if (!CHECK(held <= (unsigned long)cap, "after %d allgatherv vectors the cache holds %lu plans (cap %lld)",
                       v + 1, held, cap))
                break;
        }
        if (pvar_read(&runs) != r0) {  /* coll/cdag took them */
            CHECK_EQ(pvar_read(&cached) - base, cap, "plans held after %d distinct vectors", nvec);
            CHECK_EQ(pvar_read(&evicted) - ev0, nvec - cap, "plans evicted after %d distinct vectors", nvec);

            mt_section("allgatherv, the last cap vectors again");
            unsigned long c0 = pvar_read(&compiled);
            for (int v = nvec - (int)cap; v < nvec; v++) allgatherv(v, 1000 + v);
            CHECK_EQ(pvar_read(&compiled) - c0, 0, "schedules compiled calling the %lld cached vectors again", cap);

            mt_section("allgatherv, an evicted vector again");
            c0 = pvar_read(&compiled);
            allgatherv(0, 2000);
            CHECK_EQ(pvar_read(&compiled) - c0, 1, "schedules compiled for an evicted vector");

            mt_section("alltoallv, distinct vectors");
            for (int v = 0; v < nvec; v++) {
                alltoallv(v, 3000 + v);
                unsigned long held = pvar_read(&cached) - base;
                if (!CHECK(held <= (unsigned long)cap,
                           "after %d alltoallv vectors the cache holds %lu plans (cap %lld)", v + 1, held, cap))
                    break;
            }
            mt_section("free");
            CHECK_MPI(MPI_Comm_free(&comm));
            CHECK_EQ(pvar_read(&cached), base, "plans held after the communicator was freed");
        } else {
            CHECK_MPI(MPI_Comm_free(&comm));
        }
        free(sb);
        free(rb);
    } else if (rank == 0) {
        printf("coll_cdag_plan_cache: coll/cdag's MPI_T variables are not there: nothing to check\n");
    }
    pvar_close(&cached);
    pvar_close(&compiled);
    pvar_close(&evicted);
    pvar_close(&runs);
    MPI_T_finalize();
    return mt_finalize();
}
