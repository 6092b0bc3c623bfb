/* daemon/program/program.c - see program.h. */
#include "config.h"
#include "daemon/program/program.h"

#include "daemon/program/program_env.h"
#include "daemon/program/program_error.h"
#include "daemon/program/program_output.h"
#include "daemon/program/pmix_host.h"
#include "daemon/program/rank_usage.h"
#include "daemon/node/tensorboard.h"
#include "daemon/node/rank_log.h"
#include "lib/bind/bind.h"
#include "lib/bounded.h"
#include "lib/clock.h"
#include "lib/comm/comm.h"
#include "lib/exit_codes.h"
#include "lib/log.h"
#include "lib/run/end_notice.h"
#include "lib/run/metrics_file.h"
#include "lib/rendezvous/rendezvous.h"
#include "lib/slurm/slurm_job.h"
#include "lib/slurm/time_limit_stop.h"
#include "lib/config/stork_config.h"
#include "lib/formats/stork_json.h"
#include "lib/stop_signals.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* The deadline guard's allowance for a checkpoint when program.checkpoint_grace is auto. */
#define GUARD_CHECKPOINT_S 60
/* The most an automatic checkpoint grace gives. */
#define MAX_AUTO_GRACE_S 600
/* How long ranks asked for their stacks get to print them. */
#define STACKS_S 3
/* How long a rank's death by a stop signal waits for the stop itself. */
#define STOP_DEATH_S 2.0
/* How far ahead a hang's stacks are announced to the other nodes. */
#define ANNOUNCE_S 1.0
/* How long a rank that failed for a lost peer waits for another node's notice. */
#define LOST_PEER_WAIT_S 2.0
/* How long teed stderr lines wait (program_output.h): longer than a failure
 * takes to reach the other nodes' notice. */
#define TEE_HOLD_S 1.0
/* How long the output of exited ranks is still read (their children may hold it). */
#define DRAIN_S 2

struct prank {
	int local, rank;
	pid_t pid;              /* its process (and process group); 0: not started */
	int running;
	int status;             /* waitpid's, once it ended */
	double start, end;      /* wall-clock seconds */
	double beat;            /* wall-clock seconds of its last heartbeat; 0: none yet */
	double stop_death;      /* monotonic: when it died of a stop signal before any stop; 0 */
	double lost_peer;       /* monotonic: when it failed for a lost peer (waiting); 0 */
	char mpi_abort[512];    /* what its MPI_Abort said, "" none (pmix_host.h) */
	struct rank_usage usage; /* its memory and CPU, sampled (rank_usage.h) */
	int oom;                /* its death by SIGKILL was for memory (verdict) */
	struct oom_verdict verdict;
	struct rank_log log;
	struct stderr_tail tail;
	struct rank_output out;
	char heartbeat[4200], metrics[4200], error_file[4200];
};

/* Why the node's ranks are being ended, if they are. */
enum ending {
	END_NONE = 0,
	END_STOP,      /* a stop: program.signal sent, waiting for their checkpoints */
	END_FAILED,    /* a local rank failed */
	END_HANG,      /* a local rank stopped beating */
	END_PEER,      /* another daemon died */
};

struct supervisor {
	const struct program_run *p;
	struct prank *r;
	int n;
	enum ending ending;
	double stop_at;          /* monotonic: when the stop began */
	double grace_end;        /* monotonic: when unconfirmed ranks are ended */
	double stacks_due;       /* monotonic: when to ask for the stacks; 0: never */
	double stacks_at;        /* monotonic: when they were asked for; 0: not yet */
	char notice[4200];       /* how the attempt ends, told every node (lib/run/end_notice.h) */
	double term_at;          /* monotonic: when TERM went out; 0: not yet */
	int timeout;             /* the stop came near the job's end */
	int failed;              /* the first failed local rank, -1 none */
	int secondary;           /* ... failed after another node's first failure */
	int agreed;              /* the daemons agreed on the end (else: abort them) */
	int guard;               /* the deadline guard watches this run */
	struct pmix_host *pmix;  /* the ranks' PMIx server; NULL: program.pmix false */
	struct tensorboard tb;   /* the ranks' metrics as TensorBoard files (metrics.tensorboard) */
	char why[1024];          /* the node's message */
};

/* ---------------------------------------------------------------- start */

static void child_exec(const struct program_run *p, const struct prank *r, int out_fd,
		       int err_fd, char **env)
{
	const struct bind_plan *plan = &p->node->plans[r->local];
	size_t argc = p->cfg->program.command.n;
	char *argv[argc + 1], err[512];
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	sigset_t none;

	setpgid(0, 0);
	/* a rank never outlives its daemon, whatever killed it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (devnull >= 0)
		dup2(devnull, STDIN_FILENO);
	dup2(out_fd, STDOUT_FILENO);
	dup2(err_fd, STDERR_FILENO);
	/* the launcher's signal mask and handlers are not the program's */
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	memcpy(argv, p->cfg->program.command.v, argc * sizeof *argv);
	argv[argc] = NULL;
	if (bind_apply(plan, err, sizeof err) < 0)
		dprintf(STDERR_FILENO, "stork: rank %d runs unbound: %s\n", r->rank, err);
	/* the program gets 0, 1 and 2 (stork(1)'s contract) and nothing of
	 * ours or of what we inherited; last, so that nothing opened above stays */
	closefrom(STDERR_FILENO + 1);
	execvpe(argv[0], argv, env);
	dprintf(STDERR_FILENO, "stork: rank %d cannot run %s: %s\n", r->rank, argv[0],
		strerror(errno));
	_exit(127);
}

