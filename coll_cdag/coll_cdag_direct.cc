/*
 * coll/cdag engine service: the direct path of tiny blocking collectives.
 *
 * Why: an 8 B broadcast at np 2 cost 1280 instructions at the root against
 * coll/tuned's 789-865 (callgrind, issue 14), some 540 of them in taking a
 * spare op, rebinding and starting its executor and sending through the
 * Transport interface, inject() and ring_send(); the receiver paid a hash
 * insert of its posted receive and a hash erase when the entry came.  A
 * blocking call of a plan whose every message goes through a ring and is
 * tiny needs none of it: here the plan is walked in place (counters on the
 * stack), sends are pushed into the peer's ring at once, and receives wait
 * in a small array that deliver_eager looks at before its hash maps.
 *
 * Same wire, same matching: the messages carry the ids the executor would
 * give them (the call's schedule id from the communicator's counter, run
 * 0 as for a rebound blocking op, the plan's tags), and the plan is the
 * one the executor path compiled (taken from the communicator's cache), so
 * a peer that runs the same call on the executor (its ring to us missing,
 * a larger limit, the first call of a shape) matches every message, and
 * the direct and executor calls of one communicator, blocking or not,
 * interleave freely.  Early arrivals (parked by another call's progress)
 * are taken from G.unexpected like the executor's receives take them.
 *
 * Single copy as the executor does it (coll_cdag_cma.cc): a send of a
 * size this process sends by single copy goes as a descriptor and is done
 * at its FIN, which the wait polls for like a receive; a descriptor for a
 * waiting receive, or held before it, is pulled straight into place.  So
 * peers that measured CMA differently (coll_cdag_cma_min -1) still match:
 * a receive takes a ring message or a descriptor alike.  (Before, a direct
 * run took no descriptor and so no receive from 8 KiB while single copy
 * was on, and every 8-16 KiB rooted call ran on the executor: osu_scatter
 * 8 KiB 1.64 us against coll/tuned's 1.25 over pml/rdrp.)
 *
 * Not taken (the executor runs the call): under the lock (engine thread,
 * MPI_THREAD_MULTIPLE: a blocking run here holds no lock while it waits),
 * under token throttling (every send is admitted in inject()), v-variants,
 * a plan not yet in the cache (its first call compiles it there), a
 * message to a peer without a ring or above coll_cdag_direct_limit (or
 * the ring limit), more than kDirectMaxVertices vertices.
 */
#include "coll_cdag_service.h"

#include <cstring>
#include <new>

