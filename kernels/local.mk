# Compute kernels: kernels/cpu (C on BLAS) and kernels/cuda (CUDA C) behind one
# interface. Only storkd and its tests link them, so a plain static library.
noinst_LIBRARIES += kernels/libkernels.a
kernels_libkernels_a_SOURCES = kernels/device.h kernels/cpu/device_cpu.c \
	kernels/ops.h kernels/math.h kernels/cpu/cpu.h kernels/cpu/ops_cpu.c \
	kernels/cpu/threads.c kernels/cpu/memory.c kernels/cpu/encoder.c \
	kernels/cpu/layernorm.c kernels/cpu/matmul.c kernels/cpu/attention.c \
	kernels/cpu/softmax_xent.c kernels/cpu/elementwise.c kernels/cpu/reduce.c \
	kernels/cpu/precision.c kernels/cpu/rmsnorm.c kernels/cpu/rope.c kernels/cpu/swiglu.c \
	kernels/cpu/vocab_parallel.c
# Vectorising the element-wise loops without changing a single result:
# -fno-math-errno lets sqrtf inline (errno is never read), -fno-trapping-math
# lets the clamps of math_exp become min/max (no code reads FP exception
# flags), and the dynamic cost model accepts loops that need a scalar
# epilogue (gcc 12's -O2 default refuses them). No reassociation: sums keep
# their written order. -ffp-contract=off: no fused multiply-adds, so the
# AVX-512, AVX2 and baseline clones of a loop (SIMD_CLONES in ops_cpu.c)
# compute the same bits. -fstrict-aliasing undoes the project's
# -fno-strict-aliasing here: without it a store to out[k] might change the
# argument struct the loop reads its pointers from, and gcc vectorised none
# of the element-wise loops (GELU, residual, AdamW ran scalar). The kernels
# never cast one pointer type to another; math.h reinterprets bits through
# unions only, which gcc defines under strict aliasing.
kernels_libkernels_a_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) -fno-math-errno -fno-trapping-math \
	-ftree-vectorize -fvect-cost-model=dynamic -ffp-contract=off -fstrict-aliasing
# What a program linking the kernels needs besides the archive itself.
KERNELS_LIBS = kernels/libkernels.a $(BLAS_LIBS) -lpthread -lm

# nvcc compiles every .cu file; the objects join the same archive.
CUDA_SOURCES = kernels/cuda/device_cuda.cu kernels/cuda/ops_cuda.cu kernels/cuda/check_cuda.cu \
	kernels/cuda/memory.cu kernels/cuda/encoder.cu kernels/cuda/layernorm.cu \
	kernels/cuda/matmul.cu kernels/cuda/attention.cu kernels/cuda/flash_attention.cu \
	kernels/cuda/flash_attention_mma.cu \
	kernels/cuda/softmax_xent.cu \
	kernels/cuda/elementwise.cu kernels/cuda/reduce.cu kernels/cuda/rmsnorm.cu \
	kernels/cuda/rope.cu kernels/cuda/swiglu.cu kernels/cuda/vocab_parallel.cu
EXTRA_DIST += kernels/cuda/common.cuh kernels/cuda/attention_head.cuh kernels/cuda/warp_mma.cuh
EXTRA_DIST += $(CUDA_SOURCES)
if HAVE_CUDA
# per-thread default streams: ranks that are threads of one process never
# serialise on the legacy stream (kernels/cuda/common.cuh)
# Machine code for Turing, Ampere and Hopper, and Hopper's PTX for later
# GPUs: the tensor-core tiles of the fused attention (WMMA bf16 and TF32)
# exist only in sm_80+ code, and a GPU running code built for an older one
# would fall back to its plain fp32 tiles.
AM_NVCCFLAGS = -O3 --default-stream per-thread -gencode arch=compute_75,code=sm_75 \
	-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
SUFFIXES += .cu
.cu.o:
	$(AM_V_GEN)$(MKDIR_P) $(@D) && $(NVCC) $(AM_NVCCFLAGS) $(NVCCFLAGS) -std=c++17 $(CUDA_CFLAGS) $(DEFS) \
		-I$(top_srcdir) -I$(top_builddir) -Xcompiler -Wall,-Wextra,-Werror -c -o $@ $<
kernels_libkernels_a_LIBADD = $(CUDA_SOURCES:.cu=.o)
KERNELS_LIBS += $(CUDA_LIBS) -lstdc++
CLEANFILES += $(CUDA_SOURCES:.cu=.o)
endif
