#!/usr/bin/env bash
# Installs a build the way README.md's C line does - `cmake --install build --prefix "$HOME/.local"`,
# no sudo - with HOME a scratch folder, and builds downstream programs against it as README.md says
# (find_package with CMAKE_PREFIX_PATH, shared and static; pkg-config with PKG_CONFIG_PATH). Then:
# the libraries define only bg_* symbols; a program linking libbloomguard.a and the system's
# hiredis (Debian's libhiredis-dev, 0.14) gets both working (and the build's un-localized archive,
# linked the same way, must break it: the negative control); the install tree and the command hold
# every notice (scripts/notices.py).
#   bash scripts/check-install.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SCRATCH=$(mktemp -d)
redis_pid=
cleanup() {
  if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null || true; wait "$redis_pid" 2>/dev/null || true; fi
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
die() { echo "check-install: $*" >&2; exit 1; }

# README.md's C line: no sudo, a bounded -j, the install into $HOME/.local (scripts/newcomer-check.sh
# runs it as written)
readme_c=$(grep -m1 '^cmake -S bloomguard -B build ' README.md) || die "README.md has no C install line (cmake -S bloomguard ...)"
case $readme_c in *sudo*) die "README.md's C line uses sudo: $readme_c" ;; esac
grep -Eq -- '--build build -j ?[0-9]+ ' <<< "$readme_c" || die "README.md's C line has no bounded -j N: $readme_c"
grep -Fq -- 'cmake --install build --prefix "$HOME/.local"' <<< "$readme_c" ||
  die "README.md's C line does not install with --prefix \"\$HOME/.local\" (this check installs that way): $readme_c"

HOME_=$SCRATCH/home
PREFIX=$HOME_/.local
HOME=$HOME_ cmake --install "$BUILD" --prefix "$PREFIX" >/dev/null
cmake -S tests/install -B "$SCRATCH/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" >/dev/null
cmake --build "$SCRATCH/consumer" >/dev/null
LD_LIBRARY_PATH=$PREFIX/lib "$SCRATCH/consumer/consumer_shared"
"$SCRATCH/consumer/consumer_static"
libdir=$(dirname "$(find "$PREFIX" -name bloomguard.pc)")/..
cc tests/install/consumer.c -o "$SCRATCH/consumer_pc" \
  $(PKG_CONFIG_PATH=$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} pkg-config --cflags --libs bloomguard)
LD_LIBRARY_PATH=$libdir "$SCRATCH/consumer_pc"
# the shared library exports only bg_* symbols
leaked=$(nm -D --defined-only "$libdir"/libbloomguard.so | awk '{print $3}' | grep -v '^bg_' | grep -v '^_' || true)
if [ -n "$leaked" ]; then echo "symbols exported beyond bg_*: $leaked" >&2; exit 1; fi
# the static library defines only bg_* globals too (csrc/CMakeLists.txt: one relocatable object,
# hidden symbols made local); nm -g lists global and weak definitions
leaked=$(nm -g --defined-only "$libdir"/libbloomguard.a | awk 'NF == 3 {print $3}' | grep -v '^bg_' | grep -v '^_' || true)
if [ -n "$leaked" ]; then
  echo "libbloomguard.a defines globals beyond bg_*: $(echo "$leaked" | head -20 | tr '\n' ' ')" >&2; exit 1
fi
# (its control: the build's plain archive, the same objects before localizing, has such globals)
internal=$BUILD/csrc/libbloomguard_internal.a
if [ -f "$internal" ] && [ -z "$(nm -g --defined-only "$internal" | awk 'NF == 3 {print $3}' | grep -v '^bg_' || true)" ]; then
  die "negative control: nm finds no globals beyond bg_* even in $internal - the symbol check cannot fail"
fi
echo "libbloomguard.so and libbloomguard.a define only bg_* globals (the plain archive has others, as it must)"

# libbloomguard.a beside the system's hiredis in one program (tests/install/hiredis_coexist.c)
if grep -q '^BG_HIREDIS_KIND:INTERNAL=vendored' "$BUILD/CMakeCache.txt" && pkg-config --exists hiredis; then
  static_libs=$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --static --libs-only-l bloomguard | sed 's/-lbloomguard\b//')
  coexist() {  # coexist ARCHIVE OUT: the program linked with that archive and the system hiredis
    # shellcheck disable=SC2046,SC2086
    cc -I"$PREFIX/include" tests/install/hiredis_coexist.c -o "$2" "$1" $(pkg-config --cflags --libs hiredis) $static_libs
  }
  coexist "$libdir/libbloomguard.a" "$SCRATCH/coexist"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  closed=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$SCRATCH" \
    --logfile "$SCRATCH/redis.log" --daemonize no &
  redis_pid=$!
  for _ in $(seq 1 200); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.05
  done
  "$SCRATCH/coexist" "$closed" "$port" || die "libbloomguard.a and the system hiredis $(pkg-config --modversion hiredis) do not work in one program"
  # the negative control: the same program with the objects as compiled (hidden, not local) must
  # bind its redisConnect to the vendored hiredis and fail
  if [ -f "$internal" ]; then
    coexist "$internal" "$SCRATCH/coexist_control"
    if "$SCRATCH/coexist_control" "$closed" "$port" >"$SCRATCH/control.out" 2>&1; then
      die "negative control: the un-localized archive worked beside the system hiredis - the check cannot fail"
    fi
    echo "negative control: the un-localized archive beside the system hiredis fails, as it must: $(grep -m1 'closed port' "$SCRATCH/control.out" | tr -cd '[:print:]')"
  fi
  kill "$redis_pid"; wait "$redis_pid" 2>/dev/null || true; redis_pid=
