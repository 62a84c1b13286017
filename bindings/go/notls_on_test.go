//go:build bloomguard_notls

package bloomguard

// notlsBuild: built with -tags bloomguard_notls (hiredis's TLS part left out).
const notlsBuild = true
