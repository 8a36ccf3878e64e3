/* TILE_RECORD (rt_record.c): the manifest of what a process launched. */
#ifndef TILE_RUNTIME_RT_RECORD_H
#define TILE_RUNTIME_RT_RECORD_H

#include "rt_internal.h"

/* A launch's key: the names and values of the kernel's key parameters and which
 * run-time parameters they are. */
typedef struct RtRecordKey {
    const char *const *names;
    const int64_t *values;
    const uint32_t *param;
    uint32_t n;
} RtRecordKey;

/* Appends k's entry for this launch to $TILE_RECORD, once per process (nothing when
 * the variable is unset; one warning on stderr when the file cannot be written). */
void rt_record_launch(const TrtKernel *k, const TrtArg *args, const RtRecordKey *key, uint64_t mask);

#endif
