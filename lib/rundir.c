/*
 * lib/rundir.c - see rundir.h. Files are replaced atomically, so a reader
 * never sees half a provenance record.
 */
#include "config.h"
#include "lib/rundir.h"

#include "lib/atomic_file.h"
#include "lib/json.h"
#include "lib/version.h"

#include <errno.h>
#include <hwloc.h>
#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <yaml.h>

int rundir_path(char *buf, size_t len, const char *runs_root, const char *name)
{
	const char *job = getenv("SLURM_ARRAY_JOB_ID");
	const char *task = getenv("SLURM_ARRAY_TASK_ID");
	const char *base = getenv("SLURM_SUBMIT_DIR");
	char cwd[4096];
	int n;

	if (!job || !*job)
		job = getenv("SLURM_JOB_ID");
	if (!job || !*job)
		job = "local";
	if (!task || !*task)
		task = "0";
	if (!base || !*base)
		base = getcwd(cwd, sizeof cwd) ? cwd : ".";
	if (runs_root[0] == '/')
		n = snprintf(buf, len, "%s/%s__job=%s__task=%s", runs_root, name, job, task);
	else
		n = snprintf(buf, len, "%s/%s/%s__job=%s__task=%s", base, runs_root, name, job, task);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int rundir_create(const char *run_dir, char *err, size_t errlen)
{
	static const char *const subdirs[] = { "config", "logs", "checkpoints", "provenance" };
	char path[4096];

	for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", run_dir, subdirs[i]);
		if (mkdir_p(path, 0755) < 0) {
			snprintf(err, errlen, "cannot create the run directory %s: %s", path,
				 strerror(errno));
			return -1;
		}
	}
	return 0;
}

static int write_json(const char *run_dir, const char *file, struct json *j, char *err,
		      size_t errlen)
{
	char path[4096];

	snprintf(path, sizeof path, "%s/provenance/%s", run_dir, file);
	if (json_error(j)) {
		snprintf(err, errlen, "cannot format %s", path);
		return -1;
	}
	return atomic_write_file(path, json_str(j), json_len(j), err, errlen);
}

int rundir_write_provenance(const char *run_dir, char *err, size_t errlen)
{
	struct json j;
	struct utsname u;
	char host[256] = "";
	char slurm[32];
	int rc;

	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_string(&j, "stork_version", stork_version());
	json_key_string(&j, "git_describe", stork_git_describe());
	json_key_string(&j, "compiler", stork_compiler());
	json_key_string(&j, "built", __DATE__ " " __TIME__);
	json_key_begin_object(&j, "libraries");
	snprintf(slurm, sizeof slurm, "%d.%d.%d", (int)SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
		 (int)SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER), (int)SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
	json_key_string(&j, "slurm", slurm);
	json_key_uint(&j, "hwloc_api", hwloc_get_api_version());
	json_key_string(&j, "yaml", yaml_get_version_string());
	json_end_object(&j);
	json_end_object(&j);
	rc = write_json(run_dir, "build.json", &j, err, errlen);
	json_free(&j);
	if (rc < 0)
		return rc;

	gethostname(host, sizeof host - 1);
	uname(&u);
	json_init(&j, JSON_PRETTY);
	json_begin_object(&j);
	json_key_string(&j, "host", host);
	json_key_string(&j, "kernel", u.release);
	json_key_string(&j, "machine", u.machine);
	json_key_int(&j, "online_cpus", sysconf(_SC_NPROCESSORS_ONLN));
	json_end_object(&j);
	rc = write_json(run_dir, "host.json", &j, err, errlen);
	json_free(&j);
	return rc;
}
