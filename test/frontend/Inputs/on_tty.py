#!/usr/bin/env python3
"""Runs a command with a terminal (a pseudo-terminal) as its stdin, as a user
typing the command would; prints its stderr and exit status. A command that
waits on the terminal is killed after 20 s and reported as such."""
import os
import pty
import subprocess
import sys

master, slave = pty.openpty()
try:
    r = subprocess.run(sys.argv[1:], stdin=slave, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=20)
    sys.stdout.write(r.stderr.decode(errors="replace"))
    print("exit status %d" % r.returncode)
except subprocess.TimeoutExpired:
    print("timed out waiting on the terminal")
finally:
    os.close(master)
    os.close(slave)
