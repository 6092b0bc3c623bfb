/*
 * t/integration/pmix_hello.c - proves PMIx works across the test cluster.
 *
 * Every task publishes its host name, fences with data collection, then reads
 * the host name of the next rank (rank+1 mod size) and prints
 *   rank R of N on HOST, rank P is on PEERHOST
 * so one line per node shows both that ranks are right and that data crossed
 * between the nodes' PMIx servers.
 */
#include "config.h"

#include <pmix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HOST_KEY "stork.test.host"

static int fail(const char *what, pmix_status_t rc)
{
	fprintf(stderr, "pmix_hello: %s: %s\n", what, PMIx_Error_string(rc));
	return 1;
}

int main(void)
{
	pmix_proc_t me, wildcard, peer;
	pmix_value_t value, *got = NULL;
	pmix_info_t collect;
	pmix_status_t rc;
	char host[256];
	uint32_t size;
	bool yes = true;

	if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS)
		return fail("PMIx_Init", rc);

	PMIX_PROC_CONSTRUCT(&wildcard);
	PMIX_LOAD_PROCID(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
	if ((rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &got)) != PMIX_SUCCESS)
		return fail("PMIx_Get(PMIX_JOB_SIZE)", rc);
	size = got->data.uint32;
	PMIX_VALUE_RELEASE(got);

	gethostname(host, sizeof host);
	value.type = PMIX_STRING;
	value.data.string = host;
	if ((rc = PMIx_Put(PMIX_GLOBAL, HOST_KEY, &value)) != PMIX_SUCCESS)
		return fail("PMIx_Put", rc);
	if ((rc = PMIx_Commit()) != PMIX_SUCCESS)
		return fail("PMIx_Commit", rc);
	PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	if ((rc = PMIx_Fence(&wildcard, 1, &collect, 1)) != PMIX_SUCCESS)
		return fail("PMIx_Fence", rc);

	PMIX_PROC_CONSTRUCT(&peer);
	PMIX_LOAD_PROCID(&peer, me.nspace, (me.rank + 1) % size);
	if ((rc = PMIx_Get(&peer, HOST_KEY, NULL, 0, &got)) != PMIX_SUCCESS)
		return fail("PMIx_Get(peer host)", rc);
	printf("rank %u of %u on %s, rank %u is on %s\n", me.rank, size, host, peer.rank,
	       got->data.string);
	fflush(stdout);
	PMIX_VALUE_RELEASE(got);
	PMIx_Finalize(NULL, 0);
	return 0;
}
