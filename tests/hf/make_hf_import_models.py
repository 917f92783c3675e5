"""Writes the small random models the import test starts from, as transformers 4.36.2's
save_pretrained writes them, in shards (max_shard_size small enough for several files):

  OUT/gpt2       GPT2LMHeadModel (tied head), F32
  OUT/llama      LlamaForCausalLM: 4 heads, 2 k/v heads (GQA), SwiGLU, untied head, F32
  OUT/llama-bf16 the same Llama saved in bfloat16 (the import converts to fp32)
  OUT/mixtral    MixtralForCausalLM: 4 experts, top 2, GQA, F32
  OUT/tokens.bin random token ids (nanoGPT's raw uint16) for the runs' data

Usage: make_hf_import_models.py OUT
"""
import array
import glob
import os
import sys

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          MixtralConfig, MixtralForCausalLM)

VOCAB, SEQ = 96, 16


def save(model, path, **kw):
    model.save_pretrained(path, max_shard_size="40KB", safe_serialization=True, **kw)
    shards = glob.glob(os.path.join(path, "model-*-of-*.safetensors"))
    if len(shards) < 2:
        sys.exit(f"{path}: expected at least 2 shards, got {len(shards)}")
    print(f"{path}: {type(model).__name__} in {len(shards)} shards")


def main(out):
    torch.manual_seed(3)
    gpt2 = GPT2LMHeadModel(GPT2Config(
        vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=2, n_head=4,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    # Nonzero biases and LayerNorm parameters: a bias read from the wrong place would show.
    with torch.no_grad():
        for name, p in gpt2.named_parameters():
            if name.endswith(".bias") or ".ln_" in name:
                p.add_(0.05 * torch.randn_like(p))
    save(gpt2, os.path.join(out, "gpt2"))
    llama = LlamaForCausalLM(LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False))
    with torch.no_grad():
        for name, p in llama.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))
    save(llama, os.path.join(out, "llama"))
    save(llama.to(torch.bfloat16), os.path.join(out, "llama-bf16"))
    mixtral = MixtralForCausalLM(MixtralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        num_local_experts=4, num_experts_per_tok=2, sliding_window=None, rope_theta=10000.0))
    save(mixtral, os.path.join(out, "mixtral"))
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, VOCAB, (20000,), generator=g).tolist()
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        array.array("H", ids).tofile(f)


if __name__ == "__main__":
    main(sys.argv[1])
