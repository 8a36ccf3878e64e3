/* What the runtime's cmocka tests share (test_runtime.c, test_cuda_graph.c,
 * test_tune.c): a call that must succeed, and the two kernels most cases launch, a
 * .tile vector add and a hand-written PTX `scale`. Include after cmocka.h and
 * rt_internal.h. */
#ifndef TILE_TESTS_UNIT_RT_TEST_H
#define TILE_TESTS_UNIT_RT_TEST_H

/* A call that must succeed; its message is printed if it does not. */
#define assert_ok(call)                                                           \
    do {                                                                          \
        TrtStatus s_ = (call);                                                    \
        if (s_) fprintf(stderr, "%s: %s\n", trt_status_name(s_), trt_last_error()); \
        assert_int_equal(s_, TRT_SUCCESS);                                        \
    } while (0)

#define RT_TEST_UNUSED __attribute__((unused))

static const char vector_add_src[] RT_TEST_UNUSED =
    "kernel vector_add(c: *f32, a: *f32, b: *f32, n: i32, const BLOCK: i32 = 1024)\n"
    "    grid(cdiv(n, BLOCK))\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    let mask = offs < n;\n"
    "    store(c + offs, load(a + offs, mask) + load(b + offs, mask), mask);\n"
    "}\n";

static const char ptx_src[] RT_TEST_UNUSED =
    ".version 8.3\n.target sm_90a\n.address_size 64\n"
    ".visible .entry scale(.param .u64 x, .param .u32 n, .param .f32 s, .param .u64 m)\n"
    "{\n\tret;\n}\n";

static const IrElem scale_params[] RT_TEST_UNUSED = {IR_PTR, IR_I32, IR_F32, IR_I64};
static const char *const scale_names[] RT_TEST_UNUSED = {"x", "n", "s", "m"};
static const RtPtxKernel scale_kernel RT_TEST_UNUSED = {"scale", scale_params, scale_names, 4, 128};

#endif
