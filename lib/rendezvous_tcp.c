/*
 * lib/rendezvous_tcp.c - the rendezvous without PMIx: a star on launcher 0.
 *
 * Launcher 0 listens on the step's MASTER_PORT (any address, SO_REUSEADDR),
 * the others connect to MASTER_ADDR:MASTER_PORT, retrying until the deadline
 * (launcher 0 may start later than they do), and send a hello:
 *
 *   magic "SRDV", version, job id, step id, count, index, blob length, blob
 *
 * (integers big-endian, 32 bits except the 64-bit length). Launcher 0 serves
 * every connection from one poll loop, so a silent or slow peer never holds
 * up the others, and refuses what does not fit: a wrong magic or version is
 * a stranger and is closed without a word; another job or step, another
 * count, an index out of range or already seen get an error reply. When all
 * count-1 hellos are in, it closes the listener and sends everyone the reply
 *
 *   magic, version, status 0, n, then n times (length, blob) in index order
 *
 * built once. At the deadline it sends the others status 1 and a message
 * naming the launchers that never arrived, and fails with the same message.
 * A launcher that connected but hears nothing by its own deadline (plus a
 * little, so launcher 0's verdict can arrive) says so.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/rendezvous_impl.h"

#define RDV_MAGIC 0x53524456u	/* "SRDV" */
#define RDV_VERSION 1u
#define HELLO_LEN 32
#define REPLY_LEN 16
#define STATUS_OK 0u
#define STATUS_ERROR 1u
#define REPLY_GRACE 2.0		/* seconds a connected launcher waits past its deadline */
#define SEND_GRACE 10.0		/* seconds launcher 0 may spend sending the table */

struct hello {
	uint32_t magic, version, job_id, step_id, count, index;
	uint64_t len;
};

/* A connection launcher 0 has accepted but not yet identified. */
struct conn {
	int fd;
	unsigned char hdr[HELLO_LEN];
	struct hello h;
	unsigned char *blob;
	size_t have;		/* bytes of hdr, then of blob, received */
	char from[64];		/* peer address, for messages */
};

/* ------------------------------------------------------------ wire format */

static void put32(unsigned char *b, uint32_t v)
{
	v = htobe32(v);
	memcpy(b, &v, 4);
}

static void put64(unsigned char *b, uint64_t v)
{
	v = htobe64(v);
	memcpy(b, &v, 8);
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v;
	memcpy(&v, b, 4);
	return be32toh(v);
}

static uint64_t get64(const unsigned char *b)
{
	uint64_t v;
	memcpy(&v, b, 8);
	return be64toh(v);
}

static void hello_decode(const unsigned char *b, struct hello *h)
{
	h->magic = get32(b);
	h->version = get32(b + 4);
	h->job_id = get32(b + 8);
	h->step_id = get32(b + 12);
	h->count = get32(b + 16);
	h->index = get32(b + 20);
	h->len = get64(b + 24);
}

/* ------------------------------------------------------------ socket I/O */

static int remaining_ms(double deadline)
{
	double left = deadline - rdv_now();
	if (left <= 0)
		return 0;
	return left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
}

/* Wait until fd is ready for events or the deadline passes (-1, ETIMEDOUT).
 * A signal only ends the wait early: the caller tries again. */
static int wait_ready(int fd, short events, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int ms = remaining_ms(deadline);

	if (ms == 0) {
		errno = ETIMEDOUT;
		return -1;
	}
	if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
		return -1;
	return 0;
}

static void set_socket_options(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/*
 * Send all of buf on a non-blocking socket by the deadline (not lib/io.h's
 * write_all: that one blocks, this one waits with poll). 0, or -1 with errno.
 */
static int send_all(int fd, const void *buf, size_t len, double deadline)
{
	const unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_ready(fd, POLLOUT, deadline) < 0)
			return -1;
	}
	return 0;
}

/*
 * Receive exactly len bytes on a non-blocking socket by the deadline. 0, or -1
 * with errno (ETIMEDOUT at the deadline, ECONNRESET for an early end).
 */
static int recv_all(int fd, void *buf, size_t len, double deadline)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			errno = ECONNRESET;
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		if (wait_ready(fd, POLLIN, deadline) < 0)
			return -1;
	}
	return 0;
}

