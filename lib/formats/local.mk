# lib/formats/local.mk: file formats read and written by several programs
# (in lib/libstork.la): the JSON helpers, token shards, and Hugging Face
# models in and out: safetensors files read by byte range and written
# atomically, config.json of GPT-2 and Llama models and where their weights
# are named.
lib_libstork_la_SOURCES += \
	lib/formats/stork_json.c lib/formats/stork_json.h \
	lib/formats/token_shard.c lib/formats/token_shard.h \
	lib/formats/safetensors.c lib/formats/safetensors.h \
	lib/formats/hf_config.c lib/formats/hf_config.h \
	lib/formats/hf_names.c lib/formats/hf_names.h \
	lib/formats/tfevents.c lib/formats/tfevents.h
