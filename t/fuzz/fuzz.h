/*
 * t/fuzz/fuzz.h - what the fuzzing harnesses share.
 *
 * Each t/fuzz/fuzz_NAME.c hands the bytes it is given to one reader of
 * outside input, the tree's own code, and releases everything it got back:
 * a leak or a sanitizer report is a finding. libFuzzer calls it (`make
 * fuzz`, t/fuzz/local.mk); t/fuzz/run_inputs.c calls it on the kept seed
 * and regression inputs (`make check`).
 *
 * Readers that take a path read a file that the harness writes first into
 * a private directory: under $TMPDIR when set, else /dev/shm (memory: an
 * input costs no disk write), else /tmp. It is made on first use and
 * removed, with what is in it, when the process exits normally (after a
 * crash `make fuzz` removes the $TMPDIR it gave).
 */
#ifndef STORK_T_FUZZ_H
#define STORK_T_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The private directory (absolute path); aborts when none can be made. */
const char *fuzz_dir(void);

/*
 * Replace the file name (a path relative to fuzz_dir(); its directories
 * are made) with the size bytes at data, and put its absolute path in
 * path. Aborts on failure: a harness that cannot write its input tests
 * nothing.
 */
void fuzz_write(char *path, size_t len, const char *name, const void *data, size_t size);

/* Silence the tree's stderr logging (lib/log.h) once per process. */
void fuzz_quiet(void);

/*
 * The job's secret of the TCP rendezvous harnesses (its path): a fixed
 * key of FUZZ_RDV_SECRET in fuzz_dir(), mode 0600, standing in for munged
 * as on a node where munged does not answer (lib/rendezvous/rendezvous_auth.h), so
 * that seeds can carry credentials that verify. munged is made
 * unreachable: SLURM_CONF names a file whose AuthInfo socket is absent.
 */
#define FUZZ_RDV_SECRET "stork fuzzing: a well-known key."
const char *fuzz_rdv_secret(void);

#endif
