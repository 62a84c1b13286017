/*
 * A native rotation's bulk load (nswap.c): where the server has BF.SCANDUMP / BF.LOADCHUNK
 * (RedisBloom), the rotation's items are hashed here into the next generation's first link with
 * the server's own hashing (hash/murmur.h, checked against BF.SCANDUMP by test_native_vectors) and
 * uploaded in chunks, instead of being sent one by one: the bits are what BF.INSERT would have set.
 * The link is built by the rotation's build (bitmap.c, bgi_bitmap_init_rbloom): region-bucketed on
 * the rotation's hashing threads (BG_OPT_ROTATE_THREADS, BG_OPT_ROTATE_NICE), items pending across
 * add calls until its scratch is full or the upload flushes them, counted as the server counts.
 * The chunks follow the server's own dump of the reserved (empty) staging filter: its header, with
 * the item count patched in, then the bit array in the same chunk sizes and iterators. Only the
 * first link is built here: an item that would take it past its capacity (where the server starts
 * a new link) uploads what was built and sends the rest with BF.INSERT (nswap.c). A server without
 * the commands (valkey-bloom) gets BF.INSERT from the start.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash/murmur.h"
#include "rotation/rotation.h"

/* One plain command; its reply kept: an error's text, or [iterator, bulk] (BF.SCANDUMP). */
typedef struct rawcmd {
  int argc;
  const char *const *argv;
  const size_t *lens;
  int is_err;
  char err[256];
  long long iter;
  unsigned char *data;   /* malloc'd */
  size_t len;
} rawcmd;

static int build_raw(bgi_conn *c, void *ctx, size_t *nreplies, bgi_err *err) {
  rawcmd *x = ctx;
  size_t payload = 0;
  for (int i = 0; i < x->argc; i++) payload += x->lens[i];
  if (bgi_buf_reserve(&c->out, bgi_resp_bound((size_t)x->argc, payload)) != BG_OK)
    return bgi_err_set(err, BG_ENOMEM, "out of memory");
  bgi_resp_array(&c->out, (size_t)x->argc);
  for (int i = 0; i < x->argc; i++) bgi_resp_bulk(&c->out, x->argv[i], x->lens[i]);
  *nreplies = 1;
  return BG_OK;
}

static int parse_raw(bgi_conn *c, bgi_reply **rep, size_t n, void *ctx, bgi_err *err) {
  rawcmd *x = ctx;
  const bgi_reply *r = rep[0];
  (void)c, (void)n;
  if (r->type == REDIS_REPLY_ERROR) {
    x->is_err = 1;
    snprintf(x->err, sizeof x->err, "%.*s", (int)(r->len < 255 ? r->len : 255), r->str);
    return BG_OK;
  }
  if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
      r->element[1]->type == REDIS_REPLY_STRING) {
    x->iter = r->element[0]->integer;
    x->len = r->element[1]->len;
    if (!(x->data = malloc(x->len ? x->len : 1))) return bgi_err_set(err, BG_ENOMEM, "out of memory");
    memcpy(x->data, r->element[1]->str, x->len);
  }
  return BG_OK;
}

static int raw(bg_rotation *r, rawcmd *x, bgi_err *err) {
  x->is_err = 0;
  x->data = NULL;
  x->len = 0;
  return bgi_client_call(r->f->client, r->f->slot, 0, build_raw, parse_raw, x, err);
}

static int scandump(bg_rotation *r, long long iter, rawcmd *x, bgi_err *err) {
  char it[24];
  snprintf(it, sizeof it, "%lld", iter);
  const char *argv[] = {"BF.SCANDUMP", r->staging_key.s, it};
  size_t lens[] = {11, r->staging_key.len, strlen(it)};
  *x = (rawcmd){.argc = 3, .argv = argv, .lens = lens};
  return raw(r, x, err);
}

/* Test only: 1 makes every native rotation send its items with BF.INSERT, as on a server without
 * BF.SCANDUMP / BF.LOADCHUNK (the fallback's test, on a server that has them). */
static atomic_int fault_no_dump;

void bgi_nload_fault_no_dump(int on) { atomic_store(&fault_no_dump, on); }

void bgi_nload_free(bg_rotation *r) {
  bgi_bitmap_free(&r->nload.link);
  r->nload.on = 0;
}

int bgi_nload_begin(bg_rotation *r, bgi_err *err) {
  bgi_nload *l = &r->nload;
  memset(l, 0, sizeof *l);
  if (atomic_load(&fault_no_dump)) return BG_OK;
  /* does the server dump (RedisBloom)? the reserved staging filter's header answers */
  rawcmd x;
  int st = scandump(r, 0, &x, err);
  if (st != BG_OK) return st;
  int has = !x.is_err && x.data && x.iter != 0;
  free(x.data);
  if (!has) return BG_OK;   /* BF.INSERT it is */
  uint64_t bits;
  uint32_t k;
  bgi_rbloom_geometry((uint64_t)r->n, r->fpp_value, &bits, &k);
  if (k > BGI_RBLOOM_MAX_K) return BG_OK;   /* no error rate a double holds comes here: BF.INSERT */
  if (bgi_bitmap_init_rbloom(&l->link, bits, k) != BG_OK) {
    bgi_bitmap_free(&l->link);
    return bgi_err_set(err, BG_ENOMEM, "out of memory for a %llu-bit link", (unsigned long long)bits);
  }
  l->capacity = (uint64_t)r->n;
  l->on = 1;
  return BG_OK;
}

