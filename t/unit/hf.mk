# t/unit/hf.mk: Hugging Face models in and out (see t/local.mk).
check_PROGRAMS += t/unit/check_safetensors
TESTS += t/unit/check_safetensors
t_unit_check_safetensors_SOURCES = t/unit/check_safetensors.c
t_unit_check_safetensors_CFLAGS = $(UNIT_CFLAGS)
t_unit_check_safetensors_LDADD = $(UNIT_LIBS) -lm
