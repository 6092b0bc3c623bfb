/*
 * daemon/engine/model/arch/arch.c - which architecture a configuration
 * names (see arch.h). Above the architectures, so that the pieces they
 * share (blocks.c) never depend on them.
 */
#include "config.h"
#include "daemon/engine/model/arch/arch.h"

const struct arch *arch_of(const struct gpt2_config *c)
{
	return c->arch == MODEL_LLAMA ? &arch_llama : &arch_gpt2;
}
