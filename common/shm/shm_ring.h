/*
 * A single-producer single-consumer ring of variable-size messages in
 * memory shared by two processes (or one: a process may talk to itself).
 * No Open MPI or UCX type; C++17, header-only on the fast path.
 *
 * Layout (the ring's bytes, `size` a power of two, 64-byte aligned):
 *
 *   | control: consumer head (its own cache line) | data: size bytes |
 *
 * A message is one entry in the data area: a 16-byte header, then `hlen`
 * bytes of header and `plen` bytes of payload (a payload of at least
 * kAlignPayloadMin bytes starts on a cache line, after padding: see
 * there), padded so the entry takes whole cache lines (64 bytes), or half
 * a line when all of it fits in 32 bytes (kHalfLine: two such messages
 * share a line; see there); an entry of 512 bytes to 4 KiB is followed
 * by kTrailGap bytes nobody writes (see there).  An entry of a line or
 * more starts on a line: behind a half-line entry in a line's first half
 * the producer first fills the second half with a skip marker.  An entry
 * never wraps (its gap included): when it does not fit before the end,
 * the producer writes a skip marker and starts at offset 0.
 *
 * The header's first word is the entry's absolute position in the stream
 * (a 64-bit byte count that starts at `size`, so the zeroes of a fresh
 * ring never look like an entry).  The producer
 * writes everything else first and that word last (release); the consumer
 * waits for it to equal its own position (acquire).  A stale entry of an
 * earlier lap holds an older position, so nothing needs to be cleared and
 * no flag is ever reset.  The consumer publishes its head after it has
 * taken what it read; the producer reads it only when its cached copy says
 * the ring is full.
 *
 * Capacity: one entry takes entry_bytes(message_bytes(hlen, plen)) bytes,
 * plus at most one skip marker per lap; max_message() is the largest
 * message_bytes(hlen, plen) that always fits.
 *
 * Rewind: when the consumer has taken everything and the producer is at
 * least kRewindAt bytes into the lap, the producer skips the rest of the
 * lap (the same skip marker) and starts again at offset 0.  A consumer
 * that keeps up (ping-pong, a receiver waiting for each message) so uses
 * only the first 16-32 KiB of the ring: they stay in the caches and in the
 * page tables of both processes, where walking the whole ring would touch
 * a fresh page every 4 KiB (measured: the first 16384 ring messages of a
 * job cost 0.5 us more each, osu_latency 1-2 B 0.67 us against 0.16 us).
 * The producer looks at the consumer's head for this at most once per
 * kRewindAt bytes it writes, so a stream pays one extra cache-line read per
 * 64 small messages.  A count of bytes alone can lock onto the wrong phase
 * of a bursty sender: 64 messages of 64 bytes, then a reply (osu_bw) put
 * every look in the middle of a burst, never after the drain, and the
 * first 16384 messages walked the ring (osu_bw 1-2 B at a fifth of its
 * later rate).  So the owner of the producer also says when the consumer
 * has likely drained (hint_drained(): the peer sent us something, so it was
 * progressing), and the next push looks then, at most once per
 * kHintedEvery bytes so that a two-way stream stays cheap.
 */
