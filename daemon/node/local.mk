# daemon/node/local.mk: what storkd and storkd-program both do to start a
# node: the node's result to the launcher, the daemons' join, the rank logs,
# restart.in_place's regroup of the nodes that remain and the rejoin of a
# lost one, and the node's figures: its GPUs' from NVML and all of them for
# Prometheus (in daemon/libstorkd.a).
daemon_libstorkd_a_SOURCES += \
	daemon/node/rank_log.c daemon/node/rank_log.h \
	daemon/node/join.c daemon/node/join.h \
	daemon/node/node_result.c daemon/node/node_result.h \
	daemon/node/node.c daemon/node/node.h \
	daemon/node/regroup.c daemon/node/regroup.h \
	daemon/node/rejoin.c daemon/node/rejoin.h \
	daemon/node/prometheus.c daemon/node/prometheus.h \
	daemon/node/tensorboard.c daemon/node/tensorboard.h \
	daemon/node/nvml.c daemon/node/nvml.h
