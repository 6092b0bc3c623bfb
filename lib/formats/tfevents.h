/*
 * lib/formats/tfevents.h - TensorBoard's event files, written by hand:
 * TFRecord framing (a little-endian 64-bit length, its masked CRC32C, the
 * data, the data's masked CRC32C) around tensorflow.Event protobufs.
 *
 * The file's first record says its version ("brain.Event:2"); then each
 * record is one Event at a step and wall time with one Summary.Value:
 * a scalar (simple_value) or a text (a string tensor with the "text"
 * plugin's metadata, shown in TensorBoard's Text tab). Records are kept
 * in memory until tfevents_flush (or close) writes them in one write(2):
 * a follower of a run adds a second's worth of lines at a time, and one
 * system call a record cost as much as the records themselves. A reader
 * may still see a record cut short at the end of the file while a write
 * is under way, which TensorBoard's reader takes as "not yet there".
 *
 * The protobuf fields (tensorboard/compat/proto/event.proto, summary.proto,
 * tensor.proto): Event.wall_time 1 (double), step 2 (int64), file_version
 * 3 (string), summary 5; Summary.value 1; Value.tag 1, simple_value 2
 * (float), tensor 8, metadata 9; SummaryMetadata.plugin_data 1
 * (PluginData.plugin_name 1); TensorProto.dtype 1 (DT_STRING = 7),
 * tensor_shape 2 (empty: a scalar), string_val 8.
 */
#ifndef STORK_LIB_TFEVENTS_H
#define STORK_LIB_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

struct tfevents {
	int fd;                 /* -1: not open, or given up after a failed write */
	char path[4300];
	unsigned char *pending; /* framed records not yet written */
	size_t pending_n, pending_cap;
	int failed;             /* a record could not be kept (out of memory): flush fails */
};

/* CRC32C (Castagnoli), as TFRecord takes it before masking. */
uint32_t tfevents_crc32c(const void *data, size_t len);

/*
 * Make dir (and its parent) if needed and a new event file in it,
 * events.out.tfevents.SECONDS.HOST.PID[.N] (O_EXCL, never through a
 * link), with its version record. 0, or -1 with a message.
 */
int tfevents_open(struct tfevents *t, const char *dir, const char *host, double wall,
		  char *err, size_t errlen);

/* One scalar (tag at step), kept until the next flush; 0, or -1 (errno). */
int tfevents_scalar(struct tfevents *t, double wall, int64_t step, const char *tag, float value);

/* One text (TensorBoard's Text tab; Markdown), kept until the next flush; 0 or -1. */
int tfevents_text(struct tfevents *t, double wall, int64_t step, const char *tag,
		  const char *text);

/* Write the records kept so far; 0, or -1 (errno) when they could not all be written. */
int tfevents_flush(struct tfevents *t);

/* Flush and close; 0, or -1 (errno) when the flush failed. */
int tfevents_close(struct tfevents *t);

#endif
