/* Device code for the GPU tests, as PTX the driver compiles at load time
 * (so the tests need no nvcc): strata_spin(ns) busy-waits on the GPU's
 * global timer for ns nanoseconds; strata_fault() stores to address 0. */
#ifndef TESTS_CUDA_GPU_PTX_H
#define TESTS_CUDA_GPU_PTX_H

static const char gpu_ptx[] = ".version 7.0\n"
                              ".target sm_70\n"
                              ".address_size 64\n"
                              "\n"
                              ".visible .entry strata_spin(.param .u64 ns)\n"
                              "{\n"
                              "    .reg .pred %p;\n"
                              "    .reg .b64 %rd<5>;\n"
                              "    ld.param.u64 %rd1, [ns];\n"
                              "    mov.u64 %rd2, %globaltimer;\n"
                              "    add.u64 %rd3, %rd2, %rd1;\n"
                              "$L_spin:\n"
                              "    mov.u64 %rd4, %globaltimer;\n"
                              "    setp.lt.u64 %p, %rd4, %rd3;\n"
                              "    @%p bra $L_spin;\n"
                              "    ret;\n"
                              "}\n"
                              "\n"
                              ".visible .entry strata_fault()\n"
                              "{\n"
                              "    .reg .b64 %rd<2>;\n"
                              "    .reg .b32 %r<2>;\n"
                              "    mov.u64 %rd1, 0;\n"
                              "    mov.u32 %r1, 1;\n"
                              "    st.global.u32 [%rd1], %r1;\n"
                              "    ret;\n"
                              "}\n";

#endif
