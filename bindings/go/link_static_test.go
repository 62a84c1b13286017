//go:build bloomguard_static

package bloomguard

const linkedShared = false