static void place_of(const struct program_run *p, int local, struct program_rank_place *pl)
{
	const struct train_node *n = p->node;
	const char *port = getenv("MASTER_PORT");
	long long procid_port = port ? strtoll(port, NULL, 10) : 0;

	*pl = (struct program_rank_place){
		.rank = n->rank_base + local, .local = local, .local_ranks = n->local_ranks,
		.world_size = n->world_size, .node_rank = n->node_rank,
		.omp_threads = n->plans[local].omp_threads, .gpu = n->plans[local].gpu,
		.master_addr = p->layout->nodes[0].host,
		.attempt = n->attempt, .max_restarts = p->cfg->restart.max_restarts,
		.requeues = n->restart_count, .run_id = n->job_id, .run_dir = n->run_dir,
		.signal_name = config_signal_name(p->cfg->program.signal),
		.resume_from = p->cfg->run.resume_from,
		.pmix_outside_slurm = p->cfg->program.pmix && !n->slurm_job,
	};
	/* the plugin's MASTER_PORT when it set one, else the same formula */
	if (procid_port > 0 && procid_port < 65536)
		pl->master_port = (unsigned)procid_port;
	else
		pl->master_port = bind_master_port(n->slurm_job,
						   (uint32_t)strtoul(getenv("SLURM_STEP_ID") ?
								     getenv("SLURM_STEP_ID") : "0",
								     NULL, 10),
						   RDV_PORT_BASE, RDV_PORT_RANGE);
}

static int start_rank(struct supervisor *s, struct prank *r, char *err, size_t errlen)
{
	const struct program_run *p = s->p;
	struct program_rank_place pl;
	int out[2], errp[2];
	char **env;

	place_of(p, r->local, &pl);
	pl.mpi_shm_dir = pmix_host_shm_dir(s->pmix);
	if (!(env = program_env_make(environ, &pl))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (s->pmix && pmix_host_rank_env(s->pmix, r->local, &env, err, errlen) < 0) {
		program_env_free(env);
		return -1;
	}
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
		program_env_free(env);
		return -1;
	}
	fflush(NULL);
	r->pid = fork();
	if (r->pid == 0)
		child_exec(p, r, out[1], errp[1], env);
	program_env_free(env);
	close(out[1]);
	close(errp[1]);
	if (r->pid < 0) {
		snprintf(err, errlen, "cannot start rank %d: %s", r->rank, strerror(errno));
		close(out[0]);
		close(errp[0]);
		return -1;
	}
	setpgid(r->pid, r->pid); /* also here: a signal may come before the child's own call */
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(errp[0], F_SETFL, O_NONBLOCK);
	r->out = (struct rank_output){
		.out = { .fd = out[0] }, .err = { .fd = errp[0], .is_stderr = 1 }, .log = &r->log,
		.tail = &r->tail,
		.tee = p->cfg->program.tee == STORK_TEE_ALL ||
		       (p->cfg->program.tee == STORK_TEE_RANK0 && r->rank == 0),
		.tee_prefix = p->cfg->program.tee == STORK_TEE_ALL,
		.hold_s = TEE_HOLD_S,
	};
	r->running = 1;
	r->start = clock_wall();
	rank_usage_init(&r->usage);
	rank_logf(&r->log, "started %s as pid %d (restart %d of the run)",
		  p->cfg->program.command.v[0], (int)r->pid, pl.requeues + pl.attempt);
	return 0;
}

/* ------------------------------------------------------- what ranks do */

static void signal_ranks(struct supervisor *s, int sig, int whole_group)
{
	for (int i = 0; i < s->n; i++)
		if (s->r[i].running)
			kill(whole_group ? -s->r[i].pid : s->r[i].pid, sig);
}

static void terminate(struct supervisor *s)
{
	if (s->term_at)
		return;
	s->term_at = clock_monotonic();
	signal_ranks(s, SIGTERM, 1);
}

static int running_ranks(const struct supervisor *s)
{
	int n = 0;

	for (int i = 0; i < s->n; i++)
		n += s->r[i].running;
	return n;
}

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "died of SIG%s", sigabbrev_np(WTERMSIG(status)) ?
			 sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(buf, len, "exited with %d", WEXITSTATUS(status));
}

static int failed_status(int status)
{
	return WIFSIGNALED(status) ||
	       (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != PROGRAM_CHECKPOINTED_EXIT);
}

