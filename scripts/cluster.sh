#!/usr/bin/env bash
# A local 6-node Redis Cluster (3 masters + 3 replicas) for humans and benchmarks.
#
#   bash scripts/cluster.sh start DIR   # prints the seed URL: redis://127.0.0.1:P0,127.0.0.1:P1,...
#   bash scripts/cluster.sh stop DIR    # stops the nodes by the pids in DIR/pids, removes DIR
#
# DIR must not exist yet (or be empty); it holds DIR/pids ("pid port" per line), DIR/seeds and
# DIR/P/{nodes.conf,log}. Ports: random P in 20000..22767 with P and P+10000 (the cluster bus)
# both free, the bus below the kernel's ephemeral range (other tests' free ports); a start that
# loses a port to someone else retries with new ports. The nodes run in their own session
# (setsid), so they outlive this script until `stop`; nothing reads stdin.
# Replica assignment is shuffled by redis-cli --cluster create: ask `redis-cli -p P role`.
# Environment: BG_REDIS_SERVER, BG_REDIS_CLI (default redis-server, redis-cli from PATH);
# BG_CLUSTER_TRACE=1 prints how long each phase took.
set -euo pipefail

SERVER=${BG_REDIS_SERVER:-redis-server}
CLI=${BG_REDIS_CLI:-redis-cli}
N=6

T0=$(date +%s%N)
trace() {  # BG_CLUSTER_TRACE=1: how long each phase took
  if [ -n "${BG_CLUSTER_TRACE:-}" ]; then echo "cluster.sh: $* at $((($(date +%s%N) - T0) / 1000000)) ms" >&2; fi
}
die() { echo "cluster.sh: $*" >&2; exit 2; }
usage() { echo "usage: bash scripts/cluster.sh start DIR | stop DIR" >&2; exit 64; }

pick_ports() {  # PORTS=(6 ports P, each with P and P+10000 bind-tested free), in one python3 run
  local out
  out=$(python3 - "$N" <<'EOF'
import random, socket, sys

def free(port):  # SO_REUSEADDR, as redis-server: a port in TIME_WAIT is free for it
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False

hi = 29999
try:  # keep the bus port below the ephemeral range, where other tests' free ports come from
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    if 20100 <= lo - 10001 < hi:
        hi = lo - 10001
except (OSError, ValueError):
    pass
ports = []
for _ in range(6000):
    p = random.randint(20000, hi)
    if p not in ports and free(p) and free(p + 10000):
        ports.append(p)
        if len(ports) == int(sys.argv[1]):
            print(" ".join(map(str, ports)))
            sys.exit(0)
sys.exit("no free port pairs P, P+10000 in 20000..%d" % hi)
EOF
  ) || die "cannot pick ports (python3 needed)"
  read -r -a PORTS <<<"$out"
}

kill_pids() {  # SIGTERM every pid in DIR/pids, then SIGKILL what is left after 5 s
  local dir=$1 pid port i
  [ -f "$dir/pids" ] || return 0
  while read -r pid port; do kill "$pid" 2>/dev/null || true; done <"$dir/pids"
  for i in $(seq 100); do
    local alive=0
    while read -r pid port; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$dir/pids"
    [ $alive = 0 ] && return 0
    sleep 0.05
  done
  while read -r pid port; do kill -9 "$pid" 2>/dev/null || true; done <"$dir/pids"
}

