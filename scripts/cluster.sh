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
# shellcheck source=lib/servers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/servers.sh"

SERVER=${BG_REDIS_SERVER:-redis-server}
CLI=${BG_REDIS_CLI:-redis-cli}
N=6

T0=$(date +%s%N)
trace() {  # BG_CLUSTER_TRACE=1: how long each phase took
  if [ -n "${BG_CLUSTER_TRACE:-}" ]; then echo "cluster.sh: $* at $((($(date +%s%N) - T0) / 1000000)) ms" >&2; fi
}
die() { echo "cluster.sh: $*" >&2; exit 2; }
usage() { echo "usage: bash scripts/cluster.sh start DIR | stop DIR" >&2; exit 64; }

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
  servers_pick_ports "$N" 20000 29999 10000
  trace "ports picked"
  : >"$dir/pids"
  for p in "${PORTS[@]}"; do
    mkdir -p "$dir/$p"
    servers_spawn "$dir" "$p" "$SERVER" --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file "$dir/$p/nodes.conf" --cluster-node-timeout 2000 \
      --repl-diskless-sync-delay 0 --save '' --appendonly no --dir "$dir/$p" --logfile "$dir/$p/log" \
      --daemonize no
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
    servers_check_bins
    servers_new_dir "$dir"
    dir=$SERVERS_DIR
    for attempt in 1 2 3 4 5; do
      if start_once "$dir"; then exit 0; fi
      servers_kill_pids "$dir"
      for p in "${PORTS[@]}"; do rm -rf "${dir:?}/$p"; done
      rm -f "$dir/pids" "$dir/create.log"
    done
    rmdir "$dir" 2>/dev/null || true
    die "could not start the cluster"
    ;;
  stop)
    servers_stop "$dir" cluster.sh
    ;;
  *) usage ;;
esac
