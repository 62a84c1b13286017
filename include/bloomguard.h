/*
 * bloomguard.h - the whole C API of bloomguard.
 *
 * Redisson-compatible Bloom filters in Redis that can be rebuilt while queries keep running.
 * One header per concept lives under bloomguard/; include this one.
 */
#ifndef BLOOMGUARD_H
#define BLOOMGUARD_H

#include "bloomguard/common.h"
#include "bloomguard/errors.h"
#include "bloomguard/version.h"
#include "bloomguard/options.h"
#include "bloomguard/call.h"
#include "bloomguard/client.h"
#include "bloomguard/filter.h"
#include "bloomguard/hash.h"
#include "bloomguard/rotation.h"
#include "bloomguard/stats.h"
#include "bloomguard/policy.h"
#include "bloomguard/lock.h"
#include "bloomguard/queue.h"
#include "bloomguard/observe.h"

#endif
