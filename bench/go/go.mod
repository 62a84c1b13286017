module github.com/bloomguard/bloomguard/bench/go

go 1.26.0

require (
	github.com/bloomguard/bloomguard/bindings/go v0.0.0
	github.com/redis/rueidis v1.0.80
)

require golang.org/x/sys v0.50.0 // indirect

replace github.com/bloomguard/bloomguard/bindings/go => ../../bindings/go
