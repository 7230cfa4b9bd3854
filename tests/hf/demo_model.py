#!/usr/bin/env python3
"""The shipped demo model (models/shakespeare) through transformers: the goldens `make test`
checks qhexrt against (tests/data/demo/), written with --write and rechecked with --check.

    $HF_VENV/bin/python tests/hf/demo_model.py --model models/shakespeare --data tests/data/demo --write
    $HF_VENV/bin/python tests/hf/demo_model.py --model models/shakespeare --data tests/data/demo --check

What it computes (float32 weights from the float16 file, eager attention, one thread):
  - the tokenizers library's ids of DATA/heldout_excerpt.txt (qhexrt's tokenizer must match),
  - the perplexity of that text as llama-perplexity computes it (windows of CTX tokens, each from
    an empty cache, the loss over the second half of each window),
  - greedy continuations (N_NEW tokens, stopping at <|endoftext|>) of the prompts of
    DATA/prompts.json,
  - the multi-token-prediction block's draft logits over one prompt: row i from the last layer's
    (normed) hidden state at position i and the id at i + 1, as the released checkpoints' block
    works (vLLM Qwen3_5MultiTokenPredictor): pre_fc_norm_embedding(embed(id)),
    pre_fc_norm_hidden(hidden), fc of their concatenation [embedding | hidden], one
    full-attention decoder layer at position i, mtp.norm, the shared head. The block is
    written below in plain torch (MtpReference), and checked against the same block built from
    transformers' own decoder layer (how scripts/train_demo.py trains it).
--check recomputes all of it and compares with the stored files: ids and greedy tokens equal,
perplexity within a relative 1e-5 (a rerun is normally bit-identical), MTP logits within 1e-4.
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("USE_HUB_KERNELS", "NO")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CTX = 128
N_NEW = 32
MTP_PROMPT = 0  # index into prompts.json


def load_model(path):
    import torch
    from transformers import Qwen3_5ForCausalLM
    m = Qwen3_5ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    m.eval()
    return m


def tokenizer_ids(path, text):
    from tokenizers import Tokenizer
    return Tokenizer.from_file(os.path.join(path, "tokenizer.json")).encode(text, add_special_tokens=False).ids


def perplexity(m, ids, ctx):
    import torch
    first, nll, nll2, count = ctx // 2, 0.0, 0.0, 0
    with torch.no_grad():
        for c in range(len(ids) // ctx):
            w = torch.tensor(ids[c * ctx:(c + 1) * ctx]).view(1, -1)
            lp = torch.log_softmax(m(input_ids=w).logits[0].double(), dim=-1)
            v = -lp[first:ctx - 1].gather(1, w[0, first + 1:].view(-1, 1)).view(-1)
            nll += float(v.sum())
            nll2 += float((v * v).sum())
            count += v.numel()
    mean = nll / count
    err = math.sqrt(max(nll2 / count - mean * mean, 0.0) / (count - 1))
    return {"ctx": ctx, "ppl": math.exp(mean), "stderr": math.exp(mean) * err, "mean_nll": mean, "tokens_scored": count}


def greedy(m, ids, n_new, eos):
    import torch
    with torch.no_grad():
        out = m.generate(torch.tensor([ids]), max_new_tokens=n_new, do_sample=False, eos_token_id=eos,
                         pad_token_id=eos)
    return [int(t) for t in out[0, len(ids):]]


class MtpReference:
    """The MTP block in plain torch from the checkpoint's mtp.* tensors (float32)."""

    def __init__(self, path, cfg):
        import torch
        from safetensors.torch import load_file
        w = {k: v.float() for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
        self.w, self.c = w, cfg
        self.embed = w["model.embed_tokens.weight"]
        self.head = w.get("lm_head.weight", self.embed)
        rot = int(cfg["head_dim"] * cfg["rope_parameters"]["partial_rotary_factor"])
        theta = cfg["rope_parameters"]["rope_theta"]
        self.rot = rot
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, rot, 2, dtype=torch.int64).float() / rot))

    def norm(self, x, name):
        import torch
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])
        return x * (1.0 + self.w[name])

    def rope(self, x, pos):
        import torch
        f = pos.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat([f, f], dim=-1)
        cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
        xr, xp = x[..., :self.rot], x[..., self.rot:]
        h = self.rot // 2
        rh = torch.cat([-xr[..., h:], xr[..., :h]], dim=-1)
        return torch.cat([xr * cos + rh * sin, xp], dim=-1)

    def attention(self, x, p):
        import torch
        c, T = self.c, x.shape[0]
        nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        qg = (x @ self.w[p + "q_proj.weight"].T).view(T, nh, 2 * hd)
        q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
        k = (x @ self.w[p + "k_proj.weight"].T).view(T, nkv, hd)
        v = (x @ self.w[p + "v_proj.weight"].T).view(T, nkv, hd)
        q, k = self.norm(q, p + "q_norm.weight"), self.norm(k, p + "k_norm.weight")
        pos = torch.arange(T)
        q, k = self.rope(q, pos), self.rope(k, pos)
        rep = nh // nkv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1)[None], float("-inf"))
        o = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v).reshape(T, nh * hd)
        return (o * torch.sigmoid(gate)) @ self.w[p + "o_proj.weight"].T

    def __call__(self, hidden, next_ids):
        """hidden (T, H): the main model's final normed states; next_ids (T,) -> logits (T, V)."""
        import torch
        e = self.norm(self.embed[next_ids], "mtp.pre_fc_norm_embedding.weight")
        h = self.norm(hidden, "mtp.pre_fc_norm_hidden.weight")
        x = torch.cat([e, h], dim=-1) @ self.w["mtp.fc.weight"].T
        p = "mtp.layers.0."
        x = x + self.attention(self.norm(x, p + "input_layernorm.weight"), p + "self_attn.")
        y = self.norm(x, p + "post_attention_layernorm.weight")
        mlp = (torch.nn.functional.silu(y @ self.w[p + "mlp.gate_proj.weight"].T) * (y @ self.w[p + "mlp.up_proj.weight"].T))
        x = x + mlp @ self.w[p + "mlp.down_proj.weight"].T
        return self.norm(x, "mtp.norm.weight") @ self.head.T


