# daemon/engine/local.mk: storkd's training engine. Two archives, so that
# the unit tests, stork-engine and bench-train link the same code as storkd:
#   daemon/libengine.a  the model and what a step needs of it alone (model/,
#                       the tensor-parallel pieces and gradient sync of
#                       parallel/, bench/); link $(ENGINE_LIBS) lib/libstork.la
#   daemon/libstorkd.a  the rank's life around it (train/, checkpoint/, the
#                       pipeline and ZeRO of parallel/; see daemon/local.mk)
#   daemon/libdata.a    the token-shard loader (data/), before lib/libstork.la
# Each folder adds its files in its own local.mk.
noinst_LIBRARIES += daemon/libengine.a
daemon_libengine_a_SOURCES =
daemon_libengine_a_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS)
ENGINE_LIBS = daemon/libengine.a $(KERNELS_LIBS) $(COMM_LIBS)

include daemon/engine/model/local.mk
include daemon/engine/parallel/local.mk
include daemon/engine/train/local.mk
include daemon/engine/checkpoint/local.mk
include daemon/engine/data/local.mk
include daemon/engine/bench/local.mk