namespace cdag_svc {

/* one receive of the direct run, waiting for its message; or one send by
 * single copy (rp set), waiting for its FIN */
struct DirectWait {
    Key k;
    char *buf;
    uint64_t len;
    cdag::VertexId v;
    int state;  // 0 waiting, 1 here (or pulled; a send: copied), 2 seen by the run, 3 being pulled,
                // 4 a send the receiver could not read (sent again through the ring), < 0 failed
    RingPeer *rp;  // a send's peer; nullptr: a receive (every DirectWait{...} sets it)
};

/* On the caller's stack each call: w stays uninitialized until a vertex
 * takes an entry (a default member initializer made every call store 32
 * of them) */
struct DirectRun {
    DirectWait w[kDirectMaxVertices];
    unsigned n = 0;
    unsigned arrived = 0;  // waits in state 1 or < 0
};

namespace {

DirectWait *find_wait(const Key &k)
{
    DirectRun &r = *G.direct;
    for (unsigned i = 0; i < r.n; ++i)
        if (r.w[i].state == 0 && !r.w[i].rp && r.w[i].k == k) return &r.w[i];
    return nullptr;
}

/* the FIN of a descriptor the direct run sent (coll_cdag_cma.cc) */
void send_fin(void *ctx, int32_t status)
{
    auto *w = static_cast<DirectWait *>(ctx);
    w->state = status == kCmaDone ? 1 : status == kCmaRetry ? 4 : -2;
    ++G.direct->arrived;
}

void pulled(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    if (request) ucp_request_free(request);
    auto *w = static_cast<DirectWait *>(user_data);
    w->state = status == UCS_OK ? 1 : -1;
    ++G.direct->arrived;
}

/* pull a rendezvous message into w's buffer (tiny messages normally come
 * eager; UCX_RNDV_THRESH can make them rendezvous) */
void pull_into(DirectWait *w, void *desc)
{
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = pulled;
    p.user_data = w;
    ++cdag_glue_stats.rndv_msgs;
    ucs_status_ptr_t sp = ucp_am_recv_data_nbx(G.w, desc, w->buf, w->len, &p);
    if (sp == nullptr) pulled(nullptr, UCS_OK, w->len, w);
    else if (UCS_PTR_IS_ERR(sp)) pulled(nullptr, UCS_PTR_STATUS(sp), 0, w);
}

/* w's message if it came before w was waiting (parked by some progress
 * pass): taken as post_recv takes it.  true: w is settled (state 1 or < 0)
 * or being pulled (state 3, pulled() settles it). */
bool take_parked(DirectWait *w)
{
    if (G.unexpected.empty()) return false;
    auto it = G.unexpected.find(w->k);
    if (it == G.unexpected.end() || it->second.pulling) return false;  // a pull ends in early_done: later
    Unexp u = it->second;
    G.unexpected.erase(it);
    if (u.cma) {  // a held descriptor: pulled now, straight into place
        int rc = cma_pull_direct(u.cd, w->buf, w->len);
        if (rc == 0) return false;  // refused: it comes again
        w->state = rc > 0 ? 1 : -2;
        return true;
    }
    if (u.len != w->len) {  // a schedule bug or a corrupted header: never overrun buf
        shadow_release(u);
        w->state = -2;
        return true;
    }
    if (u.rndv) {
        w->state = 3;
        pull_into(w, u.data);
        return true;
    }
    if (u.len) std::memcpy(w->buf, u.data, u.len);
    shadow_release(u);
    w->state = 1;
    return true;
}

/* the blocking direct run of plan e on c */
int run(Comm *c, DirectEntry &e, uint32_t sched, cdag_glue_reduce_fn_t fn, void *fn_ctx, const void *sbuf,
        void *rbuf, void (*other_progress)(void), unsigned other_every, int *waited)
{
    const cdag::Plan &p = *e.plan;
    const size_t n = p.num_vertices();
    uint32_t counter[kDirectMaxVertices] = {};  // a few vector stores; memset(n) was a libc call
    cdag::VertexId ready[kDirectMaxVertices];
    unsigned nready = 0;
    for (cdag::VertexId v : p.initial) ready[nready++] = v;
    char *base[cdag::kNumSlots] = {nullptr, const_cast<char *>(static_cast<const char *>(sbuf)),
                                   static_cast<char *>(rbuf), e.scratch};
    auto addr = [&base](const cdag::Buf &b) { return base[static_cast<int>(b.slot)] ? base[static_cast<int>(b.slot)] + b.off : nullptr; };
    DirectRun r;
    G.direct = &r;
    size_t remaining = n;
    int err = 0;
    unsigned turn = 0;
    auto finished = [&](cdag::VertexId v) {
        --remaining;
        for (uint32_t i = p.succ_begin[v]; i < p.succ_begin[v + 1]; ++i) {
            cdag::VertexId s = p.succ[i];
            if (++counter[s] == p.threshold[s]) ready[nready++] = s;
        }
    };
    /* a full ring empties as its receiver polls, which it does in every
     * progress pass whatever it runs: so do we, and pass the rest of Open
     * MPI as the wait below does.  With more ranks than cores that receiver
     * may be off its core: without the pass (opal_progress yields then) we
     * spun out our whole time slice (allgather 16 KiB through the rings at
     * np 4 on 2 cores: 1.6-1.8 ms a call, against 18-36 us) */
    auto push = [waited, other_progress, other_every](RingPeer *rp, const AmHdr &h, const void *buf, uint64_t len) {
        for (unsigned spin = 1; !ring_push_now(rp, h, buf, len); ++spin) {
            *waited = 1;
            ring_progress();
            if (spin % other_every == 0 && other_progress) other_progress();
        }
    };
    ++cdag_glue_stats.runs;
    ++cdag_glue_stats.direct_runs;
    while (remaining && !err) {
        while (nready && !err) {
            cdag::VertexId v = ready[--nready];
            const cdag::Op &op = p.ops[v];
            switch (op.kind) {
            case cdag::OpKind::Send: {
                AmHdr h{c->cid, c->rank, sched, 0, op.tag, 0};
                RingPeer *rp = c->rings[static_cast<size_t>(op.peer)];
                if (single_copy_to(*rp, op.a.len)) {
                    /* by single copy, as the executor would send it: done
                     * at the receiver's FIN, which the wait below polls for */
                    DirectWait &w = r.w[r.n++];
                    w = DirectWait{Key{c->cid, static_cast<uint32_t>(c->rank), sched, 0, op.tag}, addr(op.a),
                                   op.a.len, v, 0, rp};
                    cma_send_direct(c, rp, h, w.buf, w.len, send_fin, &w);
                    continue;
                }
                push(rp, h, addr(op.a), op.a.len);
                break;
            }
            case cdag::OpKind::Recv: {
                DirectWait &w = r.w[r.n++];
                w = DirectWait{Key{c->cid, static_cast<uint32_t>(op.peer), sched, 0, op.tag}, addr(op.a), op.a.len, v, 0,
                               nullptr};
                if (take_parked(&w) && w.state != 3) ++r.arrived;  // finished in the scan below
                continue;
            }
            case cdag::OpKind::Reduce: fn(fn_ctx, addr(op.a), addr(op.b), op.count); break;
            case cdag::OpKind::Copy: std::memcpy(addr(op.b), addr(op.a), op.a.len); break;
            case cdag::OpKind::Nop: break;
            }
            if (!err) finished(v);
        }
        if (err) break;
        if (r.arrived) {  // receives whose messages came: their successors may run now
            for (unsigned i = 0; i < r.n; ++i) {
                DirectWait &w = r.w[i];
                if (w.state == 1) {
                    w.state = 2;
                    --r.arrived;
                    finished(w.v);
                } else if (w.state == 4) {  // its receiver could not read us: the bytes through the ring
                    push(w.rp, AmHdr{w.k.cid, static_cast<int32_t>(w.k.src), w.k.sched, 0, w.k.tag, 0}, w.buf, w.len);
                    w.state = 2;
                    --r.arrived;
                    finished(w.v);
                } else if (w.state < 0) {
                    err = w.state;
                }
            }
            continue;
        }
        if (!remaining) break;
        /* wait as cdag_glue_op_wait_turn waits for a ring-only run: the
         * rings every turn, the UCX worker every 16th (then what another
         * pass parked), the rest of Open MPI every other_every-th turn
         * that brought this run nothing.  With mpi_yield_when_idle
         * (oversubscribed) that pass is every turn and opal_progress gives
         * the core away when it finds nothing of its own; after an arrival
         * that would hand over the core with work in hand (np 4 on 2
         * cores: 11.9 context switches per barrier, against 3.8 on the
         * executor path and 5.3 under coll/tuned) */
        *waited = 1;
        ++cdag_glue_stats.wait_turns;
        ring_progress();
        if (turn % 16 == 15) {
            ++cdag_glue_stats.wait_ucx_passes;
            ucp_worker_progress(G.w);
            for (unsigned i = 0; i < r.n; ++i)
                if (r.w[i].state == 0 && !r.w[i].rp && take_parked(&r.w[i]) && r.w[i].state != 3) ++r.arrived;
        }
        if (!r.arrived && (turn + 1) % other_every == 0 && other_progress) other_progress();
        ++turn;
    }
    /* a failed run may still have a pull into a waiting buffer (and into
     * r, on this stack) going */
    for (unsigned i = 0; i < r.n; ++i) {
        while (r.w[i].state == 3) ucp_worker_progress(G.w);
        if (r.w[i].rp && r.w[i].state == 0) cma_forget_direct(&r.w[i]);  // its FIN, if it comes, finds nothing
    }
    G.direct = nullptr;
    return err ? err : 1;
}

bool same_shape(const DirectEntry &e, const cdag_glue_spec_t *s)
{
    return e.coll == s->coll && e.count == s->count && e.root == s->root && e.elem_size == s->elem_size &&
           e.commutative == s->commutative && e.in_place == s->in_place;
}

/* Can this plan run here?  Every message by a ring within the limit, the
 * counters on the stack. */
bool fits(const Comm *c, const cdag::Plan &p)
{
    if (p.num_vertices() > kDirectMaxVertices || !runs_on_rings(c, p)) return false;
    for (const cdag::Op &op : p.ops) {
        if (op.kind != cdag::OpKind::Send && op.kind != cdag::OpKind::Recv) continue;
        /* within the ring limit: a send the receiver could not read by
         * single copy goes again through the ring */
        if (op.a.len > G.cfg.direct_limit || op.a.len > G.ring_limit) return false;
    }
    return true;
}

}  // namespace

bool direct_satisfied()
{
    const DirectRun &r = *G.direct;
    for (unsigned i = 0; i < r.n; ++i)
        if (r.w[i].state == 0) return false;
    return true;
}

bool direct_take(const Key &k, const void *data, uint64_t len, bool rndv)
{
    DirectWait *w = find_wait(k);
    if (!w) return false;
    if (w->len != len) {
        w->state = -2;  // never overrun buf
        ++G.direct->arrived;
        if (rndv) return false;  // UCX keeps the descriptor: left to am_cb, which parks it
        return true;
    }
    if (rndv) {
        w->state = 3;  // until pulled() says
        pull_into(w, const_cast<void *>(data));
        return true;
    }
    if (len) std::memcpy(w->buf, data, len);
    w->state = 1;
    ++G.direct->arrived;
    return true;
}

bool direct_take_cma(const Key &k, const CmaDesc &d)
{
    DirectWait *w = find_wait(k);
    if (!w) return false;
    int rc = cma_pull_direct(d, w->buf, w->len);
    if (rc == 0) return true;  // refused (answered): the bytes come again, to this wait
    w->state = rc > 0 ? 1 : -2;
    ++G.direct->arrived;
    return true;
}

}  // namespace cdag_svc

