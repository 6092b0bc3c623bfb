# t/unit/hf.mk: Hugging Face models in and out (see t/local.mk):
# safetensors files, config.json and the weights' names. The files and
# config.json are also held against t/tools/safetensors_ref.py, a second
# implementation in Python (standard library only).
HF_UNIT_CFLAGS = $(UNIT_CFLAGS) -DSTORK_TEST_TOOLS='"$(abs_top_srcdir)/t/tools"'
check_PROGRAMS += t/unit/check_safetensors
TESTS += t/unit/check_safetensors
t_unit_check_safetensors_SOURCES = t/unit/check_safetensors.c
t_unit_check_safetensors_CFLAGS = $(HF_UNIT_CFLAGS)
t_unit_check_safetensors_LDADD = $(UNIT_LIBS)
EXTRA_DIST += t/tools/safetensors_ref.py
check_PROGRAMS += t/unit/check_hf
TESTS += t/unit/check_hf
t_unit_check_hf_SOURCES = t/unit/check_hf.c
t_unit_check_hf_CFLAGS = $(HF_UNIT_CFLAGS)
t_unit_check_hf_LDADD = $(UNIT_LIBS)
# The engine's gradients of a Hugging Face model, for t/tools/llama_ref.py
# (PyTorch) to check (t/train/llama.bats).
check_PROGRAMS += t/tools/model_grads
t_tools_model_grads_SOURCES = t/tools/model_grads.c
t_tools_model_grads_LDADD = $(ENGINE_LIBS) lib/libstork.la
EXTRA_DIST += t/tools/llama_ref.py
