/*
 * cuzk: Filecoin PoRep commit-phase-2 (Groth16) prover, C ABI.
 *
 * Conventions (details in src/ffi.rs):
 * - Functions that can fail return cuzk_status_t: CUZK_STATUS_OK (0) or a stable error code,
 *   grouped by origin: 1xx input, 2xx parameters, 3xx device, 4xx out of memory, 5xx proving,
 *   9xx internal (901: a panic caught at the boundary).
 * - Each such call sets the calling OS thread's last-error message (empty on success); read it
 *   with cuzk_last_error_message() on the same thread before the next call. Go callers: lock
 *   the goroutine to its thread (runtime.LockOSThread) around the call and the read.
 *   Functions without a status (_free, cuzk_last_error_message) leave the message alone.
 * - cuzk_options_t can grow: it starts with its size; fill it with
 *   cuzk_options_init(&opts, sizeof opts) before changing fields.
 * - NULL is never dereferenced: a NULL handle, buffer (of non-zero length) or out-parameter is
 *   the input error CUZK_STATUS_INVALID_CONFIG naming the argument.
 * - Objects returned through out-parameters are owned by the caller and released with their
 *   _free function. Engines are thread-safe; _free must not race with other uses.
 * - Link the static library target/release/libcuzk.a with
 *   -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc (plus -lcuda for builds with the cuda feature).
 */

#ifndef CUZK_H
#define CUZK_H

/* Generated with cbindgen:0.29.2 */

/* Generated from src/ffi.rs by cbindgen (see cbindgen.toml): do not edit. Regenerate with
   CUZK_BLESS=1 cargo test --release --test ffi_header */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Length of a prover id in bytes.
#define CUZK_PROVER_ID_LEN 32

// Length of one partition's Groth16 proof in bytes (compressed A || B || C).
#define CUZK_PROOF_BYTES_PER_PARTITION 192

// Status of a cuzk call: `CUZK_STATUS_OK` (0) or an error code, grouped by origin.
//
// The numbers are stable (those of the Rust `cuzk::Error::code()`): 1xx input, 2xx
// parameters, 3xx device, 4xx out of memory, 5xx proving, 9xx internal. New codes may be added
// within a group; a caller should treat an unknown code by its hundreds. The message of the last
// failure on the calling thread is read with `cuzk_last_error_message`.
typedef enum cuzk_status_t {
    // Success.
    CUZK_STATUS_OK = 0,
    // The C1 output is not valid JSON of the expected shape (or the wrapper's base64 is bad).
    CUZK_STATUS_MALFORMED_INPUT = 100,
    // The C1 output is well formed but inconsistent.
    CUZK_STATUS_INVALID_INPUT = 101,
    // The prover id is not 32 bytes.
    CUZK_STATUS_INVALID_PROVER_ID = 102,
    // The C1 output's proof type is not one cuzk can prove.
    CUZK_STATUS_UNSUPPORTED_PROOF = 103,
    // An option, environment variable or argument (e.g. a `NULL` handle) cannot be used.
    CUZK_STATUS_INVALID_CONFIG = 104,
    // A Groth16 parameter or verifying-key file is missing.
    CUZK_STATUS_PARAMETERS_NOT_FOUND = 200,
    // A Groth16 parameter file is truncated, corrupt or for another circuit.
    CUZK_STATUS_PARAMETERS_INVALID = 201,
    // The GPU backend was requested but no usable device exists.
    CUZK_STATUS_NO_DEVICE = 300,
    // A device exists but cannot run cuzk's kernels.
    CUZK_STATUS_DEVICE_UNSUPPORTED = 301,
    // A CUDA driver call failed.
    CUZK_STATUS_CUDA = 302,
    // Not enough device memory, even for the smallest tier.
    CUZK_STATUS_OUT_OF_DEVICE_MEMORY = 400,
    // The host-memory budget does not allow even one partition.
    CUZK_STATUS_OUT_OF_HOST_MEMORY = 401,
    // Circuit synthesis failed.
    CUZK_STATUS_SYNTHESIS = 500,
    // A produced proof failed self-verification (never returned as a result).
    CUZK_STATUS_VERIFICATION_FAILED = 501,
    // The call was cancelled; no proof.
    CUZK_STATUS_CANCELLED = 502,
    // I/O error outside parameter files.
    CUZK_STATUS_IO = 900,
    // A panic was caught at the C boundary (a bug in cuzk); the engine stays usable.
    CUZK_STATUS_PANIC = 901,
    // Any other internal error (a bug in cuzk or a dependency).
    CUZK_STATUS_INTERNAL = 902,
} cuzk_status_t;

