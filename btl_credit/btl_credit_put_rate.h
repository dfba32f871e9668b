/*
 * btl/credit: which UCX protocol carries a put to one peer, chosen from the
 * rate its puts were delivered at (no Open MPI types; unit-tested in
 * test/unit/test_btl_credit_put_rate.cc).
 *
 * Why.  To a remote peer over TCP a put is an active message (see
 * btl_credit_rdma.cc).  UCX's rendezvous lands it straight in the receive
 * buffer, which is what a fast link needs (unshaped, 2 nodes: 3.5-3.8 GB/s
 * at 1 MiB against 1.7-2.7 by UCX eager, whose receiver assembles the
 * message and we copy it out), but it costs three control messages in the
 * reverse direction (UCX's RTR and TCP PUT_ACK on top of ob1's PUT), and
 * each waits behind whatever the peer is sending.  On a slow link with a
 * deep queue (ports shaped to 2 Gbit/s, 1000 packets: milliseconds per
 * trip) those trips, not the copy, bound the bidirectional bandwidth
 * (242-248 MB/s against ob1/tcp's 464-476 at 1 MiB), and UCX eager, which
 * sends the data at once, reaches the link rate.  The copy costs the same
 * on both links; what differs is how long the wire takes.  So: measure the
 * rate the peer's puts are delivered at, and send eagerly while it is below
 * a threshold (btl_credit_put_eager_rate, MB/s).
 *
 * The rate is bytes completed over busy time (time with at least one
 * rendezvous put outstanding), taken over samples of at least `sample`
 * bytes, so a window of puts queued behind each other is not mistaken for a
 * slow link (the wait of the last one is the others' transfer, not idle
 * time).  Only rendezvous puts are timed: an eager put completes once UCX
 * has the data, which says nothing of the link (across the cluster a sample
 * of eager puts "completed" at millions of MB/s).  So while eager, every
 * `probe` bytes of eager puts are followed by one sample's worth by
 * rendezvous to measure again, and a link that turned fast is found.  Each
 * probe that finds the link still slow doubles the eager stretch before
 * the next one, up to kProbeGrowth times `probe`; a fast verdict resets it.
 * A probe costs: on a link shaped to 2 Gbit/s, bidirectional 4 MiB
 * messages (16 a window each way) reached 361 MB/s of the link's 474 with
 * a probe after every 64 MiB (1/9 of the bytes by rendezvous, at about
 * half the rate, and in every window), 473 with one after every 1 GiB.
 *
 * A sample can read far below the link: busy time also holds the waits for
 * the peer's progress and for ob1's own handshakes (unshaped, in a
 * bidirectional run at load 19, single samples read 81-227 MB/s between
 * others of 1100-3600), and only a little above it (shaped to 2 Gbit/s,
 * 239 MB/s of payload: 17-307).  So the verdict is taken from the best of
 * the last kKeep samples: eager only when none of them reached the
 * threshold.  Starts by rendezvous,
 * which stays until kKeep samples are in.
 */
#ifndef MCA_BTL_CREDIT_PUT_RATE_H
#define MCA_BTL_CREDIT_PUT_RATE_H

#include <cstddef>
#include <cstdint>

namespace btlcredit {

class PutRate {
public:
    /* eager_below_mb_s: send eagerly while the measured rate is below this
     * (MB/s = bytes per microsecond); 0 = never.  sample: bytes of
     * rendezvous puts per measurement; probe: bytes of eager puts between
     * two measurements. */
    PutRate(double eager_below_mb_s, uint64_t sample, uint64_t probe)
        : threshold_(eager_below_mb_s), sample_(sample ? sample : 1), probe_(probe), stretch_(probe) {}

    /* The protocol for the next put: eager, or rendezvous (which measures). */
    bool next_eager() const { return eager_ && eager_bytes_ < stretch_; }

    /* A put of `bytes` by the protocol next_eager() gave is posted at now_ns. */
    void started(uint64_t now_ns, uint64_t bytes, bool eager)
    {
        if (eager) {
            eager_bytes_ += bytes;
            return;
        }
        if (outstanding_++ == 0) busy_since_ = now_ns;
    }

    /* That put completed at now_ns (every started() is matched by one
     * completed() with the same bytes and eager). */
    void completed(uint64_t now_ns, uint64_t bytes, bool eager)
    {
        if (eager || outstanding_ == 0) return;  /* untimed, or unmatched: ignore */
        bytes_ += bytes;
        --outstanding_;
        busy_ns_ += now_ns - busy_since_;  /* the busy stretch so far */
        busy_since_ = now_ns;              /* restarted by started() if none is left */
        if (bytes_ >= sample_ && busy_ns_ > 0) {
            rate_ = static_cast<double>(bytes_) * 1e3 / static_cast<double>(busy_ns_);
            kept_[samples_ % kKeep] = rate_;
            ++samples_;
            double best = 0;
            for (double k : kept_) best = k > best ? k : best;
            const bool was = eager_;
            eager_ = threshold_ > 0 && samples_ >= kKeep && best < threshold_;
            /* a probe that confirmed a slow link: probe half as often */
            if (!eager_) stretch_ = probe_;
            else if (was && stretch_ <= probe_ * (kProbeGrowth / 2)) stretch_ *= 2;
            bytes_ = 0;
            busy_ns_ = 0;
            eager_bytes_ = 0;
        }
    }

    static constexpr int kKeep = 3;            /* samples the verdict looks at */
    static constexpr uint64_t kProbeGrowth = 16;  /* longest eager stretch, in `probe`s */

    bool eager() const { return eager_; }            /* the last measurement's verdict */
    double last_rate_mb_s() const { return rate_; }  /* 0 before the first sample */
    uint64_t eager_stretch() const { return stretch_; }  /* eager bytes before the next probe */
    uint64_t samples() const { return samples_; }

private:
    double threshold_;
    uint64_t sample_;
    uint64_t probe_;
    uint64_t stretch_;             /* eager bytes before the next probe: probe_ doubling */
    uint64_t outstanding_ = 0;     /* rendezvous puts in flight */
    uint64_t busy_since_ = 0;
    uint64_t busy_ns_ = 0;
    uint64_t bytes_ = 0;           /* rendezvous bytes in the current sample */
    uint64_t eager_bytes_ = 0;     /* eager bytes since the last sample */
    uint64_t samples_ = 0;
    double rate_ = 0;
    double kept_[kKeep] = {};      /* the last kKeep rates */
    bool eager_ = false;
};

}  // namespace btlcredit

#endif /* MCA_BTL_CREDIT_PUT_RATE_H */
