#!/usr/bin/env python3
"""Try hlatc as a new user would, from its docs, and classify each case.

    tools/new_user_trial.py [--hlatc BIN] [--python PY] [--work DIR] [--only AREA,...]

Each case runs one `hlatc` command or one Python snippet (in a subprocess,
bounded by a timeout) and compares what happened with what README.md and
docs/src/{cli,python,data,planner,pipeline}.md say should happen:

  ok             as documented: the documented result, or a refusal whose
                 message names the flag / argument / field / file at fault
  silent-wrong   exit 0 (no exception) but the result is wrong, or a wrong
                 request was accepted
  unclear        refused, but without naming what is wrong; a builtin
                 exception where python.md promises an hlatc.Error; a
                 traceback or panic text in a refusal
  docs-disagree  a documented flag or example that does not exist or fails
  crash          a signal, a panic, a timeout

Prints one line per non-ok case (`VERDICT area name: detail`), the counts
per area and verdict, and last `N passed, M failed`. Writes WORK/report.json
with every case. Exits 1 on any non-ok case.
"""
import argparse
import csv
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = os.path.join(ROOT, "tests/fixtures/tokenizer-words.json")
PLUGIN = os.path.join(ROOT, ".cache/jax-pjrt-cpu/lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so")
DOCS = os.path.join(ROOT, "docs/src")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--hlatc", default="/tmp/trial/hlatc")
ap.add_argument("--python", default="/tmp/trial/venv/bin/python")
ap.add_argument("--work", default="/tmp/trial/work")
ap.add_argument("--only", default="", help="comma-separated areas to run (default: all)")
ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (at most 60)")
ARGS = ap.parse_args()
BIN = os.path.abspath(ARGS.hlatc)
PY = ARGS.python if os.sep not in ARGS.python else os.path.abspath(ARGS.python)
WORK = os.path.abspath(ARGS.work)
ONLY = set(a for a in ARGS.only.split(",") if a)
TIMEOUT = min(ARGS.timeout, 60.0)

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

ENV = dict(os.environ)
if os.path.exists(PLUGIN) and not ENV.get("HLATC_PJRT_PLUGIN"):
    ENV["HLATC_PJRT_PLUGIN"] = PLUGIN
ENV.setdefault("RUST_BACKTRACE", "0")

CASES = []
START = time.time()


class R:
    """One subprocess's result."""

    def __init__(self, cmd, rc, out, err, secs, timed_out=False):
        self.cmd, self.rc, self.out, self.err, self.secs, self.timed_out = cmd, rc, out, err, secs, timed_out

    @property
    def text(self):
        return self.out + "\n" + self.err

    def tail(self, n=300):
        t = (self.err.strip() or self.out.strip())
        return t[-n:].replace("\n", " | ")


def run(args, timeout=None, cwd=None, stdin=None):
    """Run hlatc with args (a list, or a string split by shlex)."""
    if isinstance(args, str):
        args = shlex.split(args)
    cmd = [BIN] + [str(a) for a in args]
    return _sub(cmd, timeout, cwd, stdin)


def _sub(cmd, timeout, cwd, stdin=None):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout or TIMEOUT,
                           cwd=cwd or WORK, env=ENV, input=stdin, errors="replace")
        return R(cmd, p.returncode, p.stdout, p.stderr, time.time() - t0)
    except subprocess.TimeoutExpired as e:
        def s(x):
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        return R(cmd, None, s(e.stdout), s(e.stderr), time.time() - t0, timed_out=True)


PY_PRELUDE = r'''
import json, sys, os, traceback
import hlatc
def _exc(e):
    d = {"raised": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
         "hlatc": isinstance(e, getattr(hlatc, "Error", ())), "msg": str(e)[:600]}
    for f in ("argument", "key", "path", "field", "fields", "setting", "input"):
        if hasattr(e, f):
            v = getattr(e, f)
            try:
                json.dumps(v); d[f] = v
            except Exception:
                d[f] = repr(v)
    return d
def probe(fn):
    """Call fn; print one JSON line with its result or its exception."""
    try:
        v = fn()
        try:
            json.dumps(v)
        except Exception:
            v = repr(v)[:600]
        print("@@RESULT " + json.dumps({"raised": None, "value": v}))
    except BaseException as e:
        print("@@RESULT " + json.dumps(_exc(e)))
def emit(v):
    print("@@RESULT " + json.dumps({"raised": None, "value": v}))
'''


def pyrun(snippet, timeout=None):
    """Run a Python snippet (after PY_PRELUDE) in a subprocess; returns (R, result dict or None)."""
    src = PY_PRELUDE + "\n" + textwrap.dedent(snippet)
    r = _sub([PY, "-c", src], timeout, WORK)
    res = None
    for line in r.out.splitlines():
        if line.startswith("@@RESULT "):
            res = json.loads(line[len("@@RESULT "):])
    return r, res


def record(area, name, verdict, detail="", cmd=None):
    if isinstance(cmd, list):
        cmd = " ".join(shlex.quote(str(c)) for c in cmd)
    CASES.append({"area": area, "name": name, "verdict": verdict, "detail": detail.strip()[:800],
                  "cmd": cmd})
    if verdict != "ok":
        print(f"{verdict} {area} {name}: {detail.strip()[:400]}", flush=True)


def crashed(r):
    """A crash verdict's detail, or None."""
    if r.timed_out:
        return f"timeout after {r.secs:.0f} s"
    if r.rc is not None and r.rc < 0:
        return f"killed by signal {-r.rc}: {r.tail()}"
    if "panicked" in r.text or "RUST_BACKTRACE" in r.err:
        return f"panic: {r.tail()}"
    if r.rc not in (0, 1, 2):
        return f"exit status {r.rc}: {r.tail()}"
    return None


def cli_accept(area, name, args, check=None, **kw):
    """A command that must succeed; check(r) returns None (fine) or (verdict, detail)."""
    r = run(args, **kw)
    c = crashed(r)
    if c:
        record(area, name, "crash", c, r.cmd)
    elif r.rc != 0:
        record(area, name, kw.pop("fail_verdict", "docs-disagree"), f"refused: {r.tail()}", r.cmd)
    else:
        v = check(r) if check else None
        if v:
            record(area, name, v[0], v[1], r.cmd)
        else:
            record(area, name, "ok", "", r.cmd)
    return r


def cli_refuse(area, name, args, names, **kw):
    """A command that must be refused with a message naming one of `names`."""
    r = run(args, **kw)
    judge_refusal(area, name, r, names)
    return r


def judge_refusal(area, name, r, names):
    c = crashed(r)
    if c:
        record(area, name, "crash", c, r.cmd)
        return
    if r.rc == 0:
        record(area, name, "silent-wrong", f"accepted (exit 0): {r.out.strip()[-200:]}", r.cmd)
        return
    low = r.err.lower()
    if isinstance(names, str):
        names = [names]
    if "traceback" in low:
        record(area, name, "unclear", f"traceback text: {r.tail()}", r.cmd)
    elif any(n.lower() in low or n.lower().lstrip("-").replace("-", "_") in low for n in names):
        record(area, name, "ok", r.tail(200), r.cmd)
    else:
        record(area, name, "unclear", f"refused without naming {names}: {r.tail()}", r.cmd)


def area_enabled(a):
    return not ONLY or a in ONLY


def write(path, data):
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return path


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_metrics(path):
    with open(path) as f:
        return [row for row in csv.DictReader(f)]


def losses(path):
    return [float(r["loss"]) for r in read_metrics(path)]


# ---------------------------------------------------------------- area: docs

def help_flags(sub):
    r = run([sub, "--help"], timeout=30)
    return set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z0-9][a-z0-9-]*)", r.out)), r


def doc_table_flags():
    """{subcommand: set of flags} from the option tables of docs/src/cli.md."""
    text = open(os.path.join(DOCS, "cli.md")).read()
    subs, out = [], {}
    for line in text.splitlines():
        if line.startswith("## ") or line.startswith("### "):
            heading = line.lstrip("#").strip()
            if heading.startswith("Options shared by"):
                subs = ["compile", "train"]
            elif heading.startswith("Errors"):
                subs = []
            else:
                subs = re.findall(r"`([a-z]+)`", heading)
                # "run, fmt, convert, opt" introduces the ### sections; their own tables follow
                if heading.startswith("`run`, `fmt`"):
                    subs = []
        elif line.startswith("| `") and subs:
            first = line.split("|")[1]
            for f in re.findall(r"`(--[a-z0-9][a-z0-9-]*)", first):
                for s in subs:
                    out.setdefault(s, set()).add(f)
    return out


def area_docs():
    A = "docs"
    tables = doc_table_flags()
    cli_text = open(os.path.join(DOCS, "cli.md")).read()
    for sub in sorted(tables):
        hf, r = help_flags(sub)
        if r.rc != 0:
            record(A, f"help-{sub}", "docs-disagree", f"`hlatc {sub} --help` fails: {r.tail()}", r.cmd)
            continue
        missing = sorted(f for f in tables[sub] if f not in hf)
        record(A, f"{sub}: cli.md table flags exist in --help", "docs-disagree" if missing else "ok",
               f"cli.md's table lists {missing} for `{sub}`; `hlatc {sub} --help` has no such flag" if missing
               else f"{len(tables[sub])} flags", r.cmd)
        undoc = sorted(f for f in hf - {"--help", "--version"} if f not in tables[sub])
        detail = "; ".join(f"{f}" + (" (only in prose)" if f in cli_text else " (never in cli.md)") for f in undoc)
        record(A, f"{sub}: --help flags are in cli.md's table", "docs-disagree" if undoc else "ok",
               f"`hlatc {sub} --help` has flags missing from cli.md's {sub} table: {detail}" if undoc
               else f"{len(hf)} flags", r.cmd)


def area_docs_synopsis():
    """cli.md's synopsis table (one row per subcommand): every flag it shows exists in that --help."""
    A = "docs"
    for line in open(os.path.join(DOCS, "cli.md")).read().splitlines()[:30]:
        m = re.match(r"\| `hlatc (\w+)(.*?)` \|", line)
        if not m:
            continue
        sub, rest = m.group(1), m.group(2)
        flags = set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", rest))
        hf, r = help_flags(sub)
        missing = sorted(flags - hf)
        record(A, f"synopsis {sub}: flags exist", "docs-disagree" if missing else "ok",
               f"cli.md's synopsis of `hlatc {sub}` shows {missing}, not in `hlatc {sub} --help`" if missing
               else f"{len(flags)} flags", r.cmd)


