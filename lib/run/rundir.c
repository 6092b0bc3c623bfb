/*
 * lib/run/rundir.c - see rundir.h. Files are replaced atomically, so a reader
 * never sees half a provenance record.
 */
#include "config.h"
#include "lib/run/rundir.h"

#include "lib/io/atomic_file.h"
#include "lib/bounded.h"
#include "lib/io/io.h"
#include "lib/formats/stork_json.h"
#include "lib/version.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hwloc.h>
#include <pwd.h>
#include <slurm/slurm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/*
 * Whether the directory open at fd (named path) may hold a run of ours: our
 * own, and nobody else may write in it. 0, or -2 with err naming the path
 * and its owner or mode.
 */
static int ours_alone(int fd, const char *path, char *err, size_t errlen)
{
	struct passwd pwd, *pw = NULL;
	char buf[1024], owner[64];
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "cannot use the run directory %s: %s", path, strerror(errno));
		return -1;
	}
	if (st.st_uid != geteuid()) {
		if (getpwuid_r(st.st_uid, &pwd, buf, sizeof buf, &pw) || !pw)
			pw = NULL;
		snprintf(owner, sizeof owner, "%s", pw ? pw->pw_name : "");
		snprintf(err, errlen, "the run directory %s belongs to %s (uid %u), not to this user: "
			 "refused, nothing in it is read; choose another run.dir or run.name", path,
			 owner[0] ? owner : "another user", (unsigned)st.st_uid);
		return -2;
	}
	if (st.st_mode & 022) {
		snprintf(err, errlen, "the run directory %s may be written by %s (mode %04o): refused; "
			 "chmod go-w it or choose another run.dir", path,
			 st.st_mode & 002 ? "anyone" : "its group", (unsigned)(st.st_mode & 07777));
		return -2;
	}
	return 0;
}

/*
 * A directory made (or found) at dirfd/name, never through a link, and
 * checked as ours alone; its descriptor, or -1/-2 with err set.
 */
static int make_ours(int dirfd, const char *name, const char *path, mode_t mode, char *err,
		     size_t errlen)
{
	int fd, rc;

	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the run directory %s: %s", path, strerror(errno));
		return -1;
	}
	if ((fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		int link = errno == ELOOP || errno == ENOTDIR;

		snprintf(err, errlen, "%s: %s", path,
			 link ? "not a directory (a link?): refused" : strerror(errno));
		return link ? -2 : -1;
	}
	if ((rc = ours_alone(fd, path, err, errlen)) < 0) {
		close(fd);
		return rc;
	}
	return fd;
}

int rundir_create(const char *run_dir, bool shared, char *err, size_t errlen)
{
	/* config/ (what storkd and every restart read) and checkpoints/ (the
	 * weights) are this user's alone, or readable by the group when shared;
	 * the rest as the user's umask says */
	mode_t private = shared ? 0750 : 0700;
	const struct {
		const char *name;
		mode_t mode;
		bool set;	/* the mode whatever the umask, also on a directory made before */
	} subdirs[] = { { "config", private, true }, { "logs", 0755, false },
			{ "checkpoints", private, true }, { "provenance", 0755, false },
			{ "metrics", 0755, false } };
	char parent[4096], path[4200];
	const char *base;
	int top, fd, rc;

	/* the runs directory above may be shared (a project's space); the run's own is not */
	snprintf(parent, sizeof parent, "%s", run_dir);
	base = strrchr(parent, '/');
	if (base && base != parent) {
		parent[base - parent] = '\0';
		if (mkdir_p(parent, 0755) < 0) {
			snprintf(err, errlen, "cannot create the run directory %s: %s", parent,
				 strerror(errno));
			return -1;
		}
	}
	if ((top = make_ours(AT_FDCWD, run_dir, run_dir, 0755, err, errlen)) < 0)
		return top;
	for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", run_dir, subdirs[i].name);
		if ((fd = make_ours(top, subdirs[i].name, path, subdirs[i].mode, err, errlen)) < 0) {
			close(top);
			return fd;
		}
		/* a requeue of a run made before, or under another run.shared, sets them */
		rc = subdirs[i].set ? fchmod(fd, subdirs[i].mode) : 0;
		close(fd);
		if (rc < 0) {
			snprintf(err, errlen, "cannot close %s to others: %s", path, strerror(errno));
			close(top);
			return -1;
		}
	}
	close(top);
	return 0;
}

/* Write v (consumed; NULL when building it failed) as provenance/file. */
static int write_json(const char *run_dir, const char *file, json_t *v, char *err,
		      size_t errlen)
{
	char path[4096];
	int rc;

	snprintf(path, sizeof path, "%s/provenance/%s", run_dir, file);
	if (!v) {
		snprintf(err, errlen, "cannot format %s: out of memory", path);
		return -1;
	}
	rc = sj_write_file(path, v, err, errlen);
	json_decref(v);
	return rc;
}

/* The first line `cmd` prints (no newline), or "" when it fails. */
static void first_line(const char *cmd, char *buf, size_t len)
{
	int status;
	char *out = command_output(cmd, &status);

	snprintf(buf, len, "%.*s", out ? (int)strcspn(out, "\n") : 0, out ? out : "");
	free(out);
}