/* A reply with status 1 and a message. */
static void send_error(int fd, const char *msg, double deadline)
{
	size_t mlen = strlen(msg);
	unsigned char *b = malloc(REPLY_LEN + 8 + mlen);

	if (!b)
		return;
	put32(b, RDV_MAGIC);
	put32(b + 4, RDV_VERSION);
	put32(b + 8, STATUS_ERROR);
	put32(b + 12, 0);
	put64(b + 16, mlen);
	memcpy(b + 24, msg, mlen);
	(void)send_all(fd, b, REPLY_LEN + 8 + mlen, deadline);
	free(b);
}

static void sockaddr_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
		port = ntohs(in6->sin6_port);
	}
	snprintf(buf, len, "%s:%u", host, port);
}

/* ------------------------------------------------------------ launcher 0 */

/* Listen on every address (IPv6 dual-stack when possible) at port. */
static int listen_on(unsigned port, char *err, size_t errlen)
{
	int families[2] = { AF_INET6, AF_INET };
	int one = 1, zero = 0, saved = 0;

	for (int i = 0; i < 2; i++) {
		int fd = socket(families[i], SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		struct sockaddr_storage ss = { 0 };
		socklen_t sl;

		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (families[i] == AF_INET6) {
			struct sockaddr_in6 *a = (void *)&ss;
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
			a->sin6_family = AF_INET6;
			a->sin6_addr = in6addr_any;
			a->sin6_port = htons((uint16_t)port);
			sl = sizeof *a;
		} else {
			struct sockaddr_in *a = (void *)&ss;
			a->sin_family = AF_INET;
			a->sin_addr.s_addr = htonl(INADDR_ANY);
			a->sin_port = htons((uint16_t)port);
			sl = sizeof *a;
		}
		if (bind(fd, (struct sockaddr *)&ss, sl) == 0 && listen(fd, 128) == 0)
			return fd;
		saved = errno;
		close(fd);
		if (saved == EADDRINUSE)
			break;
	}
	snprintf(err, errlen, "rendezvous: launcher 0 cannot listen on port %u: %s%s", port,
		 strerror(saved),
		 saved == EADDRINUSE ? " (another program or step holds it; set MASTER_PORT to a "
				       "free port for every launcher, or change the plugin's port_base)"
				     : "");
	return -1;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->blob);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

/*
 * Check a complete hello header against this step. Returns 0 to go on,
 * -1 for a stranger (close silently), 1 with a message in msg (reply, close).
 */
static int hello_check(const struct rdv_params *p, const struct hello *h, const bool *arrived,
		       char *msg, size_t len)
{
	if (h->magic != RDV_MAGIC || h->version != RDV_VERSION)
		return -1;
	if (h->job_id != p->job_id || h->step_id != p->step_id) {
		snprintf(msg, len, "this port serves the rendezvous of job %u step %u, not of job %u step %u",
			 p->job_id, p->step_id, h->job_id, h->step_id);
		return 1;
	}
	if (h->count != (uint32_t)p->count) {
		snprintf(msg, len, "launcher %u counts %u launchers, launcher 0 counts %d: the step's "
			 "launchers disagree on SLURM_STEP_NUM_TASKS", h->index, h->count, p->count);
		return 1;
	}
	if (h->index == 0 || h->index >= (uint32_t)p->count) {
		snprintf(msg, len, "launcher index %u is out of range 1..%d", h->index, p->count - 1);
		return 1;
	}
	if (arrived[h->index]) {
		snprintf(msg, len, "launcher %u arrived twice: two processes claim the same index",
			 h->index);
		return 1;
	}
	if (h->len > RDV_MAX_BLOB) {
		snprintf(msg, len, "launcher %u sends %llu bytes, more than the limit of %u", h->index,
			 (unsigned long long)h->len, RDV_MAX_BLOB);
		return 1;
	}
	return 0;
}

/*
 * Read what is available on c. Returns 0 while incomplete, 1 when the hello
 * and blob are complete (c->blob is then ready), -1 when c was closed.
 */
static int conn_progress(const struct rdv_params *p, struct conn *c, const bool *arrived,
			 double deadline)
{
	for (;;) {
		bool in_hdr = c->have < HELLO_LEN;
		unsigned char *dst = in_hdr ? c->hdr + c->have : c->blob + (c->have - HELLO_LEN);
		size_t want = in_hdr ? HELLO_LEN - c->have : HELLO_LEN + c->h.len - c->have;

		if (want == 0)
			return 1;
		ssize_t n = recv(c->fd, dst, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n <= 0) {
			stork_warn("rendezvous: a connection from %s closed before its hello was complete",
				   c->from);
			conn_close(c);
			return -1;
		}
		c->have += (size_t)n;
		if (in_hdr && c->have == HELLO_LEN) {
			char msg[256];
			hello_decode(c->hdr, &c->h);
			int rc = hello_check(p, &c->h, arrived, msg, sizeof msg);
			if (rc < 0)
				stork_warn("rendezvous: refused a connection from %s: not a Stork "
					   "rendezvous peer", c->from);
			if (rc > 0) {
				stork_warn("rendezvous: refused a connection from %s: %s", c->from, msg);
				send_error(c->fd, msg, deadline);
			}
			if (rc != 0) {
				conn_close(c);
				return -1;
			}
			if (!(c->blob = malloc(c->h.len ? c->h.len : 1))) {
				conn_close(c);
				return -1;
			}
		}
	}
}

static void accept_all(int lfd, struct conn *conns, int nconns)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		int slot = -1;

		if (fd < 0)
			return;
		for (int i = 0; i < nconns && slot < 0; i++)
			if (conns[i].fd < 0)
				slot = i;
		if (slot < 0) {
			close(fd); /* too many unidentified connections: the peer retries */
			continue;
		}
		set_socket_options(fd);
		conns[slot].fd = fd;
		sockaddr_name((struct sockaddr *)&ss, conns[slot].from, sizeof conns[slot].from);
	}
}