// Prover backend.
typedef enum cuzk_backend_t {
    // GPU when cuzk was built with CUDA and a usable device exists, else CPU (options only;
    // reported per partition as the backend that actually ran).
    CUZK_BACKEND_AUTO = 0,
    // CPU only.
    CUZK_BACKEND_CPU = 1,
    // GPU only (see `allow_cpu_fallback`).
    CUZK_BACKEND_GPU = 2,
} cuzk_backend_t;

// A stage of a proof, for timings. Numbers are stable; new stages may be added.
typedef enum cuzk_stage_t {
    // Parsing and validating the C1 output.
    CUZK_STAGE_PARSE = 0,
    // Loading (or reusing) the Groth16 parameters.
    CUZK_STAGE_LOAD_PARAMS = 1,
    // Circuit synthesis of one partition.
    CUZK_STAGE_SYNTHESIS = 2,
    // H polynomial (NTTs).
    CUZK_STAGE_NTT = 3,
    // MSM over the H query.
    CUZK_STAGE_MSM_H = 4,
    // MSM over the L query.
    CUZK_STAGE_MSM_L = 5,
    // MSM over the A query.
    CUZK_STAGE_MSM_A = 6,
    // MSM over the B query in G1.
    CUZK_STAGE_MSM_B_G1 = 7,
    // MSM over the B query in G2.
    CUZK_STAGE_MSM_B_G2 = 8,
    // Host-device transfers.
    CUZK_STAGE_TRANSFER = 9,
    // Waiting for a GPU worker.
    CUZK_STAGE_WAIT = 10,
    // Groth16 epilogue.
    CUZK_STAGE_EPILOGUE = 11,
    // Self-verification.
    CUZK_STAGE_VERIFY = 12,
    // The whole call.
    CUZK_STAGE_TOTAL = 13,
    // Loading (or recording) the compiled circuit.
    CUZK_STAGE_COMPILE = 14,
    // Witness generation of one partition (part of `SYNTHESIS`).
    CUZK_STAGE_WITNESS = 15,
    // a, b, c by sparse matrix-vector products (part of `SYNTHESIS`).
    CUZK_STAGE_SPMV = 16,
} cuzk_stage_t;

// An engine: loaded parameters and workers, reused by every proof made with it. Opaque; created
// by `cuzk_engine_new`, released by `cuzk_engine_free`. Thread-safe.
typedef struct cuzk_engine_t cuzk_engine_t;

