# lib/hf.mk: see lib/local.mk.
# Hugging Face models in and out: safetensors files read by byte range and
# written atomically; config.json.
lib_libstork_la_SOURCES += \
	lib/safetensors.c lib/safetensors.h
# config.json of GPT-2 and Llama models.
lib_libstork_la_SOURCES += \
	lib/hf_config.c lib/hf_config.h
