#!/usr/bin/env python3
"""Adversarial cases over issue 59's Rust paths: the loader's inputs, checkpoint
directories, resumes of other runs, rank files and their metadata, and bad flags.

    tools/adversarial_resume.py HLATC_BINARY WORKDIR

Each case runs `hlatc` once (bounded by a timeout) and must end in one of two
ways: success, or status 1 or 2 with an `error:` line. A panic, a signal, a
timeout or another status is a failure; so is a case marked `refuse` that
succeeds (a silent acceptance). Prints the count of each and exits 1 on any
failure.
"""
import json
import os
import shutil
import subprocess
import sys

BIN, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOK = os.path.join(ROOT, "tests/fixtures/tokenizer-words.json")
CFG = os.path.join(ROOT, "tests/fixtures/parity/tiny/config.json")
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
os.chdir(WORK)

results = {"ok": 0, "refused": 0, "failures": []}


def run(args, expect, timeout=300):
    """expect: 'refuse', 'accept' or 'any'."""
    try:
        p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        results["failures"].append((args, "timeout"))
        return
    err = p.stderr
    if p.returncode < 0 or "panicked" in err or p.returncode not in (0, 1, 2):
        results["failures"].append((args, f"status {p.returncode}: {err[-300:]}"))
    elif p.returncode == 0:
        if expect == "refuse":
            results["failures"].append((args, "silently accepted"))
        else:
            results["ok"] += 1
    else:
        if "error" not in err:
            results["failures"].append((args, f"no error line: {err[-300:]}"))
        elif expect == "accept":
            results["failures"].append((args, f"refused: {err[-300:]}"))
        else:
            results["refused"] += 1


