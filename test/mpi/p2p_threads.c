/*
 * p2p_threads: MPI_THREAD_MULTIPLE.
 *  - MPI_Init_thread(MPI_THREAD_MULTIPLE) must provide MPI_THREAD_MULTIPLE
 *    (a lower level is a FAILURE, not a skip);
 *  - 4 threads per rank, each on its own dup'd communicator: ring
 *    Isend/Irecv, MPI_Sendrecv and blocking Send/Recv, small and large;
 *  - 4 threads sharing one communicator, thread t uses tag t: all-pairs
 *    traffic with specific-source and ANY_SOURCE receives;
 *  - threads doing MPI_Mprobe/MPI_Mrecv concurrently on one communicator;
 *  - concurrent self messages;
 *  - one thread blocked in MPI_Recv while another thread of the same
 *    process does the sends that eventually satisfy it;
 *  - all threads send to all peers and receive with ANY_SOURCE/ANY_TAG on one
 *    communicator: every message is received exactly once by some thread.
 * All data checked (pattern depends on source, thread/tag and iteration).
 */
#include "mpitest.h"

#define NT 4

static int rank, size, left, right;
static MPI_Comm own[NT], shared;
static const int tsz[] = {0, 1, 100, 4097, 65537, 1048576 + 3};
#define NTSZ ((int)(sizeof(tsz) / sizeof(tsz[0])))

typedef struct {
    int t;
} targ;

static void *own_comm_thread(void *p)
{
    int t = ((targ *)p)->t;
    MPI_Comm c = own[t];
    char *sb = mt_malloc(1048576 + 3), *rb = mt_malloc(1048576 + 3);
    for (int it = 0; it < 3; it++)
        for (int i = 0; i < NTSZ; i++) {
            int n = tsz[i], iter = it * 100 + i;
            MPI_Request rq[2];
            MPI_Status st[2];
            /* Isend/Irecv ring; same tag (0) on every thread's communicator */
            mt_fill(sb, n, rank, t, iter);
            CHECK_MPI(MPI_Irecv(rb, n, MPI_BYTE, left, 0, c, &rq[0]));
            CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, right, 0, c, &rq[1]));
            CHECK_MPI(MPI_Waitall(2, rq, st));
            CHECK_STATUS(&st[0], left, 0, n, "thread %d own comm ring size %d", t, n);
            CHECK_BUF(rb, n, left, t, iter, "thread %d own comm ring size %d", t, n);
            /* Sendrecv the other way round */
            mt_fill(sb, n, rank, t, iter + 50);
            CHECK_MPI(MPI_Sendrecv(sb, n, MPI_BYTE, left, 1, rb, n, MPI_BYTE, right, 1, c, &st[0]));
            CHECK_STATUS(&st[0], right, 1, n, "thread %d own comm Sendrecv size %d", t, n);
            CHECK_BUF(rb, n, right, t, iter + 50, "thread %d own comm Sendrecv size %d", t, n);
            /* blocking Send/Recv, even ranks send first */
            mt_fill(sb, n, rank, t, iter + 70);
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Send(sb, n, MPI_BYTE, right, 2, c));
                CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, left, 2, c, &st[0]));
            } else {
                CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, left, 2, c, &st[0]));
                CHECK_MPI(MPI_Send(sb, n, MPI_BYTE, right, 2, c));
            }
            CHECK_STATUS(&st[0], left, 2, n, "thread %d own comm Send/Recv size %d", t, n);
            CHECK_BUF(rb, n, left, t, iter + 70, "thread %d own comm Send/Recv size %d", t, n);
        }
    free(sb);
    free(rb);
    return NULL;
}

/* shared communicator, tag = thread id (+ NT on odd steps) */
static void *shared_tag_thread(void *p)
{
    int t = ((targ *)p)->t, np = size - 1;
    char **rb = mt_malloc(sizeof(char *) * np);
    char *sb = mt_malloc(1048576 + 3);
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * np);
    for (int k = 0; k < np; k++)
        rb[k] = mt_malloc(1048576 + 3);
    for (int it = 0; it < 2; it++)
        for (int i = 0; i < NTSZ; i++) {
            /* a peer can be one step ahead: alternate the tag between steps
             * so an ANY_SOURCE receive cannot take its next message */
            int n = tsz[(i + t) % NTSZ], iter = it * 100 + i, tag = t + NT * ((it * NTSZ + i) % 2);
            int *seen = mt_malloc(sizeof(int) * size);
            memset(seen, 0, sizeof(int) * size);
            mt_fill(sb, n, rank, tag, iter);
            for (int k = 0; k < np; k++)
                CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, (rank + 1 + k) % size, tag, shared, &rq[k]));
            for (int k = 0; k < np; k++) {
                MPI_Status st;
                int src = (t % 2) ? MPI_ANY_SOURCE : (rank - 1 - k + 2 * size) % size, s;
                CHECK_MPI(MPI_Recv(rb[k], n, MPI_BYTE, src, tag, shared, &st));
                s = st.MPI_SOURCE;
                if (!CHECK(s >= 0 && s < size && s != rank, "thread %d: bad source %d", t, s))
                    continue;
                seen[s]++;
                CHECK_STATUS(&st, s, tag, n, "thread %d shared comm size %d", t, n);
                CHECK_BUF(rb[k], n, s, tag, iter, "thread %d shared comm size %d from %d", t, n, s);
            }
            for (int s = 0; s < size; s++)
                CHECK_EQ(seen[s], s == rank ? 0 : 1, "thread %d: messages from %d", t, s);
            CHECK_MPI(MPI_Waitall(np, rq, MPI_STATUSES_IGNORE));
            free(seen);
        }
    for (int k = 0; k < np; k++)
        free(rb[k]);
    free(rb);
    free(sb);
    free(rq);
    return NULL;
}

