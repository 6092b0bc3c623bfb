# daemon/engine/train/local.mk: a training rank's life: start-up, the step,
# the stop decision, progress and telemetry, its device, loss-spike guard,
# preflight, hang report and recovery after a lost node (in
# daemon/libstorkd.a).
daemon_libstorkd_a_SOURCES += \
	daemon/engine/train/train.c daemon/engine/train/train.h \
	daemon/engine/train/train_rank.c daemon/engine/train/train_rank.h \
	daemon/engine/train/train_start.c daemon/engine/train/train_step.c \
	daemon/engine/train/train_recover.c daemon/engine/train/train_recover_zero.c \
	daemon/engine/train/train_stop.c daemon/engine/train/train_progress.c \
	daemon/engine/train/train_device.c daemon/engine/train/train_guard.c \
	daemon/engine/train/train_telemetry.c \
	daemon/engine/train/spike.c daemon/engine/train/spike.h \
	daemon/engine/train/hang_report.c daemon/engine/train/hang_report.h \
	daemon/engine/train/preflight_probe.c daemon/engine/train/preflight_probe.h \
	daemon/engine/train/preflight_verdict.c daemon/engine/train/preflight_verdict.h
