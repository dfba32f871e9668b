/*
 * Configuration rules of the credit engine (see credit_config.h).
 */
#include "credit_config.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace rdrp::credit {

namespace {

constexpr uint32_t kDynamicSlotsPerPeer = 16;
constexpr uint32_t kStaticSlotsPerPeer = 57;
constexpr uint32_t kMinSlots = 64;
/* Slot indices travel as int32 through the C API, and FIFO positions and
 * monitoring counters are kept in 8 bits. */
constexpr uint64_t kMaxSlots = 0x7FFFFFFFu;
constexpr uint32_t kMaxCreditSlots = 254;

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

Config default_config(uint32_t npeers, Mode mode)
{
    Config cfg;
    cfg.mode = mode;
    cfg.npeers = npeers;
    const uint32_t per_peer = mode == Mode::kDynamic ? kDynamicSlotsPerPeer : kStaticSlotsPerPeer;
    const uint64_t want = std::max<uint64_t>(uint64_t(per_peer) * npeers, kMinSlots);
    cfg.slots = uint32_t(std::min<uint64_t>(want, kMaxSlots));
    return cfg;
}

uint32_t credit_region(const Config &cfg) { return cfg.credit_slots * cfg.npeers; }

uint32_t data_region(const Config &cfg) { return cfg.slots - credit_region(cfg); }

uint32_t even_quota(const Config &cfg)
{
    uint32_t q = data_region(cfg) / cfg.npeers;
    if (cfg.mode == Mode::kDynamic && cfg.max_quota != 0)
        q = std::min(q, cfg.max_quota);
    return q;
}

uint32_t static_region(const Config &cfg)
{
    return cfg.mode == Mode::kDynamic ? cfg.static_slots * cfg.npeers : even_quota(cfg) * cfg.npeers;
}

uint32_t dynamic_region(const Config &cfg)
{
    return cfg.mode == Mode::kDynamic ? data_region(cfg) - static_region(cfg) : 0;
}

uint32_t return_threshold(uint32_t quota, uint32_t credit_slots)
{
    return quota / (credit_slots + 1) + 1;
}

uint32_t steal_amount(uint32_t credit_slots, uint32_t q_monitored, uint32_t q_victim)
{
    const uint32_t diff = q_monitored > q_victim ? q_monitored - q_victim : q_victim - q_monitored;
    return std::max(credit_slots + 1, diff / 2);
}

const char *mode_name(Mode mode) { return mode == Mode::kStatic ? "static" : "dynamic"; }

std::string validate(const Config &cfg)
{
    if (cfg.mode != Mode::kStatic && cfg.mode != Mode::kDynamic)
        return "mode must be static or dynamic";
    if (cfg.npeers == 0)
        return "npeers must be at least 1";
    if (cfg.credit_slots == 0)
        return "credit_slots must be at least 1: credit packets need a slot of their own at the "
               "sender (thesis eq. 5.2)";
    if (cfg.credit_slots > kMaxCreditSlots)
        return "credit_slots = " + num(cfg.credit_slots) + " is above the supported maximum of " +
               num(kMaxCreditSlots);
    if (cfg.slots > kMaxSlots)
        return "slots = " + num(cfg.slots) + " is above the supported maximum of " + num(kMaxSlots);
    const uint64_t credit = uint64_t(cfg.credit_slots) * cfg.npeers;
    if (uint64_t(cfg.slots) <= credit)
        return "slots = " + num(cfg.slots) + " leaves no data region: the credit region alone takes " +
               num(cfg.credit_slots) + " x " + num(cfg.npeers) + " peers = " + num(credit) + " slots";
    const uint64_t data = cfg.slots - credit;
    if (cfg.piggyback && cfg.piggyback_max == 0)
        return "piggyback_max must be at least 1 when piggybacking is on";
    if (cfg.mode == Mode::kStatic) {
        const uint64_t quota = data / cfg.npeers;
        if (quota < cfg.credit_slots)
            return "static mode: quota of " + num(quota) + " slots per sender is below credit_slots = " +
                   num(cfg.credit_slots) + " (thesis eq. 5.2); need at least " +
                   num(2 * credit) + " slots for " + num(cfg.npeers) + " peers";
        return "";
    }
    /* Dynamic mode.  The static-slot rule comes before eq. 5.2 because its
     * message says more (with static_slots >= credit_slots it implies 5.2). */
    if (cfg.static_slots == 0)
        return "dynamic mode: static_slots must be at least 1 (every sender keeps a minimum quota)";
    const uint64_t stat = uint64_t(cfg.static_slots) * cfg.npeers;
    if (data < stat)
        return "dynamic mode: " + num(cfg.npeers) + " peers need " + num(cfg.static_slots) +
               " static slots each (" + num(stat) + ") but the data region has only " + num(data) +
               " slots; need at least " + num(credit + stat) + " slots";
    if (cfg.max_quota != 0 && cfg.max_quota < cfg.static_slots)
        return "dynamic mode: max_quota = " + num(cfg.max_quota) + " is below static_slots = " +
               num(cfg.static_slots);
    if (data < credit)
        return "slots = " + num(cfg.slots) + " gives a data region of " + num(data) +
               " slots, smaller than the credit region of " + num(credit) +
               " (thesis eq. 5.2: data region >= credit region); use at least " + num(2 * credit) +
               " slots or fewer credit_slots";
    return "";
}

}  // namespace rdrp::credit
