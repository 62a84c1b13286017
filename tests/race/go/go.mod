module github.com/bloomguard/bloomguard/tests/race/go

go 1.24

require github.com/bloomguard/bloomguard/bindings/go v0.0.0

replace github.com/bloomguard/bloomguard/bindings/go => ../../../bindings/go
