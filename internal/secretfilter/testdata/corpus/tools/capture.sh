#!/usr/bin/env bash
# Regenerates out/<format>/<source>: what the real tools print over each file of src/ (fake
# secrets, see fakes.py and secrets.json). The outputs are committed, so `go test` needs none of
# these tools; run this after changing src/, on Debian 12 with coreutils, xxd, bsdextrautils
# (hexdump), git, jq and python3:
#   apt-get install -y xxd bsdextrautils git jq python3 && bash capture.sh
# TestToolCorpus (toolcorpus_test.go) reads them. The formats that are not a tool's output
# (zwsp, fullwidth, homoglyph, u-escapes) are what an agent would write to hide a value; they
# are made here with python3 so that the corpus holds them too.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf out
py() { python3 -c "$1" "$2"; }
for f in src/*; do
	n=$(basename "$f")
	cap() { local format=$1; shift; mkdir -p "out/$format"; "$@" >"out/$format/$n" 2>&1 || true; }
	cap cat cat "$f"
	cap xxd xxd "$f"
	cap xxd-p xxd -p "$f"
	cap hexdump-C hexdump -C "$f"
	cap hexdump hexdump "$f"
	cap od-x od -x "$f"
	cap od-An-tx1 od -An -tx1 "$f"
	cap od-c od -c "$f"
	cap od-An-c od -An -c "$f"
	cap base64 base64 "$f"
	cap base64-w40 base64 -w 40 "$f"
	cap fold-w20 fold -w 20 "$f"
	cap paste-sd paste -sd "" "$f"
	cap cat-A cat -A "$f"
	cap git-diff git -c core.pager=cat diff --no-index --no-color /dev/null "$f"
	cap jq-Rs jq -Rs . "$f"
	case "$n" in *.json) cap jq jq . "$f" ;; esac
	# env(1) prints the environment it was given: the NAME=VALUE lines of .env and .ini files.
	case "$n" in *.env|*.ini)
		mapfile -t vars < <(grep -E '^[A-Za-z_][A-Za-z0-9_]* *= *' "$f" | sed -E 's/ *= */=/')
		cap env env -i "${vars[@]}" env ;;
	esac
	# A Python traceback whose message holds the file's content (repr: \n escaped).
	cap traceback python3 -c '
import sys
def connect(config):
    raise ConnectionError(f"could not authenticate with {config!r}")
connect(open(sys.argv[1]).read())' "$f"
	cap x-escapes sh -c 'xxd -p "$1" | tr -d "\n" | sed "s/../\\\\x&/g"' - "$f"
	cap pct-escapes sh -c 'xxd -p "$1" | tr -d "\n" | sed "s/../%&/g"' - "$f"
	cap u-escapes py 'import sys; print("".join("\\u%04x" % ord(c) for c in open(sys.argv[1]).read()))' "$f"
	# Zero-width spaces after every fourth character of each word, as an agent hides a value.
	cap zwsp py 'import re, sys; print(re.sub(r"(\S{4})(?=\S)", "\\1\u200b", open(sys.argv[1]).read()), end="")' "$f"
	cap fullwidth py 'import sys; print("".join(chr(ord(c) + 0xfee0) if "!" <= c <= "~" else c for c in open(sys.argv[1]).read()), end="")' "$f"
	cap homoglyph py 'import sys; m = str.maketrans("aceopxyABCEHKMOPTX", "асеорхуАВСЕНКМОРТХ"); print(open(sys.argv[1]).read().translate(m), end="")' "$f"
done
echo "$(find out -type f | wc -l) captured files"
