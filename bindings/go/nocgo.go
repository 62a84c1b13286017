//go:build !cgo

package bloomguard

// Without cgo every other file of this package is left out, and the build stops here, on the name
// below, with a single message that says what to do.
var _ = bloomguard_is_a_binding_of_a_C_library_it_needs_cgo__build_with_CGO_ENABLED_1_and_a_C_compiler_such_as_gcc
