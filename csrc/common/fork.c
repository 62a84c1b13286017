/* Noticing fork() (design in fork.h). */
#include "common/fork.h"

#include <stdlib.h>
#include <string.h>

_Atomic uint64_t bgi_fork_generation;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t fork_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fault_no_detect;

static void in_child(void) {
  /* the only thread of the child runs this: nobody holds fork_mu here but a thread of the
   * parent's that is not in the child */
  pthread_mutex_init(&fork_mu, NULL);
  if (!atomic_load_explicit(&fault_no_detect, memory_order_relaxed))
    atomic_fetch_add_explicit(&bgi_fork_generation, 1, memory_order_relaxed);
}

static void register_handler(void) {
  /* the negative control of the bindings' fork tests, which cannot reach bgi_fork_fault_no_detect:
   * a test process started with this set (read once, here) notices no fork */
  const char *v = getenv("BG_TEST_FORK_UNDETECTED");
  if (v && v[0] == '1') atomic_store(&fault_no_detect, 1);
  pthread_atfork(NULL, NULL, in_child);
}

uint64_t bgi_fork_gen_note(void) {
  pthread_once(&once, register_handler);
  return atomic_load_explicit(&bgi_fork_generation, memory_order_relaxed);
}

void bgi_fork_lock(void) { pthread_mutex_lock(&fork_mu); }
void bgi_fork_unlock(void) { pthread_mutex_unlock(&fork_mu); }

void bgi_fork_remake_mutex(pthread_mutex_t *mu) {
  memset(mu, 0, sizeof *mu);
  pthread_mutex_init(mu, NULL);
}

void bgi_fork_fault_no_detect(int on) { atomic_store(&fault_no_detect, on); }
