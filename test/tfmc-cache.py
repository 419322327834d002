#!/usr/bin/python3 -S
# tfmc for the lit suite, with a cache of what it writes: many tests build
# the same small model with the same flags (a parity check, a generation
# check, an error message of the executable, a C program), and a build is a
# second or more of O3 and machine code. A build is looked up by the hash of
# everything it depends on:
#   - tfmc and the runtime libraries it links (size and modification time:
#     a rebuild of either invalidates every entry), and the host CPU
#     (--cpu=native is the default);
#   - its options, in any order and spelling (`--model m`, `-model=m`), the
#     output path left out;
#   - the content of the input file, whatever its path (tfmc writes the same
#     bytes for the same content; of the name, only whether it ends in
#     .mlir counts), for an executable, library or object without its
#     comment and blank lines (`tfmc import` writes the config's path in
#     one);
#   - where the build printed anything on stderr (a warning names the input
#     as given, and a line of it), the input's whole content and the input
#     and output paths as given too: that stderr is replayed on a hit.
# Cached: an executable, a shared library, an --emit stage written to
# `-o FILE` or to stdout, and -c's object with its header (`-o NAME.o`,
# header NAME.h). Everything else runs tfmc as it is: options the cache does
# not know (--mlir-*, --progress, ...), a subcommand, stdin, no -o where
# tfmc names the output itself, an output that is the input or not a
# regular file; and a build that fails is never stored.
#
# One Python process without site packages (-S): a hit costs a third of
# the CPU time of the shell script it replaces, whose stat, sha256sum, cut,
# grep and sort were a dozen processes per call.
#
# Environment (set by lit.cfg.py): TFMC_REAL, the tfmc to run;
# TFMC_CACHE_DIR, where the entries live; TFMC_CACHE_DEPS, the files whose
# size and time are part of every key; TFMC_CACHE_HOST, the host CPU;
# TFMC_CACHE_LOG, if set, a file that gets a line per call: hit, miss or
# run (uncached), and the arguments.
import hashlib
import os
import re
import shutil
import stat
import sys

REAL = os.environ.get("TFMC_REAL")
if not REAL:
    sys.exit("tfmc-cache.py: TFMC_REAL is not set")
DIR = os.environ.get("TFMC_CACHE_DIR", "")
LOG = os.environ.get("TFMC_CACHE_LOG", "")
ARGS = sys.argv[1:]

# The options whose value is the next argument (or after `=`), and the
# flags the key knows; any other option runs tfmc uncached.
VALUED = {"emit", "model", "target", "gpu-arch", "dtype", "cpu", "quantize",
          "codegen-threads", "tensor-parallel"}
FLAGS = {"c", "shared", "no-attention-fusion", "no-epilogue-fusion",
         "no-norm-fusion"}
# A comment or blank line of a .tfm file.
BLANK = re.compile(rb"[ \t\n\r\f\v]*(#.*)?")


def log(what):
    if LOG:
        with open(LOG, "a") as f:
            f.write(what + " " + " ".join(ARGS) + "\n")


def uncached():
    """Runs tfmc itself, uncached."""
    log("run")
    sys.stdout.flush()
    os.execv(REAL, [REAL] + ARGS)


def digest(data):
    return hashlib.sha256(data).hexdigest()[:32]


