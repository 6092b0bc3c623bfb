#!/usr/bin/env bats
# README's "Try it" gives exactly two commands a newcomer types, and they
# work as written for root on a machine without sudo (containers, cloud
# images: Debian 12 installs no sudo there) and for a user with sudo.
#
# The commands are read from README.md and run in the source tree with
# fakes first on PATH, so that nothing is installed or built:
#   id       answers -u with the uid a test chose (0, or 1000 for a user)
#   sudo     as root's machine has none: records that it was called and
#            fails as a missing command would; as a user's: records its
#            arguments and runs them as root with an environment reset as
#            sudo's env_reset does (PATH and the fakes' own variables kept)
#   apt-get, autoreconf, make
#            the scripts' work, reached once they hold root: record who ran
#            them with which STORK_* variables, and stop the script there

setup() {
	srcdir=${abs_top_srcdir:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	fake=$BATS_TEST_TMPDIR/bin
	log=$BATS_TEST_TMPDIR/log
	mkdir -p "$fake" "$log"
	cat >"$fake/id" <<-'EOF'
	#!/bin/bash
	if [[ "$*" == -u ]]; then echo "$FAKE_UID"; else exec /usr/bin/id "$@"; fi
	EOF
	cat >"$fake/sudo" <<-'EOF'
	#!/bin/bash
	printf '%s\n' "$@" >"$FAKE_LOG/sudo"
	if [[ "$FAKE_SUDO" != yes ]]; then echo "sudo: command not found" >&2; exit 127; fi
	exec env -i PATH="$PATH" FAKE_LOG="$FAKE_LOG" FAKE_SUDO=yes FAKE_UID=0 "$@"
	EOF
	for work in apt-get autoreconf make; do
		cat >"$fake/$work" <<-'EOF'
		#!/bin/bash
		{ echo "uid $FAKE_UID: ${0##*/} $*"; env | grep '^STORK_' | sort; } >"$FAKE_LOG/work"
		exit 100
		EOF
	done
	chmod +x "$fake"/*
}

# readme_commands: the indented (code) lines of README.md's "Try it"
# section, one command a line.
readme_commands() {
	awk '/^## / { inside = ($0 == "## Try it") } inside && /^    [^ ]/ { sub(/^    /, ""); print }' \
		"$srcdir/README.md"
}

# as UID SUDO COMMAND: run a README command in the source tree with the
# fakes, a clean environment and one STORK_ setting that must survive sudo.
as() {
	cd "$srcdir" || return 1
	run timeout 60 env -i PATH="$fake:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$BATS_TEST_TMPDIR" \
		FAKE_UID="$1" FAKE_SUDO="$2" FAKE_LOG="$log" STORK_REQUIRE_ALL=1 bash -c "$3"
}

@test "README's Try it gives two commands, bash contrib/demo and bash contrib/run-tests, neither through sudo" {
	run readme_commands
	[ "$status" -eq 0 ]
	[ "$output" = $'bash contrib/demo\nbash contrib/run-tests' ] ||
		{ echo "README.md, Try it: the commands are: $output"; false; }
}

@test "as root on a machine without sudo, each README command goes to its work and never calls sudo" {
	local cmd n=0

	while IFS= read -r cmd; do
		n=$((n + 1))
		rm -f "$log"/*
		as 0 no "$cmd"
		echo "$cmd: exit $status: $output"
		[ ! -e "$log/sudo" ] || { echo "$cmd called sudo as root: $(cat "$log/sudo")"; false; }
		[ -e "$log/work" ] || { echo "$cmd stopped before its work"; false; }
		grep -qx 'uid 0: apt-get update -q' "$log/work" || { cat "$log/work"; false; }
	done < <(readme_commands)
	[ "$n" -eq 2 ]
}

@test "as a user, each README command runs its script again through sudo, which reaches the work as root with the STORK_ settings" {
	local cmd script n=0

	while IFS= read -r cmd; do
		n=$((n + 1))
		script=${cmd#bash }
		rm -f "$log"/*
		as 1000 yes "$cmd"
		echo "$cmd: exit $status: $output"
		[ -e "$log/sudo" ] || { echo "$cmd did not call sudo as a user"; false; }
		# sudo runs the script itself again, with the variables it would drop
		[ "$(tail -n 2 "$log/sudo")" = "bash"$'\n'"$script" ] || { cat "$log/sudo"; false; }
		grep -qx 'STORK_REQUIRE_ALL=1' "$log/sudo" || { cat "$log/sudo"; false; }
		grep -qx 'uid 0: apt-get update -q' "$log/work" || { cat "$log/work"; false; }
		grep -qx 'STORK_REQUIRE_ALL=1' "$log/work" || { cat "$log/work"; false; }
	done < <(readme_commands)
	[ "$n" -eq 2 ]
}
