/*
 * Activity lists (see credit_activity.h).
 */
#include "credit_activity.h"

namespace rdrp::credit {

const char *activity_name(Activity a)
{
    switch (a) {
    case Activity::kHigh: return "high";
    case Activity::kMedium: return "medium";
    case Activity::kLow: return "low";
    case Activity::kNull: return "null";
    }
    return "?";
}

ActivityLists::ActivityLists(uint32_t npeers) : links_(npeers)
{
    List &low = lists_[phys(Activity::kLow)];
    for (uint32_t id = 0; id < npeers; ++id) {
        links_[id] = Link{id == 0 ? kNone : id - 1, id + 1 == npeers ? kNone : id + 1,
                          phys(Activity::kLow)};
    }
    if (npeers != 0) {
        low.first = 0;
        low.last = npeers - 1;
        low.count = npeers;
    }
}

Activity ActivityLists::level(uint32_t id) const
{
    const uint8_t p = links_[id].list;
    if (p == 3)
        return Activity::kNull;
    for (uint8_t r = 0; r < 3; ++r)
        if (role_[r] == p)
            return Activity(r);
    return Activity::kNull;  // unreachable: every physical list 0..2 has a role
}

void ActivityLists::unlink(uint32_t id)
{
    Link &l = links_[id];
    List &list = lists_[l.list];
    if (l.prev == kNone)
        list.first = l.next;
    else
        links_[l.prev].next = l.next;
    if (l.next == kNone)
        list.last = l.prev;
    else
        links_[l.next].prev = l.prev;
    --list.count;
}

void ActivityLists::move_to_front(uint32_t id, Activity to)
{
    unlink(id);
    const uint8_t p = phys(to);
    List &list = lists_[p];
    Link &l = links_[id];
    l.list = p;
    l.prev = kNone;
    l.next = list.first;
    if (list.first == kNone)
        list.last = id;
    else
        links_[list.first].prev = id;
    list.first = id;
    ++list.count;
}

void ActivityLists::shift()
{
    const uint8_t old_high = role_[0], old_medium = role_[1], old_low = role_[2];
    role_[0] = old_low;  // empty: the new high list
    role_[1] = old_high;
    role_[2] = old_medium;
}

size_t ActivityLists::bytes_per_peer() { return sizeof(Link); }

}  // namespace rdrp::credit
