/*
 * Internal: the calling thread's id as the kernel knows it, and lowering one thread's priority -
 * both differ per platform (common/platform.h).
 */
#ifndef BG_INTERNAL_THREAD_H
#define BG_INTERNAL_THREAD_H

#include <stdint.h>

/* The kernel's id of the calling thread (Linux: gettid; macOS: pthread_threadid_np; FreeBSD:
 * pthread_getthreadid_np; OpenBSD: getthrid; NetBSD: _lwp_self), for messages and priorities. */
uint64_t bgi_thread_id(void);

/* Makes the calling thread nicer by nice (> 0) if the platform sets niceness per thread (Linux):
 * 1 if it did. Elsewhere niceness is the whole process's, and lowering it would slow the host's
 * serving threads too: nothing is done, 0. */
int bgi_thread_nice_self(int nice);

#endif
