/*
 * lib/io/private_dir.c - a directory of this user's own (lib/io/private_dir.h).
 */
#include "config.h"
#include "lib/io/private_dir.h"

#include "lib/bounded.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int private_dir_make(const char *dir, const char *what, const char *key, char *err,
		     size_t errlen)
{
	char p[4096];
	struct stat st, up = { 0 };
	uid_t me = geteuid();

	snprintf(p, sizeof p, "%s", dir);
	for (char *c = p + 1;; c++) {
		char saved = *c;

		if (saved != '/' && saved != '\0')
			continue;
		*c = '\0';
		/* another process (a node on the same file system) may make it
		 * between the look and the mkdir: what is there is then judged */
		if (lstat(p, &st) < 0 && (errno != ENOENT || (mkdir(p, 0700) < 0 && errno != EEXIST) ||
					  lstat(p, &st) < 0)) {
			msg_format(err, errlen, "cannot make the %s %s: %s: %s", what, dir, p,
				   strerror(errno));
			return -1;
		}
		if ((up.st_mode & S_ISVTX) && (up.st_mode & S_IWOTH) &&
		    (st.st_uid != me || !S_ISDIR(st.st_mode))) {
			msg_format(err, errlen, "%s %s: %s, in a directory anyone may write, "
				   "is %s: refused; choose another %s", what, dir, p,
				   !S_ISDIR(st.st_mode) ? "not a directory (a link?)" : "another user's",
				   key);
			return -1;
		}
		if (!saved)
			break;
		/* the next component lives where this one leads: a link to a
		 * sticky world-writable directory is judged as that directory */
		if (stat(p, &up) < 0) {
			msg_format(err, errlen, "cannot make the %s %s: %s: %s", what, dir, p,
				   strerror(errno));
			return -1;
		}
		*c = saved;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != me || (st.st_mode & 077)) {
		msg_format(err, errlen, "%s %s: %s: refused; it must be this user's own "
			   "directory, closed to group and others (mode 0700)", what, dir,
			   !S_ISDIR(st.st_mode) ? "not a directory (a link?)" :
			   st.st_uid != me ? "another user's" : "open to group or others");
		return -1;
	}
	return 0;
}

