/*
 * Data-region slots of one mailbox: which slot holds a packet from whom.
 * The caller stores a data packet in the slot on_packet() hands out and
 * gives the slot back when the upper layer is done with it; the slot's
 * owner tells the engine whose credit came free.
 *
 * One uint32_t per slot: a used slot holds its sender; a free slot holds
 * kFree | index of the next free slot (an intrusive free list), so a slot
 * costs 4 bytes of bookkeeping whatever the number of peers.
 */
#ifndef RDRP_CREDIT_SLOT_TABLE_H
#define RDRP_CREDIT_SLOT_TABLE_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdrp::credit {

class SlotTable {
public:
    static constexpr uint32_t kFree = 0x80000000u;
    static constexpr uint32_t kEnd = 0x7FFFFFFFu;

    explicit SlotTable(uint32_t nslots) : cells_(nslots)
    {
        for (uint32_t i = 0; i < nslots; ++i)
            cells_[i] = kFree | (i + 1 == nslots ? kEnd : i + 1);
        first_free_ = nslots == 0 ? kEnd : 0;
    }
    uint32_t capacity() const { return uint32_t(cells_.size()); }
    uint32_t used() const { return used_; }
    bool full() const { return first_free_ == kEnd; }
    /* Take a free slot for a packet from `owner`.  Precondition: !full(). */
    uint32_t take(uint32_t owner)
    {
        const uint32_t slot = first_free_;
        first_free_ = cells_[slot] & ~kFree;
        cells_[slot] = owner;
        ++used_;
        return slot;
    }
    /* True if slot is a slot of this table that currently holds a packet. */
    bool in_use(int64_t slot) const
    {
        return slot >= 0 && uint64_t(slot) < cells_.size() && !(cells_[size_t(slot)] & kFree);
    }
    uint32_t owner(uint32_t slot) const { return cells_[slot]; }
    /* Give a slot back.  Precondition: in_use(slot). */
    void release(uint32_t slot)
    {
        cells_[slot] = kFree | first_free_;
        first_free_ = slot;
        --used_;
    }

private:
    std::vector<uint32_t> cells_;
    uint32_t first_free_ = kEnd;
    uint32_t used_ = 0;
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_SLOT_TABLE_H
