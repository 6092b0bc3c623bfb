#!/usr/bin/env bats
# The Debian packages for administrators (issue 14): `make deb` builds
# stork and stork-spank-plugin, they install what they promise with the
# dependencies they need, the installed plugin passes plugin.bats on the test
# cluster, and removing them leaves nothing of theirs behind.
#
# The packages go into this machine's /usr and /etc and are removed again;
# teardown_file purges what a failed test left and gives the cluster back
# the build tree's plugin. Skipped where either package or the plugstack
# snippet is there already: the test would replace an administrator's
# installation, then remove it.

load helpers

setup_file() {
	if ! command -v dpkg-buildpackage >/dev/null || ! command -v dh >/dev/null; then
		skip "dpkg-buildpackage or dh is not installed (Debian packages dpkg-dev, debhelper)"
	fi
	local p
	for p in stork stork-spank-plugin; do
		if ! not_installed "$p" 2>/dev/null; then
			skip "the package $p is on this machine already; the test would replace it and then remove it"
		fi
	done
	[[ ! -e /etc/slurm/plugstack.conf.d/stork.conf ]] ||
		skip "/etc/slurm/plugstack.conf.d/stork.conf exists; the package would take it over and remove it"
	DEB_VERSION=$(dpkg-parsechangelog -l "${abs_top_srcdir:?set by make check}/contrib/debian/changelog" -S Version)
	DEB_ARCH=$(dpkg --print-architecture)
	PLUGIN=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/slurm-wlm/spank_stork.so
	CLUSTER=${abs_top_builddir:?set by make check}/contrib/testcluster/stork-testcluster
	export DEB_VERSION DEB_ARCH PLUGIN CLUSTER
}

teardown_file() {
	# The cluster loads the build tree's plugin again, then nothing of the
	# packages stays on the machine; one failing does not stop the other.
	local rc=0
	if [[ -e "$BATS_FILE_TMPDIR/pointed" ]]; then
		point_cluster_at "" || rc=1
	fi
	if [[ -e "$BATS_FILE_TMPDIR/installed" ]]; then
		timeout 120 dpkg --purge stork stork-spank-plugin >/dev/null || rc=1
	fi
	return $rc
}

setup() {
	setup_workdir
}

# deb PACKAGE: the path make deb gives the package.
deb() { echo "$abs_top_builddir/deb/${1}_${DEB_VERSION}_$DEB_ARCH.deb"; }

# not_installed PACKAGE: dpkg has no trace of it, or knows it as removed
# with nothing left.
not_installed() {
	local state
	state=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 0
	[ "$state" = not-installed ] || { echo "$1: $state" >&2; return 1; }
}

# point_cluster_at PATH|"": the plugin the cluster's plugstack.conf loads
# (empty: the build tree's), rewritten by `stork-testcluster start`.
point_cluster_at() {
	STORK_TESTCLUSTER_PLUGIN=$1 timeout 60 "$CLUSTER" start >/dev/null
}

@test "make deb builds stork and stork-spank-plugin from the distribution into deb/" {
	# MAKEFLAGS of an enclosing make check would name its jobserver.
	run env -u MAKEFLAGS -u MFLAGS timeout 600 make -s -C "$abs_top_builddir" deb
	echo "$output"
	[ "$status" -eq 0 ]
	for p in stork stork-spank-plugin; do
		grep -qxF "$(deb "$p")" <<<"$output"
		[ "$(dpkg-deb -f "$(deb "$p")" Package)" = "$p" ]
	done
	# the release build: configured without the test suite's fault switches
	# (the build tree's own configuration has them)
	grep -q -- '--without-cuda' "$abs_top_builddir/deb/build.log"
	run grep -c -- '--enable-fault-injection' "$abs_top_builddir/deb/build.log"
	[ "$output" = 0 ]
}

