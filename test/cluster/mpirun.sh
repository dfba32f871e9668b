#!/usr/bin/env bash
# mpirun.sh - mpirun across the namespace cluster (cluster.sh): runs mpirun
# inside node1 so that out-of-band and data traffic can only use the cluster's
# links, with the cluster's hostfile, the rsh agent, TCP pinned to the
# cluster's subnet and UCX to the nodes' eth0.  Ranks are placed round-robin
# over the nodes (--map-by node: rank r on node r mod N), so neighbouring
# ranks are on different nodes; CLUSTER_MAP overrides (e.g. "ppr:2:node").
# Use it as MPIRUN for test/mpi/run_mpi_tests.sh.
# RDRP_CLUSTER_DIR: the cluster's state directory.  MPIRUN_REAL: the real
# mpirun (default: mpirun on PATH).
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${RDRP_CLUSTER_DIR:?mpirun.sh: RDRP_CLUSTER_DIR not set}
subnet=$(cat "$dir/subnet")
real=${MPIRUN_REAL:-$(command -v mpirun)}
export RDRP_CLUSTER_PATH=$PATH
exec bash "$here/cluster.sh" exec "$dir" node1 "$real" \
    --hostfile "$dir/hostfile" \
    --mca plm_rsh_agent "$here/rsh_agent.sh" \
    --mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet" \
    -x UCX_NET_DEVICES=eth0 -x RDRP_CLUSTER_DIR \
    --bind-to none --map-by "${CLUSTER_MAP:-node}" \
    "$@"
