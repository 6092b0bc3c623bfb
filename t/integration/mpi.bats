#!/usr/bin/env bats
# MPI programs under `srun stork run -- PROGRAM` on the real cluster: Open
# MPI's ranks are clients of storkd-program's PMIx server
# (daemon/program/pmix_host.h), with every guarantee of a program run.

load helpers
load ../training

STORK=${abs_top_builddir:?set by make check}/launcher/stork
PY=/usr/bin/python3
PROG=${abs_top_srcdir:?}/t/integration/program

setup() {
	setup_workdir
	if ! command -v mpicc >/dev/null || ! "$PY" -c 'import mpi4py' 2>/dev/null; then
		skip "Debian's openmpi-bin, libopenmpi-dev and python3-mpi4py are not installed"
	fi
	mpicc -O1 -o mpi_check "$PROG/mpi_check.c"
	cat >allreduce.py <<-'PYEOF'
	import os
	from mpi4py import MPI
	c = MPI.COMM_WORLD
	s = c.allreduce(c.Get_rank(), op=MPI.SUM)
	print(f"mpi4py rank {c.Get_rank()} of {c.Get_size()} on {MPI.Get_processor_name()}: sum {s}", flush=True)
	print(f"cpus {sorted(os.sched_getaffinity(0))}", flush=True)
	PYEOF
}

teardown() {
	cancel_test_job
}

# ended_within SECONDS EXIT_INFO: the run's record was written within
# SECONDS of its first failure (every other rank was gone by then).
ended_within() {
	local failed ended
	failed=$(jq .first_failure.timestamp "$2")
	ended=$(stat -c %Y "$2")
	echo "failure to the end of the run: $((ended - ${failed%.*})) s" >&3
	[ $((ended - ${failed%.*})) -le "$1" ]
}

# mpi_job NAME SBATCH-LINE STORK-ARGS -- PROGRAM...: one srun of stork run.
mpi_job() {
	local name=$1 extra=$2
	shift 2
	printf '#!/bin/bash\n#SBATCH -o %s.out -J %s %s\nsrun %s run --set run.name=%s %s\n' \
		"$name" "$name" "$extra" "$STORK" "$name" "$*" >"$name.sh"
}

@test "MPI: mpi4py's allreduce and a C program's allreduce, ring, split and barrier are right on 2 nodes x 2 ranks, one launcher per node (--local-ranks 2) and one per rank (--ntasks-per-node=2); the ranks bound as any program's" {
	mpi_job py "-N2 --ntasks-per-node=1 -c2" --local-ranks 2 --set program.tee=all -- "$PY" allreduce.py
	run sbatch_wait py.sh
	cat py.out
	[ "$status" -eq 0 ]
	for r in 0 1 2 3; do
		grep -q "^\[rank $r\] mpi4py rank $r of 4 on n$((r / 2 + 1)): sum 6$" py.out
	done
	dir=$(ls -d "$WORK"/runs/py__job=*__task=0)
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	# bound as any program's rank: the cores a program without MPI gets
	mpi_job plain "-N2 --ntasks-per-node=1 -c2" --local-ranks 2 --set program.tee=all -- \
		"$PY" -c "'import os; print(\"cpus\", sorted(os.sched_getaffinity(0)))'"
	run sbatch_wait plain.sh
	[ "$status" -eq 0 ]
	for r in 0 1 2 3; do
		[ "$(grep "^\[rank $r\] cpus" py.out)" = "$(grep "^\[rank $r\] cpus" plain.out)" ]
	done

	for layout in "-N2 --ntasks-per-node=1 -c2|--local-ranks 2" "-N2 --ntasks-per-node=2 -c1|"; do
		mpi_job c "${layout%%|*}" "${layout#*|}" -- ./mpi_check
		run sbatch_wait c.sh
		cat c.out
		[ "$status" -eq 0 ]
		grep -q '^allreduce ok 6$' c.out
		grep -q '^ring ok 4$' c.out
		grep -q '^split ok 4$' c.out
		grep -q '^barrier ok 4$' c.out
		rm -f c.out
	done
}

