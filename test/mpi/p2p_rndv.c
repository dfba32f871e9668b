/*
 * p2p_rndv: rendezvous guarantees.
 *  - several large messages with the same envelope in flight at once
 *    (posted before and after arrival) match and complete in send order
 *    with intact data;
 *  - non-contiguous rendezvous (vector on both sides, contiguous to vector);
 *  - with pml/rdrp (read through MPI_T): the receiver's window is a
 *    guarantee: the high-water marks of chunks and bytes in flight never
 *    exceed pml_rdrp_max_outstanding and max_outstanding x chunk_size;
 *    rendezvous traffic was counted; under the put protocol with a fixed
 *    poll value equal to the last byte, every message needed its FIN;
 *  - head to head into the pending sends' own buffers (MPICH's
 *    pt2pt/sendrecv3: both ranks MPI_Isend rendezvous-size messages, then
 *    MPI_Recv the partner's into the same buffers): erroneous (a receive
 *    writes a send buffer still in use), so the data is not checked, but
 *    every call must return; ob1 does.
 * With other PMLs the MPI_T part finds no rdrp variables and only the data
 * checks run.
 */
#include "mpitest.h"
#include "mpitest_mpit.h"

#define NMSG 6

static int rank, size;

/* ------------------------------------------------------------ tests */
/* NMSG large messages, same (source, tag), all in flight at once */
static void same_envelope(int posted_first)
{
    static const size_t sz[NMSG] = {1048576 + 7, 3 * 1048576, 524288 + 1, 2 * 1048576 + 5,
                                    65536 + 3, 4 * 1048576 + 3};
    int peer = rank ^ 1, tag = 77 + posted_first, i;
    MPI_Request rq[NMSG];
    char *buf[NMSG];
    if (peer >= size) {
        /* the unpaired last rank (odd np) must still join the one
         * MPI_Barrier that both paired ranks call below */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    mt_section(posted_first ? "same envelope, receives posted first"
                            : "same envelope, messages unexpected");
    for (i = 0; i < NMSG; i++) buf[i] = mt_malloc(sz[i]);
    if (rank < peer) {
        if (posted_first) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (i = 0; i < NMSG; i++) {
            mt_fill(buf[i], sz[i], rank, tag, i);
            CHECK_MPI(MPI_Isend(buf[i], (int)sz[i], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &rq[i]));
        }
        CHECK_MPI(MPI_Waitall(NMSG, rq, MPI_STATUSES_IGNORE));
        if (!posted_first) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    } else {
        MPI_Status st[NMSG];
        if (!posted_first) {
            /* let every RTS arrive before anything is posted */
            int flag = 0;
            while (!flag) CHECK_MPI(MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
            mt_sleep_ms(50);
        }
        for (i = 0; i < NMSG; i++)
            CHECK_MPI(MPI_Irecv(buf[i], (int)sz[i], MPI_BYTE, peer, tag, MPI_COMM_WORLD, &rq[i]));
        if (posted_first) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Waitall(NMSG, rq, st));
        for (i = 0; i < NMSG; i++) {
            CHECK_STATUS(&st[i], peer, tag, sz[i], "message %d", i);
            CHECK_BUF(buf[i], sz[i], peer, tag, i, "message %d of the same envelope", i);
        }
        if (!posted_first) CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (i = 0; i < NMSG; i++) free(buf[i]);
}

/* vector <-> vector and contiguous -> vector, 2 MiB of payload */
static void noncontig(void)
{
    const int blocks = 65536, blen = 32, stride = 48;
    int peer = rank ^ 1, tag = 90;
    MPI_Datatype vec;
    size_t span = (size_t)blocks * stride, payload = (size_t)blocks * blen, i;
    char *v, *c;
    if (peer >= size) return;
    mt_section("non-contiguous rendezvous");
    MPI_Type_vector(blocks, blen, stride, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    v = mt_malloc(span);
    c = mt_malloc(payload);
    if (rank < peer) {
        mt_fill(c, payload, rank, tag, 0);
        memset(v, 0, span);
        for (i = 0; i < (size_t)blocks; i++) memcpy(v + i * stride, c + i * blen, blen);
        CHECK_MPI(MPI_Send(v, 1, vec, peer, tag, MPI_COMM_WORLD));     /* vector -> vector */
        CHECK_MPI(MPI_Send(c, (int)payload, MPI_BYTE, peer, tag, MPI_COMM_WORLD)); /* contig -> vector */
        CHECK_MPI(MPI_Send(v, 1, vec, peer, tag, MPI_COMM_WORLD));     /* vector -> contig */
    } else {
        int k;
        for (k = 0; k < 3; k++) {
            MPI_Status st;
            memset(v, 0xEE, span);
            memset(c, 0xEE, payload);
            if (k < 2) {
                CHECK_MPI(MPI_Recv(v, 1, vec, peer, tag, MPI_COMM_WORLD, &st));
                for (i = 0; i < (size_t)blocks; i++) memcpy(c + i * blen, v + i * stride, blen);
                for (i = 0; i < (size_t)blocks; i++)
                    CHECK(mt_verify_const(v + i * stride + blen, stride - blen, 0xEE) < 0,
                          "round %d: gap %zu of the vector written", k, i);
            } else {
                CHECK_MPI(MPI_Recv(c, (int)payload, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
            }
            CHECK_STATUS(&st, peer, tag, payload, "non-contiguous round %d", k);
            CHECK_BUF(c, payload, peer, tag, 0, "non-contiguous round %d", k);
        }
    }
    MPI_Type_free(&vec);
    free(v);
    free(c);
}

/* put protocol with the poll byte forced to a value the data ends with */
static void put_fins(long long poll, int *count_out)
{
    const int count = 5;
    const size_t n = 1048576;
    int peer = rank ^ 1, tag = 95, i;
    char *b;
    *count_out = 0;
    if (peer >= size) return;
    mt_section("put protocol explicit FIN");
    b = mt_malloc(n);
    for (i = 0; i < count; i++) {
        if (rank < peer) {
            mt_fill(b, n, rank, tag, i);
            b[n - 1] = (char)poll;
            CHECK_MPI(MPI_Send(b, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD));
        } else {
            MPI_Status st;
            memset(b, 0, n);
            CHECK_MPI(MPI_Recv(b, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st));
            CHECK_EQ((unsigned char)b[n - 1], (unsigned char)poll, "last byte of message %d", i);
            CHECK_BUF(b, n - 1, peer, tag, i, "put message %d", i);
        }
    }
    free(b);
    *count_out = rank < peer ? count : 0;
}

/* Both ranks of a pair send NH2H messages, then receive the partner's into
 * the buffers still being sent.  Under the get and put protocols the last
 * byte of a receive buffer is the completion flag, and here it is also the
 * last byte of a pending send: the receiver's preset must not keep either
 * side from completing (it hung under get and, by a race, under put). */
#define NH2H 10
static void head_to_head_aliased(void)
{
    static const int sz[] = {40000, 400000};
    int peer = rank ^ 1, i, k;
    if (peer >= size) {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        return;
    }
    mt_section("head to head, receives into the pending sends' buffers");
    for (k = 0; k < 2; k++) {
        MPI_Request rq[NH2H];
        char *buf[NH2H];
        for (i = 0; i < NH2H; i++) {
            buf[i] = mt_malloc(sz[k]);
            memset(buf[i], i, sz[k]);  /* alike on both ranks, as in sendrecv3 */
        }
        CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 10, NULL, 0, MPI_BYTE, peer, 10, MPI_COMM_WORLD,
                               MPI_STATUS_IGNORE));
        for (i = 0; i < NH2H; i++)
            CHECK_MPI(MPI_Isend(buf[i], sz[k], MPI_BYTE, peer, 20 + k, MPI_COMM_WORLD, &rq[i]));
        for (i = 0; i < NH2H; i++) {
            MPI_Status st;
            int n = -1;
            CHECK_MPI(MPI_Recv(buf[i], sz[k], MPI_BYTE, peer, 20 + k, MPI_COMM_WORLD, &st));
            MPI_Get_count(&st, MPI_BYTE, &n);
            CHECK_EQ(n, sz[k], "received count");
        }
        CHECK_MPI(MPI_Waitall(NH2H, rq, MPI_STATUSES_IGNORE));
        for (i = 0; i < NH2H; i++) free(buf[i]);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    int provided;
    long long chunk = 0, cma_chunk = 0, window = 0, proto = -1, poll = -1;
    int have_rdrp, nfin = 0;
    pvar_t hw_bytes, hw_chunks, rndv, fins;

    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    mt_init(&argc, &argv, "p2p_rndv");
    rank = mt_rank;
    size = mt_size;
    have_rdrp = mt_pml_is("rdrp") && cvar_int("pml_rdrp_chunk_size", &chunk) &&
                cvar_int("pml_rdrp_max_outstanding", &window) &&
                cvar_int("pml_rdrp_rndv_protocol", &proto) &&
                cvar_int("pml_rdrp_put_poll_value", &poll) &&
                cvar_int("pml_rdrp_cma_chunk_size", &cma_chunk);
    {
        /* peers on this node (all of them here) move rendezvous data by the
         * cma path when shm is on and the data path is auto or cma: kernel
         * copies of up to cma_chunk_size bytes */
        long long shm = 0, path = -1;
        if (have_rdrp && cvar_int("pml_rdrp_shm", &shm) && cvar_int("pml_rdrp_data_path", &path) && shm &&
            (path == 0 || path == 3) && cma_chunk > chunk)
            chunk = cma_chunk;
    }
    if (mt_pml_is("rdrp")) CHECK(have_rdrp, "pml rdrp selected but its MCA variables are not visible through MPI_T");
    pvar_open(&hw_bytes, "pml_rdrp_max_bytes_inflight");
    pvar_open(&hw_chunks, "pml_rdrp_max_chunks_inflight");
    pvar_open(&rndv, "pml_rdrp_rndv_sent");
    pvar_open(&fins, "pml_rdrp_put_fin_needed");
    if (have_rdrp) CHECK(hw_bytes.ok && hw_chunks.ok && rndv.ok && fins.ok, "rdrp performance variables missing");

    same_envelope(1);
    same_envelope(0);
    noncontig();
    head_to_head_aliased();
    if (have_rdrp && proto == 3 && poll >= 0) {
        unsigned long before = pvar_read(&fins), after;
        put_fins(poll, &nfin);
        after = pvar_read(&fins);
        if (nfin > 0)
            CHECK_EQ((long long)(after - before), (long long)nfin,
                     "every put whose last byte equals the poll value needs a FIN");
    }

    if (have_rdrp) {
        unsigned long b = pvar_read(&hw_bytes), c = pvar_read(&hw_chunks), r = pvar_read(&rndv);
        mt_section("window high-water marks");
        CHECK((long long)c <= window, "chunks in flight %lu exceed max_outstanding %lld", c, window);
        if (proto == 0 || proto == 1) /* rdrp: the window bounds the bytes in flight */
            CHECK((long long)b <= window * chunk,
                  "bytes in flight %lu exceed max_outstanding x chunk_size = %lld", b,
                  window * chunk);
        if ((rank ^ 1) < size && rank < (rank ^ 1))
            CHECK(r > 0, "no rendezvous counted on a sender of large messages");
        if (mt_verbose)
            printf("[rank %d] hwm bytes %lu chunks %lu (window %lld x chunk %lld)\n", rank, b, c,
                   window, chunk);
    }
    /* MPI_T is closed before MPI_Finalize: Open MPI 4.1.4 crashes in an
     * MPI_T_finalize that comes after it */
    {
        pvar_t *all[] = {&hw_bytes, &hw_chunks, &rndv, &fins};
        for (int i = 0; i < 4; i++) pvar_close(all[i]);
    }
    MPI_T_finalize();
    return mt_finalize();
}
