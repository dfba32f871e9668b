/*
 * Unit and property tests for the credit engine (common/credit/credit_engine.h).
 *
 * Focused tests pin down the thesis' rules one by one (eq. 5.1 and 6.1,
 * initial state of §6.3, the static example of Fig. 5.2, monitoring points,
 * list shifts, stealing, compulsory return request/response, the piggyback
 * adjustments of Fig. 6.4).  The property tests drive several processes
 * through a model network (per-pair FIFO channels, mailboxes, data slots
 * freed in any order) with seeded random traffic and check, after every
 * single step, that
 *   - for every (receiver, sender) pair, what the receiver believes it has
 *     granted equals what the model sees: sender's credits + its
 *     credit-consuming packets not yet freed + credits on their way back;
 *   - free data slots + granted credits + credit region == mailbox size;
 *   - no mailbox holds more packets than it has slots, and no sender ever
 *     has more than credit_slots unprocessed credit packets from one
 *     receiver (the credit region never overflows);
 *   - dynamic: every intended quota >= static_slots, and they sum to the
 *     data region (stealing never touches static slots);
 *   - the engine reports no protocol error;
 * and that every sender with pending data gets it all out once traffic
 * stops (no deadlock, no starvation), with a bounded wait under a fair
 * round-robin scheduler.
 *
 * Knobs (environment):  RDRP_CREDIT_SEED=<n> first seed (default 4242),
 * RDRP_CREDIT_STEPS=<n> random steps per run (default 4000).  A failure
 * prints its configuration and seed.
 */
#include "common/credit/credit_engine.h"
#include "common/credit/rdrp_credit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace rdrp::credit;

namespace {

uint64_t env_or(const char *name, uint64_t dflt)
{
    const char *v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : dflt;
}

/* Receiver/sender outputs recorded for tests of one side alone. */
struct Recorder : ReceiverOutput, SenderOutput {
    std::vector<ControlPacket> sent;
    std::vector<uint32_t> requests;
    void send_credit_packet(uint32_t peer, uint32_t credits) override
    {
        sent.push_back(ControlPacket{peer, PacketKind::kCredit, credits});
    }
    void request_return(uint32_t peer) override { requests.push_back(peer); }
    void send_control(uint32_t peer, PacketKind kind, uint32_t credits) override
    {
        sent.push_back(ControlPacket{peer, kind, credits});
    }
};

Config dyn(uint32_t npeers, uint32_t slots, uint32_t c = 2, uint32_t s = 2)
{
    Config cfg;
    cfg.mode = Mode::kDynamic;
    cfg.npeers = npeers;
    cfg.slots = slots;
    cfg.credit_slots = c;
    cfg.static_slots = s;
    return cfg;
}

Config stat(uint32_t npeers, uint32_t slots, uint32_t c = 2)
{
    Config cfg = dyn(npeers, slots, c, c);
    cfg.mode = Mode::kStatic;
    return cfg;
}

std::vector<ControlPacket> drain(CreditEndpoint &ep)
{
    std::vector<ControlPacket> out;
    ControlPacket c;
    while (ep.pop_control(&c))
        out.push_back(c);
    return out;
}

/* --------------------------------------------------------------- formulas */

TEST(CreditFormula, Equation51MatchesThesisTable51)
{
    struct Row { uint32_t quota, slots, expect; };
    const Row rows[] = {{100, 1, 51}, {100, 2, 34}, {100, 3, 26}, {100, 4, 21}, {100, 5, 17},
                        {60, 2, 21},  {40, 2, 14},  {20, 2, 7},   {10, 2, 4},   {9, 2, 4}};
    for (const Row &r : rows)
        EXPECT_EQ(return_threshold(r.quota, r.slots), r.expect) << r.quota << "/" << r.slots;
    /* Table 5.1 prints 2 for (9, 2); eq. 5.1 itself gives 9 div 3 + 1 = 4,
     * which is what the rest of the thesis uses (the row is a typo). */
    EXPECT_EQ(return_threshold(0, 2), 1u);
}

TEST(CreditFormula, Equation61StealsAtLeastCreditSlotsPlusOne)
{
    EXPECT_EQ(steal_amount(2, 10, 10), 3u);
    EXPECT_EQ(steal_amount(2, 100, 20), 40u);
    EXPECT_EQ(steal_amount(2, 20, 100), 40u);
    EXPECT_EQ(steal_amount(4, 12, 10), 5u);
}

/* ----------------------------------------------------------------- config */

TEST(CreditConfig, DefaultsAreValidAndScaleWithPeers)
{
    for (Mode m : {Mode::kStatic, Mode::kDynamic}) {
        uint32_t prev = 0;
        for (uint32_t n : {1u, 2u, 7u, 64u, 1000u, 65536u}) {
            const Config cfg = default_config(n, m);
            EXPECT_EQ(validate(cfg), "") << mode_name(m) << " n=" << n;
            EXPECT_GE(cfg.slots, prev);
            prev = cfg.slots;
        }
        EXPECT_EQ(default_config(1000, m).slots, (m == Mode::kDynamic ? 16u : 57u) * 1000u);
    }
    EXPECT_EQ(default_config(0).npeers, 0u);
    EXPECT_NE(validate(default_config(0)), "");
}

TEST(CreditConfig, ValidatorExplainsWhatCannotWork)
{
    auto err = [](Config c) { return validate(c); };
    EXPECT_NE(err(dyn(0, 100)).find("npeers"), std::string::npos);
    EXPECT_NE(err(dyn(4, 100, 0)).find("credit_slots"), std::string::npos);
    /* 10 peers x 2 static slots need 20 data slots; 10 x 2 credit slots take 20. */
    const std::string s = err(dyn(10, 39));
    EXPECT_NE(s.find("static slots"), std::string::npos) << s;
    EXPECT_NE(s.find("need at least 40 slots"), std::string::npos) << s;
    EXPECT_EQ(err(dyn(10, 40)), "");
    EXPECT_NE(err(dyn(10, 20)).find("no data region"), std::string::npos);
    EXPECT_NE(err(dyn(10, 30, 2, 1)).find("eq. 5.2"), std::string::npos);
    EXPECT_NE(err(stat(10, 39)).find("quota of 1 slots"), std::string::npos);
    EXPECT_EQ(err(stat(10, 40)), "");
    Config pb = dyn(4, 100);
    pb.piggyback_max = 0;
    EXPECT_NE(err(pb).find("piggyback_max"), std::string::npos);
    Config cap = dyn(4, 100);
    cap.max_quota = 1;
    EXPECT_NE(err(cap).find("max_quota"), std::string::npos);
    EXPECT_THROW(CreditEndpoint{dyn(10, 39)}, std::invalid_argument);
}

/* ------------------------------------------------------------ static mode */

/* Fig. 5.2: quota 20, two credit slots -> threshold 7.  The receiver
 * returns 7 credits at the 7th and 14th freed slot; the last 6 slots cannot
 * reach the threshold again until the sender has used returned credits. */
TEST(CreditStatic, Figure52Example)
{
    const Config cfg = stat(1, 22);  // credit region 2, data region 20
    ASSERT_EQ(validate(cfg), "");
    CreditEndpoint snd(cfg), rcv(cfg);
    EXPECT_EQ(snd.credits(0), 20u);
    EXPECT_EQ(rcv.receiver().threshold(0), 7u);
    std::vector<int32_t> slots;
    for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(snd.can_send(0));
        snd.on_send(0, false);
        slots.push_back(rcv.on_packet(0, PacketHeader{PacketKind::kData, 0}));
        ASSERT_GE(slots.back(), 0);
    }
    EXPECT_FALSE(snd.can_send(0));
    EXPECT_EQ(rcv.on_packet(0, PacketHeader{PacketKind::kData, 0}), CreditEndpoint::kProtocolError);
    std::vector<uint32_t> returned;
    for (int32_t s : slots) {
        rcv.on_slot_freed(s);
        for (const ControlPacket &c : drain(rcv)) {
            EXPECT_EQ(c.kind, PacketKind::kCredit);
            returned.push_back(c.credits);
        }
    }
    EXPECT_EQ(returned, (std::vector<uint32_t>{7, 7}));
    EXPECT_EQ(rcv.receiver().retrieved(0), 6u);
    /* Credit packets never consume credits: the receiver's own credits
     * towards the sender are untouched. */
    EXPECT_EQ(rcv.credits(0), 20u);
    for (uint32_t c : returned)
        EXPECT_EQ(snd.on_packet(0, PacketHeader{PacketKind::kCredit, c}), CreditEndpoint::kNoSlot);
    EXPECT_EQ(snd.credits(0), 14u);
}

