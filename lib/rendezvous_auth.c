/* lib/rendezvous_auth.c - see rendezvous_auth.h. */
#include "config.h"
#include "lib/rendezvous_auth.h"

#include <munge.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/*
 * munged's socket: Slurm's own (slurm.conf's AuthInfo=socket=PATH, which
 * auth/munge uses), else munge's default. SLURM_CONF names the file, as
 * for every Slurm command.
 */
static const char *munge_socket(void)
{
	static char path[4096];
	static int known;
	const char *conf = getenv("SLURM_CONF") ? getenv("SLURM_CONF") : "/etc/slurm/slurm.conf";
	char line[4096];
	FILE *f;

	if (known)
		return path[0] ? path : NULL;
	known = 1;
	if (!(f = fopen(conf, "re")))
		return NULL;
	while (fgets(line, sizeof line, f)) {
		const char *p = line + strspn(line, " \t"), *sock;

		if (strncasecmp(p, "AuthInfo", 8) || p[8 + strspn(p + 8, " \t")] != '=')
			continue;
		if ((sock = strstr(p, "socket="))) {
			sock += 7;
			snprintf(path, sizeof path, "%.*s", (int)strcspn(sock, ", \t\r\n\"#"), sock);
		}
	}
	fclose(f);
	return path[0] ? path : NULL;
}

static munge_ctx_t context(void)
{
	munge_ctx_t ctx = munge_ctx_create();

	if (ctx && munge_socket())
		munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_socket());
	return ctx;
}

/* "sha256=" and 64 hex digits. */
static void digest_of(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

int rdv_auth_sign(const char *what, const void *data, size_t len, int ttl, char **cred,
		  char *err, size_t errlen)
{
	munge_ctx_t ctx = context();
	char digest[65], payload[1024];
	munge_err_t rc;

	*cred = NULL;
	if (!ctx) {
		snprintf(err, errlen, "rendezvous: out of memory for a munge context");
		return -1;
	}
	digest_of(data, len, digest);
	snprintf(payload, sizeof payload, "stork-rendezvous %s sha256=%s", what, digest);
	munge_ctx_set(ctx, MUNGE_OPT_TTL, ttl);
	rc = munge_encode(cred, ctx, payload, (int)strlen(payload) + 1);
	if (rc != EMUNGE_SUCCESS)
		snprintf(err, errlen, "rendezvous: cannot make a munge credential: %s (munged must "
			 "run on every node, as for Slurm's auth/munge)", munge_ctx_strerror(ctx));
	munge_ctx_destroy(ctx);
	return rc == EMUNGE_SUCCESS ? 0 : -1;
}

int rdv_auth_verify_what(const char *cred, size_t credlen, const char *what, char *digest,
			 char *err, size_t errlen)
{
	char *text = malloc(credlen + 1), prefix[1024];
	munge_ctx_t ctx = context();
	void *payload = NULL;
	int plen = 0, ok = -1;
	uid_t uid;
	gid_t gid;
	munge_err_t rc;

	if (!text || !ctx) {
		snprintf(err, errlen, "out of memory");
		free(text);
		if (ctx)
			munge_ctx_destroy(ctx);
		return -1;
	}
	memcpy(text, cred, credlen);
	text[credlen] = '\0';
	rc = munge_decode(text, ctx, &payload, &plen, &uid, &gid);
	snprintf(prefix, sizeof prefix, "stork-rendezvous %s sha256=", what);
	if (rc != EMUNGE_SUCCESS)
		snprintf(err, errlen, "its munge credential is not valid: %s", munge_ctx_strerror(ctx));
	else if (uid != geteuid())
		snprintf(err, errlen, "its munge credential is of uid %u, not of the job's user "
			 "(uid %u)", (unsigned)uid, (unsigned)geteuid());
	else if (plen < 1 || ((char *)payload)[plen - 1] || strncmp(payload, prefix, strlen(prefix)) ||
		 strlen((char *)payload + strlen(prefix)) != 64)
		snprintf(err, errlen, "its munge credential is for another message, not \"%s\"", what);
	else
		ok = 0;
	if (ok == 0)
		memcpy(digest, (char *)payload + strlen(prefix), 65);
	free(payload);
	free(text);
	munge_ctx_destroy(ctx);
	return ok;
}

int rdv_auth_check_data(const char *digest, const void *data, size_t len)
{
	char got[65];

	digest_of(data, len, got);
	return strcmp(got, digest) == 0 ? 0 : -1;
}

int rdv_auth_verify(const char *cred, size_t credlen, const char *what, const void *data,
		    size_t len, char *err, size_t errlen)
{
	char digest[65];

	if (rdv_auth_verify_what(cred, credlen, what, digest, err, errlen) < 0)
		return -1;
	if (rdv_auth_check_data(digest, data, len) < 0) {
		snprintf(err, errlen, "its munge credential vouches for other bytes than it sent");
		return -1;
	}
	return 0;
}
