/*
 * t/fuzz/fuzz_join_blob.c - one daemon's blob as every storkd reads it
 * after the rendezvous, PMIx or TCP (daemon/node/join.c): magic, the
 * description and the bindings as length-prefixed JSON, the UCX address.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/node/join.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the rendezvous hands each blob over in a buffer of its own */
	struct rdv_peer peer = { .index = 1, .len = size, .blob = malloc(size ? size : 1) };
	struct run_node node = { 0 };
	char err[1024];

	if (!peer.blob)
		abort();
	memcpy(peer.blob, data, size);
	join_parse_blob(&peer, &node, err, sizeof err);
	json_decref(node.bindings);
	free(peer.blob);
	return 0;
}
