// Package daemontest drives `cuzk serve` with a Go gRPC client generated from
// daemon/proto/cuzk/v1/proving.proto (the wire contract of Curio's cuzk client): the 2 KiB
// fixture proved through the daemon and checked by `cuzk verify` (filecoin-proofs' verify_seal),
// a reused request id with other content (a new job), priority order, cancellation, a caller
// that gives up, bad input, status and metrics, and a graceful shutdown on SIGTERM. Three real
// proofs (~35 s each on 2 CPU cores); the queued jobs of the order test and the other-content
// jobs are ones the engine refuses at once when they start.
//
// Builds offline in GOPATH mode against Debian's Go packages (see daemon/go/README.md):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode CUZK_BIN=target/release/cuzk go test .
package daemontest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fixture is the 2 KiB PoRep fixture of cuzk_dev::fixture.
type fixture struct {
	dir, paramDir, c1Path string
	c1                    []byte
	sectorID, actorID     uint64
}

func loadFixture() (fixture, error) {
	dir := os.Getenv("CUZK_FIXTURE_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "cuzk", "fixture-2kib-v1")
	}
	meta, err := os.ReadFile(filepath.Join(dir, "fixture.json"))
	if err != nil {
		return fixture{}, fmt.Errorf("no 2 KiB fixture in %s (%v): make it with `cargo run --release --example make_fixture`", dir, err)
	}
	var m struct {
		SectorID uint64 `json:"sector_id"`
		ActorID  uint64 `json:"actor_id"`
		C1JSON   string `json:"c1_json"`
	}
	if err := json.Unmarshal(meta, &m); err != nil {
		return fixture{}, err
	}
	f := fixture{dir: dir, paramDir: filepath.Join(dir, "params"), c1Path: filepath.Join(dir, m.C1JSON),
		sectorID: m.SectorID, actorID: m.ActorID}
	f.c1, err = os.ReadFile(f.c1Path)
	return f, err
}

// wrap is Curio's wrapC1Output (lib/ffi/cuzk_funcs.go): Go's encoding/json writes []byte in base64.
func wrap(c1 []byte, sector, size uint64) []byte {
	b, _ := json.Marshal(struct {
		SectorNum  int64  `json:"SectorNum"`
		Phase1Out  []byte `json:"Phase1Out"`
		SectorSize uint64 `json:"SectorSize"`
	}{int64(sector), c1, size})
	return b
}

var (
	fx      fixture
	cuzkBin string
	daemon  *exec.Cmd
	exited  = make(chan error, 1)
	logTail = &tail{}
	unixCli ProvingEngineClient
	tcpCli  ProvingEngineClient
	stdout  = make(chan string, 16)
)

// tail keeps the daemon's stderr for failure messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 256<<10 {
		t.buf = t.buf[len(t.buf)-256<<10:]
	}
	return len(p), nil
}

func (t *tail) String() string { t.mu.Lock(); defer t.mu.Unlock(); return string(t.buf) }

func findBin() string {
	if b := os.Getenv("CUZK_BIN"); b != "" {
		return b
	}
	if d := os.Getenv("CARGO_TARGET_DIR"); d != "" {
		return filepath.Join(d, "release", "cuzk")
	}
	return filepath.Join("..", "..", "target", "release", "cuzk")
}

