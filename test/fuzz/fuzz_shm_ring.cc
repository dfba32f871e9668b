/*
 * Fuzz target: the shared-memory ring's consumer (common/shm/shm_ring.h)
 * reading entries another process wrote.  The ring is a heap buffer of
 * exactly ring_bytes(size), so AddressSanitizer sees any read past it.
 * The input interleaves honest messages (a real producer's push) with
 * forged entry headers written where the consumer looks next, committed
 * with the position it waits for: whatever they say, poll() must either
 * hand out bytes inside the ring or stop with error(), and never hand out
 * anything after a bad entry.
 *
 * Input: u8 ring size exponent, then steps of u8 op: push (u16 hlen, u16
 * plen), forge (u32 len, u16 id, u16 hlen), or poll.
 */
#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "common/shm/shm_ring.h"

using namespace rdrp::shm;
using rdrp_fuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzInput in(data, size);
    const size_t rsize = size_t(1) << (7 + in.u8() % 6);  // 128 B .. 4 KiB
    std::vector<char> mem(ring_bytes(rsize), 0);
    ring_init(mem.data(), rsize);
    RingProducer tx;
    RingConsumer rx;
    tx.attach(mem.data(), rsize);
    rx.attach(mem.data(), rsize);
    const char *ring_lo = mem.data() + kRingOverhead, *ring_hi = mem.data() + mem.size();
    std::vector<char> src(rsize, 's');
    bool forged = false;  // after a forged entry the producer's view is no longer the ring's
    unsigned sum = 0;
    auto take = [&](uint16_t, const void *hdr, size_t hlen, const void *payload, size_t plen) {
        const char *h = static_cast<const char *>(hdr), *p = static_cast<const char *>(payload);
        FUZZ_REQUIRE(h >= ring_lo && h + hlen <= ring_hi && p >= ring_lo && p + plen <= ring_hi);
        for (size_t i = 0; i < hlen; ++i) sum += static_cast<unsigned char>(h[i]);
        for (size_t i = 0; i < plen; ++i) sum += static_cast<unsigned char>(p[i]);
    };
    for (int step = 0; step < 64 && in.left() > 0; ++step) {
        switch (in.u8() % 3) {
        case 0: {  // an honest message
            size_t hlen = in.u16() % 64, plen = in.u16() % rsize;
            if (forged || message_bytes(hlen, plen) > tx.max_message()) break;
            tx.push(1, src.data(), hlen, src.data(), plen);
            break;
        }
        case 1: {  // a forged entry header where the consumer reads next
            uint32_t len = in.u32();
            uint16_t id = in.u16(), hlen = in.u16();
            char *at = mem.data() + kRingOverhead + (rx.position() & (rsize - 1));
            auto *e = reinterpret_cast<EntryHeader *>(at);
            e->len = len;
            e->id = id;
            e->hlen = hlen;
            e->pos.store(rx.position(), std::memory_order_release);
            forged = true;
            break;
        }
        case 2: {
            const char *err_before = rx.error();
            unsigned n = rx.poll(take, 1 + in.u8() % 8);
            if (err_before) FUZZ_REQUIRE(n == 0);
            break;
        }
        }
    }
    rx.poll(take, 1000);
    if (!forged) FUZZ_REQUIRE(rx.error() == nullptr);  // honest traffic is never rejected
    return static_cast<int>(sum & 0);
}
