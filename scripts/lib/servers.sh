# Port picking, starting and stopping by pid, shared by scripts/cluster.sh and scripts/sentinel.sh
# (sourced, not run). The caller defines die() (message, exit 2). DIR/pids holds "pid port" per line.

# servers_pick_ports N LO HI [BUS_OFFSET]: PORTS=(N distinct random ports in LO..HI, each with
# PORT (and PORT+BUS_OFFSET when given) bind-tested free), below the kernel's ephemeral range
# (where other tests' free ports come from), in one python3 run.
servers_pick_ports() {
  local out
  out=$(python3 - "$@" <<'PY'
import random, socket, sys

n, lo, hi = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
bus = int(sys.argv[4]) if len(sys.argv) > 4 else 0

def free(port):  # SO_REUSEADDR, as redis-server: a port in TIME_WAIT is free for it
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False

try:  # below the ephemeral range (the bus port too)
    elo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    if lo + 100 <= elo - 1 - bus < hi:
        hi = elo - 1 - bus
except (OSError, ValueError):
    pass
ports = []
for _ in range(1000 * n):
    p = random.randint(lo, hi)
    if p not in ports and free(p) and (not bus or free(p + bus)):
        ports.append(p)
        if len(ports) == n:
            print(" ".join(map(str, ports)))
            sys.exit(0)
if bus:
    sys.exit("no free port pairs P, P+%d in %d..%d" % (bus, lo, hi))
sys.exit("no free ports in %d..%d" % (lo, hi))
PY
  ) || die "cannot pick ports (python3 needed)"
  read -r -a PORTS <<<"$out"
}

# servers_spawn DIR PORT CMD...: starts CMD in its own session (setsid: it outlives the script
# until `stop`), stdin, stdout and stderr on /dev/null; appends "pid PORT" to DIR/pids; sets
# SPAWNED_PID.
servers_spawn() {
  local dir=$1 port=$2
  shift 2
  setsid "$@" </dev/null >/dev/null 2>&1 &
  SPAWNED_PID=$!
  echo "$SPAWNED_PID $port" >>"$dir/pids"
}

# servers_kill_pids DIR: SIGTERM every pid in DIR/pids, then SIGKILL what is left after 5 s.
servers_kill_pids() {
  local dir=$1 pid port i alive
  [ -f "$dir/pids" ] || return 0
  while read -r pid port; do kill "$pid" 2>/dev/null || true; done <"$dir/pids"
  for i in $(seq 100); do
    alive=0
    while read -r pid port; do kill -0 "$pid" 2>/dev/null && alive=1; done <"$dir/pids"
    [ $alive = 0 ] && return 0
    sleep 0.05
  done
  while read -r pid port; do kill -9 "$pid" 2>/dev/null || true; done <"$dir/pids"
}

# servers_check_bins: SERVER and CLI exist.
servers_check_bins() {
  command -v "$SERVER" >/dev/null || die "$SERVER not found (Debian: apt-get install redis-server)"
  command -v "$CLI" >/dev/null || die "$CLI not found (Debian: apt-get install redis-tools)"
}

# servers_new_dir DIR: DIR must be new or empty; creates it; SERVERS_DIR=its absolute path.
servers_new_dir() {
  local dir=$1
  if [ -e "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ]; then die "$dir exists and is not empty"; fi
  mkdir -p "$dir"
  SERVERS_DIR=$(cd "$dir" && pwd)
}

# servers_stop DIR WHO: stops every pid in DIR/pids (none may survive) and removes DIR.
servers_stop() {
  local dir=$1 who=$2 pid port
  [ -f "$dir/pids" ] || die "$dir/pids not found: nothing started there by $who"
  servers_kill_pids "$dir"
  while read -r pid port; do
    if kill -0 "$pid" 2>/dev/null; then die "pid $pid (port $port) is still running"; fi
  done <"$dir/pids"
  rm -rf "${dir:?}"
}