def write(name, data):
    with open(name, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    return name


words = ["the cat sat on the mat", "a dog ran under the tree", "the bird flew over a fish"]
corpus = "\n".join(json.dumps({"text": " ".join(words[i % 3] for _ in range(1 + i % 3))}) for i in range(80)) + "\n"
write("c.jsonl", corpus)
TRAIN = ["train", "--steps", "2"]
C = ["--corpus", "c.jsonl", "--tokenizer", TOK]

# Bad numbers for every count and degree flag.
for flag in ["--tp", "--dp", "--pp", "--steps", "--eos", "--keep", "--checkpoint-every",
             "--stop-after", "--grad-accum", "--shuffle-buffer", "--eval-every", "--seed"]:
    for v in ["0", "-1", "-99999999999", "1e3", "x", "", "18446744073709551616", "3.5"]:
        extra = C if flag in ("--eos", "--shuffle-buffer") else []
        if flag in ("--keep", "--checkpoint-every"):
            extra = ["--checkpoint-dir", "ckbad"]
        run(TRAIN + extra + [flag, v], "any", timeout=120)

# Corpus files: each refused by name or trained.
cases = {
    "empty.jsonl": b"",
    "bom.jsonl": b"\xef\xbb\xbf" + corpus.encode(),
    "bom-only.jsonl": b"\xef\xbb\xbf",
    "bin.jsonl": bytes(range(256)) * 4,
    "notobj.jsonl": b"[1,2]\n",
    "nofield.jsonl": b'{"x": "a"}\n',
    "numfield.jsonl": b'{"text": 3}\n',
    "crlf.jsonl": corpus.replace("\n", "\r\n").encode(),
    "latin1.jsonl": '{"text": "caf\xe9"}\n'.encode("latin-1"),
    "deep.jsonl": ("[" * 5000 + "]" * 5000 + "\n").encode(),
    "huge-line.jsonl": (json.dumps({"text": "cat " * 200000}) + "\n").encode(),
    "odd.bin": b"\x01\x02\x03",
    "ids.bin": bytes([5, 0] * 3000),
    "big-id.bin": bytes([255, 255] * 3000),
}
for name, data in cases.items():
    write(name, data)
    fmt = [] if name.endswith(".jsonl") else []
    tok = ["--tokenizer", TOK] if name.endswith(".jsonl") else []
    run(TRAIN + ["--corpus", name] + tok + fmt, "any")
os.mkfifo("fifo.jsonl")
for src in ["fifo.jsonl", "/dev/stdin", "/dev/null", "/dev/zero", ".", "missing.jsonl", "*.nomatch", "[bad"]:
    run(TRAIN + ["--corpus", src, "--tokenizer", TOK], "refuse", timeout=60)

# Tokenizers: corrupt, past the vocabulary, retrained, copied.
tok = json.load(open(TOK))
def tok_variant(name, edit):
    t = json.loads(json.dumps(tok))
    edit(t)
    write(name, json.dumps(t))
    return name
tok_variant("hi.json", lambda t: t["model"]["vocab"].__setitem__("cat", 500))
tok_variant("hi64.json", lambda t: t["model"]["vocab"].__setitem__("cat", 64))
tok_variant("hi63.json", lambda t: t["model"]["vocab"].__setitem__("cat", 63))
# The tokenizers crate numbers added tokens past the model's own (the JSON's
# id is only checked with a warning): one added token is id 59, which fits;
# ten reach 68, which does not.
def added(n):
    return lambda t: t["added_tokens"].extend(
        {"id": 900 + i, "content": f"<x{i}>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True} for i in range(n))
tok_variant("added.json", added(1))
tok_variant("added10.json", added(10))
write("garbage.json", b"{not json")
write("emptytok.json", b"")
for t, expect in [("hi.json", "refuse"), ("hi64.json", "refuse"), ("hi63.json", "accept"),
                  ("added.json", "accept"), ("added10.json", "refuse"), ("garbage.json", "refuse"), ("emptytok.json", "refuse"),
                  ("missing.json", "refuse"), (".", "refuse")]:
    run(TRAIN + ["--corpus", "c.jsonl", "--tokenizer", t], expect)
for flag, v in [("--bos-token", "<nope>"), ("--eos-token", "<nope>"), ("--bos-token", "none"),
                ("--eos-token", "none"), ("--eos-token", "cat"), ("--bos-token", "")]:
    run(TRAIN + C + [flag, v], "any")
for eos in ["63", "64", "65", "99999", "4294967295"]:
    run(TRAIN + ["--corpus", "ids.bin", "--eos", eos], "refuse" if int(eos) >= 64 else "accept")

# Checkpoint directories: the lock, a file, garbage, resumes of other runs.
write("afile", b"x")
run(TRAIN + ["--checkpoint-dir", "afile"], "refuse")
run(TRAIN + ["--checkpoint-dir", "afile/sub"], "refuse")
os.makedirs("locked")
host = open("/proc/sys/kernel/hostname").read().strip()
for holder, expect in [
    ({"pid": os.getpid(), "host": host, "started": 0}, "refuse"),
    ({"pid": 1, "host": host, "started": 0}, "refuse"),
    ({"pid": 4194311, "host": host, "started": 0}, "accept"),
    ({"pid": os.getpid(), "host": "elsewhere", "started": 0}, "refuse"),
    ("garbage", "accept"),
    ("", "accept"),
    ({"pid": os.getpid(), "host": host, "started": 0, "process_start": 1}, "accept"),
]:
    write("locked/hlatc.lock", holder if isinstance(holder, str) else json.dumps(holder))
    run(TRAIN + ["--checkpoint-dir", "locked"], expect)
    if os.path.exists("locked/hlatc.lock") and expect == "accept":
        results["failures"].append(("lock", "not released"))
shutil.rmtree("locked")

# A run to resume, and every way to resume it as another run.
base = ["train", "--steps", "6", "--stop-after", "3", "--config", CFG] + C
run(base + ["--checkpoint-dir", "ck", "--save-state", "s.st"], "accept")
def cfg_variant(name, key, value):
    c = json.load(open(CFG))
    c[key] = value
    write(name, json.dumps(c))
    return name
others = [
    ["--config", cfg_variant("rope.json", "rope_theta", 500000.0)],
    ["--config", cfg_variant("eps.json", "rms_norm_eps", 1e-6)],
    ["--config", cfg_variant("tied.json", "tie_word_embeddings", True)],
    ["--config", CFG, "--precision", "fp32"],
    ["--config", CFG, "--precision", "bf16-pure"],
    ["--config", CFG, "--rounding", "sr"],
    ["--config", CFG, "--lr-max", "0.5"],
    ["--config", CFG, "--lr-min", "0.5"],
    ["--config", CFG, "--warmup-steps", "3"],
    ["--config", CFG, "--weight-decay", "0.5"],
    ["--config", CFG, "--clip-norm", "0"],
    ["--config", CFG, "--beta2", "0.9"],
    ["--config", CFG, "--separate-projections"],
]
for o in others:
    args = ["train", "--steps", "6"] + o + C
    run(args + ["--checkpoint-dir", "ck"], "refuse")
    run(args + ["--resume", "s.st"], "refuse")
for bad in ["model.rope_theat", "nothing", "", "model.", "."]:
    run(["train", "--steps", "6", "--config", CFG] + C + ["--checkpoint-dir", "ck", "--allow-resume-change", bad], "refuse")
# The data changed: another corpus, a retrained tokenizer.
shutil.copytree("ck", "ck2")
write("c2.jsonl", corpus.replace("cat", "dog"))
run(["train", "--steps", "6", "--config", CFG, "--corpus", "c2.jsonl", "--tokenizer", TOK, "--checkpoint-dir", "ck2"], "refuse")
tok_variant("swapped.json", lambda t: (t["model"]["vocab"].__setitem__("cat", tok["model"]["vocab"]["dog"]), t["model"]["vocab"].__setitem__("dog", tok["model"]["vocab"]["cat"])))
run(["train", "--steps", "6", "--config", CFG, "--corpus", "c.jsonl", "--tokenizer", "swapped.json", "--checkpoint-dir", "ck2"], "refuse")
# Checkpoints tampered with: run.json changed (checksum), garbage in its place.
step = sorted(d for d in os.listdir("ck2") if d.startswith("step-"))[-1]
for content in [b"{}", b"garbage", b'{"fields": 3}']:
    shutil.rmtree("ck3", ignore_errors=True)
    shutil.copytree("ck", "ck3")
    write(f"ck3/{step}/run.json", content)
    run(["train", "--steps", "6", "--config", CFG] + C + ["--checkpoint-dir", "ck3"], "any")

# Rank files: shard, then swap, truncate, corrupt metadata, mix layouts and steps.
lay = {"pp2": ["--pp", "2"], "dp2": ["--dp", "2"], "tp2": ["--tp", "2"], "tp2dp2": ["--tp", "2", "--dp", "2", "--zero1"]}
common = ["--config", CFG, "--precision", "bf16-mixed", "--target", "cpu"]
for name, flags in lay.items():
    run(["shard", "s.st", "--out", name] + common + flags, "accept")
for name, flags in lay.items():
    for other, oflags in lay.items():
        run(["unshard", name, "--out", f"{name}-as-{other}.st"] + common + oflags,
            "accept" if name == other else "refuse")
import itertools
for name in ["pp2", "dp2", "tp2"]:
    a, b = f"{name}/rank-00000.safetensors", f"{name}/rank-00001.safetensors"
    os.rename(a, "t"); os.rename(b, a); os.rename("t", b)
    run(["unshard", name, "--out", "x.st"] + common + lay[name], "refuse")
    os.rename(a, "t"); os.rename(b, a); os.rename("t", b)
def header_edit(path, edit):
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    h = json.loads(data[8:8 + n])
    edit(h)
    hb = json.dumps(h).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    write(path, len(hb).to_bytes(8, "little") + hb + data[8 + n:])
for i, edit in enumerate([
    lambda h: h["__metadata__"].__setitem__("hlatc", "garbage"),
    lambda h: h["__metadata__"].__setitem__("hlatc", json.dumps({"rank": 5})),
    lambda h: h["__metadata__"].__setitem__("hlatc", json.dumps({"rank": "x"})),
    lambda h: h["__metadata__"].__setitem__("hlatc", json.dumps({"step": 99, "rank": 1, "ranks": 2, "layout": json.loads(h["__metadata__"]["hlatc"])["layout"]})),
    lambda h: h["__metadata__"].__setitem__("hlatc", json.dumps({"layout": "TP 9 x DP 9"})),
    lambda h: h["__metadata__"].__setitem__("hlatc", json.dumps({"ranks": 7})),
    lambda h: h.pop("__metadata__"),
]):
    shutil.rmtree("m", ignore_errors=True)
    shutil.copytree("pp2", "m")
    header_edit("m/rank-00001.safetensors", edit)
    run(["unshard", "m", "--out", f"m{i}.st"] + common + lay["pp2"], "accept" if i == 6 else "refuse")
for cut in [0, 4, 8, 100, -1]:
    shutil.rmtree("m", ignore_errors=True)
    shutil.copytree("pp2", "m")
    data = open("m/rank-00000.safetensors", "rb").read()
    write("m/rank-00000.safetensors", data[:cut] if cut >= 0 else data[:-1])
    run(["unshard", "m", "--out", "t.st"] + common + lay["pp2"], "refuse")
run(["shard", "pp2/rank-00000.safetensors", "--out", "rr"] + common, "refuse")
run(["shard", "s.st", "--out", "afile"] + common, "refuse")
run(["unshard", "afile", "--out", "t.st"] + common, "refuse")
run(["unshard", "missingdir", "--out", "t.st"] + common, "refuse")
os.makedirs("emptydir", exist_ok=True)
run(["unshard", "emptydir", "--out", "t.st"] + common, "refuse")
for st in ["pp2/rank-00000.safetensors", "afile", "c.jsonl", "missing.st"]:
    run(["train", "--steps", "6", "--config", CFG] + C + ["--resume", st], "refuse")

total = results["ok"] + results["refused"] + len(results["failures"])
print(f"{total} cases: {results['ok']} ran, {results['refused']} refused with an error, "
      f"{len(results['failures'])} failures")
for a, why in results["failures"]:
    print("FAIL", a, why)
sys.exit(1 if results["failures"] else 0)
