//go:build !bloomguard_static

package bloomguard

const staticBuild = false
