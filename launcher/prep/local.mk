# launcher/prep/local.mk: stork prep, text into token shards, with the
# tokenizers (GPT-2's BPE, tiktoken files, Hugging Face tokenizer.json).
launcher_stork_SOURCES += \
	launcher/prep/prep.c launcher/prep/prep.h \
	launcher/prep/prep_tokens.c launcher/prep/prep_tokens.h \
	launcher/prep/tokenizer.c launcher/prep/tokenizer.h \
	launcher/prep/tokenizer_load.c launcher/prep/tokenizer_impl.h