/* What a failed rank said: its MPI_Abort, its error file, its last traceback. */
static void rank_error(const struct prank *r, struct program_error *e)
{
	if (r->mpi_abort[0]) {
		/* Open MPI says on stderr which communicator it was called on */
		const char *c = strstr(r->tail.text, "in communicator ");

		c = c ? c + strlen("in communicator ") : NULL;
		msg_format(e->message, sizeof e->message, "%s%s%.*s", r->mpi_abort,
			   c ? " in communicator " : "", c ? (int)strcspn(c, " \n") : 0, c ? c : "");
		e->source = "mpi_abort";
		return;
	}
	program_error_from_file(r->error_file, e);
	if (!e->source)
		program_error_from_tail(&r->tail, e);
}

/*
 * "rank 3 on n2 exited with 1: RuntimeError: boom (File ...)"; 1 when what
 * it said is a lost peer's complaint.
 */
static int describe_rank(const struct supervisor *s, const struct prank *r, char *out,
			 size_t len)
{
	struct program_error e = { 0 };
	char how[2560];

	rank_error(r, &e);
	if (r->mpi_abort[0])
		snprintf(how, sizeof how, "aborted"); /* whether or not it has ended yet */
	else if (r->oom) {
		snprintf(how, sizeof how, "was ");
		oom_verdict_text(&r->verdict, how + 4, sizeof how - 4);
	}
	else
		describe_status(r->status, how, sizeof how);
	msg_format(out, len, "rank %d on %s %s%s%s%s%s%s", r->rank, s->p->node->host, how,
		   e.message[0] ? ": " : "", e.message, e.frame[0] ? " (" : "", e.frame,
		   e.frame[0] ? ")" : "");
	return program_error_lost_peer(&e);
}

/*
 * Local rank i failed: the run's first failure, told every node (its
 * traceback, if teed, before the error line), or one that came after
 * another node's, said as such after it.
 */
static void fail(struct supervisor *s, int i)
{
	struct end_notice n = { .kind = END_NOTICE_FAILED, .at = clock_wall() }, first;

	s->ending = END_FAILED;
	s->failed = i;
	describe_rank(s, &s->r[i], n.message, sizeof n.message);
	switch (end_notice_post(s->notice, &n, &first)) {
	case 0:
		s->secondary = 1;
		msg_format(s->why, sizeof s->why, "%s (secondary: after %s)", n.message,
			   first.message);
		stork_info("%s", s->why);
		break;
	case -1:
		stork_warn("cannot tell the other nodes of the failure through %s: %s", s->notice,
			   strerror(errno));
		/* fall through */
	default:
		snprintf(s->why, sizeof s->why, "%s", n.message);
		output_release(&s->r[i].out, INFINITY);
		stork_error("%s", s->why);
	}
	terminate(s);
}

/*
 * Slurm signals every process of the step, the ranks too, with the stop
 * signals it sends the launcher (--signal, scancel, the time limit), and
 * a rank that has not yet installed its handler (a Python program still
 * importing torch) dies of it. Such a death (of a signal that stops the
 * run, lib/stop_signals.h, or of program.signal) waits for the launcher's
 * own stop (STOP_DEATH_S) before it counts as a failure.
 */
static int stop_signal_death(const struct supervisor *s, int status)
{
	int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;

	return sig && (stop_signal_stops(sig) || sig == s->p->cfg->program.signal);
}

/* A failure that says another rank went away waits a moment for that
 * rank's own (LOST_PEER_WAIT_S), which is the cause. */
static int lost_peer(const struct supervisor *s, const struct prank *r)
{
	char text[1024];

	return describe_rank(s, r, text, sizeof text);
}

/* What an MPI_Abort said, kept with its rank before its exit is judged. */
static void note_mpi_abort(struct supervisor *s)
{
	char msg[512];
	int i = pmix_host_aborted(s->pmix, msg, sizeof msg);

	if (i >= 0 && i < s->n && !s->r[i].mpi_abort[0])
		snprintf(s->r[i].mpi_abort, sizeof s->r[i].mpi_abort, "%s", msg);
}

static void reap(struct supervisor *s)
{
	note_mpi_abort(s);
	for (int i = 0; i < s->n; i++) {
		struct prank *r = &s->r[i];
		char how[64];
		pid_t got;

		if (!r->running)
			continue;
		got = waitpid(r->pid, &r->status, WNOHANG);
		if (got != r->pid)
			continue;
		r->running = 0;
		r->end = clock_wall();
		describe_status(r->status, how, sizeof how);
		rank_logf(&r->log, "pid %d %s", (int)r->pid, how);
		if (WIFSIGNALED(r->status) && WTERMSIG(r->status) == SIGKILL &&
		    (r->oom = oom_watch_verdict(&r->usage.oom, &r->verdict))) {
			char text[2560];

			oom_verdict_text(&r->verdict, text, sizeof text);
			rank_logf(&r->log, "pid %d was %s", (int)r->pid, text);
		}
		/* the first local failure, unless the node is ending already
		 * (ranks ended by a stop, a hang or a dead peer did not fail) */
		if (!failed_status(r->status) || s->ending != END_NONE)
			continue;
		if (stop_signal_death(s, r->status)) {
			r->stop_death = clock_monotonic(); /* see watch() */
			continue;
		}
		if (lost_peer(s, r)) {
			r->lost_peer = clock_monotonic(); /* see watch() */
			continue;
		}
		fail(s, i);
	}
}