#ifndef RDRP_SHM_RING_H
#define RDRP_SHM_RING_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shm_line_cost.h"

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace rdrp::shm {

struct alignas(64) RingControl {
    std::atomic<uint64_t> head;  /* consumer: bytes consumed (written by the consumer only) */
    /* who writes this ring, in the owner's terms (pml/rdrp: the producer's
     * process index), stored once by the producer when it attaches: a
     * message may then leave out what the ring already says */
    uint32_t producer;
    char pad[64 - sizeof(std::atomic<uint64_t>) - sizeof(uint32_t)];
};
static_assert(sizeof(RingControl) == 64, "one cache line");

struct EntryHeader {
    std::atomic<uint64_t> pos;  /* absolute stream position of this entry: the commit word */
    uint32_t len;               /* hlen + plen */
    uint16_t id;                /* message type (kSkip: the rest of the lap is unused) */
    uint16_t hlen;              /* bytes of header before the payload */
};
static_assert(sizeof(EntryHeader) == 16, "16-byte entry header");

constexpr uint16_t kSkip = 0xFFFF;
/* A rewind at offset off leaves room for off bytes until the consumer has
 * read the skip marker: 16 KiB takes a window of 256 one-line messages
 * (osu_bibw's window of 64 and its credit packets overflowed 4 KiB and
 * waited in the sender's backlog), and 16-32 KiB of ring stay in cache. */
constexpr size_t kRewindAt = 16384;
constexpr size_t kHintedEvery = 512;
constexpr size_t kRingOverhead = sizeof(RingControl);

/* Half-line entries.  A message whose entry fits in 32 bytes (a 16-byte
 * header of pml/rdrp's compact eager format and up to 8 bytes of payload)
 * takes half a line, so a stream of them moves two messages per line
 * between the cores.  That is what a sender's store buffer limits: every
 * ring entry is a line the consumer read a lap ago, whose write waits for
 * an ownership transfer, and the stores of the sender's own work (about 60
 * per MPI_Isend over pml/rdrp, callgrind) queue behind it in order.  Two
 * processes on the 2-vCPU EPYC guest in its slow host mode (a cache-line
 * round trip 320 ns), a ring of 64-byte against 32-byte entries with n
 * other stores per message: n = 20 90 / 85 ns per message, n = 30 157 /
 * 92, n = 60 161 / 107; osu_bw 1-8 B over ob1 (32-byte fast-box slots)
 * 112-126 ns per message against pml/rdrp's 150-170. */
constexpr size_t kHalfLine = 32;
/* Trailing gap.  An entry of kTrailGapMin <= len < kTrailGapBelow
 * message bytes is followed by kTrailGap bytes that nobody writes.  A
 * consumer that keeps up with a stream reads entry k while the producer
 * writes entry k + 1 right behind it, and the consumer's hardware
 * prefetcher, following its reads, fetches lines of entry k + 1 that the
 * producer is writing: each such line goes to the consumer and back to
 * the producer before its stores complete (the producer's store buffer
 * then stalls its own work: perf put the sender's time on the stack
 * stores after the copy).  With the gap, what the prefetcher runs into
 * is unwritten.  Measured on the 2-vCPU EPYC guest, fast host mode: two
 * processes, a ring of 1 KiB messages, 64 a window, ns per message by the
 * distance between entry starts, 1088 (no gap) / 1216 / 1408 / 2112:
 * 118-126 / 110-115 / 103-110 / 103-108; osu_bw over pml/rdrp, no gap /
 * gaps of 512 and 768 bytes: 1 KiB 6048-6210 / 6488-6592 / 7160-7420
 * MB/s, 2 KiB 7740-7901 / 10658-13157 / 10579-10779 (ob1 6929-7049 and
 * 7899-8178); osu_mbw_mr 1 KiB 6155-6184 against 7397-7791 with 768,
 * osu_latency 1 KiB 0.24-0.25 against 0.20-0.21 us.  Not for larger
 * entries: a stream of 4 KiB and more is written with non-temporal stores
 * (non_temporal_by), read back from memory by a prefetcher the gaps break
 * (osu_bw 4 KiB 11599 against 8771 MB/s, 8 KiB 14941 against 10020 with
 * every entry gapped); not for smaller ones, where a line of header takes
 * a larger share and no gain showed (512 B unchanged).  In the slow host
 * mode (a far peer: non-temporal from 512 B) 1 KiB gained 1-3 % and 2 KiB
 * lost 7-11 % (osu_mbw_mr 6597-6613 against 6606-7460 MB/s, ob1 2237). */
constexpr size_t kTrailGap = 768;
constexpr size_t kTrailGapMin = 512;
constexpr size_t kTrailGapBelow = 4096;
/* Bytes one message of len (= message_bytes(hlen, plen)) bytes takes in
 * the ring: half a line if it fits there, whole lines otherwise, and the
 * trailing gap for the sizes that take one. */
inline constexpr size_t entry_bytes(size_t len)
{
    if (sizeof(EntryHeader) + len <= kHalfLine) return kHalfLine;
    const size_t lines = (sizeof(EntryHeader) + len + 63) & ~size_t(63);
    return len >= kTrailGapMin && len < kTrailGapBelow ? lines + kTrailGap : lines;
}
/* Where an entry of `need` = entry_bytes() bytes may start at the first
 * offset at or after off (off a multiple of kHalfLine): anywhere if it
 * takes half a line, on the next line otherwise.  The gap is a skip
 * marker of kHalfLine bytes. */
inline constexpr size_t align_gap(size_t off, size_t need) { return need > kHalfLine ? off & kHalfLine : 0; }

/* Payload alignment.  A payload of at least kAlignPayloadMin bytes starts
 * on a cache line: padding goes between the header and the payload.  A
 * copy between the ring and a 64-byte-aligned buffer (page-aligned
 * application buffers, the mailbox slots) at different offsets within a
 * line, with the lines in the other core's cache, costs up to twice as
 * much (two threads on a 2-core EPYC VM, 8 KiB ping-pong, glibc memcpy:
 * 1.15 us per one-way message with source and destination 64-byte
 * aligned, 2.3-2.6 us with the ring side 8, 16, 32, 48 or 56 bytes off;
 * 1.6x at 4 KiB, 2.5x at 32 KiB).  The bar was 2 KiB until OSU over
 * pml/rdrp (its 32-byte match header puts an unpadded payload 48 bytes
 * into the entry's first line) showed the small copies pay too: A/B
 * interleaved on the EPYC guest, padded from 128 B / from 2 KiB,
 * osu_latency 256 B 0.15 / 0.19 us, osu_bw 256 B 3.7-4.0 / 2.9-3.0 GB/s,
 * 512 B 5.0 / 4.3-4.4, osu_mbw_mr (slow host mode) 256 B 1.24-1.33 /
 * 0.85-0.87 GB/s, 512 B 1.43-1.52 / 0.91-0.93; 128 B and 1-4 KiB within
 * the noise.  For a 32-byte header the padding adds no line to a payload
 * of a power-of-two size (16 + 32 + 16 bytes of padding fill the first
 * line); below 128 B it could cost a line and was not seen to gain.  No
 * field says how much padding an entry has: producer and consumer derive
 * it from hlen and the payload length with the functions below, so the
 * entry format is that of an unpadded ring. */
constexpr size_t kAlignPayloadMin = 128;
/* padding that puts the payload of a header of hlen bytes on a line */
inline constexpr size_t line_pad(size_t hlen) { return (64 - (sizeof(EntryHeader) + hlen) % 64) % 64; }
/* producer: padding between a header of hlen bytes and a payload of plen bytes */
inline constexpr size_t payload_pad(size_t hlen, size_t plen) { return plen >= kAlignPayloadMin ? line_pad(hlen) : 0; }
/* bytes of an entry's message: header, padding, payload (what reserve(),
 * has_room() and max_message() count) */
inline constexpr size_t message_bytes(size_t hlen, size_t plen) { return hlen + payload_pad(hlen, plen) + plen; }
/* consumer: the padding of an entry of len message bytes with a header of
 * hlen bytes (len >= hlen): the inverse of message_bytes(), unambiguous
 * because the padding depends on the payload length only through
 * plen >= kAlignPayloadMin */
inline constexpr size_t pad_of_entry(size_t hlen, size_t len)
{
    return len - hlen >= line_pad(hlen) + kAlignPayloadMin ? line_pad(hlen) : 0;
}

/* Check of one entry header the consumer read from shared memory, at
 * offset `off` of a data area of `size` bytes (the other process, or a
 * stray write into the segment, may have put anything there): the entry
 * must lie inside the data area, a skip marker must end exactly at the
 * end of the lap, a message must fit max_message() and its header its
 * length.  A pure function of the values read once (the caller copies
 * them out of shared memory first, so they cannot change between check
 * and use); a non-null result is the reason for rejecting the ring.
 * check_entry() is check_ring_place() (the data area and the offset) and
 * check_entry_fields() (what the entry says). */
inline const char *check_ring_place(size_t off, size_t size)
{
    if (size < 128 || (size & (size - 1)) != 0 || off >= size || (off & (kHalfLine - 1)) != 0)
        return "ring entry at an impossible offset";
    return nullptr;
}
/* The fields' part of check_entry(), for an offset check_ring_place()
 * accepts.  The consumer's poll runs only this per entry: its offsets come
 * from its own head, checked once at attach and then only ever advanced by
 * entries this check accepted, so they stay in place. */
inline const char *check_entry_fields(size_t off, size_t size, uint32_t len, uint16_t id, uint16_t hlen)
{
    if (id == kSkip) {
        const size_t end = off + sizeof(EntryHeader) + static_cast<size_t>(len);
        /* the rest of the lap, or the second half of a line */
        if (end != size && !((off & 63) == kHalfLine && end == off + kHalfLine))
            return "ring skip marker does not end at the end of the ring or of its line";
        return nullptr;
    }
    if (static_cast<size_t>(len) > size / 2 - 64) return "ring entry longer than the largest message";
    if (hlen > len) return "ring entry header longer than the entry";
    if (align_gap(off, entry_bytes(len)) != 0) return "ring entry of a line or more does not start on a line";
    if (off + entry_bytes(len) > size) return "ring entry runs past the end of the ring";
    return nullptr;
}
inline const char *check_entry(size_t off, size_t size, uint32_t len, uint16_t id, uint16_t hlen)
{
    if (const char *bad = check_ring_place(off, size)) return bad;
    return check_entry_fields(off, size, len, id, hlen);
}

/* Bytes of shared memory one ring of `size` data bytes needs. */
inline constexpr size_t ring_bytes(size_t size) { return kRingOverhead + size; }

/* Make mem (ring_bytes(size) bytes, zeroed) an empty ring; once, by its
 * creator, before either end attaches. */
inline void ring_init(void *mem, size_t size)
{
    static_cast<RingControl *>(mem)->head.store(size, std::memory_order_release);
}

/* Copy n bytes (a message into a ring entry, or out of one into a
 * receive buffer): up to 32 bytes by a few fixed-size moves inline (a
 * libc call costs more than such a copy), larger ones by memcpy.  It
 * never reads past src + n and writes only inside [dst, dst + n). */
inline void copy_bytes(char *dst, const void *src, size_t n)
{
    const char *s = static_cast<const char *>(src);
    if (n > 32) {
        std::memcpy(dst, s, n);
    } else if (n >= 16) {  /* two overlapping 16-byte moves */
        char a[16], b[16];
        std::memcpy(a, s, 16);
        std::memcpy(b, s + n - 16, 16);
        std::memcpy(dst, a, 16);
        std::memcpy(dst + n - 16, b, 16);
    } else if (n >= 8) {
        uint64_t a, b;
        std::memcpy(&a, s, 8);
        std::memcpy(&b, s + n - 8, 8);
        std::memcpy(dst, &a, 8);
        std::memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        std::memcpy(&a, s, 4);
        std::memcpy(&b, s + n - 4, 4);
        std::memcpy(dst, &a, 4);
        std::memcpy(dst + n - 4, &b, 4);
    } else if (n) {  /* 1-3 bytes: first, middle, last */
        char a = s[0], b = s[n / 2], c = s[n - 1];
        dst[0] = a;
        dst[n / 2] = b;
        dst[n - 1] = c;
    }
}

/* Copy n bytes to dst (64-byte aligned) with non-temporal stores, and
 * order them before any later store (sfence): the lines go to memory
 * without first being fetched from the core that read them last.  A ring
 * entry's lines are the consumer's (it read them a lap ago), and an
 * ordinary store to one waits for an ownership transfer; a sender's store
 * buffer holds only a few of those at once.  For a stream (the consumer
 * behind: it reads the lines later, from memory, with prefetching) that
 * transfer, not the copy, is the cost: two processes on the 2-vCPU EPYC
 * guest, 64-message windows, ns per message ordinary / non-temporal: 2 KiB
 * 271 / 280 (fast host mode: a line round trip 80-95 ns), 1042 / 288 (slow
 * mode, 320-350 ns); 4 KiB 520 / 350 and 2000 / 350; 8 KiB 722 / 600 and
 * 1900 / 620.  Not for a consumer waiting on the message: its read then
 * comes from memory instead of the writer's cache (osu_latency 2 KiB fast
 * mode 0.34 us ordinary, 0.62 non-temporal), and not below 2 KiB (1 KiB
 * stream, fast mode: 171 / 215 ns). */
constexpr size_t kStreamNonTemporalMin = 2048;
/* From 8 KiB non-temporal stores win even for a reader that waits for
 * the message, in both host modes (osu_latency over pml/rdrp, ordinary /
 * non-temporal: 8 KiB 1.17-1.18 / 1.49-1.51 us fast, 4.45-4.68 /
 * 1.77-1.79 slow; 16 KiB 2.26-2.29 / 2.23-2.27 fast, 8.35-8.45 /
 * 2.57-2.64 slow): the ordinary ring's cost grows with the lines a
 * message takes, each an ownership transfer in the slow mode. */
constexpr size_t kNonTemporalAlwaysMin = 8192;
/* Both rules above hold for a peer whose line cost is not known.  Once the
 * ring has measured it (RingProducer::line_ns, shm_line_cost.h) the host
 * mode is known and the choice follows it.  For a far peer (lines that
 * take long to come back: the slow mode) non-temporal stores win from
 * 512 bytes, waiting reader or not: two processes, pml/rdrp, ns per
 * message ordinary / non-temporal, slow mode (line round trip 300-340 ns,
 * measured line 120-150 ns): ping-pong 256 B 455-465 / 477-521, 512 B
 * 585-604 / 557-577, 1 KiB 770-829 / 675; 64-message windows 256 B
 * 178-185 / 211-227, 512 B 336-339 / 228-233, 1 KiB 602-624 / 247.  In
 * the fast mode (80-97 ns, measured 40-60 ns) they lose at 1 KiB (ping-
 * pong 231-285 / 545, windows 167-172 / 224). */
constexpr size_t kFarNonTemporalMin = 512;
/* For a near peer they win streams from 4 KiB: messages that follow our
 * own rather than answer the peer's (RingProducer::spoke; osu_bw's
 * receiver, waiting in MPI_Waitall, keeps up, so it is rarely 4 messages
 * behind).  They lose where the reader waits for each message (at 8 KiB
 * still) and in osu_bibw at 2 KiB.  Fast mode, non-temporal / ordinary:
 * osu_bw 4 KiB 11.0-11.6 / 7.8-8.1 GB/s, osu_latency 8 KiB 1.53-1.59 /
 * 1.18-1.20 us, osu_bibw 2 KiB (streams of 2 KiB by the busy test) 7.6-7.7
 * / 11.9-12.5 GB/s. */
constexpr size_t kNearNonTemporalMin = 4096;
/* ... and from 32 KiB a waiting reader too (ring messages that large
 * where single copy is off or dear): osu_latency 16 KiB 2.20-2.27 us
 * ordinary / 2.48-2.53 non-temporal, 32 KiB 4.48-4.52 / 3.88-4.09 (fast
 * mode). */
constexpr size_t kNearNonTemporalAnswerMin = 32768;
inline void copy_bytes_nt(char *dst, const void *src, size_t n)
{
#if defined(__x86_64__) && defined(__SSE2__)
    const char *s = static_cast<const char *>(src);
    size_t k = 0;
    for (; k + 64 <= n; k += 64) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + k));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + k + 16));
        __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + k + 32));
        __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + k + 48));
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + k), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + k + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + k + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + k + 48), d);
    }
    if (k < n) copy_bytes(dst + k, s + k, n - k);
    _mm_sfence();
