/*
 * btl/credit: validation of a received frame, as a pure function of the
 * header, the payload length and the receiver's facts.  The AM handlers
 * (btl_credit_recv.cc) call it before the credit engine or any mailbox
 * byte is touched; a non-null result is the reason the frame is rejected
 * (the handler aborts the job naming it).  Free of Open MPI and UCX types
 * so that the unit tests and the fuzz target (test/fuzz/fuzz_btl_wire.cc)
 * feed it forged frames.
 */
#ifndef MCA_BTL_CREDIT_WIRE_CHECK_H
#define MCA_BTL_CREDIT_WIRE_CHECK_H

#include <cstddef>
#include <cstdint>

#include "btl_credit_wire.h"

namespace btlcredit {

/* What the receiving process knows when a frame arrives. */
struct FrameLimits {
    uint32_t nprocs;       /* senders are vpids in [0, nprocs) ... */
    uint32_t me;           /* ... other than this process */
    size_t payload_cap;    /* largest payload one mailbox slot holds */
    uint8_t min_data_tag;  /* lowest upper-layer tag a data frame may carry (MCA_BTL_TAG_PML) */
};

/* A frame on BTL_CREDIT_AM_DATA (data = true) or BTL_CREDIT_AM_CTRL.
 * The sequence number is checked by the caller against its per-sender
 * count (state, not a property of the frame). */
inline const char *check_frame(bool data, size_t hlen, const btl_credit_hdr_t &h, size_t len,
                               const FrameLimits &l)
{
    if (hlen != sizeof(btl_credit_hdr_t)) return "header length";
    if (h.version != BTL_CREDIT_WIRE_VERSION) return "wire version (different btl/credit builds in one job?)";
    if (h.src >= l.nprocs || h.src == l.me) return "sender";
    if (data) {
        if (h.kind != RDRP_CREDIT_PKT_DATA) return "data packet kind";
        if (len > l.payload_cap) return "packet larger than a mailbox slot";
        if (h.tag < l.min_data_tag) return "upper-layer tag";
    } else {
        if (len != 0 || h.kind == RDRP_CREDIT_PKT_DATA || h.kind > RDRP_CREDIT_PKT_RESPONSE)
            return "control packet kind";
    }
    return nullptr;
}

/* A put on BTL_CREDIT_AM_PUT, before the receiver looks the region up
 * (rdrp_ucx_reg_covers then checks the id and the range).  An address
 * range that wraps is refused here, so the lookup's arithmetic is safe. */
inline const char *check_put(size_t hlen, const btl_credit_put_hdr_t &h, size_t len,
                             const FrameLimits &l)
{
    if (hlen != sizeof(btl_credit_put_hdr_t)) return "put header length";
    if (h.version != BTL_CREDIT_WIRE_VERSION) return "wire version (different btl/credit builds in one job?)";
    if (h.src >= l.nprocs || h.src == l.me) return "sender";
    if (h.region_id == 0) return "put without a registration";
    if (len > UINT64_MAX - h.addr) return "put range wraps the address space";
    return nullptr;
}

/* A window get's request (no payload), before anything is read or sent. */
inline const char *check_get_req(size_t hlen, const btl_credit_get_req_t &h, size_t len,
                                 const FrameLimits &l)
{
    if (hlen != sizeof(btl_credit_get_req_t)) return "get request header length";
    if (h.version != BTL_CREDIT_WIRE_VERSION) return "wire version (different btl/credit builds in one job?)";
    if (h.src >= l.nprocs || h.src == l.me) return "sender";
    if (len != 0) return "get request with a payload";
    if (h.region_id == 0) return "get without a registration";
    if (h.len > UINT64_MAX - h.addr) return "get range wraps the address space";
    return nullptr;
}

/* Its answer (the token is checked against the gets in flight). */
inline const char *check_get_rep(size_t hlen, const btl_credit_get_rep_t &h, const FrameLimits &l)
{
    if (hlen != sizeof(btl_credit_get_rep_t)) return "get reply header length";
    if (h.version != BTL_CREDIT_WIRE_VERSION) return "wire version (different btl/credit builds in one job?)";
    if (h.src >= l.nprocs || h.src == l.me) return "sender";
    return nullptr;
}

}  // namespace btlcredit

#endif /* MCA_BTL_CREDIT_WIRE_CHECK_H */