/* Its last heartbeat: the newest of the heartbeat and metrics files'
 * modification times since it started. */
static void read_beat(struct prank *r)
{
	const char *files[] = { r->heartbeat, r->metrics };
	struct stat st;

	for (int k = 0; k < 2; k++)
		if (stat(files[k], &st) == 0) {
			double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;

			if (t > r->start && t > r->beat &&
			    !(k == 1 && rank_usage_own_write(&r->usage, t)))
				r->beat = t;
		}
}

/* The hang watchdog: ranks that beat once and then stopped. */
static int find_hang(struct supervisor *s)
{
	double timeout = s->p->cfg->preempt.hang_timeout, now = clock_wall(), oldest = 0;
	char why[sizeof s->why];
	size_t used;
	int stuck = 0, first = -1;

	if (timeout <= 0)
		return 0;
	used = (size_t)snprintf(why, sizeof why, "no heartbeat for %.0f s (preempt.hang_timeout) "
				"on %s from", timeout, s->p->node->host);
	for (int i = 0; i < s->n; i++) {
		struct prank *r = &s->r[i];

		if (!r->running)
			continue;
		read_beat(r);
		if (!r->beat || now - r->beat < timeout)
			continue;
		stuck++;
		if (first < 0 || r->beat < oldest) {
			first = i;
			oldest = r->beat;
		}
		if (used < sizeof why)
			used += (size_t)snprintf(why + used, sizeof why - used,
						 " rank %d (silent %.0f s)", r->rank, now - r->beat);
	}
	if (!stuck)
		return 0;
	if (used < sizeof why)
		snprintf(why + used, sizeof why - used, "; rank %d stopped first; every "
			 "rank's stack is in its log", s->r[first].rank);
	memcpy(s->why, why, sizeof why);
	s->failed = first;
	return 1;
}

/* The seconds the ranks get to checkpoint after the signal. */
static double checkpoint_grace(const struct supervisor *s)
{
	double grace = s->p->cfg->program.checkpoint_grace;
	time_t end = s->p->node->job_end_time;

	if (grace > 0)
		return grace;
	grace = MAX_AUTO_GRACE_S;
	if (end && (double)(end - time(NULL)) - 5 < grace)
		grace = (double)(end - time(NULL)) - 5;
	return grace > 1 ? grace : 1;
}

/* What the deadline guard keeps free before the job's end for a checkpoint. */
static double guard_need(const struct stork_config *c)
{
	return (c->program.checkpoint_grace > 0 ? c->program.checkpoint_grace :
						   GUARD_CHECKPOINT_S) + c->preempt.deadline_lead;
}

/* The deadline guard: whether the time left only fits a checkpoint. */
static int deadline_near(const struct supervisor *s)
{
	time_t end = s->p->node->job_end_time;

	return s->guard && end && (double)(end - time(NULL)) <= guard_need(s->p->cfg);
}

/*
 * The guard watches a job whose time limit leaves more than it needs; in a
 * shorter one it would stop the program as it starts (and every requeued
 * attempt again): it is off, and the log says why.
 */
static void arm_guard(struct supervisor *s)
{
	const struct stork_config *c = s->p->cfg;
	time_t end = s->p->node->job_end_time;
	double left = (double)(end - time(NULL));

	s->guard = c->preempt.deadline_guard && end;
	if (s->guard && left <= 2 * guard_need(c)) {
		s->guard = 0;
		if (s->p->node->node_rank == 0)
			stork_warn("deadline guard off: the job ends in %.0f s, and the guard keeps "
				   "%.0f s free before the end (program.checkpoint_grace, or %d s, "
				   "plus preempt.deadline_lead)", left, guard_need(c),
				   GUARD_CHECKPOINT_S);
	}
}

/* A stop by signal sig (0: the deadline guard's) begins: the ranks get program.signal. */
static void begin_stop(struct supervisor *s, const char *why, int sig)
{
	const struct train_node *n = s->p->node;
	double grace = checkpoint_grace(s);

	s->ending = END_STOP;
	s->stop_at = clock_monotonic();
	s->grace_end = s->stop_at + grace;
	s->timeout = stop_is_time_limit(sig, n->job_end_time != 0,
					(double)(n->job_end_time - time(NULL)), n->warn_signo,
					n->warn_lead);
	stork_info("%s: SIG%s to the program's %d rank(s) on %s; they have %.0f s to save and "
		   "exit with %d", why, config_signal_name(s->p->cfg->program.signal),
		   running_ranks(s), s->p->node->host, grace, PROGRAM_CHECKPOINTED_EXIT);
	for (int i = 0; i < s->n; i++)
		if (s->r[i].running)
			rank_logf(&s->r[i].log, "%s: sending SIG%s", why,
				  config_signal_name(s->p->cfg->program.signal));
	signal_ranks(s, s->p->cfg->program.signal, 1);
}

