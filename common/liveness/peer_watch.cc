// A watch over the stop state of the peers on this node (peer_watch.h).
#include "common/liveness/peer_watch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

struct Peer {
    int pid;
    int id;
    double stopped_since;  // < 0: not seen stopped at the last look
};

char read_proc_state(int pid, void *)
{
    return rdrp_proc_state(pid);
}

}  // namespace

struct rdrp_peer_watch {
    double timeout;
    double interval;
    double last_look = -1;
    std::vector<Peer> peers;
    char (*reader)(int, void *) = read_proc_state;
    void *reader_arg = nullptr;
};

extern "C" char rdrp_proc_state(int pid)
{
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    // "pid (comm) S ...": comm may hold spaces and parentheses, the state
    // follows the last ')'
    const char *paren = std::strrchr(buf, ')');
    if (!paren || paren[1] != ' ') return 0;
    return paren[2];
}

extern "C" rdrp_peer_watch_t *rdrp_peer_watch_create(double timeout, double interval)
{
    auto *w = new rdrp_peer_watch;
    w->timeout = timeout;
    w->interval = interval;
    return w;
}

extern "C" void rdrp_peer_watch_destroy(rdrp_peer_watch_t *w)
{
    delete w;
}

extern "C" void rdrp_peer_watch_add(rdrp_peer_watch_t *w, int pid, int id)
{
    for (const Peer &p : w->peers)
        if (p.pid == pid) return;
    w->peers.push_back(Peer{pid, id, -1.0});
}

extern "C" void rdrp_peer_watch_set_reader(rdrp_peer_watch_t *w, char (*reader)(int, void *), void *arg)
{
    w->reader = reader;
    w->reader_arg = arg;
}

extern "C" int rdrp_peer_watch_poll(rdrp_peer_watch_t *w, double now, int *pid, double *stopped_for)
{
    if (w->last_look >= 0 && now - w->last_look < w->interval) return -1;
    // a long gap between two looks (this process itself was outside MPI,
    // or stopped) says nothing about the peers meanwhile: start over
    bool gap = w->last_look >= 0 && now - w->last_look > 4 * w->interval + 1.0;
    w->last_look = now;
    int found = -1;
    for (Peer &p : w->peers) {
        char s = w->reader(p.pid, w->reader_arg);
        if (s != 'T') {
            p.stopped_since = -1;
            continue;
        }
        if (p.stopped_since < 0 || gap) p.stopped_since = now;
        if (found < 0 && now - p.stopped_since >= w->timeout) {
            found = p.id;
            *pid = p.pid;
            *stopped_for = now - p.stopped_since;
        }
    }
    return found;
}
