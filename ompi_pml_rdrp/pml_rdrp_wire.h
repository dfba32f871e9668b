/*
 * pml/rdrp wire format: one UCP active-message id per message type, each
 * with a fixed header.  Every field a receiver uses to index memory (ids,
 * offsets, lengths) is validated against local state before any byte is
 * copied: see the *_valid helpers and their callers.
 */
#ifndef PML_RDRP_WIRE_H
#define PML_RDRP_WIRE_H

#include <stddef.h>
#include <stdint.h>

enum rdrp_am_id {
    RDRP_AM_EAGER = 0,  /* match header + whole payload */
    RDRP_AM_RTS   = 1,  /* match header + rendezvous description + first chunk */
    RDRP_AM_CTS   = 2,  /* receiver -> sender: matched; am path: start streaming */
    RDRP_AM_CHUNK = 3,  /* sender -> receiver (am path): one chunk, UCX rendezvous data */
    RDRP_AM_FIN   = 4,  /* receiver -> sender (rma path): all pulled, sender may complete */
    RDRP_AM_ACK   = 5,  /* receiver -> sender: a synchronous eager send was matched */
    RDRP_AM_RTR   = 6,  /* receiver -> sender (put protocol): where to PUT, and the poll value */
    RDRP_AM_PFIN  = 7,  /* sender -> receiver (put protocol): data is in, the poll byte could not tell */
    RDRP_AM_CREDIT = 8, /* flow control: credit packet, compulsory return request/response */
    RDRP_AM_EAGER_PACKED = 9, /* small eager: rdrp_eager_hdr_t + payload in one contiguous
                                 UCX payload (no AM user header: UCX then sends it with a
                                 plain short active message instead of the iov path) */
    RDRP_AM_COUNT
};

/* Envelope used for matching. */
typedef struct rdrp_match_hdr {
    uint32_t cid;    /* communicator context id */
    int32_t  src;    /* sender's rank in the communicator (local group for inter) */
    int32_t  tag;
    uint32_t seq;    /* per-(communicator, destination) sequence number */
} rdrp_match_hdr_t;

#define RDRP_FLAG_SYNC   0x1u  /* sender needs an ACK when the message is matched */
#define RDRP_FLAG_CREDIT 0x2u  /* the payload took a credit of the receiver's mailbox */

typedef struct rdrp_eager_hdr {
    rdrp_match_hdr_t m;
    uint16_t flags;
    uint16_t credits;   /* piggybacked credits (flow control) */
    uint32_t src_vpid;  /* sender's process index, for flow control */
    uint64_t sreq;      /* sender request id (only meaningful with RDRP_FLAG_SYNC) */
} rdrp_eager_hdr_t;

/* Message types only a shared-memory ring carries (ids past the AM ids,
 * never registered with UCX): the compact eager message, whose entry of
 * at most 32 bytes takes half a cache line (common/shm/shm_ring.h
 * kHalfLine), so a stream of tiny messages moves two per line. */
enum rdrp_ring_id {
    RDRP_RING_EAGER_TINY = RDRP_AM_COUNT,  /* rdrp_tiny_hdr_t + up to RDRP_TINY_MAX bytes */
    RDRP_RING_EAGER_TINY_GATED             /* the same, and the payload took a credit */
};

/* A message of id carries the sender's data (an eager message in any
 * format, or an RTS), not protocol control (CTS, FIN, ACK, credits, ...):
 * what a ping-pong's next message answers (pml_rdrp_transport.h
 * answers_peer). */
static inline int rdrp_id_carries_data(unsigned id)
{
    return id == RDRP_AM_EAGER || id == RDRP_AM_EAGER_PACKED || id == RDRP_AM_RTS ||
           id == RDRP_RING_EAGER_TINY || id == RDRP_RING_EAGER_TINY_GATED;
}

/* The compact eager header.  What it leaves out: the source rank, which is
 * the ring's producer (the sender uses this format only where its rank in
 * the communicator is its process index, as in MPI_COMM_WORLD and its
 * duplicates), the sender's process index (the same), piggybacked credits
 * (none), the synchronous-send request (not synchronous); the credit flag
 * is in the message type.  The context id and tag must fit 16 bits. */