#else
    copy_bytes(dst, src, n);
#endif
}

/* The producer's view of a ring. */
class RingProducer {
public:
    RingProducer() = default;
    /* mem: a ring made by ring_init() that nobody has written yet (a
     * ring has one producer for its lifetime). */
    void attach(void *mem, size_t size, uint32_t producer = 0)
    {
        ctl_ = static_cast<RingControl *>(mem);
        data_ = static_cast<char *>(mem) + kRingOverhead;
        size_ = size;
        /* before any entry: the consumer reads it after an entry's
         * acquire, so the entry's release publishes it */
        ctl_->producer = producer;
        head_seen_ = load_head();
        tail_ = head_seen_;
    }
    bool attached() const { return data_ != nullptr; }
    size_t max_message() const { return size_ / 2 - 64; }
    /* Where the next message goes, as an offset into the data area. */
    size_t offset() const { return tail_ & (size_ - 1); }

    /* A message of hlen + plen bytes would fit now: the next push() of
     * at most that size succeeds (there is one producer). */
    bool has_room(size_t hlen, size_t plen)
    {
        size_t need = entry_bytes(message_bytes(hlen, plen));
        size_t off = tail_ & (size_ - 1);
        size_t skip = (off + need > size_) ? size_ - off : align_gap(off, need);
        if (tail_ + skip + need - head_seen_ <= size_) return true;
        head_seen_ = load_head();
        return tail_ + skip + need - head_seen_ <= size_;
    }

