/*
 * Internal: every name bloomguard gives a key, a hash field, a value it compares or a channel in
 * Redis - filters, rotations, locks. C code and Lua bodies both use these (Lua by string
 * concatenation: "redis.call('HGET', KEYS[1], '" BGI_LOCK_MODE "')"), so a name is spelled once.
 * docs/layout.md is the map: each key's type, who writes and reads it, which Redisson class
 * shares it. Names Redisson shares must never change; ours could only change with a migration.
 * Key suffixes are applied with Redisson's suffixName rule (redis/names.h).
 */
#ifndef BG_INTERNAL_LAYOUT_H
#define BG_INTERNAL_LAYOUT_H

/* ---- a filter: the bitmap is at NAME itself ------------------------------------------------- */

/* suffix(NAME, ...): the config hash (Redisson RBloomFilter's) */
#define BGI_KEY_CONFIG "config"
/* Redisson's four config fields: size and hashIterations as plain decimals, expectedInsertions
 * decimal, falseProbability in Java's Double.toString form */
#define BGI_CONFIG_SIZE "size"
#define BGI_CONFIG_K "hashIterations"
#define BGI_CONFIG_N "expectedInsertions"
#define BGI_CONFIG_FPP "falseProbability"
/* ours, in the same hash (Redisson ignores it): an in-place rebuild is rewriting the bitmap */
#define BGI_REBUILD_FIELD "bgRebuilding"

/* ---- a partitioned filter (docs/layout.md, "Partitioned filter") --------------------------------
 * Its config is the central hash suffix(NAME, BGI_KEY_CONFIG) - Redisson's config key, so a Redisson
 * RBloomFilter given NAME finds no size/hashIterations there ("not initialized") - holding only the
 * fields below. Generation G has P partitions; partition I of G lives in the cluster slot
 * S(I, P) = floor((2I + 1) * 16384 / 2P), its keys "{T}NAME:g<G>:p<I>:<what>" with T the smallest
 * decimal that hashes to S (redis/names.h, bgi_pkey_write). */
#define BGI_PCONF_KIND "bgKind"              /* BGI_PCONF_KIND_PARTITIONED */
#define BGI_PCONF_KIND_PARTITIONED "partitioned"
#define BGI_PCONF_LIVE "bgLive"              /* the live generation (absent until an init committed) */
#define BGI_PCONF_CLAIM "bgClaim"            /* an init's token between its claim and its commit (the hash
                                                has a TTL meanwhile) */
#define BGI_PCONF_NEXT "bgNext"              /* the generation a rotation builds (its lease holds its gen) */
#define BGI_PCONF_SWEEP "bgSweep"            /* generations whose keys are to be deleted, space-separated: the
                                                one a commit retired, one a dead rotation left */
#define BGI_PCONF_GENS "bgGens"              /* the last generation number handed out */
/* per generation G: "g<G>:" + one of these */
#define BGI_PCONF_GEN_PREFIX "g"
#define BGI_PCONF_PARTITIONS "partitions"
#define BGI_PCONF_PSIZE "partitionSize"      /* bits per partition (each below 2^32) */
#define BGI_PCONF_TOTAL "size"               /* partitions * partitionSize */
/* and BGI_CONFIG_K, BGI_CONFIG_N, BGI_CONFIG_FPP under the same prefix */
/* the keys of a partition: "{T}NAME:g<G>:p<I>:" + one of these */
#define BGI_PKEY_BITMAP 'b'                  /* the partition's bitmap (Redisson's bit order) */
#define BGI_PKEY_META 'm'                    /* hash: BGI_CONFIG_SIZE (bits of this partition), BGI_CONFIG_K,
                                                BGI_PCONF_PARTITIONS: a step reads or checks them in the same
                                                atomic step as the bits; BGI_PMETA_FORWARD, BGI_PMETA_STAGE */
#define BGI_PKEY_MARK 'r'                    /* string, PX lease: a rotation's token while adds record their
                                                hashes in the delta */
#define BGI_PKEY_DELTA 'd'                   /* list: h1, h2 of each item added while the mark is there */
#define BGI_PMETA_FORWARD "forward"          /* the generation a commit moves to: adds go there too, a query's
                                                answer stands only while the central config still names this one */
#define BGI_PMETA_STAGE "stage"              /* a generation being uploaded: the rotation's token (keys have a TTL) */

/* ---- a rotation's keys (suffix(NAME, ...)) --------------------------------------------------- */

#define BGI_KEY_ROTATION "rotation"   /* the lease hash */
#define BGI_KEY_NEXT "next:"          /* + the rotation's token: its staging bitmap */
#define BGI_KEY_DELTA "delta"         /* list of next-generation bit offsets added meanwhile */
#define BGI_KEY_SPARE "spare"         /* the previous bitmap, the next upload's buffer */
/* a native filter's rotation (rotation/nswap.c): the set of the staging keys begun and not yet
 * committed or aborted, so the next begin deletes what a rotator that died left */
#define BGI_KEY_STAGINGS "stagings"
/* the lease hash's fields */
#define BGI_LEASE_TOKEN "token"
#define BGI_LEASE_OWNER "owner"
#define BGI_LEASE_NEXT_SIZE "next_size"
#define BGI_LEASE_NEXT_K "next_k"
#define BGI_LEASE_NEXT_N "next_n"
#define BGI_LEASE_NEXT_FPP "next_fpp"
#define BGI_LEASE_TTL "ttl"           /* what adds give the delta list */
#define BGI_LEASE_GEN "gen"           /* a partitioned filter's rotation: the generation it builds */
#define BGI_LEASE_NATIVE "native"     /* a native filter's rotation: adds record their items in the delta */

/* ---- a lock (Redisson RLock's layout, plus ours) --------------------------------------------- */

/* bg_lock_open(NAME): the lock key is NAME + ":" BGI_KEY_LOCK; a filter's own lock is
 * suffix(NAME, BGI_KEY_LOCK), the same string for the tagged name (bgi_key_tagged) */
#define BGI_KEY_LOCK "lock"
/* suffix(L, ...) of a lock key L: fence counter, readers zset, waiting writers zset */
#define BGI_KEY_FENCE "fence"
#define BGI_KEY_READERS "readers"
#define BGI_KEY_WRITERS "writers"
/* ours, in the lock hash beside the holders: absent for an RLock layout hold */
#define BGI_LOCK_MODE "mode"
#define BGI_LOCK_MODE_WRITE "write"
#define BGI_LOCK_MODE_READ "read"
/* prefix(BGI_LOCK_CHANNEL, L): Redisson's LockPubSub channel, and its UNLOCK_MESSAGE */
#define BGI_LOCK_CHANNEL "redisson_lock__channel"
#define BGI_LOCK_UNLOCK_MESSAGE "0"

/* ---- every Lua step ---------------------------------------------------------------------------- */

/* + "{N}" (N picked for the step's slot): a key that never exists, declared by each step so a
 * slot migration refuses the whole step (client/step.h) */
#define BGI_KEY_MIGRATION_GUARD "bloomguard:migration-guard:"

#endif
