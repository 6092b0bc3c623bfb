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
	command -v mpicc >/dev/null && "$PY" -c 'import mpi4py' 2>/dev/null ||
		skip "Debian's openmpi-bin, libopenmpi-dev and python3-mpi4py are not installed"
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
	[[ -n "${job:-}" ]] || return 0
	scontrol update jobid="$job" requeue=0 2>/dev/null || true
	scancel "$job" 2>/dev/null || true
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
