/*
 * Fuzz targets: reading typed fields out of the fuzzer's bytes.  Past the
 * end every read gives zeroes, so any input (also an empty one) is a
 * complete test case.  The seed writer (make_seeds.cc) lays fields out in
 * the same order with FuzzOutput.
 */
#ifndef RDRP_FUZZ_INPUT_H
#define RDRP_FUZZ_INPUT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rdrp_fuzz {

class FuzzInput {
public:
    FuzzInput(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    void bytes(void *out, size_t len)
    {
        size_t k = len < n_ - at_ ? len : n_ - at_;
        if (k) std::memcpy(out, d_ + at_, k);
        if (k < len) std::memset(static_cast<char *>(out) + k, 0, len - k);
        at_ += k;
    }
    template <class T> T get()
    {
        T v;
        bytes(&v, sizeof(v));
        return v;
    }
    uint8_t u8() { return get<uint8_t>(); }
    uint16_t u16() { return get<uint16_t>(); }
    uint32_t u32() { return get<uint32_t>(); }
    uint64_t u64() { return get<uint64_t>(); }
    size_t left() const { return n_ - at_; }

private:
    const uint8_t *d_;
    size_t n_;
    size_t at_ = 0;
};

class FuzzOutput {
public:
    template <class T> FuzzOutput &put(const T &v)
    {
        s_.append(reinterpret_cast<const char *>(&v), sizeof(v));
        return *this;
    }
    FuzzOutput &raw(const void *p, size_t n)
    {
        s_.append(static_cast<const char *>(p), n);
        return *this;
    }
    const std::string &str() const { return s_; }

private:
    std::string s_;
};

/* An invariant the component relies on does not hold after its check
 * accepted the input: a finding (libFuzzer reports the abort). */
#define FUZZ_REQUIRE(cond)                                                    \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                          \
        }                                                                     \
    } while (0)

}  // namespace rdrp_fuzz

#endif
