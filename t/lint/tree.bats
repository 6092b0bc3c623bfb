#!/usr/bin/env bats
# The tree's map and its dependency graph (README.md, "The tree"): every
# folder of the tree has its line there and every line its folder; the
# link-time dependencies between source files (contrib/source-graph, over
# the objects of this build) have no circle and no edge from a lower folder
# into a higher one; no comment names a file the tree does not have
# (contrib/stale-names).

setup() {
	srcdir=${abs_top_srcdir:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	builddir=${abs_top_builddir:-$srcdir}
}

# The folders that hold files of the tree (test data, fuzz inputs and the
# packaging's format file aside), one per line, with a trailing slash.
tree_folders() {
	if git -C "$srcdir" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$srcdir" ls-files
	else
		(cd "$srcdir" && find contrib daemon etc kernels launcher lib man plugins t -type f)
	fi | sed -n 's|/[^/]*$|/|p' | LC_ALL=C sort -u |
		grep -Ev '^(\.ci/|t/data/|t/fuzz/(corpus|regress)/|contrib/debian/source/|t/.*/work/|t/cache/|t/testcluster/)' |
		grep -Ev '/\.(deps|libs)/$' || true
}

# The folders README.md's "The tree" names, one per line.
map_folders() {
	awk '/^## The tree/ { inside = 1; next } /^## / { inside = 0 } inside' "$srcdir/README.md" |
		sed -n "s|^- \`\([^\`]*/\)\` — .*|\1|p" | LC_ALL=C sort -u
}

@test "README's tree map: one line per folder of the tree, and no line for a folder that is not there" {
	folders=$(tree_folders)
	map=$(map_folders)
	[ "$(wc -l <<<"$map")" -ge 40 ] || { echo "README.md's The tree lists only: $map"; false; }
	missing=$(LC_ALL=C comm -23 <(echo "$folders") <(echo "$map"))
	extra=$(LC_ALL=C comm -13 <(echo "$folders") <(echo "$map"))
	[ -z "$missing" ] || { echo "folders without their line in README.md's The tree:"; echo "$missing"; }
	[ -z "$extra" ] || { echo "README.md's The tree names folders the tree does not have:"; echo "$extra"; }
	[ -z "$missing$extra" ]
}

@test "contrib/source-graph: the link-time dependencies between source files have no circle and none the wrong way" {
	run "$srcdir/contrib/source-graph" --builddir "$builddir"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" 0 circles, 0 wrong-way edges"* ]]
	# it measured the tree: every program's files, with their edges
	files=$(sed -n 's/.* \([0-9]*\) files, .*/\1/p' <<<"$output")
	edges=$(sed -n 's/.* \([0-9]*\) edges, .*/\1/p' <<<"$output")
	[ "$files" -ge 150 ] && [ "$edges" -ge 500 ]
}

@test "contrib/source-graph finds a circle and an edge the wrong way when there is one" {
	# two objects that call each other, in lib/ where nothing may call up
	cd "$BATS_TEST_TMPDIR"
	git init -q tree && mkdir -p tree/lib tree/daemon tree/contrib
	cp "$srcdir/contrib/source-graph" tree/contrib/
	printf 'int b(void);\nint a(void) { return b(); }\nint up(void);\nint c(void) { return up(); }\n' >tree/lib/a.c
	printf 'int a(void);\nint b(void) { return a(); }\n' >tree/lib/b.c
	printf 'int up(void) { return 0; }\n' >tree/daemon/d.c
	(cd tree && git add . && for f in lib/a lib/b daemon/d; do cc -c "$f.c" -o "$f.o"; done)
	run tree/contrib/source-graph
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"3 files, 3 edges, 1 circles, 1 wrong-way edges"* ]]
	[[ "$output" == *"circle: lib/a.c <-> lib/b.c"* ]]
	[[ "$output" == *"wrong way: lib/a.c -> daemon/d.c"* ]]
}

@test "contrib/stale-names: no comment or document names a file the tree does not have" {
	run "$srcdir/contrib/stale-names"
	echo "$output"
	[ "$status" -eq 0 ]
}
