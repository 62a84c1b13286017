#!/usr/bin/env bash
# A local Redis Sentinel deployment (1 master + 1 replica + 3 sentinels, master name "bgmaster")
# for humans and benchmarks.
#
#   bash scripts/sentinel.sh start DIR   # prints the URL: redis-sentinel://127.0.0.1:S0,127.0.0.1:S1,127.0.0.1:S2#bgmaster
#   bash scripts/sentinel.sh stop DIR    # stops the processes by the pids in DIR/pids, removes DIR
#
# DIR must not exist yet (or be empty); it holds DIR/pids ("pid port" per line: data 0, data 1,
# sentinels 0-2), DIR/url, DIR/data{0,1}/log and DIR/sentinel{0,1,2}/{sentinel.conf,log} (each
# sentinel's own writable config, which Sentinel rewrites). Ports: random in 20000..(the kernel's
# ephemeral range - 1), bind-tested; a start that loses a port retries with new ports. The
# processes run in their own session (setsid), so they outlive this script until `stop`; nothing
# reads stdin. Node 0 is the first master; after a failover ask a sentinel:
#   redis-cli -p S0 sentinel get-master-addr-by-name bgmaster
# Environment: BG_REDIS_SERVER, BG_REDIS_CLI (default redis-server, redis-cli from PATH);
# BG_SENTINEL_DATA_PASSWORD (requirepass + masterauth on the data nodes, sentinel auth-pass; no
# spaces, quotes or backslashes: Redis 7.0 Sentinel rewrites auth-pass unquoted);
# BG_SENTINEL_PASSWORD (requirepass on the sentinels; then in the URL as :PASSWORD@);
# BG_SENTINEL_TRACE=1 prints how long each phase took.
# down-after-milliseconds is 2000 (see DOWN_AFTER_MS in tests/c/sentinel_fixture.c: with 1000 a
# second failover was followed by a spurious third one).
set -euo pipefail
# shellcheck source=lib/servers.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/servers.sh"

SERVER=${BG_REDIS_SERVER:-redis-server}
CLI=${BG_REDIS_CLI:-redis-cli}
DPW=${BG_SENTINEL_DATA_PASSWORD:-}
SPW=${BG_SENTINEL_PASSWORD:-}
NAME=bgmaster

T0=$(date +%s%N)
trace() {
  if [ -n "${BG_SENTINEL_TRACE:-}" ]; then echo "sentinel.sh: $* at $((($(date +%s%N) - T0) / 1000000)) ms" >&2; fi
}
die() { echo "sentinel.sh: $*" >&2; exit 2; }
usage() { echo "usage: bash scripts/sentinel.sh start DIR | stop DIR" >&2; exit 64; }

# redis-cli on a data node / a sentinel, with the password through the environment (REDISCLI_AUTH),
# never on the command line
pcli() {
  local pw=$1 p=$2; shift 2
  if [ -n "$pw" ]; then REDISCLI_AUTH=$pw "$CLI" -p "$p" "$@" </dev/null 2>/dev/null
  else "$CLI" -p "$p" "$@" </dev/null 2>/dev/null; fi
}
dcli() { pcli "$DPW" "$@"; }
scli() { pcli "$SPW" "$@"; }

quote() {  # a config-file string in double quotes
  python3 -c 'import sys; v = sys.argv[1]; print("\"" + "".join("\\" + c if c in "\"\\" else c for c in v) + "\"")' "$1"
}

wait_own() {  # until the process $1 answers on port $2 as itself (INFO server's process_id)
  local pid=$1 port=$2 kind=$3 i
  for i in $(seq 250); do
    kill -0 "$pid" 2>/dev/null || return 1
    if [ "$kind" = data ]; then
      dcli "$port" info server | grep -q "^process_id:$pid" && return 0
    else
      scli "$port" info server | grep -q "^process_id:$pid" && return 0
    fi
    sleep 0.02
  done
  return 1
}

field() {  # field NAME: the value after the line NAME in redis-cli's one-item-per-line output
  awk -v k="$1" 'prev == k { print; exit } { prev = $0 }'
}

sentinel_ready() {  # master is data node 0, the replica healthy, the other 2 sentinels seen up
  local s=$1 out flags
  out=$(scli "$s" sentinel master "$NAME") || return 1
  [ "$(field port <<<"$out")" = "${PORTS[0]}" ] || return 1
  [ "$(field flags <<<"$out")" = master ] || return 1
  [ "$(field num-other-sentinels <<<"$out")" = 2 ] || return 1
  out=$(scli "$s" sentinel replicas "$NAME") || return 1
  flags=$(awk -v p="${PORTS[1]}" 'prev == "port" && $0 == p { hit = 1 } prev == "flags" && hit { print; exit } { prev = $0 }' <<<"$out")
  case $flags in slave) ;; *) return 1 ;; esac
  out=$(scli "$s" sentinel sentinels "$NAME") || return 1
  case $out in *s_down*|*disconnected*) return 1 ;; esac
  return 0
}

