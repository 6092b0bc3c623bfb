/*
 * t/unit/check_bind.c - the binding plan (lib/bind/bind.c) over the hwloc XML
 * topologies of t/data/topo, and the rank-environment helpers.
 *
 * Topologies (t/data/topo/gen-topo.py):
 *   gpu8-2socket  cores 0-7 on NUMA 0 (PUs c and c+16), cores 8-15 on NUMA 1;
 *                 GPUs by bus id: 0-3 (07, 0f, 47, 4e) on NUMA 0, 4-7 on NUMA 1
 *   gpu4-1socket  16 cores (PUs 0-15), one NUMA node, 4 GPUs
 *   cpu-2numa     cores 0-3 on NUMA 0, 4-7 on NUMA 1, no GPU
 * Every expected cpuset below is worked out from these layouts and the rules
 * in lib/bind/bind.h, not taken from the code's output.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "lib/bind/topology.h"
#include "plugins/plugin_args.h"

static struct topo *load(const char *name)
{
	char path[1024], err[512];
	struct topo *t;

	snprintf(path, sizeof(path), "%s/topo/%s.xml", STORK_TEST_DATA, name);
	t = topo_load(path, err, sizeof(err));
	ck_assert_msg(t != NULL, "%s", err);
	return t;
}

/* Plan of one task; allowed NULL means every PU of the topology. */
static int plan(const char *topo, const char *allowed, const int *gpus, int ngpus, int ntasks,
		int task, enum bind_mode mode, struct bind_plan *p, char *err, size_t errlen)
{
	struct topo *t = load(topo);
	hwloc_bitmap_t set = hwloc_bitmap_alloc();
	struct bind_request req;
	int rc;

	if (allowed != NULL)
		hwloc_bitmap_list_sscanf(set, allowed);
	else
		hwloc_bitmap_copy(set, hwloc_topology_get_topology_cpuset(topo_hwloc(t)));
	req = (struct bind_request){ .mode = mode, .allowed = set, .gpus = gpus, .ngpus = ngpus,
				     .ntasks = ntasks, .task = task };
	rc = bind_plan_compute(t, &req, p, err, errlen);
	hwloc_bitmap_free(set);
	topo_free(t);
	return rc;
}

/* Assert the plan of one task: device, cpus, NUMA node, OMP threads. */
static void expect(const char *topo, const char *allowed, const int *gpus, int ngpus, int ntasks,
		   int task, enum bind_mode mode, int gpu, const char *cpus, int numa, int omp)
{
	struct bind_plan p;
	char err[512], list[256];

	ck_assert_msg(plan(topo, allowed, gpus, ngpus, ntasks, task, mode, &p, err, sizeof(err)) == 0,
		      "%s task %d/%d: %s", topo, task, ntasks, err);
	ck_assert_int_eq(bind_cpuset_format(p.cpuset, list, sizeof(list)), 0);
	ck_assert_msg(strcmp(list, cpus) == 0, "%s task %d/%d: cpus %s, expected %s", topo, task,
		      ntasks, list, cpus);
	ck_assert_int_eq(p.gpu, gpu);
	ck_assert_int_eq(p.numa, numa);
	ck_assert_int_eq(p.omp_threads, omp);
	if (allowed != NULL) {
		hwloc_bitmap_t a = hwloc_bitmap_alloc();

		hwloc_bitmap_list_sscanf(a, allowed);
		ck_assert(hwloc_bitmap_isincluded(p.cpuset, a));
		hwloc_bitmap_free(a);
	}
	bind_plan_free(&p);
}

static const int gpus8[] = { 0, 1, 2, 3, 4, 5, 6, 7 };

/* ---------------------------------------------------------------- topology */

START_TEST(test_topology_gpus_in_pci_order_with_numa_locality)
{
	struct topo *t = load("gpu8-2socket");
	hwloc_const_cpuset_t set;
	int numa;
	char list[64];

	ck_assert_int_eq(topo_gpu_count(t), 8);
	ck_assert_int_eq(topo_gpu_locality(t, 3, &set, &numa), 0);
	ck_assert_int_eq(numa, 0);
	bind_cpuset_format(set, list, sizeof(list));
	ck_assert_str_eq(list, "0-7,16-23");
	ck_assert_int_eq(topo_gpu_locality(t, 4, &set, &numa), 0);
	ck_assert_int_eq(numa, 1);
	ck_assert_int_eq(topo_gpu_locality(t, 8, &set, &numa), -1);
	topo_free(t);
}
END_TEST