/* The success reply: header, then (length, blob) for every launcher. */
static unsigned char *build_table(const struct rdv_peer *peers, int n, size_t *out_len)
{
	size_t total = REPLY_LEN, off;
	unsigned char *b;

	for (int i = 0; i < n; i++)
		total += 8 + peers[i].len;
	if (!(b = malloc(total)))
		return NULL;
	put32(b, RDV_MAGIC);
	put32(b + 4, RDV_VERSION);
	put32(b + 8, STATUS_OK);
	put32(b + 12, (uint32_t)n);
	off = REPLY_LEN;
	for (int i = 0; i < n; i++) {
		put64(b + off, peers[i].len);
		memcpy(b + off + 8, peers[i].blob, peers[i].len);
		off += 8 + peers[i].len;
	}
	*out_len = total;
	return b;
}

/* Gather until everyone arrived or the deadline. Returns arrivals. */
static int gather(const struct rdv_params *p, int lfd, struct conn *conns, int nconns,
		  struct rdv_peer *peers, int *fds, bool *arrived, double deadline)
{
	int got = 1;
	struct pollfd *pfds = calloc((size_t)nconns + 1, sizeof *pfds);

	if (!pfds)
		return got;
	while (got < p->count) {
		int ms = remaining_ms(deadline), np = 1;
		if (ms == 0)
			break;
		pfds[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		for (int i = 0; i < nconns; i++)
			if (conns[i].fd >= 0)
				pfds[np++] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
		if (poll(pfds, (nfds_t)np, ms) < 0 && errno != EINTR)
			break;
		if (pfds[0].revents)
			accept_all(lfd, conns, nconns);
		for (int i = 0; i < nconns; i++) {
			if (conns[i].fd < 0 || conn_progress(p, &conns[i], arrived, deadline) != 1)
				continue;
			int idx = (int)conns[i].h.index;
			peers[idx].blob = conns[i].blob;
			peers[idx].len = conns[i].h.len;
			fds[idx] = conns[i].fd;
			arrived[idx] = true;
			got++;
			conns[i].blob = NULL;
			conns[i].fd = -1;
			conn_close(&conns[i]);
		}
	}
	free(pfds);
	return got;
}

static int serve(const struct rdv_params *p, struct rdv_peer *peers, double deadline,
		 char *err, size_t errlen)
{
	int nconns = 2 * p->count + 16, got, rc = -1, lfd;
	struct conn *conns = calloc((size_t)nconns, sizeof *conns);
	int *fds = malloc((size_t)p->count * sizeof *fds);
	bool *arrived = calloc((size_t)p->count, sizeof *arrived);
	unsigned char *table = NULL;
	size_t table_len = 0;

	if (!conns || !fds || !arrived) {
		snprintf(err, errlen, "rendezvous: out of memory for %d launchers", p->count);
		goto fail;
	}
	for (int i = 0; i < nconns; i++)
		conns[i].fd = -1;
	for (int i = 0; i < p->count; i++)
		fds[i] = -1;
	arrived[0] = true;
	if ((lfd = listen_on(p->port, err, errlen)) < 0)
		goto fail;
	got = gather(p, lfd, conns, nconns, peers, fds, arrived, deadline);
	close(lfd);
	if (got < p->count) {
		char missing[2048], msg[2600];
		rdv_describe_missing(p, arrived, missing, sizeof missing);
		snprintf(msg, sizeof msg, "rendezvous: %d of %d launchers did not arrive within %g s: %s",
			 p->count - got, p->count, p->timeout, missing);
		for (int i = 1; i < p->count; i++)
			if (fds[i] >= 0)
				send_error(fds[i], msg, rdv_now() + 1.0);
		snprintf(err, errlen, "%s", msg);
		goto fail;
	}
	if (!(table = build_table(peers, p->count, &table_len))) {
		snprintf(err, errlen, "rendezvous: out of memory for the table of %d launchers", p->count);
		goto fail;
	}
	double send_deadline = rdv_now() + SEND_GRACE;
	for (int i = 1; i < p->count; i++)
		if (send_all(fds[i], table, table_len, send_deadline) < 0)
			stork_warn("rendezvous: could not send the table to launcher %d: %s", i,
				   strerror(errno));
	rc = 0;
fail:
	for (int i = 0; conns && i < nconns; i++)
		conn_close(&conns[i]);
	for (int i = 0; fds && i < p->count; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(conns);
	free(fds);
	free(arrived);
	free(table);
	return rc;
}

/* ------------------------------------------------------------ launcher > 0 */

/* One non-blocking connect attempt to ai, bounded by the deadline. */
static int try_connect(const struct addrinfo *ai, double deadline, int *err_out)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	int soerr = 0;
	socklen_t sl = sizeof soerr;

	if (fd < 0) {
		*err_out = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno != EINPROGRESS) {
		*err_out = errno;
		close(fd);
		return -1;
	}
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int ms = remaining_ms(deadline);
	if (poll(&pfd, 1, ms < 1000 ? ms : 1000) <= 0) {
		*err_out = ETIMEDOUT;
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0) {
		*err_out = soerr ? soerr : errno;
		close(fd);
		return -1;
	}
	return fd;
}

static void sleep_seconds(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Connect to launcher 0, retrying until the deadline. */
static int connect_master(const struct rdv_params *p, double deadline, char *err, size_t errlen)
{
	char port[16];
	double pause = 0.005;
	int last = ECONNREFUSED;
	const char *why = NULL;

	snprintf(port, sizeof port, "%u", p->port);
	while (rdv_now() < deadline) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
		int gai = getaddrinfo(p->addr, port, &hints, &res);
		if (gai != 0) {
			why = gai_strerror(gai);
		} else {
			for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
				int fd = try_connect(ai, deadline, &last);
				if (fd >= 0) {
					freeaddrinfo(res);
					set_socket_options(fd);
					return fd;
				}
			}
			freeaddrinfo(res);
			why = NULL;
		}
		double left = deadline - rdv_now();
		sleep_seconds(left < pause ? (left > 0 ? left : 0) : pause);
		pause = pause * 2 < 0.2 ? pause * 2 : 0.2;
	}
	snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u never answered within %g s "
		 "(%s): is launcher 0 running, and can this host reach %s:%u?", p->index, p->addr,
		 p->port, p->timeout, why ? why : strerror(last), p->addr, p->port);
	return -1;
}

