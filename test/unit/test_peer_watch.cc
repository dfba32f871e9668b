// Stopped-peer watch (common/liveness/peer_watch.h): the state of a real
// process read from /proc (running, stopped by SIGSTOP, gone), and the
// watch's rule with a scripted reader: a peer is reported only after it
// was seen stopped at every look for the timeout, never when it runs or
// sleeps, and a gap between looks (we were away) starts the count over.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include "common/liveness/peer_watch.h"

namespace {

std::map<int, char> scripted;
char script_reader(int pid, void *)
{
    return scripted[pid];
}

}  // namespace

TEST(PeerWatch, ReadsTheStateOfARealProcess)
{
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        for (;;) pause();
    }
    char s = 0;
    for (int i = 0; i < 100 && (s = rdrp_proc_state(child)) != 'S'; ++i) usleep(10000);
    EXPECT_EQ(s, 'S');
    kill(child, SIGSTOP);
    for (int i = 0; i < 100 && (s = rdrp_proc_state(child)) != 'T'; ++i) usleep(10000);
    EXPECT_EQ(s, 'T');
    kill(child, SIGCONT);
    for (int i = 0; i < 100 && (s = rdrp_proc_state(child)) == 'T'; ++i) usleep(10000);
    EXPECT_NE(s, 'T');
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    EXPECT_EQ(rdrp_proc_state(child), 0);
    EXPECT_EQ(rdrp_proc_state(getpid()), 'R');
}

TEST(PeerWatch, ReportsOnlyAPeerStoppedForTheTimeout)
{
    rdrp_peer_watch_t *w = rdrp_peer_watch_create(5.0, 1.0);
    rdrp_peer_watch_set_reader(w, script_reader, nullptr);
    rdrp_peer_watch_add(w, 100, 1);
    rdrp_peer_watch_add(w, 200, 2);
    scripted[100] = 'R';
    scripted[200] = 'S';
    int pid = 0;
    double for_s = 0;
    double t = 1000;
    for (int i = 0; i < 100; ++i, t += 1.0)  // running and sleeping peers: never
        ASSERT_EQ(rdrp_peer_watch_poll(w, t, &pid, &for_s), -1);
    scripted[200] = 'T';
    double stop = t;
    int id = -1;
    for (; t < stop + 10 && id < 0; t += 1.0) id = rdrp_peer_watch_poll(w, t, &pid, &for_s);
    EXPECT_EQ(id, 2);
    EXPECT_EQ(pid, 200);
    EXPECT_GE(for_s, 5.0);
    EXPECT_LE(t - stop, 7.0);  // within timeout + one interval (+ the step)
    rdrp_peer_watch_destroy(w);
}

TEST(PeerWatch, AStopThatEndsOrADebuggerStopIsNotReported)
{
    rdrp_peer_watch_t *w = rdrp_peer_watch_create(5.0, 1.0);
    rdrp_peer_watch_set_reader(w, script_reader, nullptr);
    rdrp_peer_watch_add(w, 300, 3);
    int pid;
    double for_s, t = 0;
    for (int round = 0; round < 10; ++round) {
        scripted[300] = 'T';  // stopped 4 s, then runs again
        for (int i = 0; i < 4; ++i, t += 1.0) ASSERT_EQ(rdrp_peer_watch_poll(w, t, &pid, &for_s), -1);
        scripted[300] = 'R';
        ASSERT_EQ(rdrp_peer_watch_poll(w, t, &pid, &for_s), -1);
        t += 1.0;
    }
    scripted[300] = 't';  // ptrace stop: a debugger holds it
    for (int i = 0; i < 60; ++i, t += 1.0) ASSERT_EQ(rdrp_peer_watch_poll(w, t, &pid, &for_s), -1);
    rdrp_peer_watch_destroy(w);
}

TEST(PeerWatch, AGapBetweenLooksStartsTheCountOver)
{
    rdrp_peer_watch_t *w = rdrp_peer_watch_create(5.0, 1.0);
    rdrp_peer_watch_set_reader(w, script_reader, nullptr);
    rdrp_peer_watch_add(w, 400, 4);
    scripted[400] = 'T';
    int pid;
    double for_s;
    EXPECT_EQ(rdrp_peer_watch_poll(w, 0, &pid, &for_s), -1);
    // we were outside MPI for 100 s: the peer's stop is counted from now
    EXPECT_EQ(rdrp_peer_watch_poll(w, 100, &pid, &for_s), -1);
    EXPECT_EQ(rdrp_peer_watch_poll(w, 103, &pid, &for_s), -1);
    EXPECT_EQ(rdrp_peer_watch_poll(w, 103.5, &pid, &for_s), -1);  // within the interval: no look
    EXPECT_EQ(rdrp_peer_watch_poll(w, 105, &pid, &for_s), 4);
    rdrp_peer_watch_destroy(w);
}
