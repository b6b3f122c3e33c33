#!/usr/bin/env python3
"""Writes charts/ramjet/README.md from the chart's values.yaml: every value documented with a
`# -- ` comment (helm-docs' convention), its default and its description, in the file's order.

    python3 tests/chart/readme.py            # rewrite charts/ramjet/README.md
    python3 tests/chart/readme.py --check    # exit 1 when it is out of date (the chart tests run this)
"""

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "ramjet"

HEADER = """# ramjet Helm chart

The Kubernetes ingress controller and edge proxy [Ramjet](../../README.md): a configuration change
is one pointer store. `docs/getting-started.md` installs it step by step;
`docs/troubleshooting.md` helps when something does not work.

```sh
helm install ramjet charts/ramjet -n ramjet-ingress --create-namespace
```

This file is generated from the comments in `values.yaml` (`python3 tests/chart/readme.py`; the
chart tests fail when it is out of date).

## Values

| Key | Default | Description |
|---|---|---|
"""


def documented(text: str):
    """(dotted key, description) for each key with a `# -- ` comment, in the file's order."""
    path: list[tuple[int, str]] = []
    comment: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("# -- "):
            comment = [stripped[5:]]
            continue
        if stripped.startswith("#"):
            if comment is not None:
                comment.append(stripped[1:].strip())
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_]+):", line)
        if not m:
            comment = None
            continue
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, m.group(2)))
        if comment is not None:
            yield ".".join(k for _, k in path), " ".join(c for c in comment if c)
        comment = None


def default(values: dict, key: str) -> str:
    node = values
    for part in key.split("."):
        node = node[part]
    return json.dumps(node, separators=(",", ":"))


def render() -> str:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    rows = []
    for key, description in documented(text):
        cell = lambda s: s.replace("|", "\\|")
        rows.append(f"| `{key}` | `{cell(default(values, key))}` | {cell(description)} |")
    return HEADER + "\n".join(rows) + "\n"


def main():
    out = render()
    readme = CHART / "README.md"
    if "--check" in sys.argv:
        if not readme.exists() or readme.read_text() != out:
            sys.exit("charts/ramjet/README.md is out of date: run python3 tests/chart/readme.py")
        return
    readme.write_text(out)


if __name__ == "__main__":
    main()