@test "the packages depend on the Debian libraries they link and on the Slurm release the plugin was built for" {
	local depends release lib
	depends=$(dpkg-deb -f "$(deb stork)" Depends)
	echo "stork: $depends"
	for lib in libc6 'libslurm[0-9]' 'libpmix[0-9]' 'libucx[0-9]' 'libhwloc[0-9]' \
		'libyaml-0-[0-9]' 'libjansson[0-9]' 'libxxhash[0-9]' 'libopenblas[0-9]' \
		'libcurl[0-9]' 'libssl[0-9]'; do
		grep -Eq "(^|, )$lib" <<<"$depends"
	done
	depends=$(dpkg-deb -f "$(deb stork-spank-plugin)" Depends)
	echo "stork-spank-plugin: $depends"
	# Slurm loads a SPANK plugin built for its own major.minor only.
	release=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1,2)
	grep -qF "slurm-wlm-basic-plugins (>= $release)" <<<"$depends"
	grep -Eq "(^|, )libhwloc[0-9]" <<<"$depends"
	# libslurm's symbols come from the Slurm process; no engine libraries
	if grep -Eq "libslurm|libopenblas|libpmix|libucx" <<<"$depends"; then false; fi
}

@test "dpkg -i installs both; dpkg -L lists the programs, manual pages, examples, plugin and its disabled plugstack line" {
	touch "$BATS_FILE_TMPDIR/installed"
	run timeout 120 dpkg -i "$(deb stork)" "$(deb stork-spank-plugin)"
	echo "$output"
	[ "$status" -eq 0 ]
	dpkg -L stork >"$BATS_FILE_TMPDIR/stork.list"
	dpkg -L stork-spank-plugin >"$BATS_FILE_TMPDIR/stork-spank-plugin.list"
	local f
	for f in /usr/bin/stork /usr/sbin/storkd /usr/libexec/stork/stork-engine \
		/usr/share/man/man1/stork.1.gz /usr/share/man/man8/storkd.8.gz \
		/usr/share/man/man5/stork.yaml.5.gz \
		/usr/share/doc/stork/examples/stork.yaml /usr/share/doc/stork/examples/stork.sbatch; do
		grep -qxF "$f" "$BATS_FILE_TMPDIR/stork.list" || { echo "stork lacks $f" >&2; false; }
		[ -e "$f" ]
	done
	for f in "$PLUGIN" /usr/share/man/man8/spank_stork.8.gz /etc/slurm/plugstack.conf.d/stork.conf; do
		grep -qxF "$f" "$BATS_FILE_TMPDIR/stork-spank-plugin.list" ||
			{ echo "stork-spank-plugin lacks $f" >&2; false; }
		[ -e "$f" ]
	done
	# Where this machine's slurmd looks for plugins (no PluginDir in the
	# test cluster's slurm.conf: Debian's default).
	[ "$(scontrol show config | sed -n 's/^PluginDir *= *//p')" = "${PLUGIN%/*}" ]
	# Disabled until an administrator uncomments it; it names the packaged
	# plugin, and it is a conffile (kept on remove, gone on purge).
	cat /etc/slurm/plugstack.conf.d/stork.conf
	run grep -c '^[^#]' /etc/slurm/plugstack.conf.d/stork.conf
	[ "$output" = 0 ]
	grep -q "^#optional $PLUGIN " /etc/slurm/plugstack.conf.d/stork.conf
	dpkg-query -W -f='${Conffiles}\n' stork-spank-plugin | grep -q '^ /etc/slurm/plugstack.conf.d/stork.conf '
	# The installed stork runs the installed engine (stork check) and is
	# the release build.
	run env -u STORK_ENGINE -u STORK_STORKD timeout 30 /usr/bin/stork version
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == "stork ${DEB_VERSION%-*} "* ]]
	# built from this checkout, which make deb told the build
	if [[ "$(git -C "$abs_top_srcdir" rev-parse --show-toplevel 2>/dev/null)" -ef "$abs_top_srcdir" ]]; then
		[[ "$output" == *"(git $(git -C "$abs_top_srcdir" describe --always --dirty),"* ]]
	fi
	run env -u STORK_ENGINE -u STORK_STORKD timeout 60 /usr/bin/stork check
	echo "$output"
	[[ "$output" == *"cpu: cpu ("* ]]
}

