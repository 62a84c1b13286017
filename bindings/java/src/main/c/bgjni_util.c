/*
 * bgjni_util.c - load-time lookups, exceptions, the per-thread bg_call and item copies.
 */
#include "bgjni.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static jclass g_exc_class;   /* io.bloomguard.BloomGuardException (global ref) */
static jmethodID g_exc_of;   /* static BloomGuardException of(int code, byte[] utf8Message) */
static pthread_key_t g_call_key;
static int g_call_key_ok;
static JavaVM *g_vm;
static jclass g_native_class;      /* io.bloomguard.Native (global ref) */
static jmethodID g_interrupted;    /* static boolean interrupted() */

static void call_free(void *p)
{
	bg_call_free(p);
}

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
	JNIEnv *env;
	jclass local;
	(void)reserved;

	if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK)
		return JNI_ERR;
	local = (*env)->FindClass(env, "io/bloomguard/BloomGuardException");
	if (local == NULL)
		return JNI_ERR;
	g_exc_class = (*env)->NewGlobalRef(env, local);
	(*env)->DeleteLocalRef(env, local);
	if (g_exc_class == NULL)
		return JNI_ERR;
	g_exc_of = (*env)->GetStaticMethodID(env, g_exc_class, "of", "(I[B)Lio/bloomguard/BloomGuardException;");
	if (g_exc_of == NULL)
		return JNI_ERR;
	if (bgj_policy_onload(vm, env) != 0)
		return JNI_ERR;
	g_vm = vm;
	if ((local = (*env)->FindClass(env, "io/bloomguard/Native")) == NULL)
		return JNI_ERR;
	g_native_class = (*env)->NewGlobalRef(env, local);
	(*env)->DeleteLocalRef(env, local);
	if (g_native_class == NULL ||
	    (g_interrupted = (*env)->GetStaticMethodID(env, g_native_class, "interrupted", "()Z")) == NULL)
		return JNI_ERR;
	g_call_key_ok = pthread_key_create(&g_call_key, call_free) == 0;
	return JNI_VERSION_1_8;
}

/*
 * The calls' interrupt callback (call.h): polled on the waiting thread between the slices of a
 * wait (a lock, another rotation, a pooled connection, a connect, a backoff): a Java thread that
 * was interrupted ends the wait with BG_ECANCELED, as Java's blocking I/O does. Never called
 * outside a wait, so a call that does not wait is not affected.
 */
