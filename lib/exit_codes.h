/*
 * lib/exit_codes.h - the exit codes of stork and storkd, one per reason.
 *
 * Documented in stork(1); tests and users rely on them, so never renumber.
 * The reasons are those of exit_info.json (see DESIGN.md).
 */
#ifndef STORK_EXIT_CODES_H
#define STORK_EXIT_CODES_H

enum stork_exit_code {
	STORK_EXIT_OK = 0,              /* reason "completed" */
	STORK_EXIT_INTERNAL = 1,        /* a bug or an unexpected system error */
	STORK_EXIT_USAGE = 2,           /* bad command line */
	STORK_EXIT_CONFIG = 3,          /* reason "config_error": bad YAML, unknown key, bad value */
	STORK_EXIT_DATA = 4,            /* reason "data_error": unreadable or malformed data file */
	STORK_EXIT_CHECKPOINT_BAD = 5,  /* checkpoint unreadable or of another model shape */
	STORK_EXIT_PREEMPTED = 10,      /* reason "preempted_requeued" */
	STORK_EXIT_TIMEOUT = 11,        /* reason "timeout_requeued" */
	STORK_EXIT_REQUEUE_FAILED = 12, /* reason "requeue_failed" */
	STORK_EXIT_CHECKPOINT_FAILED = 13, /* reason "checkpoint_failed" */
	STORK_EXIT_DIVERGED = 14,       /* reason "diverged": a non-finite loss or gradient norm */
	STORK_EXIT_NODE_LOST = 15,      /* reason "node_lost_requeued": requeued without a lost node */
	STORK_EXIT_CANCELLED = 16,      /* reason "cancelled": scancel ended the job, never requeued */
	STORK_EXIT_PREFLIGHT = 17,      /* reason "preflight_failed": a node fell short and could not be left out */
	STORK_EXIT_RANK_FAILED = 20,    /* reason "rank_failed" */
	STORK_EXIT_HANG = 21,           /* reason "hang" */
	STORK_EXIT_RENDEZVOUS = 22,     /* reason "rendezvous_timeout" */
	STORK_EXIT_OUT_OF_MEMORY = 23,  /* reason "out_of_memory": a rank killed for memory */
};

#endif