TEST(CreditStatic, PiggybackReturnsFreedSlotsAndResetsTheCount)
{
    const Config cfg = stat(2, 4 + 40);  // quota 20, threshold 7
    CreditEndpoint ep(cfg);
    for (int i = 0; i < 5; ++i) {
        const int32_t s = ep.on_packet(1, PacketHeader{PacketKind::kData, 0});
        ep.on_slot_freed(s);
    }
    EXPECT_TRUE(drain(ep).empty());
    EXPECT_EQ(ep.on_send(1, false), 0u);  // no room: nothing attached
    EXPECT_EQ(ep.on_send(1, true), 5u);
    EXPECT_EQ(ep.receiver().retrieved(1), 0u);
    EXPECT_EQ(ep.on_send(1, true), 0u);
    EXPECT_EQ(ep.on_send(0, true), 0u);   // peer 0 freed nothing
    EXPECT_EQ(ep.stats().credits_piggybacked, 5u);
}

TEST(CreditStatic, RejectsDynamicOnlyPackets)
{
    CreditEndpoint ep(stat(2, 44));
    EXPECT_EQ(ep.on_packet(0, PacketHeader{PacketKind::kReturnRequest, 0}),
              CreditEndpoint::kProtocolError);
    EXPECT_EQ(ep.on_packet(0, PacketHeader{PacketKind::kReturnResponse, 3}),
              CreditEndpoint::kProtocolError);
    EXPECT_EQ(ep.on_packet(7, PacketHeader{PacketKind::kData, 0}), CreditEndpoint::kProtocolError);
    EXPECT_FALSE(ep.on_slot_freed(0));
    EXPECT_FALSE(ep.on_slot_freed(-1));
    EXPECT_EQ(ep.stats().protocol_errors, 3u);
}

/* ----------------------------------------------------------- dynamic mode */

TEST(CreditDynamic, InitialStateFollowsSection63)
{
    const Config cfg = dyn(4, 8 + 60);  // credit 8, data 60, static 8, dynamic 52
    CreditEndpoint ep(cfg);
    const CreditReceiver &r = ep.receiver();
    EXPECT_EQ(r.free_data_slots(), 52u);
    uint32_t sum = 0;
    for (uint32_t p = 0; p < 4; ++p) {
        EXPECT_EQ(ep.credits(p), 2u);
        EXPECT_EQ(r.outstanding(p), 2u);
        EXPECT_EQ(r.intended(p), 15u);
        EXPECT_EQ(r.retrieved(p), 0u);
        EXPECT_EQ(r.piggybacked(p), 0u);
        EXPECT_FALSE(r.blocked(p));
        EXPECT_EQ(r.activity(p), Activity::kLow);
        for (uint32_t i = 0; i < 3; ++i)
            EXPECT_EQ(r.fifo().at(p, i), 1u);
        sum += r.intended(p);
    }
    EXPECT_EQ(sum, data_region(cfg));
    /* low list in increasing id order: front 0, back 3 */
    EXPECT_EQ(r.lists().front(Activity::kLow), 0u);
    EXPECT_EQ(r.lists().back(Activity::kLow), 3u);
}

TEST(CreditDynamic, IntendedQuotasSumToDataRegionWithRemainder)
{
    const Config cfg = dyn(3, 6 + 20);  // data 20 = 7 + 7 + 6
    CreditEndpoint ep(cfg);
    EXPECT_EQ(ep.receiver().intended(0), 7u);
    EXPECT_EQ(ep.receiver().intended(2), 6u);
}

TEST(CreditDynamic, ThresholdReturnsEquation51OfIntendedQuota)
{
    const Config cfg = dyn(4, 8 + 60);
    CreditEndpoint ep(cfg);
    ep.on_slot_freed(ep.on_packet(1, PacketHeader{PacketKind::kData, 0}));
    const auto out = drain(ep);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].peer, 1u);
    EXPECT_EQ(out[0].kind, PacketKind::kCredit);
    EXPECT_EQ(out[0].credits, return_threshold(15, 2));  // 6
    EXPECT_EQ(ep.receiver().outstanding(1), 2u - 1u + 6u);
    EXPECT_EQ(ep.receiver().free_data_slots(), 52u + 1u - 6u);
    /* the granted amount joins the FIFO tail; the next heads are the old 1s */
    EXPECT_EQ(ep.receiver().fifo().at(1, 0), 1u);
    EXPECT_EQ(ep.receiver().fifo().at(1, 1), 1u);
    EXPECT_EQ(ep.receiver().fifo().at(1, 2), 6u);
}

/* Fig. 6.4 block 2: fewer credits than eq. 5.1 asks for when available_slots
 * is short; the FIFO records what was actually granted. */
TEST(CreditDynamic, GrantIsCappedByAvailableSlots)
{
    const Config cfg = dyn(2, 4 + 4 + 1);  // dynamic region of 1 slot
    CreditEndpoint ep(cfg);
    ASSERT_EQ(ep.receiver().free_data_slots(), 1u);
    ep.on_slot_freed(ep.on_packet(0, PacketHeader{PacketKind::kData, 0}));
    const auto out = drain(ep);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].credits, 2u);  // eq. 5.1 of intended 3 would be 2, and 2 are free
    ep.on_slot_freed(ep.on_packet(1, PacketHeader{PacketKind::kData, 0}));
    const auto out2 = drain(ep);
    ASSERT_EQ(out2.size(), 1u);
    EXPECT_EQ(out2[0].credits, 1u);  // only one slot left
    EXPECT_EQ(ep.receiver().fifo().at(1, 2), 1u);
    EXPECT_EQ(ep.receiver().free_data_slots(), 0u);
}

TEST(CreditActivity, ShiftRotatesHighMediumLow)
{
    ActivityLists l(3);
    l.move_to_front(0, Activity::kHigh);
    l.move_to_front(1, Activity::kMedium);
    l.move_to_front(2, Activity::kMedium);
    ASSERT_TRUE(l.empty(Activity::kLow));
    l.shift();
    EXPECT_TRUE(l.empty(Activity::kHigh));
    EXPECT_EQ(l.level(0), Activity::kMedium);
    EXPECT_EQ(l.level(1), Activity::kLow);
    EXPECT_EQ(l.level(2), Activity::kLow);
    EXPECT_EQ(l.front(Activity::kLow), 2u);  // order inside a list is kept
    EXPECT_EQ(l.back(Activity::kLow), 1u);
    l.move_to_front(1, Activity::kNull);
    EXPECT_EQ(l.size(Activity::kNull), 1u);
    EXPECT_EQ(l.size(Activity::kLow), 1u);
}

/* A receiver-side fixture: one receiver, npeers senders that never hold
 * anything back (each freed slot is reported at once). */
class CreditReceiverOnly : public ::testing::Test {
protected:
    void make(const Config &cfg)
    {
        cfg_ = cfg;
        rec_ = Recorder{};
        stats_ = Stats{};
        rx_ = std::make_unique<CreditReceiver>(cfg_, rec_, stats_);
    }
    /* Sender `p` consumed one more credit and its slot came free. */
    void packet_from(uint32_t p) { rx_->on_retrieved(p); }
    /* Rounds completed by p since start = thresholds reached. */
    Config cfg_;
    Recorder rec_;
    Stats stats_;
    std::unique_ptr<CreditReceiver> rx_;
};

