/* daemon/program/program_env.c - see program_env.h. */
#include "config.h"
#include "daemon/program/program_env.h"
#include "lib/env_number.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Variables set here, whatever the launcher's environment said. */
static const char *const owned[] = {
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
	"ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
	"TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
	"TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS",
	"STORK_GPU", "STORK_RUN_DIR", "STORK_CHECKPOINT_DIR", "STORK_RESTART_COUNT",
	"STORK_METRICS_FILE", "STORK_HEARTBEAT_FILE", "STORK_PREEMPT_SIGNAL",
	"STORK_CHECKPOINTED_EXIT", "STORK_RESUME_FROM", NULL,
};

struct env_list {
	char **v;
	size_t n, cap;
	int failed;
};

static void push(struct env_list *e, char *s)
{
	if (!s || e->failed) {
		e->failed = 1;
		free(s);
		return;
	}
	if (e->n + 2 > e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 64;
		char **v = realloc(e->v, cap * sizeof *v);

		if (!v) {
			e->failed = 1;
			free(s);
			return;
		}
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
}

static void setf(struct env_list *e, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void setf(struct env_list *e, const char *name, const char *fmt, ...)
{
	char value[4200], *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(value, sizeof value, fmt, ap);
	va_end(ap);
	if (asprintf(&s, "%s=%s", name, value) < 0)
		s = NULL;
	push(e, s);
}

/* Whether entry ("NAME=...") names one of names. */
static int named(const char *entry, const char *const *names)
{
	size_t len = strcspn(entry, "=");

	for (int i = 0; names[i]; i++)
		if (strlen(names[i]) == len && !strncmp(entry, names[i], len))
			return 1;
	return 0;
}

/* Whether entry names a variable storkd set for itself (lib/env_number.h). */
static int storkd_own(const char *entry, const char *list)
{
	size_t len = strcspn(entry, "=");

	if (!strncmp(entry, ENV_SET_OWN_LIST "=", sizeof ENV_SET_OWN_LIST))
		return 1;
	for (const char *p = list; p && *p; p += strcspn(p, ":"), p += *p == ':') {
		size_t n = strcspn(p, ":");

		if (n == len && !strncmp(entry, p, n))
			return 1;
	}
	return 0;
}

static int has(char *const *base, const char *name)
{
	const char *const one[] = { name, NULL };

	for (int i = 0; base && base[i]; i++)
		if (named(base[i], one))
			return 1;
	return 0;
}

void program_rank_file(char *buf, size_t len, const char *run_dir, int rank, const char *what)
{
	snprintf(buf, len, "%s/logs/rank-%03d.%s", run_dir, rank, what);
}

char **program_env_make(char *const *base, const struct program_rank_place *p)
{
	struct env_list e = { 0 };
	const char *own = getenv(ENV_SET_OWN_LIST);
	char path[4200];

	for (int i = 0; base && base[i]; i++)
		if (!named(base[i], owned) && strncmp(base[i], "PMIX_", 5) &&
		    !storkd_own(base[i], own))
			push(&e, strdup(base[i]));
	setf(&e, "RANK", "%d", p->rank);
	setf(&e, "LOCAL_RANK", "%d", p->local);
	setf(&e, "WORLD_SIZE", "%d", p->world_size);
	setf(&e, "LOCAL_WORLD_SIZE", "%d", p->local_ranks);
	setf(&e, "GROUP_RANK", "%d", p->node_rank);
	setf(&e, "NODE_RANK", "%d", p->node_rank);
	setf(&e, "ROLE_RANK", "%d", p->rank);
	setf(&e, "ROLE_WORLD_SIZE", "%d", p->world_size);
	setf(&e, "ROLE_NAME", "default");
	setf(&e, "MASTER_ADDR", "%s", p->master_addr);
	setf(&e, "MASTER_PORT", "%u", p->master_port);
	setf(&e, "TORCHELASTIC_RESTART_COUNT", "%d", p->attempt);
	setf(&e, "TORCHELASTIC_MAX_RESTARTS", "%d", p->max_restarts);
	setf(&e, "TORCHELASTIC_RUN_ID", "%s", p->run_id);
	program_rank_file(path, sizeof path, p->run_dir, p->rank, "error.json");
	setf(&e, "TORCHELASTIC_ERROR_FILE", "%s", path);
	setf(&e, "TORCHELASTIC_USE_AGENT_STORE", "False");
	setf(&e, "OMP_NUM_THREADS", "%d", p->omp_threads > 0 ? p->omp_threads : 1);
	if (p->gpu >= 0)
		setf(&e, "STORK_GPU", "%d", p->gpu);
	setf(&e, "STORK_RUN_DIR", "%s", p->run_dir);
	setf(&e, "STORK_CHECKPOINT_DIR", "%s/checkpoints", p->run_dir);
	setf(&e, "STORK_RESTART_COUNT", "%d", p->requeues + p->attempt);
	program_rank_file(path, sizeof path, p->run_dir, p->rank, "metrics.jsonl");
	setf(&e, "STORK_METRICS_FILE", "%s", path);
	program_rank_file(path, sizeof path, p->run_dir, p->rank, "heartbeat");
	setf(&e, "STORK_HEARTBEAT_FILE", "%s", path);
	setf(&e, "STORK_PREEMPT_SIGNAL", "%s", p->signal_name);
	setf(&e, "STORK_CHECKPOINTED_EXIT", "%d", PROGRAM_CHECKPOINTED_EXIT);
	/* run.resume_from: where to start when STORK_CHECKPOINT_DIR holds nothing
	 * yet; a run directory stands for its checkpoints/ */
	if (p->resume_from && p->resume_from[0]) {
		struct stat st;

		snprintf(path, sizeof path, "%s/checkpoints", p->resume_from);
		if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			snprintf(path, sizeof path, "%s", p->resume_from);
		setf(&e, "STORK_RESUME_FROM", "%s", path);
	}
	/* Open MPI 4 takes a PMIx server's ranks for direct-launched only
	 * under a resource manager it knows (Slurm); elsewhere its "orte"
	 * personality would make each rank a singleton of its own */
	if (p->pmix_outside_slurm && !has(base, "OMPI_MCA_schizo"))
		setf(&e, "OMPI_MCA_schizo", "^orte");
	/* where the end of the run removes them, even when the ranks were
	 * killed (in /dev/shm they would stay) */
	if (p->mpi_shm_dir && !has(base, "OMPI_MCA_btl_vader_backing_directory"))
		setf(&e, "OMPI_MCA_btl_vader_backing_directory", "%s", p->mpi_shm_dir);
	/* Python: every thread's stack on SIGABRT (the hang watchdog's
	 * request), and lines in the log as they are printed */
	if (!has(base, "PYTHONFAULTHANDLER"))
		setf(&e, "PYTHONFAULTHANDLER", "1");
	if (!has(base, "PYTHONUNBUFFERED"))
		setf(&e, "PYTHONUNBUFFERED", "1");
	if (e.failed) {
		program_env_free(e.v);
		return NULL;
	}
	return e.v;
}

void program_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}
