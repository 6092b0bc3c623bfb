# daemon/engine/parallel/local.mk: the parallel layouts: the rank's place in
# dp x tp x pp, tensor-parallel blocks, gradient sync and ZeRO-2/3's
# communication thread (libengine.a, a step needs them), the pipeline
# schedule, ZeRO-1 (and its mirror for restart.in_place), ZeRO-2/3 and the
# layouts' cost (libstorkd.a).
daemon_libengine_a_SOURCES += \
	daemon/engine/parallel/tensor_parallel.c daemon/engine/parallel/tensor_parallel.h \
	daemon/engine/parallel/layout.c daemon/engine/parallel/layout.h \
	daemon/engine/parallel/grad_sync.c daemon/engine/parallel/grad_sync.h \
	daemon/engine/parallel/comm_queue.c daemon/engine/parallel/comm_queue.h
daemon_libstorkd_a_SOURCES += \
	daemon/engine/parallel/pipeline.c daemon/engine/parallel/pipeline.h \
	daemon/engine/parallel/zero.c daemon/engine/parallel/zero.h \
	daemon/engine/parallel/zero_mirror.c daemon/engine/parallel/zero_mirror.h \
	daemon/engine/parallel/zero_paged.c daemon/engine/parallel/zero_paged.h \
	daemon/engine/parallel/layout_cost.c daemon/engine/parallel/layout_cost.h
