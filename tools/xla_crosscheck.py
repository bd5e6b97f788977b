#!/usr/bin/env python3
"""Reads hlatc's output with XLA's own parser and proto reader.

    python3 tools/xla_crosscheck.py DIR

For every DIR/NAME.txt (HLO text printed by hlatc) XLA parses the text and
writes its HloModuleProto to DIR/NAME.xla_text.pb; for every DIR/NAME.pb
(HloModuleProto emitted by hlatc) XLA loads it and writes it back to
DIR/NAME.xla_proto.pb. hlatc's tests then decode those and compare them with
the original module. Any module XLA rejects makes this script exit 1.
"""
import glob
import os
import sys

from jax._src.lib import xla_client as xc


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    failed = 0
    for path in sorted(glob.glob(os.path.join(d, "*.txt"))):
        try:
            m = xc.hlo.hlo_module_from_text(open(path).read())
        except Exception as e:  # XLA raises its own status errors
            print(f"{path}: XLA's parser rejected it: {e}")
            failed += 1
            continue
        with open(path[:-4] + ".xla_text.pb", "wb") as f:
            f.write(m.as_serialized_hlo_module_proto())
    for path in sorted(glob.glob(os.path.join(d, "*.pb"))):
        if path.endswith((".xla_text.pb", ".xla_proto.pb")):
            continue
        try:
            m = xc.hlo.HloModule.from_serialized_hlo_module_proto(open(path, "rb").read())
        except Exception as e:
            print(f"{path}: XLA rejected the proto: {e}")
            failed += 1
            continue
        with open(path[:-3] + ".xla_proto.pb", "wb") as f:
            f.write(m.as_serialized_hlo_module_proto())
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
