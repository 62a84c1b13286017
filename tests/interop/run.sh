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
# $BLOOMGUARD_CLUSTER_SEEDS. A cluster (or the TLS server below) that cannot be started fails the
# run here, CI or not: a skipped interop class would hide a regression.
# TLS (TlsInteropTest): scripts/tls-certs.sh makes a test CA and certificates in this run's temp
# dir and a TLS-only redis-server (--port 0 --tls-port P, no client certificates required) is
# started there and stopped by its pid on exit; -Dbloomguard.tls.url=rediss://127.0.0.1:P and
# -Dbloomguard.tls.ca=DIR/ca.crt (and $BLOOMGUARD_TLS_URL, $BLOOMGUARD_TLS_CA) reach the tests.
# $BLOOMGUARD_TEST_TLS_URL with $BLOOMGUARD_TEST_TLS_CA (the PEM CA it is signed by; the CA dir
# must also hold other-ca.crt, as scripts/tls-certs.sh makes it) use a server the caller
# started instead. When none can be started the run fails.
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
TLS_PID=
CLUSTER_DIR=
stop_pid() { # PID: TERM, up to 5 s, then KILL
  kill -0 "$1" 2>/dev/null || return 0
  kill "$1" 2>/dev/null
  for _ in $(seq 1 50); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null
}
cleanup() {
  if [ -n "$TLS_PID" ]; then stop_pid "$TLS_PID"; fi
  if [ -n "$CLUSTER_DIR" ] && [ -f "$CLUSTER_DIR/pids" ]; then
    bash "$TOP/scripts/cluster.sh" stop "$CLUSTER_DIR" ||
      echo "interop: could not stop the cluster in $CLUSTER_DIR (pids: $(cut -d' ' -f1 "$CLUSTER_DIR/pids" | tr '\n' ' '))" >&2
  fi
  if [ -n "$REDIS_PID" ]; then stop_pid "$REDIS_PID"; fi
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
    echo "interop: could not start a Redis Cluster with scripts/cluster.sh: ClusterInteropTest cannot run" >&2
    exit 1
  fi
fi

start_tls_server() { # -> TLS_URL, TLS_CA, TLS_PID; 1 when it cannot be started
  local dir=$WORK/tls port attempt up
  if ! bash "$TOP/scripts/tls-certs.sh" "$dir" >"$WORK/tls-certs.log" 2>&1; then
    echo "interop: scripts/tls-certs.sh failed: $(cat "$WORK/tls-certs.log")" >&2
    return 1
  fi
  if ! command -v redis-cli >/dev/null 2>&1; then
    echo "interop: redis-cli not found: cannot tell when the TLS server is up" >&2
    return 1
  fi
  for attempt in 1 2 3; do
    port=$(free_port)
    "$REDIS_SERVER" --port 0 --tls-port "$port" --tls-cert-file "$dir/server.crt" \
      --tls-key-file "$dir/server.key" --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no \
      --save "" --appendonly no --bind 127.0.0.1 --dir "$dir" --daemonize no \
      >"$WORK/redis-tls.log" 2>&1 &
    TLS_PID=$!
    up=0
    for _ in $(seq 1 100); do
      kill -0 "$TLS_PID" 2>/dev/null || break
      if [ "$(redis-cli --tls --cacert "$dir/ca.crt" -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = PONG ]; then
        up=1
        break
      fi
      sleep 0.1
    done
    if [ $up -eq 1 ]; then
      TLS_URL=rediss://127.0.0.1:$port
      TLS_CA=$dir/ca.crt
      return 0
    fi
    stop_pid "$TLS_PID"
    wait "$TLS_PID" 2>/dev/null
    TLS_PID=
    echo "interop: the TLS redis-server did not come up on port $port (attempt $attempt)" >&2
  done
  echo "interop: its log: $(cat "$WORK/redis-tls.log")" >&2
  return 1
}

if [ -n "${BLOOMGUARD_TEST_TLS_URL:-}" ]; then
  TLS_URL=$BLOOMGUARD_TEST_TLS_URL
  TLS_CA=${BLOOMGUARD_TEST_TLS_CA:-none}
elif start_tls_server; then
  echo "interop: TLS-only redis-server pid $TLS_PID at $TLS_URL (test CA $TLS_CA)"
else
  echo "interop: could not start a TLS redis-server: TlsInteropTest cannot run" >&2
  exit 1
fi

export BLOOMGUARD_REDIS_URL=$URL
export BLOOMGUARD_TLS_URL=$TLS_URL
export BLOOMGUARD_TLS_CA=$TLS_CA
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
    -Dbloomguard.redis.url="$URL" -Dbloomguard.cli="$CLI" -Dbloomguard.cluster.seeds="$SEEDS" \
    -Dbloomguard.tls.url="$TLS_URL" -Dbloomguard.tls.ca="$TLS_CA" </dev/null 2>&1 | tee "$WORK/mvn.log"
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