static void ask_for_stacks(struct supervisor *s, double wall)
{
	s->stacks_due = clock_monotonic() + (wall - clock_wall());
}

/*
 * Another node's notice ends this node's ranks: after the first failure
 * (the local ranks that failed since, for a lost peer, named as such), or
 * for a hang, whose stacks every node asks for at the same moment: asked
 * one node after the other, the first node's ranks would die and the
 * others' would fail in their collectives instead of printing where they
 * wait.
 */
static void ended_by_notice(struct supervisor *s, const struct end_notice *n)
{
	size_t used;

	s->ending = END_PEER;
	if (n->kind == END_NOTICE_HANG) {
		snprintf(s->why, sizeof s->why, "the program's ranks on %s were ended: another "
			 "node found a hang (every rank's stack is in its log)", s->p->node->host);
		ask_for_stacks(s, n->at);
		return;
	}
	msg_format(s->why, sizeof s->why, "the program's ranks on %s were ended after the first "
		   "failure: %s", s->p->node->host, n->message);
	used = strlen(s->why);
	for (int i = 0; i < s->n && used < sizeof s->why; i++)
		if (s->r[i].lost_peer) {
			char text[512];

			describe_rank(s, &s->r[i], text, sizeof text);
			used += (size_t)snprintf(s->why + used, sizeof s->why - used,
						 "; then %s (secondary)", text);
		}
	stork_info("%s", s->why);
	terminate(s);
}

/* A hang found here: the first node to find it announces it and says so. */
static void begin_hang(struct supervisor *s)
{
	struct end_notice n = { .kind = END_NOTICE_HANG, .at = clock_wall() + ANNOUNCE_S }, first;
	int rc;

	snprintf(n.message, sizeof n.message, "%s", s->why);
	rc = end_notice_post(s->notice, &n, &first);
	if (rc == 0 && first.kind == END_NOTICE_FAILED) {
		ended_by_notice(s, &first);
		return;
	}
	/* the silent ranks here are in this node's record either way */
	s->ending = END_HANG;
	if (rc == 0) {
		ask_for_stacks(s, first.at);
		return;
	}
	if (rc < 0)
		stork_warn("cannot tell the other nodes of the hang through %s: %s", s->notice,
			   strerror(errno));
	stork_warn("hang: the program's ranks on %s sent no heartbeat for %.0f s "
		   "(preempt.hang_timeout); every rank is asked for its stack, and the verdict "
		   "names the rank that stopped first", s->p->node->host,
		   s->p->cfg->preempt.hang_timeout);
	ask_for_stacks(s, n.at);
}

/* A daemon of another node died: the world's abort says which. */
static void peer_lost(struct supervisor *s)
{
	struct end_notice n;
	const char *why;

	if (!s->p->hier)
		return;
	comm_hier_watch(s->p->hier);
	why = comm_abort_reason(s->p->daemons);
	if (!why || !*why)
		return;
	/* what the program did there, when it did something (its daemon ends after) */
	if (end_notice_read(s->notice, &n) && n.kind == END_NOTICE_FAILED) {
		ended_by_notice(s, &n);
		return;
	}
	s->ending = END_PEER;
	snprintf(s->why, sizeof s->why, "the program's ranks on %s were ended: another node's "
		 "daemon ended (%s)", s->p->node->host, why);
	stork_error("%s", s->why);
	terminate(s);
}

/* A local rank called MPI_Abort: it failed, whatever it does next. */
static int mpi_aborted(struct supervisor *s)
{
	for (int i = 0; i < s->n; i++)
		if (s->r[i].mpi_abort[0] && s->r[i].running) {
			fail(s, i);
			return 1;
		}
	return 0;
}

