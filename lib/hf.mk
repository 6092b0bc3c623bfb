# lib/hf.mk: see lib/local.mk.
# Hugging Face models in and out: safetensors files read by byte range and
# written atomically.
lib_libstork_la_SOURCES += \
	lib/safetensors.c lib/safetensors.h
