# daemon/engine/checkpoint/local.mk: checkpoints: the format and its
# resharding, the background writer, a rank's checkpoint (synchronous,
# asynchronous, node-local tier) (in daemon/libstorkd.a).
daemon_libstorkd_a_SOURCES += \
	daemon/engine/checkpoint/checkpoint.c daemon/engine/checkpoint/checkpoint.h \
	daemon/engine/checkpoint/checkpoint_format.h daemon/engine/checkpoint/checkpoint_reshard.c \
	daemon/engine/checkpoint/ckpt_writer.c daemon/engine/checkpoint/ckpt_writer.h \
	daemon/engine/checkpoint/train_checkpoint_state.c daemon/engine/checkpoint/train_checkpoint.c \
	daemon/engine/checkpoint/train_checkpoint_async.c daemon/engine/checkpoint/train_checkpoint_local.c \
	daemon/engine/checkpoint/train_checkpoint_step.c \
	daemon/engine/checkpoint/checkpoint_schedule.c daemon/engine/checkpoint/checkpoint_schedule.h
