# An arm64 (aarch64) root of Debian packages for cross builds and qemu-user, shared by
# scripts/go-cross.sh and bindings/java/cross-aarch64.sh (sourced, not run).
#
# arm64_root ROOT PKG... : makes sure ROOT holds the arm64 build of each PKG (and nothing is
#   installed on this machine): the packages of this machine's own Debian release are fetched with
#   `apt-get download` under an apt configuration of their own (APT::Architecture arm64, lists in
#   ROOT.apt; the system's dpkg is not touched, no `dpkg --add-architecture`) and unpacked with
#   `dpkg -x` into ROOT, which is then qemu's -L root and a cross compiler's sysroot. Packages
#   already unpacked there (ROOT/.packages) are not fetched again, so callers asking for more
#   packages than an earlier one grow the same root. Dependencies are not resolved: name them.
arm64_root() {
  local root=$1
  shift
  mkdir -p "$root"
  root=$(cd "$root" && pwd)   # apt's configuration and the cd below need an absolute path
  local aptd=$root.apt want=() p
  touch "$root/.packages"
  for p in "$@"; do
    grep -qxF "$p" "$root/.packages" || want+=("$p")
  done
  [ ${#want[@]} -eq 0 ] && return 0
  mkdir -p "$aptd/lists/partial" "$aptd/cache/archives/partial" "$aptd/debs"
  [ -f "$aptd/status" ] || : >"$aptd/status"
  cat >"$aptd/apt.conf" <<EOF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
APT::Sandbox::User "root";
Dir::State::Lists "$aptd/lists";
Dir::State::status "$aptd/status";
Dir::Cache "$aptd/cache";
EOF
  # the lists once (a day at most): later calls only download
  if [ -z "$(find "$aptd/lists" -maxdepth 1 -name '*Packages*' -mtime -1 -print -quit)" ]; then
    APT_CONFIG=$aptd/apt.conf apt-get update -qq
  fi
  rm -f "$aptd"/debs/*.deb
  (cd "$aptd/debs" && APT_CONFIG=$aptd/apt.conf apt-get download -qq "${want[@]/%/:arm64}")
  local deb n=0
  for deb in "$aptd"/debs/*.deb; do
    [ -f "$deb" ] || break
    dpkg -x "$deb" "$root" || return 1
    n=$((n + 1))
  done
  if [ "$n" -ne ${#want[@]} ]; then
    echo "arm64_root: $n of ${#want[@]} packages fetched (${want[*]}): see apt-get's messages above" >&2
    return 1
  fi
  printf '%s\n' "${want[@]}" >>"$root/.packages"
}
