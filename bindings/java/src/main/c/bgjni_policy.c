/*
 * bgjni_policy.c - io.bloomguard.Native: the degrade policy, its Java fallback, and queries that
 * say where their answer came from.
 *
 * The fallback runs on the thread making the query (policy.h): a Java thread in a native method
 * of ours (a blocking call, or the queue's poll and submit), so GetEnv finds it attached and no
 * exception is pending. A Java exception in the fallback declines (the chain moves on); it never
 * propagates through C. The fallback's global reference lives in a bgj_fallback that the Java side
 * frees once no call can reach it any more (Filter.close, after the client's queue is closed).
 */
#include "bgjni.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	jobject fn; /* global ref: an io.bloomguard.Fallback */
} bgj_fallback;

static JavaVM *g_vm;
static jclass g_policy_class;   /* io.bloomguard.Policy (global ref) */
static jmethodID g_call;        /* static boolean[] callFallback(Fallback, byte[][]) */
static jclass g_bytes_class;    /* byte[] (global ref) */

int bgj_policy_onload(JavaVM *vm, JNIEnv *env)
{
	jclass k;

	g_vm = vm;
	if ((k = (*env)->FindClass(env, "io/bloomguard/Policy")) == NULL)
		return -1;
	g_policy_class = (*env)->NewGlobalRef(env, k);
	(*env)->DeleteLocalRef(env, k);
	if ((k = (*env)->FindClass(env, "[B")) == NULL)
		return -1;
	g_bytes_class = (*env)->NewGlobalRef(env, k);
	(*env)->DeleteLocalRef(env, k);
	if (g_policy_class == NULL || g_bytes_class == NULL)
		return -1;
	g_call = (*env)->GetStaticMethodID(env, g_policy_class, "callFallback",
	                                   "(Lio/bloomguard/Fallback;[[B)[Z");
	return g_call != NULL ? 0 : -1;
}

