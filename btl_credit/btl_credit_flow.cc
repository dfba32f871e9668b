/*
 * btl/credit: the credit engine's configuration, life cycle and counters.
 * The engine (credit_endpoint.h) decides; this file only sizes it from
 * the MCA parameters, keeps its control output in order and reads its
 * statistics for MPI_T.
 */
#include "btl_credit_internal.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace btlcredit {

namespace rc = rdrp::credit;

/* The configuration the parameters ask for.  credit_slots = 0 means the
 * engine's 2, or 1 when the requested mailbox is too small for 2 per peer
 * (tiny mailboxes are a supported way to make credits run out). */
static rc::Config make_config(uint32_t npeers, std::string *why)
{
    const mca_btl_credit_params_t &p = mca_btl_credit_params;
    rc::Config cfg = rc::default_config(
        npeers, p.mode == MCA_BTL_CREDIT_MODE_STATIC ? rc::Mode::kStatic : rc::Mode::kDynamic);
    if (p.slots > 0) cfg.slots = static_cast<uint32_t>(p.slots);
    cfg.piggyback = p.piggyback != 0;
    if (p.credit_slots > 0) {
        cfg.credit_slots = cfg.static_slots = static_cast<uint32_t>(p.credit_slots);
        *why = rc::validate(cfg);
        return cfg;
    }
    *why = rc::validate(cfg);
    if (!why->empty()) {
        rc::Config one = cfg;
        one.credit_slots = one.static_slots = 1;
        if (rc::validate(one).empty()) {
            why->clear();
            return one;
        }
    }
    return cfg;
}

bool flow_init(std::string *why)
{
    if (g.npeers == 0) return true;  /* alone in the job: nothing to control */
    rc::Config cfg = make_config(g.npeers, why);
    if (!why->empty()) return false;
    try {
        g.engine.reset(new rc::CreditEndpoint(cfg));
    } catch (const std::exception &e) {
        *why = e.what();
        return false;
    }
    g.slots = cfg.slots;
    g.slot_meta.assign(rc::data_region(cfg), SlotMeta{});
    g.rx_seq.assign(g.npeers, 0);
    /* untouched pages cost nothing: only slots that held data get memory */
    g.mailbox = static_cast<char *>(std::malloc(static_cast<size_t>(cfg.slots) * g.slot_size));
    if (!g.mailbox) {
        *why = "cannot allocate the mailbox of " + std::to_string(cfg.slots) + " x " +
               std::to_string(g.slot_size) + " bytes";
        g.engine.reset();
        return false;
    }
    g.stats[MCA_BTL_CREDIT_STAT_MAILBOX_SLOTS] = cfg.slots;
    BTL_CREDIT_VERBOSE(2, "%s mode: %u peers, mailbox %u slots x %zu bytes (credit region %u, "
                       "data region %u), credit_slots %u, piggyback %s",
                       rc::mode_name(cfg.mode), cfg.npeers, cfg.slots, g.slot_size,
                       rc::credit_region(cfg), rc::data_region(cfg), cfg.credit_slots,
                       cfg.piggyback ? "on" : "off");
    return true;
}

void flow_fini()
{
    g.engine.reset();
    std::free(g.mailbox);
    g.mailbox = nullptr;
    g.slot_meta.clear();
    g.arrivals.clear();
    g.ctrl_q.clear();
}

void collect_controls()
{
    if (OPAL_LIKELY(g.engine->control_pending() == 0)) return;
    rc::ControlPacket pkt;
    while (g.engine->pop_control(&pkt)) g.ctrl_q.push_back(pkt);
}

void note_mailbox()
{
    uint64_t used = g.engine->held_slots();
    uint64_t &hwm = g.stats[MCA_BTL_CREDIT_STAT_MAILBOX_HWM];
    if (used > hwm) hwm = used;
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" uint64_t mca_btl_credit_stat(int which)
{
    if (which < 0 || which >= MCA_BTL_CREDIT_NSTATS) return 0;
    Lock lock;
    if (!g.engine) return g.stats[which];
    const rdrp::credit::Stats &s = g.engine->stats();
    switch (which) {
    case MCA_BTL_CREDIT_STAT_CREDIT_PACKETS: return s.credit_packets;
    case MCA_BTL_CREDIT_STAT_CREDITS_EXPLICIT: return s.credits_explicit;
    case MCA_BTL_CREDIT_STAT_REQUESTS: return s.requests_sent;
    case MCA_BTL_CREDIT_STAT_RESPONSES: return s.responses_sent;
    case MCA_BTL_CREDIT_STAT_PIGGYBACKS: return s.piggybacks;
    case MCA_BTL_CREDIT_STAT_CREDITS_PIGGYBACKED: return s.credits_piggybacked;
    case MCA_BTL_CREDIT_STAT_STEALS: return s.steals;
    case MCA_BTL_CREDIT_STAT_CREDITS_MIN:
    case MCA_BTL_CREDIT_STAT_CREDITS_MAX: {
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t p = 0; p < g.npeers; ++p) {
            uint64_t c = g.engine->credits(p);
            lo = std::min(lo, c);
            hi = std::max(hi, c);
        }
        if (g.npeers == 0) lo = 0;
        return which == MCA_BTL_CREDIT_STAT_CREDITS_MIN ? lo : hi;
    }
    default: return g.stats[which];
    }
}
