package bloomguard

// #include <bloomguard.h>
import "C"

import (
	"context"
	"strconv"
)

// Code is a status code of the C library (bloomguard/errors.h). The values are part of the ABI:
// they never change and are never reused.
type Code int

// The status codes, one per BG_E* macro (abi.go checks at compile time that they equal the header's).
const (
	CodeOK                 Code = 0   // BG_OK
	CodeInvalid            Code = -1  // BG_EINVAL
	CodeNoMemory           Code = -2  // BG_ENOMEM
	CodeBadURL             Code = -3  // BG_EBADURL
	CodeBadName            Code = -4  // BG_EBADNAME
	CodeBadParams          Code = -5  // BG_EBADPARAMS
	CodeNotSupported       Code = -6  // BG_ENOTSUP
	CodeConn               Code = -7  // BG_ECONN
	CodeTimeout            Code = -8  // BG_ETIMEOUT
	CodeAuth               Code = -9  // BG_EAUTH
	CodeServer             Code = -10 // BG_ESERVER
	CodeProto              Code = -11 // BG_EPROTO
	CodeNotInitialized     Code = -12 // BG_ENOTINIT
	CodeConfigChanged      Code = -13 // BG_ECONFIG
	CodeCorrupt            Code = -14 // BG_ECORRUPT
	CodeWrongType          Code = -15 // BG_EWRONGTYPE
	CodeLocked             Code = -16 // BG_ELOCKED
	CodeRotationInProgress Code = -17 // BG_EROTATING
	CodeAborted            Code = -18 // BG_EABORTED
	CodeClosed             Code = -19 // BG_ECLOSED
	CodeCanceled           Code = -20 // BG_ECANCELED
	CodeTLS                Code = -21 // BG_ETLS
	CodeFull               Code = -22 // BG_EFULL
)

// String is the C macro name of the code ("BG_ETIMEOUT", bg_status_name), or "BG_STATUS(n)" for
// a code the library does not know.
func (c Code) String() string {
	if s := C.bg_status_name(C.int(c)); s != nil {
		return C.GoString(s)
	}
	return "BG_STATUS(" + strconv.Itoa(int(c)) + ")"
}

// Description is the library's static text for the code (bg_strerror).
func (c Code) Description() string {
	return C.GoString(C.bg_strerror(C.int(c)))
}

// Error is a failure reported by the C library, or detected by the binding before calling it.
//
// Compare with errors.Is against the sentinels (ErrTimeout, ErrNotInitialized, ...): an *Error
// matches the sentinel of its Code. Use errors.As to get the Code and the exact Message.
type Error struct {
	// Code is the status the C function returned.
	Code Code
	// Message is the C library's message for this very call (bg_call_errmsg), or the binding's
	// own when it rejected the call before C; empty for the sentinels.
	Message string

	cause error // context.DeadlineExceeded when the context's deadline was the timeout; ctx.Err() when ctx ended Rotate's wait
}

// Error returns "bloomguard: " and the message (or the code's description when there is none).
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Code.Description()
	}
	return "bloomguard: " + msg
}

// Is reports whether target is an *Error with the same Code: errors.Is(err, ErrTimeout).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Unwrap returns context.DeadlineExceeded when the call timed out because of its context's
// deadline, so errors.Is(err, context.DeadlineExceeded) holds as well as errors.Is(err, ErrTimeout);
// and ctx.Err() when the context ended Rotate's wait for another rotation (WithWait), so that
// error is both ErrRotationInProgress and context.Canceled or context.DeadlineExceeded.
func (e *Error) Unwrap() error { return e.cause }

// The sentinels, one per status code: errors.Is(err, ErrNotInitialized).
var (
	ErrInvalid            = sentinel(CodeInvalid)
	ErrNoMemory           = sentinel(CodeNoMemory)
	ErrBadURL             = sentinel(CodeBadURL)
	ErrBadName            = sentinel(CodeBadName)
	ErrBadParams          = sentinel(CodeBadParams)
	ErrNotSupported       = sentinel(CodeNotSupported)
	ErrConn               = sentinel(CodeConn)
	ErrTimeout            = sentinel(CodeTimeout)
	ErrAuth               = sentinel(CodeAuth)
	ErrServer             = sentinel(CodeServer)
	ErrProto              = sentinel(CodeProto)
	ErrNotInitialized     = sentinel(CodeNotInitialized)
	ErrConfigChanged      = sentinel(CodeConfigChanged)
	ErrCorrupt            = sentinel(CodeCorrupt)
	ErrWrongType          = sentinel(CodeWrongType)
	ErrLocked             = sentinel(CodeLocked)
	ErrRotationInProgress = sentinel(CodeRotationInProgress)
	ErrAborted            = sentinel(CodeAborted)
	ErrClosed             = sentinel(CodeClosed)
	// ErrCanceled: a wait inside the library was cancelled - by the end of the call's context
	// (the error then also unwraps to context.Canceled), or by Lock.Close.
	ErrCanceled = sentinel(CodeCanceled)
	// ErrTLS: the TLS handshake failed, or a certificate or key file cannot be used (WithTLS*).
	ErrTLS = sentinel(CodeTLS)
	// ErrFull: a native NONSCALING filter is full; the items from the first refused one on were not added.
	ErrFull = sentinel(CodeFull)
)

func sentinel(c Code) error { return &Error{Code: c} }

// newError builds the error of a failed status. msg may be empty (then Error() uses the code's
// description).
func newError(st C.int, msg string) error {
	return &Error{Code: Code(st), Message: inGoWords(msg)}
}

// errorf builds an error detected by the binding itself.
func errorf(c Code, msg string) error { return &Error{Code: c, Message: msg} }

// withDeadline marks the failure of a call whose timeout came from ctx's deadline: a timeout,
// or a connection failure once the deadline has passed, wraps context.DeadlineExceeded.
func withDeadline(ctx context.Context, err error) error {
	if e, ok := err.(*Error); ok && e.cause == nil {
		if e.Code == CodeTimeout || (e.Code == CodeConn && ctx.Err() == context.DeadlineExceeded) {
			e.cause = context.DeadlineExceeded
		}
	}
	return err
}
