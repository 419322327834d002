#!/usr/bin/env python3
"""Checks that docs/Language.md documents every word of the .tfm language.

usage: check_language_doc.py KEYS_DEF LANGUAGE_MD

Reads the schema of the language from Keys.def (TFM_SECTION, TFM_KEY_NAME,
TFM_KEY, TFM_VALUE, TFM_ARG, TFM_ARG_VALUE, with one-parameter helper
macros such as TFM_HF_TYPE expanded) and checks, in the Markdown reference:

- every section S has a heading naming it in backticks (`S`); the first such
  heading opens the section's part of the reference, which runs to the next
  heading;
- every key K of S has a row of a table in that part whose first cell is
  `K`, and no row there names a key that S does not have;
- every value word of K and every call with its named arguments, and every
  word an argument accepts, appear in code spans of K's row;
- an optional argument with a default states it (`theta = 10000`,
  `style = half`), except integer arguments whose default is computed from
  other keys (Keys.def writes those as 0);
- every key name (TFM_KEY_NAME) appears somewhere in a code span.

Prints one line per missing item and exits 1 if there is any; otherwise
prints a summary and exits 0. The Hugging Face spellings of Keys.def
(TFM_HF_NAME, TFM_HF_WORD) are not words of the language and are not checked.
"""
import re
import sys

KNOWN_MACROS = {
    "TFM_SECTION", "TFM_NESTED", "TFM_KEY_NAME", "TFM_KEY", "TFM_VALUE",
    "TFM_ARG", "TFM_ARG_VALUE", "TFM_HF_NAME", "TFM_HF_WORD",
}


def fail(msg):
    print("error: " + msg)
    sys.exit(1)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def expand_helpers(text):
    """Expands `#define NAME(P) BODY` helper macros of one parameter."""
    text = text.replace("\\\n", " ")
    helpers = {}
    for m in re.finditer(r"^#define\s+(\w+)\((\w+)\)\s+(.*)$", text, re.M):
        helpers[m.group(1)] = (m.group(2), m.group(3))
    text = re.sub(r"^#.*$", "", text, flags=re.M)
    for name, (param, body) in helpers.items():
        def subst(m, param=param, body=body):
            return re.sub(r"\b%s\b" % param, lambda _: m.group(1), body)
        text = re.sub(r"\b%s\(([^()]*)\)" % name, subst, text)
    return text


def split_args(s):
    """Splits the arguments of a macro invocation (strings may hold commas)."""
    out, cur, quoted = [], "", False
    for c in s:
        if c == '"':
            quoted = not quoted
        if c == "," and not quoted:
            out.append(cur.strip())
            cur = ""
        else:
            cur += c
    out.append(cur.strip())
    return out


def unquote(s):
    if not (s.startswith('"') and s.endswith('"')):
        fail("Keys.def: expected a string, got " + s)
    return s[1:-1]


def parse_keys_def(path):
    with open(path) as f:
        text = expand_helpers(strip_comments(f.read()))
    sections = {}    # Id -> spelling, in order
    key_names = {}   # Id -> spelling
    keys = []        # (section Id, key Id, kind, need)
    values = {}      # (section Id, key Id) -> [word]
    args = {}        # (section Id, key Id, word) -> [(arg, kind, need, default)]
    arg_words = {}   # (section Id, key Id, word, arg) -> [word]
    for m in re.finditer(r"\b(TFM_\w+)\s*\(((?:[^()\"]|\"[^\"]*\")*)\)", text):
        macro, a = m.group(1), split_args(m.group(2))
        if macro not in KNOWN_MACROS:
            fail("Keys.def: unknown entry %s(...): teach %s about it"
                 % (macro, sys.argv[0]))
        if macro == "TFM_SECTION":
            sections[a[0]] = unquote(a[1])
        elif macro == "TFM_KEY_NAME":
            key_names[a[0]] = unquote(a[1])
        elif macro == "TFM_KEY":
            keys.append((a[0], a[1], a[2], a[3]))
        elif macro == "TFM_VALUE":
            values.setdefault((a[0], a[1]), []).append(unquote(a[2]))
        elif macro == "TFM_ARG":
            args.setdefault((a[0], a[1], unquote(a[2])), []).append(
                (unquote(a[3]), a[4], a[5], a[6]))
        elif macro == "TFM_ARG_VALUE":
            arg_words.setdefault(
                (a[0], a[1], unquote(a[2]), unquote(a[3])), []).append(
                    unquote(a[4]))
    if not sections or not keys or not values or not args:
        fail("Keys.def: found no sections, keys, values or arguments in " +
             path)
    return sections, key_names, keys, values, args, arg_words


