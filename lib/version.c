/* lib/version.c - see version.h. */
#include "config.h"
#include "lib/version.h"

const char *stork_version(void)
{
	return PACKAGE_VERSION;
}

const char *stork_git_describe(void)
{
	return STORK_GIT_DESCRIBE;
}

const char *stork_compiler(void)
{
#if defined(__clang__)
	return "clang " __clang_version__;
#elif defined(__GNUC__)
	return "gcc " __VERSION__;
#else
	return "unknown";
#endif
}
