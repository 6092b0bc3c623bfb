# shellcheck shell=bash
# contrib/as-root.bash - sourced by contrib/demo and contrib/run-tests, the
# README's two commands, which work as written for root and for a user with
# sudo (a fresh container or cloud image has root and no sudo).
#
# as_root SCRIPT ARGS...: returns at once as root; otherwise runs SCRIPT
# again through sudo (packages, slurmd and the nodes' namespaces are
# root's), taking along the STORK_* variables that sudo would drop.
as_root() {
	local script=$1 v keep=()
	shift
	[[ $(id -u) -ne 0 ]] || return 0
	command -v sudo >/dev/null || {
		echo "${script##*/}: needs root (Debian packages, slurmd, namespaces): run it as root, or as a user with sudo" >&2
		exit 1
	}
	for v in $(compgen -e); do
		[[ $v != STORK_* ]] || keep+=("$v=${!v}")
	done
	exec sudo env "${keep[@]}" bash "$script" "$@"
}
