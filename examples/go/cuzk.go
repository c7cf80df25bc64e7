// Package cuzk wraps cuzk's C ABI (include/cuzk.h) for Go through cgo, linked against the
// static library target/release/libcuzk.a of this repository (build it first with
// `cargo build --release`).
//
// Ownership: everything returned to Go is a Go copy; C results are freed before a call returns.
// An Engine is released with Close (a finalizer does it too, as a safety net).
//
// Thread safety: an Engine may be used by many goroutines at once. Close waits for running
// calls to finish. cuzk keeps an error's message per OS thread, so each call and the read of its
// message run with the goroutine locked to its thread (runtime.LockOSThread).
package cuzk

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -L${SRCDIR}/../../target/release -l:libcuzk.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
#include <stdlib.h>
#include "cuzk.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Status is a cuzk status code (cuzk_status_t): 0 for success, else grouped by origin:
// 1xx input, 2xx parameters, 3xx device, 4xx out of memory, 5xx proving, 9xx internal.
type Status int32

// The status codes of include/cuzk.h.
const (
	StatusOK                Status = C.CUZK_STATUS_OK
	StatusMalformedInput    Status = C.CUZK_STATUS_MALFORMED_INPUT
	StatusInvalidInput      Status = C.CUZK_STATUS_INVALID_INPUT
	StatusInvalidProverID   Status = C.CUZK_STATUS_INVALID_PROVER_ID
	StatusUnsupportedProof  Status = C.CUZK_STATUS_UNSUPPORTED_PROOF
	StatusInvalidConfig     Status = C.CUZK_STATUS_INVALID_CONFIG
	StatusParamsNotFound    Status = C.CUZK_STATUS_PARAMETERS_NOT_FOUND
	StatusParamsInvalid     Status = C.CUZK_STATUS_PARAMETERS_INVALID
	StatusNoDevice          Status = C.CUZK_STATUS_NO_DEVICE
	StatusDeviceUnsupported Status = C.CUZK_STATUS_DEVICE_UNSUPPORTED
	StatusCuda              Status = C.CUZK_STATUS_CUDA
	StatusOutOfDeviceMemory Status = C.CUZK_STATUS_OUT_OF_DEVICE_MEMORY
	StatusOutOfHostMemory   Status = C.CUZK_STATUS_OUT_OF_HOST_MEMORY
	StatusSynthesis         Status = C.CUZK_STATUS_SYNTHESIS
	StatusVerification      Status = C.CUZK_STATUS_VERIFICATION_FAILED
	StatusCancelled         Status = C.CUZK_STATUS_CANCELLED
	StatusIO                Status = C.CUZK_STATUS_IO
	StatusPanic             Status = C.CUZK_STATUS_PANIC
	StatusInternal          Status = C.CUZK_STATUS_INTERNAL
)

// Error is a failed cuzk call: its status and cuzk's message.
type Error struct {
	Status  Status
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("cuzk error %d: %s", int32(e.Status), e.Message) }

// Backend selects the prover backend.
type Backend int32

// Backends of include/cuzk.h.
const (
	BackendAuto Backend = C.CUZK_BACKEND_AUTO
	BackendCPU  Backend = C.CUZK_BACKEND_CPU
	BackendGPU  Backend = C.CUZK_BACKEND_GPU
)

func (b Backend) String() string {
	switch b {
	case BackendAuto:
		return "auto"
	case BackendCPU:
		return "cpu"
	case BackendGPU:
		return "gpu"
	}
	return fmt.Sprintf("backend(%d)", int32(b))
}

// Options of an Engine; start from DefaultOptions.
type Options struct {
	ParameterDir         string   // "": FIL_PROOFS_PARAMETER_CACHE, else /var/tmp/filecoin-proof-parameters
	Backend              Backend  // BackendAuto by default
	Devices              []uint32 // CUDA ordinals; empty: all visible devices
	WorkersPerDevice     uint32   // 0: the default (2)
	VRAMLimitBytes       uint64   // 0: no cap
	HostMemoryLimitBytes uint64   // 0: no cap
	Verify               bool     // verify proofs before returning them (default true)
	AllowCPUFallback     bool     // let GPU work run on the CPU, reported per partition
}

// defaultCOptions returns a cuzk_options_t filled by cuzk_options_init.
func defaultCOptions() C.cuzk_options_t {
	var d C.cuzk_options_t
	if s := C.cuzk_options_init(&d, C.size_t(unsafe.Sizeof(d))); s != C.CUZK_STATUS_OK {
		// Only a size smaller than the library's first cuzk_options_t fails: a build error.
		panic(fmt.Sprintf("cuzk_options_init: status %d", int(s)))
	}
	return d
}

// DefaultOptions returns the defaults of cuzk_options_init.
func DefaultOptions() Options {
	d := defaultCOptions()
	return Options{
		Backend:              Backend(d.backend),
		WorkersPerDevice:     uint32(d.workers_per_device),
		VRAMLimitBytes:       uint64(d.vram_limit_bytes),
		HostMemoryLimitBytes: uint64(d.host_memory_limit_bytes),
		Verify:               bool(d.verify),
		AllowCPUFallback:     bool(d.allow_cpu_fallback),
	}
}

// Partition says where and how one partition was proved.
type Partition struct {
	Index   int
	Backend Backend
	Device  int    // CUDA ordinal, -1 on the CPU
	Tier    string // GPU allocator tier, "" on the CPU
}

// Timing is how long one stage of one partition (Partition -1: the whole call) took.
type Timing struct {
	Partition int
	Stage     string
	Ms        float64
}

