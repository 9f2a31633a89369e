#!/usr/bin/env bash
# Runs every fuzz target in the module, one after another, each for a bounded
# time. Targets are found with `go test -list '^Fuzz'`; corpora live in each
# package's testdata/fuzz.
#
# Usage: scripts/fuzz.sh [fuzztime]    (default 5s)
set -euo pipefail

fuzztime=${1:-5s}
cd "$(dirname "$0")/.."

# `go test -list` prints each package's matching names, then "ok <package>".
listing=$(go test -list '^Fuzz' ./...)
targets=()
names=()
while read -r first second _; do
	case $first in
	Fuzz*) names+=("$first") ;;
	ok)
		for name in "${names[@]}"; do targets+=("$second $name"); done
		names=()
		;;
	*) names=() ;;
	esac
done <<<"$listing"

if ((${#targets[@]} == 0)); then
	echo "fuzz: no fuzz targets"
	exit 0
fi

failed=()
for target in "${targets[@]}"; do
	read -r pkg name <<<"$target"
	echo "fuzz: $pkg $name for $fuzztime"
	if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"; then
		failed+=("$pkg $name")
	fi
done

if ((${#failed[@]} > 0)); then
	echo "fuzz: failed:"
	printf '  %s\n' "${failed[@]}"
	exit 1
fi
echo "fuzz: ${#targets[@]} passed, 0 failed"