    /* Append one message; false if the ring has no room now (try later:
     * the consumer frees room as it reads).  Precondition:
     * message_bytes(hlen, plen) <= max_message().  non_temporal: as
     * fill()'s. */
    bool push(uint16_t id, const void *hdr, size_t hlen, const void *payload, size_t plen,
              bool non_temporal = false)
    {
        char *body = reserve(hlen, plen);
        if (!body) return false;
        fill(
            body, hlen, payload, plen,
            [hdr, hlen](char *at) {
                if (hlen) std::memcpy(at, hdr, hlen);
            },
            non_temporal);
        commit(id, hlen, plen);
        return true;
    }

    /* Write the message of a reservation (body from reserve(hlen, plen)):
     * write_header(body) writes the hlen header bytes.  The entry's first
     * line is written last, in one go with the header: the consumer polls
     * that line, and each write to it after the consumer read it moves the
     * line between the cores again.  So the payload past that line first,
     * then the header and the payload's bytes in that line; commit()
     * follows.  OSU over pml/rdrp, A/B on a 2-core EPYC guest: latency
     * 512 B / 1 KiB 0.20 / 0.25 against 0.23 / 0.27 us, osu_mbw_mr 1 KiB
     * 1.58 against 1.34-1.37 GB/s.  non_temporal: a line-aligned payload
     * (kAlignPayloadMin bytes or more) goes by non-temporal stores
     * (copy_bytes_nt); when that pays is the caller's choice, by
     * non_temporal_for (below). */
    template <class WriteHeader>
    static inline __attribute__((always_inline)) void fill(char *body, size_t hlen, const void *payload, size_t plen,
                                                           WriteHeader &&write_header, bool non_temporal = false)
    {
        char *pl = payload_at(body, hlen, plen);
        /* an entry of a line or more starts on a line; a half-line one is
         * all in its line, and the bound below is past its end */
        const char *line_end = body - sizeof(EntryHeader) + 64;
        size_t head = pl < line_end ? std::min(plen, static_cast<size_t>(line_end - pl)) : 0;
        const char *src = static_cast<const char *>(payload);
        if (non_temporal && head == 0)  /* a line-aligned payload */
            copy_bytes_nt(pl, src, plen);
        else if (plen > head)
            copy_bytes(pl + head, src + head, plen - head);
        write_header(body);
        if (head) copy_bytes(pl, src, head);
    }

