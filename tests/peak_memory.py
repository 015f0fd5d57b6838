#!/usr/bin/env python3
"""Runs a program that links a compiled model and checks its peak resident memory against the
bound Kiln promises: the weights file + what Winograd's transformed weights add at load + the
model's arena + 16 MB.

    peak_memory.py KILN MODEL.onnx PROGRAM WEIGHTS [KILN_OPTION...]

The arena and the Winograd weights come from `kiln inspect MODEL KILN_OPTION...` ("arena: N
bytes", "winograd weights at load: N bytes beyond the weights file"; KILN_OPTION e.g. the
--input-shape the model was compiled with); the peak from the operating
system's accounting of the program's process alone (ru_maxrss of wait4).
"""
import os
import re
import subprocess
import sys


def main():
    kiln, model, program, weights = sys.argv[1:5]
    inspect = subprocess.run([kiln, "inspect", model] + sys.argv[5:], capture_output=True,
                             text=True, check=True)
    match = re.search(r"arena: (\d+) bytes", inspect.stdout)
    if not match:
        sys.exit("kiln inspect printed no arena size")
    arena = int(match.group(1))
    match = re.search(r"winograd weights at load: (-?\d+) bytes", inspect.stdout)
    if not match:
        sys.exit("kiln inspect printed no Winograd weight size")
    winograd = int(match.group(1))
    child = subprocess.Popen([program, weights], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own accounting
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{program} failed: {child.stderr.read().decode().strip()}")
    peak = usage.ru_maxrss * 1024  # KiB on Linux
    bound = os.path.getsize(weights) + winograd + arena + (16 << 20)
    mb = 1 << 20
    print(f"peak resident {peak / mb:.1f} MB; bound {bound / mb:.1f} MB "
          f"(weights {os.path.getsize(weights) / mb:.1f} + winograd {winograd / mb:.1f} "
          f"+ arena {arena / mb:.1f} + 16)")
    if peak > bound:
        sys.exit(f"peak resident memory {peak / mb:.1f} MB exceeds the bound {bound / mb:.1f} MB")


if __name__ == "__main__":
    main()