// Result of a proof, copied into Go memory.
type Result struct {
	Proof      []byte // 192 bytes per partition
	Partitions []Partition
	Timings    []Timing
	TotalMs    float64
	Verified   bool
}

// Engine holds loaded parameters and workers; reuse one for many proofs.
type Engine struct {
	mu  sync.RWMutex // read: calls in flight; write: Close
	ptr *C.cuzk_engine_t
}

// call runs f with the goroutine locked to its OS thread and, when it fails, reads the thread's
// last-error message before unlocking.
func call(f func() uint32) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := f()
	if s == C.CUZK_STATUS_OK {
		return nil
	}
	return &Error{Status: Status(s), Message: lastErrorMessage()}
}

// lastErrorMessage reads the calling thread's message; the caller holds the thread locked.
func lastErrorMessage() string {
	n := C.cuzk_last_error_message(nil, 0)
	buf := make([]byte, int(n)+1)
	C.cuzk_last_error_message((*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
	return string(buf[:n])
}

// NewEngine creates an engine. Parameters are loaded on the first proof.
func NewEngine(opts Options) (*Engine, error) {
	c := defaultCOptions()
	// Pointers inside the struct passed to C must point to C memory (cgo's pointer rules).
	if opts.ParameterDir != "" {
		c.parameter_dir = C.CString(opts.ParameterDir)
		defer C.free(unsafe.Pointer(c.parameter_dir))
	}
	c.backend = C.int32_t(opts.Backend)
	if len(opts.Devices) > 0 {
		devs := (*C.uint32_t)(C.malloc(C.size_t(len(opts.Devices)) * C.size_t(unsafe.Sizeof(C.uint32_t(0)))))
		defer C.free(unsafe.Pointer(devs))
		for i, d := range opts.Devices {
			unsafe.Slice(devs, len(opts.Devices))[i] = C.uint32_t(d)
		}
		c.devices = devs
		c.devices_len = C.size_t(len(opts.Devices))
	}
	c.workers_per_device = C.uint32_t(opts.WorkersPerDevice)
	c.vram_limit_bytes = C.uint64_t(opts.VRAMLimitBytes)
	c.host_memory_limit_bytes = C.uint64_t(opts.HostMemoryLimitBytes)
	c.verify = C.bool(opts.Verify)
	c.allow_cpu_fallback = C.bool(opts.AllowCPUFallback)

	var ptr *C.cuzk_engine_t
	if err := call(func() uint32 { return C.cuzk_engine_new(&c, &ptr) }); err != nil {
		return nil, err
	}
	e := &Engine{ptr: ptr}
	runtime.SetFinalizer(e, (*Engine).Close)
	return e, nil
}

// Close releases the engine after the calls in flight have returned. Idempotent.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ptr != nil {
		C.cuzk_engine_free(e.ptr)
		e.ptr = nil
	}
	runtime.SetFinalizer(e, nil)
}

// ProvePoRepC2 proves commit phase 2 of one sector. c1 is the C1 output (the
// SealCommitPhase1Output JSON, or the {"SectorNum","Phase1Out","SectorSize"} base64 wrapper);
// proverID is 32 bytes. Blocks until the proof is done; safe to call from many goroutines.
func (e *Engine) ProvePoRepC2(c1 []byte, sectorID uint64, proverID []byte) (*Result, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.ptr == nil {
		return nil, &Error{Status: StatusInvalidConfig, Message: "engine is closed"}
	}
	var res *C.cuzk_result_t
	err := call(func() uint32 {
		// Go byte slices may be passed to C for the duration of the call.
		return C.cuzk_prove_porep_c2(e.ptr, bytesPtr(c1), C.size_t(len(c1)), C.uint64_t(sectorID),
			bytesPtr(proverID), C.size_t(len(proverID)), &res)
	})
	runtime.KeepAlive(c1)
	runtime.KeepAlive(proverID)
	if err != nil {
		return nil, err
	}
	defer C.cuzk_result_free(res)
	return copyResult(res), nil
}

func bytesPtr(b []byte) *C.uint8_t {
	if len(b) == 0 {
		return nil
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0]))
}

func copyResult(r *C.cuzk_result_t) *Result {
	out := &Result{
		Proof:    C.GoBytes(unsafe.Pointer(r.proof), C.int(r.proof_len)),
		TotalMs:  float64(r.total_ms),
		Verified: bool(r.verified),
	}
	if r.partitions_len > 0 {
		for _, p := range unsafe.Slice(r.partitions, int(r.partitions_len)) {
			tier := ""
			if p.tier != nil {
				tier = C.GoString(p.tier)
			}
			out.Partitions = append(out.Partitions, Partition{
				Index: int(p.index), Backend: Backend(p.backend), Device: int(p.device), Tier: tier,
			})
		}
	}
	if r.timings_len > 0 {
		for _, t := range unsafe.Slice(r.timings, int(r.timings_len)) {
			out.Timings = append(out.Timings, Timing{
				Partition: int(t.partition), Stage: C.GoString(t.stage_name), Ms: float64(t.ms),
			})
		}
	}
	return out
}

// ProverIDFromActorID returns the 32-byte prover id of miner actor f0<actorID>.
func ProverIDFromActorID(actorID uint64) [32]byte {
	var id [32]byte
	// Cannot fail: out is a valid 32-byte buffer.
	if err := call(func() uint32 {
		return C.cuzk_prover_id_from_actor_id(C.uint64_t(actorID), (*C.uint8_t)(unsafe.Pointer(&id[0])))
	}); err != nil {
		panic(err)
	}
	return id
}