static int read_table(const struct rdv_params *p, int fd, struct rdv_peer *peers, double deadline,
		      char *err, size_t errlen)
{
	for (int i = 0; i < p->count; i++) {
		unsigned char lb[8];
		if (recv_all(fd, lb, 8, deadline) < 0)
			goto io_fail;
		uint64_t l = get64(lb);
		if (l > RDV_MAX_BLOB) {
			snprintf(err, errlen, "rendezvous: launcher 0 on %s:%u sent a blob of %llu bytes "
				 "for launcher %d, more than the limit", p->addr, p->port,
				 (unsigned long long)l, i);
			return -1;
		}
		peers[i].index = i;
		peers[i].len = l;
		if (!(peers[i].blob = malloc(l ? l : 1))) {
			snprintf(err, errlen, "rendezvous: out of memory");
			return -1;
		}
		if (recv_all(fd, peers[i].blob, l, deadline) < 0)
			goto io_fail;
	}
	return 0;
io_fail:
	snprintf(err, errlen, "rendezvous: launcher %d: reading the table from launcher 0 on %s:%u: %s",
		 p->index, p->addr, p->port, strerror(errno));
	return -1;
}

static int read_error(const struct rdv_params *p, int fd, double deadline, char *err, size_t errlen)
{
	unsigned char lb[8];
	char msg[4096];
	uint64_t l;

	if (recv_all(fd, lb, 8, deadline) < 0)
		l = 0;
	else
		l = get64(lb);
	if (l >= sizeof msg)
		l = sizeof msg - 1;
	if (l && recv_all(fd, msg, (size_t)l, deadline) < 0)
		l = 0;
	msg[l] = '\0';
	snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u reports: %s", p->index,
		 p->addr, p->port, l ? msg : "(no message)");
	return -1;
}

