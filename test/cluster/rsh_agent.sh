#!/usr/bin/env bash
# rsh_agent.sh - Open MPI's plm_rsh_agent for the namespace cluster
# (cluster.sh): called like ssh, "[options] [user@]HOST words...", it runs the
# words joined by spaces with "bash -c" inside HOST's namespaces, with a clean
# environment as ssh and a login shell would give (Open MPI's quoting of the
# orted command then works unchanged).  Works from inside any node too (tree
# spawn), since it enters the target node by its holder's pid.
# RDRP_CLUSTER_DIR: the cluster's state directory (set by mpirun.sh).
set -u
dir=${RDRP_CLUSTER_DIR:?rsh_agent.sh: RDRP_CLUSTER_DIR not set}
while [ $# -gt 0 ]; do
    case $1 in
        -[oplicFLRDEbeJmOQSWw]) shift 2 ;;   # ssh options with an argument
        -*) shift ;;
        *) break ;;
    esac
done
host=${1:?rsh_agent.sh: no host}
host=${host#*@}
shift
holder=$(awk -v n="$host" '$1 == n { print $2 }' "$dir/nodes")
[ -n "$holder" ] || { echo "rsh_agent.sh: unknown host '$host' (nodes: $(awk '{printf "%s ", $1}' "$dir/nodes"))" >&2; exit 255; }
exec nsenter -t "$holder" --net --uts --ipc --mount -- \
    env -i HOME="${HOME:-/root}" USER="${USER:-root}" LOGNAME="${LOGNAME:-root}" SHELL=/bin/bash \
    PATH="${RDRP_CLUSTER_PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}" \
    TMPDIR="$dir/$host/tmp" RDRP_CLUSTER_DIR="$dir" \
    bash -c "$*"
