#include "shm_cma_cost.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace rdrp::shm {

double cma_self_copy_ns(size_t bytes, int reps)
{
    if (bytes == 0 || reps < 1) return -EINVAL;
    char *src = static_cast<char *>(std::malloc(2 * bytes));
    if (!src) return -ENOMEM;
    char *dst = src + bytes;
    std::memset(src, 0x5a, 2 * bytes);
    const pid_t self = getpid();
    double best = -1;
    for (int i = -2; i < reps; ++i) {  /* two untimed turns: faults, caches */
        struct iovec l = {dst, bytes};
        struct iovec r = {src, bytes};
        auto t0 = std::chrono::steady_clock::now();
        ssize_t n = process_vm_readv(self, &l, 1, &r, 1, 0);
        auto t1 = std::chrono::steady_clock::now();
        if (n < 0) {
            best = -errno;
            break;
        }
        double ns = std::chrono::duration<double, std::nano>(t1 - t0).count();
        if (i >= 0 && (best < 0 || ns < best)) best = ns;
    }
    std::free(src);
    return best;
}

double cma_probe_4k_ns()
{
    double best = -1;
    for (int round = 0; round < 3; ++round) {
        double ns = cma_self_copy_ns(4096, 16);
        if (ns < 0) return ns;  // not permitted here: no point asking again
        if (best < 0 || ns < best) best = ns;
    }
    return best;
}

}  // namespace rdrp::shm
