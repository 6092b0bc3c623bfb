# lib/hf.mk: see lib/local.mk.
# Hugging Face models in and out: safetensors files read by byte range and
# written atomically; config.json; the weights' names.
lib_libstork_la_SOURCES += \
	lib/safetensors.c lib/safetensors.h
# config.json of GPT-2 and Llama models, and where their weights are named.
lib_libstork_la_SOURCES += \
	lib/hf_config.c lib/hf_config.h \
	lib/hf_names.c lib/hf_names.h
