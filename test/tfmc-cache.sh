#!/bin/sh
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
# Environment (set by lit.cfg.py): TFMC_REAL, the tfmc to run;
# TFMC_CACHE_DIR, where the entries live; TFMC_CACHE_DEPS, the files whose
# size and time are part of every key; TFMC_CACHE_HOST, the host CPU;
# TFMC_CACHE_LOG, if set, a file that gets a line per call: hit, miss or
# run (uncached), and the arguments.
set -u
real=${TFMC_REAL:?}
dir=${TFMC_CACHE_DIR:-}
log=${TFMC_CACHE_LOG:-}
[ -n "$dir" ] || exec "$real" "$@"

# Runs tfmc itself, uncached.
uncached() {
  [ -z "$log" ] || echo "run $*" >>"$log"
  exec "$real" "$@"
}
# Whether two existing paths are the same file.
same() {
  [ -e "$1" ] && [ -e "$2" ] &&
    [ "$(stat -L -c %d:%i "$1")" = "$(stat -L -c %d:%i "$2")" ]
}
hash() { sha256sum | cut -c1-32; }

# The arguments: the input, the output, and the options as NAME or
# NAME=VALUE, one a line (`opts`), for the key.
in=
out=
kind=exe
stage=exe
opts=
want=
for a in "$@"; do
  if [ -n "$want" ]; then
    case "$want" in
    o) out=$a ;;
    *) opts="$opts
$want=$a"
      [ "$want" != emit ] || kind=emit stage=$a ;;
    esac
    want=
    continue
  fi
  case "$a" in
  -o) want=o ;;
  -*)
    opt=${a#-}
    opt=${opt#-}
    case "$opt" in
    c) kind=obj ;;
    shared) kind=shared ;;
    emit=*) kind=emit stage=${opt#*=} ;;
    emit | model | target | gpu-arch | dtype | cpu | quantize | \
      codegen-threads | tensor-parallel)
      want=$opt
      continue
      ;;
    model=* | target=* | gpu-arch=* | dtype=* | cpu=* | quantize=* | \
      codegen-threads=* | tensor-parallel=* | no-attention-fusion | \
      no-epilogue-fusion | no-norm-fusion) ;;
    *) uncached "$@" ;;
    esac
    opts="$opts
$opt"
    ;;
  *)
    # One input, a regular file (not a subcommand and its folder).
    [ -z "$in" ] || uncached "$@"
    in=$a
    ;;
  esac
done
if [ -n "$want" ] || [ -z "$in" ] || [ ! -f "$in" ]; then
  uncached "$@"
fi
[ "$kind:$stage" != emit:exe ] || kind=exe
# Where the output goes: a file, or stdout for a text stage without -o.
if [ -z "$out" ] || [ "$out" = - ]; then
  case "$kind:$stage" in
  emit:obj | exe:* | shared:* | obj:*) uncached "$@" ;;
  esac
  out=
else
  # tfmc refuses these, or writes through them.
  if [ -L "$out" ] || { [ -e "$out" ] && [ ! -f "$out" ]; } ||
    same "$out" "$in"; then
    uncached "$@"
  fi
fi
header=
if [ "$kind" = obj ]; then
  case "${out##*/}" in
  ?*.o) header=${out%.o}.h ;;
  *) uncached "$@" ;;
  esac
  if [ -L "$header" ] || { [ -e "$header" ] && [ ! -f "$header" ]; } ||
    same "$header" "$in"; then
    uncached "$@"
  fi
fi

case "$in" in
*.mlir) ext=mlir ;;
*) ext=tfm ;;
esac
full=$(hash <"$in") || uncached "$@"
content=$full
# An artifact is the same for a .tfm whose comment and blank lines differ
# (as the header `tfmc import` writes, which names the config it read).
case "$ext:$kind:$stage" in
tfm:exe:* | tfm:obj:* | tfm:shared:* | tfm:emit:obj)
  content=$(grep -v '^[[:space:]]*\(#.*\)\{0,1\}$' "$in" | hash)
  ;;
esac
key=$(
  {
    # shellcheck disable=SC2086
    stat -L -c '%n %s %Y' "$real" ${TFMC_CACHE_DEPS:-}
    echo "host ${TFMC_CACHE_HOST:-}"
    echo "input $ext $content"
    echo "output ${out:+file}"
    printf '%s\n' "$opts" | sort
  } | hash
)
# The entry of a build that printed something on stderr (which names the
# input, and lines of it).
pathkey=$(printf '%s\n' "$key" "$full" "$in" "$out" | hash)

# A hit: the output (and header) from the entry, and its stderr.
replay() {
  if [ -z "$out" ]; then
    cat "$1.out" || return 1
  else
    { rm -f "$out" && cp "$1.out" "$out"; } 2>/dev/null || return 1
    if [ -n "$header" ]; then
      { rm -f "$header" && cp "$1.h" "$header"; } 2>/dev/null || return 1
    fi
  fi
  [ ! -f "$1.err" ] || cat "$1.err" >&2
  return 0
}
for e in "$dir/$key" "$dir/$pathkey"; do
  if [ -f "$e.out" ]; then
    replay "$e" || uncached "$@"
    [ -z "$log" ] || echo "hit $*" >>"$log"
    exit 0
  fi
done

# A miss: tfmc writes its output where it was asked; what it printed is
# kept for the entry.
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/tmp.XXXXXX") || uncached "$@"
[ -z "$log" ] || echo "miss $*" >>"$log"
if [ -z "$out" ]; then
  "$real" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  cat "$tmp/out"
else
  "$real" "$@" 2>"$tmp/err"
  rc=$?
fi
cat "$tmp/err" >&2
if [ $rc -eq 0 ] && { [ -z "$out" ] || [ -f "$out" ]; } &&
  { [ -z "$header" ] || [ -f "$header" ]; }; then
  e=$dir/$key
  if [ -s "$tmp/err" ]; then
    e=$dir/$pathkey
    mv "$tmp/err" "$e.err"
  fi
  # The .out last, by a rename: it says that the entry is whole (two lit
  # workers may store the same entry at once).
  if [ -n "$header" ]; then
    cp "$header" "$tmp/h" && mv "$tmp/h" "$e.h"
  fi &&
    { [ -z "$out" ] || cp -p "$out" "$tmp/out"; } &&
    mv "$tmp/out" "$e.out"
fi
rm -rf "$tmp"
exit $rc
