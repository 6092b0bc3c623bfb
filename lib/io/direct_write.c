/*
 * lib/io/direct_write.c - see direct_write.h.
 *
 * The buffers are copied into one aligned chunk after another and each
 * full chunk is written with O_DIRECT (address, length and file offset
 * all multiples of the block size, as it requires). The last chunk's
 * whole blocks go the same way; the bytes after them, less than a block,
 * are written with O_DIRECT turned off (fcntl), so the file has exactly
 * the bytes asked for. A file system that takes O_DIRECT at open but
 * refuses a write (EINVAL) gets the rest buffered.
 */
#include "config.h"
#include "lib/io/direct_write.h"
#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (4u << 20) /* the fastest of 1, 4 and 16 MiB measured */
#define BLOCK 4096u      /* a multiple of every logical block size in use */

static int stop_direct(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags & ~O_DIRECT);
}

/* len bytes of buf, O_DIRECT while *direct, falling back for good on EINVAL. */
static int put(int fd, const char *buf, size_t len, int *direct)
{
	if (*direct && write_all(fd, buf, len) == 0)
		return 0;
	if (*direct && errno != EINVAL)
		return -1;
	if (*direct) {
		/* a refused write moved nothing: the offset is where it was */
		*direct = 0;
		if (stop_direct(fd) < 0)
			return -1;
	}
	return write_all(fd, buf, len);
}

static int write_through_chunks(int fd, const struct iovec *iov, int n, int direct)
{
	char *chunk = NULL;
	size_t used = 0, whole;
	int rc = -1;

	if (posix_memalign((void **)&chunk, BLOCK, CHUNK) != 0) {
		errno = ENOMEM;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left > 0) {
			size_t k = left < CHUNK - used ? left : CHUNK - used;

			memcpy(chunk + used, p, k);
			used += k, p += k, left -= k;
			if (used == CHUNK) {
				if (put(fd, chunk, CHUNK, &direct) < 0)
					goto out;
				used = 0;
			}
		}
	}
	whole = used / BLOCK * BLOCK;
	if (whole > 0 && put(fd, chunk, whole, &direct) < 0)
		goto out;
	if (used > whole) {
		if (direct && stop_direct(fd) < 0)
			goto out;
		if (write_all(fd, chunk + whole, used - whole) < 0)
			goto out;
	}
	rc = 0;
out:
	free(chunk);
	return rc;
}

int write_file_synced(const char *path, int exclusive, mode_t mode, const struct iovec *iov,
		      int n)
{
	int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
	int fd = open(path, flags | O_DIRECT, mode), direct = 1, saved;

	if (fd < 0 && errno == EINVAL) {
		direct = 0;
		fd = open(path, flags, mode);
	}
	if (fd < 0)
		return -1;
	if (write_through_chunks(fd, iov, n, direct) < 0 || fsync(fd) < 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return close(fd);
}
