/*
 * t/unit/fake_nvml.c - a stand-in for libnvidia-ml.so.1 (check_nvml): one
 * GPU at bus 0000:3B:00.0 with known figures, NVML's ABI and its error
 * codes. FAKE_NVML_FAIL=init makes nvmlInit fail; =power makes the power
 * reading unsupported, as on boards that do not report it.
 */
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
typedef struct {
	unsigned int gpu, memory;
} nvmlUtilization_t;
typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

enum { SUCCESS = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6,
       DRIVER_NOT_LOADED = 9 };

static int device = 1, started;

static int failing(const char *what)
{
	const char *f = getenv("FAKE_NVML_FAIL");

	return f && !strcmp(f, what);
}

nvmlReturn_t nvmlInit_v2(void)
{
	if (failing("init"))
		return DRIVER_NOT_LOADED;
	started = 1;
	return SUCCESS;
}

nvmlReturn_t nvmlShutdown(void)
{
	started = 0;
	return SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NOT_FOUND: return "Not Found";
	case NOT_SUPPORTED: return "Not Supported";
	case DRIVER_NOT_LOADED: return "Driver Not Loaded";
	case UNINITIALIZED: return "Uninitialized";
	default: return "Unknown Error";
	}
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *dev)
{
	if (!started)
		return UNINITIALIZED;
	if (strcasecmp(bus, "0000:3B:00.0"))
		return NOT_FOUND;
	*dev = &device;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	if (d != &device)
		return INVALID_ARGUMENT;
	u->gpu = 87;
	u->memory = 41;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	if (d != &device)
		return INVALID_ARGUMENT;
	m->total = 80ULL << 30;
	m->used = 61ULL << 30;
	m->free = m->total - m->used;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	if (d != &device)
		return INVALID_ARGUMENT;
	if (failing("power"))
		return NOT_SUPPORTED;
	*mw = 612345;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t d, int type, unsigned int *mhz)
{
	if (d != &device || type != 1 /* NVML_CLOCK_SM */)
		return INVALID_ARGUMENT;
	*mhz = 1980;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c)
{
	if (d != &device || sensor != 0 /* NVML_TEMPERATURE_GPU */)
		return INVALID_ARGUMENT;
	*c = 64;
	return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t d, unsigned long long *bits)
{
	if (d != &device)
		return INVALID_ARGUMENT;
	*bits = 0x4 | 0x20; /* sw_power_cap, sw_thermal */
	return SUCCESS;
}
