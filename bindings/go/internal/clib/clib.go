// Package clib compiles the bloomguard C library, hiredis and the portable C HighwayHash into the
// Go program that imports github.com/bloomguard/bloomguard/bindings/go: every .c file of this
// directory is cgo's to compile, so a plain `go build` needs only a C compiler (and OpenSSL's
// headers, for TLS) - no installed library, pkg-config, CGO_* variables or LD_LIBRARY_PATH.
//
// The .c and .h files are generated from the repository's csrc/, include/ and third_party/ by
// scripts/go-amalgamate.py (run it after changing those; CI fails while they differ). They live in
// one directory because cgo compiles only a package's own files and `go mod vendor` copies only
// the directories of imported packages: so a module zip or a vendored copy builds as well.
//
// Build tags:
//
//	bloomguard_static  link everything statically (glibc and OpenSSL too: libssl.a, libcrypto.a);
//	                   the linker warns that getaddrinfo and dlopen then need the same glibc at run
//	                   time as at build time
//	bloomguard_notls   no TLS (hiredis's ssl.c left out), for machines without OpenSSL's headers
package clib

// #cgo CFLAGS: -D_GNU_SOURCE -DBG_BUILDING_LIBRARY
// #cgo !bloomguard_notls CFLAGS: -DBGI_HIREDIS_SSL=1
// #cgo !bloomguard_notls LDFLAGS: -lssl -lcrypto
// #cgo bloomguard_static LDFLAGS: -static -ldl
// #cgo LDFLAGS: -lpthread -lm
import "C"
