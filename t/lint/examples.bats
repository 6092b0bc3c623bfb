#!/usr/bin/env bats
# The examples in etc/ say what they promise: etc/stork.yaml has every key
# of the configuration, and etc/stork.sbatch the lines a GPU user needs.
# Read as text, without the build: the unit test check_config loads
# etc/stork.yaml and finds it equal to the defaults, and the cluster test
# t/integration/sbatch_example.bats has Slurm accept the sbatch script's
# GPU lines.

setup() {
	srcdir=${abs_top_srcdir:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
}

# table_keys: "section.key<TAB>default" for every row of the key table in
# lib/config/config_keys.c (the one list of keys: loading, defaults and the
# resolved YAML all walk it), the default as YAML text.
table_keys() {
	awk '
		/^const struct key config_keys\[\] = \{/ { inside = 1; next }
		inside && /^\};/ { inside = 0 }
		!inside { next }
		/\.path = "/ { match($0, /\.path = "[^"]*"/); path = substr($0, RSTART + 9, RLENGTH - 10) }
		/\.dflt = "/ {
			dflt = $0
			sub(/.*\.dflt = "/, "", dflt)
			sub(/", *(\.help.*)?$/, "", dflt)
			gsub(/\\"/, "\"", dflt)
			print path "\t" dflt
		}' "$srcdir/lib/config/config_keys.c" | LC_ALL=C sort
}

# example_keys: "section.key<TAB>value" for every key line of
# etc/stork.yaml, set ("  key: value") or commented out ("  # key: value"),
# without the line's comment.
example_keys() {
	awk '
		/^[a-z_]+:[[:space:]]*(#.*)?$/ { section = $0; sub(/:.*/, "", section); next }
		/^  (# )?[a-z_][a-z0-9_]*:/ {
			line = $0
			sub(/^  (# )?/, "", line)
			key = line
			sub(/:.*/, "", key)
			value = line
			sub(/^[^:]*:[[:space:]]*/, "", value)
			sub(/[[:space:]]+#.*$/, "", value)
			print section "." key "\t" value
		}' "$srcdir/etc/stork.yaml" | LC_ALL=C sort
}

# The rule, for whoever adds a key: etc/stork.yaml names each key of the
# table once, at its default written as the table writes it, on a line of
# its own in its section: "  key: default", or "  # key: default" where this
# file could not set it (the Llama keys, refused under model.arch gpt2).
# Every key of the table is a user's (stork.yaml(5) documents each): none
# is left out on purpose.
@test "etc/stork.yaml names every key of lib/config/config_keys.c's table, each at its default, and no other" {
	local table example missing extra

	table=$(table_keys)
	example=$(example_keys)
	[ "$(wc -l <<<"$table")" -ge 80 ] || { echo "lib/config/config_keys.c: found only these keys: $table"; false; }
	[ -n "$example" ] || { echo "etc/stork.yaml: no key line found"; false; }
	missing=$(LC_ALL=C comm -23 <(echo "$table") <(echo "$example"))
	extra=$(LC_ALL=C comm -13 <(echo "$table") <(echo "$example"))
	[ -z "$missing$extra" ] || {
		echo "etc/stork.yaml lacks (key, default of lib/config/config_keys.c):"
		echo "${missing:-  nothing}"
		echo "etc/stork.yaml has what lib/config/config_keys.c's table does not (key, value):"
		echo "${extra:-  nothing}"
		false
	}
}

@test "etc/stork.yaml names no key twice" {
	local twice

	twice=$(example_keys | cut -f1 | uniq -d)
	[ -z "$twice" ] || { echo "etc/stork.yaml: more than one line for: $twice"; false; }
}

# The GPU lines are commented out as ##SBATCH (sbatch reads only lines that
# begin #SBATCH), in two blocks labelled "# (a)" and "# (b)"; deleting the
# first # of a block's lines makes them options.
@test "etc/stork.sbatch shows a GPU user's lines: (a) --gres=gpu:N, (b) --ntasks-per-node=N --gpus-per-task=1, each with --cpus-per-task and --mem-per-gpu" {
	local f=$srcdir/etc/stork.sbatch block lines option
	local -a want
	local n='[1-9][0-9]*'

	grep -qx '#SBATCH --ntasks-per-node=1' "$f" || { echo "$f: no '#SBATCH --ntasks-per-node=1'"; false; }
	for block in a b; do
		# the block: the ##SBATCH lines after its label
		lines=$(awk -v label="# ($block)" '
			index($0, label) == 1 { inside = 1; next }
			inside && /^##SBATCH/ { print; next }
			{ inside = 0 }' "$f")
		[ -n "$lines" ] || { echo "$f: no ##SBATCH lines under '# ($block) ...'"; false; }
		if [ "$block" = a ]; then
			want=("--gres=gpu:$n")
		else
			want=("--ntasks-per-node=$n" "--gpus-per-task=1")
		fi
		want+=("--cpus-per-task=$n" "--mem-per-gpu=${n}[KMGT]")
		for option in "${want[@]}"; do
			grep -qx "##SBATCH $option" <<<"$lines" ||
				{ echo "$f: block ($block) lacks '##SBATCH $option': $lines"; false; }
		done
	done
}

@test "etc/stork.sbatch: every #SBATCH and ##SBATCH line comes before the first command, where sbatch still reads them" {
	local f=$srcdir/etc/stork.sbatch first last

	first=$(grep -n -v -e '^#' -e '^[[:space:]]*$' "$f" | head -1 | cut -d: -f1)
	last=$(grep -n -e '^#SBATCH' -e '^##SBATCH' "$f" | tail -1 | cut -d: -f1)
	[ -n "$first" ] && [ -n "$last" ] || { echo "$f: no command or no #SBATCH line"; false; }
	((last < first)) || { echo "$f:$last: an #SBATCH line after the first command (line $first)"; false; }
}
