#!/usr/bin/env bash
# Run both A2A TCK generations against the TCK capsule (examples/tck) and print a summary.
#
#     scripts/a2a-tck-all.sh TCK_GIT_DIR MUR_BINARY [WORK_DIR]
#
# Each generation runs through scripts/a2a-tck.sh (its door, its virtualenv) in WORK_DIR/1.0
# and WORK_DIR/0.3 (default: a new temporary directory). The summary lists, for 1.0 (branch
# `1.0-dev`), every MUST requirement the JSON-RPC binding was tested on with PASS or FAIL (and
# the MUSTs of other bindings or never tested, as counts), then the SHOULD and MAY failures;
# for 0.3 (tag `0.3.0.beta4`), every mandatory test with its outcome, then the failures of the
# optional categories. A FAIL line carries the TCK's first error, cut to 160 characters.
# With TCK_SUMMARY_ONLY=1 nothing runs: the summary is of the runs already in WORK_DIR.
set -euo pipefail
tck_git=${1:?usage: a2a-tck-all.sh TCK_GIT_DIR MUR_BINARY [WORK_DIR]}
mur=$(realpath "${2:?usage: a2a-tck-all.sh TCK_GIT_DIR MUR_BINARY [WORK_DIR]}")
work=${3:-$(mktemp -d)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"

for g in 1.0 0.3; do
    [ "${TCK_SUMMARY_ONLY:-}" = 1 ] && break
    "$here/a2a-tck.sh" "$tck_git" "$mur" "$g" "$work/$g" >"$work/$g.out" 2>&1 || true
done

python3 - "$work" <<'EOF'
import json, os, re, sys, xml.etree.ElementTree as ET

work = sys.argv[1]

def cut(s):
    s = " ".join(str(s).split())
    return s if len(s) <= 160 else s[:157] + "..."

print("== A2A TCK 1.0 (1.0-dev), JSON-RPC binding ==")
path = os.path.join(work, "1.0", "tck", "reports", "compatibility.json")
if not os.path.exists(path):
    print(f"no report: see {work}/1.0.out")
else:
    reqs = json.load(open(path))["per_requirement"]
    must = {k: v for k, v in reqs.items() if v["level"] == "MUST"}
    tested = {k: v for k, v in must.items()
              if v["transports"].get("jsonrpc") in ("PASS", "FAIL")
              or v["transports"].get("agent_card") in ("PASS", "FAIL")}
    ok = 0
    for k, v in sorted(tested.items()):
        if v["status"] == "PASS":
            ok += 1
            print(f"  MUST {k}: PASS")
        else:
            print(f"  MUST {k}: FAIL  {cut((v['errors'] or [''])[0])}")
    skipped = sorted(k for k, v in must.items()
                     if k not in tested and v["transports"].get("jsonrpc") == "SKIPPED")
    for k in skipped:
        print(f"  MUST {k}: SKIP on JSON-RPC (the TCK skips it for what the card declares)")
    rest = len(must) - len(tested) - len(skipped)
    print(f"MUST on JSON-RPC: {ok} of {len(tested)} pass, {len(skipped)} skipped; {rest} more "
          "MUSTs not run on JSON-RPC (gRPC or HTTP+JSON only, or not tested by this TCK)")
    for level in ("SHOULD", "MAY"):
        for k, v in sorted(reqs.items()):
            if v["level"] == level and v["status"] == "FAIL":
                print(f"  {level} {k}: FAIL  {cut((v['errors'] or [''])[0])}")

print()
print("== A2A TCK 0.3 (0.3.0.beta4), JSON-RPC ==")
xmls = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(work, "0.3", "tck"))
        for f in fs if f.endswith(".xml") and "junit" in f.lower()]
log = os.path.join(work, "0.3", "tck.log")
results = {}
if xmls:
    for x in xmls:
        for tc in ET.parse(x).getroot().iter("testcase"):
            name = f"{tc.get('classname')}::{tc.get('name')}"
            out = "PASS"
            for child in tc:
                if child.tag in ("failure", "error"):
                    out = "FAIL  " + cut(child.get("message") or "")
                elif child.tag == "skipped":
                    out = "SKIP  " + cut(child.get("message") or "")
            results[name] = out
elif os.path.exists(log):
    for line in open(log, errors="replace"):
        m = re.match(r"^(tests/\S+::\S+)\s+(PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)", line)
        if m:
            word = {"PASSED": "PASS", "FAILED": "FAIL", "ERROR": "FAIL", "SKIPPED": "SKIP"}.get(m[2], m[2])
            results[m[1]] = word
if not results:
    print(f"no results: see {work}/0.3.out")
else:
    mandatory = {k: v for k, v in results.items() if "mandatory" in k}
    for k, v in sorted(mandatory.items()):
        print(f"  mandatory {k}: {v}")
    passed = sum(v == "PASS" for v in mandatory.values())
    print(f"mandatory: {passed} of {len(mandatory)} pass")
    for k, v in sorted(results.items()):
        if "mandatory" not in k and v.startswith("FAIL"):
            print(f"  optional {k}: {v}")
print()
print(f"reports and logs in {work}")
EOF
