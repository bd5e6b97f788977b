"""How the Neuron pre-flight's rules meet XLA's own test modules: every
module of the shared conformance corpus through `hlatc check` on trn1 and
trn2, and for each rule asked about, the modules it fires on and those whose
verdict it decides (refused by it alone). docs/src/neuron-preflight.md
("XLA's own test modules") gives its figures.

    python3 tools/neuron_check_corpus.py target/release/hlatc ../shared/conformance/xla \\
        sort-trn2 gather-iota-out-of-bounds scatter-iota-out-of-bounds
"""

import collections
import glob
import json
import os
import subprocess
import sys


def main() -> None:
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    hlatc, corpus, rules = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    files = sorted(glob.glob(os.path.join(corpus, "*.hlo")))
    fires = collections.defaultdict(list)
    decides = collections.defaultdict(list)
    unread = collections.Counter()
    for chip in ("trn1", "trn2"):
        for f in files:
            p = subprocess.run([hlatc, "check", f, "--target", chip, "--format", "json"],
                               capture_output=True, text=True, timeout=120)
            try:
                report = json.loads(p.stdout)
            except json.JSONDecodeError:
                unread[chip] += 1  # refused by the reader, named on stderr
                continue
            found = {x["rule"] for x in report["findings"]}
            refusing = {x["rule"] for x in report["findings"] if x["severity"] == "refusal"}
            for r in rules & found:
                fires[(chip, r)].append(os.path.basename(f))
                if refusing == {r}:
                    decides[(chip, r)].append(os.path.basename(f))
    print(f"{len(files)} modules; not read: {dict(unread)}")
    for chip in ("trn1", "trn2"):
        for r in sorted(rules):
            names = decides[(chip, r)]
            print(f"{chip} {r}: fires on {len(fires[(chip, r)])}, decides {len(names)}: "
                  f"{' '.join(names[:20])}{' ...' if len(names) > 20 else ''}")


if __name__ == "__main__":
    main()
