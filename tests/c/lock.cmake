# The distributed lock (bg_lock_*): exclusion between threads and processes, reentrancy, waiting,
# fencing, lease renewal and its negative control, SIGKILLed holders, readers/writers, the RLock
# wire layout and Redisson 3.45.1's own lock scripts against it.
bg_add_test(test_lock SOURCES test_lock.c LABELS "redis;lock")
target_link_libraries(test_lock PRIVATE PkgConfig::HIREDIS)
# bg_call_cancel in the middle of each kind of wait (lock, rotation, write lock, policy backoff),
# from a thread and from a signal handler, each with its uncancelled control.
bg_add_test(test_cancel SOURCES test_cancel.c LABELS "redis;lock;cancel")
# Lock owners (bg_lock_owner): two owners in one thread, one owner across threads, reentrancy per
# (handle, owner), the per-thread default owner, many holds renewed by one thread (and its
# negative controls), freeing an owner that holds, fencing, overlapping calls, cancel, lost holds.
bg_add_test(test_lock_owner SOURCES test_lock_owner.c LABELS "redis;lock")
