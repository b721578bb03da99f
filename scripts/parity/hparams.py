"""The official config as the official code reads it: utils.HParams's attribute access over the
nested JSON, for the parity scripts that import the official modules."""
import json


class HParams(dict):
    def __getattr__(self, key):
        try:
            value = self[key]
        except KeyError as e:
            raise AttributeError(key) from e
        return HParams(value) if isinstance(value, dict) else value


def load_hparams(path):
    with open(path) as f:
        return HParams(json.load(f))