func TestMain(m *testing.M) {
	var err error
	if fx, err = loadFixture(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cuzkBin = findBin()
	tmp, err := os.MkdirTemp("", "cuzk-daemon-go")
	if err != nil {
		panic(err)
	}
	sock := filepath.Join(tmp, "cuzk.sock")
	// One proof of each priority or higher at a time (the order tests need it); 8 MiB messages
	// (the oversize test).
	daemon = exec.Command(cuzkBin, "serve", "--listen", "unix://"+sock, "--listen", "127.0.0.1:0",
		"--params", fx.paramDir, "--backend", "cpu", "--jobs", "1", "--max-message-size", "8MiB",
		"--preload", "porep-2k")
	daemon.Stderr = logTail
	out, _ := daemon.StdoutPipe()
	if err := daemon.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "starting %s: %v\n", cuzkBin, err)
		os.Exit(1)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			stdout <- sc.Text()
		}
		close(stdout)
	}()
	go func() { exited <- daemon.Wait() }()
	var tcpAddr string
	for tcpAddr == "" {
		select {
		case line, ok := <-stdout:
			if !ok {
				fmt.Fprintf(os.Stderr, "cuzk serve exited before listening:\n%s\n", logTail)
				os.Exit(1)
			}
			if a := strings.TrimPrefix(line, "cuzk serve: listening on "); a != line && !strings.HasPrefix(a, "unix:") {
				tcpAddr = a
			}
		case <-time.After(120 * time.Second):
			fmt.Fprintf(os.Stderr, "cuzk serve did not listen within 120 s:\n%s\n", logTail)
			daemon.Process.Kill()
			os.Exit(1)
		}
	}
	unixCli = dial("passthrough:///cuzk", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}))
	tcpCli = dial(tcpAddr)
	code := m.Run()
	if daemon.ProcessState == nil {
		daemon.Process.Signal(syscall.SIGTERM)
		<-exited
	}
	os.RemoveAll(tmp)
	os.Exit(code)
}

func dial(target string, opts ...grpc.DialOption) ProvingEngineClient {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append(opts, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20), grpc.MaxCallSendMsgSize(256<<20)))
	conn, err := grpc.DialContext(ctx, target, opts...)
	if err != nil {
		panic(fmt.Sprintf("dial %s: %v", target, err))
	}
	return NewProvingEngineClient(conn)
}

// porep is the request Curio's PoRepSnarkCuzk sends for the fixture.
func porep(id string, prio Priority) *SubmitProofRequest {
	return &SubmitProofRequest{
		RequestId:       id,
		ProofKind:       ProofKind_POREP_SEAL_COMMIT,
		SectorSize:      2048,
		RegisteredProof: 5, // abi.RegisteredSealProof_StackedDrg2KiBV1_1
		Priority:        prio,
		VanillaProof:    wrap(fx.c1, fx.sectorID, 2048),
		SectorNumber:    fx.sectorID,
		MinerId:         fx.actorID,
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// verify runs `cuzk verify` (filecoin-proofs' verify_seal) on proof; returns its exit code.
func verify(t *testing.T, proof []byte) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proof.bin")
	if err := os.WriteFile(p, proof, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cuzkBin, "verify", fx.c1Path, "--sector-num", fmt.Sprint(fx.sectorID),
		"--prover-id", fmt.Sprintf("f0%d", fx.actorID), "--params", fx.paramDir, "--proof", p)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("cuzk verify: exit %d: %s", ee.ExitCode(), out)
		return ee.ExitCode()
	}
	t.Fatalf("cuzk verify: %v", err)
	return -1
}

func TestProveThroughUnixSocketVerifiesWithFilecoinProofs(t *testing.T) {
	resp, err := unixCli.Prove(ctx(t), &ProveRequest{Submit: porep(fmt.Sprintf("porep-%d-%d", fx.actorID, fx.sectorID), Priority_NORMAL)})
	if err != nil {
		t.Fatalf("Prove: %v\n%s", err, logTail)
	}
	r := resp.Result
	if r.Status != AwaitProofResponse_COMPLETED || len(r.Proof) != 192 {
		t.Fatalf("status %v, %d proof bytes: %s", r.Status, len(r.Proof), r.ErrorMessage)
	}
	if r.SynthesisMs == 0 || r.GpuComputeMs == 0 || r.TotalMs < r.QueueWaitMs+r.SynthesisMs {
		t.Errorf("timings: %+v", r)
	}
	if c := verify(t, r.Proof); c != 0 {
		t.Fatalf("cuzk verify rejected the daemon's proof (exit %d)", c)
	}
	bad := append([]byte(nil), r.Proof...)
	bad[100] ^= 1
	if c := verify(t, bad); c != 51 {
		t.Fatalf("a flipped byte: cuzk verify exit %d, want 51", c)
	}
}

