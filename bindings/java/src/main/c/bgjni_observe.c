/*
 * bgjni_observe.c - io.bloomguard.Native: the client's observer (observe.h) without a JVM upcall.
 *
 * Events happen on any thread, library threads included (the lock renewal thread, a rotation's
 * lease keeper, the cluster map refresher), sometimes while the library holds a lock, and the
 * observer must return at once and call nothing of bloomguard. So it calls no Java: it copies the
 * event into a ring under a mutex and wakes an eventfd; a Java daemon thread (Client.setObserver)
 * waits on it and drains the ring into Java objects. No library thread is ever attached to the
 * JVM. A full ring drops the newest events and counts them.
 *
 * Lifetime: observe.h keeps the userdata in use "while the client lives", which is until its last
 * filter is closed, possibly after Client.close; so an observer's ring is detached at close and
 * never freed (one per client that set an observer).
 */
#include "bgjni.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define RING 256
#define NAME_MAX_BYTES 256
#define MSG_MAX_BYTES 512

typedef struct {
	int kind;
	int64_t v[BG_EVENT_NVALUES];
	char name[NAME_MAX_BYTES];
	char msg[MSG_MAX_BYTES];
} bgj_event;

typedef struct {
	pthread_mutex_t mu;
	bgj_event ring[RING];
	size_t head, count; /* guarded by mu */
	int64_t dropped;    /* guarded by mu: since the last drain */
	int efd;
} bgj_observer;

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src ? strlen(src) : 0;

	if (n >= cap)
		n = cap - 1; /* cut: a name or message that long is cut for the event only */
	if (n > 0)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

