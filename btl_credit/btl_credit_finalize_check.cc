/*
 * btl/credit: the finalize leak check (btl_credit_finalize_check).  Every
 * object counted here is the BTL's own: ob1 holds the application's
 * requests and unexpected messages (the BTL hands each packet up as it is
 * delivered), so any count left is a bug of btl/credit, or of a PML that
 * kept a descriptor it allocated.  Live descriptors, control buffers and
 * RDMA operations are "made minus pooled": nothing is counted per message.
 */
#include "btl_credit_internal.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
#include "opal/util/show_help.h"
}

namespace btlcredit {

void finalize_tally_objects(rdrp_tally_t *t)
{
    rdrp_tally_init(t);
    const size_t pooled = g.frag_pool.size() + g.big_frag_pool.size();
    rdrp_tally_add(t, "fragments", g.frags_made - pooled, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "fragments waiting for credits", g.queued, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "control packets", g.ctrls_made - g.ctrl_pool.size() + g.ctrl_q.size(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "RDMA operations", g.ops_made - g.op_pool.size(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "undelivered arrivals", g.arrivals.size(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "UCX operations in flight", g.outstanding, RDRP_TALLY_OURS);
}

int finalize_tally_report(rdrp_tally_t *t, const rdrp_ucx_leftovers_t *ucx)
{
    rdrp_tally_add(t, "registrations", rdrp_ucx_reg_held(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "rkeys", ucx->rkeys_held, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "UCX endpoints", ucx->endpoints_unclosed, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "UCX requests", ucx->requests_unfinished, RDRP_TALLY_OURS);
    const int level = mca_btl_credit_params.finalize_check;
    const int verdict = rdrp_tally_verdict(t, level);
    if (verdict == 0) return OPAL_SUCCESS;
    char line[1024];
    rdrp_tally_report_line(t, "btl/credit", static_cast<int>(OPAL_PROC_MY_NAME.vpid), line, sizeof(line));
    const std::string lv = std::to_string(level);
    /* rendered and written to our own stderr: a forwarded show_help sent
     * this close to the process's end is often lost (pml/rdrp's note) */
    char *msg = opal_show_help_string("btl_credit_help.txt", "finalize-leak", true,
                                      opal_process_info.nodename, lv.c_str(), line);
    std::fprintf(stderr, "%s", msg ? msg : (std::string(line) + "\n").c_str());
    std::fflush(stderr);
    std::free(msg);
    return verdict == 2 ? OPAL_ERROR : OPAL_SUCCESS;
}

}  // namespace btlcredit
