#!/usr/bin/env bash
# cluster.sh - a cluster of N "nodes" on this one machine, for running Open MPI
# across hosts (issue 16).  A node is a network namespace plus its own UTS
# (hostname nodeI), IPC and mount namespaces (own /dev/shm, own /etc/hosts, own
# TMPDIR), held open by one long-lived holder process; its only link is a veth
# port on a bridge in the root namespace ("the switch").  One private /24 is
# assigned only inside the nodes; the bridge has no address and the nodes have
# no default route, so no packet can leave the cluster.
#
# Usage:
#   cluster.sh up [--nodes N] [--rate RATE --queue PKTS] [--dir DIR]
#       build the cluster; prints DIR (the state directory every other command
#       and the rsh agent read).  --rate shapes every switch port (tc tbf at
#       RATE, e.g. 2gbit or 200mbit, with a pfifo of PKTS packets, default 64)
#       in both directions.
#   cluster.sh shape DIR NODE RATE [PKTS]   shape one node's port (both ways)
#   cluster.sh unshape DIR NODE             remove a node's shaping
#   cluster.sh exec DIR NODE CMD...         run CMD inside NODE (environment kept)
#   cluster.sh link DIR NODE up|down        switch a node's port (fault tests)
#   cluster.sh failfast DIR                 make every node's TCP give up on a
#       dead link the way a cluster tuned for failure detection does:
#       unacknowledged data after about 6 s (tcp_retries2 4; the default 15
#       takes some 15 minutes), idle keepalive connections after 6 s (these
#       sysctls are per namespace).  Measured with 5 / 5+2x3 s: the job
#       ended 28 s after the link went down (the rank's timeout, then
#       mpirun's loss of the node's daemon), too close to 30 s.  Not the default: on a machine starved by
#       other work for seconds, a live link could then time out too.
#   cluster.sh qdisc DIR NODE               tc -s qdisc of the switch port towards NODE
#   cluster.sh down DIR                     tear down: processes of the nodes,
#       holders, namespaces, veths, bridge, state.  Idempotent.
#   cluster.sh leftovers [ID [DIR]]         list anything cluster ID (default:
#       any cluster) left behind; exit 1 if something is left.  With DIR (the
#       state directory it had), also its processes, wherever they run
#
# Names: netns and links are "rdc<ID>..." (ID = 1..250, the first free one),
# the subnet is 10.231.<ID>.0/24, node I has 10.231.<ID>.I and the interface
# eth0 inside its namespace.  The state directory holds nodes (one line
# "name pid addr port" per node), hostfile, subnet and each node's tmp dir.
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

up_dir=""  # set while "up" builds: a failed build tears down what it made
die() {
    echo "cluster.sh: $*" >&2
    [ -n "$up_dir" ] && cmd_down "$up_dir"
    exit 2
}

need_root() {
    [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
    command -v ip >/dev/null && command -v nsenter >/dev/null && command -v unshare >/dev/null ||
        die "needs ip, nsenter and unshare"
}

node_field() {  # dir node field(2=pid 3=addr 4=port)
    awk -v n="$2" -v f="$3" '$1 == n { print $f }' "$1/nodes"
}

# tc on one device: tbf at $2 with a pfifo of $3 packets behind it.  burst:
# one millisecond at the rate, at least two MTU-sized packets.
shape_dev() {  # nsprefix-array dev rate pkts
    local dev=$1 rate=$2 pkts=$3 ns=${4:-}
    local run=(tc)
    [ -n "$ns" ] && run=(ip netns exec "$ns" tc)
    local bps burst
    bps=$(rate_bits "$rate") || die "bad rate '$rate'"
    burst=$((bps / 8 / 1000))
    [ "$burst" -lt 3200 ] && burst=3200
    "${run[@]}" qdisc del dev "$dev" root 2>/dev/null
    "${run[@]}" qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 1s ||
        die "tc tbf on $dev failed"
    "${run[@]}" qdisc add dev "$dev" parent 1:1 handle 10: pfifo limit "$pkts" ||
        die "tc pfifo on $dev failed"
}

rate_bits() {  # 2gbit -> 2000000000
    local r=${1,,} n u
    n=${r%%[a-z]*}
    u=${r#"$n"}
    case $u in
        gbit) echo $((n * 1000000000)) ;;
        mbit) echo $((n * 1000000)) ;;
        kbit) echo $((n * 1000)) ;;
        bit|'') echo "$n" ;;
        *) return 1 ;;
    esac
}

