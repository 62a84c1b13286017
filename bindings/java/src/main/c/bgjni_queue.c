/*
 * bgjni_queue.c - io.bloomguard.Native: the submission queue behind the async calls.
 *
 * Threading (queue.h: one thread drives a queue at a time): the Java side (AsyncQueue.java) holds
 * one lock around every submit and poll; its poller thread waits for the fd with queueWait outside
 * that lock. Completions are copied out into Java arrays here, and the futures completed by Java
 * after the lock is released, so a dependent stage that blocks never stalls the submits.
 */
#include "bgjni.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

/* Operation codes: AsyncQueue.java's OP_* constants. */
enum {
	OP_CONTAINS = 1,
	OP_CONTAINS_MANY = 2,
	OP_ADD = 3,
	OP_ADD_MANY = 4,
	OP_COUNT = 5,
	OP_INFO = 6,
	OP_INIT = 7,
	OP_DELETE = 8,
	OP_EXPIRE = 9,
	OP_PERSIST = 10
};

#define POLL_MAX 256

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_queueOpen(JNIEnv *env, jclass cls, jlong client)
{
	bg_queue *q = NULL;
	int st;
	(void)cls;

	if ((st = bg_queue_open_ex(&q, bgj_call(), BGJ_PTR(bg_client, client))) != BG_OK)
		bgj_throw_call(env, st);
	return BGJ_HANDLE(q);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_queueClose(JNIEnv *env, jclass cls, jlong q)
{
	(void)env;
	(void)cls;
	bg_queue_close(BGJ_PTR(bg_queue, q));
}

JNIEXPORT jint JNICALL Java_io_bloomguard_Native_queueFd(JNIEnv *env, jclass cls, jlong q)
{
	(void)env;
	(void)cls;
	return bg_queue_fd(BGJ_PTR(bg_queue, q));
}

/* 1 when fd is readable, 0 after timeout_ms (or a signal), -1 when it cannot be watched. */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_queueWait(JNIEnv *env, jclass cls, jint fd, jint timeout_ms)
{
	struct pollfd p;
	int n;
	(void)env;
	(void)cls;

	p.fd = fd;
	p.events = POLLIN;
	p.revents = 0;
	n = poll(&p, 1, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -1;
	if (n > 0 && (p.revents & POLLNVAL))
		return -1;
	return n > 0 ? 1 : 0;
}

/* Async-signal-safe in C; Java calls it under the queue's lock only so that q is not closed meanwhile. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_queueCancel(JNIEnv *env, jclass cls, jlong q, jlong tag)
{
	(void)env;
	(void)cls;
	bg_queue_cancel(BGJ_PTR(bg_queue, q), (uint64_t)tag);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_queueSubmit(JNIEnv *env, jclass cls, jlong qh, jlong fh, jint op,
                                                             jlong tag, jbyteArray item, jobjectArray items,
                                                             jlong a, jdouble b)
{
	bg_queue *q = BGJ_PTR(bg_queue, qh);
	bg_filter *f = BGJ_PTR(bg_filter, fh);
	uint64_t t = (uint64_t)tag;
	bgj_item it;
	bgj_items its;
	int st, have_item = 0, have_items = 0;
	(void)cls;

	if (item != NULL) {
		if (bgj_item_get(env, item, &it) != 0)
			return;
		have_item = 1;
	}
	if (items != NULL) {
		if (bgj_items_get(env, items, &its) != 0)
			goto cleanup;
		have_items = 1;
	}
	switch (op) {
	case OP_CONTAINS:
		st = have_item ? bg_filter_contains_submit(f, q, t, it.data, it.len) : BG_EINVAL;
		break;
	case OP_CONTAINS_MANY:
		st = have_items ? bg_filter_contains_many_submit(f, q, t, its.items, its.lens, its.n) : BG_EINVAL;
		break;
	case OP_ADD:
		st = have_item ? bg_filter_add_submit(f, q, t, it.data, it.len) : BG_EINVAL;
		break;
	case OP_ADD_MANY:
		st = have_items ? bg_filter_add_many_submit(f, q, t, its.items, its.lens, its.n) : BG_EINVAL;
		break;
	case OP_COUNT:
		st = bg_filter_count_submit(f, q, t);
		break;
	case OP_INFO:
		st = bg_filter_info_submit(f, q, t);
		break;
	case OP_INIT:
		st = bg_filter_init_submit(f, q, t, a, b);
		break;
	case OP_DELETE:
		st = bg_filter_delete_submit(f, q, t);
		break;
	case OP_EXPIRE:
		st = bg_filter_expire_submit(f, q, t, a);
		break;
	case OP_PERSIST:
		st = bg_filter_persist_submit(f, q, t);
		break;
	default:
		bgj_throw_illegal(env, "bloomguard: unknown queue operation (a bug of the Java binding)");
		goto cleanup;
	}
	/* without a bg_call the refusal's message is the queue's; the Java lock makes it ours */
	if (st != BG_OK)
		bgj_throw(env, st, bg_queue_errmsg(q));

cleanup:
	if (have_item)
		bgj_item_free(&it);
	if (have_items)
		bgj_items_free(&its);
}

static jobject completion_extra(JNIEnv *env, const bg_completion *c, int status)
{
	const uint8_t *present;
	size_t n = 0;
	uint64_t size;
	uint32_t k;
	int64_t ins;
	double p;

	if (status != BG_OK) {
		const char *msg = bg_completion_errmsg(c);
		size_t len = msg ? strlen(msg) : 0;
		jbyteArray m = (*env)->NewByteArray(env, (jsize)len);
		if (m != NULL && len > 0)
			(*env)->SetByteArrayRegion(env, m, 0, (jsize)len, (const jbyte *)msg);
		return m;
	}
	if ((present = bg_completion_present(c, &n)) != NULL) {
		jbooleanArray out = (*env)->NewBooleanArray(env, (jsize)n);
		if (out != NULL && n > 0)
			(*env)->SetBooleanArrayRegion(env, out, 0, (jsize)n, (const jboolean *)present);
		return out;
	}
	if (bg_completion_info(c, &size, &k, &ins, &p) == BG_OK) {
		jlong v[4];
		jlongArray out = (*env)->NewLongArray(env, 4);
		v[0] = (jlong)size;
		v[1] = (jlong)k;
		v[2] = ins;
		memcpy(&v[3], &p, sizeof(p));
		if (out != NULL)
			(*env)->SetLongArrayRegion(env, out, 0, 4, v);
		return out;
	}
	return NULL;
}

/*
 * Runs the queue forward without waiting and copies up to min(max, 256) completions out: tags,
 * statuses, values, and extras[i] = the message (byte[], UTF-8) of a failure, the answers
 * (boolean[]) of a contains, info's long[4], else null. Returns how many, or -1 with an exception.
 */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_queuePoll(JNIEnv *env, jclass cls, jlong qh, jlongArray tags,
                                                           jintArray statuses, jlongArray values, jobjectArray extras)
{
	bg_completion *cs[POLL_MAX];
	uint64_t t[POLL_MAX];
	int32_t s[POLL_MAX];
	int64_t v[POLL_MAX];
	size_t n = 0, i, max = (size_t)(*env)->GetArrayLength(env, tags);
	int st;
	(void)cls;

	if (max > POLL_MAX)
		max = POLL_MAX;
	if ((st = bg_queue_poll(BGJ_PTR(bg_queue, qh), 0, cs, max, &n)) != BG_OK) {
		bgj_throw(env, st, "bg_queue_poll refused its arguments (a bug of the Java binding)");
		return -1;
	}
	if (n == 0)
		return 0;
	bg_completions_read(cs, n, t, s, NULL, v);
	(*env)->SetLongArrayRegion(env, tags, 0, (jsize)n, (const jlong *)t);
	(*env)->SetIntArrayRegion(env, statuses, 0, (jsize)n, (const jint *)s);
	(*env)->SetLongArrayRegion(env, values, 0, (jsize)n, (const jlong *)v);
	for (i = 0; i < n; i++) {
		jobject e = completion_extra(env, cs[i], s[i]);
		if ((*env)->ExceptionCheck(env))
			return -1;
		(*env)->SetObjectArrayElement(env, extras, (jsize)i, e);
		if (e != NULL)
			(*env)->DeleteLocalRef(env, e);
	}
	return (jint)n;
}