TEST_F(CreditReceiverOnly, MonitoringPointEveryCreditSlotsPlusOneThresholds)
{
    make(dyn(8, 16 + 200));  // c = 2: a monitoring point every 3 thresholds
    auto thresholds = [&] { return stats_.thresholds_regular; };
    while (thresholds() < 3)
        packet_from(5);
    EXPECT_EQ(stats_.monitoring_points, 1u);
    EXPECT_EQ(rx_->activity(5), Activity::kMedium);
    while (thresholds() < 6)
        packet_from(5);
    EXPECT_EQ(rx_->activity(5), Activity::kHigh);
    EXPECT_EQ(stats_.steals, 0u);
    /* Third monitoring point: already high, the low list is not empty, so it
     * steals from the oldest low-activity sender (the back: 7). */
    const uint32_t before5 = rx_->intended(5), before7 = rx_->intended(7);
    while (thresholds() < 9)
        packet_from(5);
    EXPECT_EQ(stats_.steals, 1u);
    const uint32_t moved = rx_->intended(5) - before5;
    EXPECT_EQ(moved, std::min(steal_amount(2, before5, before7), before7 - 2));
    EXPECT_EQ(rx_->intended(7), before7 - moved);
    EXPECT_EQ(rx_->activity(7), Activity::kMedium);  // still has dynamic credits
}

TEST_F(CreditReceiverOnly, StealingNeverTakesStaticSlotsAndEmptiesIntoNullList)
{
    make(dyn(4, 8 + 100, 2, 3));
    uint64_t guard = 0;
    /* Only sender 0 is active: it ends up with everything but the others'
     * static slots. */
    while (rx_->intended(0) < data_region(cfg_) - 3 * 3 && ++guard < 100000) {
        packet_from(0);
        for (uint32_t p = 0; p < 4; ++p)
            ASSERT_GE(rx_->intended(p), 3u);
    }
    ASSERT_LT(guard, 100000u) << "sender 0 never collected the dynamic credits";
    uint32_t sum = 0;
    for (uint32_t p = 0; p < 4; ++p)
        sum += rx_->intended(p);
    EXPECT_EQ(sum, data_region(cfg_));
    for (uint32_t p = 1; p < 4; ++p) {
        EXPECT_EQ(rx_->intended(p), 3u);
        EXPECT_EQ(rx_->activity(p), Activity::kNull);
    }
    /* The victims never held more than their static slots (they sent
     * nothing), so nobody was asked to return anything. */
    EXPECT_TRUE(rec_.requests.empty());
}

TEST_F(CreditReceiverOnly, ListsShiftWhenLowIsEmpty)
{
    make(dyn(2, 4 + 40));
    /* Both senders equally active: both climb to high; the low list empties
     * and the next monitoring point of a high sender shifts the lists. */
    for (int i = 0; i < 400; ++i) {
        packet_from(0);
        packet_from(1);
    }
    EXPECT_GT(stats_.list_shifts, 0u);
    EXPECT_EQ(rx_->intended(0) + rx_->intended(1), data_region(cfg_));
}

TEST_F(CreditReceiverOnly, MaxQuotaCapsTheMonitoredSender)
{
    Config cfg = dyn(4, 8 + 200);
    cfg.max_quota = 60;
    make(cfg);
    for (int i = 0; i < 5000; ++i)
        packet_from(0);
    EXPECT_EQ(rx_->intended(0), 60u);
}

/* Fig. 6.4 block 5: threshold reached the piggybacking way; 2 credits due,
 * 1 already piggybacked -> 1 more piggybacked (adjustment by deficit). */
TEST_F(CreditReceiverOnly, PiggybackAdjustmentByDeficit)
{
    make(dyn(2, 4 + 40));
    /* intended 5 -> eq. 5.1 = 2.  Three regular thresholds (the initial
     * ones) each grant 2, so the FIFO becomes [2, 2, 2]. */
    rx_->test_set(0, 5, 4, 0, 0);
    for (int i = 0; i < 3; ++i)
        packet_from(0);
    ASSERT_EQ(rec_.sent.back().credits, 2u);
    ASSERT_EQ(rx_->threshold(0), 2u);
    /* One packet freed and 1 credit already piggybacked: 1 + 1 reaches the
     * head of 2 the piggybacking way. */
    const size_t explicit_before = rec_.sent.size();
    rx_->test_set(0, 5, rx_->outstanding(0), 1, 1);
    const uint64_t deficit = stats_.adjust_deficit;
    EXPECT_EQ(rx_->piggyback_for(0), 1u);
    EXPECT_EQ(stats_.adjust_deficit, deficit + 1);
    EXPECT_EQ(stats_.thresholds_piggyback, 1u);
    EXPECT_EQ(rec_.sent.size(), explicit_before);  // nothing explicit
    EXPECT_EQ(rx_->fifo().at(0, 2), 2u);            // piggybacked 1 + 1 granted
    EXPECT_EQ(rx_->retrieved(0), 0u);
    EXPECT_EQ(rx_->piggybacked(0), 0u);
}

/* Fig. 6.4 block 6: 2 credits due but 3 already piggybacked: nothing is
 * returned and the new current_threshold grows by the excess of 1. */
TEST_F(CreditReceiverOnly, PiggybackAdjustmentByExcess)
{
    make(dyn(2, 4 + 40));
    rx_->test_set(0, 5, 4, 0, 0);
    for (int i = 0; i < 3; ++i)
        packet_from(0);  // FIFO -> [2, 2, 2]
    ASSERT_EQ(rx_->threshold(0), 2u);
    rx_->test_set(0, 5, rx_->outstanding(0), 0, 3);
    const uint32_t next_head = rx_->fifo().at(0, 1);
    EXPECT_EQ(rx_->piggyback_for(0), 0u);
    EXPECT_EQ(stats_.adjust_excess, 1u);
    EXPECT_EQ(rx_->threshold(0), next_head + 1);
    EXPECT_EQ(rx_->fifo().at(0, 2), 2u);
    /* Overshoot beyond the head (3 - 2) is carried, not dropped (rule R1). */
    EXPECT_EQ(rx_->retrieved(0), 1u);
}

TEST_F(CreditReceiverOnly, PiggybackBelowThresholdReturnsFreedSlots)
{
    make(dyn(2, 4 + 40));
    rx_->test_set(0, 30, 10, 0, 0);
    for (int i = 0; i < 3; ++i)
        packet_from(0);  // heads 1,1,1 reached; FIFO now holds eq. 5.1(30) = 11 x3
    const uint32_t avail = rx_->free_data_slots();
    for (int i = 0; i < 4; ++i)
        packet_from(0);
    EXPECT_EQ(rx_->retrieved(0), 4u);
    EXPECT_EQ(rx_->piggyback_for(0), 4u);
    EXPECT_EQ(rx_->retrieved(0), 0u);
    EXPECT_EQ(rx_->piggybacked(0), 4u);
    EXPECT_EQ(rx_->free_data_slots(), avail);  // +4 freed, -4 piggybacked
}

/* ------------------------------------------------- compulsory credit return */

/* Two endpoints wired back to back through the control queues. */
struct Pair {
    explicit Pair(const Config &cfg) : a(cfg), b(cfg) {}
    /* Deliver every queued control packet, both ways, until quiet. */
    void settle()
    {
        for (bool moved = true; moved;) {
            moved = false;
            ControlPacket c;
            while (a.pop_control(&c)) {
                moved = true;
                log.push_back(c);
                b.on_packet(c.peer, PacketHeader{c.kind, c.credits});
            }
            while (b.pop_control(&c)) {
                moved = true;
                log.push_back(c);
                a.on_packet(c.peer, PacketHeader{c.kind, c.credits});
            }
        }
    }
    CreditEndpoint a, b;
    std::vector<ControlPacket> log;
};