/* concurrent matched probes; each thread owns tags 100+t and 110+t */
static void *mprobe_thread(void *p)
{
    int t = ((targ *)p)->t, np = size - 1;
    char *sb = mt_malloc(1048576 + 3), *rb = mt_malloc(1048576 + 3);
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * np);
    for (int i = 0; i < NTSZ; i++) {
        int n = tsz[i], tag = 100 + t + 10 * (i % 2); /* peers may be one step ahead */
        mt_fill(sb, n, rank, tag, i);
        for (int k = 0; k < np; k++)
            CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, (rank + 1 + k) % size, tag, shared, &rq[k]));
        for (int k = 0; k < np; k++) {
            MPI_Message m;
            MPI_Status st;
            int cnt = -1;
            CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, tag, shared, &m, &st));
            MPI_Get_count(&st, MPI_BYTE, &cnt);
            CHECK_EQ(cnt, n, "thread %d Mprobe count", t);
            CHECK_MPI(MPI_Mrecv(rb, n, MPI_BYTE, &m, &st));
            CHECK_STATUS(&st, st.MPI_SOURCE, tag, n, "thread %d Mrecv", t);
            CHECK_BUF(rb, n, st.MPI_SOURCE, tag, i, "thread %d Mrecv size %d", t, n);
        }
        CHECK_MPI(MPI_Waitall(np, rq, MPI_STATUSES_IGNORE));
    }
    free(sb);
    free(rb);
    free(rq);
    return NULL;
}

static void *self_thread(void *p)
{
    int t = ((targ *)p)->t, tag = 200 + t;
    char *sb = mt_malloc(1048576 + 3), *rb = mt_malloc(1048576 + 3);
    for (int it = 0; it < 4; it++)
        for (int i = 0; i < NTSZ; i++) {
            int n = tsz[i];
            MPI_Request r;
            MPI_Status st;
            mt_fill(sb, n, rank, tag, it * 10 + i);
            CHECK_MPI(MPI_Isend(sb, n, MPI_BYTE, rank, tag, shared, &r));
            CHECK_MPI(MPI_Recv(rb, n, MPI_BYTE, rank, tag, shared, &st));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
            CHECK_STATUS(&st, rank, tag, n, "thread %d self size %d", t, n);
            CHECK_BUF(rb, n, rank, tag, it * 10 + i, "thread %d self size %d", t, n);
        }
    free(sb);
    free(rb);
    return NULL;
}

/* thread 0 blocks in Recv, thread 1 sends */
static void *blocked_recv_thread(void *p)
{
    int t = ((targ *)p)->t, n = 1048576 + 3;
    char *b = mt_malloc(n);
    if (t == 0) {
        for (int k = 0; k < 5; k++) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(b, n - k, MPI_BYTE, left, 300, shared, &st));
            CHECK_STATUS(&st, left, 300, n - k, "blocked receiver #%d", k);
            CHECK_BUF(b, n - k, left, 300, k, "blocked receiver #%d", k);
        }
    } else {
        mt_sleep_ms(20); /* let the receiving thread block first */
        for (int k = 0; k < 5; k++) {
            mt_fill(b, n - k, rank, 300, k);
            CHECK_MPI(MPI_Send(b, n - k, MPI_BYTE, right, 300, shared));
        }
    }
    free(b);
    return NULL;
}

/* every thread both sends and receives with wildcards on one communicator:
 * any receiving thread may get any message; the union must be exact */
#define WM 40 /* messages per (sender thread, peer) */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *seen_msgs; /* [src][thread][seq] */