/* One look at everything that may end the ranks. */
static void watch(struct supervisor *s)
{
	double now = clock_monotonic();
	struct end_notice notice;
	char why[64];
	int sig;

	if (s->ending == END_NONE) {
		if ((sig = atomic_load(s->p->node->stop_requested))) {
			snprintf(why, sizeof why, "stop requested by SIG%s",
				 sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
			begin_stop(s, why, sig);
		}
		else if (deadline_near(s))
			begin_stop(s, "deadline guard: the job's end is near", 0);
	}
	for (int i = 0; s->ending == END_NONE && i < s->n; i++)
		if (s->r[i].stop_death && now - s->r[i].stop_death > STOP_DEATH_S)
			fail(s, i);
	if (s->ending == END_NONE && mpi_aborted(s))
		return;
	if (s->ending == END_NONE && end_notice_read(s->notice, &notice))
		ended_by_notice(s, &notice);
	for (int i = 0; s->ending == END_NONE && i < s->n; i++)
		if (s->r[i].lost_peer && now - s->r[i].lost_peer > LOST_PEER_WAIT_S)
			fail(s, i);
	if (s->ending == END_NONE && find_hang(s))
		begin_hang(s);
	if (s->ending == END_NONE)
		peer_lost(s);
	if (s->stacks_due && !s->stacks_at && now >= s->stacks_due) {
		s->stacks_at = now;
		for (int i = 0; i < s->n; i++)
			if (s->r[i].running)
				rank_logf(&s->r[i].log, "hang: asking for the stacks (SIGABRT)");
		signal_ranks(s, SIGABRT, 0);
	}
	if ((s->ending == END_STOP && now >= s->grace_end) ||
	    (s->stacks_at && now >= s->stacks_at + STACKS_S))
		terminate(s);
	if (s->term_at && now >= s->term_at + s->p->cfg->program.kill_grace)
		signal_ranks(s, SIGKILL, 1);
}

/* ------------------------------------------------------------- the loop */

/* Read the ranks' output for up to ms milliseconds; the number of open streams. */
static int pump(struct supervisor *s, int ms)
{
	struct pollfd fds[2 * s->n];
	struct output_stream *streams[2 * s->n];
	struct rank_output *owners[2 * s->n];
	int nfds = 0;

	for (int i = 0; i < s->n; i++) {
		struct output_stream *two[] = { &s->r[i].out.out, &s->r[i].out.err };

		for (int k = 0; k < 2; k++)
			if (two[k]->fd >= 0) {
				fds[nfds] = (struct pollfd){ .fd = two[k]->fd, .events = POLLIN };
				streams[nfds] = two[k];
				owners[nfds++] = &s->r[i].out;
			}
	}
	if (!nfds) {
		nanosleep(&(struct timespec){ 0, ms * 1000000L }, NULL);
		return 0;
	}
	if (poll(fds, (nfds_t)nfds, ms) > 0)
		for (int k = 0; k < nfds; k++)
			if (fds[k].revents)
				output_stream_read(owners[k], streams[k]);
	return nfds;
}

/* A rank's death by a stop signal or for a lost peer still waits to be judged (see reap). */
static int undecided(const struct supervisor *s)
{
	for (int i = 0; s->ending == END_NONE && i < s->n; i++)
		if (s->r[i].stop_death || s->r[i].lost_peer)
			return 1;
	return 0;
}

/* Teed stderr once it has waited (a rank's failure waiting to be judged
 * keeps its own); all of it once the node's ending is said. */
static void release_output(struct supervisor *s)
{
	double before = s->ending == END_NONE ? clock_wall() - TEE_HOLD_S : INFINITY;

	for (int i = 0; i < s->n; i++)
		if (s->ending != END_NONE || !s->r[i].lost_peer)
			output_release(&s->r[i].out, before);
}

static void supervise(struct supervisor *s)
{
	double all_ended = 0;

	for (;;) {
		int open = pump(s, 100);

		reap(s);
		tensorboard_poll(&s->tb, 0);
		for (int i = 0; i < s->n; i++)
			if (s->r[i].running)
				rank_usage_watch(&s->r[i].usage, s->r[i].pid, &s->r[i].log,
						 s->p->cfg->metrics.sample_s);
		watch(s);
		release_output(s);
		if (running_ranks(s) || undecided(s))
			continue;
		if (!all_ended)
			all_ended = clock_monotonic();
		/* what the ranks' own children still print, for a moment */
		if (!open || clock_monotonic() - all_ended > DRAIN_S)
			break;
	}
	for (int i = 0; i < s->n; i++) {
		kill(-s->r[i].pid, SIGKILL); /* no process of a rank is left behind */
		rank_output_close(&s->r[i].out);
	}
}

/* ------------------------------------------------------------ the result */

static int64_t last_step(const struct prank *r)
{
	return metrics_file_last_step(r->metrics);
}

/* exit_info's first failure: rank, code or signal, what it said. */
static void add_failure(json_t *v, const struct supervisor *s, int secondary)
{
	const struct prank *r = &s->r[s->failed];
	struct program_error e = { 0 };
	int st = r->status;

	rank_error(r, &e);
	json_object_set_new(v, "failed_rank", json_integer(r->rank));
	json_object_set_new(v, "failed_rank_pid", json_integer(r->pid));
	/* a hang began when the rank went silent: the silent first are the cause */
	json_object_set_new(v, "fail_time", json_real(s->ending == END_HANG && r->beat ? r->beat :
						      r->end ? r->end : clock_wall()));
	json_object_set_new(v, "failed_rank_step", json_integer(last_step(r)));
	json_object_set_new(v, "failed_rank_code",
			    json_integer(r->end && WIFEXITED(st) ? WEXITSTATUS(st) : -1));
	if (r->end && WIFSIGNALED(st)) {
		char sig[16];

		snprintf(sig, sizeof sig, "SIG%s", sigabbrev_np(WTERMSIG(st)) ?
			 sigabbrev_np(WTERMSIG(st)) : "?");
		json_object_set_new(v, "failed_rank_signal", sj_text(sig));
	}
	if (e.message[0])
		json_object_set_new(v, "failed_rank_error", sj_text(e.message));
	if (e.frame[0])
		json_object_set_new(v, "failed_rank_frame", sj_text(e.frame));
	if (r->oom)
		json_object_set_new(v, "failed_rank_oom", json_pack(
			"{s:o, s:o, s:o}",
			"cgroup", r->verdict.cgroup ? sj_text(r->verdict.dir) : json_null(),
			"limit_bytes", r->verdict.limit > 0 ? json_real(r->verdict.limit) : json_null(),
			"held_bytes", r->verdict.held >= 0 ? json_real(r->verdict.held) : json_null()));
	json_object_set_new(v, "secondary", json_boolean(secondary));
}

/* A stop's ranks: how many confirmed, and the others named in s->why. */
static int unconfirmed(struct supervisor *s, char *names, size_t len)
{
	size_t used = 0;
	int n = 0;

	names[0] = '\0';
	for (int i = 0; i < s->n; i++) {
		const struct prank *r = &s->r[i];

		if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == PROGRAM_CHECKPOINTED_EXIT)
			continue;
		if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0 && s->ending != END_STOP)
			continue;
		n++;
		if (used < len) {
			char how[64];
			int sig = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;

			describe_status(r->status, how, sizeof how);
			/* the stop signal's default action: the program never caught it */
			used += (size_t)snprintf(names + used, len - used, "%s%d (%s%s)",
						 n > 1 ? ", " : "", r->rank, how,
						 sig == s->p->cfg->program.signal ?
						 ": the program has no handler for program.signal" :
						 "");
		}
	}
	return n;
}