def same(a, b):
    """Whether two existing paths are the same file."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def not_plain(path):
    """A symbolic link, or something that exists and is not a file."""
    return os.path.islink(path) or (os.path.exists(path) and not os.path.isfile(path))


def main():
    if not DIR:
        os.execv(REAL, [REAL] + ARGS)
    # The arguments: the input, the output, and the options as NAME or
    # NAME=VALUE, for the key.
    inp = out = None
    kind, stage = "exe", "exe"
    opts = []
    want = None
    for a in ARGS:
        if want is not None:
            if want == "o":
                out = a
            else:
                opts.append(want + "=" + a)
                if want == "emit":
                    kind, stage = "emit", a
            want = None
            continue
        if a == "-o":
            want = "o"
        elif a.startswith("-"):
            opt = a[1:]
            if opt.startswith("-"):
                opt = opt[1:]
            name = opt.split("=", 1)[0]
            if opt == "c":
                kind = "obj"
            elif opt == "shared":
                kind = "shared"
            elif name == "emit" and "=" in opt:
                kind, stage = "emit", opt.split("=", 1)[1]
            if opt in VALUED:
                want = opt
                continue
            if not ((name in VALUED and "=" in opt) or opt in FLAGS):
                uncached()
            opts.append(opt)
        else:
            # One input, a regular file (not a subcommand and its folder).
            if inp is not None:
                uncached()
            inp = a
    if want is not None or inp is None or not os.path.isfile(inp):
        uncached()
    if (kind, stage) == ("emit", "exe"):
        kind = "exe"
    # Where the output goes: a file, or stdout for a text stage without -o.
    if not out or out == "-":
        if kind != "emit" or stage == "obj":
            uncached()
        out = None
    elif not_plain(out) or same(out, inp):
        # tfmc refuses these, or writes through them.
        uncached()
    header = None
    if kind == "obj":
        base = os.path.basename(out)
        if not (base.endswith(".o") and len(base) > 2):
            uncached()
        header = out[:-2] + ".h"
        if not_plain(header) or same(header, inp):
            uncached()

    ext = "mlir" if inp.endswith(".mlir") else "tfm"
    try:
        with open(inp, "rb") as f:
            text = f.read()
    except OSError:
        uncached()
    full = digest(text)
    content = full
    # An artifact is the same for a .tfm whose comment and blank lines
    # differ (as the header `tfmc import` writes, which names the config
    # it read).
    if ext == "tfm" and (kind in ("exe", "obj", "shared") or stage == "obj"):
        kept = [l for l in text.split(b"\n") if not BLANK.fullmatch(l)]
        content = digest(b"\n".join(kept))
    deps = []
    for p in [REAL] + os.environ.get("TFMC_CACHE_DEPS", "").split():
        try:
            s = os.stat(p)
            deps.append("%s %d %d" % (p, s.st_size, int(s.st_mtime)))
        except OSError:
            deps.append(p + " missing")
    key = digest("\n".join(
        deps + ["host " + os.environ.get("TFMC_CACHE_HOST", ""),
                "input %s %s" % (ext, content),
                "output " + ("file" if out else "")] + sorted(opts)).encode())
    # The entry of a build that printed something on stderr (which names
    # the input, and lines of it).
    pathkey = digest("\n".join([key, full, inp, out or ""]).encode())

    # A hit: the output (and header) from the entry, and its stderr.
    for e in (os.path.join(DIR, key), os.path.join(DIR, pathkey)):
        if not os.path.isfile(e + ".out"):
            continue
        try:
            if out is None:
                with open(e + ".out", "rb") as f:
                    sys.stdout.buffer.write(f.read())
                sys.stdout.flush()
            else:
                for src, dst in [(e + ".out", out)] + ([(e + ".h", header)] if header else []):
                    if os.path.lexists(dst):
                        os.remove(dst)
                    shutil.copyfile(src, dst)
                    shutil.copymode(src, dst)
        except OSError:
            uncached()
        if os.path.isfile(e + ".err"):
            with open(e + ".err", "rb") as f:
                sys.stderr.buffer.write(f.read())
        log("hit")
        return 0

    # A miss: tfmc writes its output where it was asked; what it printed
    # is kept for the entry.
    import subprocess
    import tempfile
    try:
        os.makedirs(DIR, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="tmp.", dir=DIR)
    except OSError:
        uncached()
    log("miss")
    sys.stdout.flush()
    try:
        run = subprocess.run([REAL] + ARGS, stderr=subprocess.PIPE,
                             stdout=subprocess.PIPE if out is None else None)
        if out is None:
            sys.stdout.buffer.write(run.stdout)
            sys.stdout.flush()
        sys.stderr.buffer.write(run.stderr)
        sys.stderr.flush()
        if run.returncode == 0 and (out is None or os.path.isfile(out)) and \
                (header is None or os.path.isfile(header)):
            e = os.path.join(DIR, key)
            if run.stderr:
                e = os.path.join(DIR, pathkey)
                with open(e + ".err", "wb") as f:
                    f.write(run.stderr)
            # The .out last, by a rename: it says that the entry is whole
            # (two lit workers may store the same entry at once).
            if header:
                shutil.copyfile(header, os.path.join(tmp, "h"))
                os.replace(os.path.join(tmp, "h"), e + ".h")
            if out is None:
                with open(os.path.join(tmp, "out"), "wb") as f:
                    f.write(run.stdout)
            else:
                shutil.copy2(out, os.path.join(tmp, "out"))
            os.replace(os.path.join(tmp, "out"), e + ".out")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return run.returncode if run.returncode >= 0 else 128 - run.returncode


if __name__ == "__main__":
    sys.exit(main())