def docs_links():
    """Relative links to .md files in README.md and docs/src: (source, target, exists)."""
    out = []
    files = [os.path.join(ROOT, "README.md")] + sorted(
        os.path.join(DOCS, f) for f in os.listdir(DOCS) if f.endswith(".md"))
    for f in files:
        for target in set(re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", open(f).read())):
            path = os.path.normpath(os.path.join(os.path.dirname(f), target))
            out.append((os.path.relpath(f, ROOT), target, os.path.exists(path)))
    return out


def area_docs_runnable():
    A = "docs"
    for src, target, exists in docs_links():
        if not exists:
            record(A, f"link {src} -> {target}", "docs-disagree", f"{src} links {target}, which does not exist")
    record(A, "links resolve (the rest)", "ok", f"{sum(1 for l in docs_links() if l[2])} links checked")
    d = os.path.join(WORK, "docs-run")
    os.makedirs(os.path.join(d, "data"))
    shutil.copy(TOK, os.path.join(d, "tokenizer.json"))
    make_corpus(os.path.join(d, "data", "a.jsonl"), 60)
    make_corpus(os.path.join(d, "data", "b.jsonl"), 40)
    cfg = os.path.join(ROOT, "tests/fixtures/parity/tiny/config.json")
    if os.path.exists(cfg):
        shutil.copy(cfg, os.path.join(d, "config.json"))

    def curve(csvname, first=None, last_below=None, rows=None):
        def chk(r):
            p = os.path.join(d, csvname)
            if not os.path.exists(p):
                return ("silent-wrong", f"{csvname} not written")
            ls = losses(p)
            if rows and len(ls) != rows:
                return ("silent-wrong", f"{len(ls)} rows, not {rows}")
            if first is not None and abs(ls[0] - first) > 0.01:
                return ("docs-disagree", f"first loss {ls[0]:.4f}, the docs say {first}")
            if last_below is not None and ls[-1] > last_below:
                return ("docs-disagree", f"last loss {ls[-1]:.4f}, the docs say below {last_below}")
            return None
        return chk

    def exists(*paths):
        return lambda r: None if all(os.path.exists(os.path.join(d, p)) for p in paths) else \
            ("silent-wrong", f"missing {[p for p in paths if not os.path.exists(os.path.join(d, p))]}")

    cmds = [
        ("README train tiny 100 + plot", "train --model tiny --steps 100 --metrics run.csv --plot loss.png",
         lambda r: curve("run.csv", 4.17, 0.05, 100)(r) or exists("loss.png")(r)),
        ("README corpus + checkpoint-dir", "train --corpus 'data/*.jsonl' --tokenizer tokenizer.json --checkpoint-dir ckpt",
         exists("ckpt/step-00000100/COMPLETE")),
        ("README corpus again resumes", "train --corpus 'data/*.jsonl' --tokenizer tokenizer.json --checkpoint-dir ckpt",
         lambda r: None if "step 100" in r.text or "resum" in r.text.lower() else ("unclear", f"no word of resuming: {r.tail(200)}")),
        ("README tp2 dp2 fp32", "train --model tiny --tp 2 --dp 2 --steps 50 --precision fp32", None),
        ("README compile 7b jax", "compile --model hlat-7b --tp 8 --sequence-parallel --dp 4 --zero1 --precision bf16-master "
         "--spmd partitions --out build/hlat-7b-jax", exists("build/hlat-7b-jax/manifest.json")),
        ("README compile 8b 8k blocked", "compile --model llama3.1-8b --seq-len 8192 --tp 32 --sequence-parallel "
         "--kernel attention=blocked --out build/8b-8k", exists("build/8b-8k/manifest.json")),
        ("README tiny-moe", "train --model tiny-moe --steps 200", None),
        ("README plan 70b", "plan --model hlat-70b --nodes 32 --global-batch 1024 --precision bf16-master", None),
        ("pipeline.md compile 70b pp", "compile --model hlat-70b --tp 32 --pp 8 --dp 8 --sequence-parallel --zero1 "
         "--precision bf16-master --batch-size 1024 --grad-accum 128 --out build/hlat-70b-pp",
         exists("build/hlat-70b-pp/manifest.json")),
        ("pipeline.md train pp2 tp2", "train --model tiny --pp 2 --tp 2 --grad-accum 2", None),
        ("planner.md plan 7b layout", "plan --model hlat-7b --nodes 16 --layout tp=8,dp=64,sp,zero1,remat=core-attention", None),
        ("planner.md plan config trn1n", "plan --config config.json --instance trn1n.32xlarge --nodes 8 --price 21.50 "
         "--plot plan.png --json plan.json", exists("plan.png", "plan.json")),
        ("planner.md report predict", f"plan --report --predict {ROOT}/data/planner/published-trn1.csv", None),
        ("planner.md calibration", f"plan --model hlat-7b --nodes 16 --layout tp=8,dp=64,sp,zero1 "
         f"--calibration {ROOT}/data/planner/published-trn1.csv", None),
        ("cli.md compile tiny --verify", "compile --model tiny --out build/tiny --verify", exists("build/tiny/manifest.json")),
        ("cli.md compile config", "compile --config config.json --out build/m", exists("build/m/manifest.json")),
        ("cli.md train --metrics --plot (defaults)", "train --metrics run2.csv --plot loss2.png",
         lambda r: curve("run2.csv", 4.17, 0.05, 100)(r) or exists("loss2.png")(r)),
        ("cli.md train fp32 metrics", "train --precision fp32 --metrics fp32.csv", curve("fp32.csv", None, None, 100)),
        ("cli.md train mixed metrics", "train --precision bf16-mixed --metrics mixed.csv", curve("mixed.csv", None, None, 100)),
        ("cli.md plot two", "plot fp32.csv mixed.csv --out loss3.png --title 'tiny, 100 steps'", exists("loss3.png")),
        ("cli.md check bundle", "check build/tiny", None),
        ("cli.md check text trn2", "check build/tiny/model.hlo.txt --target trn2", None),
        ("cli.md check proto trn2", "check build/tiny/model.hlo_module.pb --target trn2", None),
        ("cli.md check pp bundle", "check build/hlat-70b-pp", None),
        ("cli.md check sdk next json", "check build/tiny/model.hlo.txt --sdk next --format json",
         lambda r: None if r.out.strip().startswith(("[", "{")) else ("silent-wrong", "not JSON")),
        ("cli.md check rules", "check --rules --target trn2", None),
        ("cli.md fmt", "fmt build/tiny/model.hlo.txt", lambda r: None if "HloModule" in r.out else ("silent-wrong", "no HloModule")),
        ("cli.md convert pb to txt", "convert build/tiny/model.hlo_module.pb -o m.txt", exists("m.txt")),
        ("cli.md convert txt to pb", "convert m.txt -o m2.pb", exists("m2.pb")),
        ("cli.md opt passes", "opt m.txt --passes=cse,dce", lambda r: None if "HloModule" in r.out else ("silent-wrong", "no module printed")),
        ("cli.md passes", "passes", lambda r: None if "cse" in r.out else ("silent-wrong", "no cse")),
        ("cli.md run bundle", "run build/tiny", None),
        ("help shard example", "train --model tiny --steps 3 --save-state state.st", exists("state.st")),
        ("help shard state", "shard state.st --model tiny --tp 2 --dp 2 --zero1 --out ranks/", exists("ranks/rank-00003.safetensors")),
        ("help unshard", "unshard ranks/ --model tiny --tp 2 --dp 2 --zero1 --out state2.st",
         lambda r: None if sha256(os.path.join(d, "state2.st")) == sha256(os.path.join(d, "state.st"))
         else ("silent-wrong", "round trip not byte-identical")),
        ("help shard example as printed (no --model)", "shard state.st --tp 2 --dp 2 --zero1 --out ranks3/", None),
        ("data.md config corpus checkpoint-every", "train --config config.json --corpus 'data/*.jsonl' --tokenizer tokenizer.json "
         "--steps 30 --checkpoint-dir ckpt2 --checkpoint-every 10", exists("ckpt2/step-00000030/COMPLETE")),
    ]
    for name, cmd, chk in cmds:
        r = run(cmd, cwd=d)
        c = crashed(r)
        if c:
            record(A, name, "crash", c, r.cmd)
        elif r.rc not in (0, 2) or (r.rc == 2 and not cmd.startswith("check")):
            record(A, name, "docs-disagree", f"documented command fails (exit {r.rc}): {r.tail()}", r.cmd)
        else:
            v = chk(r) if chk else None
            record(A, name, v[0] if v else "ok", v[1] if v else "", r.cmd)
    ex = os.path.join(ROOT, "examples", "train_tiny.py")
    if os.path.exists(ex):
        r = _sub([PY, ex], 60, d)
        nums = [float(x) for x in re.findall(r"loss\D{0,20}?(\d+\.\d+)", r.text)]
        c = crashed(r)
        if c or r.rc != 0:
            record(A, "examples/train_tiny.py", "crash" if c else "docs-disagree", c or r.tail(), r.cmd)
        elif nums and nums[-1] < 0.1:
            record(A, "examples/train_tiny.py", "ok", f"last loss {nums[-1]}", r.cmd)
        else:
            record(A, "examples/train_tiny.py", "unclear", f"could not see a final loss below 0.1: {r.tail(200)}", r.cmd)


# ---------------------------------------------------------------- area: plan

def parse_plan(text):
    """[(layout, memory string, fits bool, command)] from `hlatc plan`'s text."""
    out = []
    for m in re.finditer(r"(?m)^(\d+)\. (\S+)\n((?:   .*\n?)+)", text):
        body = m.group(3)
        mem = re.search(r"memory per rank ([\d.]+ \w+) \(([^)]*)\)", body)
        cmd = re.search(r"(?m)^\s+(hlatc compile .*)$", body)
        out.append({"layout": m.group(2), "memory": mem.group(1) if mem else None,
                    "fits": (mem.group(2) == "fits") if mem else None,
                    "command": cmd.group(1).strip() if cmd else None})
    return out


PLAN_SEARCHES = [
    # (name, model, instance, nodes, extra flags)
    ("tiny-trn1-1", "tiny", "trn1.32xlarge", 1, []),
    ("tiny-trn1-2", "tiny", "trn1.32xlarge", 2, ["--global-batch", "256"]),
    ("tiny-trn2-1", "tiny", "trn2.48xlarge", 1, ["--precision", "fp32"]),
    ("7b-trn1-1", "hlat-7b", "trn1.32xlarge", 1, ["--precision", "bf16-master"]),
    ("7b-trn2-1", "hlat-7b", "trn2.48xlarge", 1, ["--precision", "bf16-master", "--global-batch", "256"]),
    ("70b-trn1-32", "hlat-70b", "trn1.32xlarge", 32, ["--precision", "bf16-master"]),
    ("7b-trn1-16-layout", "hlat-7b", "trn1.32xlarge", 16, ["--layout", "tp=8,dp=64,sp,zero1,remat=core-attention"]),
    ("70b-trn1-32-layout", "hlat-70b", "trn1.32xlarge", 32,
     ["--precision", "bf16-master", "--layout", "tp=32,pp=4,dp=8,sp,zero1,remat=core-attention,micro_batch=1"]),
    ("70b-trn2-8-layout", "hlat-70b", "trn2.48xlarge", 8, ["--layout", "tp=16,pp=4,dp=8,sp,zero1,precision=bf16-master"]),
]


def py_plan_kwargs(model, instance, nodes, extra):
    kw = {"model": model, "instance": instance, "nodes": nodes, "top": 3}
    it = iter(extra)
    for flag in it:
        val = next(it)
        key = flag[2:].replace("-", "_")
        kw[key] = int(val) if key in ("global_batch", "seq_len") else val
    return kw


def area_plan():
    A = "plan"
    for name, model, inst, nodes, extra in PLAN_SEARCHES:
        jpath = os.path.join(WORK, f"plan-{name}.json")
        args = ["plan", "--model", model, "--instance", inst, "--nodes", nodes, "--top", 3, "--json", jpath] + extra
        r = run(args)
        c = crashed(r)
        if c or r.rc != 0:
            record(A, f"{name} search", "crash" if c else "docs-disagree", c or f"refused: {r.tail()}", r.cmd)
            continue
        shown = parse_plan(r.out)
        if not shown or any(s["command"] is None or s["fits"] is None for s in shown):
            record(A, f"{name} search", "unclear", f"could not read the printed layouts: {r.out[-400:]}", r.cmd)
            continue
        record(A, f"{name} search", "ok", f"{len(shown)} layouts printed", r.cmd)
        # --json agrees with the text
        try:
            j = json.load(open(jpath))
            cands = j["candidates"]
            bad = []
            for i, s in enumerate(shown):
                jc = next((c for c in cands if c["layout"] == s["layout"]), None)
                if jc is None:
                    bad.append(f"{s['layout']} printed, not in --json")
                    continue
                if jc["fits"] != s["fits"]:
                    bad.append(f"{s['layout']}: fits {s['fits']} in text, {jc['fits']} in json")
                if jc["command"] != s["command"]:
                    bad.append(f"{s['layout']}: command differs: {jc['command']!r} vs {s['command']!r}")
            order = [c["layout"] for c in cands[:len(shown)]]
            if order != [s["layout"] for s in shown]:
                bad.append(f"json order {order} != text order {[s['layout'] for s in shown]}")
            record(A, f"{name} json-agrees", "silent-wrong" if bad else "ok", "; ".join(bad), r.cmd)
        except Exception as e:
            record(A, f"{name} json-agrees", "unclear", f"--json unreadable: {e}", r.cmd)
        # each printed command compiles, and check agrees on fit
        for i, s in enumerate(shown):
            out = os.path.join(WORK, f"plan-{name}-{i + 1}")
            argv = shlex.split(s["command"])
            if argv[:2] != ["hlatc", "compile"] or "--out" not in argv:
                record(A, f"{name} #{i + 1} command-form", "docs-disagree", f"not an `hlatc compile ... --out` line: {s['command']}")
                continue
            argv[argv.index("--out") + 1] = out
            rc = run(argv[1:])
            c = crashed(rc)
            if not c and not s["fits"]:
                # a layout plan says does not fit: compile refuses it by its memory plan, naming --device-memory
                judge_refusal(A, f"{name} #{i + 1} compile (does not fit)", rc, ["--device-memory", "device memory"])
                continue
            if c or rc.rc != 0:
                record(A, f"{name} #{i + 1} compile", "crash" if c else "silent-wrong",
                       (c or f"plan printed a command that compile refuses: {rc.tail()}") + f" [layout {s['layout']}]", rc.cmd)
                continue
            record(A, f"{name} #{i + 1} compile", "ok", "", rc.cmd)
            rk = run(["check", out])
            c = crashed(rk)
            m = re.search(r"memory plan per rank ([\d.]+ \w+) .*: (fits|does not fit)", rk.text)
            if c:
                record(A, f"{name} #{i + 1} check-fit", "crash", c, rk.cmd)
            elif not m:
                record(A, f"{name} #{i + 1} check-fit", "unclear", f"check says nothing of the memory plan (rc {rk.rc}): {rk.tail()}", rk.cmd)
            else:
                cfits = m.group(2) == "fits"
                bad = []
                if cfits != s["fits"]:
                    bad.append(f"plan says fits={s['fits']}, check says {m.group(0)}")
                if m.group(1) != s["memory"]:
                    bad.append(f"plan's memory per rank {s['memory']}, check's {m.group(1)}")
                if cfits and rk.rc != 0:
                    bad.append(f"check exit {rk.rc} on a bundle that fits: {rk.tail()}")
                record(A, f"{name} #{i + 1} check-fit", "silent-wrong" if bad else "ok", "; ".join(bad), rk.cmd)
        # Python picks the same
        kw = py_plan_kwargs(model, inst, nodes, extra)
        pr, res = pyrun(f"""
            p = hlatc.plan(**{kw!r})
            b = p.best()
            emit({{"best": b.layout if b else None, "command": b.command if b else None,
                   "top": [c.layout for c in p.candidates[:{len(shown)}]]}})
        """)
        c = crashed(pr)
        if c or res is None:
            record(A, f"{name} python-same", "crash", c or pr.tail(), f"hlatc.plan(**{kw!r})")
        elif res.get("raised"):
            record(A, f"{name} python-same", "docs-disagree", f"hlatc.plan(**{kw!r}) raised {res['raised']}: {res['msg']}")
        else:
            v = res["value"]
            bad = []
            cli_best = next((s for s in shown if s["fits"]), None)
            if (cli_best or {}).get("layout") != v["best"]:
                bad.append(f"CLI best {cli_best and cli_best['layout']}, Python best {v['best']}")
            if v["top"] != [s["layout"] for s in shown]:
                bad.append(f"CLI top {[s['layout'] for s in shown]}, Python {v['top']}")
            if cli_best and v["command"] != cli_best["command"]:
                bad.append(f"commands differ: {v['command']!r} vs {cli_best['command']!r}")
            record(A, f"{name} python-same", "silent-wrong" if bad else "ok", "; ".join(bad), f"hlatc.plan(**{kw!r})")

    # bad arguments: refused before any search, naming the flag
    base = ["plan", "--model", "tiny"]
    bad = [
        (["--nodes", "0"], "--nodes"), (["--nodes", "-1"], "--nodes"), (["--nodes", "nan"], "--nodes"),
        (["--nodes", "99999999999999999999"], "--nodes"), (["--nodes", "1.5"], "--nodes"),
        (["--global-batch", "0"], "--global-batch"), (["--global-batch", "-4"], "--global-batch"),
        (["--global-batch", "nan"], "--global-batch"),
        (["--seq-len", "0"], "--seq-len"), (["--seq-len", "-16"], "--seq-len"),
        (["--top", "0"], "--top"), (["--top", "-1"], "--top"),
        (["--price", "-1"], "--price"), (["--price", "0"], "--price"), (["--price", "nan"], "--price"),
        (["--price", "inf"], "--price"), (["--price", "abc"], "--price"),
        (["--precision", "fp64"], ["--precision", "fp64"]), (["--precision", "bf17"], ["--precision", "bf17"]),
        (["--precision", ""], "--precision"),
        (["--instance", "trn3.1xlarge"], ["--instance", "trn3"]), (["--threads", "-1"], "--threads"),
        (["--model", "nope"], ["--model", "nope"]),
        (["--calibration", "missing.csv"], "missing.csv"), (["--predict", "missing.csv"], "missing.csv"),
        (["--json", "no/such/dir/p.json"], ["no/such/dir", "--json"]),
        (["--plot", "no/such/dir/p.png"], ["no/such/dir", "--plot"]),
        (["--layout", ""], ["--layout", "empty"]), (["--layout", "tp=2,,dp=1"], ["--layout", "empty"]),
        (["--layout", "tp=0"], ["tp"]), (["--layout", "tp=-1"], ["tp"]), (["--layout", "tp=x"], ["tp"]),
        (["--layout", "foo=1"], ["foo"]), (["--layout", "tp=2,tp=4"], ["tp"]),
        (["--layout", "sp,sequence_parallel"], ["sp", "sequence_parallel"]),
        (["--layout", "tp=1,remat=bogus"], ["remat", "bogus"]),
        (["--layout", "tp=1,precision=fp64"], ["fp64", "precision"]),
        (["--layout", "tp=1,precision=int8"], ["precision", "int8"]),
        (["--layout", "tp=1,micro_batch=0"], ["micro_batch"]),
        (["--layout", "tp=64"], ["tp", "core", "cluster"]),
        (["--layout", "tp=3"], ["tp", "head", "divid"]),
        (["--layout", "tp=1,pp=3"], ["pp", "layer"]),
        (["--layout", "tp=1,dp=7"], ["dp", "cluster", "fill"]),
        (["--layout", "tp=1,dp=32,micro_batch=3"], ["micro_batch", "global batch", "divid"]),
        (["--layout", "tp=32,dp=1,zero1"], ["zero1", "dp"], "hlat-7b"),
        (["--layout", "tp=1,sp"], ["sp", "tp"]),
        (["--layout", "tp=1,attention=bogus"], ["attention", "bogus"]),
        (["--kernel", "attention=bogus"], ["attention", "bogus", "--kernel"]),
        (["--kernel", "nope=hlo"], ["nope", "--kernel"]),
    ]
    for case in bad:
        extra, names = case[:2]
        b = ["plan", "--model", case[2]] if len(case) > 2 else base
        cli_refuse(A, "refuse " + " ".join(b[2:] + extra), b + extra, names)
    # Python refuses what the CLI refuses, naming the keyword
    py_bad = [
        ({"nodes": 0}, "nodes"), ({"nodes": -1}, "nodes"), ({"global_batch": 0}, "global_batch"),
        ({"price": -1.0}, "price"), ({"price": float("nan")}, "price"), ({"top": 0}, "top"),
        ({"precision": "fp64"}, "precision"), ({"layout": "tp=2,tp=4"}, "layout"),
        ({"layout": ""}, "layout"), ({"nodes": "2"}, "nodes"), ({"seq_len": 0}, "seq_len"),
        ({"instance": "trn3.1xlarge"}, "instance"),
    ]
    for kw, argname in py_bad:
        kw = dict({"model": "tiny"}, **kw)
        src = repr(kw).replace(": nan", ": float('nan')")
        py_expect_error(A, f"py-refuse plan({kw})", f"hlatc.plan(**{src})", argname)


def py_expect_error(area, name, expr, argument, classes=None, need_argument_attr=True, setup=""):
    """expr must raise an hlatc.Error subclass whose message (and .argument, where promised) names `argument`."""
    src = setup + "\nprobe(lambda: " + expr + ")\n"
    pr, res = pyrun(src)
    c = crashed(pr)
    if c and res is None:
        record(area, name, "crash", c, expr)
        return res
    if res is None:
        record(area, name, "crash", f"no result: {pr.tail()}", expr)
        return res
    if not res.get("raised"):
        record(area, name, "silent-wrong", f"no exception; returned {str(res.get('value'))[:200]}", expr)
        return res
    names = argument if isinstance(argument, list) else [argument]
    if res["raised"] == "InternalError":
        record(area, name, "crash", f"InternalError (a Rust panic, by python.md): {res['msg'][:300]}", expr)
        return res
    if not res["hlatc"]:
        record(area, name, "unclear", f"builtin {res['raised']} (not an hlatc.Error): {res['msg'][:300]}", expr)
        return res
    if classes and not any(k in res["mro"] for k in classes):
        record(area, name, "unclear", f"{res['raised']} where python.md promises {classes}: {res['msg'][:300]}", expr)
        return res
    low = res["msg"].lower()
    in_msg = any(n.lower() in low or n.lower().replace("_", "-") in low
                 or res.get("argument") == n or res.get("key") == n for n in names)
    attr = res.get("argument")
    attr_ok = (not need_argument_attr) or attr in names or any(n == attr for n in names) \
        or ("UsageError" not in res["mro"])
    if not in_msg:
        record(area, name, "unclear", f"{res['raised']} not naming {names}: {res['msg'][:300]}", expr)
    elif not attr_ok:
        record(area, name, "unclear", f"{res['raised']}.argument is {attr!r}, not {names[0]!r}: {res['msg'][:200]}", expr)
    else:
        record(area, name, "ok", f"{res['raised']}: {res['msg'][:150]}", expr)
    return res


# ---------------------------------------------------------------- area: python

WORDS = ["the cat sat on the mat", "a dog ran under the tree", "the bird flew over a fish"]


def make_corpus(path, n=80):
    body = "\n".join(json.dumps({"text": " ".join(WORDS[i % 3] for _ in range(1 + i % 3))}) for i in range(n)) + "\n"
    return write(path, body)


STEP = "step = hlatc.compile_step(model='tiny', target='cpu')\n"
STEP8 = "step = hlatc.compile_step(model='tiny', target='cpu', batch_size=8, seq_len=16)\n"
TRAINER = STEP8 + "tr = hlatc.Trainer(step, seed=0)\nimport numpy as np\n"
TRAINER1 = STEP + "tr = hlatc.Trainer(step, seed=0)\nimport numpy as np\n"
LOADER = STEP + "L = hlatc.data.Loader\n"


def python_error_cases(corpus, bundle):
    """(name, setup, expr, argument names, classes) each of which python.md says must raise."""
    C, T = repr(corpus), repr(TOK)
    U, UT, CE, FE, DE = ["UsageError"], ["UsageTypeError"], ["ConfigError"], ["FileError"], ["DataError"]
    cs = "hlatc.compile_step(model='tiny', target='cpu', "
    cases = [
        ("compile_step positional", "", "hlatc.compile_step('tiny')", ["positional", "keyword", "argument"], ["TypeError"]),
        ("compile_step unknown keyword", "", cs + "tpp=2)", ["tpp"], ["TypeError"]),
        ("compile_step model=nope", "", "hlatc.compile_step(model='nope')", ["nope"], CE),
        ("compile_step model=3", "", "hlatc.compile_step(model=3)", ["model"], UT),
        ("compile_step config=[1,2]", "", "hlatc.compile_step(config=[1, 2])", ["config"], UT),
        ("compile_step config missing file", "", "hlatc.compile_step(config='missing.json')", ["missing.json"], FE),
        ("compile_step config gpt2", "", "hlatc.compile_step(config={'model_type': 'gpt2'})", ["gpt2", "model_type"], CE),
        ("compile_step model and config", "", "hlatc.compile_step(model='tiny', config={'model_type': 'llama'})",
         ["model", "config"], None),
    ]
    for kw, argn, cls in [
        ("target='gpu'", "target", CE), ("target='cpu', chip='trn2'", "chip", U),
        ("batch_size=8, grad_accum=3", "grad_accum", CE),
        ("tp='2'", "tp", UT), ("tp=-1", "tp", U), ("tp=0", "tp", U), ("tp=2.0", "tp", UT), ("tp=True", "tp", UT),
        ("dp=-2", "dp", U), ("pp=0", "pp", U), ("batch_size=0", "batch_size", U), ("batch_size=-8", "batch_size", U),
        ("batch_size='8'", "batch_size", UT), ("batch_size=2.5", "batch_size", UT), ("seq_len=0", "seq_len", U),
        ("seq_len=-16", "seq_len", U), ("precision='fp16'", "precision", CE), ("precision=1", "precision", UT),
        ("rounding='bogus'", "rounding", CE),
        ("remat='bogus'", "remat", CE), ("lr_max=-1.0", "lr_max", U), ("lr_max='a'", "lr_max", UT),
        ("lr_max=float('nan')", "lr_max", U), ("beta1=1.5", "beta1", U), ("beta2=-0.1", "beta2", U),
        ("adam_eps=-1.0", "adam_eps", U), ("weight_decay=-1.0", "weight_decay", U), ("clip_norm=-1.0", "clip_norm", U),
        ("warmup_steps=-1", "warmup_steps", U), ("grad_accum=0", "grad_accum", U),
        ("passes=5", "passes", UT), ("passes='nope'", "nope", ["PassError", "ConfigError"]),
        ("kernels={'attention': 'bogus'}", "bogus", CE), ("kernels='attention=hlo'", "kernels", UT),
        ("device_memory='lots'", "device_memory", U), ("device_memory='1KiB'", "device_memory", U),
        ("spmd='partitions'", "spmd", CE), ("tp=3", "parallel", CE), ("pp=3", "parallel", CE),
        ("zero1=True", "zero1", None), ("sequence_parallel=True", "sequence_parallel", None),
        ("pp=2, pp_send='bogus'", "pp_send", CE), ("replica_groups='bogus'", "replica_groups", CE),
        ("module_markers='yes'", "module_markers", UT), ("packed=1", "packed", UT),
    ]:
        call = ("hlatc.compile_step(model='tiny', " if "target=" in kw else cs) + kw + ")"
        cases.append((f"compile_step {kw}", "", call, [argn], cls))
    # Step and Trainer
    cases += [
        ("write_bundle(None)", STEP, "step.write_bundle(None)", ["path", "write_bundle"], UT),
        ("write_bundle under a file", STEP + "open('afile', 'w').close()\n", "step.write_bundle('afile/b')", ["afile"], FE),
        ("example_batch(rank=-1)", STEP, "step.example_batch(rank=-1)", ["rank"], U),
        ("example_batch(seed=-1)", STEP, "step.example_batch(seed=-1)", ["seed"], U),
        ("Trainer('tiny')", "", "hlatc.Trainer('tiny')", ["step"], UT),
        ("Trainer(seed=-1)", STEP, "hlatc.Trainer(step, seed=-1)", ["seed"], U),
        ("Trainer(seed='0')", STEP, "hlatc.Trainer(step, seed='0')", ["seed"], UT),
        ("Trainer.step wrong shape", TRAINER, "tr.step(np.zeros((8, 15), np.int32), np.zeros((8, 15), np.int32))",
         ["tokens"], ["BatchError"], False),
        ("Trainer.step id past vocab", TRAINER,
         "tr.step(np.full((8, 16), 64, np.int32), np.zeros((8, 16), np.int32))", ["tokens", "64"], ["BatchError"]),
        ("Trainer.step negative target", TRAINER,
         "tr.step(np.zeros((8, 16), np.int32), np.full((8, 16), -5, np.int32))", ["targets", "-5"], ["BatchError"]),
        ("Trainer.step float tokens 0.5", TRAINER, "tr.step(np.full((8, 16), 0.5, np.float32), np.zeros((8, 16), np.int32))",
         ["tokens"], ["UsageError"], False),
        ("Trainer.step 8 rows into a batch-1 step", TRAINER1,
         "tr.step(np.zeros((8, 16), np.int32), np.zeros((8, 16), np.int32))", ["tokens", "batch"], ["BatchError"], False),
        ("Trainer.step 3 rows into a batch-8 step", TRAINER,
         "tr.step(np.zeros((3, 16), np.int32), np.zeros((3, 16), np.int32))", ["tokens", "batch"], ["BatchError"], False),
        ("Trainer.step tokens/targets rows differ", TRAINER,
         "tr.step(np.zeros((8, 16), np.int32), np.zeros((4, 16), np.int32))", ["targets"], ["BatchError"], False),
        ("Trainer.step tokens=None", TRAINER, "tr.step(None, np.zeros((8, 16), np.int32))", ["tokens"], UT),
        ("Trainer.resume({})", TRAINER, "tr.resume({})", ["no tensor", "missing"], U, False),
        ("Trainer.resume(list)", TRAINER, "tr.resume([1, 2])", ["state"], UT),
        ("Trainer.resume wrong shape", TRAINER + "st = tr.state(); k = sorted(st)[0]; st[k] = np.zeros((3,), st[k].dtype)\n",
         "tr.resume(st)", ["shape", "this step's is"], U, False),
        ("fit steps=-1", TRAINER + f"ld = hlatc.data.Loader.for_step(step, {C}, tokenizer={T})\n", "tr.fit(ld, -1)", ["steps"], U),
        ("fit keep=0", TRAINER + f"ld = hlatc.data.Loader.for_step(step, {C}, tokenizer={T})\n",
         "tr.fit(ld, 2, checkpoint_dir='ck-keep0', keep=0)", ["keep"], U),
        ("fit checkpoint_every=0", TRAINER + f"ld = hlatc.data.Loader.for_step(step, {C}, tokenizer={T})\n",
         "tr.fit(ld, 2, checkpoint_dir='ck-every0', checkpoint_every=0)", ["checkpoint_every"], U),
        ("fit checkpoint_dir is a file", TRAINER + f"ld = hlatc.data.Loader.for_step(step, {C}, tokenizer={T})\n"
         + "open('ckfile', 'w').close()\n", "tr.fit(ld, 2, checkpoint_dir='ckfile')", ["ckfile"], ["CheckpointError"]),
        ("fit allow_changes misspelt", TRAINER + f"ld = hlatc.data.Loader.for_step(step, {C}, tokenizer={T})\n",
         "tr.fit(ld, 2, checkpoint_dir='ck-allow', allow_changes=['precisoin'])", ["precisoin"], None),
        ("fit loader=None", TRAINER, "tr.fit(None, 2)", ["loader"], UT),
    ]
    # Loader
    fs = "L.for_step(step, "
    cases += [
        ("Loader missing corpus", LOADER, fs + f"'missing.jsonl', tokenizer={T})", ["missing.jsonl"], DE),
        ("Loader glob matching nothing", LOADER, fs + f"'nomatch/*.jsonl', tokenizer={T})", ["nomatch"], DE),
        ("Loader missing tokenizer", LOADER, fs + f"{C}, tokenizer='missing-tok.json')", ["missing-tok.json"], DE),
        ("Loader jsonl without tokenizer", LOADER, fs + f"{C})", ["tokenizer"], DE),
        ("Loader shuffle_buffer=0", LOADER, fs + f"{C}, tokenizer={T}, shuffle_buffer=0)", ["shuffle_buffer"], None),
        ("Loader shuffle_buffer=-1", LOADER, fs + f"{C}, tokenizer={T}, shuffle_buffer=-1)", ["shuffle_buffer"], U),
        ("Loader packing on for_step", LOADER, fs + f"{C}, tokenizer={T}, packing='segments')", ["packing"], U, False),
        ("Loader packing bogus", LOADER, f"L({C}, seq_len=16, batch_size=8, vocab_size=64, tokenizer={T}, packing='bogus')",
         ["packing"], None),
        ("Loader format csv", LOADER, fs + f"{C}, tokenizer={T}, format='csv')", ["format", "csv"], None),
        ("Loader seq_len=0", LOADER, f"L({C}, seq_len=0, batch_size=8, vocab_size=64, tokenizer={T})", ["seq_len"], None),
        ("Loader batch_size=-1", LOADER, f"L({C}, seq_len=16, batch_size=-1, vocab_size=64, tokenizer={T})", ["batch_size"], U),
        ("Loader vocab too small", LOADER, f"L({C}, seq_len=16, batch_size=8, vocab_size=10, tokenizer={T})",
         ["vocab", "10"], DE),
        ("Loader seed=-1", LOADER, fs + f"{C}, tokenizer={T}, seed=-1)", ["seed"], U),
        ("Loader epochs=0", LOADER, fs + f"{C}, tokenizer={T}, epochs=0)", ["epochs"], None),
        ("Loader position garbage", LOADER, fs + f"{C}, tokenizer={T}, position='garbage')", ["position"], None),
        ("Loader text_field missing", LOADER, "next(iter(" + fs + f"{C}, tokenizer={T}, text_field='body')))", ["body"], DE),
        ("Loader bad json line", LOADER + "open('bad.jsonl', 'w').write('{\"text\": \"a\"}\\n{oops\\n')\n",
         "list(" + fs + f"'bad.jsonl', tokenizer={T}, epochs=1))", ["bad.jsonl", "line 2", ":2"], DE),
        ("Loader non-utf8", LOADER + "open('l1.jsonl', 'wb').write(b'{\"text\": \"caf\\xe9\"}\\n')\n",
         "list(" + fs + f"'l1.jsonl', tokenizer={T}, epochs=1))", ["offset", "utf"], DE),
        ("Loader empty corpus", LOADER + "open('empty.jsonl', 'w').close()\n",
         "next(iter(" + fs + f"'empty.jsonl', tokenizer={T})))", ["empty"], DE),
        ("Loader eos word unknown", LOADER, fs + f"{C}, tokenizer={T}, eos='<nope>')", ["<nope>", "eos"], None),
        ("Loader for_step(None)", LOADER, f"L.for_step(None, {C}, tokenizer={T})", ["step"], UT),
        ("Loader sources=5", LOADER, fs + f"5, tokenizer={T})", ["sources"], UT),
    ]
    # Bundle
    cases += [
        ("Bundle missing dir", "", "hlatc.Bundle('nope-dir')", ["nope-dir"], FE),
        ("Bundle(None)", "", "hlatc.Bundle(None)", ["path"], UT),
        ("Bundle.inputs('nope')", "", f"hlatc.Bundle({bundle!r}).inputs('nope')", ["program", "nope"], U),
        ("Bundle.outputs('micro_step')", "", f"hlatc.Bundle({bundle!r}).outputs('micro_step')", ["program", "micro_step"], U),
        ("Bundle of a file", "", f"hlatc.Bundle({os.path.join(bundle, 'manifest.json')!r})", ["manifest.json"], FE),
    ]
    for tag, edit in [("format9", "m['format'] = 'hlatc-bundle/9'"), ("no-format", "del m['format']"),
                      ("no-inputs", "m.pop('inputs', None); m.pop('programs', None)"),
                      ("inputs-not-list", "m['inputs'] = 5"), ("not-json", None), ("empty", "")]:
        d = os.path.join(WORK, f"bundle-{tag}")
        setup = f"import shutil\nshutil.rmtree({d!r}, ignore_errors=True)\nshutil.copytree({bundle!r}, {d!r})\n"
        mf = os.path.join(d, "manifest.json")
        if edit is None:
            setup += f"open({mf!r}, 'w').write('{{not json')\n"
        elif edit == "":
            setup += f"open({mf!r}, 'w').close()\n"
        else:
            setup += f"m = json.load(open({mf!r}))\n{edit}\njson.dump(m, open({mf!r}, 'w'))\n"
        names = ["hlatc-bundle/9"] if tag == "format9" else ["manifest.json"]
        cases.append((f"Bundle manifest {tag}", setup, f"list(hlatc.Bundle({d!r}))", names, FE if tag != "format9" else None))
    # modules, passes, plan helpers
    cases += [
        ("load_module missing", "", "hlatc.load_module('missing.hlo')", ["missing.hlo"], FE),
        ("load_module(5)", "", "hlatc.load_module(5)", ["5", "path", "module", "source"], UT),
        ("load_module syntax", "open('bad.hlo', 'w').write('HloModule m\\nENTRY e {\\n  x = f32[2] bogus()\\n}\\n')\n",
         "hlatc.load_module('bad.hlo')", ["bad.hlo"], ["HloSyntaxError"]),
        ("load_module bytes garbage", "", "hlatc.load_module(b'\\x00\\x01garbage')", ["proto", "parse", "hlo"],
         ["ProtoError", "HloSyntaxError"]),
        ("optimize unknown pass", "m = hlatc.load_module(open(" + repr(os.path.join(bundle, "model.hlo.txt")) + ").read().encode())\n",
         "hlatc.optimize(m, passes=['nope'])", ["nope"], ["PassError"]),
        ("optimize target gpu", "m = hlatc.load_module(" + repr(os.path.join(bundle, "model.hlo.txt")) + ")\n",
         "hlatc.optimize(m, target='gpu')", ["target", "gpu"], CE),
        ("append_measured_run unknown model", "", "hlatc.append_measured_run('runs.csv', model='nope', "
         "instance='trn1.32xlarge', nodes=1, tp=8, dp=4, seq_per_s=1.0, global_batch=64, seq_len=4096)", ["model"], U),
        ("append_measured_run nodes=0", "", "hlatc.append_measured_run('runs.csv', model='hlat-7b', "
         "instance='trn1.32xlarge', nodes=0, tp=8, dp=4, seq_per_s=1.0, global_batch=64, seq_len=4096)", ["nodes"], U),
        ("append_measured_run other header", "open('other.csv', 'w').write('a,b\\n1,2\\n')\n",
         "hlatc.append_measured_run('other.csv', model='hlat-7b', instance='trn1.32xlarge', nodes=1, tp=8, dp=4, "
         "seq_per_s=1.0, global_batch=64, seq_len=4096)", ["other.csv", "header"], None),
        ("append_measured_run dp not filling", "", "hlatc.append_measured_run('runs2.csv', model='hlat-7b', "
         "instance='trn1.32xlarge', nodes=1, tp=8, dp=3, seq_per_s=1.0, global_batch=63, seq_len=4096)", ["dp", "nodes"], U),
    ]
    return cases


def area_python():
    A = "python"
    corpus = make_corpus(os.path.join(WORK, "c.jsonl"))
    bundle = os.path.join(WORK, "py-bundle")
    r = run(["compile", "--model", "tiny", "--target", "cpu", "--out", bundle])
    if r.rc != 0:
        record(A, "setup compile tiny", "crash", r.tail(), r.cmd)
        return
    for case in python_error_cases(corpus, bundle):
        name, setup, expr, names, classes = case[:5]
        attr = case[5] if len(case) > 5 else True
        builtin_ok = classes == ["TypeError"]
        if builtin_ok:
            pr, res = pyrun(setup + f"\nprobe(lambda: {expr})\n")
            if res and res.get("raised") and "TypeError" in res["mro"]:
                record(A, name, "ok", res["msg"][:150], expr)
            else:
                record(A, name, "unclear" if res and res.get("raised") else "silent-wrong",
                       f"expected a TypeError: {res}", expr)
            continue
        py_expect_error(A, name, expr, names, classes=classes, setup=setup,
                        need_argument_attr=attr and bool(classes) and ("UsageError" in classes or "UsageTypeError" in classes))
    # happy paths
    pyb = os.path.join(WORK, "py-bundle-py")
    pr, res = pyrun(f"""
        step = hlatc.compile_step(model='tiny', target='cpu')
        step.write_bundle({pyb!r})
        emit(sorted(step.summary.keys()) if hasattr(step, 'summary') and isinstance(step.summary, dict) else None)
    """)
    if res is None or res.get("raised"):
        record(A, "write_bundle happy", "crash" if res is None else "docs-disagree", str(res or pr.tail()))
    else:
        diff = []
        for dp, _, fns in os.walk(bundle):
            for fn in fns:
                a = os.path.join(dp, fn)
                b = os.path.join(pyb, os.path.relpath(a, bundle))
                if not os.path.exists(b) or sha256(a) != sha256(b):
                    diff.append(os.path.relpath(a, bundle))
        record(A, "write_bundle same bytes as compile", "silent-wrong" if diff else "ok",
               f"files differing from `hlatc compile --target cpu`'s: {diff}" if diff else "")
    pr, res = pyrun(f"""
        step = hlatc.compile_step(model='tiny', target='cpu')
        b = hlatc.Bundle({bundle!r})
        emit({{"programs": list(b.programs), "format": b.format,
              "bin": [t.name for t in b.inputs('step')], "sin": [t.name for t in step.inputs],
              "bout": [t.name for t in b.outputs('step')], "sout": [t.name for t in step.outputs],
              "n": len(list(b))}})
    """)
    if res is None or res.get("raised"):
        record(A, "Bundle happy", "crash" if res is None else "docs-disagree", str(res or pr.tail()))
    else:
        v = res["value"]
        bad = []
        if v["programs"] != ["step"]:
            bad.append(f"programs {v['programs']}")
        if v["bin"] != v["sin"]:
            bad.append(f"inputs differ from the step's: {v['bin'][:5]} vs {v['sin'][:5]}")
        if v["bout"] != v["sout"]:
            bad.append("outputs differ from the step's")
        if v["n"] != len(v["bin"]) + len(v["bout"]):
            bad.append(f"iteration gives {v['n']} tensors, inputs+outputs {len(v['bin']) + len(v['bout'])}")
        record(A, "Bundle equals step signature", "silent-wrong" if bad else "ok", "; ".join(bad))
    pr, res = pyrun("emit([list(p) for p in hlatc.passes()][:200])")
    ok = res and not res.get("raised") and any(p[0] == "cse" for p in res["value"])
    record(A, "passes() lists cse", "ok" if ok else "docs-disagree", "" if ok else str(res)[:300])
    # CLI and Python train the same corpus to the same losses (data.md: the same batches)
    m = os.path.join(WORK, "py-cli.csv")
    r = run(["train", "--model", "tiny", "--steps", "3", "--corpus", corpus, "--tokenizer", TOK, "--metrics", m])
    pr, res = pyrun(f"""
        step = hlatc.compile_step(model='tiny', target='cpu', packed=True, batch_size=8, seq_len=16, lr_max=1e-2, lr_min=1e-3,
                                  warmup_steps=1, total_steps=3)  # what `train --steps 3` runs (run.json: warmup 1)
        tr = hlatc.Trainer(step, seed=0)
        ld = hlatc.data.Loader.for_step(step, {corpus!r}, tokenizer={TOK!r}, seed=0)
        emit([row["loss"] for row in tr.fit(ld, 3)])
    """)
    if r.rc != 0 or res is None or res.get("raised"):
        record(A, "fit = train --corpus", "crash" if crashed(r) or res is None else "docs-disagree",
               f"cli rc {r.rc} {r.tail(200)}; python {res}")
    else:
        cl, pl = losses(m), res["value"]
        same = len(cl) == len(pl) and all(abs(a - b) <= 1e-6 * max(1, abs(a)) for a, b in zip(cl, pl))
        record(A, "fit = train --corpus", "ok" if same else "silent-wrong",
               "" if same else f"CLI losses {cl}, Python {pl} (same corpus, seed, schedule)", r.cmd)


# ---------------------------------------------------------------- area: train

def same_losses(a, b, tol=0.0):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(1.0, abs(x)) for x, y in zip(a, b))


