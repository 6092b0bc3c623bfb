/*
 * lib/stop_signals.h - the signals Stork takes over from their default
 * action, held back until the process that receives them can act on them,
 * and what each one does.
 *
 * What they do (stork(1), SIGNALS): USR1 and USR2 (Slurm's --signal and
 * scancel --signal: preempt.signal names one, and the other is taken the
 * same way, as nothing else in a job sends it), TERM (the time limit,
 * preemption, scancel) and INT (kill -INT, ^C outside Slurm) stop the run:
 * the checkpoint of the next step boundary, then a requeue unless
 * slurmctld says the job was cancelled. HUP is ignored, with a line in the
 * job's output: Slurm never sends it to a step's tasks itself (srun answers
 * its own HUP by killing the step), so it comes from a terminal that hung
 * up or from a person, and a hang-up is no reason to end a training run.
 * The launcher forwards all five to storkd, which decides.
 *
 * Why they are held back: Slurm sends the preemption signal to every
 * process of a step at a moment of its choosing: with --signal=USR1@N it
 * may come up to a minute early, that is right as the step starts. A
 * launcher or daemon that has not yet installed its handler would die of it
 * (the default action of all five) and the run would end with nothing saved
 * and nothing requeued. So `stork run` blocks these signals as its first
 * act. The mask survives exec and fork, which covers the start of storkd
 * and the re-executions of ops_cpu_blas_reexec; each process unblocks once
 * its handler is in place, and a signal that came meanwhile, held pending,
 * is delivered then.
 */
#ifndef STORK_STOP_SIGNALS_H
#define STORK_STOP_SIGNALS_H

#include <signal.h>
#include <spawn.h>
#include <stddef.h>

/* The signals Stork takes over; the launcher forwards each to storkd. */
static const int stop_signal_list[] = { SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP };
#define STOP_SIGNAL_COUNT (sizeof stop_signal_list / sizeof stop_signal_list[0])

/* Whether sig, one of the list, stops the run (every one but HUP, which is ignored). */
static inline int stop_signal_stops(int sig)
{
	for (size_t i = 0; i < STOP_SIGNAL_COUNT; i++)
		if (stop_signal_list[i] == sig)
			return sig != SIGHUP;
	return 0;
}

static inline void stop_signals_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < STOP_SIGNAL_COUNT; i++)
		sigaddset(set, stop_signal_list[i]);
}

static inline void stop_signals_block(void)
{
	sigset_t set;

	stop_signals_set(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

static inline void stop_signals_unblock(void)
{
	sigset_t set;

	stop_signals_set(&set);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/*
 * A child that posix_spawn starts with the stop signals blocked: Slurm
 * signals every process of the step, and a child (scontrol, srun) that
 * died of one would lose what it was started for. The caller destroys attr.
 */
static inline void stop_signals_spawnattr(posix_spawnattr_t *attr)
{
	sigset_t set;

	stop_signals_set(&set);
	posix_spawnattr_init(attr);
	posix_spawnattr_setsigmask(attr, &set);
	posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK);
}

#endif