// Options of an engine. Fill a struct with the defaults with
// `cuzk_options_init(&opts, sizeof opts)`, then change fields; the struct is read during
// `cuzk_engine_new` only (the caller keeps ownership of it and of the memory its pointers point
// to, which may be freed once `cuzk_engine_new` returns).
//
// The struct can grow without breaking the ABI: new fields are only ever appended, and
// `struct_size` says how large the caller's struct is. A library newer than the caller's header
// gives the fields the caller does not know their defaults; a library older than the caller's
// header accepts the larger struct only when the fields it does not know are zero (their
// defaults) and otherwise fails with `CUZK_STATUS_INVALID_CONFIG`.
typedef struct cuzk_options_t {
    // Size of this struct in bytes as the caller was compiled, `sizeof(cuzk_options_t)`; set
    // by `cuzk_options_init`. Always the first field.
    size_t struct_size;
    // Directory of the Groth16 `.params` / `.vk` files, a NUL-terminated path; `NULL` or `""`:
    // the `FIL_PROOFS_PARAMETER_CACHE` environment variable when set and not empty, else
    // `/var/tmp/filecoin-proof-parameters`.
    const char *parameter_dir;
    // A `cuzk_backend_t` value (`CUZK_BACKEND_AUTO` by default); anything else is
    // `CUZK_STATUS_INVALID_CONFIG`.
    int32_t backend;
    // CUDA device ordinals to use, `devices_len` of them; `NULL` / 0: all visible devices.
    const uint32_t *devices;
    // Number of entries of `devices`.
    size_t devices_len;
    // GPU workers per device; 0: the default (2).
    uint32_t workers_per_device;
    // Cap in bytes on the device memory cuzk may use on each device; 0: no cap.
    uint64_t vram_limit_bytes;
    // Host-memory budget in bytes (loaded parameters, compiled circuits and every partition in
    // flight); 0: the default, the host's available memory when the engine is created less
    // 1/16 of it (at least 4 GiB left to the rest of the machine).
    uint64_t host_memory_limit_bytes;
    // Verify every proof before returning it (default `true`).
    bool verify;
    // Let GPU work run on the CPU when no device can take it (default `false`); reported per
    // partition in the result, never silent.
    bool allow_cpu_fallback;
} cuzk_options_t;

// Where and how one partition was proved. Part of a `cuzk_result_t`, which owns it.
typedef struct cuzk_partition_t {
    // Partition index (0-based).
    size_t index;
    // The backend that ran it: `CUZK_BACKEND_CPU` or `CUZK_BACKEND_GPU`.
    enum cuzk_backend_t backend;
    // CUDA device ordinal, or -1 on the CPU.
    int32_t device;
    // Allocator tier that ran on the GPU (NUL-terminated, owned by the result), or `NULL`.
    const char *tier;
} cuzk_partition_t;

// One timing: a stage of one partition (or of the whole call) and how long it took.
typedef struct cuzk_timing_t {
    // Partition index, or -1 for a stage of the whole call (e.g. `CUZK_STAGE_TOTAL`).
    int64_t partition;
    // Which stage.
    enum cuzk_stage_t stage;
    // The stage's short name (`"synthesis"`, `"msm_h"`, ...): a static NUL-terminated string,
    // valid for the life of the process.
    const char *stage_name;
    // Duration in milliseconds.
    double ms;
} cuzk_timing_t;

// The result of a proof. Owned by the caller: release it with `cuzk_result_free` (once); every
// pointer in it stays valid until then. Read-only; may be read from any thread.
typedef struct cuzk_result_t {
    // The proof: 192 bytes per partition, partitions in order - the byte layout of
    // filecoin-proofs' `seal_commit_phase2` proof (PoRep C2), of filecoin-proofs-api's
    // WindowPoSt partition and WinningPoSt proofs (192 bytes), or of its
    // `generate_empty_sector_update_proof_with_vanilla` (SnapDeals).
    const uint8_t *proof;
    // Length of `proof` in bytes.
    size_t proof_len;
    // One entry per partition.
    const struct cuzk_partition_t *partitions;
    // Number of entries of `partitions`.
    size_t partitions_len;
    // Stage timings in the order they were recorded (a stage appears once per partition).
    const struct cuzk_timing_t *timings;
    // Number of entries of `timings`.
    size_t timings_len;
    // Wall time of the whole call in milliseconds.
    double total_ms;
    // Whether the proof was verified before it was returned.
    bool verified;
} cuzk_result_t;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Fills `opts` with the default options: parameter directory from the environment (`NULL`),
// backend `CUZK_BACKEND_AUTO`, all devices, default workers per device, no VRAM or
// host-memory cap, verification on, no CPU fallback; and sets `opts->struct_size` to
// `struct_size`.
//
// * `opts` - the caller's struct (owned by the caller), written in full.
// * `struct_size` - `sizeof(cuzk_options_t)` as the caller was compiled (bytes beyond the
//   fields this library knows are set to zero, the defaults of later fields).
//
// Returns `CUZK_STATUS_OK`, or `CUZK_STATUS_INVALID_CONFIG` when `opts` is `NULL` or
// `struct_size` is smaller than the first version of the struct. Thread-safe.
//
// # Safety
// `opts` is `NULL` or valid for writing `struct_size` bytes.
enum cuzk_status_t cuzk_options_init(struct cuzk_options_t *opts,
                                     size_t struct_size);

