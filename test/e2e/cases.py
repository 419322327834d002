"""Several cases in one process: `SCRIPT.py ARGS... --and ARGS... --and ...`
runs the script's main once per group of arguments, so that PyTorch is
imported once (1.7 s) for all of them rather than once per case. Every case
runs, whatever the others gave; the exit status is 1 if any failed.
"""
import sys


def run(main, argv=None):
    argv = sys.argv[1:] if argv is None else argv
    groups = [[]]
    for a in argv:
        if a == "--and":
            groups.append([])
        else:
            groups[-1].append(a)
    failed = 0
    for group in groups:
        try:
            rc = main(group)
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
        sys.stdout.flush()
        if rc:
            failed += 1
    if len(groups) > 1:
        print("%d of %d cases passed" % (len(groups) - failed, len(groups)))
    return 1 if failed else 0