def mtp_via_transformers(m, path, hidden, next_ids):
    """The same block from transformers' Qwen3_5DecoderLayer, loaded with the mtp.* tensors."""
    import torch
    from safetensors.torch import load_file
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer
    cfg = m.config
    layer = Qwen3_5DecoderLayer(cfg, cfg.layer_types.index("full_attention")).float().eval()
    w = load_file(os.path.join(path, "model.safetensors"))
    layer.load_state_dict({k[len("mtp.layers.0."):]: v.float() for k, v in w.items() if k.startswith("mtp.layers.0.")})
    norm = m.model.norm.__class__
    ne, nh, nf = (norm(cfg.hidden_size, eps=cfg.rms_norm_eps) for _ in range(3))
    ne.weight.data, nh.weight.data = w["mtp.pre_fc_norm_embedding.weight"].float(), w["mtp.pre_fc_norm_hidden.weight"].float()
    nf.weight.data = w["mtp.norm.weight"].float()
    T = next_ids.shape[0]
    with torch.no_grad():
        x = torch.cat([ne(m.model.embed_tokens(next_ids)), nh(hidden)], dim=-1) @ w["mtp.fc.weight"].float().T
        pos = torch.arange(T).view(1, 1, -1).expand(3, 1, T)
        pe = m.model.rotary_emb(x[None], pos)
        mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
        y = layer(x[None], position_embeddings=pe, attention_mask=mask, position_ids=pos[0])
        return m.lm_head(nf(y))[0]


