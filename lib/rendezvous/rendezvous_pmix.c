/*
 * lib/rendezvous/rendezvous_pmix.c - the rendezvous under `srun --mpi=pmix`.
 *
 * Each launcher is a PMIx client of its node's slurmstepd. It puts its blob
 * (prefixed with its index, so even an empty blob is a non-empty byte object
 * and every slot can be checked) under one key per exchange with PMIX_GLOBAL
 * scope, commits, and joins a fence over the whole namespace that collects
 * the data; the other launchers' blobs are then local and PMIx_Get returns
 * them at once. Slurm's PMIX_NODEID of remote ranks is not trusted (Slurm
 * 22.05 gets it wrong): hosts travel inside the blobs.
 *
 * The fence runs non-blocking and is waited for with our own deadline, so a
 * launcher that never arrives cannot hold us past the timeout whatever the
 * server's own timeouts are. When the fence fails or times out, every other
 * launcher's key is asked for once more directly (a direct modex through the
 * servers, in the last tenth of the timeout, at most 1 s, kept for it): those
 * that answer had arrived, the others are named as missing.
 */
#include "config.h"

#include <endian.h>
#include <math.h>
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/rendezvous/rendezvous_impl.h"

/* The end of the timeout kept for asking who arrived, so that the whole
 * failure fits in the timeout: a tenth of it, from 0.2 s to 1 s. */
static double probe_budget(double timeout)
{
	double b = timeout / 10;
	return b < 0.2 ? 0.2 : b > 1.0 ? 1.0 : b;
}

static bool pmix_up;
static pmix_proc_t me;
static unsigned exchanges;	/* one key per exchange: stork.rdv.N */

/* A completion a callback signals. Leaked when abandoned at a deadline,
 * because the callback may still come. */
struct wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	pmix_status_t status;
	pmix_byte_object_t bo;	/* for gets: a copy of the value */
};

static struct wait *wait_new(void)
{
	struct wait *w = calloc(1, sizeof *w);
	pthread_condattr_t attr;

	if (!w)
		return NULL;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&w->lock, NULL);
	return w;
}

static void wait_free(struct wait *w)
{
	if (!w)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w->bo.bytes);
	free(w);
}

static void wait_signal(struct wait *w, pmix_status_t status)
{
	pthread_mutex_lock(&w->lock);
	w->status = status;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* true when w completed by the deadline (seconds of rdv_now). */
static bool wait_until(struct wait *w, double deadline)
{
	struct timespec ts;
	double whole;
	bool done;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	double frac = modf(deadline - rdv_now() > 0 ? deadline - rdv_now() : 0, &whole);
	ts.tv_sec += (time_t)whole;
	ts.tv_nsec += (long)(frac * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->lock);
	while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
		;
	done = w->done;
	pthread_mutex_unlock(&w->lock);
	return done;
}

static void op_done(pmix_status_t status, void *cbdata)
{
	wait_signal(cbdata, status);
}

static void value_done(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
	struct wait *w = cbdata;

	if (status == PMIX_SUCCESS && kv && kv->type == PMIX_BYTE_OBJECT) {
		w->bo.bytes = malloc(kv->data.bo.size ? kv->data.bo.size : 1);
		if (w->bo.bytes) {
			memcpy(w->bo.bytes, kv->data.bo.bytes, kv->data.bo.size);
			w->bo.size = kv->data.bo.size;
		} else {
			status = PMIX_ERR_NOMEM;
		}
	} else if (status == PMIX_SUCCESS) {
		status = PMIX_ERR_TYPE_MISMATCH;
	}
	wait_signal(w, status);
}

static int pmix_open(const struct rdv_params *p, char *err, size_t errlen)
{
	pmix_proc_t wild;
	pmix_value_t *v = NULL;
	pmix_status_t rc;
	uint32_t size;

	if (!pmix_up) {
		if ((rc = PMIx_Init(&me, NULL, 0)) != PMIX_SUCCESS) {
			snprintf(err, errlen, "rendezvous: PMIx_Init failed: %s (start the step with "
				 "srun --mpi=pmix, or set rendezvous to tcp)", PMIx_Error_string(rc));
			return -1;
		}
		pmix_up = true;
	}
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	if ((rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &v)) != PMIX_SUCCESS) {
		snprintf(err, errlen, "rendezvous: PMIx_Get(PMIX_JOB_SIZE) failed: %s",
			 PMIx_Error_string(rc));
		return -1;
	}
	size = v->data.uint32;
	PMIX_VALUE_RELEASE(v);
	if ((int)me.rank != p->index || (int)size != p->count) {
		snprintf(err, errlen, "rendezvous: PMIx says rank %u of %u, Slurm says launcher %d of "
			 "%d: start one launcher per PMIx rank (srun --mpi=pmix stork ...)", me.rank,
			 size, p->index, p->count);
		return -1;
	}
	return 0;
}

