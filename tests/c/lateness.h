/*
 * How late this machine wakes a sleeping thread: a probe thread naps 2 ms at a time and records
 * how late each nap ended. A bound on elapsed time in a test is the operation's own bound plus the
 * worst lateness seen meanwhile (on a loaded machine, or under a sanitizer, every thread is woken
 * late - the operation's too), never a number hoped for.
 */
#ifndef BG_TEST_LATENESS_H
#define BG_TEST_LATENESS_H

/* Starts the probe (once per process; later calls do nothing). */
void bgt_lateness_start(void);
/* Stops it (the binary's end). */
void bgt_lateness_stop(void);
/* The worst lateness of a nap that ended over the last `ms` milliseconds (and 50 ms before), in ms. */
double bgt_lateness_ms(double ms);

#endif
