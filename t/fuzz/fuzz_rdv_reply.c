/*
 * t/fuzz/fuzz_rdv_reply.c - what a launcher of the TCP rendezvous reads
 * back from whatever answers on MASTER_ADDR:MASTER_PORT
 * (lib/rendezvous/rendezvous_tcp.c): a reply header, its credential, then the table
 * of every launcher's blob or launcher 0's error message; a table is then
 * read blob by blob as join_run does (daemon/node/join.c).
 *
 * The reader is launcher 1 of job 4242 step 7 on port 29500, three
 * launchers; credentials are keyed by the job's secret (fuzz_rdv_secret).
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "daemon/node/join.h"
#include "lib/rendezvous/rendezvous_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdv_params p = { .index = 1, .count = COUNT, .method = RDV_TCP, .port = 29500,
				.addr = "n1", .job_id = 4242, .step_id = 7 };
	struct rdv_peer peers[COUNT];
	struct run_node nodes[COUNT];
	char err[1024];

	fuzz_quiet();
	snprintf(p.secret_file, sizeof p.secret_file, "%s", fuzz_rdv_secret());
	memset(peers, 0, sizeof peers);
	memset(nodes, 0, sizeof nodes);
	if (rdv_tcp_reply_parse(&p, data, size, peers, err, sizeof err) == 0)
		for (int i = 0; i < COUNT; i++)
			if (join_parse_blob(&peers[i], &nodes[i], err, sizeof err) < 0)
				break;
	for (int i = 0; i < COUNT; i++) {
		json_decref(nodes[i].bindings);
		free(peers[i].blob);
	}
	return 0;
}
