#include "bloomguard/errors.h"

BG_API const char *bg_strerror(int status) {
  switch (status) {
    case BG_OK: return "success";
    case BG_EINVAL: return "invalid argument";
    case BG_ENOMEM: return "out of memory";
    case BG_EBADURL: return "malformed or unsupported server URL";
    case BG_EBADNAME: return "unusable filter name";
    case BG_EBADPARAMS: return "invalid expected insertions or false probability";
    case BG_ENOTSUP: return "unknown option or unsupported feature";
    case BG_ECONN: return "connection failed";
    case BG_ETIMEOUT: return "timed out";
    case BG_EAUTH: return "authentication refused";
    case BG_ESERVER: return "server error";
    case BG_EPROTO: return "unexpected reply from server";
    case BG_ENOTINIT: return "Bloom filter is not initialized";
    case BG_ECONFIG: return "Bloom filter config kept changing";
    case BG_ECORRUPT: return "Bloom filter config is corrupt";
    case BG_EWRONGTYPE: return "key holds the wrong Redis type";
    case BG_ELOCKED: return "locked: the wait for the lock was exceeded";
    case BG_EROTATING: return "rotation in progress";
    case BG_EABORTED: return "aborted by callback";
    case BG_ECLOSED: return "handle closed";
    case BG_ECANCELED: return "cancelled";
    case BG_ETLS: return "TLS failure";
    default: return "unknown status";
  }
}
