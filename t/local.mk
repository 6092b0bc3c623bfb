# Tests: Check unit tests (t/unit) and integration tests on a real Slurm
# cluster (t/integration), all run by `make check`.
