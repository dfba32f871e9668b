/*
 * rdrp matching engine: implementation of rdrp_match.h.
 *
 * Layout: one Peer record per possible source, allocated once in
 * rdrp_match_create(), holding that source's posted, unexpected and
 * held-back queues plus its two sequence counters, so the arrival path
 * touches a single record.  Receives posted with RDRP_ANY_SOURCE live in one
 * shared wildcard queue.  All queues are intrusive lists of the caller's
 * rdrp_match_item_t nodes: nothing is allocated after create.
 *
 * Ordering:
 *  - every queued receive gets order = post counter, so "earliest posted"
 *    between a peer's posted queue and the wildcard queue is a comparison;
 *  - every arrival that becomes in order gets order = match counter, so
 *    "earliest unexpected" across peers is a comparison too.
 *
 * Peers whose unexpected queue is non-empty are chained in an index list
 * (Peer::active_prev/next) so that ANY_SOURCE post/probe cost depends on the
 * number of peers with unexpected messages, not on the communicator size.
 *
 * Nothing here throws: allocation uses new(std::nothrow), everything else
 * is pointer manipulation.  The callback passed to rdrp_match_arrive() runs
 * with the queue in a consistent state (the reported pair is unlinked and
 * the expected sequence number already advanced), so it may re-enter the
 * engine.
 */
#include "rdrp_match.h"

#include <cassert>
#include <new>

namespace {

using Item = rdrp_match_item_t;

/* Doubly linked, NULL-terminated list.  An item is linked iff its prev is
 * non-NULL or it is the head; unlink() clears prev/next so that this
 * test stays valid after the item leaves the queue (used by cancel). */
struct List {
    Item *head = nullptr;
    Item *tail = nullptr;
};

void push_back(List &l, Item *it) noexcept
{
    it->prev = l.tail;
    it->next = nullptr;
    if (l.tail)
        l.tail->next = it;
    else
        l.head = it;
    l.tail = it;
}

/* Insert it immediately before pos (pos == NULL: append). */
void insert_before(List &l, Item *pos, Item *it) noexcept
{
    if (!pos) {
        push_back(l, it);
        return;
    }
    it->next = pos;
    it->prev = pos->prev;
    if (pos->prev)
        pos->prev->next = it;
    else
        l.head = it;
    pos->prev = it;
}

void unlink(List &l, Item *it) noexcept
{
    if (it->prev)
        it->prev->next = it->next;
    else
        l.head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        l.tail = it->prev;
    it->prev = it->next = nullptr;
}

bool is_linked(const List &l, const Item *it) noexcept
{
    return it->prev != nullptr || l.head == it;
}

/* MPI tag rule.  RDRP_ANY_TAG only covers user tags (>= 0): negative tags
 * belong to collectives and must be asked for explicitly. */
bool tag_matches(int32_t want, int32_t have) noexcept
{
    return want == RDRP_ANY_TAG ? have >= 0 : want == have;
}

/* First arrival in l that a receive for tag would take. */
Item *first_arrival_for(const List &l, int32_t tag) noexcept
{
    for (Item *it = l.head; it; it = it->next)
        if (tag_matches(tag, it->tag))
            return it;
    return nullptr;
}

/* First receive in l that takes a message carrying tag. */
Item *first_recv_for(const List &l, int32_t tag) noexcept
{
    for (Item *it = l.head; it; it = it->next)
        if (tag_matches(it->tag, tag))
            return it;
    return nullptr;
}

constexpr int32_t kNoPeer = -1;

struct Peer {
    List posted;      /* receives naming this source, in post order */
    List unexpected;  /* in-order arrivals nobody wanted yet, in match order */
    List held;        /* out-of-order arrivals, sorted by distance from expected_seq */
    uint32_t expected_seq = 0;   /* next sequence number to match from this peer */
    int32_t active_prev = kNoPeer;  /* chain of peers with unexpected messages */
    int32_t active_next = kNoPeer;
};

} // namespace

struct rdrp_match_queue {
    Peer *peers = nullptr;
    int32_t size = 0;
    List wild_posted;                 /* RDRP_ANY_SOURCE receives, in post order */
    int32_t active_head = kNoPeer;    /* first peer with a non-empty unexpected queue */
    uint64_t next_post_order = 0;
    uint64_t next_match_order = 0;
    size_t n_posted = 0;
    size_t n_unexpected = 0;
    size_t n_held = 0;
};

/* Test hook, deliberately not in rdrp_match.h: lets unit tests start a
 * peer's sequence numbers near UINT32_MAX without 2^32 messages.  Only
 * valid while the peer has nothing held back.  The component is built with
 * -fvisibility=hidden, so this does not leak out of the PML. */
