//go:build !race

package bloomguard

const raceEnabled = false