// otherTicket is the fixture's C1 output with one bit of its ticket flipped: valid JSON for the
// daemon's checks, refused by the engine at once (its replica id no longer fits).
func otherTicket(t *testing.T) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(fx.c1, &m); err != nil {
		t.Fatal(err)
	}
	var ticket []int
	if err := json.Unmarshal(m["ticket"], &ticket); err != nil || len(ticket) != 32 {
		t.Fatalf("the fixture's ticket: %v %v", ticket, err)
	}
	ticket[0] ^= 1
	m["ticket"], _ = json.Marshal(ticket)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A request id reused with other content (Curio's ids repeat: porep-<miner>-<sector> when a
// sector is sealed again, one id per WindowPoSt deadline): the same content attaches to the
// proved job, another miner, sector or C1 output is a new job with its own id and its own
// result — the engine's refusal, at once (the fixture's replica id fits one miner, sector and
// ticket) —, never the first job's proof.
func TestReusedRequestIDWithOtherContentIsANewJob(t *testing.T) {
	c := ctx(t)
	id := fmt.Sprintf("porep-%d-%d", fx.actorID, fx.sectorID)
	// Proved here, or attached to the job of TestProveThroughUnixSocket.
	resp, err := unixCli.Prove(c, &ProveRequest{Submit: porep(id, Priority_NORMAL)})
	if err != nil {
		t.Fatalf("Prove: %v\n%s", err, logTail)
	}
	first := resp.Result
	if first.JobId != id || first.Status != AwaitProofResponse_COMPLETED || verify(t, first.Proof) != 0 {
		t.Fatalf("first job: %q %v, %d bytes: %s", first.JobId, first.Status, len(first.Proof), first.ErrorMessage)
	}
	// The same content (another priority): the same job and proof, nothing proved again.
	resp, err = tcpCli.Prove(c, &ProveRequest{Submit: porep(id, Priority_HIGH)})
	if err != nil || resp.Result.JobId != id || !bytes.Equal(resp.Result.Proof, first.Proof) {
		t.Fatalf("same content: %v %v", resp, err)
	}
	if n := strings.Count(logTail.String(), "job "+id+": started"); n != 1 {
		t.Fatalf("job %s started %d times\n%s", id, n, logTail)
	}
	// Issue 45's case through Prove (what Curio calls): another miner gets the engine's answer
	// for its own request, not the completed job's proof.
	_, err = unixCli.Prove(c, &ProveRequest{Submit: wrongMiner(id, Priority_NORMAL)})
	if s := status.Convert(err); s.Code() != codes.InvalidArgument || !strings.HasPrefix(s.Message(), "cuzk error 101") {
		t.Fatalf("Prove with another miner: %v", err)
	}
	sector := porep(id, Priority_NORMAL)
	sector.SectorNumber++
	sector.VanillaProof = wrap(fx.c1, sector.SectorNumber, 2048)
	ticket := porep(id, Priority_NORMAL)
	ticket.VanillaProof = wrap(otherTicket(t), fx.sectorID, 2048)
	seen := map[string]bool{id: true}
	for _, o := range []struct {
		name string
		req  *SubmitProofRequest
	}{{"miner", wrongMiner(id, Priority_NORMAL)}, {"sector", sector}, {"c1", ticket}} {
		s, err := tcpCli.SubmitProof(c, o.req)
		if err != nil {
			t.Fatalf("%s: %v", o.name, err)
		}
		if !strings.HasPrefix(s.JobId, id+"#") || seen[s.JobId] {
			t.Fatalf("%s: job id %q: not a new job of its own", o.name, s.JobId)
		}
		seen[s.JobId] = true
		a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: s.JobId})
		if err != nil || a.JobId != s.JobId || a.Status != AwaitProofResponse_FAILED || len(a.Proof) != 0 ||
			!strings.HasPrefix(a.ErrorMessage, "cuzk error 101") {
			t.Fatalf("%s: %v %v", o.name, a, err)
		}
	}
	// The bare request id still names the first job.
	a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: id})
	if err != nil || a.JobId != id || a.Status != AwaitProofResponse_COMPLETED || !bytes.Equal(a.Proof, first.Proof) {
		t.Fatalf("AwaitProof %s: %v %v", id, a, err)
	}
}

