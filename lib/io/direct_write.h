/*
 * lib/io/direct_write.h - a large file written to disk without the page cache.
 *
 * A checkpoint is gigabytes written once and read rarely. Through the page
 * cache each byte is copied into freshly allocated cache pages, which on
 * the machines measured ran at 200-260 MB/s for a 500 MB write, a fifth of
 * what the disk takes; with O_DIRECT the same bytes go from an aligned
 * 4 MiB buffer to the disk at its own rate (1.3 GB/s there, beside dd's
 * 0.9), and the CPU that copying took stays with training.
 */
#ifndef STORK_DIRECT_WRITE_H
#define STORK_DIRECT_WRITE_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * Create path (O_EXCL when exclusive, else O_TRUNC; close-on-exec, mode)
 * with the n buffers of iov one after the other, and fsync it. Where the
 * file system refuses O_DIRECT (tmpfs, some network file systems) the
 * writes go through the page cache instead, with the same result. 0, or
 * -1 with errno set (the file may then be partly written).
 */
int write_file_synced(const char *path, int exclusive, mode_t mode, const struct iovec *iov,
		      int n);

#endif
