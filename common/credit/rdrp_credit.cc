/*
 * C interface of the credit engine (see rdrp_credit.h): converts types and
 * keeps exceptions from crossing into C.
 */
#include "rdrp_credit.h"

#include <cstring>
#include <new>
#include <string>

#include "credit_endpoint.h"

namespace rc = rdrp::credit;

struct rdrp_credit_endpoint {
    explicit rdrp_credit_endpoint(const rc::Config &cfg) : ep(cfg) {}
    rc::CreditEndpoint ep;
};

namespace {

rc::Config to_cpp(const rdrp_credit_config_t &c)
{
    rc::Config cfg;
    cfg.mode = c.mode == RDRP_CREDIT_MODE_STATIC ? rc::Mode::kStatic : rc::Mode::kDynamic;
    cfg.npeers = c.npeers;
    cfg.slots = c.slots;
    cfg.credit_slots = c.credit_slots;
    cfg.static_slots = c.static_slots;
    cfg.piggyback = c.piggyback != 0;
    cfg.piggyback_max = c.piggyback_max;
    cfg.max_quota = c.max_quota;
    return cfg;
}

void copy_error(const std::string &msg, char *err, size_t errlen)
{
    if (err == nullptr || errlen == 0)
        return;
    const size_t n = msg.size() < errlen - 1 ? msg.size() : errlen - 1;
    std::memcpy(err, msg.data(), n);
    err[n] = '\0';
}

}  // namespace

extern "C" {

void rdrp_credit_default_config(rdrp_credit_config_t *cfg, uint32_t npeers, uint32_t mode)
{
    const rc::Config d =
        rc::default_config(npeers, mode == RDRP_CREDIT_MODE_STATIC ? rc::Mode::kStatic : rc::Mode::kDynamic);
    cfg->mode = mode == RDRP_CREDIT_MODE_STATIC ? RDRP_CREDIT_MODE_STATIC : RDRP_CREDIT_MODE_DYNAMIC;
    cfg->npeers = d.npeers;
    cfg->slots = d.slots;
    cfg->credit_slots = d.credit_slots;
    cfg->static_slots = d.static_slots;
    cfg->piggyback = d.piggyback ? 1 : 0;
    cfg->piggyback_max = d.piggyback_max;
    cfg->max_quota = d.max_quota;
}

int rdrp_credit_validate(const rdrp_credit_config_t *cfg, char *err, size_t errlen)
{
    std::string msg;
    if (cfg->mode != RDRP_CREDIT_MODE_STATIC && cfg->mode != RDRP_CREDIT_MODE_DYNAMIC)
        msg = "mode must be RDRP_CREDIT_MODE_STATIC or RDRP_CREDIT_MODE_DYNAMIC";
    else
        msg = rc::validate(to_cpp(*cfg));
    copy_error(msg, err, errlen);
    return msg.empty() ? 0 : -1;
}

rdrp_credit_endpoint_t *rdrp_credit_create(const rdrp_credit_config_t *cfg, char *err, size_t errlen)
{
    if (rdrp_credit_validate(cfg, err, errlen) != 0)
        return nullptr;
    try {
        return new rdrp_credit_endpoint(to_cpp(*cfg));
    } catch (const std::bad_alloc &) {
        copy_error("out of memory", err, errlen);
    } catch (const std::exception &e) {
        copy_error(e.what(), err, errlen);
    }
    return nullptr;
}

void rdrp_credit_destroy(rdrp_credit_endpoint_t *ep) { delete ep; }

int rdrp_credit_can_send(const rdrp_credit_endpoint_t *ep, uint32_t peer)
{
    return peer < ep->ep.config().npeers && ep->ep.can_send(peer) ? 1 : 0;
}

uint32_t rdrp_credit_credits(const rdrp_credit_endpoint_t *ep, uint32_t peer)
{
    return peer < ep->ep.config().npeers ? ep->ep.credits(peer) : 0;
}

uint32_t rdrp_credit_on_send(rdrp_credit_endpoint_t *ep, uint32_t peer, int room)
{
    if (peer >= ep->ep.config().npeers)
        return 0;
    return ep->ep.on_send(peer, room != 0);
}

int32_t rdrp_credit_on_packet(rdrp_credit_endpoint_t *ep, uint32_t src, uint32_t kind, uint32_t credits)
{
    if (kind > RDRP_CREDIT_PKT_RESPONSE)
        return RDRP_CREDIT_PROTOCOL_ERROR;
    rc::PacketHeader hdr;
    hdr.kind = rc::PacketKind(kind);
    hdr.credits = credits;
    return ep->ep.on_packet(src, hdr);
}

int rdrp_credit_on_slot_freed(rdrp_credit_endpoint_t *ep, int32_t slot)
{
    return ep->ep.on_slot_freed(slot) ? 0 : -1;
}

int rdrp_credit_pop_control(rdrp_credit_endpoint_t *ep, rdrp_credit_control_t *out)
{
    rc::ControlPacket c;
    if (!ep->ep.pop_control(&c))
        return 0;
    out->peer = c.peer;
    out->kind = uint32_t(c.kind);
    out->credits = c.credits;
    return 1;
}

void rdrp_credit_get_stats(const rdrp_credit_endpoint_t *ep, rdrp_credit_stats_t *out)
{
    const rc::Stats &s = ep->ep.stats();
    out->data_sent = s.data_sent;
    out->data_received = s.data_received;
    out->credit_packets = s.credit_packets;
    out->credits_explicit = s.credits_explicit;
    out->piggybacks = s.piggybacks;
    out->credits_piggybacked = s.credits_piggybacked;
    out->requests_sent = s.requests_sent;
    out->responses_sent = s.responses_sent;
    out->credits_given_back = s.credits_given_back;
    out->credits_taken_back = s.credits_taken_back;
    out->monitoring_points = s.monitoring_points;
    out->steals = s.steals;
    out->credits_stolen = s.credits_stolen;
    out->control_deferred = s.control_deferred;
    out->protocol_errors = s.protocol_errors;
}

}  // extern "C"
