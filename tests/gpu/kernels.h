/* Hand-written PTX kernels for the GPU tests and the launch benchmark: they need no
 * code generator, and .target sm_80 runs on every GPU since Ampere (the H200 too). */
#ifndef TILE_TESTS_GPU_KERNELS_H
#define TILE_TESTS_GPU_KERNELS_H

/* add_one(x: *f32, n: u32): x[i] += 1 for i < n, i = ctaid.x * ntid.x + tid.x.
 * empty(x: *f32, n: u32): returns at once (the launch benchmark's kernel). */
static const char gpu_test_ptx[] =
    ".version 8.0\n"
    ".target sm_80\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry add_one(.param .u64 add_one_x, .param .u32 add_one_n)\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .f32 %f<3>;\n"
    "    .reg .b64 %rd<5>;\n"
    "    ld.param.u64 %rd1, [add_one_x];\n"
    "    ld.param.u32 %r2, [add_one_n];\n"
    "    mov.u32 %r3, %ctaid.x;\n"
    "    mov.u32 %r4, %ntid.x;\n"
    "    mov.u32 %r5, %tid.x;\n"
    "    mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "    setp.ge.u32 %p1, %r1, %r2;\n"
    "    @%p1 bra DONE;\n"
    "    cvta.to.global.u64 %rd2, %rd1;\n"
    "    mul.wide.u32 %rd3, %r1, 4;\n"
    "    add.s64 %rd4, %rd2, %rd3;\n"
    "    ld.global.f32 %f1, [%rd4];\n"
    "    add.f32 %f2, %f1, 0f3F800000;\n"
    "    st.global.f32 [%rd4], %f2;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n"
    "\n"
    ".visible .entry empty(.param .u64 empty_x, .param .u32 empty_n)\n"
    "{\n"
    "    ret;\n"
    "}\n";

#endif