def code_spans(line):
    return re.findall(r"`([^`]+)`", line)


def identifiers(spans):
    out = set()
    for s in spans:
        out.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s))
    return out


def table_cells(row):
    """The cells of a Markdown table row (escaped pipes stay in a cell)."""
    cells = re.split(r"(?<!\\)\|", row.strip())
    return [c.strip() for c in cells[1:-1]]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sections, key_names, keys, values, args, arg_words = parse_keys_def(
        sys.argv[1])
    with open(sys.argv[2]) as f:
        doc = f.read().splitlines()

    # Code blocks are not headings nor tables.
    in_code = False
    lines = []  # (line number, text, is_code)
    for n, line in enumerate(doc, 1):
        if line.lstrip().startswith("```"):
            in_code = not in_code
            lines.append((n, line, True))
            continue
        lines.append((n, line, in_code))
    headings = [i for i, (_, l, code) in enumerate(lines)
                if not code and re.match(r"#{1,6}\s", l)]

    missing = []
    all_spans = []
    for _, l, code in lines:
        all_spans += code_spans(l) if not code else [l]
    all_ids = identifiers(all_spans)

    checked = 0
    for sec_id, sec in sections.items():
        start = next((h for h in headings
                      if "`%s`" % sec in lines[h][1]), None)
        checked += 1
        if start is None:
            missing.append("section '%s': no heading naming `%s`" % (sec, sec))
            continue
        end = next((h for h in headings if h > start), len(lines))
        rows = {}
        for i in range(start + 1, end):
            n, l, code = lines[i]
            if code or not l.lstrip().startswith("|"):
                continue
            cells = table_cells(l)
            if not cells:
                continue
            m = re.fullmatch(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
            if m:
                rows[m.group(1)] = (n, l)
        sec_keys = [(k, kind, need) for s, k, kind, need in keys
                    if s == sec_id]
        names = {key_names[k] for k, _, _ in sec_keys}
        for name, (n, _) in rows.items():
            if name not in names:
                missing.append("section '%s': line %d documents `%s`, which "
                               "is not one of its keys in Keys.def"
                               % (sec, n, name))
        for k, kind, need in sec_keys:
            key = key_names[k]
            checked += 1
            if key not in rows:
                missing.append("section '%s': key '%s' has no row `%s` in "
                               "its table" % (sec, key, key))
                continue
            n, row = rows[key]
            spans = code_spans(row)
            ids = identifiers(spans)
            for word in values.get((sec_id, k), []):
                checked += 1
                if word not in ids:
                    missing.append("section '%s': value '%s' of key '%s' is "
                                   "missing from its row (line %d)"
                                   % (sec, word, key, n))
                for arg, akind, aneed, default in args.get(
                        (sec_id, k, word), []):
                    checked += 1
                    if not any(re.search(r"\b%s\s*=" % arg, s)
                               for s in spans):
                        missing.append(
                            "section '%s': argument '%s' of '%s' (key '%s') "
                            "is missing from its row (line %d)"
                            % (sec, arg, word, key, n))
                        continue
                    words = arg_words.get((sec_id, k, word, arg), [])
                    for w in words:
                        checked += 1
                        if w not in ids:
                            missing.append(
                                "section '%s': word '%s' of argument '%s' of "
                                "'%s' (key '%s') is missing from its row "
                                "(line %d)" % (sec, w, arg, word, key, n))
                    if aneed != "Optional":
                        continue
                    if akind == "Enum":
                        want = words[0]
                        ok = any(re.search(r"\b%s\s*=\s*%s\b" % (arg, want), s)
                                 for s in spans)
                    elif akind == "Int" and float(default) == 0:
                        continue  # computed from other keys
                    else:
                        want = default
                        ok = False
                        for s in spans:
                            for v in re.findall(
                                    r"\b%s\s*=\s*([0-9][0-9.eE+-]*)" % arg, s):
                                try:
                                    ok |= float(v) == float(default)
                                except ValueError:
                                    pass
                    checked += 1
                    if not ok:
                        missing.append(
                            "section '%s': the default of argument '%s' of "
                            "'%s' (key '%s') is not written '%s = %s' in its "
                            "row (line %d)" % (sec, arg, word, key, arg, want,
                                               n))
    for key in key_names.values():
        checked += 1
        if key not in all_ids:
            missing.append("key '%s' appears in no code span" % key)

    for m in missing:
        print("missing: " + m)
    if missing:
        print("%d of %d items of Keys.def are not documented in %s"
              % (len(missing), checked, sys.argv[2]))
        sys.exit(1)
    print("all %d items of Keys.def (%d sections, %d keys) are documented"
          % (checked, len(sections), len(keys)))


if __name__ == "__main__":
    main()
