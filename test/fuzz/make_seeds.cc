/*
 * Writes the seed corpus of the fuzz targets (test/fuzz/corpus/<target>/):
 * real headers, as the components build them, in each target's input
 * layout (see the comment at the top of each fuzz_*.cc).  Run by
 * scripts/fuzz.sh --seeds; the output is committed, so the unit test run
 * replays it without this program.
 *   make_seeds OUTDIR
 */
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "fuzz_input.h"
#include "btl_credit/btl_credit_wire.h"
#include "coll_cdag/cdag_wire.h"
#include "ompi_pml_rdrp/pml_rdrp_wire.h"

using rdrp_fuzz::FuzzOutput;

static std::string out_dir;

static void write(const std::string &target, const std::string &name, const FuzzOutput &o)
{
    std::string dir = out_dir + "/" + target;
    mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/" + name, std::ios::binary) << o.str();
}

/* pml_wire: type, credits on, slot size, peers, hlen, header, data length */
template <class H>
static FuzzOutput pml(uint8_t type, const H &h, size_t extra, uint32_t len)
{
    FuzzOutput o;
    o.put<uint8_t>(type).put<uint8_t>(1).put<uint16_t>(8192).put<uint8_t>(4);
    o.put<uint16_t>(static_cast<uint16_t>(sizeof(H) + extra)).put(h);
    for (size_t i = 0; i < extra; ++i) o.put<uint8_t>(static_cast<uint8_t>(i));
    o.put<uint32_t>(len);
    return o;
}

static void pml_seeds()
{
    rdrp_eager_hdr_t e{};
    e.m = {3, 1, 42, 7};
    e.flags = RDRP_FLAG_CREDIT;
    e.src_vpid = 1;
    write("pml_wire", "eager_credit", pml(0, e, 0, 1024));
    e.flags = RDRP_FLAG_SYNC;
    e.sreq = 0x1234;
    write("pml_wire", "eager_sync", pml(0, e, 0, 0));
    {
        FuzzOutput o;  // packed: no AM header, data = header + payload
        o.put<uint8_t>(1).put<uint8_t>(1).put<uint16_t>(8192).put<uint8_t>(4).put<uint16_t>(0);
        o.put<uint32_t>(static_cast<uint32_t>(sizeof(rdrp_eager_hdr_t) + 64));
        write("pml_wire", "eager_packed", o);
    }
    {
        FuzzOutput o = pml(8, rdrp_tiny_hdr_t{3, -5, 9}, 0, 5);  // compact eager, gated (odd length)
        o.put<uint8_t>(1);                                      // from the ring of process 1
        write("pml_wire", "eager_tiny", o);
    }
    rdrp_rts_hdr_t r{};
    r.m = {3, 2, -5, 9};
    r.proto = RDRP_PROTO_RDRP;
    r.path = RDRP_PATH_RMA;
    r.rkey_len = 48;
    r.total_len = 1 << 20;
    r.first_len = 8192;
    r.raddr = 0x7f0000001000;
    r.region_id = 17;
    r.src_vpid = 2;
    write("pml_wire", "rts_rdrp_rma", pml(2, r, 48, 8192));
    r.path = RDRP_PATH_AM;
    r.rkey_len = 0;
    write("pml_wire", "rts_rdrp_am", pml(2, r, 0, 8192));
    r.proto = RDRP_PROTO_GET;
    r.first_len = 0;
    r.rkey_len = 48;
    write("pml_wire", "rts_get", pml(2, r, 48, 0));
    r.proto = RDRP_PROTO_PUT;
    r.rkey_len = 0;
    write("pml_wire", "rts_put", pml(2, r, 0, 0));
    rdrp_cts_hdr_t c{0x10, 0x20, 1 << 20, 4, 0, 65536};
    FuzzOutput co = pml(3, c, 0, 0);
    co.put<uint64_t>(1 << 20);
    write("pml_wire", "cts", co);
    {
        FuzzOutput o;  // chunk: offset, len, want, first
        o.put<uint8_t>(4).put<uint8_t>(1).put<uint16_t>(8192).put<uint8_t>(4).put<uint16_t>(0).put<uint32_t>(0);
        o.put<uint64_t>(8192).put<uint64_t>(4096).put<uint32_t>(65535).put<uint32_t>(8192);
        write("pml_wire", "chunk", o);
    }
    rdrp_rtr_hdr_t t{};
    t.sreq = 0x10;
    t.rreq = 0x20;
    t.want_len = 1 << 20;
    t.raddr = 0x7f0000002000;
    t.poll = 0xA5;
    t.rkey_len = 48;
    FuzzOutput to = pml(5, t, 48, 0);
    to.put<uint64_t>(1 << 20);
    write("pml_wire", "rtr", to);
    rdrp_credit_hdr_t k{};
    k.src_vpid = 3;
    for (uint8_t kind = 1; kind <= 3; ++kind) {
        k.kind = kind;
        k.credits = kind == 2 ? 0 : 5;
        write("pml_wire", "credit_kind" + std::to_string(kind), pml(6, k, 0, 0));
    }
    {
        FuzzOutput o;
        o.put<uint8_t>(7).put<uint8_t>(0).put<uint16_t>(0).put<uint8_t>(0).put<uint16_t>(0).put<uint32_t>(0);
        o.put<int32_t>(3).put<uint16_t>(4);
        write("pml_wire", "source", o);
    }
}