def area_train():
    A = "train"
    corpus = make_corpus(os.path.join(WORK, "tc.jsonl"))
    TR = ["train", "--model", "tiny", "--steps", "6"]
    COR = ["--corpus", corpus, "--tokenizer", TOK]
    # uninterrupted baselines
    full = {}
    for tag, extra in [("syn", []), ("cor", COR)]:
        m = os.path.join(WORK, f"full-{tag}.csv")
        r = cli_accept(A, f"baseline {tag}", TR + extra + ["--metrics", m],
                       check=lambda r, m=m: None if os.path.exists(m) and len(losses(m)) == 6
                       else ("silent-wrong", f"{m} missing or not 6 rows"))
        full[tag] = losses(m) if r.rc == 0 and os.path.exists(m) else None
    # checkpoint, stop, resume unchanged: the metrics equal the uninterrupted run's
    tmpl = {}
    for tag, extra in [("syn", []), ("cor", COR)]:
        ck = os.path.join(WORK, f"ck-{tag}")
        r = cli_accept(A, f"stop-after {tag}", TR + extra + ["--checkpoint-dir", ck, "--checkpoint-every", "1",
                                                             "--stop-after", "3"],
                       check=lambda r, ck=ck: None if os.path.isdir(os.path.join(ck, "step-00000003"))
                       else ("silent-wrong", f"no {ck}/step-00000003 after --stop-after 3: {os.listdir(ck) if os.path.isdir(ck) else 'no dir'}"))
        if r.rc != 0:
            continue
        tmpl[tag] = os.path.join(WORK, f"tmpl-{tag}")
        shutil.copytree(ck, tmpl[tag])
        m = os.path.join(WORK, f"resumed-{tag}.csv")
        r = run(TR + extra + ["--checkpoint-dir", ck, "--checkpoint-every", "1", "--metrics", m])
        c = crashed(r)
        if c or r.rc != 0:
            record(A, f"resume unchanged {tag}", "crash" if c else "silent-wrong", c or f"refused: {r.tail()}", r.cmd)
        elif full[tag] is None:
            record(A, f"resume unchanged {tag}", "unclear", "no baseline to compare", r.cmd)
        else:
            got = losses(m)
            record(A, f"resume unchanged {tag}", "ok" if same_losses(got, full[tag]) else "silent-wrong",
                   "" if same_losses(got, full[tag]) else f"resumed metrics {got} != uninterrupted {full[tag]}", r.cmd)
            said = "resum" in r.text.lower()
            record(A, f"resume says so {tag}", "ok" if said else "unclear",
                   "" if said else f"no word of resuming: {r.tail(200)}", r.cmd)
    # --save-state / --resume: the resumed steps equal the uninterrupted run's
    st = os.path.join(WORK, "s.st")
    r = cli_accept(A, "save-state", TR + ["--stop-after", "3", "--save-state", st],
                   check=lambda r: None if os.path.exists(st) else ("silent-wrong", "no state file written"))
    if r.rc == 0:
        m = os.path.join(WORK, "resume-file.csv")
        r = run(TR + ["--resume", st, "--metrics", m])
        c = crashed(r)
        if c or r.rc != 0:
            record(A, "--resume unchanged", "crash" if c else "silent-wrong", c or f"refused: {r.tail()}", r.cmd)
        else:
            rows = read_metrics(m)
            got = {int(x["step"]): float(x["loss"]) for x in rows}
            want = dict(enumerate(full["syn"] or [], 1))
            bad = [k for k in got if k in want and abs(got[k] - want[k]) > 0]
            ok = got and not bad and max(got) == 6
            record(A, "--resume unchanged", "ok" if ok else "silent-wrong",
                   "" if ok else f"resumed {got} vs uninterrupted {want}", r.cmd)
        for flag, val, field in [("--precision", "fp32", "precision"), ("--seed", "7", "seed"),
                                 ("--lr-max", "0.02", "max_lr"), ("--beta1", "0.8", "beta1")]:
            cli_refuse(A, f"--resume with {flag} {val}", TR + ["--resume", st, flag, val], [field])
    # identity changes against a checkpoint (synthetic data)
    init = os.path.join(WORK, "init.st")
    run(["train", "--model", "tiny", "--steps", "1", "--save", init])
    tcfg = os.path.join(WORK, "tiny-rope.json")
    base_cfg = os.path.join(ROOT, "tests/fixtures/parity/tiny/config.json")
    if os.path.exists(base_cfg):
        cfg = json.load(open(base_cfg))
        cfg["rope_theta"] = 500000.0
        json.dump(cfg, open(tcfg, "w"))
    changes = [
        ("seed", ["--seed", "7"], ["data.seed is 0 in the checkpoint, 7 now"], ["data.seed", "init"]),
        ("batch-size", ["--batch-size", "4"], ["data.batch_size"], "data.batch_size"),
        ("seq-len", ["--seq-len", "8"], ["data.seq_len"], "data.seq_len"),
        ("precision", ["--precision", "fp32"], ["precision"], "precision"),
        ("rounding", ["--rounding", "sr"], ["rounding"], "rounding", ["rounding_rng_state"]),
        ("lr-max", ["--lr-max", "0.02"], ["schedule.max_lr"], "schedule.max_lr"),
        ("lr-min", ["--lr-min", "0.0005"], ["schedule.min_lr"], "schedule.min_lr"),
        ("warmup", ["--warmup-steps", "2"], ["schedule.warmup_steps"], "schedule.warmup_steps"),
        ("total-steps", ["--total-steps", "12"], ["schedule.total_steps"], "schedule.total_steps"),
        ("beta1", ["--beta1", "0.8"], ["optimizer.beta1"], "optimizer.beta1"),
        ("beta2", ["--beta2", "0.99"], ["optimizer.beta2"], "optimizer.beta2"),
        ("adam-eps", ["--adam-eps", "1e-6"], ["optimizer.eps"], "optimizer.eps"),
        ("weight-decay", ["--weight-decay", "0"], ["optimizer.weight_decay"], "optimizer.weight_decay"),
        ("clip-norm", ["--clip-norm", "0.5"], ["optimizer.clip_norm"], "optimizer.clip_norm"),
        ("init", ["--init", init], ["init"], "init"),
        ("separate-projections", ["--separate-projections"], ["fused_projections", "model"], "model", ["q_proj"]),
        ("config rope_theta", ["--config", tcfg], ["model.rope_theta"], "model.rope_theta"),
    ]
    if "syn" in tmpl:
        for change in changes:
            name, flags, fields, allow = change[:4]
            if name == "config rope_theta" and not os.path.exists(tcfg):
                continue
            base = [a for a in TR if a not in ("--model", "tiny")] if name.startswith("config") else TR
            d = os.path.join(WORK, f"ck-chg-{name.replace(' ', '_')}")
            shutil.copytree(tmpl["syn"], d)
            cli_refuse(A, f"resume with {name} changed", base + flags + ["--checkpoint-dir", d], fields)
            allows = allow if isinstance(allow, list) else [allow]
            allow = "+".join(allows)
            r = run(base + flags + ["--checkpoint-dir", d] + [x for a in allows for x in ("--allow-resume-change", a)])
            c = crashed(r)
            if len(change) > 4:
                # the state itself differs (another tensor set): allowed or not, it cannot load; refused naming the tensor
                judge_refusal(A, f"allow {allow} (state of another shape)", r, change[4])
            elif c:
                record(A, f"allow {allow}", "crash", c, r.cmd)
            elif r.rc != 0:
                record(A, f"allow {allow}", "silent-wrong" if False else "docs-disagree",
                       f"--allow-resume-change {allow} still refused: {r.tail()}", r.cmd)
            else:
                warned = "warning" in r.err.lower()
                rj = os.path.join(d, "step-00000006", "run.json")
                rec = os.path.exists(rj) and "allowed_changes" in open(rj).read()
                record(A, f"allow {allow}", "ok" if warned and rec else "unclear",
                       "" if warned and rec else f"resumed but warning printed={warned}, run.json allowed_changes={rec}",
                       r.cmd)
        # allowing another field than the one changed is still refused
        for name, flags, wrong in [("seed", ["--seed", "7"], "precision"), ("precision", ["--precision", "fp32"], "data.seed"),
                                   ("lr-max", ["--lr-max", "0.02"], "optimizer"), ("beta1", ["--beta1", "0.8"], "schedule")]:
            d = os.path.join(WORK, f"ck-wrong-{name}")
            shutil.copytree(tmpl["syn"], d)
            cli_refuse(A, f"{name} changed, --allow-resume-change {wrong}", TR + flags + ["--checkpoint-dir", d,
                       "--allow-resume-change", wrong], [name.replace("-", "_").replace("lr_max", "max_lr")])
        d = os.path.join(WORK, "ck-misspelt")
        shutil.copytree(tmpl["syn"], d)
        cli_refuse(A, "misspelt --allow-resume-change", TR + ["--checkpoint-dir", d, "--seed", "7",
                   "--allow-resume-change", "data.sed"], ["data.sed"])
        # torn and corrupt checkpoints are passed over with a warning naming them
        d = os.path.join(WORK, "ck-torn")
        shutil.copytree(tmpl["syn"], d)
        os.remove(os.path.join(d, "step-00000003", "COMPLETE"))
        r = run(TR + ["--checkpoint-dir", d])
        ok = r.rc == 0 and "step-00000003" in r.err and "COMPLETE" in r.err
        record(A, "torn checkpoint passed over", "ok" if ok else ("crash" if crashed(r) else "unclear"),
               "" if ok else f"rc {r.rc}: {r.tail()}", r.cmd)
        d = os.path.join(WORK, "ck-corrupt")
        shutil.copytree(tmpl["syn"], d)
        with open(os.path.join(d, "step-00000003", "state.safetensors"), "r+b") as f:
            f.seek(-8, 2)
            f.write(b"\x00\x01\x02\x03\x04\x05\x06\x07")
        r = run(TR + ["--checkpoint-dir", d])
        ok = r.rc == 0 and "step-00000003" in r.err and "checksum" in r.err
        record(A, "corrupt checkpoint passed over", "ok" if ok else ("crash" if crashed(r) else "unclear"),
               "" if ok else f"rc {r.rc}: {r.tail()}", r.cmd)
        # one run per directory
        d = os.path.join(WORK, "ck-lock")
        long = TR[:-1] + ["3000", "--checkpoint-dir", d, "--checkpoint-every", "1000"]
        holder = subprocess.Popen([BIN] + long, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=WORK)
        try:
            for _ in range(300):
                if os.path.exists(os.path.join(d, "hlatc.lock")) or holder.poll() is not None:
                    break
                time.sleep(0.1)
            if not os.path.exists(os.path.join(d, "hlatc.lock")):
                record(A, "second run on a held directory", "unclear",
                       f"no {d}/hlatc.lock while a run holds it (holder exit {holder.poll()})")
            else:
                cli_refuse(A, "second run on a held directory", long, ["another run holds", "hlatc.lock"])
        finally:
            holder.kill()
            holder.wait()
    # corpus identity: tokenizer, corpus edits at several offsets, loader settings
    if "cor" in tmpl:
        tok = json.load(open(TOK))
        tok2 = json.loads(json.dumps(tok))
        vocab = tok2["model"]["vocab"]
        a, b = sorted(vocab)[:2]
        vocab[a], vocab[b] = vocab[b], vocab[a]
        tok2p = write(os.path.join(WORK, "tok-swapped.json"), json.dumps(tok2))
        tok3p = write(os.path.join(WORK, "tok-reformatted.json"), json.dumps(tok, indent=1))
        size = os.path.getsize(corpus)
        raw = open(corpus, "rb").read()
        def edit_at(off):
            def f(path):
                data = bytearray(raw)
                i = off
                while chr(data[i]) not in "abcdefghijklmnopqrstuvwxyz":
                    i += 1
                data[i] = ord("z") if data[i] != ord("z") else ord("y")
                write(path, bytes(data))
            return f
        cases = [("tokenizer swapped", lambda c: None, ["--tokenizer", tok2p], ["tokenizer"], "tokenizer"),
                 ("tokenizer same vocab reformatted", lambda c: None, ["--tokenizer", tok3p], ["tokenizer"], "tokenizer")]
        for frac in (0.0, 0.25, 0.5, 0.9, 0.999):
            cases.append((f"corpus edited at {frac:.0%}", edit_at(int(size * frac) if frac < 0.99 else size - 30), [], ["corpus"], "corpus"))
        cases.append(("corpus appended", lambda c: write(c, raw + b'{"text": "the cat"}\n'), [], ["corpus"], "corpus"))
        cases.append(("corpus truncated", lambda c: write(c, raw[: raw.rfind(b"\n", 0, len(raw) - 1) + 1]), [], ["corpus"], "corpus"))
        cases += [("shuffle-buffer", lambda c: None, ["--shuffle-buffer", "7"], ["shuffle"], "data"),
                  ("packing concat", lambda c: None, ["--packing", "concat"], ["packing"], "data"),
                  ("seed (corpus)", lambda c: None, ["--seed", "3"], ["seed"], "data.seed")]
        for name, mutate, flags, fields, allow in cases:
            d = os.path.join(WORK, f"ck-cor-{re.sub(r'[^a-z0-9]+', '_', name)}")
            shutil.copytree(tmpl["cor"], d)
            c2 = os.path.join(WORK, f"corpus-{re.sub(r'[^a-z0-9]+', '_', name)}.jsonl")
            write(c2, raw)
            # the checkpoint recorded `corpus`'s path: edit that file in place, restore it after
            mutate(corpus)
            try:
                args = TR + COR + flags
                if "--tokenizer" in flags:
                    args = TR + ["--corpus", corpus] + flags
                r = cli_refuse(A, f"resume with {name}", args + ["--checkpoint-dir", d], fields)
                if name in ("corpus appended",):
                    # data.md: the loader's position records each file's size and refuses another one, allowed or not
                    d2 = os.path.join(WORK, f"ck-cor-allow-{re.sub(r'[^a-z0-9]+', '_', name)}")
                    shutil.copytree(tmpl["cor"], d2)
                    cli_refuse(A, f"allow corpus ({name}): the loader still refuses the size",
                               args + ["--checkpoint-dir", d2, "--allow-resume-change", "corpus"], ["files", os.path.basename(corpus)])
            finally:
                write(corpus, raw)
    # bad flags: refused naming the flag, before training
    BAD = [
        (["--steps", "0"], "--steps"), (["--steps", "-1"], "--steps"), (["--tp", "0"], "--tp"), (["--dp", "0"], "--dp"),
        (["--pp", "0"], "--pp"), (["--tp", "3"], ["--tp", "heads"]), (["--pp", "3"], ["--pp", "layers"]),
        (["--batch-size", "0"], ["--batch-size", "batch"]), (["--seq-len", "0"], ["--seq-len", "seq"]),
        (["--seq-len", "17"], ["--seq-len", "16", "max_position"]),
        (["--stop-after", "0"], "--stop-after"), (["--stop-after", "9"], "--stop-after"),
        (["--checkpoint-every", "0", "--checkpoint-dir", "ck0"], "--checkpoint-every"),
        (["--keep", "0", "--checkpoint-dir", "ck0"], "--keep"), (["--keep", "2"], ["--keep", "--checkpoint-dir"]),
        (["--grad-accum", "3"], "--grad-accum"), (["--grad-accum", "0"], "--grad-accum"),
        (["--sequence-parallel"], ["--sequence-parallel", "--tp"]), (["--zero1"], ["--zero1", "--dp"]),
        (["--precision", "fp16"], ["--precision", "fp16"]), (["--remat", "bogus"], ["--remat", "bogus"]),
        (["--rounding", "bogus"], ["--rounding", "bogus"]),
        (["--lr-max", "-1"], ["--lr-max", "lr"]), (["--lr-max", "nan"], ["--lr-max", "lr"]),
        (["--beta1", "1.5"], ["--beta1", "beta1"]), (["--clip-norm", "-1"], ["--clip-norm", "clip"]),
        (["--adam-eps", "0"], ["--adam-eps", "eps"]), (["--weight-decay", "-0.1"], ["--weight-decay", "weight_decay"]),
        (["--warmup-steps", "-1"], ["--warmup-steps", "warmup"]),
        (["--init", "missing.st"], "missing.st"), (["--resume", "missing.st"], "missing.st"),
        (["--init", init, "--resume", "s.st"], ["--init", "--resume"]),
        (["--metrics", "no/such/dir/m.csv"], ["no/such/dir", "--metrics"]),
        (["--plot", "no/such/dir/p.png"], ["no/such/dir", "--plot"]),
        (["--save", "no/such/dir/w.st"], ["no/such/dir", "--save"]),
        (["--corpus", "missing.jsonl", "--tokenizer", TOK], "missing.jsonl"),
        (["--corpus", corpus], ["--tokenizer", "tokenizer"]),
        (["--corpus", corpus, "--tokenizer", "missing-tok.json"], "missing-tok.json"),
        (["--corpus", corpus, "--tokenizer", TOK, "--text-field", "body"], ["body"]),
        (["--corpus", corpus, "--tokenizer", TOK, "--corpus-format", "csv"], ["--corpus-format", "csv"]),
        (["--corpus", corpus, "--tokenizer", TOK, "--shuffle-buffer", "0"], "--shuffle-buffer"),
        (["--corpus", corpus, "--tokenizer", TOK, "--packing", "bogus"], ["--packing", "bogus"]),
        (["--corpus", corpus, "--tokenizer", TOK, "--eos-token", "<nope>"], ["<nope>", "--eos-token"]),
        (["--corpus", corpus, "--data", "x.bin"], ["--corpus", "--data"]),
        (["--data", "missing.bin"], "missing.bin"), (["--data", corpus, "--data-dtype", "u8"], ["--data-dtype", "u8"]),
        (["--data", "ids.bin", "--eval-fraction", "2"], "--eval-fraction"),
        (["--data", "ids.bin", "--eval-fraction", "-0.1"], "--eval-fraction"),
        (["--data", "bigid.bin"], ["64", "vocab"]),
        (["--data", "odd.bin"], ["odd.bin"]),
        (["--allow-resume-change", "bogus", "--checkpoint-dir", "ck-bogus"], ["bogus"]),
        (["--kernel", "attention=bogus"], ["attention", "bogus"]),
        (["--spmd", "partitions"], ["--spmd", "one device", "sharded"]),
    ]
    write(os.path.join(WORK, "ids.bin"), bytes([5, 0, 6, 0, 7, 0] * 2000))
    write(os.path.join(WORK, "bigid.bin"), bytes([200, 0] * 3000))
    write(os.path.join(WORK, "odd.bin"), b"\x01\x02\x03")
    for extra, names in BAD:
        label = " ".join(os.path.basename(x) if os.sep in x else x for x in extra)
        cli_refuse(A, f"refuse {label}", ["train", "--model", "tiny", "--steps", "2"] + extra, names)


