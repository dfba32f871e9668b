/*
 * The four activity lists of thesis §6.2 / §6.5.2: high, medium, low and
 * null.  Every sender is in exactly one list.  Lists are intrusive doubly
 * linked lists over sender ids, so every operation is O(1); the
 * "high becomes medium, medium becomes low, new empty high" shift rotates
 * three list headers instead of moving senders (the thesis' footnote 4).
 */
#ifndef RDRP_CREDIT_ACTIVITY_H
#define RDRP_CREDIT_ACTIVITY_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rdrp::credit {

enum class Activity : uint8_t { kHigh = 0, kMedium = 1, kLow = 2, kNull = 3 };

const char *activity_name(Activity a);

class ActivityLists {
public:
    static constexpr uint32_t kNone = UINT32_MAX;

    ActivityLists() = default;
    /* All senders in the low list in increasing id order (thesis §6.3). */
    explicit ActivityLists(uint32_t npeers);

    Activity level(uint32_t id) const;
    /* Unlink id from its list and insert it first in `to`. */
    void move_to_front(uint32_t id, Activity to);
    uint32_t front(Activity a) const { return lists_[phys(a)].first; }
    uint32_t back(Activity a) const { return lists_[phys(a)].last; }
    uint32_t next(uint32_t id) const { return links_[id].next; }
    bool empty(Activity a) const { return lists_[phys(a)].first == kNone; }
    uint32_t size(Activity a) const { return lists_[phys(a)].count; }
    /* High becomes medium, medium becomes low, the (empty) low becomes the
     * new high.  Precondition: the low list is empty. */
    void shift();

    static size_t bytes_per_peer();

private:
    struct Link {
        uint32_t prev, next;
        uint8_t list;  /* physical list 0..3 */
    };
    struct List {
        uint32_t first = kNone, last = kNone, count = 0;
    };
    /* Roles high/medium/low map onto physical lists 0..2 and rotate on
     * shift(); null is always physical list 3. */
    uint8_t phys(Activity a) const { return a == Activity::kNull ? 3 : role_[uint8_t(a)]; }
    void unlink(uint32_t id);

    std::vector<Link> links_;
    List lists_[4];
    uint8_t role_[3] = {0, 1, 2};
};

}  // namespace rdrp::credit

#endif  // RDRP_CREDIT_ACTIVITY_H
