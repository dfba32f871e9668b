/*
 * Shared memory between the processes of one node, and single-copy
 * transfers between their address spaces.  No Open MPI or UCX type.
 *
 * Segments are anonymous (memfd): the creator publishes (pid, fd) and a
 * peer maps it through /proc/<pid>/fd/<fd>.  Nothing is ever named in
 * /dev/shm, so a killed job leaves nothing behind: the memory goes with
 * the last process that maps it.
 *
 * Single copy: process_vm_readv / process_vm_writev (Linux CMA) move bytes
 * directly between two address spaces, one kernel copy, no help from the
 * other process.  They need the permission ptrace would need (same user;
 * Yama's ptrace_scope 0, or CAP_SYS_PTRACE): a caller checks a peer with a
 * small cma_read before it relies on them.
 */
#ifndef RDRP_SHM_SEGMENT_H
#define RDRP_SHM_SEGMENT_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace rdrp::shm {

struct Segment {
    void *base = nullptr;
    size_t len = 0;
    int fd = -1;  /* the creator keeps it open: peers map it through /proc */
};

/* A zeroed segment of len bytes; name is the memfd's (what /proc/<pid>/fd
 * shows, never a file).  false with a reason in *err. */
bool segment_create(size_t len, Segment *out, std::string *err, const char *name = "rdrp-shm");
/* Map segment fd of process pid.  false with a reason in *err. */
bool segment_attach(int pid, int fd, size_t len, Segment *out, std::string *err);
/* Allocate and map the whole pages of [addr, addr + len) now, without
 * changing their contents (MADV_POPULATE_WRITE), so that no first touch of
 * them traps later: on this project's VM guest a first-touch fault costs
 * 30-80 us, and a stream walking fresh ring pages ran at a third of its
 * later rate. */
void segment_populate(void *addr, size_t len);
/* Unmap (and close, for the creator). */
void segment_release(Segment *s);

/* Copy len bytes at raddr in process pid into dst.  0, or -errno. */
int cma_read(int pid, void *dst, uint64_t raddr, size_t len);
/* Copy len bytes from src to raddr in process pid.  0, or -errno. */
int cma_write(int pid, uint64_t raddr, const void *src, size_t len);
/* Whether single copy works with pid and pid is the process a peer says
 * it is: the 8 bytes at raddr there read as expected (a value only that
 * process holds there: a segment's magic, a random cookie). */
bool cma_check(int pid, uint64_t raddr, uint64_t expected);

}  // namespace rdrp::shm

#endif
