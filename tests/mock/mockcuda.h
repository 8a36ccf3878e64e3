/* The mock CUDA driver's own queries, for tests (tests/mock/mockcuda.c).
 *
 * The runtime loads the mock with dlopen($TILE_CUDA_LIBRARY); a test reaches these
 * functions by dlopen'ing the same path (which returns the same handle) and dlsym. */
#ifndef TILE_TESTS_MOCK_MOCKCUDA_H
#define TILE_TESTS_MOCK_MOCKCUDA_H

#include <stdint.h>

#define MOCK_MAX_PARAMS 64

#define MOCK_MAX_TMA 4

/* What the mock's cuTensorMapEncodeTiled writes into a CUtensorMap's 128 bytes: its
 * arguments, after the checks the real driver makes (an address 16-byte aligned, strides
 * multiples of 16, extents in 1..2^32, boxes of 1..256 whose inner extent fits the
 * swizzle). */
typedef struct MockTensorMap {
    char magic[8];                       /* "mocktma" */
    uint64_t address;
    uint32_t dtype, rank, interleave, swizzle, l2_promotion, oob_fill;
    uint64_t dims[3], strides[2];
    uint32_t box[3], elem_strides[3];
    uint8_t unused[24];                  /* to the 128 bytes of a CUtensorMap */
} MockTensorMap;

typedef struct MockLaunch {
    char func[64];                       /* the kernel's .entry name */
    unsigned grid[3], block[3], shmem;
    unsigned cluster;                    /* the .entry's .reqnctapercluster x (0: none) */
    void *stream;
    int nparams;                         /* from the .entry's .param list */
    int param_bytes[MOCK_MAX_PARAMS];
    uint64_t params[MOCK_MAX_PARAMS];    /* each value, zero-extended (0 for the 128-byte ones) */
    int ntma;                            /* parameters of 128 bytes (tensor maps), in order */
    MockTensorMap tma[MOCK_MAX_TMA];
} MockLaunch;

typedef struct MockCounts {
    int init, retains, releases, set_current;
    int ptx_loads, cubin_loads, unloads, links, launches;
    int graph_launches;                  /* cuGraphLaunch calls (each node counts in launches) */
    int cluster_queries;                 /* cuOccupancyMaxActiveClusters calls that passed its checks */
} MockCounts;

/* What the last cuOccupancyMaxActiveClusters that passed its checks was asked. */
typedef struct MockClusterQuery {
    unsigned cluster;                    /* the cluster dimension's x */
    unsigned grid_x, block_x, shmem;
} MockClusterQuery;

typedef void (*MockCountsFn)(MockCounts *out);
typedef void (*MockLastLaunchFn)(MockLaunch *out);
typedef void (*MockResetFn)(void);
typedef int (*MockLaunchLogFn)(MockLaunch *out, int max);
typedef void (*MockLastClusterQueryFn)(MockClusterQuery *out);

/* Exported by the mock as mockcuda_counts, mockcuda_last_launch, mockcuda_launch_log, mockcuda_reset
 * (which also ends a sticky fault made by MOCKCUDA_SYNC_ERROR). */
void mockcuda_counts(MockCounts *out);
void mockcuda_last_launch(MockLaunch *out);
void mockcuda_reset(void);
/* Copies the first launches since the last reset (at most max, the log keeps 256) to
 * out and returns how many launches there were. */
int mockcuda_launch_log(MockLaunch *out, int max);
/* The last cuOccupancyMaxActiveClusters query that passed the mock's checks (zeros after
 * a reset). */
void mockcuda_last_cluster_query(MockClusterQuery *out);

#endif
