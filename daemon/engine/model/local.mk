# daemon/engine/model/local.mk: the transformer (GPT-2 and Llama blocks in
# arch/), its parameters, passes and files, Hugging Face in and out, AdamW.
daemon_libengine_a_SOURCES += \
	daemon/engine/model/model_config.c daemon/engine/model/model_shape.c \
	daemon/engine/model/model.c daemon/engine/model/model.h daemon/engine/model/model_internal.h \
	daemon/engine/model/model_file.c daemon/engine/model/model_pass.c \
	daemon/engine/model/arch/arch.h daemon/engine/model/arch/arch.c daemon/engine/model/arch/blocks.c \
	daemon/engine/model/arch/gpt2.c daemon/engine/model/arch/llama.c \
	daemon/engine/model/hf_model.c daemon/engine/model/hf_model.h \
	daemon/engine/model/optimizer.c daemon/engine/model/optimizer.h
