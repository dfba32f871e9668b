/*
 * btl/credit: the receive side.  The AM handlers run inside
 * ucp_worker_progress (lock held): they check the header (version, sender,
 * packet order), let the engine account for the packet and, for data,
 * assign a mailbox slot into which the payload is copied (or received by
 * UCX rendezvous, for packets above UCX's eager size).  deliver() then
 * hands the slots to the PML in arrival order from the BTL's progress,
 * frees them and sends the credits the engine returns.
 */
#include "btl_credit_internal.h"
#include "btl_credit_wire_check.h"

#include <cstring>
#include <string>

namespace btlcredit {

[[noreturn]] static void bad_header(const char *what, uint64_t value, uint32_t src)
{
    std::string v = "(value " + std::to_string(value) + ", from vpid " + std::to_string(src) + ")";
    fatal("bad-header", what, v.c_str());
}

static_assert(sizeof(btl_credit_hdr_t) == MCA_BTL_CREDIT_HDR_SIZE, "wire header size");

/* Every check of a frame (check_frame: a pure function, fuzzed), then the
 * sender's packet order; returns the sender's engine index.  Nothing of
 * the frame is used before this returns. */
static uint32_t check_header(bool data, const void *header, size_t hlen, size_t len,
                             btl_credit_hdr_t *h)
{
    std::memset(h, 0, sizeof(*h));
    if (hlen == sizeof(*h)) std::memcpy(h, header, sizeof(*h));
    if (OPAL_UNLIKELY(!g.engine)) bad_header("frame before the engine is up", hlen, h->src);
    const FrameLimits limits{g.nprocs, g.me, g.payload_cap, MCA_BTL_TAG_PML};
    if (const char *bad = check_frame(data, hlen, *h, len, limits)) {
        bad_header(bad, hlen != sizeof(*h) ? hlen : data ? len : h->kind, h->src);
    }
    uint32_t index = peer_index(h->src);
    if (OPAL_UNLIKELY(h->seq != g.rx_seq[index]))
        bad_header("packet out of order (expected sequence number differs)", h->seq, h->src);
    ++g.rx_seq[index];
    return index;
}

static void rndv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    (void)length;
    if (OPAL_UNLIKELY(status != UCS_OK)) fatal_status("mailbox rendezvous receive", status);
    g.slot_meta[static_cast<size_t>(reinterpret_cast<intptr_t>(user_data))].ready = true;
    --g.outstanding;
    ucp_request_free(request);
}

static ucs_status_t am_data(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    (void)arg;
    btl_credit_hdr_t h;
    uint32_t index = check_header(true, header, hlen, len, &h);
    rdrp::credit::PacketHeader ph;
    ph.kind = rdrp::credit::PacketKind::kData;
    ph.credits = h.credits;
    int32_t slot = g.engine->on_packet(index, ph);
    if (OPAL_UNLIKELY(slot < 0))
        bad_header("data packet beyond the credits granted (the mailbox would overflow)", slot, h.src);
    collect_controls();
    ++g.stats[MCA_BTL_CREDIT_STAT_DATA_RECEIVED];
    note_mailbox();

    char *mem = g.mailbox + static_cast<size_t>(slot) * g.slot_size;
    std::memcpy(mem, &h, sizeof(h));
    SlotMeta &m = g.slot_meta[static_cast<size_t>(slot)];
    m.tag = h.tag;
    m.len = static_cast<uint32_t>(len);
    g.arrivals.push_back(slot);
    BTL_CREDIT_VERBOSE(50, "data tag 0x%x %zu bytes seq %u piggyback %u from vpid %u -> slot %d",
                       h.tag, len, h.seq, h.credits, h.src, slot);

    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        m.ready = false;
        ucp_request_param_t p;
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        p.cb.recv_am = rndv_done;
        p.user_data = reinterpret_cast<void *>(static_cast<intptr_t>(slot));
        ucs_status_ptr_t sp = ucp_am_recv_data_nbx(g.worker, data, mem + sizeof(h), len, &p);
        if (sp == nullptr) m.ready = true;
        else if (UCS_PTR_IS_ERR(sp)) fatal_status("mailbox rendezvous receive", UCS_PTR_STATUS(sp));
        else ++g.outstanding;
        return UCS_INPROGRESS;
    }
    std::memcpy(mem + sizeof(h), data, len);
    m.ready = true;
    return UCS_OK;
}

static ucs_status_t am_ctrl(void *arg, const void *header, size_t hlen, void *data, size_t len,
                            const ucp_am_recv_param_t *param)
{
    (void)arg;
    (void)data;
    (void)param;
    btl_credit_hdr_t h;
    uint32_t index = check_header(false, header, hlen, len, &h);
    rdrp::credit::PacketHeader ph;
    ph.kind = static_cast<rdrp::credit::PacketKind>(h.kind);
    ph.credits = h.credits;
    int32_t slot = g.engine->on_packet(index, ph);
    if (OPAL_UNLIKELY(slot == rdrp::credit::CreditEndpoint::kProtocolError))
        bad_header("control packet breaks the credit protocol", h.kind, h.src);
    if (slot >= 0) g.engine->on_slot_freed(slot);  /* requests / responses carry no payload */
    collect_controls();
    BTL_CREDIT_VERBOSE(50, "control kind %u credits %u seq %u from vpid %u", h.kind, h.credits,
                       h.seq, h.src);
    return UCS_OK;
}

bool recv_init()
{
    if (rdrp_ucx_set_am_handler(g.uw, BTL_CREDIT_AM_DATA, am_data, nullptr) != 0) return false;
    if (rdrp_ucx_set_am_handler(g.uw, BTL_CREDIT_AM_CTRL, am_ctrl, nullptr) != 0) return false;
    return true;
}

int deliver()
{
    Lock lock;
    if (g.delivering || g.arrivals.empty()) return 0;
    g.delivering = true;
    int n = 0;
    mca_btl_base_segment_t seg;
    mca_btl_base_descriptor_t des;
    std::memset(static_cast<void *>(&des), 0, sizeof(des));
    des.des_segments = &seg;
    des.des_segment_count = 1;
    while (!g.arrivals.empty()) {
        const int32_t slot = g.arrivals.front();
        SlotMeta &m = g.slot_meta[static_cast<size_t>(slot)];
        const mca_btl_active_message_callback_t *reg = mca_btl_base_active_message_trigger + m.tag;
        /* in order: a packet still landing (or for a tag the PML has not
         * registered yet) holds back the ones behind it */
        if (!m.ready || reg->cbfunc == nullptr) break;
        g.arrivals.pop_front();
        seg.seg_addr.pval = g.mailbox + static_cast<size_t>(slot) * g.slot_size + sizeof(btl_credit_hdr_t);
        seg.seg_len = m.len;
        des.des_segment_count = 1;
        const uint8_t tag = m.tag;
        lock.unlock();
        reg->cbfunc(&mca_btl_credit_module, tag, &des, reg->cbdata);
        lock.lock();
        m.ready = false;
        g.engine->on_slot_freed(slot);
        collect_controls();
        ++n;
    }
    g.delivering = false;
    flush_ctrl();
    return n;
}

}  // namespace btlcredit
