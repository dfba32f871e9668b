/*
 * btl/credit: the send side.  A data packet leaves only with a credit of
 * its receiver; it carries back the credits the engine piggybacks.  Without
 * credit, send() queues the descriptor on its endpoint (FIFO, drained by
 * progress as credits arrive) and sendi() refuses so ob1 falls back to
 * alloc + send.  Control packets (the engine's credit packets, compulsory
 * requests and responses) go out before any later data packet to the same
 * peer and never wait for a credit.
 */
#include "btl_credit_internal.h"

#include <cstring>
#include <new>

namespace btlcredit {

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    Frag *f = static_cast<Frag *>(user_data);
    if (OPAL_UNLIKELY(status != UCS_OK) && g.up) fatal_status("data packet send", status);
    --g.outstanding;
    g.completed.push_back(f);
    ucp_request_free(request);
}

static void ctrl_done(void *request, ucs_status_t status, void *user_data)
{
    if (OPAL_UNLIKELY(status != UCS_OK) && g.up) fatal_status("credit packet send", status);
    --g.outstanding;
    g.ctrl_pool.push_back(static_cast<Ctrl *>(user_data));
    ucp_request_free(request);
}

static void fill_hdr(btl_credit_hdr_t *h, mca_btl_base_endpoint_t *ep, uint8_t tag, uint8_t kind,
                     uint32_t credits)
{
    h->tag = tag;
    h->kind = kind;
    h->version = BTL_CREDIT_WIRE_VERSION;
    h->src = g.me;
    h->credits = credits;
    h->seq = ep->tx_seq++;
}

void flush_ctrl()
{
    while (!g.ctrl_q.empty()) {
        rdrp::credit::ControlPacket pkt = g.ctrl_q.front();
        g.ctrl_q.pop_front();
        mca_btl_base_endpoint_t *ep = endpoint_for_index(pkt.peer);
        endpoint_connect(ep);
        Ctrl *c;
        if (!g.ctrl_pool.empty()) {
            c = g.ctrl_pool.back();
            g.ctrl_pool.pop_back();
        } else {
            c = new (std::nothrow) Ctrl;
            if (!c) fatal("send-failed", "out of memory for a credit packet", "");
            ++g.ctrls_made;
        }
        fill_hdr(&c->hdr, ep, 0, static_cast<uint8_t>(pkt.kind), pkt.credits);
        BTL_CREDIT_VERBOSE(50, "control kind %u credits %u -> %s", unsigned(pkt.kind),
                           pkt.credits, OPAL_NAME_PRINT(ep->name));
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.send = ctrl_done;
        p.user_data = c;
        ucs_status_ptr_t sp = ucp_am_send_nbx(ep->ep, BTL_CREDIT_AM_CTRL, &c->hdr, sizeof(c->hdr),
                                              nullptr, 0, &p);
        if (sp == nullptr) {
            g.ctrl_pool.push_back(c);
        } else if (UCS_PTR_IS_ERR(sp)) {
            fatal_status("credit packet send", UCS_PTR_STATUS(sp));
        } else {
            ++g.outstanding;
        }
    }
}

void send_now(Frag *f)
{
    mca_btl_base_endpoint_t *ep = f->ep;
    endpoint_connect(ep);
    flush_ctrl();  /* earlier control packets first (engine contract) */
    uint32_t credits = g.engine->on_send(ep->index, true);
    fill_hdr(&f->hdr, ep, f->tag, RDRP_CREDIT_PKT_DATA, credits);
    ++g.stats[MCA_BTL_CREDIT_STAT_DATA_SENT];
    BTL_CREDIT_VERBOSE(50, "data tag 0x%x %zu bytes seq %u piggyback %u -> %s", f->tag,
                       size_t(f->seg.seg_len), f->hdr.seq, credits, OPAL_NAME_PRINT(ep->name));
    ucp_request_param_t p;
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = send_done;
    p.user_data = f;
    if (ep->emulated_rma()) {
        /* up to a slot in one trip: over TCP UCX would otherwise take a
         * rendezvous round trip for every packet above 8 KiB (measured:
         * 64 KiB latency 35 us against 72); the receiver copies it into
         * the slot it was granted either way */
        p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_EAGER;
    }
    ucs_status_ptr_t sp = ucp_am_send_nbx(ep->ep, BTL_CREDIT_AM_DATA, &f->hdr, sizeof(f->hdr),
                                          f->seg.seg_addr.pval, f->seg.seg_len, &p);
    if (sp == nullptr) {
        /* done already: an immediate send's buffer goes back now; a
         * descriptor's callback runs from progress (never inside send) */
        if (f->kind == kFragSendi) frag_recycle(f);
        else g.completed.push_back(f);
    } else if (UCS_PTR_IS_ERR(sp)) {
        fatal_status("data packet send", UCS_PTR_STATUS(sp));
    } else {
        ++g.outstanding;
    }
    collect_controls();
    flush_ctrl();
}

