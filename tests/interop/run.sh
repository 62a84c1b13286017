#!/usr/bin/env bash
# Interop tests: real Redisson (Java) against the bloomguard CLI on one redis-server, and
# (ClusterInteropTest) on a 6-node Redis Cluster.
#
#   tests/interop/run.sh
#
# Builds no C: the CLI is $BLOOMGUARD_CLI, else build/bloomguard at the top of the repository.
# Uses the server at $BLOOMGUARD_TEST_URL when set; otherwise starts its own redis-server
# ($BG_REDIS_SERVER, else redis-server on PATH) on a free 127.0.0.1
# port, stops it by its pid on exit, and runs `mvn -B test` in tests/interop/java. Exits with
# Maven's status.
# The cluster: the nodes in $BLOOMGUARD_TEST_CLUSTER_SEEDS ("h:p,h:p,...") when set; otherwise
# scripts/cluster.sh starts 3 masters + 3 replicas in this run's temp dir and its `stop` ends
# them by pid on exit. The seeds reach the tests as -Dbloomguard.cluster.seeds and
# $BLOOMGUARD_CLUSTER_SEEDS; when the cluster cannot be started they are "none", and
# ClusterInteropTest then fails when CI=true (skips otherwise).
#
# Environment:
#   BLOOMGUARD_CLI   path of the bloomguard command (default: build/bloomguard)
#   MVN              the maven command (default: mvn)
#   MVN_ARGS         extra Maven arguments, e.g. "-o", or "-Dtest=RedissonInteropTest#hashTagNamesBothWays"
#                    (when unset and ~/.m2 holds Redisson, Maven runs offline first and goes
#                    online only if that fails to resolve; BG_MVN_OFFLINE=0 turns this off)
#   MAVEN_OPTS       honoured by Maven itself
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)

CLI=${BLOOMGUARD_CLI:-$TOP/build/bloomguard}
case $CLI in /*) ;; *) CLI=$PWD/$CLI ;; esac
if [ ! -x "$CLI" ]; then
  echo "interop: bloomguard CLI not found at $CLI (build it, or set BLOOMGUARD_CLI)" >&2
  exit 2
fi
REDIS_SERVER=${BG_REDIS_SERVER:-redis-server}
if ! command -v "$REDIS_SERVER" >/dev/null 2>&1; then
  echo "interop: $REDIS_SERVER not found (install redis-server or set BG_REDIS_SERVER)" >&2
  exit 2
fi
MVN=${MVN:-mvn}
if ! command -v "$MVN" >/dev/null 2>&1; then
  echo "interop: $MVN not found" >&2
  exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/bg-interop.XXXXXX")
REDIS_PID=
CLUSTER_DIR=
cleanup() {
  if [ -n "$CLUSTER_DIR" ] && [ -f "$CLUSTER_DIR/pids" ]; then
    bash "$TOP/scripts/cluster.sh" stop "$CLUSTER_DIR" ||
      echo "interop: could not stop the cluster in $CLUSTER_DIR (pids: $(cut -d' ' -f1 "$CLUSTER_DIR/pids" | tr '\n' ' '))" >&2
  fi
  if [ -n "$REDIS_PID" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID" 2>/dev/null
    for _ in $(seq 1 50); do
      kill -0 "$REDIS_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$REDIS_PID" 2>/dev/null
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

ping_port() { # PORT -> 0 when the server answers PONG
  local reply
  { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  IFS= read -r -t 1 reply <&3
  exec 3<&- 3>&-
  [ "${reply%$'\r'}" = "+PONG" ]
}

if [ -n "${BLOOMGUARD_TEST_URL:-}" ]; then
  # a server the caller started (e.g. .ci/run): use it instead of starting one
  URL=$BLOOMGUARD_TEST_URL
else
  PORT=
  for attempt in 1 2 3 4 5; do
    PORT=$(free_port)
    "$REDIS_SERVER" --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$WORK" --daemonize no >"$WORK/redis.log" 2>&1 &
    REDIS_PID=$!
    up=0
    for _ in $(seq 1 100); do
      if ! kill -0 "$REDIS_PID" 2>/dev/null; then break; fi
      if ping_port "$PORT"; then up=1; break; fi
      sleep 0.1
    done
    if [ $up -eq 1 ]; then break; fi
    kill "$REDIS_PID" 2>/dev/null
    wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
    echo "interop: redis-server did not come up on port $PORT (attempt $attempt)" >&2
  done
  if [ -z "$REDIS_PID" ]; then
    echo "interop: cannot start redis-server; its log:" >&2
    cat "$WORK/redis.log" >&2
    exit 2
  fi

  URL=redis://127.0.0.1:$PORT
fi
echo "interop: redis-server ${REDIS_PID:+pid $REDIS_PID }at $URL, CLI $CLI ($("$CLI" version 2>&1))"

if [ -n "${BLOOMGUARD_TEST_CLUSTER_SEEDS:-}" ]; then
  SEEDS=${BLOOMGUARD_TEST_CLUSTER_SEEDS#redis://}
else
  CLUSTER_DIR=$WORK/cluster
  t0=$SECONDS
  if seeds_url=$(BG_REDIS_SERVER=$REDIS_SERVER bash "$TOP/scripts/cluster.sh" start "$CLUSTER_DIR"); then
    SEEDS=${seeds_url#redis://}
    echo "interop: Redis Cluster (3 masters + 3 replicas, pids in $CLUSTER_DIR/pids) at $SEEDS, up in $((SECONDS - t0)) s"
  else
    SEEDS=none
    echo "interop: could not start a Redis Cluster with scripts/cluster.sh: ClusterInteropTest will fail (CI) or skip" >&2
  fi
fi

export BLOOMGUARD_REDIS_URL=$URL
export BLOOMGUARD_CLUSTER_SEEDS=$SEEDS
export BLOOMGUARD_CLI=$CLI
cd "$HERE/java" || exit 2
# Not -q: Surefire's "Tests run: ..." summary must show. -ntp keeps download progress out.
# When ~/.m2 already holds Redisson (a previous run resolved everything) try offline first, and
# go online only if the offline run failed to resolve something (not for test failures).
M2=${MAVEN_REPO_LOCAL:-$HOME/.m2/repository}
run_mvn() {
  # shellcheck disable=SC2086
  "$MVN" -B -ntp -Dstyle.color=never "$@" ${MVN_ARGS:-} test \
    -Dbloomguard.redis.url="$URL" -Dbloomguard.cli="$CLI" -Dbloomguard.cluster.seeds="$SEEDS" </dev/null 2>&1 | tee "$WORK/mvn.log"
  return "${PIPESTATUS[0]}"
}
if [ -z "${MVN_ARGS:-}" ] && [ "${BG_MVN_OFFLINE:-auto}" != 0 ] &&
   [ -f "$M2/org/redisson/redisson/3.45.1/redisson-3.45.1.jar" ]; then
  run_mvn -o
  status=$?
  if [ $status -ne 0 ] && grep -Eq 'offline mode|Could not resolve|Cannot access|could not be resolved' "$WORK/mvn.log"; then
    echo "interop: offline run could not resolve every artifact; retrying online"
    run_mvn
    status=$?
  fi
else
  run_mvn
  status=$?
fi
echo "interop: mvn exited with $status"
exit $status
