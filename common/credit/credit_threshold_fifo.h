/*
 * The FIFO lists of thresholds of thesis §6.2, one list of credit_slots + 1
 * entries per sender, stored flat (one allocation for all senders).
 *
 * Entry meaning (how the engine uses it, see credit_receiver.h): the head
 * (`current_threshold`) is the number of credit-consuming packets the sender
 * must still have consumed before the receiver may return credits again;
 * each time it is reached the head is popped and the credits granted in that
 * round are pushed at the tail, so an entry comes back as a threshold
 * credit_slots + 1 rounds after it was granted.  That delay is what keeps
 * the sender's credit region from overflowing (eq. 5.1 generalised).
 */
#ifndef RDRP_CREDIT_THRESHOLD_FIFO_H
#define RDRP_CREDIT_THRESHOLD_FIFO_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdrp::credit {

class ThresholdFifo {
public:
    ThresholdFifo() = default;
    /* npeers lists of `length` entries, every entry set to `initial`. */
    ThresholdFifo(uint32_t npeers, uint32_t length, uint32_t initial)
        : length_(length), entries_(size_t(npeers) * length, initial), head_(npeers, 0) {}

    uint32_t length() const { return length_; }
    uint32_t head(uint32_t peer) const { return entries_[base(peer) + head_[peer]]; }
    /* Replace the head (the thesis' "current_threshold is increased"). */
    void set_head(uint32_t peer, uint32_t value) { entries_[base(peer) + head_[peer]] = value; }
    /* Pop the head and push `value` at the tail: the slot just freed by the
     * pop is the new tail, so this is one store and one index update. */
    void rotate(uint32_t peer, uint32_t value)
    {
        entries_[base(peer) + head_[peer]] = value;
        const uint32_t next = head_[peer] + 1u;
        head_[peer] = uint8_t(next == length_ ? 0 : next);
    }
    /* Entry i counted from the head (0 = head); for tests and traces. */
    uint32_t at(uint32_t peer, uint32_t i) const
    {
        return entries_[base(peer) + (head_[peer] + i) % length_];
    }
    void set_at(uint32_t peer, uint32_t i, uint32_t value)
    {
        entries_[base(peer) + (head_[peer] + i) % length_] = value;
    }
    /* Bytes of storage per peer, for the memory table. */
    static size_t bytes_per_peer(uint32_t length) { return length * sizeof(uint32_t) + sizeof(uint8_t); }

private:
    size_t base(uint32_t peer) const { return size_t(peer) * length_; }

    uint32_t length_ = 0;
    std::vector<uint32_t> entries_;
    std::vector<uint8_t> head_;  /* credit_slots <= 254, so length <= 255 */
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_THRESHOLD_FIFO_H