/*
 * Completed or stopped: the daemons agree (a MAX all-reduce of whether any
 * saw a stop and whether any rank left its checkpoint unconfirmed), then
 * daemon 0 requeues a stopped job and tells the others how it went.
 */
static int agree_end(struct supervisor *s, int stopped, int missing, int *code)
{
	int32_t v[2] = { stopped, missing > 0 }, c[1] = { 0 };
	struct comm *w = s->p->daemons;
	const struct train_node *n = s->p->node;

	if (w && comm_allreduce(w, v, 2, COMM_INT32, COMM_MAX) < 0)
		return -1;
	if (!v[0]) {
		s->agreed = 1;
		*code = STORK_EXIT_OK;
		return 0;
	}
	if (n->node_rank == 0) {
		char err[768];
		int rc;

		*code = s->timeout ? STORK_EXIT_TIMEOUT : STORK_EXIT_PREEMPTED;
		if (!n->slurm_job) {
			/* outside Slurm a program run is found again by its name alone */
			snprintf(err, sizeof err, "not a Slurm job: nothing to requeue; to resume, "
				 "run it again with --set run.name=%s", s->p->cfg->run.name);
			*code = STORK_EXIT_REQUEUE_FAILED;
		} else if ((rc = slurm_job_requeue(n->slurm_job, err, sizeof err)) < 0) {
			*code = STORK_EXIT_REQUEUE_FAILED;
		} else if (rc == SLURM_JOB_WAS_CANCELLED) {
			*code = STORK_EXIT_CANCELLED;
		} else {
			printf("job %u requeued: the program resumes from STORK_CHECKPOINT_DIR\n",
			       n->slurm_job);
			fflush(stdout);
		}
		if (*code == STORK_EXIT_REQUEUE_FAILED)
			stork_error("requeue failed: %s", err);
		c[0] = *code;
	}
	if (w && comm_allreduce(w, c, 1, COMM_INT32, COMM_MAX) < 0)
		return -1;
	s->agreed = 1;
	*code = c[0];
	snprintf(s->why, sizeof s->why, "%s: %s; %s",
		 *code == STORK_EXIT_CANCELLED ? "cancelled" :
		 *code == STORK_EXIT_TIMEOUT || s->timeout ? "stopped on request (time limit near)" :
		 "stopped on request (preempted)",
		 v[1] ? "a rank did not confirm its checkpoint (exit 10) before it ended, so the "
			"checkpoint is unconfirmed" :
			"every rank confirmed its checkpoint (exit 10)",
		 *code == STORK_EXIT_CANCELLED ? "job not requeued" :
		 *code == STORK_EXIT_REQUEUE_FAILED ? "the requeue failed" : "job requeued");
	return 0;
}

static int finish(struct supervisor *s, json_t *v)
{
	char names[1024];
	int code = STORK_EXIT_OK, missing, stopped = s->ending == END_STOP;

	switch (s->ending) {
	case END_FAILED:
		add_failure(v, s, s->secondary);
		return s->r[s->failed].oom ? STORK_EXIT_OUT_OF_MEMORY : STORK_EXIT_RANK_FAILED;
	case END_HANG:
		add_failure(v, s, 0);
		return STORK_EXIT_HANG;
	case END_PEER:
		json_object_set_new(v, "secondary", json_true());
		return STORK_EXIT_RANK_FAILED;
	default:
		break;
	}
	missing = unconfirmed(s, names, sizeof names);
	if (!stopped)
		missing = 0;
	if (agree_end(s, stopped, missing, &code) < 0) {
		snprintf(s->why, sizeof s->why, "another node's daemon ended before the program's "
			 "end was agreed (%s)", comm_abort_reason(s->p->daemons));
		json_object_set_new(v, "secondary", json_true());
		return STORK_EXIT_RANK_FAILED;
	}
	if (code == STORK_EXIT_OK)
		snprintf(s->why, sizeof s->why, "the program completed on %d rank(s)",
			 s->p->node->world_size);
	else if (missing)
		stork_warn("rank(s) %s on %s did not confirm a checkpoint", names, s->p->node->host);
	return code;
}

