#!/bin/sh
# linux-kernel.sh: the recipe behind the measured datasets linux-kernel-code and
# linux-kernel-docs (datasets/README.md). Run by hand, not in CI: tokenizing the tree takes
# about ten minutes on one core.
#
#   datasets/recipes/linux-kernel.sh [WORKDIR]     (default: /tmp/balplan-linux-kernel)
#   datasets/recipes/linux-kernel.sh --bin WORKDIR OUTDIR
#       step 5 alone, offline: bins WORKDIR/code.lengths and WORKDIR/docs.lengths (those
#       present) into OUTDIR/linux-kernel-code.json and OUTDIR/linux-kernel-docs.json
#       (tests/scripts/test-dataset-recipes runs it on the shipped docs file's lengths)
#
# Steps, each reproducible bit for bit:
#   1. fetch Debian's linux-source-6.1 package at the pinned version (apt-get download, or the
#      snapshot.debian.org URL when the archive has moved on) and check its sha256;
#   2. unpack the kernel tarball inside it;
#   3. select files with a C-locale sort:
#        code: regular files named *.c or *.h anywhere in the tree, 1 to 1,000,000 bytes (The
#              Stack drops files over 1 MB; empty files hold no document);
#        docs: regular files under Documentation/, at least 1 byte;
#      both: symbolic links skipped, files holding a NUL byte (binary) skipped;
#   4. count tokens per file with datasets/recipes/tokenize-lengths.mjs (gpt-tokenizer,
#      cl100k_base, offline; `npm ci` in datasets/recipes/ installs it from the lock file);
#   5. bin the counts into the dataset files with datasets/recipes/lengths-to-dataset, which
#      knows nothing of the kernel: the provenance, tokenizer and licence below are passed to it.
# Only numbers leave WORKDIR: no path or text of the kernel goes into datasets/.
set -eu

VERSION=6.1.192-2
DEB=linux-source-6.1_${VERSION}_all.deb
SHA256=ae95fe63d4c553f8d0e6c86cb1ab566f3894a43743eb19ab585cd97d82f26514
# the same file on snapshot.debian.org, addressed by its sha1
SNAPSHOT=https://snapshot.debian.org/file/68f40866ca310be49762f0b2552e656eae72a14f
ENCODING=cl100k_base

# What the dataset files say about themselves (lengths-to-dataset's required texts).
CODE_PROVENANCE="Linux-kernel code: every .c and .h file of Debian's linux-source-6.1 package, \
version $VERSION (sha256 $SHA256), 1 to 1,000,000 bytes (The Stack's 1 MB file-size filter), \
symbolic links and files holding a NUL byte skipped; one document per file. Kernel files run \
longer than typical GitHub files (SlimPajama's GitHub median is about 520 tokens), so this is \
not a stand-in for GitHub"
DOCS_PROVENANCE="Linux-kernel technical prose: every file under Documentation/ of Debian's \
linux-source-6.1 package, version $VERSION (sha256 $SHA256): reStructuredText, plain text, \
devicetree YAML and a few scripts and SVG drawings; empty files, symbolic links and files \
holding a NUL byte (one GIF) skipped; one document per file"
TOKENIZER="$ENCODING (gpt-tokenizer 4.0.0)"
TOKENIZED_WITH="gpt-tokenizer 4.0.0 (npm, $ENCODING, offline; special-token text counted as \
plain text)"
LICENSE="token counts only, no kernel text or paths; the counted files are the Linux kernel's \
(GPL-2.0-only, with the per-file licenses listed in its LICENSES/ folder)"
RECIPE=datasets/recipes/linux-kernel.sh

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export LC_ALL=C TZ=UTC

die() { echo "linux-kernel.sh: error: $*" >&2; exit 1; }

# 5. one dataset file: bin_set SET NAME OUTDIR [--raw]
bin_set() {
	python3 "$here/lengths-to-dataset" --name "$2" --lengths "$work/$1.lengths" \
		-o "$3/$2.json" --tokenizer "$TOKENIZER" --tokenized-with "$TOKENIZED_WITH" \
		--license "$LICENSE" --recipe "$RECIPE" ${4:+"$4"} \
		--provenance "$(if [ "$1" = code ]; then echo "$CODE_PROVENANCE"
			else echo "$DOCS_PROVENANCE"; fi)" ||
		die "lengths-to-dataset failed for '$2'"
}

if [ "${1:-}" = --bin ]; then
	[ $# -eq 3 ] || die "usage: linux-kernel.sh --bin WORKDIR OUTDIR"
	work=$2
	found=0
	if [ -f "$work/code.lengths" ]; then bin_set code linux-kernel-code "$3"; found=1; fi
	if [ -f "$work/docs.lengths" ]; then bin_set docs linux-kernel-docs "$3" --raw; found=1; fi
	[ $found -eq 1 ] || die "no code.lengths or docs.lengths in '$work'"
	exit 0
fi
work=${1:-/tmp/balplan-linux-kernel}

[ -d "$here/node_modules/gpt-tokenizer" ] ||
	die "'gpt-tokenizer' is not installed: run 'npm ci' in '$here'"
mkdir -p "$work"
cd "$work"

# 1. the pinned package
if [ ! -f "$DEB" ]; then
	apt-get download "linux-source-6.1=$VERSION" ||
		curl -fsSLo "$DEB" "$SNAPSHOT" ||
		die "cannot fetch '$DEB' (apt-get download and snapshot.debian.org both failed)"
fi
echo "$SHA256  $DEB" | sha256sum -c - >/dev/null || die "'$DEB' does not match its sha256"

# 2. the tree
if [ ! -d linux-source-6.1 ]; then
	dpkg-deb --fsys-tarfile "$DEB" | tar -xO ./usr/src/linux-source-6.1.tar.xz |
		tar -xJf - || die "cannot unpack '$DEB'"
fi
cd linux-source-6.1

# 3. file lists (NUL-separated, sorted bytewise); binary files dropped with grep -z
has_no_nul() {
	# reads NUL-separated paths, writes those whose content holds no NUL byte
	python3 -c '
import sys
paths = sys.stdin.buffer.read().split(b"\0")
out = sys.stdout.buffer
for p in paths:
    if p and b"\0" not in open(p, "rb").read():
        out.write(p + b"\0")
'
}
find . -type f \( -name '*.c' -o -name '*.h' \) -size -1000001c ! -size 0 -print0 |
	sort -z | has_no_nul > "$work/code.list"
find ./Documentation -type f ! -size 0 -print0 | sort -z | has_no_nul > "$work/docs.list"
echo "linux-kernel.sh: $(tr -cd '\0' < "$work/code.list" | wc -c) code files," \
     "$(tr -cd '\0' < "$work/docs.list" | wc -c) documentation files" >&2

# 4. token counts, one per line in list order
for set in code docs; do
	node "$here/tokenize-lengths.mjs" "$ENCODING" < "$work/$set.list" > "$work/$set.lengths.tmp"
	mv "$work/$set.lengths.tmp" "$work/$set.lengths"
done

# 5. the dataset files
bin_set code linux-kernel-code "$repo/datasets"
bin_set docs linux-kernel-docs "$repo/datasets" --raw
sha256sum "$work/code.lengths" "$work/docs.lengths" | sed "s|$work/||" >&2
