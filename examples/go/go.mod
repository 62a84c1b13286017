module example.com/bloomguard-service

go 1.24

require github.com/bloomguard/bloomguard/bindings/go v0.0.0

// A checkout of this repository: the module is required as `go get` would, and compiled from
// ../../bindings/go (its C code included) by a plain `go build`.
replace github.com/bloomguard/bloomguard/bindings/go => ../../bindings/go