    /* push() in two steps, for a caller that writes its message in place
     * (no staging copy of the header): reserve(hlen, plen) returns where
     * the hlen header bytes go (the payload goes to payload_at()), or
     * nullptr if the ring has no room now; the caller fills them and
     * publishes the entry with commit(id, hlen, plen) before anything
     * else touches this producer.  A reservation that is not committed
     * is simply dropped (nothing is published but possibly a skip marker,
     * which is always allowed). */
    static char *payload_at(char *body, size_t hlen, size_t plen) { return body + hlen + payload_pad(hlen, plen); }
    inline __attribute__((always_inline)) char *reserve(size_t hlen, size_t plen)
    {
        size_t need = entry_bytes(message_bytes(hlen, plen));
        size_t off = tail_ & (size_ - 1);
        /* the rest of this lap, or of a line half taken by a half-line entry */
        size_t skip = (off + need > size_) ? size_ - off : align_gap(off, need);
        if (off >= kRewindAt && skip != size_ - off && need <= off) {
            bool hinted = hinted_ && tail_ - hint_tried_ >= kHintedEvery;
            if (hinted || tail_ - rewind_tried_ >= kRewindAt) {
                /* drained?  then go back to the start of the ring (see top) */
                if (hinted) hint_tried_ = tail_;
                else rewind_tried_ = tail_;
                if (drained()) skip = size_ - off;
            }
        }
        hinted_ = false;
        if (tail_ + skip + need - head_seen_ > size_) {
            head_seen_ = load_head();
            if (tail_ + skip + need - head_seen_ > size_) return nullptr;
        }
        if (skip) {
            EntryHeader *s = reinterpret_cast<EntryHeader *>(data_ + off);
            s->len = static_cast<uint32_t>(skip - sizeof(EntryHeader));
            s->id = kSkip;
            s->hlen = 0;
            s->pos.store(tail_, std::memory_order_release);
            tail_ += skip;
            off = tail_ & (size_ - 1);
        }
        return data_ + off + sizeof(EntryHeader);
    }

