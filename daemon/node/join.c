/*
 * daemon/node/join.c - see join.h. The blob is
 *   "STK2" | u32 length | JSON {host, machine, local_ranks, pid, job_end}
 *          | u32 length | JSON array of the ranks' bindings | UCX worker address
 * so a daemon of another Stork version is recognised instead of misread, and
 * the bindings travel as the text slurm_env.json embeds.
 */
#include "config.h"
#include "daemon/node/join.h"

#include "lib/io/atomic_file.h"
#include "lib/exit_codes.h"
#include "lib/machine_id.h"
#include "lib/formats/stork_json.h"

#include <stdint.h>
#include <stdio.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOB_MAGIC "STK2"
#define JOIN_MAX_LOCAL_RANKS 4096     /* as --local-ranks */
#define JOIN_MAX_UCX_ADDR (1 << 20)   /* UCX worker addresses are a few KiB */

static void *make_blob(const struct join_offer *o, size_t *len)
{
	char host[64] = "", machine[17];
	unsigned char *blob = NULL;
	uint32_t jlen, blen = (uint32_t)strlen(o->bindings_json);
	json_t *v;
	char *desc = NULL;

	gethostname(host, sizeof host - 1);
	snprintf(machine, sizeof machine, "%016llx", (unsigned long long)machine_id());
	v = json_pack("{s:o, s:s, s:i, s:i, s:I, s:i, s:i}", "host", sj_text(host), "machine",
		      machine, "local_ranks", o->local_ranks, "pid", (int)getpid(), "job_end",
		      (json_int_t)o->job_end, "warn_signal", o->warn_signo, "warn_lead", o->warn_lead);
	if (!v || !(desc = sj_compact(v)))
		goto out;
	jlen = (uint32_t)strlen(desc);
	*len = 12 + jlen + blen + o->ucx_len;
	blob = malloc(*len);
	if (!blob)
		goto out;
	memcpy(blob, BLOB_MAGIC, 4);
	memcpy(blob + 4, &jlen, 4);
	memcpy(blob + 8, desc, jlen);
	memcpy(blob + 8 + jlen, &blen, 4);
	memcpy(blob + 12 + jlen, o->bindings_json, blen);
	if (o->ucx_len)
		memcpy(blob + 12 + jlen + blen, o->ucx_addr, o->ucx_len);
out:
	free(desc);
	json_decref(v);
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

/* A host name as Slurm and DNS have them: letters, digits, '-', '.', '_'. */
static int host_name_valid(const char *h)
{
	if (!*h || strlen(h) >= 63)
		return 0;
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && !strchr("-._", *h))
			return 0;
	return 1;
}

/*
 * Every field of a node's description within what a daemon sends: the
 * rendezvous only vouches for who sent it, and the layout, the bindings
 * and UCX trust what it says.
 */
static int check_node(int index, const struct run_node *n, char *err, size_t errlen)
{
	if (!host_name_valid(n->host)) {
		snprintf(err, errlen, "launcher %d sent a malformed host name", index);
		return -1;
	}
	if (n->machine[0] && strspn(n->machine, "0123456789abcdef") != 16) {
		snprintf(err, errlen, "launcher %d (%s) sent a malformed machine id", index, n->host);
		return -1;
	}
	if (n->local_ranks < 1 || n->local_ranks > JOIN_MAX_LOCAL_RANKS) {
		snprintf(err, errlen, "launcher %d (%s) runs %d ranks (1..%d)", index, n->host,
			 n->local_ranks, JOIN_MAX_LOCAL_RANKS);
		return -1;
	}
	if (json_array_size(n->bindings) != (size_t)n->local_ranks) {
		snprintf(err, errlen, "launcher %d (%s) binds %zu ranks but runs %d", index, n->host,
			 json_array_size(n->bindings), n->local_ranks);
		return -1;
	}
	if (n->job_end < 0 || n->pid < 0 || n->warn_signo < 0 || n->warn_signo >= 65 ||
	    n->warn_lead < 0) {
		snprintf(err, errlen, "launcher %d (%s) sent a negative pid or end time, or a "
			 "signal that is none", index, n->host);
		return -1;
	}
	if (n->ucx_len > JOIN_MAX_UCX_ADDR) {
		snprintf(err, errlen, "launcher %d (%s) sent a UCX address of %zu bytes (at most %d)",
			 index, n->host, n->ucx_len, JOIN_MAX_UCX_ADDR);
		return -1;
	}
	return 0;
}