wait_ok() {  # every node cluster_state:ok, one view of the roles, one slot -> master map, replicas connected
  local dir=$1 deadline=$((SECONDS + 20)) p first first_roles m r ok role
  while [ $SECONDS -lt $deadline ]; do
    ok=1; first=; first_roles=
    for p in "${PORTS[@]}"; do
      "$CLI" -p "$p" cluster info 2>/dev/null | grep -q cluster_state:ok || { ok=0; break; }
      # masters only: a replica list reaches the other nodes by gossip, seconds later
      m=$("$CLI" -p "$p" --no-raw cluster slots 2>/dev/null | awk '/^[0-9]+\)/{n=0} {n++} n<=4' | md5sum)
      if [ -z "$first" ]; then first=$m; elif [ "$m" != "$first" ]; then ok=0; break; fi
      # and who is a replica of whom, with no node flagged fail: until a master knows its
      # replica (gossip, ~1 s after create) it ignores that replica's CLUSTER FAILOVER
      r=$("$CLI" -p "$p" cluster nodes 2>/dev/null | awk '
        { split($2, a, "[:@]"); port[$1] = a[2]; flags[NR] = $3; self[NR] = $1; master[NR] = $4 }
        END { for (i = 1; i <= NR; i++) {
                if (flags[i] ~ /fail/) { print "fail"; continue }
                print port[self[i]], (flags[i] ~ /slave/ ? "S" port[master[i]] : "M") } }' | sort)
      case $r in *fail*|"") ok=0; break ;; esac
      r=$(printf '%s' "$r" | md5sum)
      if [ -z "$first_roles" ]; then first_roles=$r; elif [ "$r" != "$first_roles" ]; then ok=0; break; fi
      role=$("$CLI" -p "$p" role 2>/dev/null | tr '\n' ' ')
      case $role in master*|*" connected "*) ;; *) ok=0; break ;; esac
    done
    [ $ok = 1 ] && return 0
    sleep 0.05
  done
  return 1
}

start_once() {
  local dir=$1 p i
  pick_ports
  trace "ports picked"
  : >"$dir/pids"
  for p in "${PORTS[@]}"; do
    mkdir -p "$dir/$p"
    setsid "$SERVER" --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
      --repl-diskless-sync-delay 0 --save '' --appendonly no --dir "$dir/$p" --logfile "$dir/$p/log" \
      --daemonize no </dev/null >/dev/null 2>&1 &
    echo "$! $p" >>"$dir/pids"
  done
  for p in "${PORTS[@]}"; do
    for i in $(seq 250); do
      "$CLI" -p "$p" ping >/dev/null 2>&1 && break
      if ! kill -0 "$(awk -v p="$p" '$2 == p {print $1}' "$dir/pids")" 2>/dev/null; then
        echo "cluster.sh: node $p exited at start (port taken?), retrying with new ports" >&2; return 1
      fi
      sleep 0.02
    done
  done
  trace "all nodes answer PING"
  local addrs=()
  for p in "${PORTS[@]}"; do addrs+=("127.0.0.1:$p"); done
  if ! "$CLI" --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes </dev/null >"$dir/create.log" 2>&1; then
    echo "cluster.sh: redis-cli --cluster create failed:" >&2; tail -20 "$dir/create.log" >&2; return 1
  fi
  trace "redis-cli --cluster create done"
  wait_ok "$dir" || { echo "cluster.sh: the cluster did not become ok within 20 s" >&2; return 1; }
  trace "cluster ok and agreed"
  rm -f "$dir/create.log"
  local seeds="redis://" sep=
  for p in "${PORTS[@]}"; do seeds+="${sep}127.0.0.1:$p"; sep=,; done
  echo "$seeds" >"$dir/seeds"
  echo "$seeds"
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || usage
case $cmd in
  start)
    command -v "$SERVER" >/dev/null || die "$SERVER not found (Debian: apt-get install redis-server)"
    command -v "$CLI" >/dev/null || die "$CLI not found (Debian: apt-get install redis-tools)"
    if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then die "$dir exists and is not empty"; fi
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    for attempt in 1 2 3 4 5; do
      if start_once "$dir"; then exit 0; fi
      kill_pids "$dir"
      for p in "${PORTS[@]}"; do rm -rf "${dir:?}/$p"; done
      rm -f "$dir/pids" "$dir/create.log"
    done
    rmdir "$dir" 2>/dev/null || true
    die "could not start the cluster"
    ;;
  stop)
    [ -f "$dir/pids" ] || die "$dir/pids not found: nothing started there by cluster.sh"
    kill_pids "$dir"
    while read -r pid port; do
      if kill -0 "$pid" 2>/dev/null; then die "pid $pid (port $port) is still running"; fi
    done <"$dir/pids"
    rm -rf "${dir:?}"
    ;;
  *) usage ;;
esac
