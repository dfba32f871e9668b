/*
 * btl/credit: send descriptors (alloc, free, prepare_src).  Each carries a
 * packet buffer: small ones (up to kSmallFrag bytes: eager packets and
 * control fragments, the many) and large ones of payload_cap = slot_size -
 * header bytes, the largest packet a receiver's mailbox slot can hold
 * (ob1's pipeline fragments).  Two pools, so that a flood of small sends
 * does not hold a slot-sized buffer per queued descriptor; prepare_src
 * packs through the convertor (no in-place sends: the data must be in the
 * packet anyway).
 */
#include "btl_credit_internal.h"

#include <cstdlib>
#include <cstring>

namespace btlcredit {

static size_t small_cap() { return g.payload_cap < kSmallFrag ? g.payload_cap : kSmallFrag; }

Frag *frag_get(size_t need)
{
    Lock lock;
    /* one pool when a slot is no larger than a small buffer: the pool a
     * descriptor returns to follows from its cap (frag_recycle) */
    const bool small = need <= small_cap() && small_cap() < g.payload_cap;
    std::vector<Frag *> &pool = small ? g.frag_pool : g.big_frag_pool;
    if (!pool.empty()) {
        Frag *f = pool.back();
        pool.pop_back();
        return f;
    }
    /* the buffer follows the struct, 64-byte aligned */
    const size_t cap = small ? small_cap() : g.payload_cap;
    size_t head = (sizeof(Frag) + 63) & ~size_t(63);
    void *mem = nullptr;
    if (posix_memalign(&mem, 64, head + cap) != 0) return nullptr;
    ++g.frags_made;
    Frag *f = static_cast<Frag *>(mem);
    std::memset(static_cast<void *>(f), 0, sizeof(*f));
    OBJ_CONSTRUCT(&f->des, mca_btl_base_descriptor_t);
    f->cap = cap;
    f->buf = static_cast<char *>(mem) + head;
    return f;
}

void frag_recycle(Frag *f)
{
    (f->cap == g.payload_cap ? g.big_frag_pool : g.frag_pool).push_back(f);
}

void frag_put(Frag *f)
{
    Lock lock;
    frag_recycle(f);
}

void frags_fini()
{
    for (std::vector<Frag *> *pool : {&g.frag_pool, &g.big_frag_pool}) {
        for (Frag *f : *pool) {
            OBJ_DESTRUCT(&f->des);
            std::free(f);
        }
        pool->clear();
    }
}

/* Reset a descriptor for a new use. */
static void frag_init(Frag *f, mca_btl_base_endpoint_t *ep, size_t len, uint32_t flags)
{
    f->seg.seg_addr.pval = f->buf;
    f->seg.seg_len = len;
    f->des.des_segments = &f->seg;
    f->des.des_segment_count = 1;
    f->des.des_cbfunc = nullptr;
    f->des.des_cbdata = nullptr;
    f->des.des_context = nullptr;
    f->des.des_flags = flags;
    f->des.order = MCA_BTL_NO_ORDER;
    f->ep = ep;
    f->kind = kFragSend;
}

}  // namespace btlcredit

using namespace btlcredit;

extern "C" mca_btl_base_descriptor_t *mca_btl_credit_alloc(mca_btl_base_module_t *btl,
                                                           mca_btl_base_endpoint_t *ep,
                                                           uint8_t order, size_t size,
                                                           uint32_t flags)
{
    (void)btl;
    (void)order;
    if (OPAL_UNLIKELY(size > g.payload_cap)) return nullptr;
    Frag *f = frag_get(size);
    if (OPAL_UNLIKELY(!f)) return nullptr;
    frag_init(f, ep, size, flags);
    return &f->des;
}

extern "C" int mca_btl_credit_free(mca_btl_base_module_t *btl, mca_btl_base_descriptor_t *des)
{
    (void)btl;
    frag_put(reinterpret_cast<Frag *>(des));
    return OPAL_SUCCESS;
}

extern "C" mca_btl_base_descriptor_t *mca_btl_credit_prepare_src(mca_btl_base_module_t *btl,
                                                                 mca_btl_base_endpoint_t *ep,
                                                                 opal_convertor_t *conv,
                                                                 uint8_t order, size_t reserve,
                                                                 size_t *size, uint32_t flags)
{
    (void)btl;
    (void)order;
    if (OPAL_UNLIKELY(reserve > g.payload_cap)) return nullptr;
    size_t room = g.payload_cap - reserve;
    size_t want = *size < room ? *size : room;
    Frag *f = frag_get(reserve + want);
    if (OPAL_UNLIKELY(!f)) return nullptr;
    frag_init(f, ep, reserve, flags);
    if (want > 0) {
        struct iovec iov;
        iov.iov_base = f->buf + reserve;
        iov.iov_len = want;
        uint32_t iov_count = 1;
        size_t max_data = want;
        if (opal_convertor_pack(conv, &iov, &iov_count, &max_data) < 0) {
            frag_put(f);
            return nullptr;
        }
        want = max_data;
    }
    *size = want;
    f->seg.seg_len = reserve + want;
    return &f->des;
}