static int put_blob(const struct rdv_params *p, const char *key, const void *blob, size_t len,
		    char *err, size_t errlen)
{
	pmix_value_t v;
	pmix_status_t rc;
	uint32_t idx = htobe32((uint32_t)p->index);
	char *buf = malloc(len + 4);

	if (!buf) {
		snprintf(err, errlen, "rendezvous: out of memory for a blob of %zu bytes", len);
		return -1;
	}
	memcpy(buf, &idx, 4);
	if (len)
		memcpy(buf + 4, blob, len);
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = buf;
	v.data.bo.size = len + 4;
	rc = PMIx_Put(PMIX_GLOBAL, key, &v); /* copies the value */
	free(buf);
	if (rc == PMIX_SUCCESS)
		rc = PMIx_Commit();
	if (rc != PMIX_SUCCESS) {
		snprintf(err, errlen, "rendezvous: PMIx_Put/Commit of %zu bytes failed: %s", len,
			 PMIx_Error_string(rc));
		return -1;
	}
	return 0;
}

/* Fence with data collection; PMIX_SUCCESS, an error, or PMIX_ERR_TIMEOUT. */
static pmix_status_t fence(double deadline)
{
	pmix_proc_t wild;
	pmix_info_t info[2];
	bool yes = true;
	int secs = (int)ceil(deadline - rdv_now());
	struct wait *w = wait_new();
	pmix_status_t rc;

	if (!w)
		return PMIX_ERR_NOMEM;
	if (secs < 1)
		secs = 1;
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
	PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &secs, PMIX_INT);
	rc = PMIx_Fence_nb(&wild, 1, info, 2, op_done, w);
	if (rc != PMIX_SUCCESS) {
		wait_free(w);
		return rc;
	}
	if (!wait_until(w, deadline))
		return PMIX_ERR_TIMEOUT; /* w stays with the pending fence */
	rc = w->status;
	wait_free(w);
	return rc;
}

/* Copy launcher i's value out of a completed get, checking its index prefix. */
static int take_blob(const struct rdv_params *p, int i, const pmix_byte_object_t *bo,
		     struct rdv_peer *peer, char *err, size_t errlen)
{
	uint32_t idx;

	if (bo->size < 4 || (memcpy(&idx, bo->bytes, 4), be32toh(idx) != (uint32_t)i)) {
		snprintf(err, errlen, "rendezvous: launcher %d's PMIx value is malformed", i);
		return -1;
	}
	peer->len = bo->size - 4;
	if (!(peer->blob = rdv_dup(bo->bytes + 4, peer->len))) {
		snprintf(err, errlen, "rendezvous: out of memory");
		return -1;
	}
	(void)p;
	return 0;
}

/*
 * Ask every other launcher's key directly, all at once, until the deadline.
 * waits[i] completed with success means launcher i arrived. Returns 0, or
 * -1 when a request could not even be issued.
 */
