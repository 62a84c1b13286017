//go:build race

package bloomguard

// raceEnabled: the tests run under the race detector (go test -race), several times slower.
const raceEnabled = true