    /* Publish the message reserve(hlen, plen) made room for. */
    void commit(uint16_t id, size_t hlen, size_t plen)
    {
        size_t len = message_bytes(hlen, plen);
        EntryHeader *e = reinterpret_cast<EntryHeader *>(data_ + (tail_ & (size_ - 1)));
        e->len = static_cast<uint32_t>(len);
        e->id = id;
        e->hlen = static_cast<uint16_t>(hlen);
        e->pos.store(tail_, std::memory_order_release);
        recent_[pushes_++ & (kRecentPushes - 1)] = tail_;
        tail_ += entry_bytes(len);
    }


    /* The consumer has read every message pushed so far (one load of
     * the consumer's head: its cache line, no more). */
    bool drained()
    {
        if (head_seen_ != tail_) head_seen_ = load_head();
        return head_seen_ == tail_;
    }

    /* At least k (1 <= k <= kRecentPushes) of the messages pushed are
     * still unread, as of the consumer's last published head.  Counted in
     * messages, not bytes: one large unread message is not a stream.
     * kRecentPushes is what pml/rdrp asks (kRingBusyUnread): every commit
     * stores one start position, and more would only widen the producer's
     * state past its second cache line. */
    static constexpr unsigned kRecentPushes = 4;
    bool unread_at_least(unsigned k)
    {
        if (pushes_ < k) return false;
        uint64_t start = recent_[(pushes_ - k) & (kRecentPushes - 1)];
        if (head_seen_ > start) return false;  /* the head only grows */
        head_seen_ = load_head();
        return head_seen_ <= start;
    }

