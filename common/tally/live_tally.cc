/* common/tally: named counts of what a component left behind at finalize. */
#include "live_tally.h"

#include <cstdio>
#include <cstring>
#include <string>

extern "C" {

void rdrp_tally_init(rdrp_tally_t *t)
{
    std::memset(t, 0, sizeof(*t));
}

void rdrp_tally_add(rdrp_tally_t *t, const char *name, uint64_t count, rdrp_tally_owner_t owner)
{
    if (t->n >= RDRP_TALLY_MAX) {
        /* a table too small for its component must not hide a leak */
        if (count) t->overflow = 1;
        return;
    }
    t->items[t->n].name = name;
    t->items[t->n].count = count;
    t->items[t->n].owner = owner;
    ++t->n;
}

uint64_t rdrp_tally_sum(const rdrp_tally_t *t, int owner)
{
    uint64_t s = 0;
    for (int i = 0; i < t->n; ++i)
        if (owner < 0 || t->items[i].owner == owner) s += t->items[i].count;
    if (t->overflow && owner != RDRP_TALLY_APP) s += 1;
    return s;
}

int rdrp_tally_verdict(const rdrp_tally_t *t, int level)
{
    if (level <= RDRP_FINALIZE_CHECK_OFF || rdrp_tally_sum(t, -1) == 0) return 0;
    return level >= RDRP_FINALIZE_CHECK_STRICT ? 2 : 1;
}

size_t rdrp_tally_format(const rdrp_tally_t *t, int owner, char *buf, size_t len)
{
    std::string s;
    for (int i = 0; i < t->n; ++i) {
        const rdrp_tally_item_t &it = t->items[i];
        if (it.count == 0 || (owner >= 0 && it.owner != owner)) continue;
        if (!s.empty()) s += ", ";
        s += it.name;
        s += ' ';
        s += std::to_string(it.count);
    }
    if (t->overflow && owner != RDRP_TALLY_APP) {
        if (!s.empty()) s += ", ";
        s += "more counts than the tally holds";
    }
    if (len) {
        size_t n = s.size() < len - 1 ? s.size() : len - 1;
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return s.size();
}

size_t rdrp_tally_report_line(const rdrp_tally_t *t, const char *component, int rank, char *buf,
                              size_t len)
{
    auto part = [t](int owner) {
        std::string s(rdrp_tally_format(t, owner, nullptr, 0) + 1, '\0');
        rdrp_tally_format(t, owner, &s[0], s.size());
        s.pop_back();
        return s.empty() ? std::string("none") : s;
    };
    std::string s = std::string("leak-check ") + component + " rank " + std::to_string(rank) +
                    ": application: " + part(RDRP_TALLY_APP) + "; " + component + ": " +
                    part(RDRP_TALLY_OURS);
    if (len) {
        size_t n = s.size() < len - 1 ? s.size() : len - 1;
        std::memcpy(buf, s.data(), n);
        buf[n] = '\0';
    }
    return s.size();
}

}  // extern "C"