using namespace cdag_svc;

extern "C" {

cdag_glue_direct_t *cdag_glue_direct_find(cdag_glue_comm_t *c, const cdag_glue_spec_t *s)
{
    if (G.lock_on || G.throttling || !G.ring_limit || !G.cfg.direct_limit || s->count * (s->elem_size ? s->elem_size : 1) > G.cfg.direct_limit ||
        s->counts || s->displs || s->rcounts || s->rdispls)
        return nullptr;
    /* a loop of one collective finds its shape at once */
    if (DirectEntry &e = c->direct[c->direct_last]; same_shape(e, s))
        return e.fits ? reinterpret_cast<cdag_glue_direct_t *>(&e) : nullptr;
    for (size_t i = 0; i < kDirectShapes; ++i)
        if (DirectEntry &e = c->direct[i]; same_shape(e, s)) {
            c->direct_last = i;
            return e.fits ? reinterpret_cast<cdag_glue_direct_t *>(&e) : nullptr;
        }
    std::shared_ptr<const cdag::Plan> plan = cached_plan(c, s);
    if (!plan) return nullptr;  // its first call compiles it (executor path)
    DirectEntry &e = c->direct[c->direct_next];
    ++c->direct_gen;  // a direct handle found before may name this entry
    c->direct_last = c->direct_next;
    c->direct_next = (c->direct_next + 1) % kDirectShapes;
    e.coll = s->coll;
    e.root = s->root;
    e.count = s->count;
    e.elem_size = s->elem_size;
    e.commutative = s->commutative;
    e.in_place = s->in_place;
    e.fits = fits(c, *plan);
    e.plan = e.fits ? std::move(plan) : nullptr;
    e.scratch = nullptr;
    if (e.fits && e.plan->scratch_bytes) {
        /* a program cycling through more shapes than kDirectShapes
         * reuses the slot's scratch: no allocation per call */
        if (e.scratch_cap < e.plan->scratch_bytes + 63) {
            count_alloc();
            e.scratch_mem.reset(new (std::nothrow) char[e.plan->scratch_bytes + 63]);
            e.scratch_cap = e.scratch_mem ? e.plan->scratch_bytes + 63 : 0;
        }
        if (!e.scratch_mem) {
            e.fits = false;
            e.plan = nullptr;
            return nullptr;
        }
        uintptr_t a = reinterpret_cast<uintptr_t>(e.scratch_mem.get());
        e.scratch = reinterpret_cast<char *>((a + 63) & ~uintptr_t(63));
    }
    return e.fits ? reinterpret_cast<cdag_glue_direct_t *>(&e) : nullptr;
}

unsigned cdag_glue_direct_gen(const cdag_glue_comm_t *c) { return c->direct_gen; }

int cdag_glue_direct_run(cdag_glue_comm_t *c, cdag_glue_direct_t *d, uint32_t sched, cdag_glue_reduce_fn_t fn,
                         void *fn_ctx, const void *sendbuf, void *recvbuf, void (*other_progress)(void),
                         unsigned other_every, int *waited)
{
    *waited = 0;
    return run(c, *reinterpret_cast<DirectEntry *>(d), sched, fn, fn_ctx, sendbuf, recvbuf, other_progress,
               other_every ? other_every : 64, waited);
}

}  // extern "C"