    /* The time in ns one line the consumer wrote takes to reach us
     * (LineCost; 0 until measured).  Every kLineSampleEvery-th call asks
     * for a sample, and the producer's next loads of the consumer's head
     * (this one, or those of reserve(), drained(), unread_at_least()) are
     * timed until one finds the head moved: that load fetched the line
     * from the consumer's cache (its store took it from ours).  A load
     * that finds it unchanged may have hit our cache and says nothing;
     * while the send path itself loads the head on every message (a busy
     * test), only timing those loads finds a moved head at all.  A sample
     * costs two clock reads per timed load. */
    static constexpr unsigned kLineSampleEvery = 64;
    uint32_t line_ns()
    {
        if (__builtin_expect(++line_calls_ % kLineSampleEvery == 0, 0)) {
            line_due_ = true;
            head_seen_ = load_head();
        }
        return line_cost_.ns();
    }
    const LineCost &line_cost() const { return line_cost_; }

    /* The consumer has probably taken everything (it just sent us a
     * message): the next push() looks whether it can rewind. */
    void hint_drained() { hinted_ = true; }
    /* The consumer has sent us data (the owner said so: heard()) since
     * the owner last sent its own (quiet()); control messages either way
     * do not count.  A message written now answers the consumer's (a
     * ping-pong) rather than following our own (a stream). */
    bool spoke() const { return spoke_; }
    void heard() { spoke_ = true; }
    void quiet() { spoke_ = false; }

private:
    /* The consumer's head, timed while a line sample is due (line_ns). */
    uint64_t load_head()
    {
        if (__builtin_expect(!line_due_, 1)) return ctl_->head.load(std::memory_order_acquire);
        uint64_t t0 = line_clock_ns();
        uint64_t h = ctl_->head.load(std::memory_order_acquire);
        uint64_t t1 = line_clock_ns();
        if (h != head_seen_) {
            line_cost_.add(static_cast<uint32_t>(std::min<uint64_t>(t1 - t0, UINT32_MAX)));
            line_due_ = false;
        }
        return h;
    }

    RingControl *ctl_ = nullptr;
    char *data_ = nullptr;
    size_t size_ = 0;
    bool hinted_ = false;
    bool spoke_ = false;     /* heard() since the last quiet() */
    bool line_due_ = false;  /* a line sample is wanted (line_ns) */
    uint64_t tail_ = 0;       /* our next position (private to the producer) */
    uint64_t head_seen_ = 0;  /* the consumer's head when we last looked */
    uint64_t rewind_tried_ = 0;  /* tail_ when we last looked for a drained ring, by count */
    uint64_t hint_tried_ = 0;    /* ... on a hint */
    uint64_t pushes_ = 0;        /* messages committed */
    uint64_t recent_[kRecentPushes] = {};  /* start positions of the last ones (unread_at_least) */
    uint32_t line_calls_ = 0;              /* line_ns() calls (every kLineSampleEvery-th samples) */
    LineCost line_cost_;
};

/* Write a ring message of len payload bytes with non-temporal stores, to
 * a consumer whose lines cost ns (RingProducer::line_ns; 0: not measured)
 * against far_ns (0: never measured)?  By what the lines cost
 * (kFarNonTemporalMin and the constants after it say what was measured):
 * to a far consumer from kFarNonTemporalMin bytes (*far set); to a near
 * one from kNearNonTemporalAnswerMin, and from kNearNonTemporalMin for a
 * message that does not answer one of the consumer's or a consumer that
 * is behind (busy(), asked only then); while not measured from
 * kNonTemporalAlwaysMin, and from kStreamNonTemporalMin to a consumer
 * behind. */
template <class Busy>
inline bool non_temporal_by(size_t len, uint32_t ns, uint32_t far_ns, bool answers, Busy &&busy, bool *far = nullptr)
{
    if (len < kFarNonTemporalMin) return false;
    if (far_ns == 0 || ns == 0) return len >= kNonTemporalAlwaysMin || (len >= kStreamNonTemporalMin && busy());
    if (ns >= far_ns) {
        if (far) *far = true;
        return true;
    }
    return len >= kNearNonTemporalAnswerMin || (len >= kNearNonTemporalMin && (!answers || busy()));
}
/* ... as tx measures its consumer (only messages of kFarNonTemporalMin
 * bytes or more are sampled). */
