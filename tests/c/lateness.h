/*
 * How late the machine wakes a sleeping thread: a probe thread naps 2 ms at a time and records
 * how late each nap ended. A test that bounds an operation's elapsed time by its deadline adds the
 * worst lateness seen meanwhile (on a loaded machine - sanitizers, CI neighbours - the thread that
 * sees the deadline pass is woken late too), so the bound is the library's, not the scheduler's.
 */
#ifndef BG_TEST_LATENESS_H
#define BG_TEST_LATENESS_H

/* Starts the probe (once per binary; bgt_lateness_stop ends it). */
void bgt_lateness_start(void);
void bgt_lateness_stop(void);
/* The latest a nap ended over the last `ms` (and 50 ms before them), in ms. */
double bgt_late_ms(double ms);

#endif
