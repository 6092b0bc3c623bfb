/*
 * t/fuzz/fuzz_rdv_hello.c - what launcher 0 of the TCP rendezvous reads
 * from a connection anyone can open (lib/rendezvous/rendezvous_tcp.c): the input is
 * all a peer sends before it closes the connection. Launcher 0 checks the
 * hello's header against its step, then its credential, and only then
 * reads the blob the credential vouches for; an accepted blob is read as
 * join_run reads every launcher's (daemon/node/join.c).
 *
 * Launcher 0 here serves job 4242 step 7 on port 29500, four launchers,
 * launcher 2 already in; credentials are keyed by the job's secret
 * (fuzz_rdv_secret), so that the seeds' verify and mutations of them are
 * a stranger's.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/node/join.h"
#include "lib/rendezvous/rendezvous_impl.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdv_params p = { .index = 0, .count = 4, .method = RDV_TCP, .port = 29500,
				.addr = "n1", .job_id = 4242, .step_id = 7 };
	bool arrived[4] = { true, false, true, false };
	struct run_node node = { 0 };
	struct rdv_peer peer;
	char err[1024];

	fuzz_quiet();
	snprintf(p.secret_file, sizeof p.secret_file, "%s", fuzz_rdv_secret());
	if (rdv_tcp_hello_parse(&p, data, size, arrived, &peer) < 0)
		return 0;
	join_parse_blob(&peer, &node, err, sizeof err);
	json_decref(node.bindings);
	free(peer.blob);
	return 0;
}
