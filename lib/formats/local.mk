# lib/formats/local.mk: see lib/local.mk.
# Hugging Face models in and out: safetensors files read by byte range and
# written atomically; config.json; the weights' names.
lib_libstork_la_SOURCES += \
	lib/formats/safetensors.c lib/formats/safetensors.h
# config.json of GPT-2 and Llama models, and where their weights are named.
lib_libstork_la_SOURCES += \
	lib/formats/hf_config.c lib/formats/hf_config.h \
	lib/formats/hf_names.c lib/formats/hf_names.h
