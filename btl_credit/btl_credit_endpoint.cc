/*
 * btl/credit: endpoints.  One per peer process of our job, numbered for
 * the credit engine (peer index = vpid, skipping our own), created by
 * add_procs or, for a peer that sends to us first, when we owe it a credit
 * packet; connected to the peer's UCX worker (from the modex) on first use.
 */
#include "btl_credit_internal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace btlcredit {

uint32_t peer_index(uint32_t vpid) { return vpid < g.me ? vpid : vpid - 1; }
uint32_t peer_vpid(uint32_t index) { return index < g.me ? index : index + 1; }

static mca_btl_base_endpoint_t *endpoint_create(const opal_process_name_t &name, opal_proc_t *proc)
{
    void *addr = nullptr;
    size_t len = 0;
    if (mca_btl_credit_modex_recv(&name, &addr, &len) != OPAL_SUCCESS || addr == nullptr) {
        BTL_CREDIT_VERBOSE(1, "no btl/credit address in the modex for %s: not reachable",
                           OPAL_NAME_PRINT(name));
        return nullptr;
    }
    auto *ep = new (std::nothrow) mca_btl_base_endpoint_t;
    if (!ep) {
        std::free(addr);
        return nullptr;
    }
    ep->proc = proc;
    ep->name = name;
    static_assert(sizeof(opal_process_name_t) == sizeof(uint64_t), "process name is 64 bits");
    std::memcpy(&ep->peer_id, &name, sizeof(ep->peer_id));
    ep->index = peer_index(name.vpid);
    ep->remote = proc != nullptr && !OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags);
    ep->addr = addr;
    ep->addr_len = len;
    g.peers[ep->index] = ep;
    return ep;
}

mca_btl_base_endpoint_t *endpoint_for_index(uint32_t index)
{
    if (OPAL_LIKELY(g.peers[index] != nullptr)) return g.peers[index];
    opal_process_name_t name;
    name.jobid = g.jobid;
    name.vpid = peer_vpid(index);
    opal_proc_t *proc = opal_proc_for_name(name);
    mca_btl_base_endpoint_t *ep = endpoint_create(name, proc);
    if (!ep) fatal("connect-failed", OPAL_NAME_PRINT(name), "(no btl/credit address in the modex)");
    return ep;
}

void endpoint_connect(mca_btl_base_endpoint_t *ep)
{
    if (OPAL_LIKELY(ep->ep != nullptr)) return;
    ep->ep = rdrp_ucx_connect(g.uw, ep->addr, ep->addr_len, ep->remote ? 1 : 0, ep->peer_id);
    if (!ep->ep) fatal("connect-failed", OPAL_NAME_PRINT(ep->name), rdrp_ucx_last_error());
    std::free(ep->addr);
    ep->addr = nullptr;
    ep->native_get = rdrp_ucx_ep_native_get(ep->ep) == 1;
    BTL_CREDIT_VERBOSE(10, "connected to %s (%s%s)", OPAL_NAME_PRINT(ep->name),
                       ep->remote ? "remote" : "on-node", ep->emulated_rma() ? ", no native get" : "");
}

void endpoints_fini()
{
    for (auto *&ep : g.peers) {
        if (!ep) continue;
        std::free(ep->addr);
        delete ep;
        ep = nullptr;
    }
    g.peers.clear();
    g.waiting.clear();
}

/* What ob1 is offered once a remote peer turns out to have no native get.
 * ob1 pulls by RGET (btl_get) when the module offers GET and reads the
 * module's flags after add_procs.  To a remote peer over TCP, UCX 1.13
 * emulates GET by active messages that the sender's progress must serve
 * (across two namespace nodes: 907 MB/s at 1 MiB against 1734 for ob1/tcp,
 * issue 21).  So the module offers what btl/tcp offers instead:
 *  - PUT (receiver-driven RPUT), which btl_credit_rdma.cc carries as an
 *    active message received by UCX's rendezvous straight into the
 *    receive buffer: no mailbox slot, no copy at either end (the send
 *    pipeline that ob1 uses without RDMA copies every fragment into a
 *    descriptor, through the mailbox and out again, and runs at most
 *    pml_ob1_send_pipeline_depth fragments at once: 0.65-0.77x ob1/tcp's
 *    bibw at 1-4 MiB);
 *    RPUT chunks of 4 MiB (btl_rdma_pipeline_frag_size; btl/tcp's are
 *    2 GiB): each chunk costs ob1 a PUT request and a FIN;
 *  - an eager limit of a whole slot (128 KiB by default; btl/tcp's is 64
 *    KiB): with 8 KiB a 16 KiB message paid ob1's rendezvous handshake over
 *    the network (2.35x ob1/tcp's latency), and 64 KiB took 1.4x ob1/tcp's
 *    latency by RPUT.  Eager packets to such a peer go by UCX's eager
 *    protocol (btl_credit_send.cc), so a slot-sized packet costs one trip.
 *    They still take a credit and a slot each, so the mailbox bound is
 *    unchanged: slots x slot_size.
 * Measured across two namespace nodes (--rt, best of 3, load 12-15; ob1/tcp
 * = 1): latency 0.86x at 16 KiB, 0.71x at 64 KiB, 0.77-0.79x at 1-4 MiB;
 * bandwidth 1.29x at 64 KiB, 1.56-1.68x at 1-4 MiB.
 * A value the user set is kept.  One module serves all peers, so one such
 * peer decides for the job (clusters rarely mix RDMA and TCP between node
 * pairs); ob1 keeps the flags it read for peers added earlier. */