// Creates an engine.
//
// * `opts` - options (filled by `cuzk_options_init`, then changed), read during this call
//   only (the caller keeps ownership); `NULL`: the defaults.
// * `out` - receives the new engine, owned by the caller, to release with `cuzk_engine_free`;
//   set to `NULL` on failure.
//
// Loads nothing yet: parameters are loaded on the first proof. Thread-safe.
//
// Besides the options, reads the environment variables `FIL_PROOFS_PARAMETER_CACHE` (when
// `parameter_dir` is `NULL` or empty) and `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS`
// (filecoin-proofs' switch: check the parameter files against the official digests), and no
// other.
//
// Returns `CUZK_STATUS_OK`, `CUZK_STATUS_INVALID_CONFIG` (bad option or `struct_size`, bad
// `FIL_PROOFS_VERIFY_PRODUCTION_PARAMS` value, `NULL` `out`),
// `CUZK_STATUS_NO_DEVICE` (GPU backend without a usable device), ...
//
// # Safety
// `opts` is `NULL` or points to a valid `cuzk_options_t` of `opts->struct_size` readable bytes
// (see its fields for their pointers); `out` is `NULL` or valid for writing one pointer.
enum cuzk_status_t cuzk_engine_new(const struct cuzk_options_t *opts,
                                   struct cuzk_engine_t **out);

// Releases an engine and everything it holds (parameters, GPU workers). `NULL` is a no-op.
//
// No other call may use `engine` during or after this one: wait for running
// `cuzk_prove_porep_c2` calls to return first. Results made with the engine stay valid.
//
// # Safety
// `engine` is `NULL` or a handle from `cuzk_engine_new` not freed before.
void cuzk_engine_free(struct cuzk_engine_t *engine);

// Proves commit phase 2 (C2) of one sector.
//
// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
// * `c1_json`, `c1_len` - the C1 output: the `SealCommitPhase1Output` JSON of
//   filecoin-proofs(-api), or the wrapper `{"SectorNum": n, "Phase1Out": base64(JSON),
//   "SectorSize": bytes}`. Borrowed for the call only.
// * `sector_id` - the sector number.
// * `prover_id`, `prover_id_len` - the 32-byte prover id (see
//   `cuzk_prover_id_from_actor_id`). Borrowed for the call only.
// * `out` - receives the result, owned by the caller (release with `cuzk_result_free`); set
//   to `NULL` on failure.
//
// Blocks until the proof is done (seconds to minutes). Thread-safe.
//
// Returns `CUZK_STATUS_OK` or an error status; the message is then in
// `cuzk_last_error_message` on this thread.
//
// # Safety
// `engine` is `NULL` or a live handle from `cuzk_engine_new`; `c1_json` points to `c1_len`
// readable bytes (or is `NULL` with `c1_len` 0); `prover_id` points to `prover_id_len`
// readable bytes (or is `NULL` with length 0); `out` is `NULL` or valid for writing one
// pointer. The buffers must not be changed by another thread during the call.
enum cuzk_status_t cuzk_prove_porep_c2(const struct cuzk_engine_t *engine,
                                       const uint8_t *c1_json,
                                       size_t c1_len,
                                       uint64_t sector_id,
                                       const uint8_t *prover_id,
                                       size_t prover_id_len,
                                       struct cuzk_result_t **out);