static int interrupt_cb(void *userdata)
{
	JNIEnv *env;
	jboolean yes;
	(void)userdata;

	if ((*g_vm)->GetEnv(g_vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK || (*env)->ExceptionCheck(env))
		return 0;
	yes = (*env)->CallStaticBooleanMethod(env, g_native_class, g_interrupted);
	if ((*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return 0;
	}
	return yes ? 1 : 0;
}

bg_call *bgj_call(void)
{
	bg_call *c;

	if (!g_call_key_ok)
		return NULL;
	c = pthread_getspecific(g_call_key);
	if (c != NULL)
		return c;
	if (bg_call_new(&c) != BG_OK)
		return NULL;
	bg_call_set_interrupt(c, interrupt_cb, NULL);
	if (pthread_setspecific(g_call_key, c) != 0) {
		bg_call_free(c);
		return NULL;
	}
	return c;
}

void bgj_throw(JNIEnv *env, int status, const char *msg)
{
	jbyteArray bytes = NULL;
	jobject exc;
	size_t len = msg ? strlen(msg) : 0;

	if ((*env)->ExceptionCheck(env))
		return;
	bytes = (*env)->NewByteArray(env, (jsize)len);
	if (bytes == NULL)
		return; /* OutOfMemoryError pending */
	if (len > 0)
		(*env)->SetByteArrayRegion(env, bytes, 0, (jsize)len, (const jbyte *)msg);
	exc = (*env)->CallStaticObjectMethod(env, g_exc_class, g_exc_of, (jint)status, bytes);
	(*env)->DeleteLocalRef(env, bytes);
	if (exc != NULL && !(*env)->ExceptionCheck(env))
		(*env)->Throw(env, (jthrowable)exc);
}

void bgj_throw_call(JNIEnv *env, int status)
{
	bg_call *c = bgj_call();
	const char *msg = c ? bg_call_errmsg(c) : NULL;

	bgj_throw(env, status, (msg && *msg) ? msg : bg_strerror(status));
}

static void throw_named(JNIEnv *env, const char *cls, const char *msg)
{
	jclass k = (*env)->FindClass(env, cls);

	if (k != NULL)
		(*env)->ThrowNew(env, k, msg);
}

void bgj_throw_illegal(JNIEnv *env, const char *msg)
{
	throw_named(env, "java/lang/IllegalArgumentException", msg);
}

void bgj_throw_oom(JNIEnv *env, const char *what)
{
	throw_named(env, "java/lang/OutOfMemoryError", what);
}

int bgj_item_get(JNIEnv *env, jbyteArray a, bgj_item *it)
{
	jsize len = (*env)->GetArrayLength(env, a);

	it->len = (size_t)len;
	it->data = it->small;
	if (it->len > sizeof(it->small)) {
		it->data = malloc(it->len);
		if (it->data == NULL) {
			bgj_throw_oom(env, "bloomguard: copying an item");
			return -1;
		}
	}
	if (len > 0)
		(*env)->GetByteArrayRegion(env, a, 0, len, (jbyte *)it->data);
	return 0;
}

void bgj_item_free(bgj_item *it)
{
	if (it->data != it->small)
		free(it->data);
	it->data = it->small;
}

int bgj_items_get(JNIEnv *env, jobjectArray a, bgj_items *out)
{
	jsize n = (*env)->GetArrayLength(env, a), i;
	size_t total = 0, off = 0;
	int error = -1;

	memset(out, 0, sizeof(*out));
	out->n = (size_t)n;
	out->items = calloc(n ? (size_t)n : 1, sizeof(*out->items));
	out->lens = calloc(n ? (size_t)n : 1, sizeof(*out->lens));
	if (out->items == NULL || out->lens == NULL)
		goto oom;
	for (i = 0; i < n; i++) {
		jbyteArray e = (*env)->GetObjectArrayElement(env, a, i);
		if (e == NULL) {
			bgj_throw_illegal(env, "items: an element is null");
			goto cleanup;
		}
		out->lens[i] = (size_t)(*env)->GetArrayLength(env, e);
		total += out->lens[i];
		(*env)->DeleteLocalRef(env, e);
	}
	out->buf = malloc(total ? total : 1);
	if (out->buf == NULL)
		goto oom;
	for (i = 0; i < n; i++) {
		jbyteArray e = (*env)->GetObjectArrayElement(env, a, i);
		if (out->lens[i] > 0)
			(*env)->GetByteArrayRegion(env, e, 0, (jsize)out->lens[i], (jbyte *)out->buf + off);
		(*env)->DeleteLocalRef(env, e);
		out->items[i] = out->buf + off;
		off += out->lens[i];
	}
	return 0;

oom:
	bgj_throw_oom(env, "bloomguard: copying a batch of items");
cleanup:
	bgj_items_free(out);
	return error;
}

void bgj_items_free(bgj_items *it)
{
	free(it->buf);
	free((void *)it->items);
	free(it->lens);
	memset(it, 0, sizeof(*it));
}

char *bgj_cstr(JNIEnv *env, jbyteArray a)
{
	jsize len = (*env)->GetArrayLength(env, a);
	char *s = malloc((size_t)len + 1);

	if (s == NULL) {
		bgj_throw_oom(env, "bloomguard: copying a string");
		return NULL;
	}
	if (len > 0)
		(*env)->GetByteArrayRegion(env, a, 0, len, (jbyte *)s);
	s[len] = '\0';
	return s;
}
