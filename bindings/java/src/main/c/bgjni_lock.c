/*
 * bgjni_lock.c - io.bloomguard.Native: locks (lock.h). The calls without an owner use the calling
 * thread's default owner, so a hold belongs to the Java (platform) thread that took it, as a
 * Redisson RLock belongs to its thread.
 */
#include "bgjni.h"

#include <stdlib.h>
#include <string.h>

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_lockOpen(JNIEnv *env, jclass cls, jlong client, jbyteArray name)
{
	bg_lock *l = NULL;
	char *cname;
	int st;
	(void)cls;

	if ((cname = bgj_cstr(env, name)) == NULL)
		return 0;
	if ((st = bg_lock_open_ex(&l, bgj_call(), BGJ_PTR(bg_client, client), cname, NULL)) != BG_OK)
		bgj_throw_call(env, st);
	free(cname);
	return BGJ_HANDLE(l);
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_lockOpenFilter(JNIEnv *env, jclass cls, jlong filter)
{
	bg_lock *l = NULL;
	int st;
	(void)cls;

	if ((st = bg_lock_open_filter_ex(&l, bgj_call(), BGJ_PTR(bg_filter, filter), NULL)) != BG_OK)
		bgj_throw_call(env, st);
	return BGJ_HANDLE(l);
}

/* Releases every hold still held through the handle, then frees it. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_lockClose(JNIEnv *env, jclass cls, jlong l)
{
	(void)env;
	(void)cls;
	bg_lock_close(BGJ_PTR(bg_lock, l));
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_lockAcquire(JNIEnv *env, jclass cls, jlong l, jint mode,
                                                              jlong wait_ms)
{
	uint64_t token = 0;
	int st;
	(void)cls;

	if ((st = bg_lock_acquire_ex(BGJ_PTR(bg_lock, l), bgj_call(), mode, wait_ms, &token)) != BG_OK)
		bgj_throw_call(env, st);
	return (jlong)token;
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_lockRelease(JNIEnv *env, jclass cls, jlong l)
{
	int st;
	(void)cls;

	if ((st = bg_lock_release_ex(BGJ_PTR(bg_lock, l), bgj_call())) != BG_OK)
		bgj_throw_call(env, st);
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_lockRetire(JNIEnv *env, jclass cls, jlong l)
{
	int deleted = 0, st;
	(void)cls;

	if ((st = bg_lock_retire_ex(BGJ_PTR(bg_lock, l), bgj_call(), &deleted)) != BG_OK)
		bgj_throw_call(env, st);
	return deleted ? JNI_TRUE : JNI_FALSE;
}

/* The calling thread's hold: out = {mode (0: none), count, token}; false when the hold was lost. */
JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_lockHeld(JNIEnv *env, jclass cls, jlong l, jlongArray out)
{
	int mode = 0, st;
	uint32_t count = 0;
	uint64_t token = 0;
	jlong v[3];
	(void)cls;

	st = bg_lock_held_ex(BGJ_PTR(bg_lock, l), bgj_call(), &mode, &count, &token);
	if (st != BG_OK && st != BG_ELOCKED) {
		bgj_throw_call(env, st);
		return JNI_FALSE;
	}
	v[0] = mode;
	v[1] = (jlong)count;
	v[2] = (jlong)token;
	(*env)->SetLongArrayRegion(env, out, 0, 3, v);
	return st == BG_OK ? JNI_TRUE : JNI_FALSE;
}

/* The key (NAME + ":lock"), UTF-8. */
JNIEXPORT jbyteArray JNICALL Java_io_bloomguard_Native_lockKey(JNIEnv *env, jclass cls, jlong l)
{
	const char *k = bg_lock_key(BGJ_PTR(bg_lock, l));
	size_t len = k ? strlen(k) : 0;
	jbyteArray out = (*env)->NewByteArray(env, (jsize)len);
	(void)cls;

	if (out != NULL && len > 0)
		(*env)->SetByteArrayRegion(env, out, 0, (jsize)len, (const jbyte *)k);
	return out;
}
