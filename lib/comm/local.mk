# lib/comm/local.mk: the collectives interface (lib/comm/comm.h), its in-node
# shared-memory backend, its UCX backend between processes and the
# hierarchical communicator that combines them (storkd's global one).
# An archive of its own, not part of libstork: only storkd and stork-engine
# (stork bench comm) use it; stork and the SPANK plugin must not load UCX.
# Link
#   $(COMM_LIBS) lib/libstork.la
noinst_LIBRARIES += lib/libcomm.a
lib_libcomm_a_SOURCES = \
	lib/comm/comm.c lib/comm/comm.h lib/comm/backend.h \
	lib/comm/shm.c lib/comm/ucx.c lib/comm/hier.c \
	lib/comm/device.c lib/comm/nccl.c
# The reduction loops of comm.c are written to vectorise; gcc 12's -O2 cost
# model refuses every loop that needs a scalar epilogue, so ask for the
# dynamic one. An element is still one addition (no reassociation): the
# same bits.
lib_libcomm_a_CFLAGS = $(AM_CFLAGS) $(UCX_CFLAGS) $(CUDA_CFLAGS) -ftree-vectorize \
	-fvect-cost-model=dynamic
COMM_LIBS = lib/libcomm.a $(UCX_LIBS) -lpthread
# the host backends alone (shared memory, UCX, hierarchical), for a program
# that moves no device buffers and loads no CUDA (daemon/storkd-program)
COMM_HOST_LIBS = lib/libcomm.a $(UCX_LIBS) -lpthread
if HAVE_CUDA
# device.c's NCCL path (lib/comm/nccl.c)
COMM_LIBS += $(CUDA_LIBS)
endif
