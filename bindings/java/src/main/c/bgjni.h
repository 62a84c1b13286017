/*
 * bgjni.h - what the JNI units of the Java binding share.
 *
 * Rules every unit keeps (the JVM's, not ours):
 *  - after a Throw, return at once: no JNI call but the exception-safe ones may follow;
 *  - items are copied with GetByteArrayRegion, never held through a critical region: every call
 *    may wait on the network, and a critical region would stall the GC for that long;
 *  - local references made in a loop over a batch are deleted as the loop goes (a 100k batch
 *    would overflow the local reference table);
 *  - messages reach Java as UTF-8 bytes, decoded there: NewStringUTF wants modified UTF-8, and a
 *    filter name quoted in a message may hold any bytes.
 * Handles travel as jlong. The Java side never passes a closed one: its guard (Handle.java) refuses
 * the call first, so a use after close is an exception, never a dangling pointer.
 */
#ifndef BGJNI_H
#define BGJNI_H

#include <jni.h>
#include <stddef.h>
#include <stdint.h>

#include <bloomguard.h>

#include "io_bloomguard_Native.h" /* javac -h: the prototypes of every entry point */

#define BGJ_PTR(type, h) ((type *)(intptr_t)(h))
#define BGJ_HANDLE(p) ((jlong)(intptr_t)(p))

/* Throws the BloomGuardException subclass of status with msg (UTF-8, may be NULL or ""). */
void bgj_throw(JNIEnv *env, int status, const char *msg);
/* Throws the status with the message of this thread's call (bgj_call). */
void bgj_throw_call(JNIEnv *env, int status);
/* Throws java.lang.IllegalArgumentException / OutOfMemoryError with msg. */
void bgj_throw_illegal(JNIEnv *env, const char *msg);
void bgj_throw_oom(JNIEnv *env, const char *what);

/*
 * This thread's bg_call (made on first use, freed when the thread ends): each thread gets its own
 * message and answer source, as call.h requires (a handle's message may be another thread's).
 * NULL when it could not be made (the caller then passes NULL: the call still works, its message
 * goes to the handle).
 */
bg_call *bgj_call(void);

/* One item copied out of a byte[]: a stack buffer for small ones, else malloc'd. */
typedef struct {
	char small[256];
	char *data;
	size_t len;
} bgj_item;
/* 0, or -1 with an exception pending. */
int bgj_item_get(JNIEnv *env, jbyteArray a, bgj_item *it);
void bgj_item_free(bgj_item *it);

/* A byte[][] copied into one buffer (two passes: lengths, then bytes). */
typedef struct {
	char *buf;
	const void **items;
	size_t *lens;
	size_t n;
} bgj_items;
/* 0, or -1 with an exception pending (a null element is refused by the Java side first). */
int bgj_items_get(JNIEnv *env, jobjectArray a, bgj_items *out);
void bgj_items_free(bgj_items *it);

/* bgjni_policy.c's lookups at load time: 0, or -1 with an exception pending. */
int bgj_policy_onload(JavaVM *vm, JNIEnv *env);

/* A NUL-terminated copy of a UTF-8 byte[] (names, URLs); NULL with an exception pending. */
char *bgj_cstr(JNIEnv *env, jbyteArray a);

#endif