# ---------------------------------------------------------------- area: pipeline

def rel_close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol * max(abs(x), abs(y), 1e-12) for x, y in zip(a, b))


def area_pipeline():
    A = "pipeline"
    T = ["train", "--model", "tiny", "--steps", "3", "--precision", "fp32"]
    base_m = os.path.join(WORK, "pp-base.csv")
    r = cli_accept(A, "single-device fp32 baseline", T + ["--metrics", base_m])
    if r.rc != 0:
        return
    base = read_metrics(base_m)
    variants = [
        ("pp2 ga2", ["--pp", "2", "--grad-accum", "2"]),
        ("pp2 ga4", ["--pp", "2", "--grad-accum", "4"]),
        ("pp2 tp2 ga2", ["--pp", "2", "--tp", "2", "--grad-accum", "2"]),
        ("pp2 tp2 ga2 all-gather", ["--pp", "2", "--tp", "2", "--grad-accum", "2", "--pp-send", "all-gather"]),
        ("pp2 dp2 zero1 ga2", ["--pp", "2", "--dp", "2", "--zero1", "--grad-accum", "2"]),
        ("pp2 ga2 remat stage", ["--pp", "2", "--grad-accum", "2", "--remat", "stage"]),
        ("tp2", ["--tp", "2"]),
        ("tp2 sp", ["--tp", "2", "--sequence-parallel"]),
        ("dp2", ["--dp", "2"]),
        ("dp2 zero1", ["--dp", "2", "--zero1"]),
        ("tp2 dp2 zero1", ["--tp", "2", "--dp", "2", "--zero1"]),
        ("tp2 spmd partitions", ["--tp", "2", "--spmd", "partitions"]),
        ("tp2 rank-source input", ["--tp", "2", "--rank-source", "input"]),
        ("ga2", ["--grad-accum", "2"]),
        ("remat full-layer", ["--remat", "full-layer"]),
    ]
    for name, flags in variants:
        m = os.path.join(WORK, f"pp-{name.replace(' ', '_')}.csv")
        r = run(T + flags + ["--metrics", m])
        c = crashed(r)
        if c or r.rc != 0:
            record(A, f"{name} runs", "crash" if c else "docs-disagree", c or f"refused: {r.tail()}", r.cmd)
            continue
        got = read_metrics(m)
        for col in ("loss", "grad_norm"):
            a = [float(x[col]) for x in base]
            b = [float(x[col]) for x in got]
            ok = rel_close(a, b, 1e-5)
            record(A, f"{name} {col} = single device (1e-5)", "ok" if ok else "silent-wrong",
                   "" if ok else f"single {a}, {name} {b}", r.cmd)
    # shard / unshard round trips and refusals
    sa, sb = os.path.join(WORK, "sa.st"), os.path.join(WORK, "sb.st")
    ra = cli_accept(A, "save-state a", T + ["--save-state", sa])
    rb = cli_accept(A, "save-state b (seed 3)", T + ["--seed", "3", "--save-state", sb])
    if ra.rc == 0 and rb.rc == 0:
        L = ["--model", "tiny", "--precision", "fp32", "--tp", "2", "--dp", "2", "--zero1"]
        da, db = os.path.join(WORK, "ranks-a"), os.path.join(WORK, "ranks-b")
        cli_accept(A, "shard a", ["shard", sa, "--out", da] + L,
                   check=lambda r: None if len([f for f in os.listdir(da) if f.startswith("rank-")]) == 4
                   else ("silent-wrong", f"{os.listdir(da)}"))
        cli_accept(A, "shard b", ["shard", sb, "--out", db] + L)
        back = os.path.join(WORK, "sa-back.st")
        cli_accept(A, "unshard round trip byte-identical", ["unshard", da, "--out", back] + L,
                   check=lambda r: None if os.path.exists(back) and sha256(back) == sha256(sa)
                   else ("silent-wrong", "unshard of shard is not byte-identical to the state"))
        mix = os.path.join(WORK, "ranks-mix")
        shutil.copytree(da, mix)
        shutil.copy(os.path.join(db, "rank-00001.safetensors"), os.path.join(mix, "rank-00001.safetensors"))
        cli_refuse(A, "unshard mixing two runs", ["unshard", mix, "--out", os.path.join(WORK, "mix.st")] + L,
                   ["different runs", "rank-00001"])
        sw = os.path.join(WORK, "ranks-swap")
        shutil.copytree(da, sw)
        os.rename(os.path.join(sw, "rank-00000.safetensors"), os.path.join(sw, "tmp"))
        os.rename(os.path.join(sw, "rank-00001.safetensors"), os.path.join(sw, "rank-00000.safetensors"))
        os.rename(os.path.join(sw, "tmp"), os.path.join(sw, "rank-00001.safetensors"))
        cli_refuse(A, "unshard swapped rank files", ["unshard", sw, "--out", os.path.join(WORK, "sw.st")] + L,
                   ["rank-0000", "rank 1"])
        miss = os.path.join(WORK, "ranks-miss")
        shutil.copytree(da, miss)
        os.remove(os.path.join(miss, "rank-00003.safetensors"))
        cli_refuse(A, "unshard a rank file missing", ["unshard", miss, "--out", os.path.join(WORK, "miss.st")] + L,
                   ["rank-00003"])
        Lp = [x if x != "fp32" else "bf16-mixed" for x in L]
        cli_refuse(A, "unshard other --precision", ["unshard", da, "--out", os.path.join(WORK, "p.st")] + Lp,
                   ["precision", "fp32"])
        cli_refuse(A, "unshard other layout (--dp 4)", ["unshard", da, "--out", os.path.join(WORK, "l.st"),
                   "--model", "tiny", "--precision", "fp32", "--dp", "4", "--zero1"], ["layout", "TP 2 x DP 2", "rank"])
        cli_refuse(A, "shard other --precision", ["shard", sa, "--out", os.path.join(WORK, "rp")] + Lp, ["precision"])
        cli_refuse(A, "shard a rank file", ["shard", os.path.join(da, "rank-00000.safetensors"),
                   "--out", os.path.join(WORK, "rr")] + L, ["rank"])
        write(os.path.join(WORK, "afile"), "x")
        cli_refuse(A, "shard --out a file", ["shard", sa, "--out", os.path.join(WORK, "afile")] + L, ["afile", "--out"])
        dpp = os.path.join(WORK, "ranks-pp")
        r = cli_accept(A, "shard --pp 2", ["shard", sa, "--out", dpp, "--model", "tiny", "--precision", "fp32", "--pp", "2"])
        if r.rc == 0:
            cli_refuse(A, "unshard PP files read with --dp 2", ["unshard", dpp, "--out", os.path.join(WORK, "pd.st"),
                       "--model", "tiny", "--precision", "fp32", "--dp", "2"], ["stages", "layout", "not of"])
        T6 = ["train", "--model", "tiny", "--steps", "6", "--precision", "fp32"]
        sc, m6, mr = os.path.join(WORK, "sc.st"), os.path.join(WORK, "six.csv"), os.path.join(WORK, "sc-resumed.csv")
        r6 = run(T6 + ["--metrics", m6])
        rs = run(T6 + ["--stop-after", "3", "--save-state", sc])
        for lay in (["--tp", "2"], ["--dp", "2", "--zero1"], ["--pp", "2", "--grad-accum", "2"]):
            r = run(T6 + ["--resume", sc, "--metrics", mr] + lay)
            name = f"--resume a single-device state at {' '.join(lay)}"
            c = crashed(r)
            if c or r.rc != 0 or r6.rc != 0 or rs.rc != 0:
                record(A, name, "crash" if c else "docs-disagree", c or f"{r.tail()} (baseline rc {r6.rc}, save rc {rs.rc})", r.cmd)
                continue
            got = {int(x["step"]): float(x["loss"]) for x in read_metrics(mr)}
            want = {int(x["step"]): float(x["loss"]) for x in read_metrics(m6)}
            bad = {k: (got[k], want.get(k)) for k in got if k not in want or abs(got[k] - want[k]) > 1e-5 * abs(want[k])}
            ok = bool(got) and not bad and max(got) == 6
            record(A, name, "ok" if ok else "silent-wrong", "" if ok else f"resumed {got} vs uninterrupted {want}", r.cmd)
    # a bundle whose program file was replaced by another's: check reports the sha256 mismatch
    b1, b2 = os.path.join(WORK, "bga-1"), os.path.join(WORK, "bga-2")
    r1 = cli_accept(A, "compile ga2 bundle", ["compile", "--model", "tiny", "--target", "cpu", "--batch-size", "8",
                                               "--grad-accum", "2", "--out", b1])
    r2 = cli_accept(A, "compile ga2 fp32 bundle", ["compile", "--model", "tiny", "--target", "cpu", "--batch-size", "8",
                                                    "--grad-accum", "2", "--precision", "fp32", "--out", b2])
    if r1.rc == 0 and r2.rc == 0:
        # (the manifest records the proto's sha256; model.hlo.txt is only where findings are located)
        for tag, files in [("pb", ["model.hlo_module.pb"]), ("both", ["model.hlo_module.pb", "model.hlo.txt"])]:
            d = os.path.join(WORK, f"bga-swapped-{tag}")
            shutil.copytree(b1, d)
            for f in files:
                if os.path.exists(os.path.join(b2, "micro_step", f)):
                    shutil.copy(os.path.join(b2, "micro_step", f), os.path.join(d, "micro_step", f))
            r = run(["check", d])
            c = crashed(r)
            named = "sha256" in r.text.lower() or "checksum" in r.text.lower() or "does not match" in r.text.lower()
            if c:
                record(A, f"check program replaced ({tag})", "crash", c, r.cmd)
            elif named and r.rc != 0:
                record(A, f"check program replaced ({tag})", "ok", r.tail(200), r.cmd)
            elif named:
                record(A, f"check program replaced ({tag})", "unclear", f"mentions the mismatch but exits 0: {r.tail()}", r.cmd)
            else:
                record(A, f"check program replaced ({tag})", "silent-wrong",
                       f"exit {r.rc}, no word of the manifest's sha256: {r.tail()}", r.cmd)
        d = os.path.join(WORK, "bga-1-runs")
        r = run(["run", os.path.join(b1, "micro_step"), "--seed", "1"])
        record(A, "run ga2 bundle's micro_step", "ok" if r.rc == 0 else ("crash" if crashed(r) else "docs-disagree"),
               "" if r.rc == 0 else r.tail(), r.cmd)
    # program names agree: manifest, check --format json, Bundle.programs, the folders, Step.summary
    bp = os.path.join(WORK, "bpp")
    rp = cli_accept(A, "compile pp2 bundle", ["compile", "--model", "tiny", "--target", "cpu", "--batch-size", "8",
                                              "--pp", "2", "--grad-accum", "2", "--out", bp])
    for tag, bdir, kw, want in [("ga2", b1, "batch_size=8, grad_accum=2", ["micro_step", "apply_step"]),
                                ("pp2", bp, "batch_size=8, pp=2, grad_accum=2", ["warm_up", "steady", "cool_down", "apply_step"])]:
        if not os.path.exists(os.path.join(bdir, "manifest.json")):
            continue
        man = [p["name"] for p in json.load(open(os.path.join(bdir, "manifest.json")))["programs"]]
        rc = run(["check", bdir, "--format", "json"])
        try:
            chk = [x["program"] for x in json.loads(rc.out)]
        except Exception as e:
            chk = f"unreadable: {e}: {rc.tail(200)}"
        folders = sorted(d for d in os.listdir(bdir) if os.path.isdir(os.path.join(bdir, d)))
        pr, res = pyrun(f"""
            b = hlatc.Bundle({bdir!r})
            step = hlatc.compile_step(model='tiny', target='cpu', {kw})
            s = step.summary() if callable(step.summary) else step.summary
            emit({{"programs": list(b.programs), "summary": list(s.keys()) if isinstance(s, dict) else repr(type(s))}})
        """)
        py = res["value"] if res and not res.get("raised") else f"python: {res or pr.tail()}"
        views = {"manifest": man, "check --format json": chk,
                 "Bundle.programs": py["programs"] if isinstance(py, dict) else py,
                 "Step.summary keys": [k for k in py["summary"] if k in want] if isinstance(py, dict) else py}
        bad = {k: v for k, v in views.items() if v != want}
        if sorted(want) != folders:
            bad["folders"] = folders
        record(A, f"program names agree ({tag})", "ok" if not bad else "silent-wrong",
               "" if not bad else f"want {want}; differing: {bad}", rc.cmd)


# ---------------------------------------------------------------- main

AREAS = [("docs", area_docs), ("docs-synopsis", area_docs_synopsis), ("docs-run", area_docs_runnable), ("plan", area_plan), ("python", area_python), ("train", area_train), ("pipeline", area_pipeline)]


def main():
    for name, fn in AREAS:
        if not area_enabled(name):
            continue
        t0 = time.time()
        try:
            fn()
        except Exception as e:  # the harness's own failure: a case of its own, not a silent stop
            import traceback
            record(name, "harness-error", "crash", "harness raised " + traceback.format_exc()[-600:])
        print(f"# area {name}: {time.time() - t0:.0f} s", flush=True)
    counts = {}
    for c in CASES:
        counts.setdefault(c["area"], {}).setdefault(c["verdict"], 0)
        counts[c["area"]][c["verdict"]] += 1
    for area in counts:
        print(f"{area}: " + ", ".join(f"{v} {n}" for v, n in sorted(counts[area].items())))
    passed = sum(1 for c in CASES if c["verdict"] == "ok")
    failed = len(CASES) - passed
    with open(os.path.join(WORK, "report.json"), "w") as f:
        json.dump({"seconds": round(time.time() - START, 1), "counts": counts, "cases": CASES}, f, indent=1)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