else
  echo "check-install.sh: libbloomguard.a beside the system hiredis skipped (needs a vendored-hiredis build and libhiredis-dev)"
fi

# bloomguard inside another project (tests/install/subdir: add_subdirectory): the tests, benchmarks,
# examples and demo default to OFF there; the same with -DBG_BUILD_EXTRAS=ON must turn them on
# (the control: the check reads a cache that can say ON)
extras() {  # extras DIR [cmake args]: the four BG_BUILD_* values of that configure, one line
  local dir=$1; shift
  cmake -S tests/install/subdir -B "$dir" -G Ninja -DBG_SOURCE_DIR="$PWD" "$@" >/dev/null
  for o in TESTS BENCH EXAMPLES DEMO; do sed -n "s/^BG_BUILD_$o:BOOL=//p" "$dir/CMakeCache.txt"; done | tr '\n' ' '
}
got=$(extras "$SCRATCH/parent")
[ "$got" = "OFF OFF OFF OFF " ] || die "under add_subdirectory BG_BUILD_TESTS/BENCH/EXAMPLES/DEMO are '$got', not OFF"
got=$(extras "$SCRATCH/parent-on" -DBG_BUILD_EXTRAS=ON)
[ "$got" = "ON ON ON ON " ] || die "negative control: -DBG_BUILD_EXTRAS=ON gave '$got', not ON: the check cannot fail"
echo "under add_subdirectory: tests, benchmarks, examples and demo OFF by default (ON with BG_BUILD_EXTRAS=ON)"

# the notices of what the libraries and the command hold: share/doc/bloomguard, `bloomguard licenses`
python3 scripts/notices.py install "$PREFIX" --build "$BUILD"
if [ -x "$PREFIX/bin/bloomguard" ]; then
  python3 scripts/notices.py cli "$PREFIX/bin/bloomguard" --build "$BUILD"
fi
# a vendored hiredis (cmake/hiredis.cmake) is inside both libraries: neither the shared library nor a
# program linking the static one needs anything beyond libc, libm, libpthread (and libssl/libcrypto)
if grep -q '^BG_HIREDIS_KIND:INTERNAL=vendored' "$BUILD/CMakeCache.txt"; then
  for f in "$libdir"/libbloomguard.so "$SCRATCH/consumer/consumer_static"; do
    extra=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
            grep -Ev '^(libc|libm|libpthread|libssl|libcrypto)\.so(\.[0-9]+)*$|^ld-linux' || true)
    if [ -n "$extra" ]; then echo "$(basename "$f") needs more than libc/libm/libpthread/OpenSSL: $extra" >&2; exit 1; fi
  done
fi
# The same from the default prefix, /usr/local, as `sudo cmake --install` + `sudo ldconfig` leave it:
# found by pkg-config's and find_package's default search paths, the shared library by the loader's
# cache (no LD_LIBRARY_PATH), the command by its rpath. Done for real, but in a private mount
# namespace whose /usr/local and /etc are overlays on temporary directories: nothing reaches the
# machine's own, and it all goes when the namespace ends. Needs root (CI runs as root).
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1; then
  mkdir -p "$SCRATCH/ov/usr" "$SCRATCH/ov/usr.work" "$SCRATCH/ov/etc" "$SCRATCH/ov/etc.work"
  unshare -m --propagation private bash -euo pipefail -s "$BUILD" "$SCRATCH" "$PWD" <<'NS'
BUILD=$1 SCRATCH=$2 TOP=$3
mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$SCRATCH/ov/usr,workdir=$SCRATCH/ov/usr.work" /usr/local
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$SCRATCH/ov/etc,workdir=$SCRATCH/ov/etc.work" /etc
cmake --install "$BUILD" --prefix /usr/local >/dev/null
ldconfig
unset PKG_CONFIG_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH
cmake -S "$TOP/tests/install" -B "$SCRATCH/consumer-usrlocal" -G Ninja >/dev/null
cmake --build "$SCRATCH/consumer-usrlocal" >/dev/null
"$SCRATCH/consumer-usrlocal/consumer_shared" >/dev/null
"$SCRATCH/consumer-usrlocal/consumer_static" >/dev/null
# shellcheck disable=SC2046
cc "$TOP/tests/install/consumer.c" -o "$SCRATCH/consumer_pc_usrlocal" $(pkg-config --cflags --libs bloomguard)
"$SCRATCH/consumer_pc_usrlocal" >/dev/null
if [ -x /usr/local/bin/bloomguard ]; then /usr/local/bin/bloomguard --version >/dev/null; fi
echo "installed into /usr/local (private mount namespace): find_package, pkg-config, ldconfig, the command: OK"
NS
else
  echo "check-install.sh: /usr/local check skipped (needs root for a private mount namespace)"
fi
echo "install check passed"
