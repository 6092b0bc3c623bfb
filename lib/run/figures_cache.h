/*
 * lib/run/figures_cache.h - a node's measured figures, kept for `stork plan`:
 * what `stork bench train` and `stork bench comm` measured on it, and the
 * short probes `stork plan` runs itself when neither has.
 *
 * One small JSON file per figure, in a directory of the user's own per
 * host: $XDG_CACHE_HOME/stork/HOST/ (default ~/.cache/stork/HOST/), since
 * a home directory is often shared by every node of a cluster and each
 * node has figures of its own. The directory is made 0700 component by
 * component and refused when it is a link, another user's or open to
 * others (lib/io/private_dir.h); a file is replaced atomically through a
 * temporary created with O_EXCL | O_NOFOLLOW (lib/io/atomic_file.h), so a
 * reader sees the old figure or the new one, never half, and nothing is
 * ever written through a link planted there.
 */
#ifndef STORK_LIB_FIGURES_CACHE_H
#define STORK_LIB_FIGURES_CACHE_H

#include <stddef.h>

#include <jansson.h>

/*
 * The figures directory of host (NULL: this one) into buf. 0, or -1 with
 * a message (no $HOME, a host name that is not one, a path too long).
 */
int figures_dir(const char *host, char *buf, size_t len, char *err, size_t errlen);

/*
 * Write v as NAME.json (NAME: letters, digits, '-', '_', '.') in host's
 * directory (NULL: this one's), making the directory as above; its path in
 * path (may be NULL). 0, or -1 with a message naming the path.
 */
int figures_save(const char *host, const char *name, const json_t *v, char *path, size_t plen,
		 char *err, size_t errlen);

/*
 * The figure NAME of host (NULL: this one), its path in path (may be
 * NULL); NULL when there is none or it cannot be read (why in err, empty
 * when the file does not exist).
 */
json_t *figures_load(const char *host, const char *name, char *path, size_t plen, char *err,
		     size_t errlen);

#endif