static void btl_seeds()
{
    for (int data = 0; data <= 1; ++data) {
        btl_credit_hdr_t h{};
        h.tag = data ? 0x41 : 0;
        h.kind = data ? RDRP_CREDIT_PKT_DATA : RDRP_CREDIT_PKT_CREDIT;
        h.version = BTL_CREDIT_WIRE_VERSION;
        h.src = 1;
        h.credits = 3;
        h.seq = 12;
        FuzzOutput o;
        o.put<uint8_t>(static_cast<uint8_t>(data)).put<uint32_t>(4).put<uint32_t>(0).put<uint16_t>(4080);
        o.put<uint16_t>(sizeof(h)).put(h).put<uint32_t>(data ? 1000 : 0);
        write("btl_wire", data ? "data" : "credit", o);
    }
}

static void cdag_seeds()
{
    cdag_svc::AmHdr h{7, 2, 1, 3, 0x100, 0};
    FuzzOutput o;
    o.put<uint16_t>(sizeof(h)).put(h);
    write("cdag_wire", "packet", o);
}

static void ring_seeds()
{
    FuzzOutput o;  // 1 KiB ring: pushes, polls, then a forged entry
    o.put<uint8_t>(3);
    for (int i = 0; i < 6; ++i) o.put<uint8_t>(0).put<uint16_t>(40).put<uint16_t>(static_cast<uint16_t>(i * 60));
    o.put<uint8_t>(2).put<uint8_t>(7);
    o.put<uint8_t>(1).put<uint32_t>(100).put<uint16_t>(9).put<uint16_t>(40);
    o.put<uint8_t>(2).put<uint8_t>(7);
    write("shm_ring", "push_poll_forge", o);
    FuzzOutput w;  // wrap around a 128-byte ring with skip markers
    w.put<uint8_t>(0);
    for (int i = 0; i < 8; ++i) w.put<uint8_t>(0).put<uint16_t>(8).put<uint16_t>(20).put<uint8_t>(2).put<uint8_t>(1);
    write("shm_ring", "wrap", w);
}

static void credit_seeds()
{
    for (int mode = 0; mode <= 1; ++mode) {
        FuzzOutput o;
        o.put<uint8_t>(3).put<uint8_t>(static_cast<uint8_t>(mode)).put<uint16_t>(0).put<uint8_t>(0);
        for (int i = 0; i < 40; ++i) {
            o.put<uint8_t>(0).put<uint8_t>(static_cast<uint8_t>(i % 3)).put<uint8_t>(0).put<uint32_t>(i % 5 == 0);
            if (i % 2) o.put<uint8_t>(1).put<uint8_t>(0);
            o.put<uint8_t>(2).put<uint8_t>(static_cast<uint8_t>(i)).put<uint8_t>(1);
            o.put<uint8_t>(3);
        }
        write("credit_engine", mode ? "dynamic" : "static", o);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds OUTDIR\n");
        return 2;
    }
    out_dir = argv[1];
    mkdir(out_dir.c_str(), 0755);
    pml_seeds();
    btl_seeds();
    cdag_seeds();
    ring_seeds();
    credit_seeds();
    return 0;
}