static void *wildcard_thread(void *p)
{
    int t = ((targ *)p)->t, np = size - 1, tag = 400;
    int nsend = np * WM, nrecv = np * WM; /* every thread receives as much as it sends */
    int maxn = 65537 + 8;
    char **sb = mt_malloc(sizeof(char *) * nsend), *rb = mt_malloc(maxn);
    MPI_Request *rq = mt_malloc(sizeof(MPI_Request) * nsend);
    for (int j = 0; j < nsend; j++) {
        int peer = (rank + 1 + j % np) % size, seq = j / np;
        int n = (seq % 10 == 9) ? 65537 : 8 + seq % 5; /* 8 bytes carry (thread, seq) */
        int hdr[2] = {t, seq};
        sb[j] = mt_malloc(n);
        mt_fill(sb[j], n, rank, tag, t * 1000 + seq);
        memcpy(sb[j], hdr, sizeof hdr);
        CHECK_MPI(MPI_Isend(sb[j], n, MPI_BYTE, peer, tag, shared, &rq[j]));
    }
    for (int j = 0; j < nrecv; j++) {
        MPI_Status st;
        int hdr[2], cnt = -1, s;
        CHECK_MPI(MPI_Recv(rb, maxn, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, shared, &st));
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        s = st.MPI_SOURCE;
        if (!CHECK(cnt >= 8 && s >= 0 && s < size && s != rank && st.MPI_TAG == tag,
                   "wildcard thread %d: bad message (src %d tag %d count %d)", t, s, st.MPI_TAG,
                   cnt))
            continue;
        memcpy(hdr, rb, sizeof hdr);
        if (!CHECK(hdr[0] >= 0 && hdr[0] < NT && hdr[1] >= 0 && hdr[1] < WM,
                   "wildcard thread %d: bad header (%d, %d)", t, hdr[0], hdr[1]))
            continue;
        CHECK_EQ(cnt, (hdr[1] % 10 == 9) ? 65537 : 8 + hdr[1] % 5, "wildcard message size");
        {
            /* the pattern past the header */
            unsigned char *ex = mt_malloc(cnt);
            mt_fill(ex, cnt, s, tag, hdr[0] * 1000 + hdr[1]);
            CHECK(memcmp(ex + 8, rb + 8, cnt - 8) == 0,
                  "wildcard message data (src %d thread %d seq %d)", s, hdr[0], hdr[1]);
            free(ex);
        }
        pthread_mutex_lock(&seen_lock);
        seen_msgs[(s * NT + hdr[0]) * WM + hdr[1]]++;
        pthread_mutex_unlock(&seen_lock);
    }
    CHECK_MPI(MPI_Waitall(nsend, rq, MPI_STATUSES_IGNORE));
    for (int j = 0; j < nsend; j++)
        free(sb[j]);
    free(sb);
    free(rb);
    free(rq);
    return NULL;
}

static void run_threads(void *(*fn)(void *), int nthreads, const char *what);

static void test_wildcard_threads(void)
{
    seen_msgs = mt_malloc((size_t)size * NT * WM);
    memset(seen_msgs, 0, (size_t)size * NT * WM);
    run_threads(wildcard_thread, NT, "all threads send and receive ANY_SOURCE/ANY_TAG");
    for (int s = 0; s < size; s++)
        for (int t = 0; t < NT; t++)
            for (int q = 0; q < WM; q++)
                if (!CHECK_EQ(seen_msgs[(s * NT + t) * WM + q], s == rank ? 0 : 1,
                              "message from rank %d thread %d seq %d received once", s, t, q))
                    return;
    free(seen_msgs);
}

static void run_threads(void *(*fn)(void *), int nthreads, const char *what)
{
    pthread_t th[NT];
    targ a[NT];
    mt_section(what);
    for (int t = 0; t < nthreads; t++) {
        a[t].t = t;
        if (pthread_create(&th[t], NULL, fn, &a[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int provided = mt_init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, "p2p_threads");
    rank = mt_rank;
    size = mt_size;
    if (size < 2) {
        fprintf(stderr, "p2p_threads needs at least 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    left = (rank - 1 + size) % size;
    right = (rank + 1) % size;
    mt_section("MPI_Init_thread");
    if (!CHECK_EQ(provided, MPI_THREAD_MULTIPLE, "MPI_Init_thread(MPI_THREAD_MULTIPLE) provided"))
        return mt_finalize(); /* multithreaded MPI calls would be erroneous */
    {
        int q = -1, main_ = 0;
        MPI_Query_thread(&q);
        MPI_Is_thread_main(&main_);
        CHECK_EQ(q, MPI_THREAD_MULTIPLE, "MPI_Query_thread");
        CHECK(main_, "MPI_Is_thread_main in the main thread");
    }
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &own[t]));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &shared));

    run_threads(own_comm_thread, NT, "threads on their own communicators");
    run_threads(shared_tag_thread, NT, "threads sharing a communicator, tag per thread");
    run_threads(mprobe_thread, NT, "concurrent Mprobe/Mrecv");
    run_threads(self_thread, NT, "concurrent self messages");
    run_threads(blocked_recv_thread, 2, "blocked Recv in one thread, Send in another");
    test_wildcard_threads();

    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_free(&own[t]));
    CHECK_MPI(MPI_Comm_free(&shared));
    return mt_finalize();
}
