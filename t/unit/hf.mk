# t/unit/hf.mk: Hugging Face models in and out (see t/local.mk):
# safetensors files, config.json and the weights' names.
check_PROGRAMS += t/unit/check_safetensors
TESTS += t/unit/check_safetensors
t_unit_check_safetensors_SOURCES = t/unit/check_safetensors.c
t_unit_check_safetensors_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_safetensors_LDADD = $(UNIT_LIBS) -lm
check_PROGRAMS += t/unit/check_hf
TESTS += t/unit/check_hf
t_unit_check_hf_SOURCES = t/unit/check_hf.c
t_unit_check_hf_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_hf_LDADD = $(UNIT_LIBS)
