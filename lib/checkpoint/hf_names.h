#pragma once
// How trainctl's parameters map onto a Hugging Face model's tensors, in both directions (the
// export writes them, the import reads them: one mapping for both). The names are the same:
// GPT's are nanoGPT's, which are GPT2LMHeadModel's, and Llama's are LlamaForCausalLM's. What
// differs is GPT-2's four projection matrices (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj): transformers' Conv1D stores them [in, out], trainctl (like nn.Linear)
// [out, in]. Llama's layouts agree, and trainctl's RoPE is transformers' rotate_half (the
// first and second halves of each head rotate together), so q_proj and k_proj need no
// permutation.
#include <string>

namespace trainctl::checkpoint {

// True for the GPT-2 weights stored transposed in a Hugging Face folder.
bool is_hf_conv1d_weight(const std::string& name);

// Tensors a Hugging Face folder may hold that are no parameter: attention-mask and rotary
// buffers older transformers versions saved. The import skips them.
bool is_hf_buffer(const std::string& name);

}  // namespace trainctl::checkpoint
