/*
 * coll/cdag engine service: recycling of what a collective call needs per
 * message (send and receive contexts, hash-map nodes, buffers for early
 * rendezvous arrivals), so repeated and persistent collectives allocate
 * nothing once warm.  Every allocation these make (a miss) is counted:
 *  - what a call needs for itself (requests, schedules, executors, send and
 *    receive contexts, nodes of posted receives) in
 *    cdag_glue_stats.allocations (MPI_T coll_cdag_allocations), which must
 *    not move on repeated calls (test coll_cdag_alloc);
 *  - what holds messages that arrived before their receive (copies, their
 *    map nodes, pulls in flight) in cdag_glue_stats.early_allocations: how
 *    many there are depends on how far peers run ahead with eager sends,
 *    so the pools grow to the high-water mark and keep it (within a
 *    budget) rather than being bounded per call.
 *
 * Not thread-safe on their own: used under the service Lock only.
 */
#ifndef COLL_CDAG_RECYCLE_H
#define COLL_CDAG_RECYCLE_H

#include "coll_cdag_glue.h"

#include <cstddef>
#include <new>
#include <utility>

namespace cdag_svc {

/* Set while a call reserves what its new plan needs (reserve_for, under
 * the service lock): what the early pools grow by then is the call's
 * (coll_cdag_allocations), not an early arrival's.  A held message keeps
 * its map node, so a plan compiled meanwhile grows the pool past it:
 * that was counted as an early allocation (cdag_rndv_runahead, 1 run in
 * 30: the side barrier's first call on a new communicator while rank 0's
 * first broadcast was held). */
inline bool reserving_for_plan = false;

struct PlanReserve {
    PlanReserve() { reserving_for_plan = true; }
    ~PlanReserve() { reserving_for_plan = false; }
    PlanReserve(const PlanReserve &) = delete;
    PlanReserve &operator=(const PlanReserve &) = delete;
};

inline void count_alloc(bool early = false)
{
    /* atomic: request_get and stage_alloc (coll_cdag_run.c) count from
     * application threads outside the engine lock (ThreadSanitizer,
     * mt_coll_threads); they count early = false and never read the flag */
    if (early && !reserving_for_plan) __atomic_fetch_add(&cdag_glue_stats.early_allocations, 1, __ATOMIC_RELAXED);
    else __atomic_fetch_add(&cdag_glue_stats.allocations, 1, __ATOMIC_RELAXED);
}

/* Objects of one type, kept on an intrusive free list when done with.
 * Early: its allocations count as early_allocations. */
template <class T, bool Early = false>
struct Recycler {
    union Slot {
        Slot *next;
        alignas(T) unsigned char obj[sizeof(T)];
    };
    static inline Slot *head = nullptr;
    static inline std::size_t total = 0;  // objects in existence (in use + free)

    /* at least n objects in existence: a schedule with n such operations
     * in flight then runs without allocating */
    static void reserve(std::size_t n) {
        while (total < n) {
            Slot *s = static_cast<Slot *>(::operator new(sizeof(Slot), std::nothrow));
            if (!s) return;
            count_alloc(Early);
            ++total;
            s->next = head;
            head = s;
        }
    }

    template <class... A>
    static T *make(A &&...a) {
        Slot *s = head;
        if (s) {
            head = s->next;
        } else {
            s = static_cast<Slot *>(::operator new(sizeof(Slot), std::nothrow));
            if (!s) return nullptr;
            count_alloc(Early);
            ++total;
        }
        return new (s->obj) T{std::forward<A>(a)...};
    }
    static void done(T *p) {
        p->~T();
        Slot *s = reinterpret_cast<Slot *>(p);
        s->next = head;
        head = s;
    }
};

/* std allocator for hash-map nodes: single nodes come back to a free list
 * (bucket arrays, allocated on growth only, are counted and freed). */
template <class T, bool Early = false>
struct NodeAlloc {
    using value_type = T;
    using R = Recycler<T, Early>;
    template <class U>
    struct rebind {
        using other = NodeAlloc<U, Early>;
    };
    NodeAlloc() = default;
    template <class U>
    NodeAlloc(const NodeAlloc<U, Early> &) {}
    T *allocate(std::size_t n) {
        if (n == 1) {
            if (T *p = reinterpret_cast<T *>(R::head)) {
                R::head = R::head->next;
                return p;
            }
        }
        count_alloc(Early);
        return static_cast<T *>(::operator new(sizeof(typename R::Slot) * n));
    }
    void deallocate(T *p, std::size_t n) {
        if (n == 1) {
            auto *s = reinterpret_cast<typename R::Slot *>(p);
            s->next = R::head;
            R::head = s;
            return;
        }
        ::operator delete(p);
    }
    template <class U>
    bool operator==(const NodeAlloc<U, Early> &) const { return true; }
    template <class U>
    bool operator!=(const NodeAlloc<U, Early> &) const { return false; }
};

/* Buffers for early rendezvous arrivals (larger than a shadow buffer):
 * the last few freed are kept and handed out again for sizes they fit. */
void *big_buffer_get(std::size_t len, std::size_t *cap);
bool big_buffer_kept(std::size_t len);  /* a kept one fits len: big_buffer_get allocates nothing */
void big_buffer_put(void *p, std::size_t cap);
void big_buffers_release();

}  // namespace cdag_svc
namespace cdag { struct Plan; }
namespace cdag_svc {
/* fill the pools for every message of a plan (coll_cdag_transport.cc) */
void reserve_for(const cdag::Plan &plan);

}  // namespace cdag_svc

#endif