// waitStatus polls GetStatus until ok(pending, inProgress) or 20 s.
func waitStatus(t *testing.T, ok func(pending, running uint32) bool) *GetStatusResponse {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := tcpCli.GetStatus(ctx(t), &GetStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Queues) == 1 && ok(st.Queues[0].Pending, st.Queues[0].InProgress) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never matched: %+v", st.Queues)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wrongMiner is a job that passes the daemon's checks and is queued, and that the engine
// refuses at once when it starts (the prover id does not fit the C1 output's replica id): a
// queued job that costs no proving time.
func wrongMiner(id string, prio Priority) *SubmitProofRequest {
	r := porep(id, prio)
	r.MinerId++
	return r
}

// startOrder is the order the daemon's log says the jobs of ids started in.
func startOrder(ids []string) []string {
	log := logTail.String()
	type at struct {
		id  string
		pos int
	}
	var got []at
	for _, id := range ids {
		if i := strings.Index(log, "job "+id+": started"); i >= 0 {
			got = append(got, at{id, i})
		}
	}
	sort.Slice(got, func(i, j int) bool { return got[i].pos < got[j].pos })
	var out []string
	for _, g := range got {
		out = append(out, g.id)
	}
	return out
}

// One real proof runs (and is cancelled) while the rest happens behind it: priority order,
// cancellation of a queued and of the running job, a Prove caller that gives up.
func TestQueueOrderCancelAndAbandon(t *testing.T) {
	c := ctx(t)
	// CRITICAL: every later job waits for it (a job of a lower priority would not hold them).
	if _, err := tcpCli.SubmitProof(c, porep("blocker", Priority_CRITICAL)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, func(p, r uint32) bool { return r == 1 })
	// Priority: submitted lowest first; they must start highest first.
	var prio []string
	for _, p := range []Priority{Priority_LOW, Priority_NORMAL, Priority_HIGH, Priority_CRITICAL} {
		id := "prio-" + p.String()
		prio = append(prio, id)
		if _, err := tcpCli.SubmitProof(c, wrongMiner(id, p)); err != nil {
			t.Fatal(err)
		}
	}
	// A queued job, cancelled: it never starts.
	if _, err := tcpCli.SubmitProof(c, porep("cancel-queued", Priority_CRITICAL)); err != nil {
		t.Fatal(err)
	}
	r, err := tcpCli.CancelProof(c, &CancelProofRequest{JobId: "cancel-queued"})
	if err != nil || r.WasRunning {
		t.Fatalf("cancel queued: %v %v", r, err)
	}
	// A Prove caller that gives up (its deadline): its job is cancelled and never starts. The
	// call ends DEADLINE_EXCEEDED by the client's own timer, or CANCELLED "Timeout expired"
	// when the daemon's timer for the same grpc-timeout fires first (tonic's answer).
	short, cancel := context.WithTimeout(c, 300*time.Millisecond)
	defer cancel()
	_, err = unixCli.Prove(short, &ProveRequest{Submit: porep("abandoned", Priority_CRITICAL)})
	if s := status.Convert(err); s.Code() != codes.DeadlineExceeded &&
		!(s.Code() == codes.Canceled && s.Message() == "Timeout expired") {
		t.Fatalf("Prove with a 300 ms deadline: %v", err)
	}
	for _, id := range []string{"cancel-queued", "abandoned"} {
		a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: id, TimeoutMs: 10000})
		if err != nil || a.Status != AwaitProofResponse_CANCELLED || len(a.Proof) != 0 {
			t.Fatalf("%s: %v %v", id, a, err)
		}
	}
	// Precondition: the four wait together behind the running proof.
	st := waitStatus(t, func(p, r uint32) bool { return true })
	if st.Queues[0].Pending != 4 || st.Queues[0].InProgress != 1 {
		t.Fatalf("the blocker ended before the others were queued: %+v", st.Queues[0])
	}
	// Cancel the running proof: CANCELLED at once, and the engine call stops at its next
	// checkpoint (the queue waits for that).
	r, err = tcpCli.CancelProof(c, &CancelProofRequest{JobId: "blocker"})
	if err != nil || !r.WasRunning {
		t.Fatalf("cancel running: %v %v", r, err)
	}
	a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: "blocker", TimeoutMs: 1000})
	if err != nil || a.Status != AwaitProofResponse_CANCELLED {
		t.Fatalf("cancelled running job: %v %v", a, err)
	}
	if _, err := tcpCli.CancelProof(c, &CancelProofRequest{JobId: "no-such-job"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown job: %v", err)
	}
	for _, id := range prio {
		a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: id})
		if err != nil || a.Status != AwaitProofResponse_FAILED || !strings.HasPrefix(a.ErrorMessage, "cuzk error 101") {
			t.Fatalf("%s: %v %v", id, a, err)
		}
	}
	// The real engine call saw its cancel token: it returned an error (cuzk error 502), not a
	// proof (cancelled within the first seconds of a ~15 s CPU proof).
	if !strings.Contains(logTail.String(), "job blocker: engine call returned after the job ended (failed)") {
		t.Fatalf("the cancelled engine call did not stop early:\n%s", logTail)
	}
	got := strings.Join(startOrder(append(prio, "cancel-queued", "abandoned")), ",")
	if want := "prio-CRITICAL,prio-HIGH,prio-NORMAL,prio-LOW"; got != want {
		t.Fatalf("start order %s, want %s\n%s", got, want, logTail)
	}
}

