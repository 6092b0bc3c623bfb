# t/unit/config.mk: see t/local.mk.
check_PROGRAMS += t/unit/check_config t/unit/check_json t/unit/check_atomic t/unit/check_exit_info
TESTS += t/unit/check_config t/unit/check_json t/unit/check_atomic t/unit/check_exit_info
t_unit_check_config_SOURCES = t/unit/check_config.c
t_unit_check_config_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_config_LDADD = $(UNIT_LIBS)
t_unit_check_json_SOURCES = t/unit/check_json.c
t_unit_check_json_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_json_LDADD = $(UNIT_LIBS)
t_unit_check_exit_info_SOURCES = t/unit/check_exit_info.c
t_unit_check_exit_info_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_exit_info_LDADD = $(UNIT_LIBS)
check_PROGRAMS += t/unit/check_tfevents
TESTS += t/unit/check_tfevents
t_unit_check_tfevents_SOURCES = t/unit/check_tfevents.c
t_unit_check_tfevents_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_tfevents_LDADD = $(UNIT_LIBS)
check_PROGRAMS += t/unit/check_figures_cache
TESTS += t/unit/check_figures_cache
t_unit_check_figures_cache_SOURCES = t/unit/check_figures_cache.c
t_unit_check_figures_cache_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_figures_cache_LDADD = $(UNIT_LIBS)
t_unit_check_atomic_SOURCES = t/unit/check_atomic.c
t_unit_check_atomic_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_atomic_LDADD = $(UNIT_LIBS)
EXTRA_DIST += \
	t/data/config/empty.yaml \
	t/data/config/err_beta_range.yaml \
	t/data/config/err_bool.yaml \
	t/data/config/err_duplicate.yaml \
	t/data/config/err_glob_item.yaml \
	t/data/config/err_heads_channels.yaml \
	t/data/config/err_lr_schedule.yaml \
	t/data/config/err_malformed.yaml \
	t/data/config/err_negative_size.yaml \
	t/data/config/err_no_train.yaml \
	t/data/config/err_not_integer.yaml \
	t/data/config/err_not_number.yaml \
	t/data/config/err_quoted_integer.yaml \
	t/data/config/err_root_list.yaml \
	t/data/config/err_section_scalar.yaml \
	t/data/config/err_signal.yaml \
	t/data/config/err_two_documents.yaml \
	t/data/config/err_unknown_key.yaml \
	t/data/config/err_unknown_section.yaml \
	t/data/config/err_zero.yaml t/data/config/err_device.yaml t/data/config/err_precision.yaml t/data/config/err_nonfinite.yaml \
	t/data/config/err_zero_size.yaml \
	t/data/config/full.yaml \
	t/data/config/reordered.yaml \
	t/data/ckpt-v1/tiny.yaml t/data/ckpt-v1/data/docs_train.bin t/data/ckpt-v1/data/docs_val.bin \
	t/data/ckpt-v1/step_00000002/manifest.json t/data/ckpt-v1/step_00000002/model.bin \
	t/data/ckpt-v1/step_00000002/optimizer.bin t/data/ckpt-v1/step_00000002/state.json

# The requeue's scontrol fallback, with a fake scontrol built beside it.
check_PROGRAMS += t/unit/check_slurm_job t/unit/fake/scontrol
TESTS += t/unit/check_slurm_job
t_unit_check_slurm_job_SOURCES = t/unit/check_slurm_job.c
t_unit_check_slurm_job_CFLAGS = $(UNIT_CFLAGS) -DFAKE_SCONTROL_DIR='"$(abs_top_builddir)/t/unit/fake"'
t_unit_check_slurm_job_LDADD = lib/libstork_slurm.a $(UNIT_LIBS) $(SLURM_LIBS)
t_unit_fake_scontrol_SOURCES = t/unit/fake/scontrol.c
check_PROGRAMS += t/unit/check_metrics_line
TESTS += t/unit/check_metrics_line
t_unit_check_metrics_line_SOURCES = t/unit/check_metrics_line.c
t_unit_check_metrics_line_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_metrics_line_LDADD = $(UNIT_LIBS)