static void on_event(void *userdata, int kind, const char *name, const int64_t *values, size_t nvalues,
                     const char *message)
{
	bgj_observer *o = userdata;
	uint64_t one = 1;
	size_t i;

	pthread_mutex_lock(&o->mu);
	if (o->count == RING) {
		o->dropped++;
	} else {
		bgj_event *e = &o->ring[(o->head + o->count) % RING];
		e->kind = kind;
		for (i = 0; i < BG_EVENT_NVALUES; i++)
			e->v[i] = (values != NULL && i < nvalues) ? values[i] : 0;
		copy_str(e->name, sizeof(e->name), name);
		copy_str(e->msg, sizeof(e->msg), message);
		o->count++;
	}
	pthread_mutex_unlock(&o->mu);
	/* nonblocking: when the counter is saturated the reader is awake anyway */
	if (write(o->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_observerNew(JNIEnv *env, jclass cls)
{
	bgj_observer *o = calloc(1, sizeof(*o));
	(void)cls;

	if (o == NULL) {
		bgj_throw_oom(env, "bloomguard: an observer");
		return 0;
	}
	if ((o->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		free(o);
		bgj_throw(env, BG_ENOMEM, "cannot make the observer's eventfd");
		return 0;
	}
	pthread_mutex_init(&o->mu, NULL);
	return BGJ_HANDLE(o);
}

/* fn on (obs != 0) or off (obs == 0) for the client. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_observerSet(JNIEnv *env, jclass cls, jlong client, jlong obs)
{
	int st;
	(void)cls;

	st = bg_client_set_observer(BGJ_PTR(bg_client, client), obs ? on_event : NULL, BGJ_PTR(void, obs));
	if (st != BG_OK)
		bgj_throw(env, st, "cannot set the client's observer");
}

/* Waits up to timeout_ms for events; 1 when some may be waiting, 0 otherwise. */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_observerWait(JNIEnv *env, jclass cls, jlong obs, jint timeout_ms)
{
	bgj_observer *o = BGJ_PTR(bgj_observer, obs);
	struct pollfd p;
	uint64_t n;
	(void)env;
	(void)cls;

	p.fd = o->efd;
	p.events = POLLIN;
	p.revents = 0;
	if (poll(&p, 1, timeout_ms) <= 0)
		return 0;
	if (read(o->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return 0;
	return 1;
}

static jbyteArray utf8(JNIEnv *env, const char *s)
{
	size_t len = strlen(s);
	jbyteArray b = (*env)->NewByteArray(env, (jsize)len);

	if (b != NULL && len > 0)
		(*env)->SetByteArrayRegion(env, b, 0, (jsize)len, (const jbyte *)s);
	return b;
}

/*
 * Moves up to kinds.length events out of the ring: kinds[i], names[i] and messages[i] (UTF-8
 * byte[]), values[i * 8 ..]; dropped[0] = the events dropped since the last drain. Returns how many.
 */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_observerDrain(JNIEnv *env, jclass cls, jlong obs, jintArray kinds,
                                                               jobjectArray names, jlongArray values,
                                                               jobjectArray messages, jlongArray dropped)
{
	bgj_observer *o = BGJ_PTR(bgj_observer, obs);
	size_t max = (size_t)(*env)->GetArrayLength(env, kinds), n, i;
	bgj_event *copy;
	jlong d;
	(void)cls;

	if (max > RING)
		max = RING;
	if ((copy = malloc(max * sizeof(*copy) + 1)) == NULL) {
		bgj_throw_oom(env, "bloomguard: draining events");
		return -1;
	}
	pthread_mutex_lock(&o->mu);
	n = o->count < max ? o->count : max;
	for (i = 0; i < n; i++)
		copy[i] = o->ring[(o->head + i) % RING];
	o->head = (o->head + n) % RING;
	o->count -= n;
	d = o->dropped;
	o->dropped = 0;
	pthread_mutex_unlock(&o->mu);

	(*env)->SetLongArrayRegion(env, dropped, 0, 1, &d);
	for (i = 0; i < n; i++) {
		jint k = copy[i].kind;
		jbyteArray nm, ms;
		(*env)->SetIntArrayRegion(env, kinds, (jsize)i, 1, &k);
		(*env)->SetLongArrayRegion(env, values, (jsize)(i * BG_EVENT_NVALUES), BG_EVENT_NVALUES,
		                           (const jlong *)copy[i].v);
		if ((nm = utf8(env, copy[i].name)) == NULL || (ms = utf8(env, copy[i].msg)) == NULL)
			break; /* OutOfMemoryError pending */
		(*env)->SetObjectArrayElement(env, names, (jsize)i, nm);
		(*env)->SetObjectArrayElement(env, messages, (jsize)i, ms);
		(*env)->DeleteLocalRef(env, nm);
		(*env)->DeleteLocalRef(env, ms);
	}
	free(copy);
	return (*env)->ExceptionCheck(env) ? -1 : (jint)n;
}

/*
 * Every non-empty latency histogram of the filter handle: for the i-th, ops[i] and outcomes[i]
 * (observe.h's names), counts[i] (BG_HIST_BUCKETS counts), sums[i] (seconds); bounds gets the
 * buckets' upper bounds (seconds, the same for all). Returns how many (at most ops.length).
 */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_filterHistograms(JNIEnv *env, jclass cls, jlong fh,
                                                                  jobjectArray ops, jobjectArray outcomes,
                                                                  jobjectArray counts, jdoubleArray sums,
                                                                  jdoubleArray bounds)
{
	const bg_filter *f = BGJ_PTR(bg_filter, fh);
	double b[BG_HIST_BUCKETS - 1], sum;
	uint64_t c[BG_HIST_BUCKETS], n;
	jsize cap = (*env)->GetArrayLength(env, ops), k = 0;
	int op, outcome, st;
	(void)cls;

	for (op = 1; op <= BG_OP_MAX && k < cap; op++) {
		for (outcome = 0; outcome <= BG_OUTCOME_MAX && k < cap; outcome++) {
			jstring so, su;
			jlongArray lc;
			if ((st = bg_filter_histogram(f, op, outcome, b, c, BG_HIST_BUCKETS, &n, &sum)) != BG_OK) {
				bgj_throw(env, st, "bg_filter_histogram refused a histogram it lists");
				return -1;
			}
			if (n == 0)
				continue;
			if ((so = (*env)->NewStringUTF(env, bg_op_name(op))) == NULL ||            /* ASCII */
			    (su = (*env)->NewStringUTF(env, bg_outcome_name(outcome))) == NULL ||
			    (lc = (*env)->NewLongArray(env, BG_HIST_BUCKETS)) == NULL)
				return -1;
			(*env)->SetLongArrayRegion(env, lc, 0, BG_HIST_BUCKETS, (const jlong *)c);
			(*env)->SetObjectArrayElement(env, ops, k, so);
			(*env)->SetObjectArrayElement(env, outcomes, k, su);
			(*env)->SetObjectArrayElement(env, counts, k, lc);
			(*env)->SetDoubleArrayRegion(env, sums, k, 1, &sum);
			(*env)->DeleteLocalRef(env, so);
			(*env)->DeleteLocalRef(env, su);
			(*env)->DeleteLocalRef(env, lc);
			k++;
		}
	}
	if (bg_filter_histogram(f, BG_OP_CONTAINS, BG_OUTCOME_OK, b, NULL, BG_HIST_BUCKETS, NULL, NULL) == BG_OK)
		(*env)->SetDoubleArrayRegion(env, bounds, 0, BG_HIST_BUCKETS - 1, b);
	return k;
}
