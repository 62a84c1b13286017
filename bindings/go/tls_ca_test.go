package bloomguard

// The CAs a Go client trusts, against a TLS-only port of a redis-server of the test's own: the
// CA option works and another CA is refused (ErrTLS); with no CA option, SSL_CERT_FILE and
// SSL_CERT_DIR are the store (the C tests, test_tls_ca, lay out each distribution's store). The
// control: with neither, the machine's store does not hold the test CA, so the passes came from
// the option or the variable. Light enough for an emulated run (scripts/go-cross.sh).

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTLSTrustStore(t *testing.T) {
	_, url, certs := startTLSRedis(t)
	ctx := context.Background()
	t.Setenv("SSL_CERT_FILE", "") // unset for the library (an empty value is ignored), restored after
	t.Setenv("SSL_CERT_DIR", "")
	try := func(what string, opts ...Option) error {
		opts = append([]Option{WithConnectAtOpen(true), WithConnectTimeout(10 * time.Second)}, opts...)
		c, err := Open(url, opts...)
		if err != nil {
			return err
		}
		defer c.Close()
		f, err := c.Filter("go-tls-ca")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		if _, err := f.Init(ctx, 1000, 0.01); err != nil {
			t.Fatalf("%s: init over TLS: %v", what, err)
		}
		if _, err := f.Add(ctx, []byte("a")); err != nil {
			t.Fatalf("%s: add over TLS: %v", what, err)
		}
		if ok, err := f.Contains(ctx, []byte("a")); err != nil || !ok {
			t.Fatalf("%s: contains over TLS: %v %v", what, ok, err)
		}
		return nil
	}
	works := func(what string, opts ...Option) {
		t.Helper()
		if err := try(what, opts...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what, msg string, opts ...Option) {
		t.Helper()
		err := try(what, opts...)
		if !errors.Is(err, ErrTLS) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("%s: want ErrTLS with %q, got %v", what, msg, err)
		}
		t.Logf("%s: %v", what, err)
	}
	ca, other := filepath.Join(certs, "ca.crt"), filepath.Join(certs, "other-ca.crt")
	works("WithTLSCAFile(ca.crt)", WithTLSCAFile(ca))
	refused("WithTLSCAFile(other-ca.crt)", "certificate was refused", WithTLSCAFile(other))
	// the control: the machine's store (or none at all) does not verify the test server
	err := try("no CA option, no variable")
	if !errors.Is(err, ErrTLS) {
		t.Fatalf("the machine's store verified the test server (want ErrTLS): %v", err)
	}
	t.Logf("no CA option, no variable: %v", err)
	t.Setenv("SSL_CERT_FILE", ca)
	works("SSL_CERT_FILE=ca.crt")
	t.Setenv("SSL_CERT_FILE", other)
	refused("SSL_CERT_FILE=other-ca.crt", "certificate was refused")
	works("SSL_CERT_FILE=other-ca.crt, WithTLSCAFile(ca.crt)", WithTLSCAFile(ca))
	t.Setenv("SSL_CERT_FILE", filepath.Join(certs, "missing.crt"))
	refused("SSL_CERT_FILE=missing.crt", "cannot use SSL_CERT_FILE")
	t.Setenv("SSL_CERT_FILE", "")
	t.Setenv("SSL_CERT_DIR", filepath.Join(certs, "ca-dir"))
	works("SSL_CERT_DIR=ca-dir")
}