TEST(CreditCompulsory, RequestResponseCycleReturnsExcessAndUnblocks)
{
    /* Receiver B with 3 senders: A is peer 0 (the future victim, holding
     * extra credits), peers 1 and 2 exist only inside B's receiver. */
    const Config cfg = dyn(3, 6 + 60);
    CreditEndpoint b(cfg);
    /* Give A (peer 0) a big pile first: 1 packet -> eq. 5.1(20) = 7 credits. */
    b.on_slot_freed(b.on_packet(0, PacketHeader{PacketKind::kData, 0}));
    auto out = drain(b);
    ASSERT_EQ(out.size(), 1u);
    const uint32_t a_credits = 2 - 1 + out[0].credits;  // what A now holds
    ASSERT_EQ(b.receiver().outstanding(0), a_credits);
    /* Peer 1 becomes very active until A (back of the low list is 2, then 0)
     * has been stolen down to its static slots. */
    uint64_t guard = 0;
    std::vector<ControlPacket> reqs;
    while (reqs.empty() && ++guard < 10000) {
        b.on_slot_freed(b.on_packet(1, PacketHeader{PacketKind::kData, 0}));
        for (const ControlPacket &c : drain(b))  // credit packets to peer 1 are dropped:
            if (c.kind == PacketKind::kReturnRequest)  // only B's receiver side matters here
                reqs.push_back(c);
    }
    ASSERT_EQ(reqs.size(), 1u) << "no compulsory request after " << guard << " packets";
    EXPECT_EQ(reqs[0].peer, 0u);
    EXPECT_TRUE(b.receiver().blocked(0));
    EXPECT_EQ(b.receiver().intended(0), 2u);
    EXPECT_EQ(b.receiver().activity(0), Activity::kNull);
    EXPECT_EQ(b.credits(0), 1u);  // the request took one of B's credits towards A

    /* A's side: its own endpoint answers with max(n - static_slots, 0). */
    CreditEndpoint a(cfg);
    a.on_packet(0, PacketHeader{PacketKind::kCredit, a_credits - 2});  // A holds a_credits
    ASSERT_EQ(a.credits(0), a_credits);
    EXPECT_EQ(a.on_packet(0, PacketHeader{PacketKind::kReturnRequest, 0}), CreditEndpoint::kNoSlot);
    /* The request consumed one of B's credits at A, so A's receiver side may
     * return credits too; the response is the last packet. */
    auto resp = drain(a);
    ASSERT_FALSE(resp.empty());
    std::swap(resp[0], resp.back());
    EXPECT_EQ(resp[0].kind, PacketKind::kReturnResponse);
    EXPECT_EQ(resp[0].peer, 0u);
    EXPECT_EQ(resp[0].credits, a_credits - 2);
    EXPECT_EQ(a.credits(0), 1u);  // static_slots - 1
    /* The request cost one of B's credits at A: accounted like a data packet. */
    uint32_t a_regranted = 0;
    for (size_t i = 1; i < resp.size(); ++i)
        a_regranted += resp[i].credits;
    EXPECT_EQ(a.receiver().outstanding(0), 1u + a_regranted);

    /* B takes the response: available_slots grows, blocked clears. */
    const uint32_t avail = b.receiver().free_data_slots();
    EXPECT_EQ(b.on_packet(0, PacketHeader{PacketKind::kReturnResponse, resp[0].credits}),
              CreditEndpoint::kNoSlot);
    EXPECT_FALSE(b.receiver().blocked(0));
    const auto after = drain(b);
    uint32_t regranted = 0;
    for (const ControlPacket &c : after)
        regranted += c.peer == 0 && c.kind == PacketKind::kCredit ? c.credits : 0;
    EXPECT_EQ(b.receiver().free_data_slots() + regranted, avail + 1 + (a_credits - 2));
    EXPECT_EQ(b.receiver().outstanding(0), 1u + regranted);
    EXPECT_EQ(b.stats().protocol_errors, 0u);
}

TEST(CreditCompulsory, ResponseWaitsForACreditAndRequestGoesFirst)
{
    const Config cfg = dyn(2, 4 + 20);
    Recorder out;
    Stats stats;
    CreditSender tx(cfg, out, stats);
    /* Spend both credits towards peer 1. */
    tx.on_data_sent(1);
    tx.on_data_sent(1);
    ASSERT_FALSE(tx.can_send(1));
    tx.on_return_request(1);       // peer 1 wants our excess back
    tx.request_return(1);          // and our receiver side wants peer 1's
    EXPECT_TRUE(tx.response_parked(1));
    EXPECT_TRUE(tx.request_parked(1));
    EXPECT_TRUE(out.sent.empty()) << "nothing goes to peer 1 without a credit";
    EXPECT_EQ(stats.control_deferred, 2u);
    /* One credit arrives: the request goes first, the response keeps waiting. */
    tx.on_credits(1, 1);
    ASSERT_EQ(out.sent.size(), 1u);
    EXPECT_EQ(out.sent[0].kind, PacketKind::kReturnRequest);
    EXPECT_TRUE(tx.response_parked(1));
    EXPECT_FALSE(tx.can_send(1));
    /* Three more: the response goes out with max(3 - static_slots, 0) = 1
     * and leaves static_slots - 1 = 1. */
    tx.on_credits(1, 3);
    ASSERT_EQ(out.sent.size(), 2u);
    EXPECT_EQ(out.sent[1].kind, PacketKind::kReturnResponse);
    EXPECT_EQ(out.sent[1].credits, 1u);
    EXPECT_EQ(tx.credits(1), 1u);
    EXPECT_FALSE(tx.response_parked(1));
    /* A sender below its static slots hands back nothing but still answers. */
    tx.on_return_request(1);
    ASSERT_EQ(out.sent.size(), 3u);
    EXPECT_EQ(out.sent[2].credits, 0u);
    EXPECT_EQ(tx.credits(1), 0u);
    EXPECT_EQ(stats.protocol_errors, 0u);
}

/* ---------------------------------------------------------------- C API */

TEST(CreditCApi, RoundTrip)
{
    rdrp_credit_config_t cfg;
    rdrp_credit_default_config(&cfg, 3, RDRP_CREDIT_MODE_DYNAMIC);
    char err[128];
    ASSERT_EQ(rdrp_credit_validate(&cfg, err, sizeof err), 0) << err;
    rdrp_credit_endpoint_t *ep = rdrp_credit_create(&cfg, err, sizeof err);
    ASSERT_NE(ep, nullptr);
    EXPECT_EQ(rdrp_credit_can_send(ep, 1), 1);
    EXPECT_EQ(rdrp_credit_credits(ep, 1), 2u);
    EXPECT_EQ(rdrp_credit_on_send(ep, 1, 1), 0u);
    const int32_t slot = rdrp_credit_on_packet(ep, 2, RDRP_CREDIT_PKT_DATA, 0);
    ASSERT_GE(slot, 0);
    EXPECT_EQ(rdrp_credit_on_slot_freed(ep, slot), 0);
    EXPECT_EQ(rdrp_credit_on_slot_freed(ep, slot), -1);
    rdrp_credit_control_t c;
    ASSERT_EQ(rdrp_credit_pop_control(ep, &c), 1);
    EXPECT_EQ(c.peer, 2u);
    EXPECT_EQ(c.kind, uint32_t(RDRP_CREDIT_PKT_CREDIT));
    EXPECT_EQ(rdrp_credit_pop_control(ep, &c), 0);
    EXPECT_EQ(rdrp_credit_on_packet(ep, 0, 9, 0), RDRP_CREDIT_PROTOCOL_ERROR);
    rdrp_credit_stats_t st;
    rdrp_credit_get_stats(ep, &st);
    EXPECT_EQ(st.credit_packets, 1u);
    EXPECT_EQ(st.data_sent, 1u);
    rdrp_credit_destroy(ep);

    cfg.slots = 3;
    EXPECT_EQ(rdrp_credit_create(&cfg, err, 16), nullptr);
    EXPECT_EQ(std::string(err).size(), 15u);  // truncated, NUL-terminated
    cfg.mode = 7;
    EXPECT_EQ(rdrp_credit_validate(&cfg, err, sizeof err), -1);
}

/* ====================================================== property testing */

/* Model network of n processes.  Endpoint peer numbering leaves out the
 * process itself: peer p of rank r is rank p (p < r) or p + 1. */
