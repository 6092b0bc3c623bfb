/*
 * launcher/run/preflight.c - what `stork run` checks before it makes a run
 * directory (and all that `stork run --check` does), so a mistake costs
 * seconds and leaves nothing behind: that run.resume_from exists, that
 * run.device: cuda has a driver to talk to, that every local data glob
 * matches shards whose headers hold (lib/formats/token_shard.c, the loader's own
 * check), model.vocab_size against the vocabulary the shards say they
 * were made for, and, in a job, its --signal against preempt.signal and
 * its time limit (slurmctld's answer).
 *
 * `stork prep` records its vocabulary (257) in the shard header
 * (lib/formats/token_shard.h, DATA_HEADER_VOCAB); llm.c's scripts record none (0).
 * A shard made for more tokens than the model has cannot train: refused.
 * A shard made for fewer trains, but a model left at the default GPT-2
 * vocabulary (50257) over byte-level data spends most of each step on
 * logits of tokens that never occur (7.7x slower steps on a small model):
 * refused too, naming the key to set. A vocabulary the user set is
 * honoured (a GPT-2-shaped model on byte data is a fair benchmark). Only
 * local shards are read: URLs are checked by storkd once staged.
 */
#include "config.h"
#include "launcher/run/preflight.h"
#include "lib/bounded.h"
#include "lib/exit_codes.h"
#include "lib/formats/hf_config.h"
#include "lib/io/io.h"
#include "lib/log.h"
#include "lib/slurm/slurm_job.h"
#include "lib/config/stork_config.h"
#include "lib/formats/token_shard.h"
#include "lib/url.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * The vocabulary of model.init_from: its config.json's (a Hugging Face
 * directory) or its header's (a model file); 0 when it cannot be read
 * here (storkd then says why).
 */
static int init_from_vocab(const char *from)
{
	struct hf_config h;
	char path[4200], err[256];
	struct stat st;
	int32_t hdr[4];
	int fd, v = 0;

	if (stat(from, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(path, sizeof path, "%s/config.json", from);
		return hf_config_read(path, &h, err, sizeof err) ? 0 : h.vocab_size;
	}
	if ((fd = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	if (pread_all(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr)
		v = hdr[3];
	close(fd);
	return v;
}

/*
 * A shard made for vocabulary v against c's model (see the top comment);
 * have: model.init_from's vocabulary (init_from_vocab) when it is set.
 */
static int check_vocab(const struct stork_config *c, const char *key, const char *path, int v,
		       int have, char *err, size_t errlen)
{
	int vocab = c->model.vocab_size;

	if (c->model.init_from[0]) {
		if (have > 0 && v > have)
			return msg_fail(err, errlen, STORK_EXIT_CONFIG,
					"%s: %s holds tokens of a %d-token vocabulary, more than the "
					"%d of model.init_from %s", key, path, v, have,
					c->model.init_from);
		return 0;
	}
	if (v > vocab)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "%s: %s holds tokens of a %d-token vocabulary, more than "
			      "model.vocab_size = %d (%s): set model.vocab_size: %d", key, path, v,
			      vocab, config_origin(c, "model.vocab_size"), v);
	if (v > 0 && v < vocab && !strcmp(config_origin(c, "model.vocab_size"), "default"))
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "%s: %s was made for a %d-token vocabulary (stork prep's bytes), but "
			      "model.vocab_size is the default %d (GPT-2's), whose extra rows only "
			      "slow each step: set model.vocab_size: %d (or %d, to keep GPT-2's "
			      "shape)", key, path, v, vocab, v, vocab);
	return 0;
}

/* Every local glob of one key matches shards that hold, made for c's vocabulary. */
static int check_globs(const struct stork_config *c, const char *key,
		       const struct stork_globs *globs, struct preflight_data *seen, char *err,
		       size_t errlen)
{
	/* read once for every shard: model.init_from's vocabulary, the manifest last checked */
	int model_vocab = c->model.init_from[0] ? init_from_vocab(c->model.init_from) :
						    c->model.vocab_size;
	char manifest[PATH_MAX] = "";
	int rc = 0;

	for (size_t g = 0; g < globs->n && !rc; g++) {
		glob_t gl;
		int grc;

		if (url_is_http(globs->v[g]))
			continue; /* staged by the job, checked by storkd */
		grc = glob(globs->v[g], 0, NULL, &gl);
		if (grc == GLOB_NOMATCH)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: '%s' matches no file", key,
				      globs->v[g]);
		if (grc)
			return msg_fail(err, errlen, STORK_EXIT_DATA, "%s: cannot expand '%s'", key,
				      globs->v[g]);
		for (size_t i = 0; i < gl.gl_pathc && !rc; i++) {
			struct token_shard sh;

			rc = token_shard_check(gl.gl_pathv[i], &sh, err, errlen);
			if (!rc)
				rc = check_vocab(c, key, gl.gl_pathv[i], sh.vocab, model_vocab, err,
						 errlen);
			if (!rc)
				rc = preflight_manifest(c, key, gl.gl_pathv[i], model_vocab, manifest,
							sizeof manifest, err, errlen);
			if (!rc && seen) {
				seen->shards++;
				seen->tokens += sh.ntok;
			}
		}
		globfree(&gl);
	}
	return rc;
}

/* run.resume_from names something that exists (storkd then looks for a checkpoint in it). */
static int check_resume_from(const struct stork_config *c, char *err, size_t errlen)
{
	const char *from = c->run.resume_from;
	struct stat st;

	if (!from || !*from || stat(from, &st) == 0)
		return 0;
	return msg_fail(err, errlen, STORK_EXIT_CONFIG, "run.resume_from: %s (%s): %s", from,
		      config_origin(c, "run.resume_from"), strerror(errno));
}

/*
 * run.device: cuda on a node without an NVIDIA driver can only fail; the
 * kernel module's /proc file says so without loading CUDA (the launcher
 * loads none). A node with a driver but no GPU for this step is storkd's
 * to find.
 */
static int check_device(const struct stork_config *c, char *err, size_t errlen)
{
	char host[256] = "this node";

	if (c->run.device != STORK_DEVICE_CUDA || access("/proc/driver/nvidia/version", F_OK) == 0)
		return 0;
	gethostname(host, sizeof host - 1);
	return msg_fail(err, errlen, STORK_EXIT_CONFIG,
		      "run.device: cuda (%s), but %s has no NVIDIA driver (no "
		      "/proc/driver/nvidia/version): run on GPU nodes, or set run.device: auto",
		      config_origin(c, "run.device"), host);
}

/*
 * The job's --signal=SIG@LEAD (its batch script's) against the run. A
 * signal other than preempt.signal is refused: storkd would stop on it all
 * the same if it is one that stops a run (lib/stop_signals.h), but the
 * script and the configuration then disagree on the job's signal, and
 * Slurm also sends it straight to the ranks of the user's own program,
 * whose handler is for program.signal (USR1, as preempt.signal, unless
 * set). A lead as long as the time limit tells every attempt to stop as
 * it starts (each requeued attempt again: hours of requeues for minutes of
 * work). A lead over half the limit is only said.
 */
static int check_signal(const struct stork_config *c, const struct slurm_job *job, char *err,
			size_t errlen)
{
	int limit = (int)(job->limit_hours * 3600.0 + 0.5), signo, lead;
	const char *want = config_signal_name(c->preempt.signal);

	if (slurm_job_signal(job->id, &signo, &lead) < 0 || !signo)
		return 0;
	if (signo != c->preempt.signal)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "job %u asks Slurm for SIG%s before its end (--signal), but "
			      "preempt.signal is %s (%s): the batch script and the configuration "
			      "disagree on the job's stop signal; make them the same "
			      "(--signal=%s@%d)", job->id,
			      sigabbrev_np(signo) ? sigabbrev_np(signo) : "?", want,
			      config_origin(c, "preempt.signal"), want, lead);
	if (limit > 0 && lead >= limit)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
			      "job %u asks for SIG%s %d s before its end (--signal=%s@%d), but its "
			      "time limit is %d s: every attempt would be told to stop as it starts; "
			      "keep the lead well under the limit (a checkpoint's time, not more)",
			      job->id, want, lead, want, lead, limit);
	if (limit > 0 && 2 * lead > limit)
		stork_warn("job %u: --signal=%s@%d takes more than half of its %d s: each attempt "
			   "trains less than half its time", job->id, want, lead, limit);
	return 0;
}

