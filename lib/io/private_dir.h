/*
 * lib/io/private_dir.h - a directory of this user's own on a node shared with
 * other users: the stage directory of URL data (launcher/run/stage.c) and the
 * node-local checkpoint tier (checkpoint.local_dir).
 */
#ifndef STORK_LIB_PRIVATE_DIR_H
#define STORK_LIB_PRIVATE_DIR_H

#include <stddef.h>

/*
 * Make dir (0700) where missing, component by component, and trust it only
 * if safe: in a directory anyone may create in (sticky and world-writable:
 * /tmp, /var/tmp) whatever comes next must be ours and no link, checked
 * before anything is made inside it, since another user's directory
 * planted there first would receive our files or hand us theirs.
 * Elsewhere the path is the user's choice (a project directory may well be
 * a colleague's). dir itself: ours, a real directory, closed to group and
 * others. what names it in messages ("stage directory"), key the setting
 * that chose it ("data.stage_dir"). 0, or -1 with a message.
 */
int private_dir_make(const char *dir, const char *what, const char *key, char *err,
		     size_t errlen);

#endif
