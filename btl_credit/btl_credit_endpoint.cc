/*
 * btl/credit: endpoints.  One per peer process of our job, numbered for
 * the credit engine (peer index = vpid, skipping our own), created by
 * add_procs or, for a peer that sends to us first, when we owe it a credit
 * packet; connected to the peer's UCX worker (from the modex) on first use.
 */
#include "btl_credit_internal.h"

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
    BTL_CREDIT_VERBOSE(10, "connected to %s (%s)", OPAL_NAME_PRINT(ep->name),
                       ep->remote ? "remote" : "on-node");
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
        /* ob1 pulls by RGET (btl_get) when the module offers GET, and
         * reads the module's flags after this call.  To a remote peer over
         * TCP, UCX 1.13 emulates GET by active messages that the sender's
         * progress must serve (across two namespace nodes: 907 MB/s at
         * 1 MiB against 1734 for ob1/tcp, issue 21): offer only send/recv
         * then, so ob1 pipelines sends instead.  One module serves all
         * peers, so one such peer decides for the job (clusters mix RDMA
         * and TCP between node pairs rarely). */
        if (ep->remote && (btl->btl_flags & MCA_BTL_FLAGS_GET)) {
            endpoint_connect(ep);
            if (rdrp_ucx_ep_native_get(ep->ep) != 1) {
                btl->btl_flags &= ~(MCA_BTL_FLAGS_GET | MCA_BTL_FLAGS_PUT);
                BTL_CREDIT_VERBOSE(2, "peer %s: UCX has no get protocol to it (GET would be emulated): RGET off",
                                   OPAL_NAME_PRINT(name));
            }
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
