#!/usr/bin/env python3
"""Issue 73's measurement: do `hlatc plan`'s printed commands compile, and
does `hlatc check` of each bundle give compile's own findings?

    tools/plan_compile_check.py [--hlatc PATH] [--only NAME ...] [--list]
                                [--keep DIR] [--report FILE]

For each search (`--list` names them):

1. `hlatc plan ARGS --top 3 --json plan.json`, and the top 3 printed
   candidates read from the JSON: those that fit, best first (the table's
   order), at most 3. A plan whose best does not fit, or that fails, is a
   failure.
2. Each candidate's `command` run with `hlatc` replaced by the binary and
   `--out build/plan` by a scratch folder, from the folder the plan ran in
   (so a relative `--config` resolves as plan printed it). Its exit status,
   wall time and pre-flight lines are recorded: the `pre-flight CHIP (SDK
   V defaults): TALLY ...` line and the `warning` lines under it.
3. `hlatc check BUNDLE --format json` and the text form. The findings, as
   (program, code, severity) with code neuronx-cc's `NCC_...` or the rule
   id in brackets, are compared: check's JSON against check's text,
   against compile's lines, and against the plan's `preflight_warnings`
   for that candidate (the counts as well as the sets). A refusal
   anywhere, a finding check reports that compile or plan did not (or the
   other way round), a bundle whose `compile_flags.json` does not name the
   plan's chip (`--target=trn2` for trn2.48xlarge, with an LNC flag), a
   chip check or compile's pre-flight used that is not the plan's, or a
   memory plan check says is over a core, is a failure.

Prints a table (search, rank, layout, compile rc and seconds, the chip the
bundle names, check's findings, agree) and `N of M commands compiled and
agreed`; exits 0 only if all agreed. A plan that fails counts 3 commands,
none agreeing. Progress goes to stderr. Python 3.11, standard library.
"""
import argparse
import collections
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP = 3
PLAN_TIMEOUT = 1800
COMPILE_TIMEOUT = 900
CHECK_TIMEOUT = 600

# A small Llama-family config.json (TinyLlama-1.1B's shapes), planned with
# `--config config.json` from the folder it is written in.
OWN_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 5632,
    "max_position_embeddings": 2048,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 22,
    "num_key_value_heads": 4,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 32000,
}

# name -> (plan arguments, whether config.json is written beside the plan)
SEARCHES = {
    "hlat-7b-trn1-1": (["--model", "hlat-7b", "--nodes", "1"], False),
    "hlat-7b-trn1-16": (["--model", "hlat-7b", "--nodes", "16"], False),
    "hlat-7b-trn1-64": (["--model", "hlat-7b", "--nodes", "64"], False),
    # As docs/src/planner.md times it.
    "hlat-70b-trn1-32": (
        ["--model", "hlat-70b", "--nodes", "32", "--precision", "bf16-master"],
        False,
    ),
    "llama3.1-8b-8k-trn1-32": (
        ["--model", "llama3.1-8b", "--seq-len", "8192", "--nodes", "32"],
        False,
    ),
    "hlat-7b-trn2-4": (
        ["--model", "hlat-7b", "--instance", "trn2.48xlarge", "--nodes", "4"],
        False,
    ),
    "hlat-7b-trn2-16": (
        ["--model", "hlat-7b", "--instance", "trn2.48xlarge", "--nodes", "16"],
        False,
    ),
    "tiny": (["--model", "tiny", "--nodes", "1"], False),
    "tiny-fp32": (["--model", "tiny", "--nodes", "1", "--precision", "fp32"], False),
    "own-config": (["--config", "config.json", "--nodes", "1"], True),
}