@test "MPI: a rank calling MPI_Abort and one that segfaults are named in exit_info with their host and MPI's words; every other rank is gone within 15 s, and no shared-memory file stays behind" {
	shm_before=$(find /dev/shm -maxdepth 1 -user "$(id -u)" | wc -l)
	mpi_job ab "-N2 --ntasks-per-node=1 -c2" --local-ranks 2 -- ./mpi_check --steps 400 --sleep 0.2 --abort-rank 3
	run sbatch_wait ab.sh
	[ "$status" -eq 1 ]
	dir=$(ls -d "$WORK"/runs/ab__job=*__task=0)
	info=$dir/exit_info.json
	jq -e '.reason == "rank_failed" and .first_failure.rank == 3 and .first_failure.host == "n2" and .first_failure.exit_code == 3' "$info"
	jq -e '.first_failure.error == "MPI_Abort (errorcode 3) in communicator MPI_COMM_WORLD"' "$info"
	grep -q '^stork: rank_failed (exit 20): rank 3 on n2 aborted: MPI_Abort (errorcode 3) in communicator MPI_COMM_WORLD$' ab.out
	ended_within 15 "$info"

	mpi_job sg "-N2 --ntasks-per-node=1 -c2" --local-ranks 2 -- ./mpi_check --steps 400 --sleep 0.2 --segv-rank 2
	run sbatch_wait sg.sh
	[ "$status" -eq 1 ]
	dir=$(ls -d "$WORK"/runs/sg__job=*__task=0)
	info=$dir/exit_info.json
	jq -e '.first_failure.rank == 2 and .first_failure.host == "n2" and .first_failure.signal == "SIGSEGV"' "$info"
	jq -r .first_failure.error "$info" | grep -q '^Segmentation fault (11), Address not mapped (1) at (nil)$'
	jq -r .first_failure.traceback_last_frame "$info" | grep -q '^./mpi_check(+0x'
	ended_within 15 "$info"
	# restart.max_restarts: the next attempt's ranks are a new PMIx namespace
	mpi_job again "-N2 --ntasks-per-node=1 -c2" --local-ranks 2 --set restart.max_restarts=1 \
		-- ./mpi_check --steps 4 --sleep 0.1 --abort-rank 3
	run sbatch_wait again.sh
	[ "$status" -eq 0 ]
	dir=$(ls -d "$WORK"/runs/again__job=*__task=0)
	jq -e '.reason == "completed" and (.restarts | length) == 1 and .restarts[0].reason == "rank_failed"' \
		"$dir/exit_info.json"
	grep -q '\] rank 3: done, 4 steps$' "$dir/logs/rank-003.log"

	# no rank of any job is left, nor Open MPI's segments of the killed ranks
	! pgrep -f 'mpi_check --steps 400' || false
	[ "$(find /dev/shm -maxdepth 1 -user "$(id -u)" | wc -l)" -eq "$shm_before" ]
}

@test "MPI: a checkpoint-on-signal MPI program preempted with scancel --signal=USR1 saves on every rank, is requeued and resumes to its end" {
	mpi_job pre "-N2 --ntasks-per-node=1 -c2 --requeue --open-mode=append" --local-ranks 2 -- ./mpi_check --steps 60 --sleep 0.2
	job=$(submit pre.sh)
	dir=$(run_dir pre "$job")
	wait_job_state "$job" RUNNING 60
	for _ in $(seq 120); do
		grep -q '\] rank 3 step 5$' "$dir/logs/rank-003.log" 2>/dev/null && break
		sleep 0.5
	done
	scancel --signal=USR1 "$job"
	wait_job_state "$job" COMPLETED 300
	[ "$(job_field "$job" Restarts)" -eq 1 ]
	jq -e '.reason == "preempted_requeued"' "$dir/exit_info.node-000.requeue-0.json"
	for r in 0 1 2 3; do
		log=$dir/logs/rank-00$r.log
		grep -q "\] rank $r: saved step [0-9]*$" "$log"
		grep -q "\] rank $r: resuming after step" "$log"
		grep -q "\] rank $r: done, 60 steps$" "$log"
	done
	[ "$(jq -r .reason "$dir/exit_info.json")" = completed ]
	job=""
}

@test "MPI: stork run -- mpirun is refused before anything starts; outside Slurm an MPI program's ranks are one world too, in a PMIx namespace another user cannot name" {
	run "$STORK" run -- mpirun -n 2 ./mpi_check
	[ "$status" -eq 3 ]
	[[ "$output" == *"stork run -- mpirun: mpirun starts ranks of its own, which Stork would neither bind nor watch; give the MPI program itself"* ]]
	[ ! -e runs ]

	run "$STORK" run --local-ranks 2 --set run.name=here --set program.tee=all -- ./mpi_check
	[ "$status" -eq 0 ]
	[[ "$output" == *"[rank 0] allreduce ok 1"* ]]
	[[ "$output" == *"[rank 0] split ok 2"* ]]
	# the namespace's name ends in a secret of 128 bits, new for each run
	for n in 1 2; do
		"$STORK" run --local-ranks 1 --set run.name=ns$n --set program.tee=all -- \
			/usr/bin/printenv PMIX_NAMESPACE >ns$n.out 2>/dev/null
		grep -Eq '^\[rank 0\] stork\.local\.0\.0\.[0-9a-f]{32}$' ns$n.out
	done
	! cmp -s ns1.out ns2.out || false
	# program.pmix false: no server, no PMIx variables
	"$STORK" run --local-ranks 1 --set run.name=nopmix --set program.pmix=false --set program.tee=all -- \
		/bin/sh -c 'env | grep -c ^PMIX_ || true' >nopmix.out 2>/dev/null
	grep -q '^\[rank 0\] 0$' nopmix.out
}

@test "MPI: stork bench launch --program times an MPI hello world to every rank's MPI_Init, beside plain srun --mpi=pmix" {
	printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=2 -c1 -o bench.out\n%s bench launch --program --repeat 3 -- %s --hello\n' \
		"$STORK" "$WORK/mpi_check" >bench.sh
	run sbatch_wait bench.sh
	cat bench.out
	[ "$status" -eq 0 ]
	grep -E '^median over 3 runs, 2 node\(s\) x 2 rank\(s\): srun with the plugin [0-9.]+ s; stork run -- PROGRAM [0-9.]+ s; stork adds -?[0-9.]+ s$' bench.out
	grep '^median' bench.out >&3
	[ -z "$(find . -maxdepth 2 -name 'bench-launch-*')" ]
}
