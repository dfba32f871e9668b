/*
 * Checks of compiled schedules beyond what compile() sees on one rank.
 *
 * validate_set(): the plans of all ranks of a communicator (plans[r] is
 * rank r's), checked together:
 *  - pre-matching: every send (r -> q, tag) has exactly one recv at q
 *    (from r, tag) of the same length and vice versa, so matching is
 *    deterministic whatever the completion order;
 *  - deadlock freedom under any point-to-point protocol: merge every
 *    matched send/recv pair into one node (under rendezvous neither
 *    completes before both are posted) and require the union of all
 *    ranks' dependency graphs to stay acyclic.  Eager delivery only removes
 *    constraints, so this also covers eager.
 *
 * check_hazards(): no two vertices of one plan touch overlapping bytes,
 * at least one of them writing, without a dependency path between them.
 * The builder's tracker guarantees this by construction; the check exists
 * to test the tracker and any hand-written edges.  O(V^2/64) memory.
 *
 * Both return "" when everything holds, else a description of the first
 * problem found.
 */
#ifndef CDAG_VALIDATE_H
#define CDAG_VALIDATE_H

#include "cdag_plan.h"

#include <string>
#include <vector>

namespace cdag {

std::string validate_set(const std::vector<const Plan *> &plans);
std::string check_hazards(const Plan &p);

}  // namespace cdag

#endif
