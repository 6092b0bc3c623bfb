/*
 * t/fuzz/fuzz_files.c - see fuzz.h: the files a harness hands to readers
 * that take a path.
 */
#include "config.h"
#include "t/fuzz/fuzz.h"

#include "lib/io/atomic_file.h"
#include "lib/io/io.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[PATH_MAX];

static void remove_dir(void)
{
	if (dir[0])
		remove_tree(dir);
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "fuzz: %s %s: %s\n", what, path, strerror(errno));
	abort();
}

/* A writable directory to make ours in. */
static const char *base_dir(void)
{
	const char *t = getenv("TMPDIR");
	struct stat st;

	if (t && t[0])
		return t;
	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	return "/tmp";
}

const char *fuzz_dir(void)
{
	if (!dir[0]) {
		snprintf(dir, sizeof dir, "%s/stork-fuzz.XXXXXX", base_dir());
		if (!mkdtemp(dir))
			die("cannot make a directory like", dir);
		atexit(remove_dir);
	}
	return dir;
}

void fuzz_write(char *path, size_t len, const char *name, const void *data, size_t size)
{
	int fd;

	if ((size_t)snprintf(path, len, "%s/%s", fuzz_dir(), name) >= len) {
		errno = ENAMETOOLONG;
		die("cannot name", name);
	}
	/* the directories of name, one level at a time */
	for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
		*s = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			die("cannot make", path);
		*s = '/';
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, data, size) < 0)
		die("cannot write", path);
	close(fd);
}

const char *fuzz_rdv_secret(void)
{
	static char secret[PATH_MAX];
	char conf[PATH_MAX], text[PATH_MAX + 64];

	if (!secret[0]) {
		snprintf(text, sizeof text, "AuthInfo=socket=%s/munged-absent.socket\n", fuzz_dir());
		fuzz_write(conf, sizeof conf, "slurm.conf", text, strlen(text));
		if (setenv("SLURM_CONF", conf, 1) < 0)
			die("cannot set SLURM_CONF to", conf);
		fuzz_write(secret, sizeof secret, "rendezvous.key", FUZZ_RDV_SECRET,
			   strlen(FUZZ_RDV_SECRET));
	}
	return secret;
}

void fuzz_quiet(void)
{
	static int done;

	if (!done) {
		stork_log_init("fuzz", STORK_LOG_ERROR);
		done = 1;
	}
}