class World {
public:
    struct Packet {
        uint32_t src, dst;
        PacketHeader hdr;
    };

    World(uint32_t n, const Config &base) : n_(n), cfg_(base)
    {
        cfg_.npeers = n - 1;
        for (uint32_t r = 0; r < n; ++r)
            ep_.push_back(std::make_unique<CreditEndpoint>(cfg_));
        chan_.resize(size_t(n) * n);
        mailbox_.resize(n);
        held_.resize(n);
        pending_.assign(size_t(n) * n, 0);
        consuming_.assign(size_t(n) * n, 0);
        handed_back_.assign(size_t(n) * n, 0);
        credits_in_transit_.assign(size_t(n) * n, 0);
        credit_pkts_.assign(size_t(n) * n, 0);
    }

    uint32_t n() const { return n_; }
    const Config &cfg() const { return cfg_; }
    CreditEndpoint &ep(uint32_t r) { return *ep_[r]; }
    uint32_t peer(uint32_t me, uint32_t other) const { return other < me ? other : other - 1; }
    uint32_t rank(uint32_t me, uint32_t p) const { return p < me ? p : p + 1; }
    size_t idx(uint32_t a, uint32_t b) const { return size_t(a) * n_ + b; }

    void add_pending(uint32_t s, uint32_t d, uint64_t packets) { pending_[idx(s, d)] += packets; }
    uint64_t pending(uint32_t s, uint32_t d) const { return pending_[idx(s, d)]; }
    uint64_t pending_total() const { return std::accumulate(pending_.begin(), pending_.end(), uint64_t(0)); }
    bool channel_empty(uint32_t s, uint32_t d) const { return chan_[idx(s, d)].empty(); }
    bool mailbox_empty(uint32_t r) const { return mailbox_[r].empty(); }
    size_t held(uint32_t r) const { return held_[r].size(); }
    uint64_t delivered() const { return delivered_; }
    bool quiet() const
    {
        for (uint32_t r = 0; r < n_; ++r)
            if (!mailbox_[r].empty() || !held_[r].empty())
                return false;
        for (const auto &c : chan_)
            if (!c.empty())
                return false;
        return true;
    }

    /* ---- actions; each returns false when it had nothing to do ---- */
    bool send(uint32_t s, uint32_t d, bool room)
    {
        if (s == d || pending_[idx(s, d)] == 0 || !ep(s).can_send(peer(s, d)))
            return false;
        const uint32_t pb = ep(s).on_send(peer(s, d), room);
        push(Packet{s, d, PacketHeader{PacketKind::kData, pb}});
        --pending_[idx(s, d)];
        drain(s);
        return true;
    }
    bool deliver(uint32_t s, uint32_t d)
    {
        auto &c = chan_[idx(s, d)];
        if (c.empty())
            return false;
        mailbox_[d].push_back(c.front());
        c.pop_front();
        if (mailbox_[d].size() + held_[d].size() > peak_occupancy_)
            peak_occupancy_ = mailbox_[d].size() + held_[d].size();
        if (mailbox_[d].size() + held_[d].size() > cfg_.slots)
            fail("mailbox of rank " + std::to_string(d) + " overflows");
        return true;
    }
    bool retrieve(uint32_t r)
    {
        if (mailbox_[r].empty())
            return false;
        const Packet p = mailbox_[r].front();
        mailbox_[r].pop_front();
        const int32_t slot = ep(r).on_packet(peer(r, p.src), p.hdr);
        switch (p.hdr.kind) {
        case PacketKind::kData:
            if (slot < 0)
                fail("data packet refused by rank " + std::to_string(r));
            else
                held_[r].push_back({slot, p.src});
            credits_in_transit_[idx(p.src, r)] -= p.hdr.credits;
            break;
        case PacketKind::kCredit:
            credits_in_transit_[idx(p.src, r)] -= p.hdr.credits;
            --credit_pkts_[idx(p.src, r)];
            break;
        case PacketKind::kReturnRequest:
            --consuming_[idx(p.src, r)];
            break;
        case PacketKind::kReturnResponse:
            --consuming_[idx(p.src, r)];
            handed_back_[idx(p.src, r)] -= p.hdr.credits;
            break;
        }
        drain(r);
        return true;
    }
    /* Up to max data packets at the head of r's mailbox, all from one
     * sender, met their receives on arrival and are accounted in one
     * on_data_consumed_batch() (pml/rdrp's deferred settling). */
    bool consume_batch(uint32_t r, uint32_t max)
    {
        auto &mb = mailbox_[r];
        if (mb.empty() || mb.front().hdr.kind != PacketKind::kData)
            return false;
        const uint32_t src = mb.front().src;
        uint32_t k = 0, credits = 0;
        while (k < max && !mb.empty() && mb.front().hdr.kind == PacketKind::kData && mb.front().src == src) {
            credits += mb.front().hdr.credits;
            mb.pop_front();
            ++k;
        }
        if (ep(r).on_data_consumed_batch(peer(r, src), k, credits) != CreditEndpoint::kNoSlot)
            fail("batch refused by rank " + std::to_string(r));
        credits_in_transit_[idx(src, r)] -= credits;
        consuming_[idx(src, r)] -= k;
        delivered_ += k;
        batched_ += k > 1 ? 1 : 0;
        drain(r);
        return true;
    }
    uint64_t batches() const { return batched_; }
    bool free_slot(uint32_t r, size_t which)
    {
        auto &h = held_[r];
        if (h.empty())
            return false;
        which %= h.size();
        const auto [slot, src] = h[which];
        h.erase(h.begin() + long(which));
        if (!ep(r).on_slot_freed(slot))
            fail("slot refused");
        --consuming_[idx(src, r)];
        ++delivered_;
        drain(r);
        return true;
    }

    /* Every invariant of the file header; "" when all hold. */
    std::string check()
    {
        if (!failure_.empty())
            return failure_;
        const uint32_t c = cfg_.credit_slots;
        for (uint32_t r = 0; r < n_; ++r) {
            const CreditReceiver &rx = ep(r).receiver();
            uint64_t granted = 0;
            uint64_t intended = 0;
            for (uint32_t s = 0; s < n_; ++s) {
                if (s == r)
                    continue;
                const uint32_t ps = peer(r, s);
                const uint64_t model = uint64_t(ep(s).credits(peer(s, r))) + consuming_[idx(s, r)] +
                                       handed_back_[idx(s, r)] + credits_in_transit_[idx(r, s)];
                if (rx.outstanding(ps) != model)
                    return where(r, s) + ": receiver counts " + std::to_string(rx.outstanding(ps)) +
                           " outstanding credits, the model sees " + std::to_string(model);
                granted += rx.outstanding(ps);
                if (credit_pkts_[idx(r, s)] > c)
                    return where(r, s) + ": " + std::to_string(credit_pkts_[idx(r, s)]) +
                           " unprocessed credit packets > credit_slots";
                if (cfg_.mode == Mode::kDynamic) {
                    if (rx.intended(ps) < cfg_.static_slots)
                        return where(r, s) + ": intended quota below static_slots";
                    if (cfg_.max_quota != 0 && rx.intended(ps) > std::max(cfg_.max_quota, even_quota(cfg_) + 1))
                        return where(r, s) + ": intended quota above max_quota";
                    intended += rx.intended(ps);
                }
            }
            const uint64_t total = granted + rx.free_data_slots() + credit_region(cfg_);
            if (total != cfg_.slots)
                return "rank " + std::to_string(r) + ": granted " + std::to_string(granted) + " + free " +
                       std::to_string(rx.free_data_slots()) + " + credit region != slots " +
                       std::to_string(cfg_.slots);
            if (cfg_.mode == Mode::kDynamic && cfg_.max_quota == 0 && intended != data_region(cfg_))
                return "rank " + std::to_string(r) + ": intended quotas sum to " + std::to_string(intended);
            if (ep(r).stats().protocol_errors != 0)
                return "rank " + std::to_string(r) + " saw a protocol error";
        }
        return "";
    }

