/*
 * Which rank runs on which node, for the tests that run across the namespace
 * cluster (test/cluster): a node is what MPI_Comm_split_type(SHARED) groups,
 * named by its processor name (the node's hostname).
 * MPITEST_EXPECT_NODES=N: the job must span exactly N nodes, each with its
 * own hostname (checked by mt_nodes_init).
 */
#ifndef MPITEST_NODES_H
#define MPITEST_NODES_H
#include "mpitest.h"

typedef struct {
    int *node_of;    /* node_of[r]: index of world rank r's node */
    int nnodes;
    int my_node;
    MPI_Comm node;   /* the ranks of this node */
} mt_nodes_t;

static inline void mt_nodes_init(mt_nodes_t *n)
{
    int nr, leader, i, j;
    char name[MPI_MAX_PROCESSOR_NAME] = "", *all;
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mt_rank, MPI_INFO_NULL, &n->node));
    MPI_Comm_rank(n->node, &nr);
    leader = mt_rank;
    CHECK_MPI(MPI_Bcast(&leader, 1, MPI_INT, 0, n->node));  /* lowest world rank of the node */
    n->node_of = mt_malloc(sizeof(int) * (size_t)mt_size);
    CHECK_MPI(MPI_Allgather(&leader, 1, MPI_INT, n->node_of, 1, MPI_INT, MPI_COMM_WORLD));
    n->nnodes = 0;
    for (i = 0; i < mt_size; i++) {  /* leaders -> dense indices 0..nnodes-1 */
        if (n->node_of[i] == i) {
            for (j = i; j < mt_size; j++)
                if (n->node_of[j] == i) n->node_of[j] = -(n->nnodes + 1);
            n->nnodes++;
        }
    }
    for (i = 0; i < mt_size; i++) n->node_of[i] = -n->node_of[i] - 1;
    n->my_node = n->node_of[mt_rank];
    MPI_Get_processor_name(name, &i);
    all = mt_malloc((size_t)mt_size * MPI_MAX_PROCESSOR_NAME);
    CHECK_MPI(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                            MPI_COMM_WORLD));
    for (i = 0; i < mt_size; i++) {
        const char *a = all + (size_t)i * MPI_MAX_PROCESSOR_NAME;
        int same_node = n->node_of[i] == n->my_node, same_name = strcmp(a, name) == 0;
        CHECK(same_node == same_name, "rank %d (host '%s') is %s my node but has %s hostname (mine: '%s')", i, a,
              same_node ? "on" : "off", same_name ? "the same" : "another", name);
    }
    free(all);
    const char *e = getenv("MPITEST_EXPECT_NODES");
    if (e && atoi(e) > 0)
        CHECK(n->nnodes == atoi(e), "the job spans %d node(s), expected %d", n->nnodes, atoi(e));
    if (mt_verbose)
        printf("[rank %d] on node %d of %d (%s)\n", mt_rank, n->my_node, n->nnodes, name);
}

static inline void mt_nodes_free(mt_nodes_t *n)
{
    MPI_Comm_free(&n->node);
    free(n->node_of);
}

#endif
