package cuzk

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fixture is the 2 KiB PoRep fixture written by the Rust side (cuzk_dev::fixture): its
// fixture.json, c1.json and params/ directory.
type fixture struct {
	paramDir string
	c1       []byte
	sectorID uint64
	actorID  uint64
	proverID []byte
}

// loadFixture reads the fixture from $CUZK_FIXTURE_DIR, else ~/.cache/cuzk/fixture-2kib-v1
// (the default of cuzk_dev::fixture::default_fixture_dir).
func loadFixture(t *testing.T) fixture {
	t.Helper()
	dir := os.Getenv("CUZK_FIXTURE_DIR")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no CUZK_FIXTURE_DIR and no home directory: %v", err)
		}
		dir = filepath.Join(home, ".cache", "cuzk", "fixture-2kib-v1")
	}
	meta, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		t.Fatalf("no 2 KiB fixture in %s (%v): create it with `cargo run --release --example "+
			"make_fixture` at the repository root, or point CUZK_FIXTURE_DIR at one", dir, err)
	}
	var m struct {
		SectorID uint64 `json:"sector_id"`
		ActorID  uint64 `json:"actor_id"`
		ProverID string `json:"prover_id"`
		C1JSON   string `json:"c1_json"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		t.Fatalf("bad %s/fixture.json: %v", dir, err)
	}
	f := fixture{paramDir: filepath.Join(dir, "params"), sectorID: m.SectorID, actorID: m.ActorID}
	if f.proverID, err = hex.DecodeString(m.ProverID); err != nil || len(f.proverID) != 32 {
		t.Fatalf("bad prover_id %q in %s/fixture.json", m.ProverID, dir)
	}
	if f.c1, err = os.ReadFile(filepath.Join(dir, m.C1JSON)); err != nil {
		t.Fatal(err)
	}
	return f
}

func cpuEngine(t *testing.T, paramDir string) *Engine {
	t.Helper()
	opts := DefaultOptions()
	opts.Backend = BackendCPU
	opts.ParameterDir = paramDir
	e, err := NewEngine(opts)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// expectStatus checks that err is a *cuzk.Error with the given status and a message.
func expectStatus(t *testing.T, what string, err error, want Status) {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("%s: got %v, want a *cuzk.Error with status %d", what, err, want)
	}
	if ce.Status != want || ce.Message == "" {
		t.Fatalf("%s: got status %d (%q), want %d with a message", what, ce.Status, ce.Message, want)
	}
	t.Logf("%s: %v", what, err)
}

func TestProverIDFromActorID(t *testing.T) {
	id := ProverIDFromActorID(1000)
	if !bytes.Equal(id[:3], []byte{0xe8, 0x07, 0x00}) || !bytes.Equal(id[3:], make([]byte, 29)) {
		t.Fatalf("prover id of f01000 = %x", id)
	}
}

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions()
	if !o.Verify || o.Backend != BackendAuto || o.AllowCPUFallback || o.VRAMLimitBytes != 0 {
		t.Fatalf("unexpected defaults %+v", o)
	}
}

func TestBadInputs(t *testing.T) {
	f := loadFixture(t)
	if id := ProverIDFromActorID(f.actorID); !bytes.Equal(id[:], f.proverID) {
		t.Fatalf("prover id of actor %d is %x, the fixture's is %x", f.actorID, id, f.proverID)
	}

	opts := DefaultOptions()
	opts.Backend = Backend(7)
	_, err := NewEngine(opts)
	expectStatus(t, "backend 7", err, StatusInvalidConfig)

	e := cpuEngine(t, f.paramDir)
	_, err = e.ProvePoRepC2([]byte(`{"registered_proof": "StackedDrg2KiBV1_1", "vanilla`), f.sectorID, f.proverID)
	expectStatus(t, "malformed JSON", err, StatusMalformedInput)
	_, err = e.ProvePoRepC2(nil, f.sectorID, f.proverID)
	expectStatus(t, "empty C1", err, StatusMalformedInput)
	_, err = e.ProvePoRepC2(f.c1, f.sectorID, f.proverID[:31])
	expectStatus(t, "31-byte prover id", err, StatusInvalidProverID)
	_, err = e.ProvePoRepC2(f.c1, f.sectorID, append(append([]byte{}, f.proverID...), 0))
	expectStatus(t, "33-byte prover id", err, StatusInvalidProverID)

	// A parameter directory that does not exist: the engine may refuse it at once or when
	// it first needs the parameters.
	opts = DefaultOptions()
	opts.Backend = BackendCPU
	opts.ParameterDir = filepath.Join(t.TempDir(), "no-such-params")
	missing, err := NewEngine(opts)
	if err == nil {
		defer missing.Close()
		_, err = missing.ProvePoRepC2(f.c1, f.sectorID, f.proverID)
	}
	expectStatus(t, "missing parameters", err, StatusParamsNotFound)

	closed := cpuEngine(t, f.paramDir)
	closed.Close()
	closed.Close()
	_, err = closed.ProvePoRepC2(f.c1, f.sectorID, f.proverID)
	expectStatus(t, "closed engine", err, StatusInvalidConfig)
}

// Messages are per OS thread in C; the wrapper must hand every goroutine its own.
func TestErrorsFromManyGoroutines(t *testing.T) {
	e := cpuEngine(t, "")
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			id := make([]byte, g) // prover ids of the wrong length, g bytes
			for i := 0; i < 20; i++ {
				// A 2-byte C1 that is not JSON fails before the prover id is looked at, or
				// the prover id fails first; either way the message must be this goroutine's.
				_, err := e.ProvePoRepC2([]byte(fmt.Sprintf("%02d", g)), 1, id)
				var ce *Error
				if !errors.As(err, &ce) || ce.Message == "" {
					t.Errorf("goroutine %d: %v", g, err)
					return
				}
				if ce.Status == StatusInvalidProverID && !strings.HasSuffix(ce.Message, fmt.Sprintf("got %d", g)) {
					t.Errorf("goroutine %d got another goroutine's message: %q", g, ce.Message)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// Proves the fixture on the CPU, passing the C1 output in the base64 wrapper that Curio uses
// (the C test passes the plain JSON).
func TestProveFixture(t *testing.T) {
	f := loadFixture(t)
	e := cpuEngine(t, f.paramDir)
	wrapped, err := json.Marshal(map[string]interface{}{
		"SectorNum":  f.sectorID,
		"Phase1Out":  base64.StdEncoding.EncodeToString(f.c1),
		"SectorSize": 2048,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.ProvePoRepC2(wrapped, f.sectorID, f.proverID)
	if err != nil {
		t.Fatalf("ProvePoRepC2: %v", err)
	}
	t.Logf("proof %d bytes, %d partition(s), verified %v, total %.1f ms",
		len(res.Proof), len(res.Partitions), res.Verified, res.TotalMs)
	for _, tm := range res.Timings {
		t.Logf("  partition %2d %-12s %10.3f ms", tm.Partition, tm.Stage, tm.Ms)
	}
	if len(res.Proof) != 192 || len(res.Partitions) != 1 || !res.Verified {
		t.Fatalf("unexpected result: %d bytes, %d partitions, verified %v",
			len(res.Proof), len(res.Partitions), res.Verified)
	}
	if p := res.Partitions[0]; p.Backend != BackendCPU || p.Device != -1 || p.Index != 0 {
		t.Fatalf("unexpected partition report %+v", p)
	}
	if res.TotalMs <= 0 || len(res.Timings) == 0 {
		t.Fatalf("no timings: total %.3f ms, %d entries", res.TotalMs, len(res.Timings))
	}
}
