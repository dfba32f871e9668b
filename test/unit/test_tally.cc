/* common/tally: the finalize leak check's counts, verdict and report text. */
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "common/tally/live_tally.h"

static std::string fmt(const rdrp_tally_t &t, int owner)
{
    char buf[512];
    rdrp_tally_format(&t, owner, buf, sizeof(buf));
    return buf;
}

TEST(LiveTally, NothingLeftIsSilentAtEveryLevel)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "requests", 0, RDRP_TALLY_APP);
    rdrp_tally_add(&t, "fragments", 0, RDRP_TALLY_OURS);
    for (int level = 0; level <= 3; ++level) EXPECT_EQ(rdrp_tally_verdict(&t, level), 0);
    EXPECT_EQ(fmt(t, -1), "");
    EXPECT_EQ(rdrp_tally_sum(&t, -1), 0u);
}

TEST(LiveTally, ReportsOnlyNonZeroCountsByOwner)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "requests", 2, RDRP_TALLY_APP);
    rdrp_tally_add(&t, "unreceived messages", 0, RDRP_TALLY_APP);
    rdrp_tally_add(&t, "control messages", 3, RDRP_TALLY_OURS);
    rdrp_tally_add(&t, "registrations", 1, RDRP_TALLY_OURS);
    EXPECT_EQ(fmt(t, RDRP_TALLY_APP), "requests 2");
    EXPECT_EQ(fmt(t, RDRP_TALLY_OURS), "control messages 3, registrations 1");
    EXPECT_EQ(fmt(t, -1), "requests 2, control messages 3, registrations 1");
    EXPECT_EQ(rdrp_tally_sum(&t, RDRP_TALLY_APP), 2u);
    EXPECT_EQ(rdrp_tally_sum(&t, RDRP_TALLY_OURS), 4u);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_OFF), 0);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_REPORT), 1);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_STRICT), 2);
}

TEST(LiveTally, ApplicationLeakAloneStillReported)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "unreceived messages", 1, RDRP_TALLY_APP);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_REPORT), 1);
    EXPECT_EQ(fmt(t, RDRP_TALLY_OURS), "");
}

TEST(LiveTally, TruncatesLikeSnprintf)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "fragments", 12345, RDRP_TALLY_OURS);
    char buf[6];
    EXPECT_EQ(rdrp_tally_format(&t, -1, buf, sizeof(buf)), std::string("fragments 12345").size());
    EXPECT_STREQ(buf, "fragm");
    EXPECT_EQ(rdrp_tally_format(&t, -1, nullptr, 0), std::string("fragments 12345").size());
}

TEST(LiveTally, OverflowIsNeverSilent)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    for (int i = 0; i < RDRP_TALLY_MAX; ++i) rdrp_tally_add(&t, "x", 0, RDRP_TALLY_OURS);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_REPORT), 0);
    rdrp_tally_add(&t, "one too many", 5, RDRP_TALLY_APP);
    EXPECT_EQ(rdrp_tally_verdict(&t, RDRP_FINALIZE_CHECK_REPORT), 1);
    EXPECT_NE(fmt(t, RDRP_TALLY_OURS).find("more counts"), std::string::npos);
}

TEST(LiveTally, ReportLineNamesComponentRankAndBothOwners)
{
    rdrp_tally_t t;
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "requests", 1, RDRP_TALLY_APP);
    rdrp_tally_add(&t, "unreceived messages", 1, RDRP_TALLY_APP);
    rdrp_tally_add(&t, "control messages", 0, RDRP_TALLY_OURS);
    char buf[256];
    rdrp_tally_report_line(&t, "pml/rdrp", 3, buf, sizeof(buf));
    EXPECT_STREQ(buf, "leak-check pml/rdrp rank 3: application: requests 1, unreceived messages 1; pml/rdrp: none");
    rdrp_tally_init(&t);
    rdrp_tally_add(&t, "fragments", 2, RDRP_TALLY_OURS);
    rdrp_tally_report_line(&t, "btl/credit", 0, buf, sizeof(buf));
    EXPECT_STREQ(buf, "leak-check btl/credit rank 0: application: none; btl/credit: fragments 2");
}

/* Property: the verdict is non-zero exactly when some count is, and the
 * text names exactly the non-zero counts of the owner asked for. */
TEST(LiveTally, PropertyVerdictAndTextFollowTheCounts)
{
    std::mt19937 rng(15);
    static const char *names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    for (int round = 0; round < 2000; ++round) {
        rdrp_tally_t t;
        rdrp_tally_init(&t);
        int n = static_cast<int>(rng() % 9);
        uint64_t sum[2] = {0, 0};
        std::string want[2];
        for (int i = 0; i < n; ++i) {
            uint64_t c = (rng() % 3 == 0) ? rng() % 1000 : 0;
            int owner = static_cast<int>(rng() % 2);
            rdrp_tally_add(&t, names[i], c, static_cast<rdrp_tally_owner_t>(owner));
            sum[owner] += c;
            if (c) {
                if (!want[owner].empty()) want[owner] += ", ";
                want[owner] += std::string(names[i]) + " " + std::to_string(c);
            }
        }
        int level = static_cast<int>(rng() % 3);
        int expect = (sum[0] + sum[1] == 0 || level == 0) ? 0 : level;
        ASSERT_EQ(rdrp_tally_verdict(&t, level), expect);
        ASSERT_EQ(fmt(t, RDRP_TALLY_OURS), want[RDRP_TALLY_OURS]);
        ASSERT_EQ(fmt(t, RDRP_TALLY_APP), want[RDRP_TALLY_APP]);
        ASSERT_EQ(rdrp_tally_sum(&t, -1), sum[0] + sum[1]);
    }
}