START_TEST(test_topology_missing_file_is_named)
{
	char err[512];

	ck_assert_ptr_null(topo_load("/nonexistent/topo.xml", err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/topo.xml"));
}
END_TEST

/* ---------------------------------------------------------------- gpu mode */

START_TEST(test_gpu8_one_task_per_gpu_shares_numa_cores)
{
	/* 4 tasks per NUMA node, 8 cores each: 2 cores (4 PUs) per task. */
	expect("gpu8-2socket", NULL, gpus8, 8, 8, 0, BIND_AUTO, 0, "0-1,16-17", 0, 2);
	expect("gpu8-2socket", NULL, gpus8, 8, 8, 3, BIND_AUTO, 3, "6-7,22-23", 0, 2);
	expect("gpu8-2socket", NULL, gpus8, 8, 8, 5, BIND_AUTO, 5, "10-11,26-27", 1, 2);
	expect("gpu8-2socket", NULL, gpus8, 8, 8, 7, BIND_GPU, 7, "14-15,30-31", 1, 2);
}
END_TEST

START_TEST(test_gpu8_two_tasks_split_their_gpus_numa_node)
{
	/* GPUs 0 and 1 are both on NUMA 0: its 8 cores split 4 + 4. */
	expect("gpu8-2socket", NULL, gpus8, 8, 2, 0, BIND_AUTO, 0, "0-3,16-19", 0, 4);
	expect("gpu8-2socket", NULL, gpus8, 8, 2, 1, BIND_AUTO, 1, "4-7,20-23", 0, 4);
}
END_TEST

START_TEST(test_three_tasks_on_two_gpus_wrap_and_share_fairly)
{
	static const int same[] = { 0, 1 }, split[] = { 0, 4 };

	/* Both GPUs on NUMA 0: 3 tasks share 8 cores as 2, 3, 3 (0-1, 2-4, 5-7). */
	expect("gpu8-2socket", NULL, same, 2, 3, 0, BIND_AUTO, 0, "0-1,16-17", 0, 2);
	expect("gpu8-2socket", NULL, same, 2, 3, 1, BIND_AUTO, 1, "2-4,18-20", 0, 3);
	expect("gpu8-2socket", NULL, same, 2, 3, 2, BIND_AUTO, 0, "5-7,21-23", 0, 3);
	/* GPUs on both sockets: tasks 0 and 2 share NUMA 0, task 1 has NUMA 1. */
	expect("gpu8-2socket", NULL, split, 2, 3, 0, BIND_AUTO, 0, "0-3,16-19", 0, 4);
	expect("gpu8-2socket", NULL, split, 2, 3, 1, BIND_AUTO, 1, "8-15,24-31", 1, 8);
	expect("gpu8-2socket", NULL, split, 2, 3, 2, BIND_AUTO, 0, "4-7,20-23", 0, 4);
}
END_TEST

START_TEST(test_gpu_list_not_in_pci_order_follows_the_list)
{
	/* CUDA_VISIBLE_DEVICES=4,0: device 0 is the NUMA 1 GPU. */
	static const int list[] = { 4, 0 };
	struct bind_plan p;
	char err[256];

	expect("gpu8-2socket", NULL, list, 2, 2, 0, BIND_AUTO, 0, "8-15,24-31", 1, 8);
	expect("gpu8-2socket", NULL, list, 2, 2, 1, BIND_AUTO, 1, "0-7,16-23", 0, 8);
	ck_assert_int_eq(plan("gpu8-2socket", NULL, list, 2, 2, 0, BIND_AUTO, &p, err, sizeof(err)), 0);
	ck_assert_int_eq(p.gpu_index, 4);
	bind_plan_free(&p);
}
END_TEST

START_TEST(test_partial_allocation_stays_inside_slurms_mask)
{
	static const int list[] = { 0, 4 }, four[] = { 0, 1, 2, 3 };

	/* Cores 0-3 of NUMA 0 and 8-9 of NUMA 1 allowed. */
	expect("gpu8-2socket", "0-3,16-19,8-9,24-25", list, 2, 2, 0, BIND_AUTO, 0, "0-3,16-19", 0, 4);
	expect("gpu8-2socket", "0-3,16-19,8-9,24-25", list, 2, 2, 1, BIND_AUTO, 1, "8-9,24-25", 1, 2);
	/* Only the first hyperthread of cores 0-3: a core counts, its sibling stays out. */
	expect("gpu8-2socket", "0-3", four, 4, 4, 2, BIND_AUTO, 2, "2", 0, 1);
}
END_TEST

START_TEST(test_gpu_numa_without_allowed_cores_falls_back_to_cores)
{
	static const int list[] = { 0, 1 };
	struct bind_plan p;
	char err[256];

	/* Slurm gave only NUMA 1's cores; GPUs 0 and 1 are on NUMA 0. */
	expect("gpu8-2socket", "8-15,24-31", list, 2, 2, 0, BIND_AUTO, 0, "8-11,24-27", 1, 4);
	expect("gpu8-2socket", "8-15,24-31", list, 2, 2, 1, BIND_AUTO, 1, "12-15,28-31", 1, 4);
	ck_assert_int_eq(plan("gpu8-2socket", "8-15,24-31", list, 2, 2, 0, BIND_GPU, &p, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(p.note, "NUMA node 0"));
	bind_plan_free(&p);
}
END_TEST

START_TEST(test_gpu_unknown_to_topology_falls_back_to_cores)
{
	static const int list[] = { 0, 5 };
	struct bind_plan p;
	char err[256];

	expect("gpu4-1socket", NULL, list, 2, 2, 1, BIND_AUTO, 1, "8-15", 0, 8);
	ck_assert_int_eq(plan("gpu4-1socket", NULL, list, 2, 2, 1, BIND_AUTO, &p, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(p.note, "GPU 5"));
	bind_plan_free(&p);
}
END_TEST

START_TEST(test_gpu4_one_socket)
{
	static const int four[] = { 0, 1, 2, 3 };

	expect("gpu4-1socket", NULL, four, 4, 4, 1, BIND_AUTO, 1, "4-7", 0, 4);
	/* 8 tasks on 4 GPUs: task 5 uses device 1 and cores 10-11. */
	expect("gpu4-1socket", NULL, four, 4, 8, 5, BIND_AUTO, 1, "10-11", 0, 2);
	/* cores mode keeps the GPU but ignores its locality. */
	expect("gpu4-1socket", NULL, four, 4, 4, 2, BIND_CORES, 2, "8-11", 0, 4);
	/* none: Slurm's mask as is. */
	expect("gpu4-1socket", "3-5", four, 4, 4, 3, BIND_NONE, 3, "3-5", -1, 3);
}
END_TEST

START_TEST(test_gpu_mode_without_gpus_is_an_error)
{
	struct bind_plan p;
	char err[256];

	ck_assert_int_eq(plan("cpu-2numa", NULL, NULL, 0, 2, 0, BIND_GPU, &p, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "no GPUs"));
}
END_TEST

/* -------------------------------------------------------------- cores mode */

START_TEST(test_cpu_tasks_get_even_numa_aligned_blocks)
{
	expect("cpu-2numa", NULL, NULL, 0, 2, 0, BIND_AUTO, -1, "0-3", 0, 4);
	expect("cpu-2numa", NULL, NULL, 0, 2, 1, BIND_AUTO, -1, "4-7", 1, 4);
	expect("cpu-2numa", NULL, NULL, 0, 4, 2, BIND_CORES, -1, "4-5", 1, 2);
	/* 3 tasks: one per node, the third to the lower node on a tie. */
	expect("cpu-2numa", NULL, NULL, 0, 3, 0, BIND_AUTO, -1, "0-1", 0, 2);
	expect("cpu-2numa", NULL, NULL, 0, 3, 1, BIND_AUTO, -1, "2-3", 0, 2);
	expect("cpu-2numa", NULL, NULL, 0, 3, 2, BIND_AUTO, -1, "4-7", 1, 4);
	/* One task spans both nodes and prefers neither. */
	expect("cpu-2numa", NULL, NULL, 0, 1, 0, BIND_AUTO, -1, "0-7", -1, 8);
	/* Partial: cores 1-3 of NUMA 0 and 4 of NUMA 1; every node keeps a task. */
	expect("cpu-2numa", "1-4", NULL, 0, 2, 0, BIND_AUTO, -1, "1-3", 0, 3);
	expect("cpu-2numa", "1-4", NULL, 0, 2, 1, BIND_AUTO, -1, "4", 1, 1);
}
END_TEST

START_TEST(test_more_tasks_than_cores_is_an_error)
{
	static const int two[] = { 0, 1 };
	struct bind_plan p;
	char err[512];

	ck_assert_int_eq(plan("cpu-2numa", NULL, NULL, 0, 9, 0, BIND_AUTO, &p, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "9 local tasks but only 8 allowed cores"));
	/* Two PUs of one core are one core. */
	ck_assert_int_eq(plan("gpu8-2socket", "0,16", two, 2, 2, 0, BIND_AUTO, &p, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "2 local tasks but only 1 allowed cores (cpus 0,16)"));
}
END_TEST

START_TEST(test_testcluster_topology_one_core_per_task)
{
	static const int four[] = { 0, 1, 2, 3 };

	expect("testcluster-2core-4gpu", NULL, four, 4, 2, 0, BIND_AUTO, 0, "0", 0, 1);
	expect("testcluster-2core-4gpu", NULL, four, 4, 2, 1, BIND_AUTO, 1, "1", 0, 1);
}
END_TEST

/* ------------------------------------------------------------ environment */

START_TEST(test_master_port_distinct_for_steps_of_a_job_and_in_range)
{
	for (uint32_t job = 1; job < 200; job += 37) {
		unsigned seen[100];

		for (uint32_t step = 0; step < 100; step++) {
			seen[step] = bind_master_port(job, step, 29500, 1000);
			ck_assert_uint_ge(seen[step], 29500);
			ck_assert_uint_lt(seen[step], 30500);
			for (uint32_t s = 0; s < step; s++)
				ck_assert_uint_ne(seen[s], seen[step]);
		}
		/* Wraps inside the range: step 1000 reuses step 0's port. */
		ck_assert_uint_eq(bind_master_port(job, 1000, 29500, 1000), seen[0]);
	}
	ck_assert_uint_eq(bind_master_port(77, 3, 40000, 0), 40000);
	ck_assert_uint_eq(bind_master_port(77, 3, 40000, 1), 40000);
}
END_TEST

START_TEST(test_master_port_spreads_jobs)
{
	unsigned ports[64];
	int distinct = 0;

	for (int j = 0; j < 64; j++) {
		ports[j] = bind_master_port(1000 + (uint32_t)j, 0, 20000, 10000);
		int dup = 0;

		for (int k = 0; k < j; k++)
			dup |= ports[k] == ports[j];
		distinct += !dup;
	}
	/* Consecutive job ids must not land on consecutive ports only. */
	ck_assert_int_ge(distinct, 60);
	ck_assert_uint_ne(ports[1], ports[0] + 1);
}
END_TEST

START_TEST(test_master_addr_is_first_host)
{
	char buf[64];

	ck_assert_int_eq(bind_first_host("n[3-5],m1", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "n3");
	ck_assert_int_eq(bind_first_host("gpu[009-010]", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "gpu009");
	ck_assert_int_eq(bind_first_host("login", buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "login");
	ck_assert_int_eq(bind_first_host("", buf, sizeof(buf)), -1);
	ck_assert_int_eq(bind_first_host("averyveryverylonghostname", buf, 8), -1);
}
END_TEST

START_TEST(test_cpuset_list_format)
{
	hwloc_bitmap_t s = hwloc_bitmap_alloc();
	char buf[16];

	hwloc_bitmap_set_range(s, 0, 3);
	hwloc_bitmap_set(s, 8);
	ck_assert_int_eq(bind_cpuset_format(s, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "0-3,8");
	ck_assert_int_eq(bind_cpuset_format(s, buf, 4), -1);
	hwloc_bitmap_free(s);
}
END_TEST

START_TEST(test_bind_option_values)
{
	enum bind_mode m;
	bool v;
	static const char *const bad[] = { "", "Auto", "gpus", "auto,", "auto,verbose,x",
					   "verbose", ",verbose", "auto,quiet", "none verbose" };

	ck_assert_int_eq(bind_mode_parse("auto", &m, &v), 0);
	ck_assert(m == BIND_AUTO && !v);
	ck_assert_int_eq(bind_mode_parse("gpu,verbose", &m, &v), 0);
	ck_assert(m == BIND_GPU && v);
	ck_assert_int_eq(bind_mode_parse("cores", &m, &v), 0);
	ck_assert(m == BIND_CORES && !v);
	ck_assert_int_eq(bind_mode_parse("none,verbose", &m, &v), 0);
	ck_assert(m == BIND_NONE && v);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(bind_mode_parse(bad[i], &m, &v) == -1, "'%s' accepted", bad[i]);
	ck_assert_int_eq(bind_mode_parse(NULL, &m, &v), -1);
	ck_assert_int_eq(bind_parse_bool("on"), 1);
	ck_assert_int_eq(bind_parse_bool("No"), 0);
	ck_assert_int_eq(bind_parse_bool("maybe"), -1);
}
END_TEST

START_TEST(test_gpu_list_parsing)
{
	int g[4];

	ck_assert_int_eq(bind_parse_gpu_list("3,1", g, 4), 2);
	ck_assert(g[0] == 3 && g[1] == 1);
	ck_assert_int_eq(bind_parse_gpu_list("", g, 4), 0);
	ck_assert_int_eq(bind_parse_gpu_list("GPU-1234abcd", g, 4), -1);
	ck_assert_int_eq(bind_parse_gpu_list("1,,2", g, 4), -1);
	ck_assert_int_eq(bind_parse_gpu_list("0,1,2,3,4", g, 4), -1);
}
END_TEST

START_TEST(test_slurm_cpu_bind_list_parsing)
{
	hwloc_bitmap_t s = hwloc_bitmap_alloc();
	char buf[32];

	ck_assert_int_eq(bind_parse_cpu_bind_list("mask_cpu:", "0x1,0x2,0x30", s), 3);
	bind_cpuset_format(s, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0-1,4-5");
	hwloc_bitmap_zero(s);
	ck_assert_int_eq(bind_parse_cpu_bind_list("quiet,map_cpu:", "0,7", s), 2);
	bind_cpuset_format(s, buf, sizeof(buf));
	ck_assert_str_eq(buf, "0,7");
	ck_assert_int_eq(bind_parse_cpu_bind_list("none", "0x1", s), 0);
	ck_assert_int_eq(bind_parse_cpu_bind_list("mask_cpu:", "0xZ", s), -1);
	hwloc_bitmap_free(s);
}
END_TEST

START_TEST(test_plugstack_arguments_strict)
{
	struct plugin_args c;
	char err[512];
	char *ok[] = { "default=off", "topology=/etc/stork/topo.xml", "port_base=20000", "port_range=100" };
	char *unknown[] = { "defaults=on" }, *badbool[] = { "default=maybe" },
	     *badport[] = { "port_base=70000" }, *zero[] = { "port_range=0" },
	     *past[] = { "port_base=65000", "port_range=1000" };

	ck_assert_int_eq(plugin_args_parse(&c, 0, NULL, err, sizeof(err)), 0);
	ck_assert(c.default_on);
	ck_assert_uint_eq(c.port_base, STORK_DEFAULT_PORT_BASE);
	ck_assert_int_eq(plugin_args_parse(&c, 4, ok, err, sizeof(err)), 0);
	ck_assert(!c.default_on);
	ck_assert_str_eq(c.topology, "/etc/stork/topo.xml");
	ck_assert_uint_eq(c.port_base, 20000);
	ck_assert_uint_eq(c.port_range, 100);
	ck_assert_int_eq(plugin_args_parse(&c, 1, unknown, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "unknown plugstack argument 'defaults=on'"));
	ck_assert_int_eq(plugin_args_parse(&c, 1, badbool, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "'maybe'"));
	ck_assert_int_eq(plugin_args_parse(&c, 1, badport, err, sizeof(err)), -1);
	ck_assert_int_eq(plugin_args_parse(&c, 1, zero, err, sizeof(err)), -1);
	ck_assert_int_eq(plugin_args_parse(&c, 2, past, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "65535"));
}
END_TEST

static Suite *bind_suite(void)
{
	Suite *s = suite_create("bind");
	TCase *tc = tcase_create("bind");

	tcase_add_test(tc, test_topology_gpus_in_pci_order_with_numa_locality);
	tcase_add_test(tc, test_topology_missing_file_is_named);
	tcase_add_test(tc, test_gpu8_one_task_per_gpu_shares_numa_cores);
	tcase_add_test(tc, test_gpu8_two_tasks_split_their_gpus_numa_node);
	tcase_add_test(tc, test_three_tasks_on_two_gpus_wrap_and_share_fairly);
	tcase_add_test(tc, test_gpu_list_not_in_pci_order_follows_the_list);
	tcase_add_test(tc, test_partial_allocation_stays_inside_slurms_mask);
	tcase_add_test(tc, test_gpu_numa_without_allowed_cores_falls_back_to_cores);
	tcase_add_test(tc, test_gpu_unknown_to_topology_falls_back_to_cores);
	tcase_add_test(tc, test_gpu4_one_socket);
	tcase_add_test(tc, test_gpu_mode_without_gpus_is_an_error);
	tcase_add_test(tc, test_cpu_tasks_get_even_numa_aligned_blocks);
	tcase_add_test(tc, test_more_tasks_than_cores_is_an_error);
	tcase_add_test(tc, test_testcluster_topology_one_core_per_task);
	tcase_add_test(tc, test_master_port_distinct_for_steps_of_a_job_and_in_range);
	tcase_add_test(tc, test_master_port_spreads_jobs);
	tcase_add_test(tc, test_master_addr_is_first_host);
	tcase_add_test(tc, test_cpuset_list_format);
	tcase_add_test(tc, test_bind_option_values);
	tcase_add_test(tc, test_gpu_list_parsing);
	tcase_add_test(tc, test_slurm_cpu_bind_list_parsing);
	tcase_add_test(tc, test_plugstack_arguments_strict);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(bind_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
