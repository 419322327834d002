#!/bin/sh
# tfmc for the lit suite, with a cache of the executables it builds: many
# tests build the same small model with the same flags (a parity check, a
# generation check, an error message of the executable), and each build is
# a second of O3 and machine code. A build is looked up by the hash of
# everything it depends on:
#   - tfmc and the runtime libraries it links (size and modification time:
#     a rebuild of either invalidates every entry),
#   - its arguments, the output path left out,
#   - the content of every argument that is a file (the .tfm).
# Only a plain executable build is cached (`-o OUT`, no -c, --shared, --emit,
# tensor parallelism, subcommand or stdin); its stderr (warnings) is replayed
# on a hit. Everything else runs tfmc as it is.
#
# Environment (set by lit.cfg.py): TFMC_REAL, the tfmc to run;
# TFMC_CACHE_DIR, where the entries live; TFMC_CACHE_DEPS, the files whose
# size and time are part of every key.
set -u
real=${TFMC_REAL:?}
dir=${TFMC_CACHE_DIR:-}
[ -n "$dir" ] || exec "$real" "$@"

out=
prev=
for a in "$@"; do
  case "$a" in
  -c | --shared | --emit=* | --emit | --tensor-parallel* | import | - | \
    --mlir-timing | --progress*)
    exec "$real" "$@" ;;
  esac
  [ "$prev" = "-o" ] && out=$a
  # A folder's content is not hashed.
  [ -d "$a" ] && exec "$real" "$@"
  prev=$a
done
[ -n "$out" ] || exec "$real" "$@"

key=$(
  {
    # shellcheck disable=SC2086
    stat -L -c '%n %s %Y' "$real" ${TFMC_CACHE_DEPS:-}
    prev=
    for a in "$@"; do
      if [ "$prev" = "-o" ]; then
        echo "arg @OUT@"
      else
        echo "arg $a"
        [ -f "$a" ] && sha256sum <"$a"
      fi
      prev=$a
    done
  } | sha256sum | cut -c1-32
)
entry=$dir/$key
if [ -f "$entry.exe" ]; then
  cp "$entry.exe" "$out" && cat "$entry.err" >&2 && exit 0
fi

mkdir -p "$dir"
err=$(mktemp "$dir/err.XXXXXX")
"$real" "$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ $rc -eq 0 ] && [ -f "$out" ]; then
  # Atomically: two lit workers may build the same entry at once.
  tmp=$(mktemp "$dir/exe.XXXXXX")
  cp "$out" "$tmp" && chmod +x "$tmp" && mv "$err" "$entry.err" &&
    mv "$tmp" "$entry.exe"
fi
rm -f "$err"
exit $rc
