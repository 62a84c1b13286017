/*
 * bgjni_rotation.c - io.bloomguard.Native: a rotation's begin, adds, commit and free. Java drives
 * one rotation from one thread (Filter.rotate's caller), as rotation.h requires.
 */
#include "bgjni.h"

JNIEXPORT jlong JNICALL Java_io_bloomguard_Native_rotationBegin(JNIEnv *env, jclass cls, jlong f, jlong n, jdouble p,
                                                                jint strategy, jlong wait_ms)
{
	bg_options *opts = NULL;
	bg_rotation *r = NULL;
	int st;
	(void)cls;

	if (wait_ms >= 0) {
		if ((st = bg_options_new(&opts)) != BG_OK ||
		    (st = bg_options_set_int(opts, BG_OPT_ROTATE_WAIT_MS, wait_ms)) != BG_OK) {
			bgj_throw(env, st, "rotate: the wait is out of range (0..3600000 ms)");
			goto cleanup;
		}
	}
	if ((st = bg_rotation_begin_ex(&r, bgj_call(), BGJ_PTR(bg_filter, f), n, p, strategy, opts)) != BG_OK)
		bgj_throw_call(env, st);

cleanup:
	bg_options_free(opts);
	return BGJ_HANDLE(r);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_rotationAdd(JNIEnv *env, jclass cls, jlong r, jbyteArray item)
{
	bgj_item it;
	int st;
	(void)cls;

	if (bgj_item_get(env, item, &it) != 0)
		return;
	if ((st = bg_rotation_add_ex(BGJ_PTR(bg_rotation, r), bgj_call(), it.data, it.len)) != BG_OK)
		bgj_throw_call(env, st);
	bgj_item_free(&it);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_rotationAddMany(JNIEnv *env, jclass cls, jlong r, jobjectArray items)
{
	bgj_items its;
	int st;
	(void)cls;

	if (bgj_items_get(env, items, &its) != 0)
		return;
	if ((st = bg_rotation_add_many_ex(BGJ_PTR(bg_rotation, r), bgj_call(), its.items, its.lens, its.n)) != BG_OK)
		bgj_throw_call(env, st);
	bgj_items_free(&its);
}

JNIEXPORT void JNICALL Java_io_bloomguard_Native_rotationCommit(JNIEnv *env, jclass cls, jlong r)
{
	int st;
	(void)cls;

	if ((st = bg_rotation_commit_ex(BGJ_PTR(bg_rotation, r), bgj_call())) != BG_OK)
		bgj_throw_call(env, st);
}

/* Aborts a rotation neither committed nor aborted (its lease and staging keys go), then frees. */
JNIEXPORT void JNICALL Java_io_bloomguard_Native_rotationFree(JNIEnv *env, jclass cls, jlong r)
{
	(void)env;
	(void)cls;
	bg_rotation_free(BGJ_PTR(bg_rotation, r));
}
