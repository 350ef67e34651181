"""Reads every .eval log in a folder with Inspect AI's own reader and
validates each against the JSON schema `inspect log schema` printed, for
rig's tests of `rig export inspect`. Prints one JSON object per log:
what Inspect read (samples, scores, errors, per-step log-probabilities,
results), for the Go test to compare with rig's own records.

usage: python read_eval.py LOG_DIR SCHEMA_JSON
"""
import json
import os
import sys
import zipfile

import jsonschema
from inspect_ai.log import read_eval_log


def validate(path, schema):
    # The schema describes the whole EvalLog (the .json form); an .eval zip
    # holds the same log split into members, so it is joined back here.
    with zipfile.ZipFile(path) as z:
        doc = json.loads(z.read("header.json"))
        doc["samples"] = [json.loads(z.read(n)) for n in sorted(z.namelist()) if n.startswith("samples/")]
        doc["reductions"] = json.loads(z.read("reductions.json"))
    root = dict(schema)
    root["$ref"] = "#/components/schemas/EvalLog"
    validator = jsonschema.Draft202012Validator(root)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message[:300]) for e in errors[:20]]


def main():
    log_dir, schema_path = sys.argv[1], sys.argv[2]
    with open(schema_path) as f:
        schema = json.load(f)
    for name in sorted(os.listdir(log_dir)):
        if not name.endswith(".eval"):
            continue
        path = os.path.join(log_dir, name)
        log = read_eval_log(path)
        samples = []
        for s in log.samples:
            steps = []
            choice = s.output.choices[0] if s.output.choices else None
            if choice is not None and choice.logprobs is not None:
                for lp in choice.logprobs.content:
                    steps.append({"token": lp.token, "logprob": lp.logprob,
                                  "top": [[t.token, t.logprob] for t in (lp.top_logprobs or [])]})
            samples.append({
                "id": s.id, "epoch": s.epoch, "input": s.input if isinstance(s.input, str) else None,
                "target": s.target, "completion": s.output.completion,
                "scores": {k: v.value for k, v in (s.scores or {}).items()},
                "error": s.error.message if s.error else None,
                "retries": len(s.error_retries or []),
                "metadata": s.metadata, "steps": steps,
                "input_tokens": s.model_usage and next(iter(s.model_usage.values())).input_tokens,
                "total_time": s.total_time,
            })
        metrics = {}
        if log.results is not None:
            for sc in log.results.scores:
                for m in sc.metrics.values():
                    metrics[sc.name + "/" + m.name] = m.value
        print(json.dumps({
            "file": name, "status": log.status, "task": log.eval.task, "model": log.eval.model,
            "dataset": log.eval.dataset.name, "revision": log.eval.revision.commit if log.eval.revision else None,
            "model_args": log.eval.model_args, "samples": samples, "metrics": metrics,
            "schema_errors": validate(path, schema),
        }))


if __name__ == "__main__":
    main()