    size_t peak_occupancy() const { return peak_occupancy_; }
    Stats total_stats() const
    {
        Stats t;
        for (const auto &e : ep_) {
            const Stats &s = e->stats();
            t.credit_packets += s.credit_packets;
            t.piggybacks += s.piggybacks;
            t.requests_sent += s.requests_sent;
            t.responses_sent += s.responses_sent;
            t.steals += s.steals;
            t.adjust_deficit += s.adjust_deficit;
            t.adjust_excess += s.adjust_excess;
            t.thresholds_piggyback += s.thresholds_piggyback;
            t.control_deferred += s.control_deferred;
        }
        return t;
    }

private:
    std::string where(uint32_t r, uint32_t s) const
    {
        return "receiver " + std::to_string(r) + " / sender " + std::to_string(s);
    }
    void fail(const std::string &msg)
    {
        if (failure_.empty())
            failure_ = msg;
    }
    void push(const Packet &p)
    {
        switch (p.hdr.kind) {
        case PacketKind::kData:
            ++consuming_[idx(p.src, p.dst)];
            credits_in_transit_[idx(p.src, p.dst)] += p.hdr.credits;
            break;
        case PacketKind::kCredit:
            credits_in_transit_[idx(p.src, p.dst)] += p.hdr.credits;
            ++credit_pkts_[idx(p.src, p.dst)];
            break;
        case PacketKind::kReturnRequest:
            ++consuming_[idx(p.src, p.dst)];
            break;
        case PacketKind::kReturnResponse:
            ++consuming_[idx(p.src, p.dst)];
            handed_back_[idx(p.src, p.dst)] += p.hdr.credits;
            break;
        }
        chan_[idx(p.src, p.dst)].push_back(p);
    }
    void drain(uint32_t r)
    {
        ControlPacket c;
        while (ep(r).pop_control(&c))
            push(Packet{r, rank(r, c.peer), PacketHeader{c.kind, c.credits}});
    }

    uint32_t n_;
    Config cfg_;
    std::vector<std::unique_ptr<CreditEndpoint>> ep_;
    std::vector<std::deque<Packet>> chan_;
    std::vector<std::deque<Packet>> mailbox_;
    std::vector<std::vector<std::pair<int32_t, uint32_t>>> held_;
    std::vector<uint64_t> pending_;
    /* model bookkeeping, per ordered pair (from, to) */
    std::vector<uint64_t> consuming_;          /* credit-consuming packets from->to not yet freed */
    std::vector<uint64_t> handed_back_;        /* credits in responses from->to in transit */
    std::vector<uint64_t> credits_in_transit_; /* credits from->to in credit packets / piggybacks */
    std::vector<uint64_t> credit_pkts_;        /* credit packets from->to not yet processed */
    uint64_t delivered_ = 0;
    uint64_t batched_ = 0;  /* consume_batch() calls that took more than one packet */
    size_t peak_occupancy_ = 0;
    std::string failure_;
};

struct Scenario {
    uint32_t n;
    Config cfg;
    std::string describe() const
    {
        std::ostringstream o;
        o << mode_name(cfg.mode) << " n=" << n << " slots=" << cfg.slots << " credit_slots=" << cfg.credit_slots
          << " static_slots=" << cfg.static_slots << " piggyback=" << cfg.piggyback << "/" << cfg.piggyback_max
          << " max_quota=" << cfg.max_quota;
        return o.str();
    }
};

/* Sizes from the smallest valid mailbox to a generous one. */
std::vector<Scenario> scenarios()
{
    std::vector<Scenario> out;
    for (uint32_t n : {2u, 3u, 5u, 9u, 17u}) {
        const uint32_t np = n - 1;
        for (Mode m : {Mode::kStatic, Mode::kDynamic}) {
            for (uint32_t c : {1u, 2u, 3u}) {
                for (uint32_t s : {1u, c, c + 2}) {
                    if (m == Mode::kStatic && s != c)
                        continue;
                    for (uint32_t extra_per_peer : {0u, 1u, 6u}) {
                        Config cfg;
                        cfg.mode = m;
                        cfg.credit_slots = c;
                        cfg.static_slots = s;
                        const uint32_t per_peer = c + std::max(c, s);
                        cfg.slots = (per_peer + extra_per_peer) * np + (extra_per_peer == 1 ? 1 : 0);
                        cfg.piggyback = (extra_per_peer + c) % 2 == 0 || n == 3;
                        cfg.piggyback_max = c == 3 ? 2 : 0xFFFF;
                        cfg.max_quota = (m == Mode::kDynamic && c == 2 && extra_per_peer == 6) ? s + 5 : 0;
                        cfg.npeers = np;
                        if (validate(cfg).empty())
                            out.push_back(Scenario{n, cfg});
                    }
                }
            }
        }
    }
    return out;
}

/* Traffic that changes shape every `phase` steps: everyone to everyone,
 * many to one (hot spot), disjoint pairs, a small active subset. */
void add_traffic(World &w, std::mt19937_64 &rng, uint64_t step, uint64_t phase)
{
    const uint32_t n = w.n();
    const uint64_t kind = (step / phase) % 4;
    std::uniform_int_distribution<uint32_t> any(0, n - 1), burst(1, 12);
    uint32_t s = any(rng), d = any(rng);
    switch (kind) {
    case 0: break;                                  // uniform
    case 1: d = uint32_t((step / phase) % n); break;  // hot spot
    case 2: d = (s + n / 2) % n; break;             // pairs
    case 3: s %= std::max<uint32_t>(2, n / 3); d %= std::max<uint32_t>(2, n / 3); break;
    }
    if (s != d)
        w.add_pending(s, d, burst(rng));
}

/* One random step: any action on any entity, chosen by weights.  batch:
 * half the retrievals account a run of packets from one sender at once. */
void random_step(World &w, std::mt19937_64 &rng, bool batch = false)
{
    const uint32_t n = w.n();
    std::uniform_int_distribution<uint32_t> any(0, n - 1), action(0, 9);
    const uint32_t a = action(rng);
    for (int tries = 0; tries < 4 * int(n); ++tries) {
        const uint32_t x = any(rng), y = any(rng);
        bool did = false;
        if (a < 3)
            did = w.send(x, y, rng() % 3 != 0);
        else if (a < 6)
            did = w.deliver(x, y);
        else if (a < 8 && batch && rng() % 2 == 0)
            did = w.consume_batch(x, 1 + uint32_t(rng() % 16));
        else if (a < 8)
            did = w.retrieve(x);
        else
            did = w.free_slot(x, size_t(rng()));
        if (did)
            return;
    }
}

/* Fair round-robin scheduler: in one round every process sends at most one
 * packet to each destination it has data for, then everything in flight is
 * delivered, every mailbox emptied and every held slot freed. */
void fair_round(World &w)
{
    const uint32_t n = w.n();
    for (uint32_t s = 0; s < n; ++s)
        for (uint32_t k = 1; k < n; ++k)
            w.send(s, (s + k) % n, true);
    for (uint32_t s = 0; s < n; ++s)
        for (uint32_t d = 0; d < n; ++d)
            while (w.deliver(s, d)) {
            }
    for (uint32_t r = 0; r < n; ++r)
        while (w.retrieve(r)) {
        }
    for (uint32_t r = 0; r < n; ++r)
        while (w.free_slot(r, 0)) {
        }
}

/* Random traffic for `steps` steps with every invariant checked after
 * each, then a fair drain that must leave the network empty and quiet. */
static void run_and_drain(World &w, std::mt19937_64 &rng, uint64_t steps, bool batch, const std::string &ctx)
{
    for (uint64_t step = 0; step < steps; ++step) {
        if (rng() % 3 == 0)
            add_traffic(w, rng, step, 500);
        random_step(w, rng, batch);
        ASSERT_EQ(w.check(), "") << ctx << " step " << step;
    }
    /* Traffic stops: a fair scheduler must get every pending packet out
     * and leave the network quiet (no deadlock, no starvation). */
    int rounds = 0;
    while ((w.pending_total() != 0 || !w.quiet()) && rounds < 100000) {
        fair_round(w);
        ++rounds;
        ASSERT_EQ(w.check(), "") << ctx << " drain round " << rounds;
    }
    ASSERT_EQ(w.pending_total(), 0u) << ctx << ": data still pending after " << rounds << " rounds";
    ASSERT_TRUE(w.quiet()) << ctx;
}

