/*
 * lib/rendezvous/rendezvous_impl.h - what the parts of the rendezvous share (not for
 * callers: see lib/rendezvous/rendezvous.h).
 *
 * Each path fills peers[0..count-1] (allocated and zeroed by the caller):
 * peers[i].blob is malloc'ed, at least one byte even when peers[i].len is 0.
 * On failure the caller frees whatever was filled in.
 */
#ifndef STORK_RENDEZVOUS_IMPL_H
#define STORK_RENDEZVOUS_IMPL_H

#include <stdbool.h>

#include "lib/rendezvous/rendezvous.h"

/* CLOCK_MONOTONIC in seconds. */
double rdv_now(void);

/* A copy of len bytes that is never NULL (malloc of at least one byte). */
void *rdv_dup(const void *src, size_t len);

/*
 * "launcher 1 (n2), launcher 3 (n2)": the indexes whose arrived[i] is false,
 * with their hosts when p's layout tells them, at most 32 then "and N more".
 */
void rdv_describe_missing(const struct rdv_params *p, const bool *arrived, char *buf, size_t len);

int rdv_tcp_exchange(const struct rdv_params *p, const void *blob, size_t len,
		     struct rdv_peer *peers, double deadline, char *err, size_t errlen);

/*
 * The TCP rendezvous's two readings of what comes from the network (wire
 * format and refusals: lib/rendezvous/rendezvous_tcp.c), on bytes in memory, so that
 * t/fuzz hands them what a stranger could send.
 *
 * rdv_tcp_hello_parse: launcher 0's reading of one connection, given the
 * len bytes the peer sent before closing it: the hello's header checked
 * against p's step (arrived[i]: launcher i is in), its credential (p's
 * secret_file when munged does not answer), then the blob it vouches for.
 * Returns 0 with the blob in *peer (malloc'd; peer->index the launcher it
 * claims), or -1 when it is refused or cut short (logged as serve() does).
 *
 * rdv_tcp_reply_parse: launcher p->index's reading of launcher 0's reply
 * from the len bytes at buf: header, credential, then the table into
 * peers as rdv_tcp_exchange fills them, or launcher 0's error. Returns 0
 * (the table), -1 with err (launcher 0's error, or a table that does not
 * split), or 1 with err (a reply not to trust: rdv_tcp_exchange tries
 * again). The caller frees the blobs in peers in every case.
 */
int rdv_tcp_hello_parse(const struct rdv_params *p, const void *buf, size_t len,
			const bool *arrived, struct rdv_peer *peer);

int rdv_tcp_reply_parse(const struct rdv_params *p, const void *buf, size_t len,
			struct rdv_peer *peers, char *err, size_t errlen);

int rdv_pmix_exchange(const struct rdv_params *p, const void *blob, size_t len,
		      struct rdv_peer *peers, double deadline, char *err, size_t errlen);

void rdv_pmix_finalize(void);

#endif
