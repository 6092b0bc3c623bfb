/*
 * daemon/engine/train/hang_report.c - what storkd's watchdog leaves when it finds a rank
 * stuck (see daemon/engine/train/hang_report.h).
 *
 * Stacks: the watchdog sends each running rank thread STACK_SIGNAL; its
 * handler only records the thread's return addresses (backtrace(), made
 * safe in a handler by a first call as the thread starts, which loads
 * libgcc) into the rank's progress slot, and the watchdog, in an ordinary
 * context, names them (backtrace_symbols: storkd is linked with
 * -rdynamic) and writes them into the rank's log.
 */
#define _GNU_SOURCE
#include "config.h"
#include "daemon/engine/train/hang_report.h"

#include "daemon/node/rank_log.h"
#include "lib/io/atomic_file.h"
#include "lib/clock.h"
#include "lib/run/hang_explain.h"
#include "lib/log.h"
#include "lib/formats/stork_json.h"

#include <execinfo.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STACK_SIGNAL (SIGRTMIN + 4)
#define STACK_WAIT_S 1.0        /* for every thread's stack, at most */

static _Thread_local struct rank_progress *stack_slot;

static void on_stack_signal(int sig)
{
	struct rank_progress *p = stack_slot;

	(void)sig;
	if (!p)
		return;
	p->stack_n = backtrace(p->stack, HANG_STACK_FRAMES);
	atomic_store_explicit(&p->stack_ready, 1, memory_order_release);
}

int hang_stacks_install(void)
{
	struct sigaction sa = { .sa_handler = on_stack_signal, .sa_flags = SA_RESTART };

	sigemptyset(&sa.sa_mask);
	return sigaction(STACK_SIGNAL, &sa, NULL);
}

void hang_stacks_attach(struct rank_progress *p)
{
	void *warm[2];

	(void)backtrace(warm, 2); /* loads libgcc now, not in the handler */
	stack_slot = p;
}

/* ------------------------------------------------------------ records */

/*
 * Local rank i's record, read while it may still run (relaxed: a
 * diagnosis). A rank in no collective of its own may wait for its
 * communication thread (parallel.overlap): the thread's collective, then.
 */
static json_t *rank_record(const struct train_node *node, int i, double now)
{
	const struct rank_progress *p = &node->progress[i];
	const struct comm_trace *t = &p->trace;
	int op = atomic_load_explicit(&t->op, memory_order_acquire), thread = 0;
	const char *group;
	json_t *r;

	if (op == COMM_TRACE_NONE &&
	    atomic_load_explicit(&p->comm_thread.op, memory_order_acquire) != COMM_TRACE_NONE) {
		t = &p->comm_thread;
		op = atomic_load_explicit(&t->op, memory_order_acquire);
		thread = 1;
	}
	group = atomic_load_explicit(&t->group, memory_order_relaxed);
	r = json_pack("{s:i, s:s, s:I, s:s, s:s, s:s, s:i}",
			      "rank", node->rank_base + i, "host", node->host,
			      "step", (json_int_t)atomic_load(&p->step) + 1,
			      "op", comm_trace_op_name(op), "group", group ? group : "",
			      "phase", rank_phase_name(atomic_load(&p->where.phase)),
			      "layer", atomic_load(&p->where.layer));

	if (!r || op == COMM_TRACE_NONE)
		return r;
	if (thread)
		json_object_set_new(r, "thread", json_string("communication"));
	json_object_set_new(r, "first", json_integer(atomic_load(&t->first)));
	json_object_set_new(r, "block", json_integer(atomic_load(&t->block)));
	json_object_set_new(r, "stride", json_integer(atomic_load(&t->stride)));
	json_object_set_new(r, "count", json_integer(atomic_load(&t->count)));
	json_object_set_new(r, "call", json_integer((json_int_t)atomic_load(&t->call)));
	json_object_set_new(r, "bytes", json_integer((json_int_t)atomic_load(&t->bytes)));
	json_object_set_new(r, "peer", json_integer(atomic_load(&t->peer)));
	json_object_set_new(r, "waiting_s", json_real(now - atomic_load(&t->since)));
	json_object_set_new(r, "failed", json_boolean(atomic_load(&t->failed)));
	return r;
}

static void write_records(const struct train_node *node, const json_t *records)
{
	char path[4200], err[512];

	hang_records_path(path, sizeof path, node->run_dir, node->node_rank, node->restart_count,
			  node->attempt);
	if (sj_write_file(path, records, err, sizeof err) < 0)
		stork_warn("%s", err);
}

/* ------------------------------------------------------------ stacks */

static void ask_stacks(const struct train_node *node, const pthread_t *threads, const int *running)
{
	double until = clock_monotonic() + STACK_WAIT_S;
	int pending;

	for (int i = 0; i < node->local_ranks; i++)
		if (running[i])
			pthread_kill(threads[i], STACK_SIGNAL);
	do {
		pending = 0;
		for (int i = 0; i < node->local_ranks; i++)
			pending += running[i] && !atomic_load(&node->progress[i].stack_ready);
		if (pending)
			nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	} while (pending && clock_monotonic() < until);
}

/* Local rank i's stack, named, into its log. */
static void log_stack(const struct train_node *node, int i)
{
	struct rank_progress *p = &node->progress[i];
	struct rank_log log;
	char err[512];
	char **names;

	if (!atomic_load_explicit(&p->stack_ready, memory_order_acquire) ||
	    rank_log_open(&log, node->run_dir, node->rank_base + i, i, node->host, node->job_id, err,
			  sizeof err) < 0)
		return;
	names = backtrace_symbols(p->stack, p->stack_n);
	rank_logf(&log, "stack of rank %d when the watchdog found the node stuck (%d frames):",
		  node->rank_base + i, p->stack_n);
	for (int k = 0; k < p->stack_n; k++)
		rank_logf(&log, "  #%d %s", k, names ? names[k] : "?");
	free(names);
	rank_log_close(&log);
}

void hang_report(const struct train_node *node, const pthread_t *threads, const int *running,
		 char *msg, size_t len)
{
	json_t *records = json_array();
	double now = clock_monotonic();
	size_t used = strlen(msg);

	for (int i = 0; records && i < node->local_ranks; i++)
		json_array_append_new(records, rank_record(node, i, now));
	if (records) {
		write_records(node, records);
		if (used + 4 < len && hang_explain(records, msg + used + 3, len - used - 3) > 0)
			memcpy(msg + used, " - ", 3);
		else
			msg[used] = '\0';
	}
	json_decref(records);
	ask_stacks(node, threads, running);
	for (int i = 0; i < node->local_ranks; i++)
		log_stack(node, i);
}
