/*
 * flood: a producer that may outrun its consumer (issue 12).
 *
 * Rank 0 posts a window of W MPI_Isend of SIZE bytes to rank 1 and waits
 * for them, again and again; rank 1 posts W MPI_Irecv and waits, and may
 * sleep between windows (-s US: a slow consumer).  Nothing else paces the
 * producer: whatever transport is underneath must, or the producer's
 * memory grows.  Prints the time, each rank's peak resident memory, and,
 * under pml/rdrp, the flow-control high-water marks from MPI_T.
 *
 *   mpirun -np 2 [--mca pml ...] flood [-n WINDOWS] [-w W] [-b SIZE] [-s US]
 *                                       [-r SECONDS]
 *   -r SECONDS: run for that long, printing every second the windows done
 *               so far and each rank's current RSS (a flat RSS column means
 *               the producer is paced); with -n as well, the run ends at
 *               whichever limit comes first (the long form of issue 12:
 *               10^6 windows against a sleeping consumer).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long rss_kib(void)  /* current resident set, KiB */
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static long max_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* Every pml_rdrp_ performance variable, with a handle opened at start-up:
 * counters count from their handle's start, so they must be open before
 * the traffic. */
#define MAX_PVARS 64
static MPI_T_pvar_session pv_session;
static struct { char name[128]; MPI_T_pvar_handle h; } pv[MAX_PVARS];
static int npv;

static void pvars_open(void)
{
    int n;
    MPI_T_pvar_get_num(&n);
    MPI_T_pvar_session_create(&pv_session);
    for (int i = 0; i < n && npv < MAX_PVARS; i++) {
        char nm[256], desc[1024];
        int nl = sizeof nm, dl = sizeof desc, verb, cls, bind, ro, cont, atomic, cnt;
        MPI_Datatype dt;
        MPI_T_enum en;
        if (MPI_T_pvar_get_info(i, nm, &nl, &verb, &cls, &dt, &en, desc, &dl, &bind, &ro, &cont,
                                &atomic) != MPI_SUCCESS || strncmp(nm, "pml_rdrp_", 9))
            continue;
        if (MPI_T_pvar_handle_alloc(pv_session, i, NULL, &pv[npv].h, &cnt) != MPI_SUCCESS || cnt != 1)
            continue;
        if (!cont) MPI_T_pvar_start(pv_session, pv[npv].h);
        snprintf(pv[npv].name, sizeof pv[npv].name, "%s", nm);
        ++npv;
    }
}

static unsigned long long pvar(const char *name)
{
    unsigned long v = 0;
    for (int i = 0; i < npv; i++)
        if (!strcmp(pv[i].name, name)) MPI_T_pvar_read(pv_session, pv[i].h, &v);
    return v;
}

