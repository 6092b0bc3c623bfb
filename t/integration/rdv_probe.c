/*
 * t/integration/rdv_probe.c - one launcher of a rendezvous, for the tests on
 * the test cluster (t/integration/rendezvous.bats).
 *
 *   rdv_probe [-m auto|pmix|tcp] [-t TIMEOUT] [-b BYTES] [-a INDEX -s SECONDS]
 *             [-d INDEX:SECONDS] [-v]
 *
 * Run as every task of a step (srun -N2 -n4 [--mpi=pmix] rdv_probe). Each
 * task contributes "index=I host=H" plus BYTES bytes of a pattern, and prints
 *   launcher I of N on HOST via METHOD in MS ms: 0=n1 1=n1 2=n2 3=n2
 * after checking that every slot holds the blob of the launcher it belongs
 * to. With -a, launcher INDEX sleeps SECONDS instead of joining (a launcher
 * that never arrives); with -d, launcher INDEX joins SECONDS late; with -v,
 * launcher 0 first prints "rdv_probe: job J step S: launcher 0 at HOST:PORT".
 * On failure it prints
 *   rdv_probe: launcher I on HOST failed after S s: MESSAGE
 * and exits with STORK_EXIT_RENDEZVOUS.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/exit_codes.h"
#include "lib/rendezvous/rendezvous.h"

struct options {
	enum rdv_method method;
	double timeout;
	size_t bytes;
	int absent;
	double absent_sleep;
	int late;               /* -d INDEX:SECONDS: this launcher joins late */
	double late_s;
	int verbose;            /* -v: say where the rendezvous is, first */
};

static int parse(int argc, char **argv, struct options *o)
{
	int c;

	*o = (struct options){ .method = RDV_AUTO, .timeout = 30, .absent = -1, .absent_sleep = 10,
			       .late = -1 };
	while ((c = getopt(argc, argv, "m:t:b:a:s:d:v")) != -1) {
		switch (c) {
		case 'm':
			if (rdv_method_parse(optarg, &o->method) < 0)
				return -1;
			break;
		case 't': o->timeout = atof(optarg); break;
		case 'b': o->bytes = strtoul(optarg, NULL, 10); break;
		case 'a': o->absent = atoi(optarg); break;
		case 's': o->absent_sleep = atof(optarg); break;
		case 'd':
			if (sscanf(optarg, "%d:%lf", &o->late, &o->late_s) != 2)
				return -1;
			break;
		case 'v': o->verbose = 1; break;
		default: return -1;
		}
	}
	return 0;
}

static unsigned char pattern(int index, size_t k)
{
	return (unsigned char)(index * 131 + k * 7);
}

/* "index=I host=H\0" then bytes of pattern. */
static char *make_blob(int index, const char *host, size_t bytes, size_t *len)
{
	char head[300];
	int n = snprintf(head, sizeof head, "index=%d host=%s", index, host);
	char *b = malloc((size_t)n + 1 + bytes);

	if (!b)
		return NULL;
	memcpy(b, head, (size_t)n + 1);
	for (size_t k = 0; k < bytes; k++)
		b[n + 1 + k] = (char)pattern(index, k);
	*len = (size_t)n + 1 + bytes;
	return b;
}

/* The host in slot i's blob, or NULL when the blob is not launcher i's. */
static const char *check_blob(const struct rdv_peer *peer, int i, size_t bytes)
{
	const char *b = peer->blob;
	size_t head = strnlen(b, peer->len);
	char want[32];
	int n = snprintf(want, sizeof want, "index=%d host=", i);

	if (head == peer->len || strncmp(b, want, (size_t)n) != 0 || peer->len != head + 1 + bytes)
		return NULL;
	for (size_t k = 0; k < bytes; k++)
		if ((unsigned char)b[head + 1 + k] != pattern(i, k))
			return NULL;
	return b + n;
}

int main(int argc, char **argv)
{
	struct options o;
	struct rdv_params p;
	struct rdv_result r;
	char host[256], err[4096];
	size_t len;
	char *blob;

	if (parse(argc, argv, &o) < 0) {
		fprintf(stderr, "usage: rdv_probe [-m auto|pmix|tcp] [-t TIMEOUT] [-b BYTES] "
			"[-a INDEX -s SECONDS] [-d INDEX:SECONDS] [-v]\n");
		return STORK_EXIT_USAGE;
	}
	gethostname(host, sizeof host);
	if (rdv_params_from_env(&p, o.method, o.timeout, err, sizeof err) < 0) {
		fprintf(stderr, "rdv_probe: %s\n", err);
		return STORK_EXIT_RENDEZVOUS;
	}
	if (p.index == o.absent) {
		usleep((useconds_t)(o.absent_sleep * 1e6));
		return 0;
	}
	if (o.verbose && p.index == 0) {
		printf("rdv_probe: job %u step %u: launcher 0 at %s:%u\n", p.job_id, p.step_id, p.addr,
		       p.port);
		fflush(stdout);
	}
	if (p.index == o.late)
		usleep((useconds_t)(o.late_s * 1e6));
	if (!(blob = make_blob(p.index, host, o.bytes, &len)))
		return STORK_EXIT_INTERNAL;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (rdv_exchange(&p, blob, len, &r, err, sizeof err) < 0) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		fprintf(stderr, "rdv_probe: launcher %d on %s failed after %.1f s: %s\n", p.index, host,
			(double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, err);
		free(blob);
		rdv_finalize();
		return STORK_EXIT_RENDEZVOUS;
	}
	free(blob);
	char line[8192];
	int off = snprintf(line, sizeof line, "launcher %d of %d on %s via %s in %.3f ms:", p.index,
			   r.n, host, r.method, r.seconds * 1e3);
	for (int i = 0; i < r.n; i++) {
		const char *h = check_blob(&r.peers[i], i, o.bytes);
		if (!h) {
			fprintf(stderr, "rdv_probe: launcher %d: slot %d does not hold launcher %d's blob\n",
				p.index, i, i);
			return STORK_EXIT_INTERNAL;
		}
		if (off < (int)sizeof line)
			off += snprintf(line + off, sizeof line - (size_t)off, " %d=%s", i, h);
	}
	printf("%s\n", line);
	rdv_result_free(&r);
	rdv_finalize();
	return 0;
}
