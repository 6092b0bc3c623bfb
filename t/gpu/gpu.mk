# t/gpu/gpu.mk: the GPU tests (see t/local.mk). They exit 77 (skipped)
# without a visible GPU; on a GPU machine without Stork's build
# dependencies, t/gpu/run builds and runs the same programs.
EXTRA_DIST += t/gpu/run t/gpu/run-builds
if HAVE_CUDA
check_PROGRAMS += t/gpu/check_ops_cuda t/gpu/check_train_cuda t/gpu/check_nvml_gpu
TESTS += t/gpu/check_ops_cuda t/gpu/check_train_cuda t/gpu/check_nvml_gpu t/gpu/run-builds
t_gpu_check_ops_cuda_SOURCES = t/gpu/check_ops_cuda.c
t_gpu_check_ops_cuda_CFLAGS = $(UNIT_CFLAGS) $(BLAS_CFLAGS) $(CUDA_CFLAGS)
t_gpu_check_ops_cuda_LDADD = $(KERNELS_LIBS) $(UNIT_LIBS)
t_gpu_check_train_cuda_SOURCES = t/gpu/check_train_cuda.c
t_gpu_check_train_cuda_CFLAGS = $(UNIT_CFLAGS) $(BLAS_CFLAGS) $(CUDA_CFLAGS)
t_gpu_check_train_cuda_LDADD = $(ENGINE_LIBS) $(UNIT_LIBS)
t_gpu_check_nvml_gpu_SOURCES = t/gpu/check_nvml_gpu.c daemon/node/nvml.c
t_gpu_check_nvml_gpu_CFLAGS = $(UNIT_CFLAGS) $(BLAS_CFLAGS) $(CUDA_CFLAGS)
t_gpu_check_nvml_gpu_LDADD = $(KERNELS_LIBS) $(UNIT_LIBS) -ldl
endif