extern "C" void rdrp_match_test_set_seq(rdrp_match_queue_t *q, int peer, uint32_t expected);

namespace {

using Queue = rdrp_match_queue;

bool valid_peer(const Queue *q, int32_t rank) noexcept
{
    return rank >= 0 && rank < q->size;
}

/* Posted queue an (already validated) receive belongs to. */
List &posted_list_of(Queue *q, const Item *recv) noexcept
{
    return recv->src == RDRP_ANY_SOURCE ? q->wild_posted : q->peers[recv->src].posted;
}

/* ---- unexpected queue, with the active-peer chain kept in step ---- */

void append_unexpected(Queue *q, int32_t rank, Item *arrival) noexcept
{
    Peer &p = q->peers[rank];
    if (!p.unexpected.head) {
        p.active_prev = kNoPeer;
        p.active_next = q->active_head;
        if (q->active_head != kNoPeer)
            q->peers[q->active_head].active_prev = rank;
        q->active_head = rank;
    }
    push_back(p.unexpected, arrival);
    ++q->n_unexpected;
}

void remove_unexpected(Queue *q, Item *arrival) noexcept
{
    const int32_t rank = arrival->src;
    Peer &p = q->peers[rank];
    unlink(p.unexpected, arrival);
    --q->n_unexpected;
    if (p.unexpected.head)
        return;
    if (p.active_prev != kNoPeer)
        q->peers[p.active_prev].active_next = p.active_next;
    else
        q->active_head = p.active_next;
    if (p.active_next != kNoPeer)
        q->peers[p.active_next].active_prev = p.active_prev;
    p.active_prev = p.active_next = kNoPeer;
}

/* Earliest unexpected arrival (in match order) matching (src, tag).  For a
 * specific source the head-most match of that peer is the earliest; for
 * ANY_SOURCE compare the first match of every peer that has any. */
Item *find_unexpected(Queue *q, int32_t src, int32_t tag) noexcept
{
    if (src != RDRP_ANY_SOURCE)
        return first_arrival_for(q->peers[src].unexpected, tag);

    Item *best = nullptr;
    for (int32_t r = q->active_head; r != kNoPeer; r = q->peers[r].active_next) {
        Item *it = first_arrival_for(q->peers[r].unexpected, tag);
        if (it && (!best || it->order < best->order))
            best = it;
    }
    return best;
}

/* ---- arrival path ---- */

/* Earliest-posted receive that accepts an in-order arrival from p.  The
 * wildcard scan stops as soon as it reaches receives posted after the
 * specific candidate: those can never win.  Inline: it is most of the
 * arrival path's matching (rdrp_match_arrive_posted). */
inline __attribute__((always_inline)) Item *find_posted(Queue *q, Peer &p, const Item *arrival) noexcept
{
    Item *best = first_recv_for(p.posted, arrival->tag);
    for (Item *w = q->wild_posted.head; w && (!best || w->order < best->order); w = w->next)
        if (tag_matches(w->tag, arrival->tag))
            return w;
    return best;
}

/* Hold an out-of-order arrival.  Sorting key is the distance ahead of
 * expected_seq (unsigned, so it wraps correctly through UINT32_MAX).  The
 * scan starts at the tail: transports reorder only slightly, so a new early
 * arrival usually belongs at or near the end. */
void hold(Queue *q, Peer &p, Item *arrival) noexcept
{
    const uint32_t dist = arrival->seq - p.expected_seq;
    Item *pos = nullptr;  /* insert before pos */
    for (Item *it = p.held.tail; it && it->seq - p.expected_seq > dist; it = it->prev)
        pos = it;
    insert_before(p.held, pos, arrival);
    ++q->n_held;
}

/* Feed one in-order arrival to matching: report the pair or park it as
 * unexpected.  Returns the number of matches (0 or 1). */
int deliver(Queue *q, int32_t rank, Item *arrival, rdrp_match_cb_t cb, void *ctx) noexcept
{
    Peer &p = q->peers[rank];
    ++p.expected_seq;
    arrival->order = q->next_match_order++;

    Item *recv = find_posted(q, p, arrival);
    if (!recv) {
        append_unexpected(q, rank, arrival);
        return 0;
    }
    unlink(posted_list_of(q, recv), recv);
    --q->n_posted;
    arrival->prev = arrival->next = nullptr;
    cb(ctx, arrival, recv);
    return 1;
}

} // namespace

/* ---- public API ---- */