static int fallback_trampoline(void *userdata, const void *const *items, const size_t *lens, size_t n,
                               uint8_t *present)
{
	bgj_fallback *fb = userdata;
	JNIEnv *env;
	jobjectArray arr;
	jbooleanArray answers;
	size_t i;
	int declined = 1;

	if ((*g_vm)->GetEnv(g_vm, (void **)&env, JNI_VERSION_1_8) != JNI_OK)
		return 1; /* not a Java thread: cannot ask Java */
	if ((*env)->ExceptionCheck(env) || (*env)->PushLocalFrame(env, 8) < 0)
		return 1;
	if ((arr = (*env)->NewObjectArray(env, (jsize)n, g_bytes_class, NULL)) == NULL)
		goto cleanup;
	for (i = 0; i < n; i++) {
		jbyteArray b = (*env)->NewByteArray(env, (jsize)lens[i]);
		if (b == NULL)
			goto cleanup;
		if (lens[i] > 0)
			(*env)->SetByteArrayRegion(env, b, 0, (jsize)lens[i], (const jbyte *)items[i]);
		(*env)->SetObjectArrayElement(env, arr, (jsize)i, b);
		(*env)->DeleteLocalRef(env, b);
	}
	answers = (*env)->CallStaticObjectMethod(env, g_policy_class, g_call, fb->fn, arr);
	if ((*env)->ExceptionCheck(env) || answers == NULL || (size_t)(*env)->GetArrayLength(env, answers) != n)
		goto cleanup;
	if (n > 0)
		(*env)->GetBooleanArrayRegion(env, answers, 0, (jsize)n, (jboolean *)present);
	declined = 0;

cleanup:
	if ((*env)->ExceptionCheck(env))
		(*env)->ExceptionClear(env); /* out of memory here: decline, the chain goes on */
	(*env)->PopLocalFrame(env, NULL);
	return declined;
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_fallbackNew(JNIEnv *env, jclass cls, jobject fn)
{
	bgj_fallback *fb = calloc(1, sizeof(*fb));
	(void)cls;

	if (fb == NULL || (fb->fn = (*env)->NewGlobalRef(env, fn)) == NULL) {
		free(fb);
		bgj_throw_oom(env, "bloomguard: the policy's fallback");
		return 0;
	}
	return BGJ_HANDLE(fb);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_fallbackFree(JNIEnv *env, jclass cls, jlong h)
{
	bgj_fallback *fb = BGJ_PTR(bgj_fallback, h);
	(void)cls;

	if (fb == NULL)
		return;
	(*env)->DeleteGlobalRef(env, fb->fn);
	free(fb);
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_policyNew(JNIEnv *env, jclass cls)
{
	bg_policy *p = NULL;
	int st;
	(void)cls;

	if ((st = bg_policy_new(&p)) != BG_OK)
		bgj_throw(env, st, "cannot make a policy");
	return BGJ_HANDLE(p);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_policyFree(JNIEnv *env, jclass cls, jlong p)
{
	(void)env;
	(void)cls;
	bg_policy_free(BGJ_PTR(bg_policy, p));
}

/* The setting, or an IllegalArgumentException naming it (Java's name) and the library's range. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_policySetInt(JNIEnv *env, jclass cls, jlong p, jint setting,
                                                              jlong value, jstring name)
{
	int64_t lo = 0, hi = 0;
	const char *n;
	char msg[256];
	int st;
	(void)cls;

	if ((st = bg_policy_set_int(BGJ_PTR(bg_policy, p), setting, value)) == BG_OK)
		return;
	n = (*env)->GetStringUTFChars(env, name, NULL); /* an ASCII identifier of the binding's */
	if (n == NULL)
		return;
	if (st == BG_EINVAL && bg_policy_bounds(setting, &lo, &hi) == BG_OK)
		snprintf(msg, sizeof(msg), "policy %s is %lld: it must be within %lld..%lld%s", n, (long long)value,
		         (long long)lo, (long long)hi,
		         setting == BG_POLICY_SNAPSHOT_INTERVAL_MS ? " (or 0: never)" : "");
	else
		snprintf(msg, sizeof(msg), "policy %s: refused by the library (%s)", n, bg_strerror(st));
	(*env)->ReleaseStringUTFChars(env, name, n);
	bgj_throw_illegal(env, msg);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_policySetChain(JNIEnv *env, jclass cls, jlong p, jint fail_class,
                                                                jintArray actions)
{
	jint a[BG_POLICY_MAX_CHAIN];
	int ia[BG_POLICY_MAX_CHAIN];
	jsize n = (*env)->GetArrayLength(env, actions), i;
	int st;
	(void)cls;

	if (n < 1 || n > BG_POLICY_MAX_CHAIN) {
		bgj_throw_illegal(env, "policy chain: 1 to 8 actions");
		return;
	}
	(*env)->GetIntArrayRegion(env, actions, 0, n, a);
	for (i = 0; i < n; i++)
		ia[i] = a[i];
	if ((st = bg_policy_set_chain(BGJ_PTR(bg_policy, p), fail_class, ia, (size_t)n)) != BG_OK)
		bgj_throw(env, st, "policy chain refused by the library");
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_policySetFallback(JNIEnv *env, jclass cls, jlong p, jlong fb)
{
	int st;
	(void)cls;

	st = bg_policy_set_fallback(BGJ_PTR(bg_policy, p), fb ? fallback_trampoline : NULL, BGJ_PTR(void, fb));
	if (st != BG_OK)
		bgj_throw(env, st, "policy fallback refused by the library");
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_filterSetPolicy(JNIEnv *env, jclass cls, jlong f, jlong p)
{
	int st;
	(void)cls;

	if ((st = bg_filter_set_policy_ex(BGJ_PTR(bg_filter, f), bgj_call(), BGJ_PTR(bg_policy, p))) != BG_OK)
		bgj_throw_call(env, st);
}

/*
 * contains, and where the answer came from: out = {present 0/1, BG_SOURCE_*, degraded status};
 * returns the message of the failure a degraded answer stands for (UTF-8; empty from Redis).
 */
JNIEXPORT jbyteArray JNICALL Java_io_bloomguard_Native_filterQuery(JNIEnv *env, jclass cls, jlong f, jbyteArray item,
                                                                   jintArray out)
{
	bg_call *call = bgj_call();
	bgj_item it;
	jint v[3];
	int present = 0, st;
	const char *msg;
	size_t len;
	jbyteArray m = NULL;
	(void)cls;

	if (call == NULL) {
		bgj_throw_oom(env, "bloomguard: a per-thread call object");
		return NULL;
	}
	if (bgj_item_get(env, item, &it) != 0)
		return NULL;
	st = bg_filter_contains_ex(BGJ_PTR(bg_filter, f), call, it.data, it.len, &present);
	bgj_item_free(&it);
	if (st != BG_OK) {
		bgj_throw_call(env, st);
		return NULL;
	}
	v[0] = present ? 1 : 0;
	v[1] = bg_call_source(call);
	v[2] = bg_call_degraded_status(call);
	(*env)->SetIntArrayRegion(env, out, 0, 3, v);
	msg = bg_call_errmsg(call);
	len = msg ? strlen(msg) : 0;
	if ((m = (*env)->NewByteArray(env, (jsize)len)) != NULL && len > 0)
		(*env)->SetByteArrayRegion(env, m, 0, (jsize)len, (const jbyte *)msg);
	return m;
}

/* The handle's counters (stats.h): out[i] = bg_filter_stat(ids[i]); the first failing status is thrown. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_filterStats(JNIEnv *env, jclass cls, jlong f, jintArray ids,
                                                             jlongArray out)
{
	jsize n = (*env)->GetArrayLength(env, ids), i;
	jint id;
	int64_t v;
	jlong jv;
	int st;
	(void)cls;

	for (i = 0; i < n; i++) {
		(*env)->GetIntArrayRegion(env, ids, i, 1, &id);
		if ((st = bg_filter_stat(BGJ_PTR(bg_filter, f), id, &v)) != BG_OK) {
			bgj_throw(env, st, "a counter the library does not know (the binding's Stat table is newer)");
			return;
		}
		jv = v;
		(*env)->SetLongArrayRegion(env, out, i, 1, &jv);
	}
}