static int get_all(const struct rdv_params *p, const char *key, struct wait **waits,
		   bool *arrived, double deadline, int timeout_secs)
{
	pmix_info_t info;

	PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_secs, PMIX_INT);
	for (int i = 0; i < p->count; i++) {
		pmix_proc_t proc;
		if (i == p->index)
			continue;
		if (!(waits[i] = wait_new()))
			return -1;
		PMIX_LOAD_PROCID(&proc, me.nspace, (pmix_rank_t)i);
		if (PMIx_Get_nb(&proc, key, &info, 1, value_done, waits[i]) != PMIX_SUCCESS) {
			wait_free(waits[i]);
			waits[i] = NULL;
		}
	}
	for (int i = 0; i < p->count; i++) {
		if (i == p->index || !waits[i])
			continue;
		if (!wait_until(waits[i], deadline)) {
			waits[i] = NULL; /* abandoned to its callback */
			continue;
		}
		arrived[i] = waits[i]->status == PMIX_SUCCESS;
	}
	return 0;
}

static void report_missing(const struct rdv_params *p, const char *key, pmix_status_t why,
			   double deadline, char *err, size_t errlen)
{
	struct wait **waits = calloc((size_t)p->count, sizeof *waits);
	bool *arrived = calloc((size_t)p->count, sizeof *arrived);
	char missing[2048] = "";
	int n = 0;

	if (waits && arrived) {
		arrived[p->index] = true;
		double end = deadline > rdv_now() + 0.2 ? deadline : rdv_now() + 0.2;
		get_all(p, key, waits, arrived, end, (int)ceil(end - rdv_now()));
		for (int i = 0; i < p->count; i++)
			n += !arrived[i];
		rdv_describe_missing(p, arrived, missing, sizeof missing);
	}
	if (n > 0)
		snprintf(err, errlen, "rendezvous: %d of %d launchers did not arrive within %g s "
			 "(PMIx fence: %s): %s", n, p->count, p->timeout, PMIx_Error_string(why),
			 missing);
	else
		snprintf(err, errlen, "rendezvous: the PMIx fence of %d launchers failed after %g s: "
			 "%s (every launcher's data is there: see the other launchers' errors and "
			 "slurmd's log)", p->count, p->timeout, PMIx_Error_string(why));
	for (int i = 0; waits && i < p->count; i++)
		wait_free(waits[i]);
	free(waits);
	free(arrived);
}

int rdv_pmix_exchange(const struct rdv_params *p, const void *blob, size_t len,
		      struct rdv_peer *peers, double deadline, char *err, size_t errlen)
{
	char key[64];
	pmix_status_t rc;

	if (pmix_open(p, err, errlen) < 0)
		return -1;
	snprintf(key, sizeof key, "stork.rdv.%u", exchanges++);
	if (put_blob(p, key, blob, len, err, errlen) < 0)
		return -1;
	if ((rc = fence(deadline - probe_budget(p->timeout))) != PMIX_SUCCESS) {
		report_missing(p, key, rc, deadline, err, errlen);
		return -1;
	}
	if (!(peers[p->index].blob = rdv_dup(blob, len))) {
		snprintf(err, errlen, "rendezvous: out of memory");
		return -1;
	}
	peers[p->index].len = len;
	for (int i = 0; i < p->count; i++) {
		pmix_proc_t proc;
		pmix_value_t *v = NULL;
		if (i == p->index)
			continue;
		PMIX_LOAD_PROCID(&proc, me.nspace, (pmix_rank_t)i);
		rc = PMIx_Get(&proc, key, NULL, 0, &v);
		if (rc != PMIX_SUCCESS || v->type != PMIX_BYTE_OBJECT) {
			snprintf(err, errlen, "rendezvous: PMIx_Get of launcher %d's blob after the "
				 "fence failed: %s", i, PMIx_Error_string(rc == PMIX_SUCCESS ?
								       PMIX_ERR_TYPE_MISMATCH : rc));
			if (v)
				PMIX_VALUE_RELEASE(v);
			return -1;
		}
		int bad = take_blob(p, i, &v->data.bo, &peers[i], err, errlen);
		PMIX_VALUE_RELEASE(v);
		if (bad)
			return -1;
	}
	return 0;
}

void rdv_pmix_finalize(void)
{
	if (pmix_up)
		PMIx_Finalize(NULL, 0);
	pmix_up = false;
}
