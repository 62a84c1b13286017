package bloomguard

import (
	"os"
	"strings"
	"testing"
)

// The test binary links the library the way the build tag says: the shared library is mapped
// into the process by default, and is not under the bloomguard_static tag.
func TestLinkMode(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	mapped := strings.Contains(string(maps), "/libbloomguard.so")
	if mapped != linkedShared {
		t.Fatalf("libbloomguard.so mapped: %v, built for a shared library: %v", mapped, linkedShared)
	}
	t.Logf("shared library mapped: %v", mapped)
}
