/* daemon/node/nvml.c - see nvml.h. */
#include "config.h"
#include "daemon/node/nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVML's ABI, as nvml.h declares it. */
typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef void *nvmlDevice_t;
typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;
enum { NVML_CLOCK_SM = 1, NVML_TEMPERATURE_GPU = 0 };

struct nvml {
	void *lib;
	nvmlReturn_t (*init)(void);
	nvmlReturn_t (*shutdown)(void);
	const char *(*error_string)(nvmlReturn_t);
	nvmlReturn_t (*by_bus_id)(const char *, nvmlDevice_t *);
	nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
	nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
	nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
	nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
	nvmlReturn_t (*throttle)(nvmlDevice_t, unsigned long long *);
};

/* Each symbol, with the versioned name current drivers export. */
static int resolve(struct nvml *n, char *err, size_t errlen)
{
	struct {
		void **fn;
		const char *name;
	} syms[] = {
		{ (void **)&n->init, "nvmlInit_v2" },
		{ (void **)&n->shutdown, "nvmlShutdown" },
		{ (void **)&n->error_string, "nvmlErrorString" },
		{ (void **)&n->by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2" },
		{ (void **)&n->utilization, "nvmlDeviceGetUtilizationRates" },
		{ (void **)&n->memory, "nvmlDeviceGetMemoryInfo" },
		{ (void **)&n->power, "nvmlDeviceGetPowerUsage" },
		{ (void **)&n->clock, "nvmlDeviceGetClockInfo" },
		{ (void **)&n->temperature, "nvmlDeviceGetTemperature" },
		{ (void **)&n->throttle, "nvmlDeviceGetCurrentClocksThrottleReasons" },
	};

	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
		if (!(*syms[i].fn = dlsym(n->lib, syms[i].name))) {
			snprintf(err, errlen, "NVML has no %s", syms[i].name);
			return -1;
		}
	return 0;
}

static const char *why(const struct nvml *n, nvmlReturn_t rc)
{
	const char *s = n->error_string ? n->error_string(rc) : NULL;

	return s ? s : "unknown error";
}

struct nvml *nvml_open(const char *path, char *err, size_t errlen)
{
	struct nvml *n = calloc(1, sizeof *n);
	const char *lib = path ? path : NVML_LIBRARY;
	nvmlReturn_t rc;

	if (!n) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (!(n->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(err, errlen, "%s: %s", lib, dlerror());
		free(n);
		return NULL;
	}
	if (resolve(n, err, errlen) < 0) {
		nvml_close(n);
		return NULL;
	}
	if ((rc = n->init()) != 0) {
		snprintf(err, errlen, "%s: nvmlInit: %s", lib, why(n, rc));
		n->shutdown = NULL; /* nothing to shut down */
		nvml_close(n);
		return NULL;
	}
	return n;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	if (n->shutdown)
		n->shutdown();
	dlclose(n->lib);
	free(n);
}

int nvml_device(struct nvml *n, const char *bus_id, void **dev, char *err, size_t errlen)
{
	nvmlReturn_t rc = n->by_bus_id(bus_id, (nvmlDevice_t *)dev);

	if (rc != 0) {
		snprintf(err, errlen, "NVML: the GPU at %s: %s", bus_id, why(n, rc));
		return -1;
	}
	return 0;
}

int nvml_sample(struct nvml *n, void *dev, struct nvml_sample *s, char *err, size_t errlen)
{
	nvmlUtilization_t u;
	nvmlMemory_t m;
	unsigned int mw, mhz, c;
	unsigned long long t;
	nvmlReturn_t rc;
	int got = 0;

	s->util_pct = s->mem_used = s->mem_total = s->power_w = NAN;
	s->sm_clock_mhz = s->temp_c = NAN;
	s->throttle = 0;
	if ((rc = n->utilization(dev, &u)) == 0)
		s->util_pct = u.gpu, got++;
	if (n->memory(dev, &m) == 0)
		s->mem_used = (double)m.used, s->mem_total = (double)m.total, got++;
	if (n->power(dev, &mw) == 0)
		s->power_w = mw / 1e3, got++;
	if (n->clock(dev, NVML_CLOCK_SM, &mhz) == 0)
		s->sm_clock_mhz = mhz, got++;
	if (n->temperature(dev, NVML_TEMPERATURE_GPU, &c) == 0)
		s->temp_c = c, got++;
	if (n->throttle(dev, &t) == 0)
		s->throttle = t, got++;
	if (!got) {
		snprintf(err, errlen, "NVML: no figure of the GPU: %s", why(n, rc));
		return -1;
	}
	return 0;
}

void nvml_throttle_names(unsigned long long bits, char *buf, size_t len)
{
	/* nvml.h's nvmlClocksThrottleReason* bits */
	static const struct {
		unsigned long long bit;
		const char *name;
	} reasons[] = {
		{ 0x1, "gpu_idle" },	       { 0x2, "applications_clocks" },
		{ 0x4, "sw_power_cap" },       { 0x8, "hw_slowdown" },
		{ 0x10, "sync_boost" },	       { 0x20, "sw_thermal" },
		{ 0x40, "hw_thermal" },	       { 0x80, "hw_power_brake" },
		{ 0x100, "display_clocks" },
	};
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof reasons / sizeof reasons[0] && used < len; i++)
		if (bits & reasons[i].bit)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
						 reasons[i].name);
	if (!used)
		snprintf(buf, len, "none");
}