int main(int argc, char **argv)
{
    long windows = 2000, w = 64, size = 1024, sleep_us = 0;
    int windows_given = 0;
    double run_s = 0;
    int opt;
    while ((opt = getopt(argc, argv, "n:w:b:s:r:")) != -1) {
        switch (opt) {
        case 'n': windows = atol(optarg); windows_given = 1; break;
        case 'w': w = atol(optarg); break;
        case 'b': size = atol(optarg); break;
        case 's': sleep_us = atol(optarg); break;
        case 'r': run_s = atof(optarg); break;
        default:
            fprintf(stderr, "usage: flood [-n WINDOWS] [-w W] [-b SIZE] [-s US] [-r SECONDS]\n");
            return 2;
        }
    }
    int prov, rank, nproc;
    MPI_T_init_thread(MPI_THREAD_SINGLE, &prov);
    MPI_Init(&argc, &argv);
    pvars_open();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nproc);
    if (nproc != 2) {
        if (rank == 0) fprintf(stderr, "flood: runs on exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char *buf = malloc((size_t)(size ? size : 1) * (size_t)w);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)w);
    memset(buf, rank, (size_t)(size ? size : 1) * (size_t)w);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), next_report = t0 + 1.0;
    long done = 0;
    int stop = 0;
    while (!stop) {
        if (rank == 0) {
            for (long i = 0; i < w; i++)
                MPI_Isend(buf + i * size, (int)size, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &rq[i]);
            MPI_Waitall((int)w, rq, MPI_STATUSES_IGNORE);
        } else if (rank == 1) {
            for (long i = 0; i < w; i++)
                MPI_Irecv(buf + i * size, (int)size, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &rq[i]);
            MPI_Waitall((int)w, rq, MPI_STATUSES_IGNORE);
            if (sleep_us) {
                struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};
                nanosleep(&ts, NULL);
            }
        }
        ++done;
        if (run_s > 0) {
            /* the consumer decides when to stop and when to report; the
             * producer learns it from a flag it polls without waiting */
            double now = MPI_Wtime();
            if (rank == 1 && now >= next_report) {
                next_report += 1.0;
                printf("t=%5.1fs consumer windows %ld rss %ld KiB\n", now - t0, done, rss_kib());
                fflush(stdout);
            }
            if (rank == 1 && (now - t0 >= run_s || (windows_given && done == windows))) stop = 1;
            if (rank == 0) {
                int flag = 0;
                MPI_Iprobe(1, 10, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                if (flag) stop = 1;
                if (now >= next_report) {
                    next_report += 1.0;
                    printf("t=%5.1fs producer windows %ld rss %ld KiB\n", now - t0, done, rss_kib());
                    fflush(stdout);
                }
            }
            if (rank == 1 && stop) {
                MPI_Send(NULL, 0, MPI_BYTE, 0, 10, MPI_COMM_WORLD);
            }
        } else if (done == windows) {
            stop = 1;
        }
    }
    if (run_s > 0) {
        /* the producer may be ahead: the consumer takes what is left */
        if (rank == 0) {
            MPI_Recv(NULL, 0, MPI_BYTE, 1, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            long total = done;
            MPI_Send(&total, 1, MPI_LONG, 1, 11, MPI_COMM_WORLD);
        } else if (rank == 1) {
            /* Until the total arrives, keep taking the windows the producer
             * has started: a standard send may stay incomplete until it is
             * matched (pml rdrp beyond its send buffer does so, as MPI
             * allows), so a producer inside a window's MPI_Waitall sees the
             * stop flag only after we received that window.  Its sends are
             * all posted before its Waitall, so a window whose first
             * message is here arrives whole. */
            long total = -1;
            MPI_Request trq;
            MPI_Irecv(&total, 1, MPI_LONG, 0, 11, MPI_COMM_WORLD, &trq);
            for (;;) {
                int got = 0, more = 0;
                MPI_Test(&trq, &got, MPI_STATUS_IGNORE);
                if (got) break;
                MPI_Iprobe(0, 9, MPI_COMM_WORLD, &more, MPI_STATUS_IGNORE);
                if (!more) continue;
                for (long i = 0; i < w; i++)
                    MPI_Irecv(buf + i * size, (int)size, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &rq[i]);
                MPI_Waitall((int)w, rq, MPI_STATUSES_IGNORE);
                ++done;
            }
            for (; done < total; ++done) {
                for (long i = 0; i < w; i++)
                    MPI_Irecv(buf + i * size, (int)size, MPI_BYTE, 0, 9, MPI_COMM_WORLD, &rq[i]);
                MPI_Waitall((int)w, rq, MPI_STATUSES_IGNORE);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0;
    long rss[2] = {max_rss_kib(), 0}, all[4] = {0};
    MPI_Gather(rss, 2, MPI_LONG, all, 2, MPI_LONG, 0, MPI_COMM_WORLD);
    unsigned long long send_hwm = pvar("pml_rdrp_send_buffered_hwm");
    unsigned long long mbox_hwm = pvar("pml_rdrp_mailbox_hwm");
    unsigned long long stalls = pvar("pml_rdrp_credit_stalls");
    unsigned long long h[3] = {send_hwm, mbox_hwm, stalls}, hall[6] = {0};
    MPI_Gather(h, 3, MPI_UNSIGNED_LONG_LONG, hall, 3, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
        printf("flood windows %ld x %ld x %ld B  sleep %ld us  time %.3f s  maxrss producer %ld KiB "
               "consumer %ld KiB  send_buffered_hwm %llu  mailbox_hwm %llu  credit_stalls %llu\n",
               done, w, size, sleep_us, t, all[0], all[2], hall[0], hall[4], hall[2]);
    }
    if (getenv("FLOOD_PVARS")) {  /* every pml_rdrp_ variable of both ranks, for diagnosis */
        for (int r = 0; r < 2; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank != r) continue;
            for (int i = 0; i < npv; i++) printf("rank %d %s %llu\n", rank, pv[i].name, pvar(pv[i].name));
            fflush(stdout);
        }
    }
    MPI_T_pvar_session_free(&pv_session);
    free(buf);
    free(rq);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
