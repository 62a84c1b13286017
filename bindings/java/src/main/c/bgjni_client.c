/*
 * bgjni_client.c - io.bloomguard.Native: client open / close / ping, options' bounds, version.
 */
#include "bgjni.h"

#include <stdlib.h>

/* Sets the string options: keys[i] to the UTF-8 values[i] (checked for NUL by Java). */
static int set_strings(JNIEnv *env, bg_options *opts, jintArray keys, jobjectArray values)
{
	jsize n = (*env)->GetArrayLength(env, keys), i;
	int st;

	for (i = 0; i < n; i++) {
		jint key;
		jbyteArray b = (*env)->GetObjectArrayElement(env, values, i);
		char *v = bgj_cstr(env, b);
		(*env)->DeleteLocalRef(env, b);
		if (v == NULL)
			return -1;
		(*env)->GetIntArrayRegion(env, keys, i, 1, &key);
		st = bg_options_set_str(opts, key, v);
		free(v); /* copied by the options; a password must not linger longer than that */
		if (st != BG_OK) {
			bgj_throw(env, st, "a client string option was refused by the library");
			return -1;
		}
	}
	return 0;
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_clientOpen(JNIEnv *env, jclass cls, jbyteArray url,
                                                             jintArray keys, jlongArray values,
                                                             jintArray str_keys, jobjectArray str_values)
{
	bg_options *opts = NULL;
	bg_client *c = NULL;
	char *curl = NULL;
	jint *k = NULL;
	jlong *v = NULL;
	jsize n, i;
	int st;
	(void)cls;

	if ((curl = bgj_cstr(env, url)) == NULL)
		goto cleanup;
	n = (*env)->GetArrayLength(env, keys);
	if (n > 0 || (*env)->GetArrayLength(env, str_keys) > 0) {
		size_t cnt = n > 0 ? (size_t)n : 1; /* a length is never negative; the compiler cannot know */
		k = malloc(cnt * sizeof(*k));
		v = malloc(cnt * sizeof(*v));
		if (k == NULL || v == NULL) {
			bgj_throw_oom(env, "bloomguard: client options");
			goto cleanup;
		}
		if (n > 0) {
			(*env)->GetIntArrayRegion(env, keys, 0, n, k);
			(*env)->GetLongArrayRegion(env, values, 0, n, v);
		}
		if ((st = bg_options_new(&opts)) != BG_OK) {
			bgj_throw(env, st, "cannot make the client's options");
			goto cleanup;
		}
		for (i = 0; i < n; i++) {
			/* Java checked each value against bg_options_bounds already: a failure here is a bug */
			if ((st = bg_options_set_int(opts, k[i], v[i])) != BG_OK) {
				bgj_throw(env, st, "a client option was refused by the library");
				goto cleanup;
			}
		}
		if (set_strings(env, opts, str_keys, str_values) != 0)
			goto cleanup;
	}
	if ((st = bg_client_open_ex(&c, bgj_call(), curl, opts)) != BG_OK)
		bgj_throw_call(env, st);

cleanup:
	bg_options_free(opts);
	free(k);
	free(v);
	free(curl);
	return BGJ_HANDLE(c);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_clientClose(JNIEnv *env, jclass cls, jlong h)
{
	(void)env;
	(void)cls;
	bg_client_close(BGJ_PTR(bg_client, h));
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_clientPing(JNIEnv *env, jclass cls, jlong h)
{
	int st = bg_client_ping_ex(BGJ_PTR(bg_client, h), bgj_call());
	(void)cls;

	if (st != BG_OK)
		bgj_throw_call(env, st);
}

/* The range an integer option accepts (options.h's table): out[0]..out[1]; the status. */
JNIEXPORT jint JNICALL Java_io_bloomguard_Native_optionBounds(JNIEnv *env, jclass cls, jint option, jlongArray out)
{
	int64_t lo = 0, hi = 0;
	jlong b[2];
	int st = bg_options_bounds(option, &lo, &hi);
	(void)cls;

	b[0] = lo;
	b[1] = hi;
	(*env)->SetLongArrayRegion(env, out, 0, 2, b);
	return st;
}

JNIEXPORT jstring JNICALL Java_io_bloomguard_Native_version(JNIEnv *env, jclass cls)
{
	(void)cls;
	return (*env)->NewStringUTF(env, bg_version_string()); /* ASCII */
}

JNIEXPORT jstring JNICALL Java_io_bloomguard_Native_statusName(JNIEnv *env, jclass cls, jint status)
{
	const char *s = bg_status_name(status);
	(void)cls;

	return s ? (*env)->NewStringUTF(env, s) : NULL; /* ASCII */
}

JNIEXPORT jstring JNICALL Java_io_bloomguard_Native_strerror(JNIEnv *env, jclass cls, jint status)
{
	(void)cls;
	return (*env)->NewStringUTF(env, bg_strerror(status)); /* ASCII */
}
