"""The records of a JSON Lines results file (of a Context or a Cluster run), as the tests read them."""
import json


def lines_of(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]