// Proves one WindowPoSt partition: the 192 bytes filecoin-proofs-api's
// `post::generate_single_window_post_with_vanilla` returns for the same input.
//
// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
// * `registered_proof` - the PoSt proof type in the actors' numbering: 10..14 (WindowPoSt
//   2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB).
// * `vanilla_proofs`, `vanilla_proof_lens`, `vanilla_proof_count` - one vanilla proof per
//   sector of the partition (the bytes of `post::generate_single_vanilla_proof`; at most 2349
//   at 32 GiB): `vanilla_proofs[i]` points to `vanilla_proof_lens[i]` bytes. Borrowed for the
//   call only.
// * `randomness`, `randomness_len` - the 32-byte PoSt randomness. Borrowed.
// * `prover_id`, `prover_id_len` - the 32-byte prover id (see
//   `cuzk_prover_id_from_actor_id`). Borrowed.
// * `partition_index` - the partition's index in the deadline.
// * `out` - receives the result (one partition), owned by the caller (release with
//   `cuzk_result_free`); set to `NULL` on failure.
//
// Its partitions run at high priority: ahead of PoRep partitions queued by other calls.
// Blocks until the proof is done. Thread-safe. Returns `CUZK_STATUS_OK` or an error status
// (input errors 1xx before any proving); the message is then in `cuzk_last_error_message`.
//
// # Safety
// `engine` is `NULL` or a live handle from `cuzk_engine_new`; `vanilla_proofs` and
// `vanilla_proof_lens` point to `vanilla_proof_count` readable entries each (or are `NULL`
// with a count of 0), and each `vanilla_proofs[i]` to `vanilla_proof_lens[i]` readable bytes;
// `randomness` and `prover_id` point to their lengths in readable bytes (or are `NULL` with
// length 0); `out` is `NULL` or valid for writing one pointer. The buffers must not be changed
// by another thread during the call.
enum cuzk_status_t cuzk_prove_window_post(const struct cuzk_engine_t *engine,
                                          uint64_t registered_proof,
                                          const uint8_t *const *vanilla_proofs,
                                          const size_t *vanilla_proof_lens,
                                          size_t vanilla_proof_count,
                                          const uint8_t *randomness,
                                          size_t randomness_len,
                                          const uint8_t *prover_id,
                                          size_t prover_id_len,
                                          size_t partition_index,
                                          struct cuzk_result_t **out);

// Proves a WinningPoSt: the 192 bytes filecoin-proofs-api's
// `post::generate_winning_post_with_vanilla` returns for the same input.
//
// Arguments as `cuzk_prove_window_post`, with `registered_proof` 0..4 (WinningPoSt 2 KiB,
// 8 MiB, 512 MiB, 32 GiB, 64 GiB), the challenged sector's vanilla proof (one), and no
// partition index. Its partitions run at critical priority: ahead of every other call's
// queued partitions. Blocks until the proof is done. Thread-safe.
//
// # Safety
// As `cuzk_prove_window_post`.
enum cuzk_status_t cuzk_prove_winning_post(const struct cuzk_engine_t *engine,
                                           uint64_t registered_proof,
                                           const uint8_t *const *vanilla_proofs,
                                           const size_t *vanilla_proof_lens,
                                           size_t vanilla_proof_count,
                                           const uint8_t *randomness,
                                           size_t randomness_len,
                                           const uint8_t *prover_id,
                                           size_t prover_id_len,
                                           struct cuzk_result_t **out);

