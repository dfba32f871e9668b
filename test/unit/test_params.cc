// MCA parameter checks (common/params/param_check.h): every kind refuses a
// value outside its range and a text Open MPI would misread (a word where a
// number belongs, a sign on a size, trailing garbage), accepts the texts
// Open MPI reads as meant (k/m/g suffixes, hex, enumeration numbers), names
// the first refused rule, and documents the range in the help text; a
// property test walks random values across every range boundary.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>

#include "common/params/param_check.h"

namespace {

struct Values {
    int i = 4;
    unsigned long long u = 8192;
    size_t z = 64;
    double d = 1.5;
    int e = 1;
    char *w = const_cast<char *>("auto");
    char *l = const_cast<char *>("bcast,barrier");
    unsigned u32 = 10;
    unsigned flags = 5;
};

struct Table {
    Values v;
    rdrp_param_rule_t rules[9];
    Table()
    {
        rules[0] = {"t_int", RDRP_PARAM_INT, &v.i, 1, 1024, 0, 0, nullptr};
        rules[1] = {"t_ull", RDRP_PARAM_ULL, &v.u, 0, 0, 0, 1ULL << 20, nullptr};
        rules[2] = {"t_size", RDRP_PARAM_SIZE, &v.z, 0, 0, 16, 4096, nullptr};
        rules[3] = {"t_dbl", RDRP_PARAM_DOUBLE, &v.d, 0, 60, 0, 0, nullptr};
        rules[4] = {"t_enum", RDRP_PARAM_ENUM, &v.e, 0, 0, 0, 0, "0=static|1=dynamic"};
        rules[5] = {"t_word", RDRP_PARAM_WORD, &v.w, 0, 0, 0, 0, "auto|rdrp|get|put"};
        rules[6] = {"t_list", RDRP_PARAM_WORDS, &v.l, 0, 0, 0, 0, "barrier|bcast|reduce"};
        rules[7] = {"t_u32", RDRP_PARAM_U32, &v.u32, 0, 0, 0, 0xffffffffULL, nullptr};
        rules[8] = {"t_flags", RDRP_PARAM_FLAGS, &v.flags, 0, 0, 1, 7, "1=send|2=put|4=get"};
    }
    int check(rdrp_param_error_t *err, const char *prefix = "RDRPTEST_") { return rdrp_param_check(rules, 9, prefix, err); }
};

class Env {
  public:
    Env(const char *name, const char *value) : name_(std::string("RDRPTEST_") + name) { setenv(name_.c_str(), value, 1); }
    ~Env() { unsetenv(name_.c_str()); }
  private:
    std::string name_;
};

}  // namespace

TEST(ParamCheck, DefaultsPass)
{
    Table t;
    rdrp_param_error_t err;
    EXPECT_EQ(t.check(&err), -1);
}

TEST(ParamCheck, StoredValueOutOfRangeIsNamedWithItsRange)
{
    Table t;
    rdrp_param_error_t err;
    t.v.i = 0;
    ASSERT_EQ(t.check(&err), 0);
    EXPECT_STREQ(err.name, "t_int");
    EXPECT_STREQ(err.value, "0");
    EXPECT_STREQ(err.valid, "1..1024");
    t.v.i = 1025;
    EXPECT_EQ(t.check(&err), 0);
    t.v.i = 1024;
    EXPECT_EQ(t.check(&err), -1);
    t.v.u = (1ULL << 20) + 1;
    ASSERT_EQ(t.check(&err), 1);
    EXPECT_STREQ(err.valid, "0..1048576");
    t.v.u = 0;
    t.v.z = 15;
    EXPECT_EQ(t.check(&err), 2);
    t.v.z = 16;
    t.v.d = -0.5;
    EXPECT_EQ(t.check(&err), 3);
    t.v.d = 60;
    t.v.e = 2;
    ASSERT_EQ(t.check(&err), 4);
    EXPECT_STREQ(err.valid, "static | dynamic");
}

TEST(ParamCheck, WordsRefuseUnknownWords)
{
    Table t;
    rdrp_param_error_t err;
    t.v.w = const_cast<char *>("fast");
    ASSERT_EQ(t.check(&err), 5);
    EXPECT_STREQ(err.value, "fast");
    EXPECT_STREQ(err.valid, "auto | rdrp | get | put");
    t.v.w = const_cast<char *>("GET");  // Open MPI's enumerators ignore case too
    EXPECT_EQ(t.check(&err), -1);
    t.v.l = const_cast<char *>("bcast, scatter");
    ASSERT_EQ(t.check(&err), 6);
    EXPECT_STREQ(err.valid, "a comma list of: barrier | bcast | reduce");
    t.v.l = const_cast<char *>("reduce , barrier");
    EXPECT_EQ(t.check(&err), -1);
    t.v.l = const_cast<char *>(",");
    EXPECT_EQ(t.check(&err), 6);
}

TEST(ParamCheck, TextOpenMpiWouldMisreadIsRefused)
{
    Table t;
    rdrp_param_error_t err;
    {
        Env e("t_int", "nonsense");  // Open MPI stores 0 for it, silently
        ASSERT_EQ(t.check(&err), 0);
        EXPECT_STREQ(err.value, "nonsense");
        EXPECT_EQ(t.check(&err, nullptr), -1);  // no prefix: stored values only
    }
    {
        Env e("t_ull", "-1");  // stored as Open MPI read it: the message shows what the user wrote
        t.v.u = ~0ULL;
        ASSERT_EQ(t.check(&err), 1);
        EXPECT_STREQ(err.value, "-1");
        t.v.u = 8192;
    }
    {
        Env e("t_int", "99999999999");  // Open MPI refuses it and keeps the default
        EXPECT_EQ(t.check(&err), 0);
    }
    {
        Env e("t_int", "12abc");
        EXPECT_EQ(t.check(&err), 0);
    }
    {
        Env e("t_ull", "-1");  // strtoull reads it as 2^64-1
        EXPECT_EQ(t.check(&err), 1);
    }
    {
        Env e("t_dbl", "nonsense");  // strtod reads it as 0, in range
        EXPECT_EQ(t.check(&err), 3);
    }
    {
        Env e("t_dbl", "inf");
        EXPECT_EQ(t.check(&err), 3);
    }
    {
        Env e("t_enum", "dynamicc");
        EXPECT_EQ(t.check(&err), 4);
    }
    {
        Env e("t_enum", "7");
        EXPECT_EQ(t.check(&err), 4);
    }
}