TEST(CreditProperty, RandomTrafficKeepsEveryInvariantAndDrains)
{
    const uint64_t seed0 = env_or("RDRP_CREDIT_SEED", 4242);
    const uint64_t steps = env_or("RDRP_CREDIT_STEPS", 4000);
    const auto all = scenarios();
    ASSERT_GT(all.size(), 50u);
    uint64_t runs = 0, control_seen = 0, requests = 0, deficit = 0, excess = 0, pbway = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        const Scenario &sc = all[i];
        const uint64_t seed = seed0 + i;
        std::mt19937_64 rng(seed);
        World w(sc.n, sc.cfg);
        const std::string ctx = sc.describe() + " seed=" + std::to_string(seed);
        run_and_drain(w, rng, steps, false, ctx);
        if (HasFatalFailure()) return;
        ASSERT_LE(w.peak_occupancy(), sc.cfg.slots);
        const Stats st = w.total_stats();
        control_seen += st.credit_packets;
        requests += st.requests_sent;
        deficit += st.adjust_deficit;
        excess += st.adjust_excess;
        pbway += st.thresholds_piggyback;
        ++runs;
    }
    /* The random runs must actually exercise the interesting paths. */
    EXPECT_GT(control_seen, 0u);
    EXPECT_GT(requests, 0u) << "no compulsory request in " << runs << " runs";
    EXPECT_GT(pbway, 0u);
    EXPECT_GT(deficit, 0u);
    EXPECT_GT(excess, 0u);
}

/* Every pair always has data: under the fair scheduler no sender waits
 * more than a few rounds for credits (one round to get the last packet
 * freed, one for the credit packet to travel and be read, plus one more
 * when a compulsory return is in progress). */
TEST(CreditProperty, BoundedWaitUnderFairScheduler)
{
    for (Mode m : {Mode::kStatic, Mode::kDynamic}) {
        for (uint32_t n : {2u, 4u, 16u, 33u}) {
            Config cfg;
            cfg.mode = m;
            cfg.credit_slots = 2;
            cfg.static_slots = 2;
            cfg.slots = 6 * (n - 1);  // tight: credit 2 + data 4 per peer
            World w(n, cfg);
            std::mt19937_64 rng(n * 31 + uint32_t(m));
            std::vector<int> waiting(size_t(n) * n, 0);
            int worst = 0;
            for (int round = 0; round < 300; ++round) {
                /* Skewed demand: a few hot pairs, the rest trickle, and the
                 * hot set moves every 50 rounds. */
                for (uint32_t s = 0; s < n; ++s)
                    for (uint32_t d = 0; d < n; ++d)
                        if (s != d && w.pending(s, d) < 4)
                            w.add_pending(s, d, (s + d + round / 50) % 5 == 0 ? 20 : 1);
                std::vector<uint64_t> before(size_t(n) * n);
                for (uint32_t s = 0; s < n; ++s)
                    for (uint32_t d = 0; d < n; ++d)
                        before[size_t(s) * n + d] = w.pending(s, d);
                fair_round(w);
                ASSERT_EQ(w.check(), "") << mode_name(m) << " n=" << n << " round " << round;
                for (uint32_t s = 0; s < n; ++s)
                    for (uint32_t d = 0; d < n; ++d) {
                        if (s == d)
                            continue;
                        int &wt = waiting[size_t(s) * n + d];
                        wt = w.pending(s, d) < before[size_t(s) * n + d] ? 0 : wt + 1;
                        worst = std::max(worst, wt);
                    }
                (void)rng;
            }
            EXPECT_LE(worst, 3) << mode_name(m) << " n=" << n;
        }
    }
}

/* Dynamic mode gives an active pair most of the mailbox; static mode keeps
 * every sender at its fixed quota. */
TEST(CreditProperty, DynamicModeMovesCreditsToTheActiveSender)
{
    for (Mode m : {Mode::kStatic, Mode::kDynamic}) {
        Config cfg;
        cfg.mode = m;
        cfg.slots = 8 * 15;
        World w(16, cfg);
        int rounds = 0;
        uint64_t best = 0;
        for (; rounds < 400; ++rounds) {
            if (w.pending(0, 1) < 500)
                w.add_pending(0, 1, 500);
            /* rank 1 keeps its packets a while: free only every other round */
            const uint32_t n = w.n();
            for (uint32_t k = 1; k < n; ++k)
                while (w.send(0, k, false)) {
                }
            for (uint32_t s = 0; s < n; ++s)
                for (uint32_t d = 0; d < n; ++d)
                    while (w.deliver(s, d)) {
                    }
            for (uint32_t r = 0; r < n; ++r)
                while (w.retrieve(r)) {
                }
            best = std::max<uint64_t>(best, w.held(1));
            if (rounds % 2 == 0)
                for (uint32_t r = 0; r < n; ++r)
                    while (w.free_slot(r, 0)) {
                    }
            ASSERT_EQ(w.check(), "");
        }
        const uint32_t quota = even_quota(w.cfg());
        if (m == Mode::kStatic)
            EXPECT_LE(best, quota);
        else
            EXPECT_GT(best, 4u * quota) << "the active sender should get most of the data region";
    }
}

TEST(CreditMemory, FootprintComesFromTheRealStructures)
{
    const Footprint s = footprint(Mode::kStatic, 2), d = footprint(Mode::kDynamic, 2);
    EXPECT_EQ(s.receiver_per_peer, sizeof(uint32_t));
    EXPECT_GT(d.receiver_per_peer, s.receiver_per_peer);
    EXPECT_EQ(d.receiver_per_peer, CreditReceiver::bytes_per_peer(Mode::kDynamic, 2));
    EXPECT_EQ(structure_bytes(Mode::kDynamic, 2, 1000, 14000),
              (d.receiver_per_peer + d.sender_per_peer) * 1000 + 4 * 14000 + d.fixed);
}

}  // namespace

/* Two parts of the twin-engine property tests below that are not about
 * the receiver call under test.  A send (what < 9) or an explicit credit
 * packet, fed to both engines: */
static void twin_sender_step(CreditEndpoint &a, CreditEndpoint &b, uint32_t src, unsigned what,
                             std::mt19937_64 &rng, const std::string &ctx)
{
    if (what < 9) {
        ASSERT_EQ(a.can_send(src), b.can_send(src));
        if (a.can_send(src)) {
            const bool room = rng() % 2 == 0;
            ASSERT_EQ(a.on_send(src, room), b.on_send(src, room)) << ctx;
        }
    } else {
        const uint32_t c = uint32_t(rng() % 3);
        ASSERT_EQ(a.on_packet(src, PacketHeader{PacketKind::kCredit, c}),
                  b.on_packet(src, PacketHeader{PacketKind::kCredit, c}));
    }
}

/* ... and both engines' control packets after a step, compared one by
 * one; a return request is answered so blocked senders recover. */
static void twin_drain_control(CreditEndpoint &a, CreditEndpoint &b, const std::string &ctx, uint64_t *control)
{
    ControlPacket pa, pb;
    for (;;) {
        const bool ga = a.pop_control(&pa), gb = b.pop_control(&pb);
        ASSERT_EQ(ga, gb) << ctx;
        if (!ga) break;
        ASSERT_EQ(pa.peer, pb.peer);
        ASSERT_EQ(pa.kind, pb.kind);
        ASSERT_EQ(pa.credits, pb.credits) << ctx;
        ++*control;
        if (pa.kind == PacketKind::kReturnRequest) {
            const uint32_t back = a.receiver().outstanding(pa.peer) > 0 ? 1 : 0;
            ASSERT_EQ(a.on_packet(pa.peer, PacketHeader{PacketKind::kReturnResponse, back}),
                      b.on_packet(pb.peer, PacketHeader{PacketKind::kReturnResponse, back}));
        }
    }
}

