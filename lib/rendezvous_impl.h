/*
 * lib/rendezvous_impl.h - what the parts of the rendezvous share (not for
 * callers: see lib/rendezvous.h).
 *
 * Each path fills peers[0..count-1] (allocated and zeroed by the caller):
 * peers[i].blob is malloc'ed, at least one byte even when peers[i].len is 0.
 * On failure the caller frees whatever was filled in.
 */
#ifndef STORK_RENDEZVOUS_IMPL_H
#define STORK_RENDEZVOUS_IMPL_H

#include <stdbool.h>

#include "lib/rendezvous.h"

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

int rdv_pmix_exchange(const struct rdv_params *p, const void *blob, size_t len,
		      struct rdv_peer *peers, double deadline, char *err, size_t errlen);

void rdv_pmix_finalize(void);

#endif
