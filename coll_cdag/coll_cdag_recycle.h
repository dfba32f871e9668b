/*
 * coll/cdag engine service: recycling of what a collective call needs per
 * message (send and receive contexts, hash-map nodes, buffers for early
 * rendezvous arrivals), so repeated and persistent collectives allocate
 * nothing once warm.  Every allocation these make (a miss) is counted in
 * cdag_glue_stats.allocations, the MPI_T variable coll_cdag_allocations
 * that test coll_cdag_alloc reads.
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

inline void count_alloc() { ++cdag_glue_stats.allocations; }

/* Objects of one type, kept on an intrusive free list when done with. */
template <class T>
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
            count_alloc();
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
            count_alloc();
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
template <class T>
struct NodeAlloc {
    using value_type = T;
    NodeAlloc() = default;
    template <class U>
    NodeAlloc(const NodeAlloc<U> &) {}
    T *allocate(std::size_t n) {
        if (n == 1) {
            if (T *p = reinterpret_cast<T *>(Recycler<T>::head)) {
                Recycler<T>::head = Recycler<T>::head->next;
                return p;
            }
        }
        count_alloc();
        return static_cast<T *>(::operator new(sizeof(typename Recycler<T>::Slot) * n));
    }
    void deallocate(T *p, std::size_t n) {
        if (n == 1) {
            auto *s = reinterpret_cast<typename Recycler<T>::Slot *>(p);
            s->next = Recycler<T>::head;
            Recycler<T>::head = s;
            return;
        }
        ::operator delete(p);
    }
    template <class U>
    bool operator==(const NodeAlloc<U> &) const { return true; }
    template <class U>
    bool operator!=(const NodeAlloc<U> &) const { return false; }
};

/* Buffers for early rendezvous arrivals (larger than a shadow buffer):
 * the last few freed are kept and handed out again for sizes they fit. */
void *big_buffer_get(std::size_t len, std::size_t *cap);
void big_buffer_put(void *p, std::size_t cap);
void big_buffers_release();

}  // namespace cdag_svc
namespace cdag { struct Plan; }
namespace cdag_svc {
/* fill the pools for every message of a plan (coll_cdag_transport.cc) */
void reserve_for(const cdag::Plan &plan);

}  // namespace cdag_svc

#endif