// Proves a SnapDeals sector update: the bytes filecoin-proofs-api's
// `update::generate_empty_sector_update_proof_with_vanilla` returns for the same input, 192
// per partition (1 partition at 2 KiB, 4 at 8 MiB, 16 from 512 MiB on: 3,072 bytes at
// 32 GiB), each partition verified and then the whole proof as
// `update::verify_empty_sector_update_proof` verifies it, before it is returned.
//
// * `engine` - from `cuzk_engine_new`; may be used by many threads at once.
// * `registered_proof` - the update proof type in the actors' numbering: 0..4 (2 KiB,
//   8 MiB, 512 MiB, 32 GiB, 64 GiB).
// * `vanilla_proofs`, `vanilla_proof_lens`, `vanilla_proof_count` - one vanilla proof per
//   partition, in partition order (the bytes of `update::generate_partition_proofs`):
//   `vanilla_proofs[i]` points to `vanilla_proof_lens[i]` bytes. Borrowed for the call only.
// * `comm_r_old`, `comm_r_new`, `comm_d_new` and their lengths - the sector key's replica
//   commitment, the updated replica's, the new data's: 32 bytes each. Borrowed.
// * `sector_size` - the sector size in bytes the caller expects, checked against the proof
//   type's; 0 takes the proof type's.
// * `out` - receives the result, owned by the caller (release with `cuzk_result_free`); set
//   to `NULL` on failure.
//
// Its partitions run at normal priority, as PoRep's. Blocks until the proof is done.
// Thread-safe. Returns `CUZK_STATUS_OK` or an error status (input errors 1xx before any
// proving: a wrong partition count, commitments not 32 bytes, a sector size of another proof
// type, vanilla proofs that do not decode or verify); the message is then in
// `cuzk_last_error_message`.
//
// # Safety
// As `cuzk_prove_window_post` for `engine`, the vanilla proof arrays and `out`; each
// commitment points to its length in readable bytes (or is `NULL` with length 0).
enum cuzk_status_t cuzk_prove_snap_deals(const struct cuzk_engine_t *engine,
                                         uint64_t registered_proof,
                                         const uint8_t *const *vanilla_proofs,
                                         const size_t *vanilla_proof_lens,
                                         size_t vanilla_proof_count,
                                         const uint8_t *comm_r_old,
                                         size_t comm_r_old_len,
                                         const uint8_t *comm_r_new,
                                         size_t comm_r_new_len,
                                         const uint8_t *comm_d_new,
                                         size_t comm_d_new_len,
                                         uint64_t sector_size,
                                         struct cuzk_result_t **out);

// Releases a result from `cuzk_prove_porep_c2`, `cuzk_prove_window_post`,
// `cuzk_prove_winning_post` or `cuzk_prove_snap_deals` and everything it points to. `NULL`
// is a no-op. Not to be called twice, nor while another thread reads the result.
//
// # Safety
// `result` is `NULL` or a result from one of those calls, not freed before.
void cuzk_result_free(struct cuzk_result_t *result);

// Writes the 32-byte prover id of miner actor `actor_id` (`f0<actor_id>`; the payload of its
// ID address, as filecoin-ffi builds it) to `out`, which the caller owns and which must have
// room for `CUZK_PROVER_ID_LEN` (32) bytes. Thread-safe.
//
// Returns `CUZK_STATUS_OK`, or `CUZK_STATUS_INVALID_CONFIG` when `out` is `NULL`.
//
// # Safety
// `out` is `NULL` or valid for writing 32 bytes.
enum cuzk_status_t cuzk_prover_id_from_actor_id(uint64_t actor_id,
                                                uint8_t *out);

// Copies the calling thread's last-error message (see the status conventions: set by every
// status-returning call, empty after a success) into `buf` as a NUL-terminated UTF-8 string,
// truncated to `len - 1` bytes at a character boundary. `buf` is owned by the caller;
// `NULL` or `len` 0 writes nothing.
//
// Returns the message's full length in bytes, without the NUL: when it is `>= len`, the copy
// was truncated and a buffer of (return value + 1) bytes would hold it. Does not change the
// last error. Thread-safe (each thread has its own message).
//
// # Safety
// `buf` is `NULL` or valid for writing `len` bytes.
size_t cuzk_last_error_message(char *buf,
                               size_t len);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* CUZK_H */
