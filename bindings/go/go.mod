module github.com/bloomguard/bloomguard/bindings/go

go 1.24
