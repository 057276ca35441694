#!/usr/bin/env bash
# Field check: run `autopilot map` and `autopilot audit` on any repository, as a new user would,
# and print a short summary (what was mapped, whether the suite ran, tests and coverage, tool
# errors, the time each step took). The JSON documents are kept for a closer look.
#
# Usage: scripts/field-check.sh REPO [--python PATH] [--out DIR] [--ref REF]
#        scripts/field-check.sh --list FILE [--work DIR] [--only NAME]...
#   --list FILE    many projects, each against the framework's own run, one row each
#                  (scripts/field_check.py, the framework's runs in scripts/field_reference.py;
#                  scripts/field-projects.txt is the rehearsal's list, the README its table)
#   --python PATH  the project's interpreter (its virtualenv's python), as `python =` in
#                  autopilot.toml would name it; default: Autopilot's isolated one
#   --out DIR      where map.json, audit.json and audit.stderr go (default: a temp directory)
# Exit status: the audit's (0 ran, 1 the suite did not run or a tool failed, 2 bad input).
set -uo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
autopilot="$here/.venv/bin/autopilot"
py="$here/.venv/bin/python"
repo="" out="" ref="HEAD"
if [ "${1:-}" = "--list" ]; then
  exec "$py" "$here/scripts/field_check.py" "$@"
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --python) export AUTOPILOT_PYTHON="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) repo="$1"; shift ;;
  esac
done
if [ -z "$repo" ]; then
  echo "usage: scripts/field-check.sh REPO [--python PATH] [--out DIR] [--ref REF]" >&2
  exit 2
fi
[ -x "$autopilot" ] || { echo "field-check: run \`make setup\` first" >&2; exit 2; }
out="${out:-$(mktemp -d /tmp/field-check.XXXXXX)}"
mkdir -p "$out"

start=$(date +%s.%N)
"$autopilot" map --repo "$repo" --json >"$out/map.json" 2>"$out/map.stderr"
map_rc=$?
mid=$(date +%s.%N)
"$autopilot" -v audit --repo "$repo" --ref "$ref" --json >"$out/audit.json" 2>"$out/audit.stderr"
audit_rc=$?
end=$(date +%s.%N)

"$py" - "$out" "$map_rc" "$audit_rc" "$start" "$mid" "$end" <<'EOF'
import json
import sys
from pathlib import Path

out, map_rc, audit_rc = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
start, mid, end = (float(x) for x in sys.argv[4:7])
print(f"== field check ({out})")
if map_rc != 0:
    print(f"map: exit {map_rc}: {(out / 'map.stderr').read_text().strip()}")
else:
    m = json.loads((out / "map.json").read_text())
    named = sum(1 for f in m["files"] if f["specs"])
    print(f"map ({mid - start:.1f}s): {m['toolchain']}, {len(m['files'])} sources, "
          f"{named} with a test by name, {len(m['untested'])} without")
    for w in m.get("warnings", []):
        print(f"  warning: {w}")
try:
    a = json.loads((out / "audit.json").read_text())
except ValueError:
    a = None
problems = [ln for ln in (out / "audit.stderr").read_text().splitlines()
            if ln.startswith("autopilot:")]
print(f"audit ({end - mid:.1f}s): exit {audit_rc}")
if a is None:
    print("  no report: " + (problems[-1] if problems else "see audit.stderr"))
    sys.exit(0)
s, t, suite = a["summary"], a["summary"]["tests"], a["suite"]
if suite["ran"]:
    print(f"  suite ran: {t['tests']} tests ({t['passed']} passed, {t['failed']} failed, "
          f"{t['errors']} errors, {t['skipped']} skipped)")
else:
    p = suite["problem"] or {}
    print(f"  SUITE DID NOT RUN ({p.get('cause', '?')}): {p.get('tool')}: {p.get('message')}")
    if p.get("hint"):
        print(f"    hint: {p['hint']}")
for path, why in suite.get("set_aside", {}).items():
    print(f"  set aside: {path}: {why}")
status = {k: sum(1 for f in a["files"] if f["status"] == k) for k in ("tested", "failing")}
evidence = sum(1 for f in a["files"] if f["status"] == "tested" and not f["specs"])
print(f"  sources {s['files']}: {status['tested']} tested ({evidence} by evidence only), "
      f"{status['failing']} failing, {s['untested']} untested; line coverage "
      f"{s['line_coverage']:.1%}")
print(f"  test files: {s['specs_passing']} passing, {s['specs_failing']} failing, "
      f"{s['specs_not_run']} ran no test")
for note in a.get("prepared", []):
    print(f"  prepared: {note}")
for error in a.get("errors", []):
    print(f"  tool error: {error}")
lint = sum(f["lint_offenses"] for f in a["files"])
print(f"  lint offences in mapped tests: {lint}")
EOF
exit "$audit_rc"
