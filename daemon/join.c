/*
 * daemon/join.c - see join.h. The blob is
 *   "STK2" | u32 length | JSON {host, local_ranks, pid, job_end}
 *          | u32 length | JSON array of the ranks' bindings | UCX worker address
 * so a daemon of another Stork version is recognised instead of misread, and
 * the bindings travel as the text slurm_env.json embeds.
 */
#include "config.h"
#include "daemon/join.h"

#include "lib/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOB_MAGIC "STK2"

static void *make_blob(const struct join_offer *o, size_t *len)
{
	struct json j;
	char host[64] = "";
	unsigned char *blob = NULL;
	uint32_t jlen, blen = (uint32_t)strlen(o->bindings_json);

	gethostname(host, sizeof host - 1);
	json_init(&j, JSON_COMPACT);
	json_begin_object(&j);
	json_key_string(&j, "host", host);
	json_key_int(&j, "local_ranks", o->local_ranks);
	json_key_int(&j, "pid", getpid());
	json_key_int(&j, "job_end", o->job_end);
	json_end_object(&j);
	if (json_error(&j))
		goto out;
	jlen = (uint32_t)json_len(&j);
	*len = 12 + jlen + blen + o->ucx_len;
	blob = malloc(*len);
	if (!blob)
		goto out;
	memcpy(blob, BLOB_MAGIC, 4);
	memcpy(blob + 4, &jlen, 4);
	memcpy(blob + 8, json_str(&j), jlen);
	memcpy(blob + 8 + jlen, &blen, 4);
	memcpy(blob + 12 + jlen, o->bindings_json, blen);
	if (o->ucx_len)
		memcpy(blob + 12 + jlen + blen, o->ucx_addr, o->ucx_len);
out:
	json_free(&j);
	return blob;
}

/* The length-prefixed segment at *off of a blob; advances *off. NULL if it
 * does not fit. */
static const char *segment(const struct rdv_peer *p, size_t *off, uint32_t *len)
{
	const unsigned char *b = p->blob;

	if (*off + 4 > p->len)
		return NULL;
	memcpy(len, b + *off, 4);
	if (*off + 4 + (size_t)*len > p->len)
		return NULL;
	*off += 4 + *len;
	return (const char *)b + *off - *len;
}

static int parse_blob(const struct rdv_peer *p, struct run_node *n, char *err, size_t errlen)
{
	struct json_value *v = NULL, *bind = NULL;
	const char *desc, *bindings, *host;
	uint32_t jlen, blen;
	size_t off = 4;
	char why[128];
	int64_t i;

	if (p->len < 4 || memcmp(p->blob, BLOB_MAGIC, 4)) {
		snprintf(err, errlen, "launcher %d is not a daemon of this Stork version", p->index);
		return -1;
	}
	desc = segment(p, &off, &jlen);
	bindings = desc ? segment(p, &off, &blen) : NULL;
	if (!bindings) {
		snprintf(err, errlen, "launcher %d sent a truncated description", p->index);
		return -1;
	}
	v = json_parse(desc, jlen, why, sizeof why);
	bind = v ? json_parse(bindings, blen, why, sizeof why) : NULL;
	if (!bind) {
		snprintf(err, errlen, "launcher %d sent a malformed description: %s", p->index, why);
		json_value_free(v);
		return -1;
	}
	json_value_free(bind);
	host = json_get_string(v, "host");
	snprintf(n->host, sizeof n->host, "%s", host ? host : "?");
	n->local_ranks = json_get_int(v, "local_ranks", &i) == 0 ? (int)i : 0;
	n->pid = json_get_int(v, "pid", &i) == 0 ? (int)i : 0;
	n->job_end = json_get_int(v, "job_end", &i) == 0 ? i : 0;
	json_value_free(v);
	/* Kept as text: slurm_env.json embeds it as is. */
	n->bindings = strndup(bindings, blen);
	n->ucx_addr = p->len > off ? (const unsigned char *)p->blob + off : NULL;
	n->ucx_len = p->len - off;
	if (n->local_ranks < 1) {
		snprintf(err, errlen, "launcher %d (%s) runs no ranks", p->index, n->host);
		return -1;
	}
	return 0;
}

