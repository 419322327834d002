#!/bin/sh
# A stand-in for tfmc in tfmc-cache.test: appends its arguments to
# $FAKE_TFMC_LOG and writes, where tfmc would, the input's text and the
# other arguments. An input holding "warn" gets a warning on stderr naming
# the input, one holding "fail" an error and exit status 1.
echo "tfmc $*" >>"$FAKE_TFMC_LOG"
in='' out='' obj='' emit='' prev='' rest=''
for a in "$@"; do
  case "$prev:$a" in
  -o:*) out=$a ;;
  --model:* | --emit:*) rest="$rest $a" ;;
  *:-o) ;;
  *:-c) obj=1 rest="$rest $a" ;;
  *:--emit*) emit=1 rest="$rest $a" ;;
  *:-) in=- ;;
  *:-*) rest="$rest $a" ;;
  *) in=$a ;;
  esac
  prev=$a
done
text="$(cat "$in") |$rest"
case "$text" in
*fail*) echo "$in:1:1: error: failed" >&2; exit 1 ;;
*warn*) echo "$in:1:1: warning: a warning" >&2 ;;
esac
if [ -z "$out" ] && [ -n "$emit" ]; then
  echo "$text"
  exit 0
fi
[ -n "$out" ] || out=${in%.tfm}.exe
echo "$text" >"$out"
[ -z "$obj" ] || echo "header of $text" >"${out%.o}.h"
[ -n "$emit$obj" ] || [ ! -f "$out" ] || chmod +x "$out"