func TestBadInputGetsClearCodes(t *testing.T) {
	c := ctx(t)
	cases := []struct {
		name   string
		edit   func(r *SubmitProofRequest)
		code   codes.Code
		needle string
	}{
		{"kind unspecified", func(r *SubmitProofRequest) { r.ProofKind = ProofKind_PROOF_KIND_UNSPECIFIED }, codes.InvalidArgument, "unspecified"},
		// A PoRep request (proof type 5) sent as PoSt: 5 is a WindowPoSt V1 type, refused.
		{"winning post", func(r *SubmitProofRequest) { r.ProofKind = ProofKind_WINNING_POST }, codes.InvalidArgument, "not a winning-post proof type"},
		{"window post", func(r *SubmitProofRequest) { r.ProofKind = ProofKind_WINDOW_POST_PARTITION }, codes.Unimplemented, "WindowPoSt V1"},
		{"snap", func(r *SubmitProofRequest) { r.ProofKind = ProofKind_SNAP_DEALS_UPDATE }, codes.Unimplemented, "SNAP"},
		{"unknown kind", func(r *SubmitProofRequest) { r.ProofKind = 42 }, codes.InvalidArgument, "proof_kind 42"},
		{"unknown priority", func(r *SubmitProofRequest) { r.Priority = 9 }, codes.InvalidArgument, "priority 9"},
		{"32 GiB size", func(r *SubmitProofRequest) { r.SectorSize = 32 << 30 }, codes.InvalidArgument, "sector_size"},
		{"32 GiB proof type", func(r *SubmitProofRequest) { r.RegisteredProof = 8 }, codes.InvalidArgument, "sector_size"},
		{"V1 proof type", func(r *SubmitProofRequest) { r.RegisteredProof = 0 }, codes.InvalidArgument, "StackedDrg2KiBV1_1"},
		{"ni-porep", func(r *SubmitProofRequest) { r.RegisteredProof = 15 }, codes.Unimplemented, "NonInteractive"},
		{"empty", func(r *SubmitProofRequest) { r.VanillaProof = nil }, codes.InvalidArgument, "empty"},
		{"malformed", func(r *SubmitProofRequest) { r.VanillaProof = []byte("{\"SectorNum\": ") }, codes.InvalidArgument, "not C1 JSON"},
		{"truncated", func(r *SubmitProofRequest) { r.VanillaProof = r.VanillaProof[:len(r.VanillaProof)/2] }, codes.InvalidArgument, "not C1 JSON"},
		{"wrong sector", func(r *SubmitProofRequest) { r.SectorNumber++ }, codes.InvalidArgument, "SectorNum"},
		{"wrong miner (engine)", func(r *SubmitProofRequest) { r.MinerId++ }, codes.InvalidArgument, "cuzk error 101"},
		{"oversize", func(r *SubmitProofRequest) { r.VanillaProof = make([]byte, 9<<20) }, codes.OutOfRange, "too large"},
	}
	for _, tc := range cases {
		r := porep("bad-"+tc.name, Priority_NORMAL)
		tc.edit(r)
		_, err := unixCli.Prove(c, &ProveRequest{Submit: r})
		if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.needle) {
			t.Errorf("%s: %v, want %v containing %q", tc.name, err, tc.code, tc.needle)
		}
	}
	if _, err := unixCli.Prove(c, &ProveRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no submit: %v", err)
	}
	if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: "snap-32g"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("PreloadSRS snap: %v", err)
	}
	if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: "wpost-3g"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PreloadSRS wpost-3g: %v", err)
	}
	// A PoSt circuit whose parameter file is not in the directory.
	if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: "wpost-32g"}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("PreloadSRS wpost-32g: %v", err)
	}
	if r, err := unixCli.EvictSRS(c, &EvictSrsRequest{CircuitId: "winning-32g"}); err != nil || r.WasLoaded {
		t.Errorf("EvictSRS winning-32g: %v %v", r, err)
	}
	if _, err := unixCli.AwaitProof(c, &AwaitProofRequest{JobId: "never-submitted"}); status.Code(err) != codes.NotFound {
		t.Errorf("AwaitProof unknown: %v", err)
	}
	// The daemon keeps serving.
	if st, err := unixCli.GetStatus(c, &GetStatusRequest{}); err != nil || st.Queues[0].Pending != 0 {
		t.Fatalf("status after bad input: %v %v", st, err)
	}
}

