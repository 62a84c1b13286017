package bloomguard

import "regexp"

// What a Go user reads in an error names Go's things: the library names an option by its C macro
// ("give BG_OPT_TLS_CA_FILE"), the error by its option function ("give WithTLSCAFile").
// messages_test.go fails when an option function is missing here.
var goOptionNames = map[string]string{
	"BG_OPT_CLIENT_NAME":           "WithClientName",
	"BG_OPT_CLUSTER":               "WithCluster",
	"BG_OPT_COMMAND_TIMEOUT_MS":    "WithCommandTimeout",
	"BG_OPT_CONFIG_RETRIES":        "WithConfigRetries",
	"BG_OPT_CONNECT_AT_OPEN":       "WithConnectAtOpen",
	"BG_OPT_CONNECT_TIMEOUT_MS":    "WithConnectTimeout",
	"BG_OPT_DB":                    "WithDB",
	"BG_OPT_DEGRADED_EVENTS_PER_S": "WithDegradedEventsPerSecond",
	"BG_OPT_HISTOGRAMS":            "WithHistograms",
	"BG_OPT_LOCK_LEASE_MS":         "WithLockLease",
	"BG_OPT_LOCK_POLL_MAX_MS":      "WithLockPollMax",
	"BG_OPT_LOCK_RENEW":            "WithLockRenewal",
	"BG_OPT_LOCK_SUBSCRIBE":        "WithLockSubscribe",
	"BG_OPT_NATIVE_MAX_BYTES":      "WithNativeMaxBytes",
	"BG_OPT_PASSWORD":              "WithPassword",
	"BG_OPT_PIPELINE":              "WithPipeline",
	"BG_OPT_PIPELINE_CONNS":        "WithPipelineConns",
	"BG_OPT_PIPELINE_SPIN_US":      "WithPipelineSpin",
	"BG_OPT_POOL_SIZE":             "WithPoolSize",
	"BG_OPT_ROTATE_BATCH":          "WithBatch",
	"BG_OPT_ROTATE_CHUNK_BYTES":    "WithChunkBytes",
	"BG_OPT_ROTATE_LEASE_MS":       "WithLease",
	"BG_OPT_ROTATE_NICE":           "WithNice",
	"BG_OPT_ROTATE_PARTITIONS":     "WithPartitions",
	"BG_OPT_ROTATE_STAGING_TTL_MS": "WithStagingTTL",
	"BG_OPT_ROTATE_THREADS":        "WithThreads",
	"BG_OPT_ROTATE_WAIT_MS":        "WithWait",
	"BG_OPT_SENTINEL_PASSWORD":     "WithSentinelPassword",
	"BG_OPT_SENTINEL_USERNAME":     "WithSentinelUsername",
	"BG_OPT_TLS_CA_DIR":            "WithTLSCADir",
	"BG_OPT_TLS_CA_FILE":           "WithTLSCAFile",
	"BG_OPT_TLS_CERT_FILE":         "WithTLSCertFile",
	"BG_OPT_TLS_KEY_FILE":          "WithTLSKeyFile",
	"BG_OPT_TLS_SERVER_NAME":       "WithTLSServerName",
	"BG_OPT_TLS_VERIFY":            "WithTLSVerify",
	"BG_OPT_TRACKING":              "WithTracking",
	"BG_OPT_USERNAME":              "WithUsername",
	"BG_OPT_WAIT_REPLICAS":         "WithWaitReplicas",
	"BG_OPT_WAIT_TIMEOUT_MS":       "WithWaitTimeout",
	"BG_OPT_WRITE_LOCK_WAIT_MS":    "WithWriteLockWait",
}

var cOptionName = regexp.MustCompile(`\bBG_OPT_[A-Z0-9_]+\b`)

// inGoWords is the library's message as a Go user reads it.
func inGoWords(msg string) string {
	if !cOptionName.MatchString(msg) {
		return msg
	}
	return cOptionName.ReplaceAllStringFunc(msg, func(macro string) string {
		if name, ok := goOptionNames[macro]; ok {
			return name
		}
		return macro
	})
}
