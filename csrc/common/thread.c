/* Thread ids and per-thread niceness (thread.h). */
#include "common/thread.h"

#include "common/platform.h"

#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/syscall.h>
#elif defined(__FreeBSD__) || defined(__DragonFly__)
#include <pthread_np.h>
#elif defined(__NetBSD__)
#include <lwp.h>
#endif

uint64_t bgi_thread_id(void) {
#if defined(__linux__)
  return (uint64_t)syscall(SYS_gettid);   /* glibc before 2.30 has no gettid() */
#elif defined(__APPLE__)
  uint64_t id = 0;
  pthread_threadid_np(NULL, &id);
  return id;
#elif defined(__FreeBSD__) || defined(__DragonFly__)
  return (uint64_t)pthread_getthreadid_np();
#elif defined(__OpenBSD__)
  return (uint64_t)getthrid();
#elif defined(__NetBSD__)
  return (uint64_t)_lwp_self();
#endif
}

int bgi_thread_nice_self(int nice) {
  if (nice <= 0) return 0;
#if defined(__linux__)
  /* on Linux the nice value is per thread: PRIO_PROCESS with a thread id sets that thread's */
  id_t tid = (id_t)bgi_thread_id();
  errno = 0;
  int cur = getpriority(PRIO_PROCESS, tid);
  if (errno != 0) return 0;
  return setpriority(PRIO_PROCESS, tid, cur + nice) == 0;
#else
  return 0;
#endif
}
