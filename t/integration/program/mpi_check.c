/*
 * t/integration/program/mpi_check.c - an MPI program in C under `stork run
 * -- PROGRAM` (stork(1), RUNNING YOUR OWN PROGRAM), built by the tests with
 * mpicc, and an example of the contract for MPI programs.
 *
 * It checks what MPI gives it and prints one line per check, rank 0 for
 * all ("allreduce ok 6", "ring ok", "split ok", "barrier ok"), then runs
 * --steps steps: each sleeps --sleep seconds, all-reduces a flag set by
 * the stop signal ($STORK_PREEMPT_SIGNAL, USR1) so that every rank stops
 * at the same step, saves it in $STORK_CHECKPOINT_DIR/rank-R.step, calls
 * MPI_Finalize and exits $STORK_CHECKPOINTED_EXIT (10). A start that finds
 * its file goes on after the step it holds.
 *
 *   mpi_check [--steps N] [--sleep S] [--abort-rank R] [--segv-rank R]
 *   mpi_check --hello
 *
 * --hello: each rank prints "MPI_Init done at SECONDS" (the wall clock)
 * and ends: the program `stork bench launch --program` times.
 *
 * --abort-rank R: rank R calls MPI_Abort(MPI_COMM_WORLD, 3) after the
 * checks; --segv-rank R: rank R writes through a null pointer there; both
 * on the run's first start only ($STORK_RESTART_COUNT 0), so that a
 * restart goes through.
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static int check(int ok, int rank, const char *what, long value)
{
	long all = ok, every;

	MPI_Allreduce(&all, &every, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
	if (rank == 0)
		printf("%s %s %ld\n", what, every ? "ok" : "WRONG", value);
	fflush(stdout);
	return every ? 0 : 1;
}

/* Every rank's number, in a ring of sends: each receives its left neighbour's. */
static int ring(int rank, int size)
{
	int got = -1, right = (rank + 1) % size, left = (rank + size - 1) % size;

	MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, MPI_COMM_WORLD,
		     MPI_STATUS_IGNORE);
	return got == left;
}

/* Even and odd ranks apart: each group's sum of its world ranks. */
static int split(int rank, int size)
{
	MPI_Comm half;
	int sum = 0, want = 0;

	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
	for (int r = rank % 2; r < size; r += 2)
		want += r;
	MPI_Comm_free(&half);
	return sum == want;
}

static long saved_step(const char *path)
{
	FILE *f = fopen(path, "r");
	long step = -1;

	if (f) {
		if (fscanf(f, "%ld", &step) != 1)
			step = -1;
		fclose(f);
	}
	return step;
}

static void save_step(const char *path, long step)
{
	char tmp[4200];
	FILE *f;

	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (!(f = fopen(tmp, "w")) || fprintf(f, "%ld\n", step) < 0 || fclose(f) != 0 ||
	    rename(tmp, path) != 0) {
		perror(path);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

int main(int argc, char **argv)
{
	int rank, size, abort_rank = -1, segv_rank = -1, bad = 0;
	long steps = 0, start = 0;
	double sleep_s = 0.1;
	const char *sig = getenv("STORK_PREEMPT_SIGNAL"), *dir = getenv("STORK_CHECKPOINT_DIR");
	char state[4096] = "";
	long sum = 0, want;

	if (argc == 2 && !strcmp(argv[1], "--hello")) {
		struct timespec now;

		MPI_Init(&argc, &argv);
		clock_gettime(CLOCK_REALTIME, &now);
		printf("MPI_Init done at %.6f\n", (double)now.tv_sec + now.tv_nsec * 1e-9);
		MPI_Finalize();
		return 0;
	}
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--steps"))
			steps = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sleep"))
			sleep_s = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--abort-rank"))
			abort_rank = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--segv-rank"))
			segv_rank = atoi(argv[i + 1]);
	}
	signal(sig && !strcmp(sig, "USR2") ? SIGUSR2 : SIGUSR1, on_stop);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d of %d\n", rank, size);
	fflush(stdout);

	long mine = rank;
	MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	want = (long)size * (size - 1) / 2;
	bad |= check(sum == want, rank, "allreduce", sum);
	bad |= check(ring(rank, size), rank, "ring", size);
	bad |= check(split(rank, size), rank, "split", size);
	MPI_Barrier(MPI_COMM_WORLD);
	bad |= check(1, rank, "barrier", size);
	if (getenv("STORK_RESTART_COUNT") && atoi(getenv("STORK_RESTART_COUNT")) > 0)
		abort_rank = segv_rank = -1;
	if (rank == abort_rank) {
		fprintf(stderr, "rank %d: calling MPI_Abort\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	if (rank == segv_rank) {
		fprintf(stderr, "rank %d: writing through a null pointer\n", rank);
		*(volatile int *)NULL = 1;
	}

	if (dir)
		snprintf(state, sizeof state, "%s/rank-%d.step", dir, rank);
	if (state[0] && saved_step(state) >= 0) {
		start = saved_step(state) + 1;
		printf("rank %d: resuming after step %ld\n", rank, start - 1);
	}
	for (long step = start; step < steps; step++) {
		struct timespec nap = { (time_t)sleep_s, (long)((sleep_s - (long)sleep_s) * 1e9) };
		int flag = stop, any = 0;

		nanosleep(&nap, NULL);
		printf("rank %d step %ld\n", rank, step);
		fflush(stdout);
		/* the step boundary: every rank stops at the same step */
		flag = stop;
		MPI_Allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (any && state[0]) {
			save_step(state, step);
			printf("rank %d: saved step %ld\n", rank, step);
			MPI_Finalize();
			return getenv("STORK_CHECKPOINTED_EXIT") ? atoi(getenv("STORK_CHECKPOINTED_EXIT")) : 10;
		}
	}
	if (steps)
		printf("rank %d: done, %ld steps\n", rank, steps);
	MPI_Finalize();
	return bad;
}