extern "C" {

rdrp_match_queue_t *rdrp_match_create(int comm_size)
{
    if (comm_size <= 0)
        return nullptr;
    Queue *q = new (std::nothrow) Queue;
    if (!q)
        return nullptr;
    q->peers = new (std::nothrow) Peer[comm_size];
    if (!q->peers) {
        delete q;
        return nullptr;
    }
    q->size = comm_size;
    return q;
}

void rdrp_match_destroy(rdrp_match_queue_t *q)
{
    if (!q)
        return;
    delete[] q->peers;
    delete q;
}

rdrp_match_item_t *rdrp_match_post(rdrp_match_queue_t *q, rdrp_match_item_t *recv)
{
    assert(recv->src == RDRP_ANY_SOURCE || valid_peer(q, recv->src));
    Item *arrival = find_unexpected(q, recv->src, recv->tag);
    if (arrival) {
        remove_unexpected(q, arrival);
        recv->prev = recv->next = nullptr;  /* not queued: cancel must say 0 */
        return arrival;
    }
    recv->order = q->next_post_order++;
    push_back(posted_list_of(q, recv), recv);
    ++q->n_posted;
    return nullptr;
}

int rdrp_match_arrive(rdrp_match_queue_t *q, rdrp_match_item_t *arrival,
                      rdrp_match_cb_t cb, void *ctx)
{
    const int32_t rank = arrival->src;
    assert(valid_peer(q, rank));
    assert(arrival->tag != RDRP_ANY_TAG);  /* would be unmatchable */
    Peer &p = q->peers[rank];  /* stable: the peer array never moves */

    if (arrival->seq != p.expected_seq) {
        hold(q, p, arrival);
        return 0;
    }

    int matches = deliver(q, rank, arrival, cb, ctx);
    /* The gap before the held-back head may now be closed; re-read the head
     * each time because the callback may have re-entered the engine. */
    for (Item *next = p.held.head; next && next->seq == p.expected_seq; next = p.held.head) {
        unlink(p.held, next);
        --q->n_held;
        matches += deliver(q, rank, next, cb, ctx);
    }
    return matches;
}

rdrp_match_item_t *rdrp_match_arrive_posted(rdrp_match_queue_t *q, int32_t src, int32_t tag,
                                            uint32_t seq)
{
    assert(valid_peer(q, src));
    Peer &p = q->peers[src];
    if (seq != p.expected_seq || p.held.head)
        return nullptr;
    Item probe;
    probe.tag = tag;
    Item *recv = find_posted(q, p, &probe);
    if (!recv)
        return nullptr;
    unlink(posted_list_of(q, recv), recv);
    --q->n_posted;
    ++p.expected_seq;
    ++q->next_match_order;  /* the order this arrival would have had */
    return recv;
}

rdrp_match_item_t *rdrp_match_probe(rdrp_match_queue_t *q, int src, int tag, int remove)
{
    assert(src == RDRP_ANY_SOURCE || valid_peer(q, src));
    Item *arrival = find_unexpected(q, src, tag);
    if (arrival && remove)
        remove_unexpected(q, arrival);
    return arrival;
}

int rdrp_match_cancel(rdrp_match_queue_t *q, rdrp_match_item_t *recv)
{
    assert(recv->src == RDRP_ANY_SOURCE || valid_peer(q, recv->src));
    List &l = posted_list_of(q, recv);
    if (!is_linked(l, recv))
        return 0;
    unlink(l, recv);
    --q->n_posted;
    return 1;
}

size_t rdrp_match_posted_count(const rdrp_match_queue_t *q) { return q->n_posted; }
size_t rdrp_match_unexpected_count(const rdrp_match_queue_t *q) { return q->n_unexpected; }
size_t rdrp_match_held_count(const rdrp_match_queue_t *q) { return q->n_held; }

void rdrp_match_foreach(rdrp_match_queue_t *q,
                        void (*fn)(void *ctx, rdrp_match_item_t *item, int kind),
                        void *ctx)
{
    /* next is read before fn runs so fn may free or cancel the item. */
    auto visit = [&](const List &l, int kind) {
        for (Item *it = l.head, *next; it; it = next) {
            next = it->next;
            fn(ctx, it, kind);
        }
    };
    for (int32_t r = 0; r < q->size; ++r)
        visit(q->peers[r].posted, RDRP_MATCH_KIND_POSTED);
    visit(q->wild_posted, RDRP_MATCH_KIND_POSTED);
    for (int32_t r = 0; r < q->size; ++r)
        visit(q->peers[r].unexpected, RDRP_MATCH_KIND_UNEXPECTED);
    for (int32_t r = 0; r < q->size; ++r)
        visit(q->peers[r].held, RDRP_MATCH_KIND_HELD);
}

void rdrp_match_test_set_seq(rdrp_match_queue_t *q, int peer, uint32_t expected)
{
    assert(valid_peer(q, peer) && !q->peers[peer].held.head);
    q->peers[peer].expected_seq = expected;
}

} // extern "C"
