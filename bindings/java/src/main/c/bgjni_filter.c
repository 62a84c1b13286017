/*
 * bgjni_filter.c - io.bloomguard.Native: the blocking filter calls, each with this thread's bg_call
 * so that the exception carries this call's own message.
 */
#include "bgjni.h"

#include <stdlib.h>
#include <string.h>

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_filterOpen(JNIEnv *env, jclass cls, jlong client, jbyteArray name)
{
	bg_filter *f = NULL;
	char *cname;
	int st;
	(void)cls;

	if ((cname = bgj_cstr(env, name)) == NULL)
		return 0;
	if ((st = bg_filter_open_ex(&f, bgj_call(), BGJ_PTR(bg_client, client), cname)) != BG_OK)
		bgj_throw_call(env, st);
	free(cname);
	return BGJ_HANDLE(f);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_filterClose(JNIEnv *env, jclass cls, jlong h)
{
	(void)env;
	(void)cls;
	bg_filter_close(BGJ_PTR(bg_filter, h));
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterInit(JNIEnv *env, jclass cls, jlong h, jlong n, jdouble p)
{
	int created = 0, st;
	(void)cls;

	if ((st = bg_filter_init_ex(BGJ_PTR(bg_filter, h), bgj_call(), n, p, &created)) != BG_OK)
		bgj_throw_call(env, st);
	return created ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterAdd(JNIEnv *env, jclass cls, jlong h, jbyteArray item)
{
	bgj_item it;
	int added = 0, st;
	(void)cls;

	if (bgj_item_get(env, item, &it) != 0)
		return JNI_FALSE;
	if ((st = bg_filter_add_ex(BGJ_PTR(bg_filter, h), bgj_call(), it.data, it.len, &added)) != BG_OK)
		bgj_throw_call(env, st);
	bgj_item_free(&it);
	return added ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_filterAddMany(JNIEnv *env, jclass cls, jlong h, jobjectArray items)
{
	bgj_items its;
	size_t added = 0;
	int st;
	(void)cls;

	if (bgj_items_get(env, items, &its) != 0)
		return 0;
	st = bg_filter_add_many_ex(BGJ_PTR(bg_filter, h), bgj_call(), its.items, its.lens, its.n, &added);
	if (st != BG_OK)
		bgj_throw_call(env, st);
	bgj_items_free(&its);
	return (jlong)added;
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterContains(JNIEnv *env, jclass cls, jlong h, jbyteArray item)
{
	bgj_item it;
	int present = 0, st;
	(void)cls;

	if (bgj_item_get(env, item, &it) != 0)
		return JNI_FALSE;
	if ((st = bg_filter_contains_ex(BGJ_PTR(bg_filter, h), bgj_call(), it.data, it.len, &present)) != BG_OK)
		bgj_throw_call(env, st);
	bgj_item_free(&it);
	return present ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jbooleanArray JNICALL Java_io_bloomguard_Native_filterContainsMany(JNIEnv *env, jclass cls, jlong h,
                                                                            jobjectArray items)
{
	bgj_items its;
	uint8_t *present = NULL;
	jbooleanArray out = NULL;
	int st;
	(void)cls;

	if (bgj_items_get(env, items, &its) != 0)
		return NULL;
	if ((present = malloc(its.n ? its.n : 1)) == NULL) {
		bgj_throw_oom(env, "bloomguard: answers of a batch");
		goto cleanup;
	}
	st = bg_filter_contains_many_ex(BGJ_PTR(bg_filter, h), bgj_call(), its.items, its.lens, its.n, present);
	if (st != BG_OK) {
		bgj_throw_call(env, st);
		goto cleanup;
	}
	/* jboolean is an unsigned char and the answers are 0/1: the bytes copy as they are */
	if ((out = (*env)->NewBooleanArray(env, (jsize)its.n)) != NULL && its.n > 0)
		(*env)->SetBooleanArrayRegion(env, out, 0, (jsize)its.n, (const jboolean *)present);

cleanup:
	free(present);
	bgj_items_free(&its);
	return out;
}

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_filterCount(JNIEnv *env, jclass cls, jlong h)
{
	int64_t n = 0;
	int st;
	(void)cls;

	if ((st = bg_filter_count_ex(BGJ_PTR(bg_filter, h), bgj_call(), &n)) != BG_OK)
		bgj_throw_call(env, st);
	return n;
}

/* out: size, hashIterations, expectedInsertions, the raw bits of falseProbability */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_filterInfo(JNIEnv *env, jclass cls, jlong h, jlongArray out)
{
	uint64_t size = 0;
	uint32_t k = 0;
	int64_t n = 0;
	double p = 0;
	jlong v[4];
	int st;
	(void)cls;

	if ((st = bg_filter_info_ex(BGJ_PTR(bg_filter, h), bgj_call(), &size, &k, &n, &p)) != BG_OK) {
		bgj_throw_call(env, st);
		return;
	}
	v[0] = (jlong)size;
	v[1] = (jlong)k;
	v[2] = n;
	memcpy(&v[3], &p, sizeof(p));
	(*env)->SetLongArrayRegion(env, out, 0, 4, v);
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterDelete(JNIEnv *env, jclass cls, jlong h)
{
	int deleted = 0, st;
	(void)cls;

	if ((st = bg_filter_delete_ex(BGJ_PTR(bg_filter, h), bgj_call(), &deleted)) != BG_OK)
		bgj_throw_call(env, st);
	return deleted ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterExpire(JNIEnv *env, jclass cls, jlong h, jlong ttl_ms)
{
	int applied = 0, st;
	(void)cls;

	if ((st = bg_filter_expire_ex(BGJ_PTR(bg_filter, h), bgj_call(), ttl_ms, &applied)) != BG_OK)
		bgj_throw_call(env, st);
	return applied ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jboolean JNICALL Java_io_bloomguard_Native_filterPersist(JNIEnv *env, jclass cls, jlong h)
{
	int applied = 0, st;
	(void)cls;

	if ((st = bg_filter_persist_ex(BGJ_PTR(bg_filter, h), bgj_call(), &applied)) != BG_OK)
		bgj_throw_call(env, st);
	return applied ? JNI_TRUE : JNI_FALSE;
}