/* mpirun and its kin (by name: they are often links to one binary). */
static int mpi_launcher(const char *prog)
{
	static const char *const names[] = {
		"mpirun", "mpiexec", "orterun", "prterun", "mpiexec.hydra", "mpirun.openmpi",
		"mpiexec.openmpi", "mpirun.mpich", "mpiexec.mpich", "mpirun.ompi", "mpiexec.ompi",
	};
	const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;

	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(base, names[i]))
			return 1;
	return 0;
}

/*
 * `stork run -- PROGRAM`: the program must be there, as the ranks will
 * look for it (execvp: a name without a slash is searched in PATH), not
 * be an MPI launcher, and the configuration must not set what only the
 * engine reads: such a key would be silently ignored.
 */
static int check_program(const struct stork_config *c, char *err, size_t errlen)
{
	const char *prog = c->program.command.v[0];
	char keys[1024], found[4096];
	struct stat st;

	if (config_engine_keys_set(c, keys, sizeof keys) > 0)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
				"stork run -- %s: %s: the training engine's keys, which a run of "
				"your own program does not read; remove them (or leave out the "
				"program to train with the engine)", prog, keys);
	if (path_search(prog, found, sizeof found) < 0)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
				"stork run -- %s: no such program%s%s", prog,
				strchr(prog, '/') ? "" : " in PATH=",
				strchr(prog, '/') ? "" : (getenv("PATH") ? getenv("PATH") : ""));
	if (stat(found, &st) < 0 || !S_ISREG(st.st_mode) || access(found, X_OK) < 0)
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
				"stork run -- %s: %s is not an executable file", prog, found);
	if (mpi_launcher(prog))
		return msg_fail(err, errlen, STORK_EXIT_CONFIG,
				"stork run -- %s: %s starts ranks of its own, which Stork would "
				"neither bind nor watch; give the MPI program itself (srun stork run "
				"--local-ranks N -- ./prog): its ranks find Stork's PMIx server as "
				"they would %s's", prog, prog, prog);
	return 0;
}

int preflight(const struct stork_config *c, const struct slurm_job *job, int on_node,
	      struct preflight_data *seen, char *err, size_t errlen)
{
	int rc;

	if (c->program.command.n) {
		rc = check_program(c, err, errlen);
		if (!rc && job)
			rc = check_signal(c, job, err, errlen);
		return rc;
	}
	rc = check_resume_from(c, err, errlen);

	if (!rc && job)
		rc = check_signal(c, job, err, errlen);

	if (!rc && on_node)
		rc = check_device(c, err, errlen);
	if (!rc)
		rc = check_globs(c, "data.train", &c->data.train, seen, err, errlen);
	if (!rc && c->train.val_every > 0)
		rc = check_globs(c, "data.val", &c->data.val, NULL, err, errlen);
	return rc;
}