void drain_waiting()
{
    for (size_t i = 0; i < g.waiting.size();) {
        mca_btl_base_endpoint_t *ep = g.waiting[i];
        while (!ep->pending.empty() && g.engine->can_send(ep->index)) {
            Frag *f = ep->pending.front();
            ep->pending.pop_front();
            --g.queued;
            send_now(f);
        }
        if (ep->pending.empty()) {
            ep->waiting = false;
            g.waiting[i] = g.waiting.back();
            g.waiting.pop_back();
        } else {
            ++i;
        }
    }
}

int complete_sends()
{
    thread_local std::vector<Frag *> done;
    {
        Lock lock;
        if (g.completed.empty()) return 0;
        done.swap(g.completed);
    }
    int n = 0;
    for (Frag *f : done) {
        ++n;
        if (f->kind == kFragSendi) {
            frag_put(f);
            continue;
        }
        const uint32_t flags = f->des.des_flags;
        if (f->des.des_cbfunc)
            f->des.des_cbfunc(&mca_btl_credit_module, f->ep, &f->des, OPAL_SUCCESS);
        if (flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP) frag_put(f);
    }
    done.clear();
    return n;
}

/* Finalize: a send UCX finished whose callback no progress call ran (the
 * PML's last control packet, sent right before MPI_Finalize) is done;
 * descriptors the PML handed to us go back to the pool without the
 * callback, which the PML no longer waits for.  Those the PML owns stay
 * counted by the leak check.  Lock held. */
void settle_completed_sends()
{
    size_t kept = 0;
    for (Frag *f : g.completed) {
        if (f->kind == kFragSendi || (f->des.des_flags & MCA_BTL_DES_FLAGS_BTL_OWNERSHIP)) frag_recycle(f);
        else g.completed[kept++] = f;
    }
    g.completed.resize(kept);
}

void sends_fini()
{
    for (Ctrl *c : g.ctrl_pool) delete c;
    g.ctrl_pool.clear();
    g.completed.clear();
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" int mca_btl_credit_send(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                   mca_btl_base_descriptor_t *des, mca_btl_base_tag_t tag)
{
    (void)btl;
    Frag *f = reinterpret_cast<Frag *>(des);
    f->ep = ep;
    f->tag = tag;
    f->kind = kFragSend;
    /* the callback always comes from progress, never from inside send
     * (vader does the same: ob1 bug #3845) */
    des->des_flags |= MCA_BTL_DES_SEND_ALWAYS_CALLBACK;
    Lock lock;
    if (OPAL_LIKELY(ep->pending.empty() && g.engine->can_send(ep->index))) {
        send_now(f);
        return OPAL_SUCCESS;
    }
    if (!g.engine->can_send(ep->index)) ++g.stats[MCA_BTL_CREDIT_STAT_STALLS];
    ep->pending.push_back(f);
    if (++g.queued > g.stats[MCA_BTL_CREDIT_STAT_QUEUED_MAX])
        g.stats[MCA_BTL_CREDIT_STAT_QUEUED_MAX] = g.queued;
    if (!ep->waiting) {
        ep->waiting = true;
        g.waiting.push_back(ep);
    }
    BTL_CREDIT_VERBOSE(20, "no credit towards %s: descriptor queued (%zu waiting)",
                       OPAL_NAME_PRINT(ep->name), ep->pending.size());
    return OPAL_SUCCESS;
}

extern "C" int mca_btl_credit_sendi(mca_btl_base_module_t *btl, mca_btl_base_endpoint_t *ep,
                                    opal_convertor_t *conv, void *header, size_t header_size,
                                    size_t payload_size, uint8_t order, uint32_t flags,
                                    mca_btl_base_tag_t tag, mca_btl_base_descriptor_t **des)
{
    (void)btl;
    (void)order;
    if (des) *des = nullptr;
    const size_t len = header_size + payload_size;
    if (OPAL_UNLIKELY(len > g.payload_cap)) return OPAL_ERR_OUT_OF_RESOURCE;
    Lock lock;
    if (OPAL_UNLIKELY(!ep->pending.empty() || !g.engine->can_send(ep->index))) {
        /* refuse: ob1 falls back to alloc + send, which queues */
        if (!g.engine->can_send(ep->index)) ++g.stats[MCA_BTL_CREDIT_STAT_STALLS];
        return OPAL_ERR_OUT_OF_RESOURCE;
    }
    Frag *f = frag_get(len);
    if (OPAL_UNLIKELY(!f)) return OPAL_ERR_OUT_OF_RESOURCE;
    std::memcpy(f->buf, header, header_size);
    if (payload_size > 0) {
        struct iovec iov;
        iov.iov_base = f->buf + header_size;
        iov.iov_len = payload_size;
        uint32_t iov_count = 1;
        size_t max_data = payload_size;
        if (opal_convertor_pack(conv, &iov, &iov_count, &max_data) < 0 || max_data != payload_size) {
            frag_recycle(f);
            return OPAL_ERROR;
        }
    }
    f->seg.seg_addr.pval = f->buf;
    f->seg.seg_len = len;
    f->des.des_segments = &f->seg;
    f->des.des_segment_count = 1;
    f->des.des_cbfunc = nullptr;
    f->des.des_flags = flags | MCA_BTL_DES_FLAGS_BTL_OWNERSHIP;
    f->ep = ep;
    f->tag = tag;
    f->kind = kFragSendi;
    send_now(f);
    return OPAL_SUCCESS;
}
