/* pml/rdrp: the finalize leak check.  Counting costs nothing per message:
 * requests use the existing live count, descriptors and control buffers
 * are "made minus pooled" (made is counted where a pool grows). */
#include "pml_rdrp_finalize_check.h"
#include "pml_rdrp_pacing.h"
#include "pml_rdrp_request.h"

#include <string>

namespace rdrp {

static void count_unreceived(void *ctx, rdrp_match_item_t *item, int kind)
{
    (void)item;
    if (kind != RDRP_MATCH_KIND_POSTED) ++*static_cast<size_t *>(ctx);
}

void finalize_tally_objects(FinalizeTally *ft)
{
    rdrp_tally_t *t = &ft->t;
    rdrp_tally_init(t);
    /* arrivals still queued on communicators the application kept alive
     * (a request it never freed holds its communicator): left there */
    size_t queued = 0;
    for (CommState *cs : g.comms)
        if (cs) rdrp_match_foreach(cs->mq, count_unreceived, &queued);
    size_t live_unex = g.unex_made - g.unex_pool.size();
    size_t live_ctrl = g.ctrl_made - g.ctrl_pool.size();
    rdrp_tally_add(t, "requests", g.live_requests, RDRP_TALLY_APP);
    rdrp_tally_add(t, "unreceived messages", g.unreceived_dropped + queued, RDRP_TALLY_APP);
    rdrp_tally_add(t, "message descriptors", live_unex > queued ? live_unex - queued : 0, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "control messages", live_ctrl, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "send copy bytes", pacing_buffered, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "peers with sends waiting for credit", pacing_waiting_eps, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "ring messages dropped", g.backlog_dropped, RDRP_TALLY_OURS);
}

int finalize_tally_report(FinalizeTally *ft, const rdrp_ucx_leftovers_t *ucx)
{
    rdrp_tally_t *t = &ft->t;
    rdrp_tally_add(t, "registrations", rdrp_ucx_reg_held(), RDRP_TALLY_OURS);
    rdrp_tally_add(t, "rkeys", ucx->rkeys_held, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "UCX endpoints", ucx->endpoints_unclosed, RDRP_TALLY_OURS);
    rdrp_tally_add(t, "UCX requests", ucx->requests_unfinished, RDRP_TALLY_OURS);
    int level = mca_pml_rdrp_params.finalize_check;
    int verdict = rdrp_tally_verdict(t, level);
    if (verdict == 0) return OMPI_SUCCESS;
    char line[1024];
    rdrp_tally_report_line(t, "pml/rdrp", static_cast<int>(OMPI_PROC_MY_NAME->vpid), line, sizeof(line));
    std::string lv = std::to_string(level);
    mca_pml_rdrp_show_help("finalize-leak", lv.c_str(), line);
    return verdict == 2 ? OMPI_ERROR : OMPI_SUCCESS;
}

}  // namespace rdrp