static int join(const struct rdv_params *p, const void *blob, size_t len, struct rdv_peer *peers,
		double deadline, char *err, size_t errlen)
{
	unsigned char *hello = malloc(HELLO_LEN + len), reply[REPLY_LEN];
	double reply_deadline = deadline + REPLY_GRACE;
	int fd = -1, rc = -1;

	if (!hello) {
		snprintf(err, errlen, "rendezvous: out of memory for a blob of %zu bytes", len);
		return -1;
	}
	put32(hello, RDV_MAGIC);
	put32(hello + 4, RDV_VERSION);
	put32(hello + 8, p->job_id);
	put32(hello + 12, p->step_id);
	put32(hello + 16, (uint32_t)p->count);
	put32(hello + 20, (uint32_t)p->index);
	put64(hello + 24, len);
	if (len)
		memcpy(hello + HELLO_LEN, blob, len);
	if ((fd = connect_master(p, deadline, err, errlen)) < 0)
		goto fail;
	if (send_all(fd, hello, HELLO_LEN + len, reply_deadline) < 0 ||
	    recv_all(fd, reply, REPLY_LEN, reply_deadline) < 0) {
		snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u accepted the "
			 "connection but sent no table within %g s (%s); its own error names the "
			 "launchers that did not arrive", p->index, p->addr, p->port, p->timeout,
			 errno == ECONNRESET ? "it closed the connection" : strerror(errno));
		goto fail;
	}
	if (get32(reply) != RDV_MAGIC || get32(reply + 4) != RDV_VERSION) {
		snprintf(err, errlen, "rendezvous: launcher %d: %s:%u is not a Stork rendezvous "
			 "(bad magic or version): another program holds the port", p->index, p->addr,
			 p->port);
		goto fail;
	}
	if (get32(reply + 8) != STATUS_OK) {
		read_error(p, fd, reply_deadline, err, errlen);
		goto fail;
	}
	if (get32(reply + 12) != (uint32_t)p->count) {
		snprintf(err, errlen, "rendezvous: launcher %d: launcher 0 on %s:%u sent %u blobs, "
			 "expected %d", p->index, p->addr, p->port, get32(reply + 12), p->count);
		goto fail;
	}
	rc = read_table(p, fd, peers, reply_deadline, err, errlen);
fail:
	if (fd >= 0)
		close(fd);
	free(hello);
	return rc;
}

int rdv_tcp_exchange(const struct rdv_params *p, const void *blob, size_t len,
		     struct rdv_peer *peers, double deadline, char *err, size_t errlen)
{
	if (p->port == 0 || p->port > 65535) {
		snprintf(err, errlen, "rendezvous: no valid port (%u) for the tcp rendezvous", p->port);
		return -1;
	}
	if (p->index == 0) {
		if (!(peers[0].blob = rdv_dup(blob, len))) {
			snprintf(err, errlen, "rendezvous: out of memory");
			return -1;
		}
		peers[0].len = len;
		return serve(p, peers, deadline, err, errlen);
	}
	if (!p->addr[0]) {
		snprintf(err, errlen, "rendezvous: launcher %d: no address for launcher 0 (MASTER_ADDR "
			 "or SLURM_STEP_NODELIST)", p->index);
		return -1;
	}
	return join(p, blob, len, peers, deadline, err, errlen);
}
