/*
 * launcher/sha256_file.c - see sha256_file.h.
 */
#include "config.h"
#include "launcher/sha256_file.h"

#include <openssl/evp.h>
#include <stdio.h>

int file_sha256(const char *path, char hex[65])
{
	unsigned char buf[1 << 16], md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	FILE *f = fopen(path, "rb");
	size_t got;
	int rc = -1;

	if (!ctx || !f || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL))
		goto out;
	while ((got = fread(buf, 1, sizeof buf, f)) > 0)
		if (!EVP_DigestUpdate(ctx, buf, got))
			goto out;
	if (ferror(f) || !EVP_DigestFinal_ex(ctx, md, &mdlen))
		goto out;
	for (unsigned int i = 0; i < mdlen && i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	rc = 0;
out:
	if (f)
		fclose(f);
	EVP_MD_CTX_free(ctx);
	return rc;
}