/* ------------------------------------------------------------ the whole */

static int open_rank(const struct program_run *p, struct prank *r, int local, char *err,
		     size_t errlen)
{
	const struct train_node *n = p->node;

	r->local = local;
	r->rank = n->rank_base + local;
	program_rank_file(r->heartbeat, sizeof r->heartbeat, n->run_dir, r->rank, "heartbeat");
	program_rank_file(r->metrics, sizeof r->metrics, n->run_dir, r->rank, "metrics.jsonl");
	program_rank_file(r->error_file, sizeof r->error_file, n->run_dir, r->rank, "error.json");
	/* an error file of an earlier attempt is not this one's error */
	if (unlink(r->error_file) < 0 && errno != ENOENT) {
		msg_format(err, errlen, "cannot remove %s: %s", r->error_file, strerror(errno));
		return -1;
	}
	r->out.out.fd = r->out.err.fd = -1;
	return rank_log_open(&r->log, n->run_dir, r->rank, local, n->host, n->job_id, err, errlen);
}

int program_run(const struct program_run *p, json_t **result)
{
	struct supervisor s = { .p = p, .n = p->node->local_ranks, .failed = -1 };
	char err[1024], dir[4200];
	int code = STORK_EXIT_INTERNAL, opened = 0, started = 1;
	json_t *v = json_object();

	*result = v;
	s.r = calloc((size_t)s.n, sizeof *s.r);
	snprintf(dir, sizeof dir, "%s/checkpoints", p->node->run_dir);
	if (!s.r || !v) {
		snprintf(s.why, sizeof s.why, "out of memory");
		goto out;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		msg_format(s.why, sizeof s.why, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	/* per attempt: an earlier attempt's ending is not this one's */
	if (end_notice_path(s.notice, sizeof s.notice, p->node->run_dir, p->node->job_id,
			    p->node->restart_count, p->node->attempt) < 0) {
		snprintf(s.why, sizeof s.why, "run directory path too long: %s", p->node->run_dir);
		goto out;
	}
	/* one node alone: a notice left by a run killed before its end is stale */
	if (!p->daemons)
		unlink(s.notice);
	if (p->cfg->program.pmix && pmix_host_start(&s.pmix, p, err, sizeof err) < 0) {
		snprintf(s.why, sizeof s.why, "%s", err);
		goto out;
	}
	for (; opened < s.n; opened++)
		if (open_rank(p, &s.r[opened], opened, err, sizeof err) < 0) {
			snprintf(s.why, sizeof s.why, "%s", err);
			goto out;
		}
	arm_guard(&s);
	if (p->cfg->metrics.tensorboard)
		tensorboard_start(&s.tb, p->node->run_dir, p->node->host, p->node->rank_base, s.n);
	for (int i = 0; i < s.n; i++)
		if (start_rank(&s, &s.r[i], err, sizeof err) < 0) {
			terminate(&s);
			started = 0;
			break;
		}
	supervise(&s);
	if (started) {
		code = finish(&s, v);
	} else {
		snprintf(s.why, sizeof s.why, "%s", err);
		code = STORK_EXIT_INTERNAL;
	}
out:
	/* without an agreement the other daemons must not wait for this one
	 * (freeing the communicator ends with a barrier unless aborted): they
	 * see it end and end their ranks */
	if (p->daemons && !s.agreed)
		comm_abort(p->daemons, s.why[0] ? s.why : "a daemon ended");
	/* a fence other nodes' ranks left without MPI_Finalize waits for nothing now */
	else if (p->daemons && pmix_host_fence_pending(s.pmix))
		comm_abort(p->daemons, "an MPI fence another node's ranks never entered");
	pmix_host_stop(s.pmix);
	if (code != STORK_EXIT_OK && code != STORK_EXIT_RANK_FAILED && code != STORK_EXIT_HANG &&
	    code != STORK_EXIT_OUT_OF_MEMORY)
		stork_info("%s", s.why);
	if (v) {
		int64_t step = -1;

		for (int i = 0; i < opened; i++) {
			int64_t k = last_step(&s.r[i]);

			if (step < 0 || (k >= 0 && k < step))
				step = k;
		}
		json_object_set_new(v, "exit_code", json_integer(code));
		json_object_set_new(v, "last_step", json_integer(step));
		json_object_set_new(v, "message", sj_text(s.why));
		json_object_set_new(v, "checkpoint", sj_text(""));
		json_object_set_new(v, "checkpoint_step", json_integer(-1));
	}
	tensorboard_end(&s.tb);
	for (int i = 0; i < opened; i++)
		rank_log_close(&s.r[i].log);
	free(s.r);
	return code;
}
