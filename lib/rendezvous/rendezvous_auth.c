/* lib/rendezvous/rendezvous_auth.c - see rendezvous_auth.h. */
#include "config.h"
#include "lib/rendezvous/rendezvous_auth.h"

#include <errno.h>
#include <fcntl.h>
#include <munge.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <sys/random.h>
#include <sys/stat.h>
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

#define HMAC_PREFIX "STORK-HMAC1:"
#define SECRET_MIN 32
#define SECRET_MAX 4096

/*
 * The job's secret from path: a regular file of ours, no link, closed to
 * group and others. Its length, or -1 with why (errno ENOENT when absent).
 */
static int read_secret(const char *path, unsigned char *key, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), n = -1;
	struct stat st;

	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "the job's secret %s: %s", path, strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077))
		snprintf(err, errlen, "the job's secret %s is refused: it must be a regular file of "
			 "uid %u with mode 0600 (it is uid %u, mode %04o)", path, (unsigned)geteuid(),
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	else if ((n = (int)read(fd, key, SECRET_MAX)) < SECRET_MIN)
		snprintf(err, errlen, "the job's secret %s holds %d bytes, fewer than %d", path,
			 n < 0 ? 0 : n, SECRET_MIN), n = -1;
	close(fd);
	errno = EACCES;
	return n;
}

static void hmac_hex(const unsigned char *key, int klen, const char *payload, char out[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	HMAC(EVP_sha256(), key, klen, (const unsigned char *)payload, strlen(payload), md, &mdlen);
	for (unsigned i = 0; i < mdlen && i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Without munged: the payload under an HMAC keyed by the job's secret. */
static int sign_with_secret(const char *payload, const char *secret_file, char **cred, char *err,
			    size_t errlen)
{
	unsigned char key[SECRET_MAX];
	char mac[65];
	int klen = read_secret(secret_file, key, err, errlen);

	if (klen < 0)
		return errno == ENOENT ? RDV_AUTH_NOT_YET : -1;
	hmac_hex(key, klen, payload, mac);
	OPENSSL_cleanse(key, sizeof key);
	if (asprintf(cred, HMAC_PREFIX "%s:%s", mac, payload) < 0) {
		*cred = NULL;
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int rdv_auth_make_secret(const char *path, char *err, size_t errlen)
{
	unsigned char key[SECRET_MIN];
	int fd;

	if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
		snprintf(err, errlen, "cannot draw the job's secret: %s", strerror(errno));
		return -1;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST)
		return 0; /* an earlier launch's, judged when read */
	if (fd < 0 || write(fd, key, sizeof key) != (ssize_t)sizeof key || fsync(fd) < 0) {
		snprintf(err, errlen, "cannot write the job's secret %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	OPENSSL_cleanse(key, sizeof key);
	return close(fd);
}

int rdv_auth_sign(const char *what, const void *data, size_t len, int ttl,
		  const char *secret_file, char **cred, char *err, size_t errlen)
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
	if (rc == EMUNGE_SOCKET && secret_file && secret_file[0]) {
		munge_ctx_destroy(ctx);
		return sign_with_secret(payload, secret_file, cred, err, errlen);
	}
	if (rc != EMUNGE_SUCCESS)
		snprintf(err, errlen, "rendezvous: cannot make a munge credential: %s (munged must "
			 "run on every node, as for Slurm's auth/munge)", munge_ctx_strerror(ctx));
	munge_ctx_destroy(ctx);
	return rc == EMUNGE_SUCCESS ? 0 : -1;
}

/* An HMAC credential: the payload it vouches for, in a malloc'd copy, or NULL. */
static char *verify_hmac(const char *text, const char *secret_file, char *err, size_t errlen)
{
	unsigned char key[SECRET_MAX];
	const char *mac = text + strlen(HMAC_PREFIX), *payload = strchr(mac, ':');
	char want[65];
	int klen;

	if (!payload || payload - mac != 64) {
		snprintf(err, errlen, "its secret-keyed credential is malformed");
		return NULL;
	}
	payload++;
	if (!secret_file || !secret_file[0]) {
		snprintf(err, errlen, "it is keyed by a secret, and this launcher has none");
		return NULL;
	}
	if ((klen = read_secret(secret_file, key, err, errlen)) < 0)
		return NULL;
	hmac_hex(key, klen, payload, want);
	OPENSSL_cleanse(key, sizeof key);
	if (CRYPTO_memcmp(want, mac, 64)) {
		snprintf(err, errlen, "its secret-keyed credential is not the job's");
		return NULL;
	}
	return strdup(payload);
}

int rdv_auth_verify_what(const char *cred, size_t credlen, const char *what,
			 const char *secret_file, char *digest, char *err, size_t errlen)
{
	char *text = malloc(credlen + 1), prefix[1024];
	munge_ctx_t ctx = context();
	void *payload = NULL;
	int plen = 0, ok = -1;
	uid_t uid = (uid_t)-1;
	gid_t gid;
	munge_err_t rc = EMUNGE_SUCCESS;

	if (!text || !ctx) {
		snprintf(err, errlen, "out of memory");
		free(text);
		if (ctx)
			munge_ctx_destroy(ctx);
		return -1;
	}
	memcpy(text, cred, credlen);
	text[credlen] = '\0';
	if (!strncmp(text, HMAC_PREFIX, strlen(HMAC_PREFIX))) {
		/* the job's secret stood in for munged: its holder is the job's user */
		if ((payload = verify_hmac(text, secret_file, err, errlen))) {
			plen = (int)strlen(payload) + 1;
			uid = geteuid();
		} else {
			rc = EMUNGE_CRED_INVALID;
		}
	} else {
		rc = munge_decode(text, ctx, &payload, &plen, &uid, &gid);
		if (rc != EMUNGE_SUCCESS)
			snprintf(err, errlen, "its munge credential is not valid: %s",
				 munge_ctx_strerror(ctx));
	}
	snprintf(prefix, sizeof prefix, "stork-rendezvous %s sha256=", what);
	if (rc != EMUNGE_SUCCESS)
		; /* err says why */
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
		    size_t len, const char *secret_file, char *err, size_t errlen)
{
	char digest[65];

	if (rdv_auth_verify_what(cred, credlen, what, secret_file, digest, err, errlen) < 0)
		return -1;
	if (rdv_auth_check_data(digest, data, len) < 0) {
		snprintf(err, errlen, "its munge credential vouches for other bytes than it sent");
		return -1;
	}
	return 0;
}