TEST(ParamCheck, TextOpenMpiReadsAsMeantIsAccepted)
{
    Table t;
    rdrp_param_error_t err;
    {
        Env e("t_ull", "1m");
        EXPECT_EQ(t.check(&err), -1);
    }
    {
        Env e("t_ull", "2M");  // 2 MiB > 1 MiB
        EXPECT_EQ(t.check(&err), 1);
    }
    {
        Env e("t_int", "0x10");
        EXPECT_EQ(t.check(&err), -1);
    }
    {
        Env e("t_dbl", "2.5e1");
        EXPECT_EQ(t.check(&err), -1);
    }
    {
        Env e("t_enum", "STATIC");
        EXPECT_EQ(t.check(&err), -1);
    }
    {
        Env e("t_enum", "0");
        EXPECT_EQ(t.check(&err), -1);
    }
}

TEST(ParamCheck, UnsignedAndFlagBits)
{
    Table t;
    rdrp_param_error_t err;
    {
        Env e("t_u32", "-1");  // Open MPI refuses it for an unsigned int and keeps the default
        EXPECT_EQ(t.check(&err), 7);
    }
    {
        Env e("t_u32", "4294967296");
        EXPECT_EQ(t.check(&err), 7);
    }
    t.v.flags = 4;  // get without send: send is required
    ASSERT_EQ(t.check(&err), 8);
    EXPECT_STREQ(err.valid, "a comma list of send,put,get including the required ones");
    t.v.flags = 1 | 8;  // a bit not allowed
    EXPECT_EQ(t.check(&err), 8);
    t.v.flags = 3;
    EXPECT_EQ(t.check(&err), -1);
    {
        Env e("t_flags", "send,get");
        EXPECT_EQ(t.check(&err), -1);
    }
    {
        Env e("t_flags", "send,atomics");  // Open MPI keeps the default after its own message
        EXPECT_EQ(t.check(&err), 8);
    }
    {
        Env e("t_flags", "-1");
        EXPECT_EQ(t.check(&err), 8);
    }
}

TEST(ParamCheck, ASynonymSetByTheUserIsTheOneNamed)
{
    unsigned long long limit = ~0ULL;  // what Open MPI stored for "-1"
    rdrp_param_rule_t r[2] = {{"p_eager_limit", RDRP_PARAM_ULL, &limit, 0, 0, 0, 4096, nullptr},
                              {"p_rndv_threshold", RDRP_PARAM_ULL, &limit, 0, 0, 0, 4096, nullptr}};
    rdrp_param_error_t err;
    Env e("p_rndv_threshold", "-1");
    ASSERT_EQ(rdrp_param_check(r, 2, "RDRPTEST_", &err), 0);
    EXPECT_STREQ(err.name, "p_rndv_threshold");
    EXPECT_STREQ(err.value, "-1");
}

TEST(ParamCheck, HelpCarriesTheRange)
{
    Table t;
    char buf[256];
    EXPECT_STREQ(rdrp_param_help(t.rules, 9, "t_", "int", "Ints", buf, sizeof(buf)), "Ints (valid: 1..1024)");
    EXPECT_STREQ(rdrp_param_help(t.rules, 9, "t_", "nothere", "Other", buf, sizeof(buf)), "Other");
    rdrp_param_describe(&t.rules[3], buf, sizeof(buf));
    EXPECT_STREQ(buf, "0..60");
}

// Property: for random bounds and values, a stored value (and the same
// value as text) is accepted exactly when it lies inside [lo, hi].
TEST(ParamCheck, PropertyRangeBoundaries)
{
    std::mt19937_64 rng(15);
    for (int iter = 0; iter < 2000; ++iter) {
        int lo = static_cast<int>(rng() % 2000) - 1000;
        int hi = lo + static_cast<int>(rng() % 2000);
        int pick[] = {lo - 1, lo, hi, hi + 1, lo + static_cast<int>(rng() % (hi - lo + 1))};
        int v = pick[rng() % 5];
        int stored = v;
        rdrp_param_rule_t r{"p_int", RDRP_PARAM_INT, &stored, static_cast<double>(lo), static_cast<double>(hi), 0, 0,
                            nullptr};
        rdrp_param_error_t err;
        bool inside = v >= lo && v <= hi;
        ASSERT_EQ(rdrp_param_check(&r, 1, nullptr, &err), inside ? -1 : 0) << v << " in " << lo << ".." << hi;
        stored = (lo + hi) / 2;  // in range: only the text decides
        Env e("p_int", std::to_string(v).c_str());
        ASSERT_EQ(rdrp_param_check(&r, 1, "RDRPTEST_", &err), inside ? -1 : 0) << v;
        unsigned long long uv = static_cast<unsigned long long>(rng() % 5000), uhi = rng() % 5000;
        rdrp_param_rule_t ru{"p_ull", RDRP_PARAM_ULL, &uv, 0, 0, 0, uhi, nullptr};
        ASSERT_EQ(rdrp_param_check(&ru, 1, nullptr, &err), uv <= uhi ? -1 : 0);
    }
}