/* on_data_consumed(src, c) is on_packet(src, {kData, c}) followed at once
 * by on_slot_freed() of its slot (pml/rdrp's packets that met their
 * receive on arrival).  Two engines fed the same random receiver-side
 * traffic, one each way, agree after every step: control packets, credits
 * towards every peer, held slots, slots handed out, counters. */
TEST(CreditProperty, DataConsumedEqualsPacketThenSlotFreed)
{
    uint64_t consumed = 0, held = 0, control = 0;
    for (int mode = 0; mode < 2; ++mode) {
        for (uint32_t n : {2u, 3u, 8u}) {
            Config cfg = default_config(n, mode == 0 ? Mode::kStatic : Mode::kDynamic);
            CreditEndpoint a(cfg), b(cfg);
            std::mt19937_64 rng(99 + n + 10 * mode);
            std::vector<std::pair<int32_t, int32_t>> slots;  /* held: (slot in a, slot in b) */
            for (int step = 0; step < 20000; ++step) {
                const uint32_t src = uint32_t(rng() % n);
                const unsigned what = unsigned(rng() % 10);
                if (what < 5) {
                    if (a.receiver().outstanding(src) == 0) continue;  /* src holds no credit of ours */
                    const uint32_t piggy = rng() % 4 == 0 ? uint32_t(rng() % 3) : 0;
                    const int32_t sa = a.on_packet(src, PacketHeader{PacketKind::kData, piggy});
                    if (what < 4) {  /* consumed on arrival */
                        if (sa >= 0) a.on_slot_freed(sa);
                        const int32_t rb = b.on_data_consumed(src, piggy);
                        ASSERT_EQ(sa >= 0 ? CreditEndpoint::kNoSlot : sa, rb) << "step " << step;
                        ++consumed;
                    } else {  /* kept in its slot */
                        const int32_t sb = b.on_packet(src, PacketHeader{PacketKind::kData, piggy});
                        ASSERT_EQ(sa, sb) << "step " << step;
                        if (sa >= 0) slots.push_back({sa, sb});
                        ++held;
                    }
                } else if (what < 7 && !slots.empty()) {
                    const size_t i = size_t(rng() % slots.size());
                    ASSERT_EQ(a.on_slot_freed(slots[i].first), b.on_slot_freed(slots[i].second));
                    slots.erase(slots.begin() + long(i));
                } else {
                    twin_sender_step(a, b, src, what, rng, "step " + std::to_string(step));
                    if (::testing::Test::HasFatalFailure()) return;
                }
                twin_drain_control(a, b, "step " + std::to_string(step), &control);
                if (::testing::Test::HasFatalFailure()) return;
                for (uint32_t p = 0; p < n; ++p) {
                    ASSERT_EQ(a.credits(p), b.credits(p));
                    ASSERT_EQ(a.receiver().outstanding(p), b.receiver().outstanding(p));
                }
                ASSERT_EQ(a.held_slots(), b.held_slots());
                ASSERT_EQ(a.stats().data_received, b.stats().data_received);
                ASSERT_EQ(a.stats().credit_packets, b.stats().credit_packets);
                ASSERT_EQ(a.stats().protocol_errors, b.stats().protocol_errors);
            }
        }
    }
    EXPECT_GT(consumed, 10000u);
    EXPECT_GT(held, 1000u);
    EXPECT_GT(control, 100u);
}

/* on_data_consumed_batch(src, k, C) is on_data_consumed(src, C) followed by
 * k - 1 on_data_consumed(src, 0): two engines, one fed each way, agree
 * after every batch on control packets, credits towards and from every
 * peer, held slots and every counter, over every scenario of the model
 * (small mailboxes put thresholds inside the batches, dynamic mode brings
 * rounds, monitoring points and stealing into them). */
TEST(CreditProperty, DataConsumedBatchEqualsOneCallPerPacket)
{
    uint64_t batches = 0, crossed = 0;
    const auto all = scenarios();
    for (size_t i = 0; i < all.size(); ++i) {
        const Config &cfg = all[i].cfg;
        const uint32_t n = cfg.npeers;
        CreditEndpoint a(cfg), b(cfg);
        std::mt19937_64 rng(7 + i);
        const std::string ctx = all[i].describe();
        for (int step = 0; step < 3000; ++step) {
            const uint32_t src = uint32_t(rng() % n);
            const unsigned what = unsigned(rng() % 10);
            if (what < 6) {
                const uint32_t have = a.receiver().outstanding(src);
                if (have == 0) continue;  /* src holds no credit of ours */
                const uint32_t k = 1 + uint32_t(rng() % std::min<uint32_t>(have, 12));
                const uint32_t c = rng() % 3 == 0 ? uint32_t(rng() % 4) : 0;
                const uint64_t regular = a.stats().thresholds_regular;
                int32_t ra = a.on_data_consumed(src, c);
                for (uint32_t j = 1; j < k; ++j) {
                    const int32_t rj = a.on_data_consumed(src, 0);
                    if (ra == CreditEndpoint::kNoSlot) ra = rj;
                }
                const int32_t rb = b.on_data_consumed_batch(src, k, c);
                ASSERT_EQ(ra, rb) << ctx << " step " << step;
                ++batches;
                crossed += a.stats().thresholds_regular > regular && k > 1 ? 1 : 0;
            } else {
                twin_sender_step(a, b, src, what, rng, ctx + " step " + std::to_string(step));
                if (::testing::Test::HasFatalFailure()) return;
            }
            uint64_t control = 0;
            twin_drain_control(a, b, ctx + " step " + std::to_string(step), &control);
            if (::testing::Test::HasFatalFailure()) return;
            for (uint32_t p = 0; p < n; ++p) {
                ASSERT_EQ(a.credits(p), b.credits(p)) << ctx << " step " << step;
                ASSERT_EQ(a.receiver().outstanding(p), b.receiver().outstanding(p)) << ctx << " step " << step;
                ASSERT_EQ(a.receiver().retrieved(p), b.receiver().retrieved(p)) << ctx << " step " << step;
                ASSERT_EQ(a.receiver().threshold(p), b.receiver().threshold(p)) << ctx << " step " << step;
            }
            ASSERT_EQ(a.receiver().free_data_slots(), b.receiver().free_data_slots());
            ASSERT_EQ(a.held_slots(), b.held_slots());
            const Stats &sa = a.stats(), &sb = b.stats();
            ASSERT_EQ(sa.data_received, sb.data_received);
            ASSERT_EQ(sa.credit_packets, sb.credit_packets);
            ASSERT_EQ(sa.credits_explicit, sb.credits_explicit);
            ASSERT_EQ(sa.thresholds_regular, sb.thresholds_regular);
            ASSERT_EQ(sa.monitoring_points, sb.monitoring_points);
            ASSERT_EQ(sa.steals, sb.steals);
            ASSERT_EQ(sa.requests_sent, sb.requests_sent);
            ASSERT_EQ(sa.protocol_errors, sb.protocol_errors);
        }
    }
    EXPECT_GT(batches, 10000u);
    EXPECT_GT(crossed, 1000u) << "batches must cross thresholds";
}

/* The model network with half of all retrievals accounted in batches per
 * sender: every invariant holds after every step and the traffic drains. */
TEST(CreditProperty, BatchedConsumptionKeepsEveryInvariantAndDrains)
{
    const auto all = scenarios();
    uint64_t batches = 0;
    for (size_t i = 0; i < all.size(); ++i) {
        const Scenario &sc = all[i];
        std::mt19937_64 rng(515 + i);
        World w(sc.n, sc.cfg);
        const std::string ctx = sc.describe();
        run_and_drain(w, rng, 3000, true, ctx);
        if (HasFatalFailure()) return;
        batches += w.batches();
    }
    EXPECT_GT(batches, 1000u) << "the runs must account runs of several packets at once";
}
