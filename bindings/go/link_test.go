package bloomguard

import (
	"os"
	"strings"
	"testing"
)

// The library is compiled into the test binary (internal/clib): no libbloomguard.so is ever
// loaded, and under the bloomguard_static tag no shared object at all (OpenSSL included).
func TestLinkMode(t *testing.T) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	var shared []string
	for _, line := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(line); len(f) == 6 && strings.Contains(f[5], ".so") {
			shared = append(shared, f[5])
		}
	}
	joined := strings.Join(shared, " ")
	if strings.Contains(joined, "libbloomguard") {
		t.Fatalf("a libbloomguard shared object is mapped: %s", joined)
	}
	if staticBuild && len(shared) > 0 {
		t.Fatalf("built with bloomguard_static, but shared objects are mapped: %s", joined)
	}
	if !staticBuild && !strings.Contains(joined, "libc.so") {
		t.Fatalf("a dynamic build maps no libc.so (the check reads nothing?): %s", joined)
	}
	t.Logf("shared objects mapped: %d", len(shared))
}