typedef struct rdrp_tiny_hdr {
    uint16_t cid;
    int16_t  tag;
    uint32_t seq;
} rdrp_tiny_hdr_t;
#define RDRP_TINY_MAX 8

/* Largest payload sent as RDRP_AM_EAGER_PACKED: copying it next to the
 * header on the stack is cheaper than UCX's header + payload iov path. */
#define RDRP_EAGER_PACKED_MAX 512

#define RDRP_MAX_RKEY 512

/* rdrp protocol data paths (rdrp_rts_hdr_t.path; also pml_rdrp_data_path,
 * where AUTO picks one per peer).  CMA: the receiver reads the sender's
 * memory at raddr with one kernel copy (peers on one node). */
enum { RDRP_PATH_AUTO = 0, RDRP_PATH_RMA = 1, RDRP_PATH_AM = 2, RDRP_PATH_CMA = 3 };

/* rendezvous protocols (rdrp_rts_hdr_t.proto) */
enum { RDRP_PROTO_RDRP = 0, RDRP_PROTO_GET = 1, RDRP_PROTO_PUT = 2 };

typedef struct rdrp_rts_hdr {
    rdrp_match_hdr_t m;
    uint16_t flags;
    uint8_t  proto;      /* RDRP_PROTO_* */
    uint8_t  last_byte;  /* unused (was the get protocol's poll byte); kept for the layout */
    uint8_t  path;       /* rdrp protocol: RDRP_PATH_RMA or RDRP_PATH_AM */
    uint8_t  pad;
    uint16_t rkey_len;   /* rma path: packed rkey bytes following this header */
    uint64_t sreq;
    uint64_t total_len;  /* packed message size */
    uint64_t first_len;  /* payload bytes carried in this RTS */
    uint64_t raddr;      /* rma path: remote address of byte 0 of the message */
    uint64_t region_id;  /* rma path: sender's registration id (rkey cache key) */
    uint32_t src_vpid;   /* sender's process index, for flow control */
    uint32_t credits;    /* piggybacked credits (with RDRP_FLAG_CREDIT on the first chunk) */
    /* followed by rkey_len bytes of packed rkey */
} rdrp_rts_hdr_t;

typedef struct rdrp_cts_hdr {
    uint64_t sreq;
    uint64_t rreq;
    uint64_t want_len;   /* bytes the receiver takes (less than total when truncated) */
    uint32_t window;     /* chunks the receiver accepts in flight */
    uint32_t pad;
    uint64_t chunk_size; /* receiver's chunk size */
} rdrp_cts_hdr_t;

typedef struct rdrp_chunk_hdr {
    uint64_t rreq;
    uint64_t sreq;
    uint64_t offset;
} rdrp_chunk_hdr_t;

typedef struct rdrp_fin_hdr {
    uint64_t sreq;
} rdrp_fin_hdr_t;

typedef rdrp_fin_hdr_t rdrp_ack_hdr_t;

/* put protocol: the receiver's registered destination and poll value */
typedef struct rdrp_rtr_hdr {
    uint64_t sreq;
    uint64_t rreq;
    uint64_t want_len;   /* bytes to PUT (less than total when truncated) */
    uint64_t raddr;      /* receiver address of byte 0 */
    uint64_t region_id;  /* receiver registration id (rkey cache key) */
    uint8_t  poll;       /* value preset in the last byte; the PUT must change it */
    uint8_t  pad;
    uint16_t rkey_len;
    uint32_t pad2;
    /* followed by rkey_len bytes of packed rkey */
} rdrp_rtr_hdr_t;

typedef struct rdrp_credit_hdr {
    uint32_t src_vpid;
    uint32_t credits;
    uint8_t  kind;       /* rdrp::credit::PacketKind */
    uint8_t  pad[7];
} rdrp_credit_hdr_t;

typedef struct rdrp_pfin_hdr {
    uint64_t rreq;
} rdrp_pfin_hdr_t;

#endif