size_t bgi_nload_add(bg_rotation *r, const void *const *items, const size_t *lens, size_t n) {
  bgi_nload *l = &r->nload;
  /* the server counts an item new when it sets a bit; at capacity it would open a new link */
  return bgi_bitmap_add_upto(&l->link, items, lens, n, (int)r->opts.rotate_threads, (int)r->opts.rotate_nice,
                             l->capacity);
}

/* The dumped header's item counts (RedisBloom's packed chain header: the chain's size at byte 0,
 * then nfilters, options, growth (4 bytes each), then the first link: bytes, bits, size...). */
#define HDR_CHAIN_SIZE 0
#define HDR_LINK_SIZE 36
#define HDR_MIN_LEN 73

static void put_u64le(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int bgi_nload_upload(bg_rotation *r, bgi_err *err) {
  bgi_nload *l = &r->nload;
  enum { MAX_CHUNKS = 4096 };
  long long *iters = NULL;
  size_t *clens = NULL, nchunks = 0, total = 0;
  unsigned char *header = NULL;
  size_t header_len = 0;
  long long header_iter = 0, iter = 0;
  int st = BG_OK;
  if (!l->on) return BG_OK;
  bgi_bitmap_flush(&l->link, (int)r->opts.rotate_threads, (int)r->opts.rotate_nice);
  const uint64_t bits = l->link.size;
  if (!(iters = malloc(MAX_CHUNKS * sizeof *iters)) || !(clens = malloc(MAX_CHUNKS * sizeof *clens))) {
    st = bgi_err_set(err, BG_ENOMEM, "out of memory");
    goto cleanup;
  }
  /* the empty staging filter's dump: the header and the chunk sizes the server expects back */
  for (;;) {
    rawcmd x;
    if ((st = scandump(r, iter, &x, err)) != BG_OK) goto cleanup;
    if (x.is_err || !x.data) {
      free(x.data);
      st = bgi_err_set(err, BG_ESERVER, "rotation upload: BF.SCANDUMP of the staging filter %s failed: %s",
                       r->staging_key.s, x.is_err ? x.err : "unexpected reply");
      goto cleanup;
    }
    if (x.iter == 0) {
      free(x.data);
      break;
    }
    if (!header) {
      header = x.data, header_len = x.len, header_iter = x.iter;
    }
    else {
      free(x.data);   /* zeros: only its size and iterator matter */
      if (nchunks == MAX_CHUNKS) {
        st = bgi_err_set(err, BG_ESERVER, "rotation upload: the staging filter dumps in more than %d chunks", MAX_CHUNKS);
        goto cleanup;
      }
      iters[nchunks] = x.iter, clens[nchunks++] = x.len;
      total += x.len;
    }
    iter = x.iter;
  }
  if (!header || header_len < HDR_MIN_LEN || total != bits / 8) {
    st = bgi_err_set(err, BG_ESERVER, "rotation upload: the staging filter %s dumps %zu bytes of bits, %llu expected "
                     "(a module whose layout this library does not know)", r->staging_key.s, total,
                     (unsigned long long)(bits / 8));
    goto cleanup;
  }
  put_u64le(header + HDR_CHAIN_SIZE, l->link.added);
  put_u64le(header + HDR_LINK_SIZE, l->link.added);
  /* LOADCHUNK needs a fresh key: the reserved one goes, the loaded one takes its place and TTL */
  {
    const char *argv[] = {"DEL", r->staging_key.s};
    size_t lens[] = {3, r->staging_key.len};
    rawcmd x = {.argc = 2, .argv = argv, .lens = lens};
    if ((st = raw(r, &x, err)) != BG_OK) goto cleanup;
  }
  size_t off = 0;
  for (size_t c = 0; c <= nchunks; c++) {
    char it[24];
    snprintf(it, sizeof it, "%lld", c == 0 ? header_iter : iters[c - 1]);
    const unsigned char *data = c == 0 ? header : l->link.bytes + off;
    size_t len = c == 0 ? header_len : clens[c - 1];
    const char *argv[] = {"BF.LOADCHUNK", r->staging_key.s, it, (const char *)data};
    size_t lens[] = {12, r->staging_key.len, strlen(it), len};
    rawcmd x = {.argc = 4, .argv = argv, .lens = lens};
    if ((st = raw(r, &x, err)) != BG_OK) goto cleanup;
    if (x.is_err) {
      st = bgi_err_set(err, BG_ESERVER, "rotation upload: BF.LOADCHUNK into %s refused: %s", r->staging_key.s, x.err);
      goto cleanup;
    }
    if (c > 0) {
      off += len;
      r->bytes_uploaded += len;
      r->upload_pos = off;
      if ((st = bgi_rot_report(r, BG_PHASE_UPLOADING, 1, err)) != BG_OK) goto cleanup;
    }
  }
  {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)r->guarded_ttl_ms);
    const char *argv[] = {"PEXPIRE", r->staging_key.s, ttl};
    size_t lens[] = {7, r->staging_key.len, strlen(ttl)};
    rawcmd x = {.argc = 3, .argv = argv, .lens = lens};
    if ((st = raw(r, &x, err)) != BG_OK) goto cleanup;
  }
  r->upload_total = total;
  bgi_nload_free(r);   /* the rest (adds past capacity, the delta) goes by BF.INSERT */
cleanup:
  free(header);
  free(iters);
  free(clens);
  return st;
}
