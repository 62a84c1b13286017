#!/bin/sh
# Builds the JNI library into the jar's resources (Maven's process-classes phase runs this; see
# pom.xml): build-native.sh JAVA_HOME BG_BUILD_DIR OUT_DIR JNI_HEADERS_DIR [CC]
#   BG_BUILD_DIR is a CMake build of the C library (its libbloomguard.a and CMakeCache.txt): the
#   OpenSSL it was configured with (static with -DBG_OPENSSL_STATIC=ON) is the one linked here.
#   JNI_HEADERS_DIR holds io_bloomguard_Native.h, written by javac -h from Native.java: the C
#   definitions are compiled against it, so a signature that drifts from the Java one is an error.
set -eu
java_home=$1 build=$2 out=$3 headers=$4 cc=${5:-cc}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../../.." && pwd)

if [ ! -f "$build/libbloomguard.a" ]; then
	echo "build-native.sh: no $build/libbloomguard.a: build the C library first (bindings/java/ci.sh does;" >&2
	echo "  or pass -Dbloomguard.build=DIR to Maven)" >&2
	exit 1
fi
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
ssl=$(cache OPENSSL_SSL_LIBRARY)
crypto=$(cache OPENSSL_CRYPTO_LIBRARY)
libs=""
if [ -n "$ssl" ] && [ -n "$crypto" ]; then
	libs="$ssl $crypto"
fi

mkdir -p "$out"
# shellcheck disable=SC2086  # $libs is a list of paths
"$cc" -shared -fPIC -O2 -std=c99 -D_POSIX_C_SOURCE=200809L -fvisibility=hidden \
	-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Werror \
	-I"$java_home/include" -I"$java_home/include/linux" -I"$headers" -I"$root/include" \
	-o "$out/libbloomguard_jni.so" "$here"/bgjni_*.c "$build/libbloomguard.a" $libs \
	-Wl,--version-script="$here/exports.map" -Wl,--no-undefined -Wl,-z,noexecstack -Wl,--gc-sections -s \
	-lpthread -lm -ldl