@test "the installed plugin passes plugin.bats on the test cluster" {
	[ -e "$PLUGIN" ]
	touch "$BATS_FILE_TMPDIR/pointed"
	point_cluster_at "$PLUGIN"
	cat "$STORK_TESTCLUSTER_DIR/etc/plugstack.conf"
	grep -q "^required $PLUGIN topology=" "$STORK_TESTCLUSTER_DIR/etc/plugstack.conf"
	run grep -c "$abs_top_builddir/plugins/" "$STORK_TESTCLUSTER_DIR/etc/plugstack.conf"
	[ "$output" = 0 ]
	# slurmstepd, the parent of every task, has the packaged plugin mapped,
	# and the plugin's own binding line comes from it.
	# shellcheck disable=SC2016 # expanded by the task's shell
	run timeout 120 srun -N1 -n1 --stork-bind=cores,verbose bash -c \
		'grep -o "/[^ ]*spank_stork\.so" /proc/$PPID/maps | sort -u'
	echo "$output"
	[ "$status" -eq 0 ]
	grep -qx "$PLUGIN" <<<"$output"
	grep -qx "stork: rank 0 (local 0) on n1: gpu none, cpus .*, numa 0" <<<"$output"
	[ "$(grep -c 'spank_stork\.so' <<<"$output")" -eq 1 ]
	# The plugin's tests, against the packaged plugin. run.sh's
	# environment (SLURM_CONF, abs_top_*, the topology) reaches them.
	run timeout 800 bats --tap "$abs_top_srcdir/t/integration/plugin.bats"
	echo "$output"
	[ "$status" -eq 0 ]
	grep -q '^1\.\.[1-9]' <<<"$output"
	[ "$(grep -c '^ok ' <<<"$output")" -eq "$(sed -n 's/^1\.\.//p' <<<"$output")" ]
	# The build tree's plugin again, before the package goes.
	point_cluster_at ""
	grep -q "^required $abs_top_builddir/plugins/.libs/spank_stork.so " "$STORK_TESTCLUSTER_DIR/etc/plugstack.conf"
	rm -f "$BATS_FILE_TMPDIR/pointed"
}

@test "dpkg -r removes every file the packages installed, and dpkg -P their plugstack line" {
	local list=("$BATS_FILE_TMPDIR"/stork.list "$BATS_FILE_TMPDIR"/stork-spank-plugin.list)
	[ -s "${list[0]}" ]
	[ -s "${list[1]}" ]
	# Never a cluster that loads a removed plugin, whatever the last test did.
	point_cluster_at ""
	rm -f "$BATS_FILE_TMPDIR/pointed"
	run timeout 120 dpkg -r stork stork-spank-plugin
	echo "$output"
	[ "$status" -eq 0 ]
	# What is left: directories other packages own (/usr/bin, Slurm's plugin
	# directory, ...) and, as Debian keeps them until purge, conffiles.
	local f left=()
	while IFS= read -r f; do
		[[ "$f" != /. ]] || continue
		[[ -e "$f" || -L "$f" ]] || continue
		[[ -d "$f" && ! -L "$f" ]] && dpkg -S "$f" >/dev/null 2>&1 && continue
		[[ "$f" == /etc/slurm/plugstack.conf.d/stork.conf ]] && continue
		left+=("$f")
	done < <(sort -u "${list[@]}")
	echo "left after dpkg -r: ${left[*]}"
	[ "${#left[@]}" -eq 0 ]
	[ -e /etc/slurm/plugstack.conf.d/stork.conf ]
	not_installed stork # it has no conffiles
	run timeout 120 dpkg -P stork-spank-plugin
	echo "$output"
	[ "$status" -eq 0 ]
	rm -f "$BATS_FILE_TMPDIR/installed"
	[ ! -e /etc/slurm/plugstack.conf.d/stork.conf ]
	not_installed stork
	not_installed stork-spank-plugin
}