template <class Busy>
inline bool non_temporal_for(RingProducer &tx, size_t len, uint32_t far_ns, bool answers, Busy &&busy,
                             bool *far = nullptr)
{
    if (len < kFarNonTemporalMin) return false;
    return non_temporal_by(len, far_ns ? tx.line_ns() : 0, far_ns, answers, busy, far);
}

/* The consumer's view of a ring. */
class RingConsumer {
public:
    RingConsumer() = default;
    void attach(void *mem, size_t size)
    {
        ctl_ = static_cast<RingControl *>(mem);
        data_ = static_cast<char *>(mem) + kRingOverhead;
        size_ = size;
        head_ = ctl_->head.load(std::memory_order_relaxed);
        published_ = head_;
        /* the head is shared memory: where poll() starts must be a place
         * an entry can be (poll() checks only the entries' fields) */
        error_ = check_ring_place(head_ & (size_ - 1), size_);
    }
    bool attached() const { return data_ != nullptr; }

    /* Hand every available message, in order, to fn(id, hdr, hlen,
     * payload, plen); the bytes are valid only during the call.  At most
     * `max` messages; returns how many.  If fn returns bool, true ends the
     * batch after that message (the rest stay in the ring for the next
     * poll).  The head is published once, at
     * the end, so the producer's view of the ring costs one cache-line
     * transfer per batch.  fn must not re-enter poll() on this ring.
     * An entry that fails check_entry() stops the ring for good: poll()
     * hands out nothing more and error() says why (the caller reports it;
     * nothing of that entry has been read past its header). */
    template <class Fn>
    unsigned poll(Fn &&fn, unsigned max = 64)
    {
        unsigned n = 0;
        while (n < max && !error_) {
            size_t off = head_ & (size_ - 1);
            EntryHeader *e = reinterpret_cast<EntryHeader *>(data_ + off);
            if (e->pos.load(std::memory_order_acquire) != head_) break;
            /* each field read once from shared memory: check and use agree */
            uint32_t len = reinterpret_cast<volatile uint32_t &>(e->len);
            uint16_t id = reinterpret_cast<volatile uint16_t &>(e->id);
            uint16_t hlen = reinterpret_cast<volatile uint16_t &>(e->hlen);
            if (const char *bad = check_entry_fields(off, size_, len, id, hlen)) {
                error_ = bad;
                break;
            }
            if (id == kSkip) {
                head_ += sizeof(EntryHeader) + len;
                continue;
            }
            const char *body = data_ + off + sizeof(EntryHeader);
            size_t pad = pad_of_entry(hlen, len);  /* check_entry: hlen <= len */
            head_ += entry_bytes(len);
            ++n;
            using R = std::invoke_result_t<Fn &, uint16_t, const char *, size_t, const char *, size_t>;
            if constexpr (std::is_same_v<R, bool>) {
                if (fn(id, body, static_cast<size_t>(hlen), body + hlen + pad, static_cast<size_t>(len - hlen - pad)))
                    break;
            } else {
                fn(id, body, static_cast<size_t>(hlen), body + hlen + pad, static_cast<size_t>(len - hlen - pad));
            }
        }
        if (head_ != published_) {
            ctl_->head.store(head_, std::memory_order_release);
            published_ = head_;
        }
        return n;
    }

    /* The stream position of the next entry (tests write forged entries there). */
    uint64_t position() const { return head_; }

    /* What the producer said of itself at attach (RingControl::producer);
     * meaningful once an entry has been read.  Shared memory: the caller
     * checks it like any header field. */
    uint32_t producer() const { return reinterpret_cast<const volatile uint32_t &>(ctl_->producer); }

    /* Why the ring was stopped (a malformed entry), or null. */
    const char *error() const { return error_; }

    /* A message is waiting (cheap: one load). */
    bool ready() const
    {
        if (error_) return false;
        const EntryHeader *e = reinterpret_cast<const EntryHeader *>(data_ + (head_ & (size_ - 1)));
        return e->pos.load(std::memory_order_acquire) == head_;
    }

private:
    RingControl *ctl_ = nullptr;
    char *data_ = nullptr;
    size_t size_ = 0;
    uint64_t head_ = 0;
    uint64_t published_ = 0;
    const char *error_ = nullptr;
};

}  // namespace rdrp::shm

#endif
