#pragma once
// One sequence being processed by a model: the KV cache, the recorded forward
// programs (one per chunk length, one for decode), and the logits.
//
// Programs are recorded once and resubmitted: per step only the token ids and
// the StepParams buffer (positions) change, never the command buffer.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/command.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"
#include "runtime/config/position_schemes.hpp"
#include "runtime/model/model.hpp"
#include "runtime/session/activation_tuning.hpp"
#include "runtime/session/forward.hpp"
#include "runtime/session/key_calibration.hpp"
#include "runtime/session/kv_pool.hpp"
#include "runtime/session/submit_parts.hpp"

namespace reach {

// Prefill chunk length when none is given: long enough to keep the GEMMs
// efficient, short enough that a chunk's scratch stays small.
inline constexpr uint32_t kDefaultPrefillChunk = 256;

struct SessionOptions {
  uint32_t context = 0;          // KV-cache capacity in tokens; 0 = min(max_position_embeddings, 4096)
  uint32_t chunk = kDefaultPrefillChunk;   // prefill chunk length; 0 = the default
  int64_t l_test = 0;            // dynamic scaling's L_test (prompt + max new tokens); 0 = context
  SchemeOverrides overrides;     // CLI / API overrides of config.json's schemes
  bool profile = false;          // timestamps per dispatch
  // Sliding-window layers (e.g. Gemma 3's local layers) keep only their window
  // (plus a prefill chunk) of keys in a ring: memory O(window), not O(context),
  // at the price of how far rewind can go back (rewind_floor).  true keeps
  // every position for every layer.
  bool full_kv = false;
  // How the KV cache stores keys and values (base/kv_type.hpp; -ctk / -ctv): f32, f16, q8_0 or q4_0 blocks.
  // Front ends default to f16 (half the memory); the library's stays f32, the exact setting reference suites check.
  KvType cache_type_k = KvType::f32, cache_type_v = KvType::f32;
  // Decode steps (and batched decode rows) run the fused layer: norms, biases, residual adds and the gated
  // activation folded into the mat-vecs, and the attention's KV store, per-head q/k norms, split-K attention
  // and merge in one dispatch (runtime/session/forward.hpp).  false records the unfused kernels, the
  // reference the fused path is tested against.
  bool fused_decode = true;
  // q4_0 keys only: store them centred and smoothed by a calibration taken from the first prefill chunk
  // (runtime/session/key_calibration.hpp): exact in any case, and a third of q4_0's cost to the
  // perplexity.  false keeps plain q4_0 blocks (the comparison point).  A session on a KV pool follows
  // the pool's setting (KvPoolOptions::calibrate_keys).
  bool calibrate_keys = true;
  // Where calibration is on: start it from this file's statistics (KeyCalibration::load; written by
  // save_key_calibration): the first prefill then calibrates from thousands of rows, not its own alone.
  // Ignored on a KV pool (KvPoolOptions::key_calib_file).
  std::string key_calib_file;
  // Activations against quantized W: exact f32, int8 (rounded to Q8 blocks, integer dot products:
  // kernels/linear_q8.cpp), or `device`: what `reach tune` measured faster for this device and model, per phase
  // (runtime/session/activation_tuning.hpp; exact where it measured nothing).
  QuantActivations activations = QuantActivations::device;
  // Bounded submissions (runtime/session/submit_plan.hpp): how long one submission of a forward pass may
  // keep the GPU busy.  Unset: the device's Settings (REACH_SUBMIT_MS, REACH_SUBMIT_LAYERS).
  std::optional<SubmitBound> submit;
  // A paged cache shared with other sessions of the model (runtime/session/kv_pool.hpp) instead of a
  // cache of its own: the session takes blocks as it grows (a step the pool cannot supply fails before it
  // runs: kv_pool_full, "the KV pool is full"), gives them back when it rewinds or ends, and a prompt
  // starts from the blocks of an earlier sequence with the same leading tokens and position scheme.
  // cache_type_k / _v must be the pool's.  Sliding-window layers use no ring: when every layer is
  // windowed (and full_kv is off) the blocks behind the window go back to the pool as the session
  // moves on; otherwise they keep every position.
  std::shared_ptr<KvPool> kv_pool;
};

class Session {
 public:
  Session(Model& model, const SessionOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Appends tokens at the current position.  Logits of the last token are kept
  // (logits()); with all_logits, every row [n, vocab] is appended to *all_logits.
  void prefill(std::span<const int32_t> ids, std::vector<float>* all_logits = nullptr);
  // prefill, reading back each row's final hidden state (after the final norm, before the lm_head) instead
  // of logits: [n, hidden] appended to *hidden (embeddings: runtime/session/embedding.hpp).  logits()
  // keep their old values.  Throws unsupported for a model whose vocabulary is smaller than its hidden size.
  void prefill_hidden(std::span<const int32_t> ids, std::vector<float>& hidden);
  // Appends one token with the recorded decode program.
  void decode(int32_t id);
  // What prefill / decode (and decode_async, begin_decode_step) check, after
  // "no step in flight", before they touch anything: an empty prompt, the
  // capacity, every id.  They throw what those would; a call rejected by them
  // changes no state (the logits and the position stay as they were).
  void check_prefill(std::span<const int32_t> ids) const;
  void check_decode(int32_t id) const;

  // decode(id) without waiting: the same recorded program, submitted.  While
  // the step is in flight every call that touches the session's buffers
  // (prefill, decode, rewind, a second decode_async, begin/finish_decode_step)
  // is an invalid_argument Error.  poll_decode (never blocks) and wait_decode
  // (up to timeout_ns; UINT64_MAX: until done) return true once no step is in
  // flight; the one that sees the step finish reads the logits, position + 1.
  // A failed poll or wait (device lost ...) throws and ends the step.
  void decode_async(int32_t id);
  bool poll_decode();
  bool wait_decode(uint64_t timeout_ns);
  bool decode_pending() const { return async_ && async_->pending(); }
  // Signalled when a decode_async step completes, for hosts that wait on it
  // themselves (then poll_decode).  VK_NULL_HANDLE before the first decode_async.
  VkFence decode_fence() const { return async_ ? async_->fence() : VK_NULL_HANDLE; }
  std::span<const float> logits() const { return logits_; }

  uint32_t position() const { return pos_; }
  uint32_t capacity() const { return capacity_; }
  // Mixture of experts, for checks: the experts the router chose in the last step of `rows` rows (a prefill
  // chunk, or 1 for decode), [layer][row][top-k] flattened; a dense layer's entries are unspecified.  Empty
  // for a dense model.
  std::vector<int32_t> last_expert_ids(uint32_t rows) const;
  uint32_t chunk() const { return chunk_; }   // prefill chunk length
  // Forget everything after position n (n <= position(); n == 0 or
  // n >= rewind_floor(): a ring cache has overwritten the keys older ones need).
  void rewind(uint32_t n);
  // The lowest position above 0 that rewind accepts now (0: any).
  uint32_t rewind_floor() const;
  // Device bytes of the KV caches (keys, values, rotated keys) of all layers: with a pool, of the blocks
  // this session holds (shared ones included).
  uint64_t kv_cache_bytes() const;
  // Device bytes one more position takes in the KV caches of all layers (keys, values, rotated keys).
  uint64_t kv_bytes_per_token() const { return kv_bytes_per_token_; }
  // Rows per kv head of layer l's cache: capacity(), or a ring's sinks + ring.
  uint32_t kv_rows(size_t l) const;
  // "KV cache 12.0 MiB (...)": bytes, and the ring rows of sliding-window layers.
  std::string describe_kv_cache() const;
  void reset() { rewind(0); }
  // Writes the keys' calibration statistics (the session's own, or its pool's) to `path`, for
  // SessionOptions::key_calib_file.  invalid_argument when the session has none (keys not q4_0, calibration
  // off, or no layer that takes one).
  void save_key_calibration(const std::filesystem::path& path) const;
  // The keys' calibration this session stores by (its own, or its pool's); nullptr when it has none.
  const KeyCalibration* key_calibration() const { return key_calib_; }
  // The pool's block table of this session (nullptr without SessionOptions::kv_pool).
  const KvBlockTable* block_table() const { return table_ ? &*table_ : nullptr; }
  // Leading prompt rows the last prefill took from the pool's shared blocks instead of computing them.
  uint32_t last_prefix_rows() const { return last_prefix_rows_; }
  // Paged, at position 0: maps the pool's cached leading blocks of `prompt` (never its last token, whose
  // logits a prefill must compute) and moves to the position after them; the caller then prefills
  // prompt[returned..].  0 (nothing changed) without a pool, past position 0, or with blocks held.
  uint32_t map_prefix(std::span<const int32_t> prompt);
  // Paged: holds the blocks of positions [0, rows) now (copying shared ones this session will write),
  // so later steps up to `rows` cannot find the pool full.  A session windowed on every layer holds
  // only the most it needs at once (window_peak_blocks) and recycles its own.  kv_pool_full, holding
  // nothing new, when the pool cannot supply them; a no-op without a pool.
  void reserve_kv(uint32_t rows);
  // Whether a session of these options keeps rotated keys (LayerCache::k_rot) in some layer: a KvPool
  // for it needs KvPoolOptions::rotated_keys.
  static bool keeps_rotated_keys(const Model& model, const SessionOptions& options);
  // The options of a KvPool that serves sessions of these options (their cache types, rotated keys where
  // they read them), its size left at 0 for the caller.
  static KvPoolOptions pool_options(const Model& model, const SessionOptions& options);
  // The context (capacity) a session of these options gets.
  static uint32_t context_of(const Model& model, const SessionOptions& options);
  // Whether a session of these options, given no pool, keeps some sliding-window layer in a ring cache
  // (window + chunk - 1 rows, not the whole context).  A pool holds every position of such a layer
  // unless every layer is windowed, so there it takes more memory than the session's own caches.
  static bool rings_some_layer(const Model& model, const SessionOptions& options);

  const ModelConfig& config() const { return config_; }
  const ResolvedSchemes& schemes() const { return schemes_; }
  Model& model() const { return model_; }
  // GPU time per kernel label over the last submitted program (profile on).
  std::vector<KernelTiming> last_timings() const;
  // Dispatches and barriers the last submitted program recorded (one forward of its chunk), and the
  // submissions it was cut into.
  struct RecordCounts {
    uint32_t dispatches = 0, barriers = 0;              // the whole program
    uint32_t layer_dispatches = 0, layer_barriers = 0;  // its layers (all of them)
    uint32_t submissions = 0;
    double longest_submit_ns = -1;   // GPU time of its slowest submission; -1: not timed
  };
  RecordCounts last_counts() const;

  // Frame-budget embedding (C API): the one-token decode program recorded into
  // a command buffer the caller owns and submits (recording state; reach never
  // submits it).  Its descriptor sets live until the same buffer is recorded
  // again, forget_recording(cmd), or the Session dies.  Around each execution:
  // begin_decode_step checks the id and the capacity and writes the inputs;
  // finish_decode_step (after the GPU finished) reads the logits, position + 1.
  // Recording is allowed while a decode_async step is in flight (it reads and
  // writes no buffer); begin/finish_decode_step are not.
  void record_decode(VkCommandBuffer cmd);
  void forget_recording(VkCommandBuffer cmd);
  void begin_decode_step(int32_t id);
  void finish_decode_step();

  // Unique among the Sessions of this process (never reused, unlike an address):
  // DecodeBatch keys its recorded programs by it.
  uint64_t serial() const { return serial_; }
  // The options it was made with (DecodeBatch steps only sessions of equal options).
  const SessionOptions& options() const { return options_; }
  // The activations prefill and decode record (SessionOptions::activations, or for `device` the tuning file's
  // choice: runtime/session/activation_tuning.hpp) and where that choice came from.
  const PhaseActivations& activations() const { return activations_; }
  // The bound its forward passes are cut by (SessionOptions::submit, else the device's Settings).
  const SubmitBound& submit_bound() const { return submit_bound_; }
  const std::string& activations_source() const { return activations_source_; }

 private:
  friend class DecodeBatch;
  // One layer's attention for rows q/k/v/o of this sequence, bound to its own
  // KV cache, StepParams and decode scratch (record and DecodeBatch share them).
  LayerCache layer_cache(size_t l) const;
  // q: the chunk's query rows, for the keys' calibration of a prefill (nullptr: a decode row, none).
  void record_store_kv(CommandList& cmd, size_t l, const Act& k, const Act& v, const Act* q = nullptr);
  void record_attend(CommandList& cmd, size_t l, const Act& q, const Act& o, uint32_t n);
  // A decode row's store and attention in one dispatch (Attention::decode_fused), where
  // can_store_attend(l): the layer's cache allows it.  qk: per-head q/k RMSNorms to apply first.
  bool can_store_attend(size_t l) const;
  void record_store_attend(CommandList& cmd, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                           const QkRmsNorm* qk);
  // The fused step of a batch's rows in one dispatch: sessions that shares_attention with this one, each
  // row's step record (step_record) rows.step_stride bytes after the previous one in `steps`, its decode
  // scratch (decode_scratch_bytes, zeroed before the first step) rows.scratch_stride bytes apart.
  void record_store_attend_rows(CommandList& cmd, size_t l, const Act& q, const Act& k, const Act& v, const Act& o,
                                const QkRmsNorm* qk, const BufferRange& steps, const BufferRange& scratch,
                                const DecodeRows& rows);
  // The same rows' store, then (after a barrier the forward records) their attention, one dispatch each
  // (kv_store and the split-K decode with its combine): layers without the fused step, and sessions that
  // decode unfused.
  void record_store_kv_rows(CommandList& cmd, size_t l, const Act& k, const Act& v, const BufferRange& steps,
                            const DecodeRows& rows);
  void record_attend_rows(CommandList& cmd, size_t l, const Act& q, const Act& o, const BufferRange& steps,
                          const BufferRange& scratch, const DecodeRows& rows);
  // Whether `other`'s attention can run in the same dispatch as this session's: one KV pool (the same
  // cache buffers), the same position scheme, tables and capacity (the same layer specs and split plan),
  // and the same decode step (fused or not).
  bool shares_attention(const Session& other) const;
  // The step buffer's bytes as write_step_inputs last left them (StepParams and the block table).
  std::span<const uint8_t> step_record() const;
  uint64_t decode_scratch_bytes() const { return decode_scratch_.size(); }
  // Layer l's spec with its sink logits switched on when the layer has them (gpt-oss).
  AttentionSpec layer_spec(size_t l) const;
  BufferRange layer_sinks(size_t l) const;
  // Around a DecodeBatch step: check and write this row's inputs; take its logits, position + 1.
  void begin_batch_row(int32_t id);
  void finish_batch_row(const float* logits);

  // What a program reads back: the last row's logits, every row's, or every row's final hidden state.
  enum class Output : uint8_t { last_logits, all_logits, hidden };
  struct Program {
    std::unique_ptr<SubmitParts> parts;
    uint32_t n = 0;
    Output out = Output::last_logits;
  };
  Program& program(uint32_t n, Output out);
  ForwardCounts record(CommandList& cmd, uint32_t n, Output out, ForwardSteps steps = {});
  // Each step's estimated cost for n rows from position pos (submit_plan.hpp); empty when the
  // program's submissions are not timed (nothing to divide).
  std::vector<double> step_costs(uint32_t n, bool all_logits, uint32_t pos) const;
  std::vector<double> run_costs(const SubmitParts& parts, uint32_t n, bool all_logits) const;
  void run_step(const int32_t* ids, uint32_t n, std::vector<float>* all_logits, std::vector<float>* hidden = nullptr);
  void need_idle(const char* what) const;
  void check_ids(std::span<const int32_t> ids) const;
  void write_step_inputs(const int32_t* ids, uint32_t n);
  void read_decode_logits();
  void advance(uint32_t n);   // position + n, and what ring caches overwrote
  // A paged session: makes its table `rows` long, with the blocks rows [pos_, rows) go to written only
  // by it (copy-on-write); throws kv_pool_full, holding no new block, when the pool cannot.  A session
  // whose every layer is windowed first gives back the blocks behind its window (drop_behind_window).
  void reserve_rows(uint32_t rows);
  // Every layer windowed, in a pool: the blocks no later query reads (wholly past the sinks and behind
  // the window of the next query, pos_) go back to the pool.  The newest of them stays (the anchor):
  // the kernels read a dropped entry's rows through it (masked, but read, so they must be finite).
  void drop_behind_window();
  // Before a windowed session's prefill of n rows: throws kv_pool_full, changing nothing, unless the
  // pool can hold the most blocks the prefill holds at once (the sinks, window and a chunk).
  void check_window_prefill(uint32_t n) const;
  // The most blocks a windowed session holds at once: the sink blocks, the anchor, the window's and a
  // chunk's, and a copy-on-write spare.
  uint32_t window_peak_blocks() const;
  BufferRange step_range() const;   // StepParams, and a paged session's block table after it

  Model& model_;
  SessionOptions options_;
  ModelConfig config_;
  ResolvedSchemes schemes_;
  Attention attention_;
  uint64_t serial_ = 0;
  PhaseActivations activations_;
  std::string activations_source_;
  uint32_t capacity_ = 0, chunk_ = 0, pos_ = 0;

  // Device buffers.
  Buffer rope1_, rope2_, rope_local_;
  RopeTable table1_, table2_, table_local_;   // table_local_: the local layers' (base rope_local_theta)
  std::vector<Buffer> k_cache_, v_cache_;
  std::vector<Buffer> k_rot_;   // per layer; empty unless wants_rotated_keys (LayerCache::k_rot)
  // The keys' calibration: the session's own (no pool), or the pool's; null when keys are not
  // calibrated in any layer of this session.
  KeyCalibration own_key_calib_;
  KeyCalibration* key_calib_ = nullptr;
  std::vector<uint32_t> ring_;       // per layer: LayerCache::ring (0: every position)
  std::vector<uint32_t> ring_lost_;  // per layer: keys [sinks, this) may be overwritten
  uint64_t kv_cache_bytes_ = 0, kv_bytes_per_token_ = 0;
  Buffer step_, decode_scratch_;
  // Paged (SessionOptions::kv_pool): the block table, the token of each computed row (the prefix index
  // keys full blocks by them), the ids of the step in flight, and what separates this session's rows
  // from other sessions' with the same tokens (the position scheme).
  std::shared_ptr<KvPool> pool_;
  std::optional<KvBlockTable> table_;
  std::vector<int32_t> tokens_, step_ids_;
  uint64_t prefix_salt_ = 0;
  uint32_t last_prefix_rows_ = 0;
  // Every layer windowed (and no full_kv): the window and sinks blocks are dropped behind (0: none),
  // and the rows [sinks, dropped_to_) whose blocks went back (0: none yet).
  uint32_t drop_window_ = 0, drop_sinks_ = 0, dropped_to_ = 0;
  ForwardScratch fwd_;   // token ids, activations and logits of chunks of chunk_ rows
  std::vector<float> logits_;
  std::map<std::pair<uint32_t, Output>, Program> programs_;
  SubmitBound submit_bound_;
  const SubmitParts* last_ = nullptr;   // the program last submitted (not record_decode's buffers)
  SubmitParts* async_ = nullptr;   // the decode program, once decode_async submitted it
  std::map<VkCommandBuffer, std::unique_ptr<CommandList>> recordings_;   // record_decode
};

}  // namespace reach
