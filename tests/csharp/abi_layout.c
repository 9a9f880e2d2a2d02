/* The C layout of reach.h's structs, as "Type size" and "Type.Field offset" lines named as the C#
 * binding (bindings/csharp/ReachNative.cs) names them: the C# suite checks its declarations against
 * these, so a struct the header changes cannot drift from the binding unnoticed. */
#include <reach.h>
#include <stddef.h>
#include <stdio.h>

#define SIZE(cs, c) printf("%s %zu\n", cs, sizeof(c))
#define FIELD(cs, c, csf, cf) printf("%s.%s %zu\n", cs, csf, offsetof(c, cf))

int main(void) {
  SIZE("ReachDeviceInfo", reach_device_info);
  FIELD("ReachDeviceInfo", reach_device_info, "Driver", driver);
  FIELD("ReachDeviceInfo", reach_device_info, "Type", type);
  FIELD("ReachDeviceInfo", reach_device_info, "VramBytes", vram_bytes);
  FIELD("ReachDeviceInfo", reach_device_info, "SubgroupArithmetic", subgroup_arithmetic);

  SIZE("ReachDeviceParams", reach_device_params);
  FIELD("ReachDeviceParams", reach_device_params, "Name", name);
  FIELD("ReachDeviceParams", reach_device_params, "PipelineCacheDir", pipeline_cache_dir);
  FIELD("ReachDeviceParams", reach_device_params, "UseEnvironment", use_environment);
  FIELD("ReachDeviceParams", reach_device_params, "DeviceProfile", device_profile);

  SIZE("ReachAdoptParams", reach_adopt_params);
  FIELD("ReachAdoptParams", reach_adopt_params, "QueueFamily", queue_family);
  FIELD("ReachAdoptParams", reach_adopt_params, "Queue", queue);
  FIELD("ReachAdoptParams", reach_adopt_params, "PipelineCacheDir", pipeline_cache_dir);
  FIELD("ReachAdoptParams", reach_adopt_params, "UseEnvironment", use_environment);
  FIELD("ReachAdoptParams", reach_adopt_params, "GetInstanceProcAddr", get_instance_proc_addr);

  SIZE("ReachModelParams", reach_model_params);
  FIELD("ReachModelParams", reach_model_params, "Progress", progress);
  FIELD("ReachModelParams", reach_model_params, "RequireTokenizer", require_tokenizer);
  FIELD("ReachModelParams", reach_model_params, "Quantize", quantize);

  SIZE("ReachModelInfo", reach_model_info);
  FIELD("ReachModelInfo", reach_model_info, "MaxPositionEmbeddings", max_position_embeddings);
  FIELD("ReachModelInfo", reach_model_info, "WeightBytes", weight_bytes);
  FIELD("ReachModelInfo", reach_model_info, "EosId", eos_id);
  FIELD("ReachModelInfo", reach_model_info, "HasTokenizer", has_tokenizer);

  SIZE("ReachReplyParams", reach_reply_params);
  FIELD("ReachReplyParams", reach_reply_params, "Stop", stop);
  FIELD("ReachReplyParams", reach_reply_params, "NStop", n_stop);
  FIELD("ReachReplyParams", reach_reply_params, "Channels", channels);

  SIZE("ReachReplyText", reach_reply_text);
  FIELD("ReachReplyText", reach_reply_text, "Content", content);
  FIELD("ReachReplyText", reach_reply_text, "ContentLen", content_len);
  FIELD("ReachReplyText", reach_reply_text, "ReasoningLen", reasoning_len);
  FIELD("ReachReplyText", reach_reply_text, "Stopped", stopped);

  SIZE("ReachSamplingParams", reach_sampling_params);
  FIELD("ReachSamplingParams", reach_sampling_params, "TopP", top_p);
  FIELD("ReachSamplingParams", reach_sampling_params, "Seed", seed);

  SIZE("ReachSessionParams", reach_session_params);
  FIELD("ReachSessionParams", reach_session_params, "LTest", l_test);
  FIELD("ReachSessionParams", reach_session_params, "RopeScaling", rope_scaling);
  FIELD("ReachSessionParams", reach_session_params, "QkNorm", qk_norm);
  FIELD("ReachSessionParams", reach_session_params, "AttnSinks", attn_sinks);
  FIELD("ReachSessionParams", reach_session_params, "SchemeFlags", scheme_flags);
  FIELD("ReachSessionParams", reach_session_params, "Sampling", sampling);
  FIELD("ReachSessionParams", reach_session_params, "Profile", profile);
  FIELD("ReachSessionParams", reach_session_params, "FullKv", full_kv);
  FIELD("ReachSessionParams", reach_session_params, "CacheTypeK", cache_type_k);
  FIELD("ReachSessionParams", reach_session_params, "CacheTypeV", cache_type_v);

  SIZE("ReachKvPoolParams", reach_kv_pool_params);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "Tokens", tokens);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "Bytes", bytes);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "BlockRows", block_rows);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "CacheTypeK", cache_type_k);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "CacheTypeV", cache_type_v);
  FIELD("ReachKvPoolParams", reach_kv_pool_params, "RotatedKeys", rotated_keys);

  SIZE("ReachKvPoolInfo", reach_kv_pool_info);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "BlockRows", block_rows);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "Sessions", sessions);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "Bytes", bytes);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "BytesPerToken", bytes_per_token);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "PrefixHits", prefix_hits);
  FIELD("ReachKvPoolInfo", reach_kv_pool_info, "PrefixHitTokens", prefix_hit_tokens);
  return 0;
}
