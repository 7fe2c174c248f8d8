"""Usage: python3 export_ids.py DATASET_DIR OUT_DIR

The ids export of one dataset as a Python script would do it: prompts by id
into a dict, then every answer line: input_ids = prompt ids + output_ids,
loss_mask 0s then 1s; truncated/aborted answers go to excluded.jsonl."""
import json, sys, os
d, out_dir = sys.argv[1], sys.argv[2]
prompts = {}
with open(os.path.join(d, "prompts.jsonl")) as f:
    for line in f:
        p = json.loads(line)
        prompts[p["id"]] = p["input_ids"]
with open(os.path.join(d, "raw_responses.jsonl")) as f, \
     open(os.path.join(out_dir, "tokenized.jsonl"), "w") as out, \
     open(os.path.join(out_dir, "excluded.jsonl"), "w") as exc:
    for line in f:
        a = json.loads(line)
        if a.get("finish_reason") in ("length", "abort") or "output_ids" not in a:
            exc.write(json.dumps({"id": a["id"], "reason": a.get("finish_reason") or "no_output_ids"}) + "\n")
            continue
        p = a.get("prompt_ids") or prompts[a["id"]]
        o = a["output_ids"]
        out.write(json.dumps({"id": a["id"], "input_ids": p + o, "loss_mask": [0] * len(p) + [1] * len(o)},
                             separators=(",", ":")) + "\n")
