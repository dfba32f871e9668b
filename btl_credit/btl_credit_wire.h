/*
 * btl/credit: what travels on the wire.
 *
 * Every packet is one UCX active message on the sender's endpoint to the
 * receiver, with this 16-byte header as the AM user header:
 *   data packets    (AM id BTL_CREDIT_AM_DATA): kind = RDRP_CREDIT_PKT_DATA,
 *                   tag = the upper layer's (ob1's) active-message tag,
 *                   credits = credits piggybacked back to the receiver,
 *                   payload = the descriptor's segment (ob1 header + data);
 *   control packets (AM id BTL_CREDIT_AM_CTRL): kind = CREDIT / REQUEST /
 *                   RESPONSE of the credit engine, no payload.  They never
 *                   need a credit of their own (CREDIT) or had it taken by
 *                   the engine already (REQUEST / RESPONSE).
 *   puts            (AM id BTL_CREDIT_AM_PUT): btl_put's data for memory the
 *                   receiver registered (ob1 RPUT: the receiver's PUT
 *                   message named the region and address), header
 *                   btl_credit_put_hdr_t, payload = the data, always by
 *                   UCX rendezvous so the sender's completion means the data
 *                   is in place.  No credit and no mailbox slot: the data
 *                   lands in the receive buffer the application posted,
 *                   never in memory the receiver did not offer.
 *   window gets     (AM ids BTL_CREDIT_AM_GET_REQ / _GET_REP): btl_get from
 *                   memory registered for atomics (osc/rdma's windows) where
 *                   UCX would emulate the GET fragment by fragment through
 *                   the target's progress: the origin asks (header
 *                   btl_credit_get_req_t, no payload), the target checks the
 *                   range lies in a region it registered and sends it back
 *                   (header btl_credit_get_rep_t naming the request, payload
 *                   = the data, by UCX rendezvous: the origin pulls it in
 *                   one zero-copy transfer).
 * src is the sender's vpid: the BTL 3.1 receive upcall has no endpoint, so
 * the header names the sender.  seq counts every packet (data and control)
 * of one sender->receiver direction: the engine requires in-order delivery
 * between a pair, and the receiver checks it rather than assuming it.
 */
#ifndef MCA_BTL_CREDIT_WIRE_H
#define MCA_BTL_CREDIT_WIRE_H

#include <stdint.h>

#include "common/credit/rdrp_credit.h" /* RDRP_CREDIT_PKT_* */

/* UCP AM ids (our own worker, so they collide with nobody). */
#define BTL_CREDIT_AM_DATA 1
#define BTL_CREDIT_AM_CTRL 2
#define BTL_CREDIT_AM_PUT  3
#define BTL_CREDIT_AM_GET_REQ 4
#define BTL_CREDIT_AM_GET_REP 5

typedef struct btl_credit_hdr {
    uint8_t  tag;      /* upper-layer AM tag (data packets), 0 otherwise */
    uint8_t  kind;     /* RDRP_CREDIT_PKT_* */
    uint16_t version;  /* BTL_CREDIT_WIRE_VERSION: a mismatch is reported, not misparsed */
    uint32_t src;      /* sender's vpid */
    uint32_t credits;  /* piggybacked (data) / granted / handed back (control) */
    uint32_t seq;      /* per (sender, receiver) packet number */
} btl_credit_hdr_t;

#define BTL_CREDIT_WIRE_VERSION 1

/* The header of a put: where in which of the receiver's registrations the
 * payload goes (the receiver checks both before writing). */
typedef struct btl_credit_put_hdr {
    uint16_t version;   /* BTL_CREDIT_WIRE_VERSION */
    uint16_t reserved;
    uint32_t src;       /* sender's vpid */
    uint64_t region_id; /* the receiver's registration (its handle's region_id) */
    uint64_t addr;      /* target address inside that registration */
} btl_credit_put_hdr_t;

/* A window get's request: len bytes at addr in the target's registration
 * region_id, to be answered with token. */
typedef struct btl_credit_get_req {
    uint16_t version;   /* BTL_CREDIT_WIRE_VERSION */
    uint16_t reserved;
    uint32_t src;       /* the origin's vpid */
    uint64_t region_id;
    uint64_t addr;
    uint64_t len;
    uint64_t token;     /* the origin's name for the get */
} btl_credit_get_req_t;

/* Its answer; the payload is the data. */
typedef struct btl_credit_get_rep {
    uint16_t version;   /* BTL_CREDIT_WIRE_VERSION */
    uint16_t reserved;
    uint32_t src;       /* the target's vpid */
    uint64_t token;     /* the request's */
} btl_credit_get_rep_t;

#ifdef __cplusplus
static_assert(sizeof(btl_credit_hdr_t) == 16, "wire header size (MCA_BTL_CREDIT_HDR_SIZE)");
static_assert(sizeof(btl_credit_put_hdr_t) == 24, "put header size");
static_assert(sizeof(btl_credit_get_req_t) == 40, "get request size");
static_assert(sizeof(btl_credit_get_rep_t) == 16, "get reply size");
#endif

#endif /* MCA_BTL_CREDIT_WIRE_H */
