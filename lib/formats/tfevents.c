/*
 * lib/formats/tfevents.c - see tfevents.h.
 */
#include "config.h"
#include "lib/formats/tfevents.h"

#include "lib/io/atomic_file.h"
#include "lib/io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------- CRC32C */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void make_crc_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* Castagnoli, reflected */
		crc_table[i] = c;
	}
}

uint32_t tfevents_crc32c(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t c = 0xffffffffu;

	pthread_once(&crc_once, make_crc_table);
	while (len--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

/* TFRecord's mask: a CRC of data that holds CRCs is itself weak */
static uint32_t masked_crc(const void *data, size_t len)
{
	uint32_t c = tfevents_crc32c(data, len);

	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ------------------------------------------------------ protobuf by hand */

struct pb {
	uint8_t *p;
	size_t n, cap;
	int failed;
};

static void put_raw(struct pb *b, const void *data, size_t len)
{
	if (b->failed || !len) /* an empty message has no bytes (and maybe no buffer) */
		return;
	if (b->n + len > b->cap) {
		size_t cap = (b->n + len) * 2 + 64;
		uint8_t *p = realloc(b->p, cap);

		if (!p) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, len);
	b->n += len;
}

static void put_varint(struct pb *b, uint64_t v)
{
	uint8_t out[10];
	size_t n = 0;

	do {
		out[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put_raw(b, out, n);
}

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

static void put_key(struct pb *b, unsigned field, unsigned wire)
{
	put_varint(b, (uint64_t)field << 3 | wire);
}

static void put_len(struct pb *b, unsigned field, const void *data, size_t len)
{
	put_key(b, field, WIRE_LEN);
	put_varint(b, len);
	put_raw(b, data, len);
}

static void put_message(struct pb *b, unsigned field, struct pb *inner)
{
	b->failed |= inner->failed;
	put_len(b, field, inner->p, inner->n);
	free(inner->p);
	*inner = (struct pb){ 0 };
}

static void put_little(struct pb *b, uint64_t v, int bytes)
{
	uint8_t out[8];

	for (int i = 0; i < bytes; i++)
		out[i] = (uint8_t)(v >> (8 * i));
	put_raw(b, out, (size_t)bytes);
}

static void put_double(struct pb *b, unsigned field, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof bits);
	put_key(b, field, WIRE_FIXED64);
	put_little(b, bits, 8);
}

static void put_float(struct pb *b, unsigned field, float v)
{
	uint32_t bits;

	memcpy(&bits, &v, sizeof bits);
	put_key(b, field, WIRE_FIXED32);
	put_little(b, bits, 4);
}

/* Event { wall_time, step, summary { value } } around one Summary.Value. */
static void put_event(struct pb *event, double wall, int64_t step, struct pb *value)
{
	struct pb summary = { 0 };

	put_message(&summary, 1, value);
	put_double(event, 1, wall);
	put_key(event, 2, WIRE_VARINT);
	put_varint(event, (uint64_t)step);
	put_message(event, 5, &summary);
}

/* ------------------------------------------------------------ the file */

/* One record (framed: length, its CRC, data, its CRC) added to what the next flush writes. */
static int write_record(struct tfevents *t, struct pb *data)
{
	struct pb rec = { t->pending, t->pending_n, t->pending_cap, 0 };
	uint8_t len[8];
	int rc = -1;

	if (t->fd < 0 || data->failed) {
		errno = t->fd < 0 ? EBADF : ENOMEM;
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)((uint64_t)data->n >> (8 * i));
	put_raw(&rec, len, 8);
	put_little(&rec, masked_crc(len, 8), 4);
	put_raw(&rec, data->p, data->n);
	put_little(&rec, masked_crc(data->p, data->n), 4);
	t->pending = rec.p;
	t->pending_cap = rec.cap;
	if (rec.failed) { /* what was kept before stays whole; this record is lost */
		t->failed = 1;
		errno = ENOMEM;
		goto out;
	}
	t->pending_n = rec.n;
	rc = 0;
out:
	free(data->p);
	*data = (struct pb){ 0 };
	return rc;
}

int tfevents_flush(struct tfevents *t)
{
	int rc;

	if (t->fd < 0) {
		errno = EBADF;
		return -1;
	}
	rc = write_all(t->fd, t->pending, t->pending_n);
	t->pending_n = 0; /* written, or dropped: the caller gives the file up */
	if (rc < 0)
		return -1;
	if (t->failed) {
		t->failed = 0;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

int tfevents_open(struct tfevents *t, const char *dir, const char *host, double wall,
		  char *err, size_t errlen)
{
	struct pb event = { 0 };

	*t = (struct tfevents){ .fd = -1 };
	if (mkdir_p(dir, 0755) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return -1;
	}
	for (int k = 0; t->fd < 0 && k < 100; k++) {
		int used = snprintf(t->path, sizeof t->path, k ? "%s/events.out.tfevents.%lld.%s.%d.%d" :
					   "%s/events.out.tfevents.%lld.%s.%d", dir,
				    (long long)wall, host, (int)getpid(), k);

		if (used < 0 || (size_t)used >= sizeof t->path) {
			snprintf(err, errlen, "path too long in %s", dir);
			return -1;
		}
		t->fd = open(t->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (t->fd < 0 && errno != EEXIST) {
			snprintf(err, errlen, "cannot create %s: %s", t->path, strerror(errno));
			return -1;
		}
	}
	if (t->fd < 0) {
		snprintf(err, errlen, "cannot create an event file in %s: every name taken", dir);
		return -1;
	}
	put_double(&event, 1, wall);
	put_len(&event, 3, "brain.Event:2", strlen("brain.Event:2"));
	if (write_record(t, &event) < 0 || tfevents_flush(t) < 0) {
		snprintf(err, errlen, "cannot write %s: %s", t->path, strerror(errno));
		tfevents_close(t);
		return -1;
	}
	return 0;
}

int tfevents_scalar(struct tfevents *t, double wall, int64_t step, const char *tag, float value)
{
	struct pb v = { 0 }, event = { 0 };

	put_len(&v, 1, tag, strlen(tag));
	put_float(&v, 2, value);
	put_event(&event, wall, step, &v);
	return write_record(t, &event);
}

int tfevents_text(struct tfevents *t, double wall, int64_t step, const char *tag,
		  const char *text)
{
	struct pb v = { 0 }, tensor = { 0 }, shape = { 0 }, meta = { 0 }, plugin = { 0 };
	struct pb event = { 0 };

	put_key(&tensor, 1, WIRE_VARINT);
	put_varint(&tensor, 7); /* DT_STRING */
	put_message(&tensor, 2, &shape); /* no dimensions: a scalar */
	put_len(&tensor, 8, text, strlen(text));
	put_len(&plugin, 1, "text", 4);
	put_message(&meta, 1, &plugin);
	put_len(&v, 1, tag, strlen(tag));
	put_message(&v, 8, &tensor);
	put_message(&v, 9, &meta);
	put_event(&event, wall, step, &v);
	return write_record(t, &event);
}

int tfevents_close(struct tfevents *t)
{
	int rc = 0, saved;

	if (t->fd >= 0) {
		rc = t->pending_n || t->failed ? tfevents_flush(t) : 0;
		saved = errno;
		close(t->fd);
		errno = saved;
	}
	free(t->pending);
	t->pending = NULL;
	t->pending_n = t->pending_cap = 0;
	t->fd = -1;
	return rc;
}