def mtp_logits(m, path, ids):
    import torch
    with torch.no_grad():
        hidden = m.model(input_ids=torch.tensor([ids])).last_hidden_state[0]
        nxt = torch.tensor(ids[1:])
        ref = MtpReference(path, m.config.to_dict())(hidden[:-1], nxt)
        via = mtp_via_transformers(m, path, hidden[:-1], nxt)
    d = float((ref - via).abs().max())
    if d > 1e-4:
        raise SystemExit("demo_model: the plain-torch MTP block and the transformers-layer one differ by %g" % d)
    return ref.numpy().astype("<f4"), d


def compute(model_dir, data):
    import numpy as np
    import torch
    import tokenizers
    import transformers
    torch.set_num_threads(1)
    with open(os.path.join(data, "heldout_excerpt.txt"), encoding="utf-8") as f:
        text = f.read()
    with open(os.path.join(data, "prompts.json"), encoding="utf-8") as f:
        prompts = json.load(f)
    m = load_model(model_dir)
    eos = m.config.eos_token_id
    ids = tokenizer_ids(model_dir, text)
    g = {"producer": "tests/hf/demo_model.py", "versions": {"torch": torch.__version__,
         "transformers": transformers.__version__, "tokenizers": tokenizers.__version__},
         "heldout_ids": ids, "perplexity": perplexity(m, ids, CTX), "n_new": N_NEW, "greedy": []}
    for p in prompts:
        pid = tokenizer_ids(model_dir, p)
        g["greedy"].append({"prompt": p, "ids": pid, "continuation": greedy(m, pid, N_NEW, eos)})
    mp = g["greedy"][MTP_PROMPT]
    mtp_ids = mp["ids"] + mp["continuation"]
    logits, d = mtp_logits(m, model_dir, mtp_ids)
    g["mtp"] = {"ids": mtp_ids, "rows": len(mtp_ids) - 1, "vocab": int(logits.shape[1]),
                "file": "mtp.logits.f32", "max_abs_plain_vs_transformers_layer": d}
    return g, logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/shakespeare")
    ap.add_argument("--data", default="tests/data/demo", help="heldout_excerpt.txt, prompts.json, the goldens")
    ap.add_argument("--out", help="--write: write the goldens here instead of into --data")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    a = ap.parse_args()
    import numpy as np
    g, logits = compute(a.model, a.data)
    gpath = os.path.join(a.data, "golden.json")
    if a.write:
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            gpath = os.path.join(a.out, "golden.json")
        with open(gpath, "w", encoding="utf-8") as f:
            json.dump(g, f, indent=1)
            f.write("\n")
        logits.tofile(os.path.join(os.path.dirname(gpath), g["mtp"]["file"]))
        print("demo_model: wrote %s (perplexity %.4f over %d tokens, %d prompts, %d MTP rows)" %
              (gpath, g["perplexity"]["ppl"], g["perplexity"]["tokens_scored"], len(g["greedy"]), g["mtp"]["rows"]))
        return
    with open(gpath, encoding="utf-8") as f:
        want = json.load(f)
    bad = []
    if g["heldout_ids"] != want["heldout_ids"]:
        bad.append("tokenizer ids of the held-out excerpt differ")
    r = abs(g["perplexity"]["ppl"] / want["perplexity"]["ppl"] - 1)
    if r > 1e-5:
        bad.append("perplexity %.6f vs stored %.6f (rel %.2g)" % (g["perplexity"]["ppl"], want["perplexity"]["ppl"], r))
    for x, y in zip(g["greedy"], want["greedy"]):
        if x["ids"] != y["ids"] or x["continuation"] != y["continuation"]:
            bad.append("greedy continuation of %r differs" % x["prompt"])
    stored = np.fromfile(os.path.join(a.data, want["mtp"]["file"]), dtype="<f4").reshape(want["mtp"]["rows"], -1)
    dm = float(np.abs(stored - logits).max()) if stored.shape == logits.shape else float("inf")
    if dm > 1e-4:
        bad.append("MTP logits differ from the stored ones by %g" % dm)
    for b in bad:
        print("FAIL " + b)
    print("demo_model: %s (perplexity %.6f, rel %.2g; MTP max |diff| %.2g)" %
          ("FAIL" if bad else "ok", g["perplexity"]["ppl"], r, dm))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