start_once() {
  local dir=$1 i p pid ok deadline
  servers_pick_ports 5 20000 32767
  trace "ports picked"
  : >"$dir/pids"
  local auth=()
  [ -n "$DPW" ] && auth=(--requirepass "$DPW" --masterauth "$DPW")
  for i in 0 1; do
    mkdir -p "$dir/data$i"
    local repl=()
    [ $i = 1 ] && repl=(--replicaof 127.0.0.1 "${PORTS[0]}")
    servers_spawn "$dir" "${PORTS[$i]}" "$SERVER" --port "${PORTS[$i]}" --bind 127.0.0.1 --save '' \
      --appendonly no --repl-diskless-sync-delay 0 --dir "$dir/data$i" --logfile "$dir/data$i/log" \
      --daemonize no ${auth[@]+"${auth[@]}"} ${repl[@]+"${repl[@]}"}
    pid=$SPAWNED_PID
    # the replica after the master answers: else its first connect fails and it retries 1 s later
    wait_own "$pid" "${PORTS[$i]}" data ||
      { echo "sentinel.sh: data node ${PORTS[$i]} did not start (port taken?), retrying" >&2; return 1; }
  done
  trace "data nodes answer"
  # the replica's link up before any sentinel looks: a sentinel learns the replicas from the
  # master's INFO, asked at connect and then only every 10 s
  for i in $(seq 500); do
    dcli "${PORTS[1]}" info replication | grep -q master_link_status:up && break
    [ "$i" = 500 ] && { echo "sentinel.sh: the replica's link did not come up" >&2; return 1; }
    sleep 0.02
  done
  trace "replica link up"
  for i in 0 1 2; do
    p=${PORTS[$((2 + i))]}
    mkdir -p "$dir/sentinel$i"
    {
      echo "port $p"; echo "bind 127.0.0.1"; echo "daemonize no"
      echo "dir $(quote "$dir/sentinel$i")"; echo 'logfile "log"'; echo "sentinel resolve-hostnames no"
      [ -n "$SPW" ] && echo "requirepass $(quote "$SPW")"
      echo "sentinel monitor $NAME 127.0.0.1 ${PORTS[0]} 2"
      echo "sentinel down-after-milliseconds $NAME 2000"
      echo "sentinel failover-timeout $NAME 5000"
      [ -n "$DPW" ] && echo "sentinel auth-pass $NAME $(quote "$DPW")"
    } >"$dir/sentinel$i/sentinel.conf"
    chmod 600 "$dir/sentinel$i/sentinel.conf"
    servers_spawn "$dir" "$p" "$SERVER" "$dir/sentinel$i/sentinel.conf" --sentinel
  done
  tail -n 3 "$dir/pids" | while read -r pid p; do
    wait_own "$pid" "$p" sentinel || { echo "sentinel.sh: sentinel $p did not start (port taken?), retrying" >&2; exit 1; }
  done || return 1
  trace "sentinels answer"
  deadline=$((SECONDS + 15))
  while :; do
    ok=1
    for i in 2 3 4; do sentinel_ready "${PORTS[$i]}" || { ok=0; break; }; done
    [ $ok = 1 ] && break
    [ $SECONDS -lt $deadline ] || { echo "sentinel.sh: the sentinels did not agree within 15 s" >&2; return 1; }
    sleep 0.05
  done
  trace "sentinels agree"
  local url="redis-sentinel://" sep=
  if [ -n "$SPW" ]; then
    url+=":$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$SPW")@"
  fi
  for i in 2 3 4; do url+="${sep}127.0.0.1:${PORTS[$i]}"; sep=,; done
  url+="#$NAME"
  echo "$url" >"$dir/url"
  echo "$url"
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || usage
case $cmd in
  start)
    servers_check_bins
    case $DPW in *[[:space:]\"\'\\]*) die "BG_SENTINEL_DATA_PASSWORD must not contain spaces, quotes or backslashes" ;; esac
    servers_new_dir "$dir"
    dir=$SERVERS_DIR
    for attempt in 1 2 3 4 5; do
      if start_once "$dir"; then exit 0; fi
      servers_kill_pids "$dir"
      rm -rf "${dir:?}"/data? "${dir:?}"/sentinel? "$dir/pids"
    done
    rmdir "$dir" 2>/dev/null || true
    die "could not start the Sentinel deployment"
    ;;
  stop)
    servers_stop "$dir" sentinel.sh
    ;;
  *) usage ;;
esac
