/*
 * Credit engine configuration: the mailbox partition of the thesis
 * (credit region, static region, dynamic region), its validation and the
 * default sizing.  Pure C++17, no I/O, no Open MPI types.
 *
 * Mailbox of one process (one receiver), `slots` slots in total:
 *
 *   | credit region            | data region                                 |
 *   | credit_slots x npeers    | static: static_slots x npeers | dynamic: rest|   (dynamic mode)
 *   | credit_slots x npeers    | quota x npeers (+ unused remainder)         |   (static mode)
 *
 * The credit region receives the credit packets of the processes this one
 * sends to; the data region receives every credit-consuming packet (data,
 * compulsory return request, compulsory return response).
 */
#ifndef RDRP_CREDIT_CONFIG_H
#define RDRP_CREDIT_CONFIG_H

#include <cstdint>
#include <string>

namespace rdrp::credit {

enum class Mode : uint8_t {
    kStatic = 0,   /* thesis chapter 5: equal, fixed quotas */
    kDynamic = 1,  /* thesis chapter 6: quotas follow sender activity (default) */
};

struct Config {
    Mode mode = Mode::kDynamic;
    uint32_t npeers = 0;        /* processes that may send to / receive from this one */
    uint32_t slots = 0;         /* mailbox size in slots (one packet per slot) */
    uint32_t credit_slots = 2;  /* per peer, credit region; thesis §5.3 best trade-off: 2 */
    uint32_t static_slots = 2;  /* dynamic mode: per-peer minimum quota; thesis §6.3: = credit_slots */
    bool piggyback = true;      /* attach returned credits to data packets with room (§5.4, §6.6) */
    uint32_t piggyback_max = 0xFFFF; /* largest count one piggyback carries (thesis: a 2-byte field) */
    uint32_t max_quota = 0;     /* dynamic: cap on one sender's intended quota, 0 = none (§7.4.1 variant) */
};

/* Defaults that scale with the job: credit_slots = static_slots = 2 and
 * 16 slots per peer in dynamic mode (thesis §7.5: 16 slots/process keep the
 * overhead near 3 %), 57 slots per peer in static mode (thesis §5.3), never
 * fewer than 64 slots. */
Config default_config(uint32_t npeers, Mode mode = Mode::kDynamic);

/* Empty string when the configuration can work; otherwise one sentence that
 * names the failing setting, the rule and the numbers. */
std::string validate(const Config &cfg);

/* Region sizes (valid configurations only). */
uint32_t credit_region(const Config &cfg);   /* credit_slots * npeers */
uint32_t data_region(const Config &cfg);     /* slots - credit_region */
uint32_t static_region(const Config &cfg);   /* dynamic: static_slots * npeers; static: quota * npeers */
uint32_t dynamic_region(const Config &cfg);  /* dynamic: data - static region; static: 0 */
/* Static mode: the fixed quota of every sender (lower rounding, thesis §5.2
 * footnote 3, option b).  Dynamic mode: the initial intended quota. */
uint32_t even_quota(const Config &cfg);

/* Equation 5.1: credits a receiver accumulates before it returns them,
 * (quota div (credit_slots + 1)) + 1.  Never 0. */
uint32_t return_threshold(uint32_t quota, uint32_t credit_slots);

/* Equation 6.1: credits moved from a victim to a monitored sender,
 * max(credit_slots + 1, |q_monitored - q_victim| div 2), before the caller
 * caps it to keep the victim's static slots. */
uint32_t steal_amount(uint32_t credit_slots, uint32_t q_monitored, uint32_t q_victim);

const char *mode_name(Mode mode);

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_CONFIG_H
