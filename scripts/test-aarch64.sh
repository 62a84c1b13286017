#!/usr/bin/env bash
# The manylinux2014_aarch64 wheel on an arm64 Debian 12 under qemu-user: scripts/test-wheel-chroot.sh
# for aarch64-bookworm (its header says what runs).
#   bash scripts/test-aarch64.sh [WHEEL] [-- pytest args]  |  --prepare
exec bash "$(dirname "$0")/test-wheel-chroot.sh" aarch64-bookworm "$@"
