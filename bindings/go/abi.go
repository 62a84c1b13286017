package bloomguard

// #include <bloomguard.h>
import "C"

// Compile-time checks that the constants written out in Go (for readable docs) equal the
// header's: x[d] with a constant d other than 0 does not compile.
func _() {
	var x [1]struct{}
	_ = x[CodeOK-C.BG_OK]
	_ = x[CodeInvalid-C.BG_EINVAL]
	_ = x[CodeNoMemory-C.BG_ENOMEM]
	_ = x[CodeBadURL-C.BG_EBADURL]
	_ = x[CodeBadName-C.BG_EBADNAME]
	_ = x[CodeBadParams-C.BG_EBADPARAMS]
	_ = x[CodeNotSupported-C.BG_ENOTSUP]
	_ = x[CodeConn-C.BG_ECONN]
	_ = x[CodeTimeout-C.BG_ETIMEOUT]
	_ = x[CodeAuth-C.BG_EAUTH]
	_ = x[CodeServer-C.BG_ESERVER]
	_ = x[CodeProto-C.BG_EPROTO]
	_ = x[CodeNotInitialized-C.BG_ENOTINIT]
	_ = x[CodeConfigChanged-C.BG_ECONFIG]
	_ = x[CodeCorrupt-C.BG_ECORRUPT]
	_ = x[CodeWrongType-C.BG_EWRONGTYPE]
	_ = x[CodeLocked-C.BG_ELOCKED]
	_ = x[CodeRotationInProgress-C.BG_EROTATING]
	_ = x[CodeAborted-C.BG_EABORTED]
	_ = x[CodeClosed-C.BG_ECLOSED]
	_ = x[MaxSize-C.BG_MAX_SIZE]
	_ = x[MaxHashIterations-C.BG_MAX_HASH_ITERATIONS]
	_ = x[Swap-C.BG_ROTATE_SWAP]
	_ = x[Naive-C.BG_ROTATE_NAIVE]
	_ = x[Locked-C.BG_ROTATE_LOCKED]
	_ = x[PhaseBuilding-C.BG_PHASE_BUILDING]
	_ = x[PhaseUploading-C.BG_PHASE_UPLOADING]
	_ = x[PhaseCommitting-C.BG_PHASE_COMMITTING]
	_ = x[PhaseDone-C.BG_PHASE_DONE]
}