static void offer_for_emulated_rma(mca_btl_base_module_t *btl, const opal_process_name_t &name)
{
    static bool done = false;
    if (done) {
        BTL_CREDIT_VERBOSE(5, "peer %s (remote): no native get either", OPAL_NAME_PRINT(name));
        return;
    }
    done = true;
    const size_t eager_was = btl->btl_eager_limit;
    const uint32_t flags_was = btl->btl_flags;
    if (!mca_btl_credit_param_set_by_user("flags") && (btl->btl_flags & (MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_PUT)))
        btl->btl_flags = (btl->btl_flags & ~MCA_BTL_FLAGS_GET) | MCA_BTL_FLAGS_PUT;
    else if (btl->btl_flags & MCA_BTL_FLAGS_GET)
        btl->btl_flags &= ~MCA_BTL_FLAGS_GET;  /* the user's GET would be emulated: never faster */
    if (!mca_btl_credit_param_set_by_user("eager_limit")) btl->btl_eager_limit = g.payload_cap;
    if (!mca_btl_credit_param_set_by_user("rndv_eager_limit") && btl->btl_rndv_eager_limit < btl->btl_eager_limit)
        btl->btl_rndv_eager_limit = btl->btl_eager_limit;
    if (btl->btl_rndv_eager_limit > btl->btl_eager_limit) btl->btl_rndv_eager_limit = btl->btl_eager_limit;
    if (!mca_btl_credit_param_set_by_user("rdma_pipeline_frag_size") && btl->btl_rdma_pipeline_frag_size < kRemotePutChunk)
        btl->btl_rdma_pipeline_frag_size = kRemotePutChunk;
    BTL_CREDIT_VERBOSE(2, "peer %s (remote): UCX has no native get to it (it would be emulated by active "
                       "messages): RGET off, %s; eager limit %zu (was %zu), sent by UCX eager; flags 0x%x "
                       "(were 0x%x)", OPAL_NAME_PRINT(name),
                       (btl->btl_flags & MCA_BTL_FLAGS_PUT) ? "RPUT by active message into the receive buffer"
                                                            : "ob1's send pipeline (no PUT offered)",
                       btl->btl_eager_limit, eager_was, btl->btl_flags, flags_was);
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" int mca_btl_credit_add_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                        opal_proc_t **procs, mca_btl_base_endpoint_t **peers,
                                        opal_bitmap_t *reachable)
{
    Lock lock;
    for (size_t i = 0; i < nprocs; ++i) {
        opal_proc_t *proc = procs[i];
        const opal_process_name_t &name = proc->proc_name;
        /* our own process is btl/self's; other jobs (spawn) are not supported */
        if (name.jobid != g.jobid || name.vpid == g.me || name.vpid >= g.nprocs) continue;
        uint32_t index = peer_index(name.vpid);
        mca_btl_base_endpoint_t *ep = g.peers[index];
        if (!ep) ep = endpoint_create(name, proc);
        if (!ep) continue;
        if (!ep->proc) {
            ep->proc = proc;
            ep->remote = !OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags);
        }
        peers[i] = ep;
        if (reachable) opal_bitmap_set_bit(reachable, static_cast<int>(i));
        if (ep->remote) {
            endpoint_connect(ep);
            if (ep->emulated_rma()) offer_for_emulated_rma(btl, name);
            else BTL_CREDIT_VERBOSE(5, "peer %s (remote): UCX has a native get protocol to it: RGET",
                                    OPAL_NAME_PRINT(name));
        }
    }
    return OPAL_SUCCESS;
}

extern "C" int mca_btl_credit_del_procs(mca_btl_base_module_t *btl, size_t nprocs,
                                        opal_proc_t **procs, mca_btl_base_endpoint_t **peers)
{
    /* Endpoints live until finalize: a late credit packet may still need
     * one, and finalize closes them all without hanging on a dead peer. */
    (void)btl;
    (void)nprocs;
    (void)procs;
    (void)peers;
    return OPAL_SUCCESS;
}
