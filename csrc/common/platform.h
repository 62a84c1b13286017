/*
 * Internal: the platforms the core builds on, and what each gives it - the one place that names
 * them. Linux (epoll, futex, getrandom); macOS and the BSDs (kqueue, arc4random_buf,
 * SO_NOSIGPIPE on macOS). Any other platform fails here, at build time, with one message that says
 * what is missing; the rest of the platform layer is common/park.c (thread parking),
 * common/random.c (random bytes), common/thread.c (thread ids, per-thread niceness),
 * common/cond.h (monotonic timed waits), common/sock.h (sends that raise no SIGPIPE) and
 * client/poller.h (the queue's readiness).
 */
#ifndef BG_INTERNAL_PLATFORM_H
#define BG_INTERNAL_PLATFORM_H

#if defined(__linux__)
#define BGI_HAVE_EPOLL 1
/* test builds only (-DBG_TEST_LIBKQUEUE=ON: the tests' internal library, never a shipped one): the
 * kqueue backend too, on libkqueue's userspace kqueue, selected with BG_QUEUE_POLLER=kqueue */
#if defined(BGI_TEST_LIBKQUEUE)
#define BGI_HAVE_KQUEUE 1
#endif
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__) || \
    defined(__DragonFly__)
#define BGI_HAVE_KQUEUE 1
#else
#error "bloomguard: unsupported platform (not Linux, macOS, FreeBSD, OpenBSD, NetBSD or DragonFly): the core needs epoll or kqueue for the queue, getrandom or arc4random_buf for random bytes, and MSG_NOSIGNAL or SO_NOSIGPIPE for sends; see common/platform.h"
#endif

#endif
