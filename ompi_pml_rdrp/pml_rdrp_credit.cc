/* pml/rdrp: credit-gated eager data, over btl_credit's engine. */
#include "pml_rdrp_request.h"
#include "pml_rdrp_credit.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/credit/credit_endpoint.h"

namespace rdrp {

namespace {

struct CreditState {
    std::unique_ptr<credit::CreditEndpoint> ep;
    char    *mailbox = nullptr;  /* slots x slot_size bytes: unexpected payload lives here */
    size_t   slot_size = 0;
    uint32_t npeers = 0;
    uint32_t self = 0;
};
CreditState cs;
std::vector<CreditDeferred> deferred;         /* storage of credit_deferred */
std::vector<uint32_t> deferred_peers;         /* storage of credit_deferred_peers */


/* Transmit what the engine asked for; after every engine call. */
void flush_control_slow()
{
    credit::ControlPacket pkt;
    while (cs.ep->pop_control(&pkt)) {
        ompi_proc_t *proc = reinterpret_cast<ompi_proc_t *>(
            ompi_proc_for_name(opal_process_name_t{OMPI_PROC_MY_NAME->jobid, pkt.peer}));
        if (!proc) mca_pml_rdrp_fatal("send-failed", "credit packet to an unknown process", "");
        Ctrl *c = ctrl_alloc();
        std::memset(&c->h.credit, 0, sizeof(c->h.credit));
        c->h.credit.src_vpid = cs.self;
        c->h.credit.credits = pkt.credits;
        c->h.credit.kind = static_cast<uint8_t>(pkt.kind);
        if (pkt.kind == credit::PacketKind::kCredit) ++stats.credit_packets;
        if (pkt.kind == credit::PacketKind::kReturnRequest) ++stats.credit_requests;
        ctrl_send(get_endpoint(proc), RDRP_AM_CREDIT, c, sizeof(rdrp_credit_hdr_t));
    }
}

inline void flush_control()
{
    if (OPAL_UNLIKELY(cs.ep->control_pending() != 0)) flush_control_slow();
}

void note_mailbox()
{
    uint64_t used = cs.ep->held_slots();
    if (used > stats.mailbox_hwm) stats.mailbox_hwm = used;
}

}  // namespace

credit::CreditEndpoint *credit_engine = nullptr;
uint32_t credit_npeers = 0;

bool credit_enabled() { return static_cast<bool>(cs.ep); }
uint32_t credit_self_vpid = 0;
size_t credit_slot_size() { return cs.slot_size; }

bool credit_init(uint32_t npeers, uint32_t self)
{
    const mca_pml_rdrp_params_t &p = mca_pml_rdrp_params;
    if (!p.credit) return true;
    credit::Config cfg = credit::default_config(
        npeers, p.credit_mode == 0 ? credit::Mode::kStatic : credit::Mode::kDynamic);
    if (p.credit_slots > 0) {
        cfg.slots = static_cast<uint32_t>(p.credit_slots);
    } else if (cfg.slots < 256) {
        /* small jobs: room for a 64-message window from each of a few peers
         * (2 MiB of mostly untouched memory at the default eager limit) */
        cfg.slots = 256;
    }
    if (p.credit_credit_slots > 0) {
        cfg.credit_slots = static_cast<uint32_t>(p.credit_credit_slots);
        cfg.static_slots = cfg.credit_slots;
    } else if (cfg.mode == credit::Mode::kDynamic) {
        /* A sender starts with its static quota.  Two slots (the thesis's
         * minimum) make every stream begin with a stall per couple of
         * messages until the quota has grown; where the mailbox is large
         * for the job, start each sender with a quarter of its even share
         * (measured: a 64-message window from the first iteration on). */
        uint32_t share = credit::data_region(cfg) / (4 * npeers);
        cfg.static_slots = std::max(cfg.credit_slots, std::min<uint32_t>(share, 64));
    }
    cfg.piggyback = p.credit_piggyback != 0;
    cfg.piggyback_max = 0xFFFF;  /* the eager header has 16 bits for it */
    std::string why = credit::validate(cfg);
    if (!why.empty()) {
        mca_pml_rdrp_show_help("bad-credit-config", why.c_str(),
                               "(see pml_rdrp_credit_slots, pml_rdrp_credit_credit_slots)");
        return false;
    }
    try {
        cs.ep.reset(new credit::CreditEndpoint(cfg));
    } catch (const std::exception &e) {
        mca_pml_rdrp_show_help("bad-credit-config", e.what(), "");
        return false;
    }
    cs.slot_size = std::max({p.eager_limit, p.shm ? p.shm_eager_limit : size_t(0), p.am_eager_limit,
                             p.rndv_first_chunk});
    if (cs.slot_size == 0) cs.slot_size = 1;
    /* untouched pages cost nothing: only slots that held data get memory */
    cs.mailbox = static_cast<char *>(malloc(static_cast<size_t>(cfg.slots) * cs.slot_size));
    if (!cs.mailbox) {
        cs.ep.reset();
        mca_pml_rdrp_show_help("init-failed", "cannot allocate the credit mailbox", "");
        return false;
    }
    deferred.assign(npeers, CreditDeferred{0, 0});
    deferred_peers.assign(npeers, 0);
    credit_deferred = deferred.data();
    credit_deferred_peers = deferred_peers.data();
    credit_deferred_npeers = 0;
    cs.npeers = npeers;
    cs.self = self;
    credit_self_vpid = self;
    credit_engine = cs.ep.get();
    credit_npeers = npeers;
    credit_limits_now = wire::CreditLimits{true, cs.slot_size, npeers};
    stats.mailbox_slots = cfg.slots;
    RDRP_VERBOSE(2, "credits: %s mode, %u slots of %zu bytes for %u peers, %u credit slots",
                 credit::mode_name(cfg.mode), cfg.slots, cs.slot_size, npeers, cfg.credit_slots);
    return true;
}

void credit_fini()
{
    credit_deferred_count = 0;
    credit_deferred_npeers = 0;
    credit_deferred = nullptr;
    credit_deferred_peers = nullptr;
    deferred.clear();
    deferred_peers.clear();
    credit_limits_now = wire::CreditLimits{false, 0, 0};
    credit_engine = nullptr;
    credit_npeers = 0;
    cs.ep.reset();
    free(cs.mailbox);
    cs.mailbox = nullptr;
}

unsigned credit_deferred_count = 0;

wire::CreditLimits credit_limits_now = {false, 0, 0};

CreditDeferred *credit_deferred = nullptr;
uint32_t *credit_deferred_peers = nullptr;
unsigned credit_deferred_npeers = 0;

void credit_settle()
{
    const unsigned npeers = credit_deferred_npeers;
    credit_deferred_count = 0;
    credit_deferred_npeers = 0;
    for (unsigned i = 0; i < npeers; ++i) {
        const uint32_t src = credit_deferred_peers[i];
        const CreditDeferred d = credit_deferred[src];
        credit_deferred[src] = CreditDeferred{0, 0};
        /* the mailbox holds one more packet for the moment of its arrival */
        uint64_t used = cs.ep->held_slots() + 1;
        if (cs.ep->on_data_consumed_batch(src, d.n, d.piggy) == credit::CreditEndpoint::kProtocolError) {
            bad_header("data packet beyond the credits granted (mailbox would overflow)", src);
            continue;
        }
        if (used > stats.mailbox_hwm) stats.mailbox_hwm = used;
    }
    flush_control();
}

bool credit_take(uint32_t peer, uint32_t *piggy, bool count_stall)
{
    *piggy = 0;
    if (peer < cs.npeers && !cs.ep->can_send(peer) && credit_deferred_count != 0)
        credit_settle();  /* credits piggybacked on packets not yet accounted */
    if (peer >= cs.npeers || !cs.ep->can_send(peer)) {
        if (count_stall) ++stats.credit_stalls;
        return false;
    }
    *piggy = cs.ep->on_send(peer, true);
    if (*piggy) {
        ++stats.credit_piggybacks;
        stats.credits_piggybacked += *piggy;
    }
    flush_control();
    return true;
}

int32_t credit_arrive(uint32_t src, uint32_t piggy)
{
    if (src >= cs.npeers) {
        bad_header("flow-control source out of range", src);
        return -1;
    }
    credit_settle_if_due();
    credit::PacketHeader h;
    h.kind = credit::PacketKind::kData;
    h.credits = piggy;
    int32_t slot = cs.ep->on_packet(src, h);
    if (slot < 0) {
        bad_header("data packet beyond the credits granted (mailbox would overflow)", src);
        return -1;
    }
    note_mailbox();
    flush_control();
    return slot;
}

char *credit_slot_mem(int32_t slot) { return cs.mailbox + static_cast<size_t>(slot) * cs.slot_size; }

void credit_slot_free(int32_t slot)
{
    cs.ep->on_slot_freed(slot);
    flush_control();
}

void credit_control(uint32_t src, uint8_t kind, uint32_t credits)
{
    if (src >= cs.npeers || kind == static_cast<uint8_t>(credit::PacketKind::kData) ||
        kind > static_cast<uint8_t>(credit::PacketKind::kReturnResponse)) {
        bad_header("malformed credit packet", kind);
        return;
    }
    credit_settle_if_due();
    credit::PacketHeader h;
    h.kind = static_cast<credit::PacketKind>(kind);
    h.credits = credits;
    int32_t slot = cs.ep->on_packet(src, h);
    if (slot == credit::CreditEndpoint::kProtocolError) {
        bad_header("credit packet breaks the protocol", src);
        return;
    }
    if (slot >= 0) cs.ep->on_slot_freed(slot);  /* requests/responses carry no payload */
    note_mailbox();
    flush_control();
}

ucs_status_t am_credit_cb(void *arg, const void *hdr, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param)
{
    (void)arg; (void)data; (void)len; (void)param;
    Guard guard;
    rdrp_credit_hdr_t h;
    std::memset(&h, 0, sizeof(h));
    if (hlen == sizeof(h)) std::memcpy(&h, hdr, sizeof(h));
    if (const char *bad = wire::check_credit(hlen, h, credit_limits())) {
        bad_header(bad, hlen == sizeof(h) ? h.src_vpid : hlen);
        return UCS_OK;
    }
    credit_control(h.src_vpid, h.kind, h.credits);
    return UCS_OK;
}

}  // namespace rdrp

/* MPI_T: credits this process holds towards its receivers (min / max). */
extern "C" void mca_pml_rdrp_credit_range(uint64_t *min, uint64_t *max)
{
    using namespace rdrp;
    *min = *max = 0;
    if (!credit_enabled()) return;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t p = 0; p < cs.npeers; ++p) {
        uint64_t c = cs.ep->credits(p);
        lo = std::min(lo, c);
        hi = std::max(hi, c);
    }
    *min = cs.npeers ? lo : 0;
    *max = hi;
}
