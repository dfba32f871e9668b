/*
 * coll/cdag engine thread: the pure decisions of its policy, apart from
 * the thread and UCX so that unit tests can check them
 * (test/unit/test_cdag.cc, CdagEnginePolicy.*).
 */
#ifndef CDAG_ENGINE_POLICY_H
#define CDAG_ENGINE_POLICY_H

#include <sched.h>

namespace cdag_svc {

/* The real-time priority the engine thread takes when the thread that
 * started it has scheduling policy `policy` at priority `prio` (lowest
 * priority of that policy: `min_prio`): one below, so that the
 * application's thread preempts its engine on the core they share;
 * unchanged under a non-real-time policy or at the lowest priority
 * (nothing lower of that policy; the engine must not drop to the normal
 * policy, where every other process of the node would preempt it). */
inline int engine_rt_priority(int policy, int prio, int min_prio)
{
    if (policy != SCHED_RR && policy != SCHED_FIFO) return prio;
    return prio > min_prio ? prio - 1 : prio;
}

}  // namespace cdag_svc

#endif
