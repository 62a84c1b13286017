/*
 * Internal: writes that never raise SIGPIPE, without touching the process's signal dispositions
 * (they are the host's). Linux and the BSDs: MSG_NOSIGNAL on each send; macOS has no such flag, so
 * each socket the library makes gets SO_NOSIGPIPE (bgi_sock_nosigpipe, a no-op where the flag does
 * the work). The queue's wake fd (client/poller.h) is an eventfd on Linux and a socket elsewhere:
 * bgi_wake_fd_write writes to either.
 */
#ifndef BG_INTERNAL_SOCK_H
#define BG_INTERNAL_SOCK_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "common/platform.h"

#if defined(__APPLE__) && defined(SO_NOSIGPIPE)
/* newer SDKs define MSG_NOSIGNAL too, but the kernels of the macOS versions the build targets (11
 * on) are not known to honour it: SO_NOSIGPIPE, which every macOS has */
#define BGI_MSG_NOSIGNAL 0
#elif defined(MSG_NOSIGNAL)
#define BGI_MSG_NOSIGNAL MSG_NOSIGNAL
#elif defined(SO_NOSIGPIPE)
#define BGI_MSG_NOSIGNAL 0   /* SO_NOSIGPIPE on the socket (bgi_sock_nosigpipe) */
#else
#error "bloomguard: this platform has neither MSG_NOSIGNAL nor SO_NOSIGPIPE: a write to a closed connection would raise SIGPIPE"
#endif

/* Before the first send on fd: SO_NOSIGPIPE where the platform has it (macOS needs it, the BSDs
 * accept it), nothing on Linux. */
static inline void bgi_sock_nosigpipe(int fd) {
#if defined(SO_NOSIGPIPE)
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#else
  (void)fd;
#endif
}

/* Writes a count of 1 (8 bytes) to a wake fd: an eventfd (Linux) or a socket made by
 * bgi_poller_wake_channel, whose reader may have closed its end. Async-signal-safe. */
static inline void bgi_wake_fd_write(int fd) {
  uint64_t one = 1;
#if defined(__linux__)
  ssize_t ignored = write(fd, &one, sizeof one);
#else
  ssize_t ignored = send(fd, &one, sizeof one, BGI_MSG_NOSIGNAL);
#endif
  (void)ignored;
}

#endif
