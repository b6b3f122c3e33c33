#!/usr/bin/env python3
"""Renders charts/ramjet with Helm's own engine and prints the manifests as one JSON list.

Used by the cluster tests (tests/cluster/) to apply exactly what `helm install` would create.
Run through tests/chart/run.sh --render RELEASE NAMESPACE [VALUES_JSON].
"""

import json
import sys
from pathlib import Path

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "ramjet"


def main() -> None:
    release, namespace = sys.argv[1], sys.argv[2]
    values = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values or None, name=release, namespace=namespace, is_install=True)
    docs = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    json.dump(docs, sys.stdout)


if __name__ == "__main__":
    main()