cmd_up() {
    local n=2 rate="" pkts=64 dir=""
    while [ $# -gt 0 ]; do
        case $1 in
            --nodes) n=$2; shift 2 ;;
            --rate) rate=$2; shift 2 ;;
            --queue) pkts=$2; shift 2 ;;
            --dir) dir=$2; shift 2 ;;
            *) die "up: unknown argument '$1'" ;;
        esac
    done
    need_root
    case $n in ''|*[!0-9]*) die "--nodes needs a number" ;; esac
    [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "--nodes between 1 and 32"
    # the first free id: no bridge of that name exists and no state claims it
    local id
    exec 9>/run/rdrp-cluster.lock
    flock 9
    for id in $(seq 1 250); do
        ip link show "rdc${id}br" >/dev/null 2>&1 && continue
        [ -e "/run/rdrp-cluster.$id" ] && continue
        break
    done
    [ -z "$dir" ] && dir=$(mktemp -d /tmp/rdrp-cluster.XXXXXX)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    echo "$dir" >"/run/rdrp-cluster.$id"
    echo "$id" >"$dir/id"
    up_dir=$dir
    flock -u 9
    exec 9>&-
    local br=rdc${id}br net=10.231.$id
    echo "$net.0/24" >"$dir/subnet"
    : >"$dir/nodes"
    : >"$dir/hostfile"
    {
        echo "127.0.0.1 localhost"
        for i in $(seq 1 "$n"); do echo "$net.$i node$i"; done
    } >"$dir/hosts"
    ip link add "$br" type bridge || die "cannot create bridge $br"
    sysctl -qw "net.ipv6.conf.$br.disable_ipv6=1" 2>/dev/null
    ip link set "$br" up
    local i ns port holder
    for i in $(seq 1 "$n"); do
        ns=rdc${id}n$i
        port=rdc${id}p$i
        ip netns add "$ns" || die "cannot create namespace $ns"
        ip link add "$port" type veth peer name "rdc${id}v$i" || die "cannot create veth $port"
        sysctl -qw "net.ipv6.conf.$port.disable_ipv6=1" 2>/dev/null
        ip link set "rdc${id}v$i" netns "$ns"
        ip link set "$port" master "$br" up
        ip netns exec "$ns" sh -c "
            sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
            ip link set rdc${id}v$i name eth0 &&
            ip addr add $net.$i/24 dev eth0 &&
            ip link set eth0 up && ip link set lo up" || die "cannot configure $ns"
        mkdir -p "$dir/node$i/tmp"
        # the holder: own hostname, IPC namespace, /dev/shm, /etc/hosts, tmp
        ip netns exec "$ns" unshare --uts --ipc --mount --propagation private \
            bash -c "hostname node$i && mount -t tmpfs -o size=2g tmpfs /dev/shm &&
                     mount -t tmpfs -o size=1g tmpfs '$dir/node$i/tmp' &&
                     mount --bind '$dir/hosts' /etc/hosts && exec sleep infinity" \
            </dev/null >/dev/null 2>"$dir/node$i/holder.err" &
        holder=$!
        echo "node$i $holder $net.$i $port $ns" >>"$dir/nodes"
        echo "node$i slots=${CLUSTER_SLOTS:-2}" >>"$dir/hostfile"
    done
    # the holders are up once each one's hostname is set
    for i in $(seq 1 "$n"); do
        holder=$(node_field "$dir" "node$i" 2)
        local tries=0
        until [ "$(nsenter -t "$holder" --uts hostname 2>/dev/null)" = "node$i" ] &&
              nsenter -t "$holder" --mount sh -c "mountpoint -q /dev/shm && grep -q node$i /etc/hosts" 2>/dev/null; do
            tries=$((tries + 1))
            if [ $tries -gt 100 ] || ! kill -0 "$holder" 2>/dev/null; then
                cat "$dir/node$i/holder.err" >&2
                die "node$i did not come up"
            fi
            sleep 0.05
        done
    done
    if [ -n "$rate" ]; then
        for i in $(seq 1 "$n"); do cmd_shape "$dir" "node$i" "$rate" "$pkts"; done
    fi
    up_dir=""
    echo "$dir"
}

cmd_shape() {  # dir node rate [pkts]
    local dir=$1 node=$2 rate=$3 pkts=${4:-64}
    local port ns
    port=$(node_field "$dir" "$node" 4)
    ns=$(node_field "$dir" "$node" 5)
    [ -n "$port" ] || die "no node $node in $dir"
    shape_dev "$port" "$rate" "$pkts"          # switch -> node
    shape_dev eth0 "$rate" "$pkts" "$ns"       # node -> switch
}

cmd_unshape() {
    local dir=$1 node=$2 port ns
    port=$(node_field "$dir" "$node" 4)
    ns=$(node_field "$dir" "$node" 5)
    tc qdisc del dev "$port" root 2>/dev/null
    ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null
    return 0
}

cmd_exec() {  # dir node cmd...
    local dir=$1 node=$2 holder
    shift 2
    holder=$(node_field "$dir" "$node" 2)
    [ -n "$holder" ] || die "no node $node in $dir"
    TMPDIR=$dir/$node/tmp exec nsenter -t "$holder" --net --uts --ipc --mount --wd="$PWD" -- "$@"
}

cmd_link() {
    local dir=$1 node=$2 state=$3 port
    port=$(node_field "$dir" "$node" 4)
    [ -n "$port" ] || die "no node $node in $dir"
    ip link set "$port" "$state"
}

cmd_failfast() {
    local ns
    while read -r _ _ _ _ ns; do
        ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=4 net.ipv4.tcp_keepalive_time=3 \
            net.ipv4.tcp_keepalive_intvl=1 net.ipv4.tcp_keepalive_probes=3 || die "sysctl in $ns failed"
    done <"$1/nodes"
}