/*
 * provenance/git.txt: the commit of the code being run, when the submit
 * directory is in a git repository (and whether it had changes), and the
 * build of Stork that ran it.
 */
static int write_git(const char *run_dir, char *err, size_t errlen)
{
	char cwd[4096] = "", commit[128], branch[256], dirty[32], text[6000], path[4200];
	int n;

	if (!getcwd(cwd, sizeof cwd))
		snprintf(cwd, sizeof cwd, "(unknown: %s)", strerror(errno));
	first_line("git rev-parse HEAD 2>/dev/null", commit, sizeof commit);
	if (commit[0]) {
		first_line("git rev-parse --abbrev-ref HEAD 2>/dev/null", branch, sizeof branch);
		first_line("git status --porcelain --untracked-files=no 2>/dev/null | wc -l", dirty,
			   sizeof dirty);
		n = snprintf(text, sizeof text,
			     "workdir: %s\ncommit: %s\nbranch: %s\ndirty: %s\nstork: %s\n", cwd, commit,
			     branch, atoi(dirty) > 0 ? "yes (tracked files changed since the commit)" :
							"no",
			     stork_git_describe());
	} else {
		n = snprintf(text, sizeof text, "workdir: %s\ncommit: none (not a git repository)\n"
			     "stork: %s\n", cwd, stork_git_describe());
	}
	if (n < 0 || (size_t)n >= sizeof text ||
	    path_join(path, sizeof path, run_dir, "provenance/git.txt") < 0) {
		snprintf(err, errlen, "cannot format %s/provenance/git.txt", run_dir);
		return -1;
	}
	return atomic_write_file(path, text, (size_t)n, err, errlen);
}

/*
 * provenance/image.txt: the container the job step runs in, from what
 * pyxis (its --container-image, which Slurm passes on as a SPANK option
 * variable) or Apptainer/Singularity leave in the environment; "none".
 */
static int write_image(const char *run_dir, char *err, size_t errlen)
{
	static const struct {
		const char *runtime, *var;
	} vars[] = {
		{ "pyxis", "SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image" },
		{ "apptainer", "APPTAINER_CONTAINER" },
		{ "singularity", "SINGULARITY_CONTAINER" },
	};
	char text[4200], path[4200];
	int n = snprintf(text, sizeof text, "none\n");

	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		if (getenv(vars[i].var) && *getenv(vars[i].var)) {
			n = snprintf(text, sizeof text, "%s: %s\n", vars[i].runtime,
				     getenv(vars[i].var));
			break;
		}
	if (n < 0 || (size_t)n >= sizeof text ||
	    path_join(path, sizeof path, run_dir, "provenance/image.txt") < 0) {
		snprintf(err, errlen, "cannot format %s/provenance/image.txt", run_dir);
		return -1;
	}
	return atomic_write_file(path, text, (size_t)n, err, errlen);
}

int rundir_write_provenance(const char *run_dir, char *err, size_t errlen)
{
	struct utsname u;
	char host[256] = "";
	char slurm[32];

	snprintf(slurm, sizeof slurm, "%d.%d.%d", (int)SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
		 (int)SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER), (int)SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
	if (write_json(run_dir, "build.json",
		       json_pack("{s:o, s:o, s:o, s:s, s:{s:s, s:I, s:o}}",
				 "stork_version", sj_text(stork_version()),
				 "git_describe", sj_text(stork_git_describe()),
				 "compiler", sj_text(stork_compiler()),
				 "built", __DATE__ " " __TIME__,
				 "libraries", "slurm", slurm,
				 /* the header's: stork, which writes this, loads no hwloc */
				 "hwloc_api", (json_int_t)HWLOC_API_VERSION,
				 "yaml", sj_text(yaml_get_version_string())),
		       err, errlen) < 0)
		return -1;

	if (write_git(run_dir, err, errlen) < 0 || write_image(run_dir, err, errlen) < 0)
		return -1;
	gethostname(host, sizeof host - 1);
	uname(&u);
	return write_json(run_dir, "host.json",
			  json_pack("{s:o, s:o, s:o, s:I}", "host", sj_text(host),
				    "kernel", sj_text(u.release), "machine", sj_text(u.machine),
				    "online_cpus", (json_int_t)sysconf(_SC_NPROCESSORS_ONLN)),
			  err, errlen);
}

void rundir_remove_logs_prefixed(const char *run_dir, const char *const *prefixes, size_t n)
{
	char logs[4200], path[4500];
	struct dirent *e;
	DIR *d;

	snprintf(logs, sizeof logs, "%s/logs", run_dir);
	if (!(d = opendir(logs)))
		return;
	while ((e = readdir(d)))
		for (size_t k = 0; k < n; k++)
			if (!strncmp(e->d_name, prefixes[k], strlen(prefixes[k]))) {
				snprintf(path, sizeof path, "%s/%s", logs, e->d_name);
				unlink(path);
				break;
			}
	closedir(d);
}
