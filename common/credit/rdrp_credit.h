/*
 * C interface of the rdrp credit engine, for the btl/credit component and
 * pml/rdrp (which are C or C-linkage code).  A thin wrapper over
 * rdrp::credit::CreditEndpoint (credit_endpoint.h): same calls, same
 * contract, documented there.  No function throws or aborts; none does I/O.
 * Not thread-safe: the caller serialises access per endpoint.
 */
#ifndef RDRP_CREDIT_H
#define RDRP_CREDIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDRP_CREDIT_MODE_STATIC  0
#define RDRP_CREDIT_MODE_DYNAMIC 1

/* Packet kinds (the flow-control field of the wire header). */
#define RDRP_CREDIT_PKT_DATA     0  /* credits = piggybacked credits */
#define RDRP_CREDIT_PKT_CREDIT   1  /* credits = granted; needs no credit */
#define RDRP_CREDIT_PKT_REQUEST  2  /* compulsory return request */
#define RDRP_CREDIT_PKT_RESPONSE 3  /* compulsory return response; credits = handed back */

#define RDRP_CREDIT_NO_SLOT        (-1)
#define RDRP_CREDIT_PROTOCOL_ERROR (-2)

typedef struct rdrp_credit_config {
    uint32_t mode;           /* RDRP_CREDIT_MODE_* */
    uint32_t npeers;
    uint32_t slots;          /* mailbox slots */
    uint32_t credit_slots;   /* per peer */
    uint32_t static_slots;   /* per peer, dynamic mode */
    uint32_t piggyback;      /* 0 / 1 */
    uint32_t piggyback_max;  /* largest piggybacked count */
    uint32_t max_quota;      /* 0 = no cap */
} rdrp_credit_config_t;

typedef struct rdrp_credit_control {
    uint32_t peer;
    uint32_t kind;     /* RDRP_CREDIT_PKT_CREDIT / _REQUEST / _RESPONSE */
    uint32_t credits;
} rdrp_credit_control_t;

/* Counters, same meaning as rdrp::credit::Stats. */
typedef struct rdrp_credit_stats {
    uint64_t data_sent, data_received;
    uint64_t credit_packets, credits_explicit, piggybacks, credits_piggybacked;
    uint64_t requests_sent, responses_sent, credits_given_back, credits_taken_back;
    uint64_t monitoring_points, steals, credits_stolen, control_deferred, protocol_errors;
} rdrp_credit_stats_t;

typedef struct rdrp_credit_endpoint rdrp_credit_endpoint_t;

/* Defaults scaled to npeers (credit_config.h default_config). */
void rdrp_credit_default_config(rdrp_credit_config_t *cfg, uint32_t npeers, uint32_t mode);
/* 0 if cfg can work; otherwise -1 and a one-sentence reason in err
 * (truncated to errlen, always NUL-terminated when errlen > 0). */
int rdrp_credit_validate(const rdrp_credit_config_t *cfg, char *err, size_t errlen);
/* NULL on an invalid configuration (reason in err) or out of memory. */
rdrp_credit_endpoint_t *rdrp_credit_create(const rdrp_credit_config_t *cfg, char *err, size_t errlen);
void rdrp_credit_destroy(rdrp_credit_endpoint_t *ep);

int rdrp_credit_can_send(const rdrp_credit_endpoint_t *ep, uint32_t peer);
uint32_t rdrp_credit_credits(const rdrp_credit_endpoint_t *ep, uint32_t peer);
/* Takes the credit of a data packet to peer; returns the credits to
 * piggyback on it (0 unless room != 0). */
uint32_t rdrp_credit_on_send(rdrp_credit_endpoint_t *ep, uint32_t peer, int room);
/* Slot >= 0 for a data packet, RDRP_CREDIT_NO_SLOT for a control packet,
 * RDRP_CREDIT_PROTOCOL_ERROR if the packet breaks the protocol. */
int32_t rdrp_credit_on_packet(rdrp_credit_endpoint_t *ep, uint32_t src, uint32_t kind, uint32_t credits);
/* 0 on success, -1 if slot is not in use. */
int rdrp_credit_on_slot_freed(rdrp_credit_endpoint_t *ep, int32_t slot);
/* 1 and *out filled if a control packet is waiting, else 0. */
int rdrp_credit_pop_control(rdrp_credit_endpoint_t *ep, rdrp_credit_control_t *out);
void rdrp_credit_get_stats(const rdrp_credit_endpoint_t *ep, rdrp_credit_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* RDRP_CREDIT_H */