func TestStatusAndMetrics(t *testing.T) {
	c := ctx(t)
	st, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LoadedSrs) != 1 || st.LoadedSrs[0].CircuitId != "porep-2k" || st.LoadedSrs[0].SizeBytes == 0 {
		t.Errorf("loaded SRS: %+v", st.LoadedSrs)
	}
	if st.TotalProofsCompleted == 0 || st.PinnedMemoryBytes < st.LoadedSrs[0].SizeBytes {
		t.Errorf("status: %+v", st)
	}
	m, err := unixCli.GetMetrics(c, &GetMetricsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("\ncuzk_proofs_completed_total %d\n", st.TotalProofsCompleted)
	if !strings.Contains(m.PrometheusText, want) || !strings.Contains(m.PrometheusText, `cuzk_srs_loaded_bytes{circuit_id="porep-2k"}`) {
		t.Errorf("metrics lack %q:\n%s", want, m.PrometheusText)
	}
}

// Last (tests run in source order): SIGTERM with one job running and one queued.
func TestZGracefulShutdown(t *testing.T) {
	c := ctx(t)
	type res struct {
		r   *ProveResponse
		err error
	}
	running, queued := make(chan res, 1), make(chan res, 1)
	go func() {
		r, err := tcpCli.Prove(c, &ProveRequest{Submit: porep("stop-running", Priority_NORMAL)})
		running <- res{r, err}
	}()
	waitStatus(t, func(p, r uint32) bool { return r == 1 })
	go func() {
		r, err := tcpCli.Prove(c, &ProveRequest{Submit: porep("stop-queued", Priority_NORMAL)})
		queued <- res{r, err}
	}()
	waitStatus(t, func(p, r uint32) bool { return p == 1 && r == 1 })
	if err := daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	q := <-queued
	if status.Code(q.err) != codes.Unavailable {
		t.Errorf("queued job at shutdown: %v", q.err)
	}
	r := <-running
	if r.err != nil || r.r.Result.Status != AwaitProofResponse_COMPLETED || len(r.r.Result.Proof) != 192 {
		t.Errorf("running job at shutdown: %v %v", r.r, r.err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("cuzk serve exit: %v\n%s", err, logTail)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("cuzk serve did not exit within 60 s of SIGTERM")
	}
	var last string
	for l := range stdout {
		last = l
	}
	if last != "cuzk serve: stopped (1 queued job(s) failed, 0 running job(s) failed)" {
		t.Errorf("last line %q", last)
	}
}
