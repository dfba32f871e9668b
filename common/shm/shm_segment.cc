/* Shared segments over memfd and CMA transfers (see shm_segment.h). */
#include "shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace rdrp::shm {

bool segment_create(size_t len, Segment *out, std::string *err, const char *name)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
        *err = std::string("memfd_create: ") + strerror(errno);
        return false;
    }
    if (ftruncate(fd, static_cast<off_t>(len)) != 0) {
        *err = std::string("ftruncate: ") + strerror(errno);
        close(fd);
        return false;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *err = std::string("mmap: ") + strerror(errno);
        close(fd);
        return false;
    }
    out->base = p;  /* a fresh memfd reads as zeroes */
    out->len = len;
    out->fd = fd;
    return true;
}

bool segment_attach(int pid, int fd, size_t len, Segment *out, std::string *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    int myfd = open(path, O_RDWR | O_CLOEXEC);
    if (myfd < 0) {
        *err = std::string("open ") + path + ": " + strerror(errno);
        return false;
    }
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, myfd, 0);
    close(myfd);  /* the mapping keeps the memory */
    if (p == MAP_FAILED) {
        *err = std::string("mmap ") + path + ": " + strerror(errno);
        return false;
    }
    out->base = p;
    out->len = len;
    out->fd = -1;
    return true;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void segment_populate(void *addr, size_t len)
{
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    uintptr_t a = (reinterpret_cast<uintptr_t>(addr) + page - 1) & ~(page - 1);
    uintptr_t e = (reinterpret_cast<uintptr_t>(addr) + len) & ~(page - 1);
    /* allocates the pages and maps them writable without writing them:
     * safe on a ring a peer is already using.  An older kernel (EINVAL)
     * leaves them to their first touch. */
    if (e > a) (void)madvise(reinterpret_cast<void *>(a), e - a, MADV_POPULATE_WRITE);
}

void segment_release(Segment *s)
{
    if (s->base) munmap(s->base, s->len);
    if (s->fd >= 0) close(s->fd);
    s->base = nullptr;
    s->len = 0;
    s->fd = -1;
}

/* The kernel may move fewer bytes than asked (it works page by page):
 * loop until done. */
int cma_read(int pid, void *dst, uint64_t raddr, size_t len)
{
    char *d = static_cast<char *>(dst);
    while (len > 0) {
        struct iovec l = {d, len};
        struct iovec r = {reinterpret_cast<void *>(raddr), len};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EFAULT;
        d += n;
        raddr += static_cast<uint64_t>(n);
        len -= static_cast<size_t>(n);
    }
    return 0;
}

int cma_write(int pid, uint64_t raddr, const void *src, size_t len)
{
    const char *s = static_cast<const char *>(src);
    while (len > 0) {
        struct iovec l = {const_cast<char *>(s), len};
        struct iovec r = {reinterpret_cast<void *>(raddr), len};
        ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (n == 0) return -EFAULT;
        s += n;
        raddr += static_cast<uint64_t>(n);
        len -= static_cast<size_t>(n);
    }
    return 0;
}

bool cma_check(int pid, uint64_t raddr, uint64_t expected)
{
    uint64_t seen = 0;
    return pid > 0 && cma_read(pid, &seen, raddr, sizeof(seen)) == 0 && seen == expected;
}

}  // namespace rdrp::shm
