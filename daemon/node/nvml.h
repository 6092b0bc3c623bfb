/*
 * daemon/node/nvml.h - a GPU's figures from NVML (libnvidia-ml.so.1),
 * loaded at run time with dlopen: nothing links it, so storkd runs where
 * the driver's library is absent (CPU nodes, a container without it) and
 * says so once instead.
 *
 * Only the few calls and types used here are declared, with NVML's own
 * names and its stable C ABI (nvml.h is the toolkit's; a build without
 * CUDA has none).
 */
#ifndef STORK_DAEMON_NVML_H
#define STORK_DAEMON_NVML_H

#include <stddef.h>

#define NVML_LIBRARY "libnvidia-ml.so.1"

struct nvml;

/* One sample of a GPU. */
struct nvml_sample {
	double util_pct;             /* the share of the last sample period a kernel ran */
	double mem_used, mem_total;  /* bytes */
	double power_w;
	double sm_clock_mhz;
	double temp_c;
	unsigned long long throttle; /* NVML's clocks-throttle reason bits; 0: none */
};

/*
 * Load NVML from path (NULL: NVML_LIBRARY) and initialise it. NULL with the
 * reason in err when the library is absent or does not start.
 */
struct nvml *nvml_open(const char *path, char *err, size_t errlen);

void nvml_close(struct nvml *n);

/*
 * The GPU at PCI bus id (as CUDA gives it, "0000:3B:00.0") into *dev.
 * 0, or -1 with NVML's reason in err.
 */
int nvml_device(struct nvml *n, const char *bus_id, void **dev, char *err, size_t errlen);

/*
 * A sample of dev. A figure the GPU does not report (power on some boards)
 * is NaN; -1 with the reason in err when none could be read.
 */
int nvml_sample(struct nvml *n, void *dev, struct nvml_sample *s, char *err, size_t errlen);

/* "sw_power_cap, hw_slowdown": the throttle bits' names ("none" for 0). */
void nvml_throttle_names(unsigned long long bits, char *buf, size_t len);

#endif