int join_run(struct run_layout *l, const struct rdv_params *p, const struct join_offer *offer,
	     char *err, size_t errlen)
{
	void *blob;
	size_t len;
	int base = 0;

	memset(l, 0, sizeof *l);
	blob = make_blob(offer, &len);
	if (!blob) {
		snprintf(err, errlen, "out of memory");
		return STORK_EXIT_INTERNAL;
	}
	if (rdv_exchange(p, blob, len, &l->rdv, err, errlen) < 0) {
		free(blob);
		return STORK_EXIT_RENDEZVOUS;
	}
	free(blob);
	l->nnodes = l->rdv.n;
	l->node_index = p->index;
	l->method = l->rdv.method;
	l->seconds = l->rdv.seconds;
	l->nodes = calloc((size_t)l->nnodes, sizeof *l->nodes);
	if (!l->nodes) {
		snprintf(err, errlen, "out of memory");
		return STORK_EXIT_INTERNAL;
	}
	for (int i = 0; i < l->nnodes; i++) {
		if (parse_blob(&l->rdv.peers[i], &l->nodes[i], err, errlen) < 0)
			return STORK_EXIT_RENDEZVOUS;
		l->nodes[i].rank_base = base;
		base += l->nodes[i].local_ranks;
	}
	l->world_size = base;
	return 0;
}

int join_write_slurm_env(const char *run_dir, const struct run_layout *l, char *err,
			 size_t errlen)
{
	static const char *const vars[] = { "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NODELIST",
					    "SLURM_STEP_NODELIST", "SLURM_RESTART_COUNT",
					    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
					    "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION" };
	char path[4200];
	struct json j;
	int rc;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_begin_object(&j, "slurm");
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		if (getenv(vars[i]))
			json_key_string(&j, vars[i], getenv(vars[i]));
	json_end_object(&j);
	json_key_string(&j, "rendezvous", l->method);
	json_key_double(&j, "rendezvous_seconds", l->seconds);
	json_key_int(&j, "world_size", l->world_size);
	if (l->dp) {
		json_key_begin_object(&j, "parallel");
		json_key_int(&j, "dp", l->dp);
		json_key_int(&j, "tp", l->tp);
		json_key_int(&j, "pp", l->pp);
		json_key_int(&j, "zero", l->zero);
		json_key_string(&j, "rank_order", "rank = stage * dp * tp + dp_rank * tp + tp_rank");
		json_key_begin_array(&j, "stage_layers");
		for (int s = 0; l->stage_layers && s < l->pp; s++) {
			json_begin_array(&j);
			json_int(&j, l->stage_layers[s][0]);
			json_int(&j, l->stage_layers[s][1]);
			json_end_array(&j);
		}
		json_end_array(&j);
		json_end_object(&j);
	}
	/* Seconds since the epoch, as launcher 0 learnt it; 0 = no limit or unknown. */
	json_key_int(&j, "job_end_time", l->nnodes ? l->nodes[0].job_end : 0);
	json_key_begin_array(&j, "nodes");
	for (int i = 0; i < l->nnodes; i++) {
		const struct run_node *n = &l->nodes[i];

		json_begin_object(&j);
		json_key_int(&j, "node_rank", i);
		json_key_string(&j, "host", n->host);
		json_key_int(&j, "pid", n->pid);
		json_key_int(&j, "rank_base", n->rank_base);
		json_key_int(&j, "local_ranks", n->local_ranks);
		json_key(&j, "ranks");
		json_raw(&j, n->bindings);
		json_end_object(&j);
	}
	json_end_array(&j);
	json_end_object(&j);
	snprintf(path, sizeof path, "%s/config/slurm_env.json", run_dir);
	rc = json_error(&j) ? -1 : atomic_write_file(path, json_str(&j), json_len(&j), err, errlen);
	if (json_error(&j))
		snprintf(err, errlen, "cannot format %s", path);
	json_free(&j);
	return rc;
}

void join_free(struct run_layout *l)
{
	for (int i = 0; l->nodes && i < l->nnodes; i++)
		free(l->nodes[i].bindings);
	free(l->nodes);
	free(l->stage_layers);
	rdv_result_free(&l->rdv);
	rdv_finalize();
	memset(l, 0, sizeof *l);
}