int join_parse_blob(const struct rdv_peer *p, struct run_node *n, char *err, size_t errlen)
{
	json_t *v = NULL, *bind = NULL;
	const char *desc, *bindings, *host, *machine;
	uint32_t jlen, blen;
	size_t off = 4;
	char what[64], why[256];

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
	snprintf(what, sizeof what, "launcher %d's description", p->index);
	v = sj_parse(desc, jlen, what, why, sizeof why);
	snprintf(what, sizeof what, "launcher %d's bindings", p->index);
	bind = v ? sj_parse(bindings, blen, what, why, sizeof why) : NULL;
	if (!bind || !json_is_object(v) || !json_is_array(bind)) {
		snprintf(err, errlen, "launcher %d sent a malformed description%s%s", p->index,
			 bind ? "" : ": ", bind ? "" : why);
		json_decref(v);
		json_decref(bind);
		return -1;
	}
	host = json_string_value(json_object_get(v, "host"));
	snprintf(n->host, sizeof n->host, "%s", host ? host : "?");
	machine = json_string_value(json_object_get(v, "machine"));
	/* none: a node of unknown machine; of another length: malformed (check_node) */
	snprintf(n->machine, sizeof n->machine, "%.16s",
		 !machine ? "" : strlen(machine) == 16 ? machine : "?");
	n->local_ranks = (int)sj_int(v, "local_ranks", 0);
	n->pid = (int)sj_int(v, "pid", 0);
	n->job_end = sj_int(v, "job_end", 0);
	n->warn_signo = (int)sj_int(v, "warn_signal", 0);
	n->warn_lead = (int)sj_int(v, "warn_lead", 0);
	json_decref(v);
	/* Kept whole: slurm_env.json embeds it as is. */
	n->bindings = bind;
	n->ucx_addr = p->len > off ? (const unsigned char *)p->blob + off : NULL;
	n->ucx_len = p->len - off;
	return check_node(p->index, n, err, errlen);
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
		if (join_parse_blob(&l->rdv.peers[i], &l->nodes[i], err, errlen) < 0)
			return STORK_EXIT_RENDEZVOUS;
		/* several daemons talk over UCX: each must say where */
		if (l->nnodes > 1 && !l->nodes[i].ucx_len) {
			snprintf(err, errlen, "launcher %d (%s) sent no UCX address", i,
				 l->nodes[i].host);
			return STORK_EXIT_RENDEZVOUS;
		}
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
	json_t *v, *slurm, *nodes;
	int rc = -1;

	snprintf(path, sizeof path, "%s/config/slurm_env.json", run_dir);
	slurm = json_object();
	for (size_t i = 0; slurm && i < sizeof vars / sizeof vars[0]; i++)
		if (getenv(vars[i]))
			json_object_set_new(slurm, vars[i], sj_text(getenv(vars[i])));
	/* job_end_time: seconds since the epoch, as launcher 0 learnt it; 0 =
	 * no limit or unknown. */
	v = json_pack("{s:o, s:o, s:o, s:i}", "slurm", slurm, "rendezvous", sj_text(l->method),
		      "rendezvous_seconds", sj_number(l->seconds), "world_size", l->world_size);
	if (v && l->dp) {
		json_t *layers = json_array();

		for (int s = 0; layers && l->stage_layers && s < l->pp; s++)
			json_array_append_new(layers, json_pack("[i, i]", l->stage_layers[s][0],
								 l->stage_layers[s][1]));
		json_object_set_new(v, "parallel",
				    json_pack("{s:i, s:i, s:i, s:i, s:s, s:o}", "dp", l->dp,
					      "tp", l->tp, "pp", l->pp, "zero", l->zero,
					      "rank_order",
					      "rank = stage * dp * tp + dp_rank * tp + tp_rank",
					      "stage_layers", layers));
	}
	nodes = json_array();
	for (int i = 0; nodes && i < l->nnodes; i++) {
		const struct run_node *n = &l->nodes[i];

		json_array_append_new(nodes, json_pack("{s:i, s:o, s:s, s:i, s:i, s:i, s:O}",
							"node_rank", i, "host", sj_text(n->host),
							"machine", n->machine,
							"pid", n->pid, "rank_base", n->rank_base,
							"local_ranks", n->local_ranks,
							"ranks", n->bindings));
	}
	if (!v)
		json_decref(nodes);
	if (v && json_object_set_new(v, "job_end_time",
				     json_integer(l->nnodes ? l->nodes[0].job_end : 0)) == 0 &&
	    json_object_set_new(v, "nodes", nodes) == 0)
		rc = sj_write_file(path, v, err, errlen);
	else
		snprintf(err, errlen, "cannot format %s: out of memory", path);
	json_decref(v);
	return rc;
}