cmd_qdisc() {
    local port
    port=$(node_field "$1" "$2" 4)
    tc -s qdisc show dev "$port"
}

# every process in one of the cluster's network namespaces (mpirun, orteds,
# ranks, holders)
procs_of_cluster() {  # dir
    local ns
    while read -r _ _ _ _ ns; do ip netns pids "$ns" 2>/dev/null; done <"$1/nodes"
}

cmd_down() {
    local dir=$1
    [ -f "$dir/id" ] || { [ -d "$dir" ] && rm -rf "$dir"; return 0; }
    local id br pids
    id=$(cat "$dir/id")
    br=rdc${id}br
    if [ -f "$dir/nodes" ]; then
        # the nodes' processes first (not the holders), then the holders,
        # which takes their mounts (/dev/shm, tmp) and namespaces with them
        pids=$(procs_of_cluster "$dir" | grep -vxF -f <(awk '{print $2}' "$dir/nodes") || true)
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        # and any of the cluster's processes outside its namespaces (a
        # mpirun.sh or rsh agent still entering one)
        pids=$(procs_by_dir "$dir" | awk '{print $1}' | grep -vxF -f <(awk '{print $2}' "$dir/nodes") || true)
        # shellcheck disable=SC2086
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        awk '{print $2}' "$dir/nodes" | xargs -r kill -KILL 2>/dev/null
        local ns port
        while read -r _ _ _ port ns; do
            ip link del "$port" 2>/dev/null
            ip netns del "$ns" 2>/dev/null
        done <"$dir/nodes"
    fi
    # namespaces of this id whose nodes file line was never written
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^rdc${id}n[0-9]+$" | xargs -r -n1 ip netns del 2>/dev/null
    ip link del "$br" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        ip link show "$br" >/dev/null 2>&1 || break
        sleep 0.1
    done
    rm -f "/run/rdrp-cluster.$id"
    rm -rf "$dir"
    return 0
}

# processes of the cluster whose state directory is DIR, found without its
# namespaces (which "down" has already deleted; a process still inside one
# keeps it alive but invisible to "ip netns pids"): every process the
# cluster starts has DIR/nodeI in its command line (the holders) or
# TMPDIR=DIR/nodeI/tmp in its environment (cmd_exec and the rsh agent set it:
# mpirun, orteds, ranks, whatever runs in a node).  Not RDRP_CLUSTER_DIR:
# the scripts driving the cluster export it too, and would kill themselves.
# Prints "pid comm" per process.
procs_by_dir() {  # dir
    # (one grep each over all of /proc, not a few processes per pid: that
    # took a minute at load 29; "nod[e]" keeps grep from finding its own
    # command line)
    local d
    d=$(sed 's/[][\\.*^$]/\\&/g' <<<"$1")
    { grep -lszx "TMPDIR=$d/nod[e][0-9]*/tmp" /proc/[0-9]*/environ
      grep -lsa "$d/nod[e]" /proc/[0-9]*/cmdline; } 2>/dev/null |
        awk -F/ -v me=$$ -v sub_=$BASHPID '$3 != me && $3 != sub_ && !seen[$3]++ { print $3 }' |
        while read -r pid; do echo "$pid $(cat "/proc/$pid/comm" 2>/dev/null)"; done
}

cmd_leftovers() {  # [id [dir]]
    local left=0 id=${1:-[0-9]+} procs
    ip netns list 2>/dev/null | grep -E "^rdc${id}n" && left=1
    ip -o link 2>/dev/null | grep -oE "rdc${id}(br|p[0-9]+)" && left=1
    ls /run/rdrp-cluster.* 2>/dev/null | grep -E "\.${id}\$" && left=1
    if [ -n "${2:-}" ]; then
        # a node's /dev/shm and tmp are tmpfs mounts private to its mount
        # namespace: they are freed when its last process is gone, so no
        # process left also means no segment left
        procs=$(procs_by_dir "$2")
        [ -n "$procs" ] && { echo "processes: $procs"; left=1; }
        [ -e "$2" ] && { echo "state directory $2"; left=1; }
    fi
    return $left
}

what=${1:-}
shift || true
case $what in
    up) cmd_up "$@" ;;
    down) [ $# = 1 ] || die "down DIR"; need_root; cmd_down "$1" ;;
    exec) [ $# -ge 3 ] || die "exec DIR NODE CMD..."; cmd_exec "$@" ;;
    shape) [ $# -ge 3 ] || die "shape DIR NODE RATE [PKTS]"; cmd_shape "$@" ;;
    unshape) [ $# = 2 ] || die "unshape DIR NODE"; cmd_unshape "$@" ;;
    link) [ $# = 3 ] || die "link DIR NODE up|down"; cmd_link "$@" ;;
    qdisc) [ $# = 2 ] || die "qdisc DIR NODE"; cmd_qdisc "$@" ;;
    failfast) [ $# = 1 ] || die "failfast DIR"; cmd_failfast "$@" ;;
    leftovers) cmd_leftovers "$@" ;;
    *) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; [ -z "$what" ] || exit 2 ;;
esac