# A finding as plan, compile and check's text print it:
# `[PROGRAM/]model.hlo.txt[:L:C]: instruction %x: NCC_CODE (warning) ...`
# or `...: module: [rule] ...`.
FINDING_LINE = re.compile(
    r"^(?:(?P<dir>.*/))?model\.hlo\.txt(?::\d+:\d+)?: "
    r"(?:instruction %.+?|module): "
    r"(?P<code>NCC_\w+|\[[^\]]+\])(?P<warning> \(warning\))?"
)
PREFLIGHT_LINE = re.compile(
    r"^\s*pre-flight\s+(?P<chip>\S+) \(SDK (?P<sdk>\S+) defaults\): (?P<tally>.+?) in [\d.]+"
)
MULTI_DIRS = ("micro_step", "warm_up", "steady", "cool_down", "apply_step")
LNC_PREFIXES = ("--logical-nc-config", "--lnc")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(argv, cwd, timeout):
    """Runs argv; returns (rc, stdout, stderr, seconds). rc is 'timeout'
    when it ran past `timeout` (its process group is killed)."""
    t0 = time.monotonic()
    p = subprocess.Popen(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = "timeout"
    return rc, out, err, time.monotonic() - t0


def tail(text, n=3):
    lines = [l for l in (text or "").splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def expected_chip(instance):
    return "trn2" if instance.startswith("trn2") else "trn1"


def finding_key(line, default_program):
    """(program, code, severity) of a printed finding, or None."""
    m = FINDING_LINE.match(line.strip())
    if not m:
        return None
    d = (m.group("dir") or "").rstrip("/")
    # The program is the folder just above model.hlo.txt, if it is one.
    program = d.rsplit("/", 1)[-1] if d else ""
    program = program if program in MULTI_DIRS else default_program
    return (program, m.group("code"), "warning" if m.group("warning") else "refusal")


def bundle_kind(bundle):
    """The program an unprefixed compile finding belongs to: the micro
    step in an accumulation bundle (compile names only the apply step's),
    else the single program ('')."""
    return "micro_step" if os.path.isdir(os.path.join(bundle, "micro_step")) else ""


def bundle_flags(bundle):
    """{folder: compile_flags.json's list} for the bundle and its programs."""
    found = {}
    for sub in ("",) + MULTI_DIRS:
        path = os.path.join(bundle, sub, "compile_flags.json")
        if os.path.isfile(path):
            try:
                with open(path) as f:
                    found[sub or "."] = json.load(f)
            except (OSError, ValueError) as e:
                found[sub or "."] = [f"<unreadable: {e}>"]
    return found


def parse_compile(stdout):
    """The compile's pre-flight: chip, sdk, tally and its finding lines."""
    lines = stdout.splitlines()
    for i, l in enumerate(lines):
        m = PREFLIGHT_LINE.match(l)
        if not m:
            continue
        findings = []
        for w in lines[i + 1 :]:
            if not w.startswith("  warning "):
                break
            findings.append(w[len("  warning ") :].strip())
        return {
            "line": l.strip(),
            "chip": m.group("chip"),
            "sdk": m.group("sdk"),
            "tally": m.group("tally"),
            "findings": findings,
        }
    return None


def parse_check_json(text):
    """{program: [(code, severity)]}, {program: chip}, refused."""
    v = json.loads(text)
    entries = [(e["program"], e["check"]) for e in v] if isinstance(v, list) else [("", v)]
    keys, chips, refused = [], {}, False
    for program, c in entries:
        chips[program] = c.get("chip")
        refused |= bool(c.get("refused"))
        for f in c.get("findings", []):
            code = f.get("code") or f"[{f.get('rule')}]"
            keys.append((program, code, f.get("severity")))
    return keys, chips, refused


def parse_check_text(text):
    """The finding keys of check's text form, and its memory verdict."""
    keys, unparsed, program, memory = [], [], "", None
    for l in text.splitlines():
        s = l.strip()
        if s.rstrip(":") in MULTI_DIRS and s.endswith(":"):
            program = s[:-1]
            continue
        if "memory plan per rank" in s:
            memory = s
            continue
        # Per-program summaries and the bundle's verdict.
        if re.search(r": (trn\d) \(SDK ", s) or re.search(r": \d+ programs, ", s):
            continue
        if not s:
            continue
        k = finding_key(s, program)
        if k is None:
            unparsed.append(s)
        else:
            keys.append((program, k[1], k[2]))
    return keys, unparsed, memory


def show_keys(keys):
    if not keys:
        return "none"
    c = collections.Counter(keys)
    parts = []
    for (program, code, sev), n in sorted(c.items()):
        where = f"{program}:" if program else ""
        parts.append(f"{where}{code}({sev[0]})" + (f"x{n}" if n > 1 else ""))
    return " ".join(parts)


def differ(a_name, a, b_name, b):
    """A line saying how two multisets of findings differ, or None."""
    ca, cb = collections.Counter(a), collections.Counter(b)
    if ca == cb:
        return None
    only_a, only_b = ca - cb, cb - ca
    return (
        f"{a_name} has {show_keys(list(only_a.elements()))} that {b_name} does not; "
        f"{b_name} has {show_keys(list(only_b.elements()))} that {a_name} does not"
    )


def check_command(r, cand, instance, binary, cwd, bundle):
    """Compiles one candidate and checks its bundle; fills `r`."""
    argv = shlex.split(cand["command"])
    if not argv or argv[0] != "hlatc":
        r["fail"].append(f"command does not start with hlatc: {cand['command']}")
        return
    argv[0] = binary
    if "--out" not in argv[:-1]:
        r["fail"].append("command has no --out")
        return
    argv[argv.index("--out") + 1] = bundle
    r["has_chip_flag"] = "--chip" in argv
    log(f"  compile #{r['rank']} {cand['layout']}")
    rc, out, err, secs = run(argv, cwd, COMPILE_TIMEOUT)
    r["compile_rc"], r["compile_s"] = rc, secs
    pre = parse_compile(out)
    r["compile_preflight"] = pre
    if rc != 0:
        r["fail"].append(f"compile exited {rc}: {tail(err) or tail(out)}")
        return
    if pre is None:
        r["fail"].append("compile printed no pre-flight line")
        return
    default = bundle_kind(bundle)
    compile_keys, unparsed = [], []
    for l in pre["findings"]:
        k = finding_key(l, default)
        (compile_keys.append(k) if k else unparsed.append(l))
    if unparsed:
        r["fail"].append(f"compile pre-flight lines not read: {unparsed}")
    # The tally is the first program's own (micro/steady): note when the
    # lines list more than it counts.
    tally_n = sum(int(n) for n in re.findall(r"(\d+) (?:refusal|warning)", pre["tally"]))
    if tally_n != len(pre["findings"]):
        r["notes"].append(
            f"compile's pre-flight tally '{pre['tally']}' counts {tally_n}, "
            f"it lists {len(pre['findings'])} lines"
        )

    # The chip the bundle names.
    flags = bundle_flags(bundle)
    targets = sorted({f.split("=", 1)[1] for fl in flags.values() for f in fl if f.startswith("--target=")})
    lnc = sorted({f for fl in flags.values() for f in fl if f.startswith(LNC_PREFIXES)})
    r["bundle_chip"] = ",".join(targets) or "?"
    r["bundle_lnc"] = ",".join(lnc)
    want = expected_chip(instance)
    if not flags:
        r["fail"].append("the bundle has no compile_flags.json")
    elif targets != [want]:
        r["fail"].append(f"compile_flags.json names --target={r['bundle_chip']}, the plan's {instance} is {want}")
    if want == "trn2" and flags:
        missing = [d for d, fl in flags.items() if not any(f.startswith(LNC_PREFIXES) for f in fl)]
        if missing:
            r["fail"].append(f"compile_flags.json names no LNC (--logical-nc-config/--lnc) in {missing}")
    if want == "trn2" and not r["has_chip_flag"]:
        r["notes"].append("the printed command has no --chip")
    if pre["chip"] != want:
        r["fail"].append(f"compile's pre-flight ran for {pre['chip']}, the plan's instance is {want}")

    # check, JSON and text.
    log(f"  check #{r['rank']}")
    crc, cout, cerr, _ = run([binary, "check", bundle, "--format", "json"], cwd, CHECK_TIMEOUT)
    r["check_rc"] = crc
    if crc not in (0, 2):
        r["fail"].append(f"check --format json exited {crc}: {tail(cerr)}")
        return
    try:
        check_keys, chips, refused = parse_check_json(cout)
    except (ValueError, KeyError, TypeError) as e:
        r["fail"].append(f"check's JSON not read: {e}: {cout[:200]}")
        return
    r["check_findings"] = show_keys(check_keys)
    r["check_chips"] = chips
    if refused or crc == 2:
        r["fail"].append(f"check refuses it: {show_keys([k for k in check_keys if k[2] == 'refusal'])}")
    bad_chips = {p or "(step)": c for p, c in chips.items() if c != want}
    if bad_chips:
        r["fail"].append(f"check ran for {bad_chips}, the plan's instance is {want}")
    if chips and pre["chip"] not in set(chips.values()):
        r["fail"].append(f"compile's pre-flight ran for {pre['chip']}, check's for {sorted(set(chips.values()))}")
    trc, tout, terr, _ = run([binary, "check", bundle], cwd, CHECK_TIMEOUT)
    text_keys, text_unparsed, memory = parse_check_text(tout)
    r["check_memory"] = memory
    if trc != crc:
        r["fail"].append(f"check's text form exited {trc}, its JSON form {crc}")
    if text_unparsed:
        r["fail"].append(f"check text lines not read: {text_unparsed[:3]}")
    d = differ("check --format json", check_keys, "check's text", text_keys)
    if d:
        r["fail"].append(d)
    if memory and "over it" in memory:
        r["fail"].append(f"check: {memory}")

    # compile's findings, and plan's.
    d = differ("check", check_keys, "compile", compile_keys)
    if d:
        r["fail"].append(d)
    plan_keys, plan_unparsed = [], []
    for w in cand.get("preflight_warnings", []):
        k = finding_key(w, "")
        (plan_keys.append(k) if k else plan_unparsed.append(w))
    r["plan_findings"] = show_keys(plan_keys)
    if plan_unparsed:
        r["fail"].append(f"plan's preflight_warnings not read: {plan_unparsed}")
    if not cand.get("exact", True):
        r["notes"].append("plan read this candidate from stages (exact: false): no pre-flight")
    d = differ("check", check_keys, "plan", plan_keys)
    if d:
        r["fail"].append(d)


def run_search(name, binary, keep):
    args, own_config = SEARCHES[name]
    results = []
    tmp = None
    if keep:
        work = os.path.join(keep, name)
        if os.path.exists(work) and os.listdir(work):
            sys.exit(f"{work} exists and is not empty: remove it or --keep elsewhere")
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix=f"plan-check-{name}-")
        work = tmp.name
    try:
        if own_config:
            with open(os.path.join(work, "config.json"), "w") as f:
                json.dump(OWN_CONFIG, f, indent=2)
        plan_json = os.path.join(work, "plan.json")
        argv = [binary, "plan", *args, "--top", str(TOP), "--json", plan_json]
        log(f"{name}: plan {' '.join(args)}")
        rc, out, err, secs = run(argv, work, PLAN_TIMEOUT)
        log(f"{name}: plan exited {rc} in {secs:.1f} s")
        failed = lambda why: [
            {"search": name, "rank": "-", "layout": "-", "fail": [why], "notes": [], "plan_s": secs}
        ]
        if rc != 0:
            return failed(f"plan exited {rc}: {tail(err) or tail(out)}")
        with open(plan_json) as f:
            plan = json.load(f)
        instance = plan.get("instance", "trn1.32xlarge")
        # As the table prints them: those that fit, best first.
        shown = [c for c in plan["candidates"] if c.get("fits")][:TOP]
        if not shown:
            return failed("no layout fits: plan printed the least-memory ones, none of which fits")
        for k, cand in enumerate(shown, 1):
            r = {
                "search": name,
                "rank": k,
                "layout": cand["layout"],
                "command": cand["command"],
                "instance": instance,
                "fail": [],
                "notes": [],
                "plan_s": secs,
            }
            bundle = os.path.join(work, f"bundle-{k}")
            try:
                check_command(r, cand, instance, binary, work, bundle)
            except Exception as e:  # a bug here is a failure of this row, not the run
                r["fail"].append(f"script error: {type(e).__name__}: {e}")
            log(f"{name} #{k}: {'agrees' if not r['fail'] else 'FAILS: ' + r['fail'][0]}")
            results.append(r)
            if not keep:
                shutil.rmtree(bundle, ignore_errors=True)
        if len(shown) < TOP:
            results[-1]["notes"].append(f"only {len(shown)} layouts fit")
        return results
    finally:
        if tmp:
            tmp.cleanup()


def find_binary(given):
    if given:
        return os.path.abspath(given)
    for rel in ("target/release/hlatc", "target/ci/hlatc"):
        p = os.path.join(ROOT, rel)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit("no hlatc binary: build it (cargo build --release) or give --hlatc PATH")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hlatc", help="the binary [default: target/release/hlatc, else target/ci/hlatc]")
    ap.add_argument("--only", action="append", metavar="NAME", help="run this search (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the searches")
    ap.add_argument("--keep", metavar="DIR", help="keep plans and bundles under DIR/SEARCH/")
    ap.add_argument("--report", metavar="FILE", help="write every result as JSON")
    a = ap.parse_args()
    if a.list:
        for n, (args, own) in SEARCHES.items():
            print(f"{n:<24} hlatc plan {' '.join(args)}" + ("  (config.json written beside it)" if own else ""))
        return 0
    names = a.only or list(SEARCHES)
    unknown = [n for n in names if n not in SEARCHES]
    if unknown:
        sys.exit(f"unknown search {unknown} (known: {', '.join(SEARCHES)})")
    binary = find_binary(a.hlatc)
    keep = os.path.abspath(a.keep) if a.keep else None
    log(f"hlatc: {binary}")
    results = []
    for n in names:
        results.extend(run_search(n, binary, keep))

    rows = [("search", "#", "layout", "rc", "secs", "chip", "check findings", "agree")]
    for r in results:
        secs = r.get("compile_s")
        chip = r.get("bundle_chip", "-") + (f" {r['bundle_lnc']}" if r.get("bundle_lnc") else "")
        rows.append(
            (
                r["search"],
                str(r["rank"]),
                r["layout"],
                str(r.get("compile_rc", "-")),
                f"{secs:.1f}" if secs is not None else "-",
                chip,
                r.get("check_findings", "-"),
                "no" if r["fail"] else "yes",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    details = [r for r in results if r["fail"] or r["notes"]]
    if details:
        print()
    for r in details:
        print(f"{r['search']} #{r['rank']} {r['layout']}")
        if r.get("command"):
            print(f"  command: {r['command']}")
        pre = r.get("compile_preflight")
        if pre:
            print(f"  compile: {pre['line']}")
            for l in pre["findings"]:
                print(f"    {l}")
        if "plan_findings" in r:
            print(f"  plan's pre-flight: {r['plan_findings']}")
        for f in r["fail"]:
            print(f"  FAIL: {f}")
        for n in r["notes"]:
            print(f"  note: {n}")
    total = sum(TOP if r["rank"] == "-" else 1 for r in results)
    agreed = sum(1 for r in results if r["rank"] != "-" and not r["fail"])
    print(f"\n{agreed} of {total} commands compiled and agreed")
    if a.report:
        with open(a.report, "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0 if agreed == total else 1


if __name__ == "__main__":
    sys.exit(main())