int join_from_record(struct run_layout *l, const char *run_dir, int node_index, int nnodes,
		     char *err, size_t errlen)
{
	char path[4200];
	const json_t *nodes;
	json_t *v;
	int rc = -1;

	memset(l, 0, sizeof *l);
	snprintf(path, sizeof path, "%s/config/slurm_env.json", run_dir);
	if (!(v = sj_load_file(path, err, errlen)))
		return -1;
	nodes = json_object_get(v, "nodes");
	if (json_array_size(nodes) != (size_t)nnodes || node_index < 0 || node_index >= nnodes) {
		snprintf(err, errlen, "%s: %zu node(s), not the %d the rejoin of launcher %d expects",
			 path, json_array_size(nodes), nnodes, node_index);
		goto out;
	}
	if (!(l->nodes = calloc((size_t)nnodes, sizeof *l->nodes))) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	l->nnodes = nnodes;
	l->node_index = node_index;
	l->method = "rejoin";
	l->world_size = (int)sj_int(v, "world_size", 0);
	for (int k = 0; k < nnodes; k++) {
		const json_t *n = json_array_get(nodes, (size_t)k);
		const char *host = json_string_value(json_object_get(n, "host"));
		const char *machine = json_string_value(json_object_get(n, "machine"));

		snprintf(l->nodes[k].host, sizeof l->nodes[k].host, "%s", host ? host : "");
		snprintf(l->nodes[k].machine, sizeof l->nodes[k].machine, "%s", machine ? machine : "");
		l->nodes[k].local_ranks = (int)sj_int(n, "local_ranks", 0);
		l->nodes[k].rank_base = (int)sj_int(n, "rank_base", -1);
		l->nodes[k].pid = (int)sj_int(n, "pid", 0);
		if (l->nodes[k].local_ranks < 1 || l->nodes[k].rank_base < 0 || !host) {
			snprintf(err, errlen, "%s: node %d has no host, local_ranks or rank_base", path, k);
			goto out;
		}
		if (l->nodes[k].rank_base < l->world_size)
			l->active = k + 1;
	}
	l->nodes[0].job_end = sj_int(v, "job_end_time", 0);
	rc = 0;
out:
	json_decref(v);
	if (rc < 0) {
		free(l->nodes);
		memset(l, 0, sizeof *l);
	}
	return rc;
}

void join_free(struct run_layout *l)
{
	for (int i = 0; l->nodes && i < l->nnodes; i++)
		json_decref(l->nodes[i].bindings);
	free(l->nodes);
	free(l->stage_layers);
	rdv_result_free(&l->rdv);
	rdv_finalize();
	memset(l, 0, sizeof *l);
}
