/*
 * coll/cdag module: one per intra-communicator.  comm_query offers it when
 * the engine service is up; enable connects the members' engine workers,
 * creates the engine's communicator state and saves the module below ours
 * for the calls we hand back (inter-communicators never get a module;
 * alltoallw and the neighborhood collectives are never taken over).
 */
#include "coll_cdag.h"
#include "coll_cdag_entry.h"
#include "common/throttle/throttle.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ompi/mca/coll/base/base.h"
#include "ompi/proc/proc.h"
#include "opal/mca/pmix/pmix.h"
#include "opal/util/show_help.h"

/* The communicator's node token pool: the members on this node (Open MPI
 * locality) share it.  Its name holds the job, the cid and a hash of those
 * members, so two live communicators never share a name on a node (a cid
 * comes back only for another set of members or after every member freed
 * the old communicator). */
static void node_pool_name(ompi_communicator_t *comm, const uint64_t *ids, char *name, size_t len,
                           int *local_index, int *local_size)
{
    int me = ompi_comm_rank(comm), n = 0;
    uint64_t h = 14695981039346656037ull;  /* FNV-1a over the local members' names */
    *local_index = 0;
    for (int r = 0; r < ompi_comm_size(comm); ++r) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, r);
        if (r != me && !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags)) continue;
        if (r == me) *local_index = n;
        ++n;
        for (int b = 0; b < 8; ++b) {
            h ^= (ids[r] >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    *local_size = n;
    snprintf(name, len, "/rdrp-cdag-%u-%u-%u-%016llx", (unsigned)OPAL_PROC_MY_NAME.jobid, (unsigned)getuid(),
             (unsigned)comm->c_contextid, (unsigned long long)h);
}

static int cdag_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm);

static void module_construct(mca_coll_cdag_module_t *m)
{
    m->gc = NULL;
    memset(&m->lean, 0, sizeof(m->lean));
    memset(&m->prev, 0, sizeof(m->prev));
    m->nprev = 0;
}

static void module_destruct(mca_coll_cdag_module_t *m)
{
    if (m->gc) cdag_glue_comm_destroy(m->gc);
    m->gc = NULL;
    for (int i = 0; i < m->nprev; ++i) OBJ_RELEASE(m->prev_modules[i]);
    m->nprev = 0;
}

OBJ_CLASS_INSTANCE(mca_coll_cdag_module_t, mca_coll_base_module_t, module_construct, module_destruct);

mca_coll_base_module_t *mca_coll_cdag_comm_query(struct ompi_communicator_t *comm, int *priority)
{
    if (!mca_coll_cdag_ready || mca_coll_cdag_params.priority < 0 || OMPI_COMM_IS_INTER(comm))
        return NULL;
    mca_coll_cdag_module_t *m = OBJ_NEW(mca_coll_cdag_module_t);
    if (!m) return NULL;
    *priority = mca_coll_cdag_params.priority;
    m->super.coll_module_enable = cdag_module_enable;
    mca_coll_cdag_install(m, mca_coll_cdag_params.enabled_mask);
    return &m->super;
}

/* the 64-bit identity of a process (keys the engine's endpoints) */
static uint64_t proc_id(ompi_proc_t *proc)
{
    uint64_t id;
    memcpy(&id, &proc->super.proc_name, sizeof(id));
    return id;
}

static int connect_members(ompi_communicator_t *comm, uint64_t *ids)
{
    int size = ompi_comm_size(comm);
    for (int r = 0; r < size; ++r) {
        ompi_proc_t *proc = ompi_comm_peer_lookup(comm, r);
        ids[r] = proc_id(proc);
        if (cdag_glue_connected(ids[r])) continue;
        int rc;
        uint8_t *addr = NULL;
        size_t len = 0;
        OPAL_MODEX_RECV(rc, &mca_coll_cdag_component.collm_version, &proc->super.proc_name,
                        &addr, &len);
        if (rc != OPAL_SUCCESS || !addr) {
            opal_show_help("help-coll-cdag.txt", "connect-failed", true, opal_process_info.nodename,
                           OPAL_NAME_PRINT(proc->super.proc_name),
                           "no coll/cdag address in the modex: run coll/cdag on every rank");
            return OMPI_ERROR;
        }
        int remote = !OPAL_PROC_ON_LOCAL_NODE(proc->super.proc_flags);
        rc = cdag_glue_connect(ids[r], addr, len, remote);
        free(addr);
        if (rc != 0) {
            opal_show_help("help-coll-cdag.txt", "connect-failed", true, opal_process_info.nodename,
                           OPAL_NAME_PRINT(proc->super.proc_name), cdag_glue_last_error());
            return OMPI_ERROR;
        }
    }
    return OMPI_SUCCESS;
}

static int cdag_module_enable(mca_coll_base_module_t *module, struct ompi_communicator_t *comm)
{
    mca_coll_cdag_module_t *m = (mca_coll_cdag_module_t *)module;
    int size = ompi_comm_size(comm);
    uint64_t *ids = malloc(sizeof(uint64_t) * (size_t)size);
    if (!ids) return OMPI_ERR_OUT_OF_RESOURCE;
    int rc = connect_members(comm, ids);
    if (rc == OMPI_SUCCESS) {
        char pool[128];
        const char *pool_name = NULL;  /* a node token pool only under throttle node */
        int local_index = 0, local_size = 1;
        if (cdag_glue_throttle_mode() == CDAG_THROTTLE_NODE) {
            node_pool_name(comm, ids, pool, sizeof(pool), &local_index, &local_size);
            pool_name = pool;
        }
        m->gc = cdag_glue_comm_create(comm->c_contextid, ompi_comm_rank(comm), size, ids, pool_name,
                                      local_index, local_size);
        if (!m->gc) {
            opal_show_help("help-coll-cdag.txt", "comm-failed", true, opal_process_info.nodename,
                           comm->c_name, cdag_glue_last_error());
            rc = OMPI_ERROR;
        }
    }
    free(ids);
    if (rc != OMPI_SUCCESS) return rc;
    mca_coll_cdag_save_prev(m, comm);
    CDAG_VERBOSE(10, "enabled on %s (cid %u, %d ranks)", comm->c_name, comm->c_contextid, size);
    return OMPI_SUCCESS;
}
