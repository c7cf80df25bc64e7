// Package daemontest drives `cuzk serve` with a Go gRPC client generated from
// daemon/proto/cuzk/v1/proving.proto (the wire contract of Curio's cuzk client): the 2 KiB
// fixture proved through the daemon and checked by `cuzk verify` (filecoin-proofs' verify_seal),
// a reused request id with other content (a new job), priority order, cancellation, a caller
// that gives up, bad input, status and metrics, WindowPoSt and WinningPoSt in Curio's request
// shapes on the 2 KiB PoSt fixture (checked by `cuzk verify-post`, filecoin-proofs'
// verify_window_post / verify_winning_post), and a graceful shutdown on SIGTERM. Three real
// PoRep proofs (~35 s each on 2 CPU cores) and three PoSt ones (~15 s in all); the queued PoRep
// jobs of the order test and the other-content jobs are ones the engine refuses at once when
// they start.
//
// Builds offline in GOPATH mode against Debian's Go packages (see daemon/go/README.md):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode CUZK_BIN=target/release/cuzk go test .
package daemontest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
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

// postFixture is the 2 KiB PoSt fixture of cuzk_dev::post_fixture as `cuzk post-fixture`
// prints it: what Curio would send for it (hex where bytes).
type postFixture struct {
	Params     string       `json:"params"`
	MinerID    uint64       `json:"miner_id"`
	SectorSize uint64       `json:"sector_size"`
	Window     uint64       `json:"window_registered_proof"`
	Winning    uint64       `json:"winning_registered_proof"`
	Randomness string       `json:"randomness"`
	Sectors    []postSector `json:"sectors"`
}

// postSector is one sector of a postFixture and its vanilla proofs for the fixture's randomness.
type postSector struct {
	Number  uint64 `json:"number"`
	CommR   string `json:"comm_r"`
	Window  string `json:"window_vanilla_proof"`
	Winning string `json:"winning_vanilla_proof"`
}

// loadPostFixture runs `cuzk post-fixture` (it makes the fixture if missing: ~80 s on 2 cores),
// with the fixture's replica also as sector `also`.
func loadPostFixture(also uint64) (postFixture, error) {
	args := []string{"post-fixture", "--also-as", fmt.Sprint(also)}
	var stderr bytes.Buffer
	cmd := exec.Command(cuzkBin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return postFixture{}, fmt.Errorf("cuzk %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var f postFixture
	if err := json.Unmarshal(out, &f); err != nil {
		return f, err
	}
	if len(f.Sectors) != 2 || f.Sectors[0].Number == f.Sectors[1].Number {
		return f, fmt.Errorf("cuzk post-fixture: not two sectors: %+v", f.Sectors)
	}
	return f, nil
}

// snapFixture is what `cuzk snap-fixture` prints: the 2 KiB SnapDeals fixture's request fields
// (a sealed sector updated with new data by filecoin-proofs, its vanilla partition proof).
type snapFixture struct {
	Params          string   `json:"params"`
	MinerID         uint64   `json:"miner_id"`
	SectorNumber    uint64   `json:"sector_number"`
	RegisteredProof uint64   `json:"registered_proof"`
	CommROld        string   `json:"comm_r_old"`
	CommRNew        string   `json:"comm_r_new"`
	CommDNew        string   `json:"comm_d_new"`
	VanillaProofs   []string `json:"vanilla_proofs"`
}

// loadSnapFixture runs `cuzk snap-fixture` (it makes the fixture if missing: ~2 min on 2 cores).
func loadSnapFixture() (snapFixture, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(cuzkBin, "snap-fixture")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return snapFixture{}, fmt.Errorf("cuzk snap-fixture: %v\n%s", err, stderr.String())
	}
	var f snapFixture
	if err := json.Unmarshal(out, &f); err != nil {
		return f, err
	}
	if len(f.VanillaProofs) != 1 {
		return f, fmt.Errorf("cuzk snap-fixture: %d vanilla proofs, want 1", len(f.VanillaProofs))
	}
	return f, nil
}

// linkParams makes dir hold every file of the given parameter directories (symbolic links):
// `cuzk serve` reads one directory, and the PoRep and PoSt fixtures have one each.
func linkParams(dir string, from ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range from {
		abs, err := filepath.Abs(d)
		if err != nil {
			return err
		}
		ents, err := os.ReadDir(abs)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := os.Symlink(filepath.Join(abs, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	fx      fixture
	pfx     postFixture
	sfx     snapFixture
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
	// The PoSt fixture's replica also as the sector after the PoRep fixture's (a number of its
	// own: a second sector, for a second WindowPoSt partition).
	if pfx, err = loadPostFixture(fx.sectorID + 1); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if sfx, err = loadSnapFixture(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	params := filepath.Join(tmp, "params")
	if err := linkParams(params, fx.paramDir, pfx.Params, sfx.Params); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sock := filepath.Join(tmp, "cuzk.sock")
	// One proof of each priority or higher at a time (the order tests need it); 8 MiB messages
	// (the oversize test).
	daemon = exec.Command(cuzkBin, "serve", "--listen", "unix://"+sock, "--listen", "127.0.0.1:0",
		"--params", params, "--backend", "cpu", "--jobs", "1", "--max-message-size", "8MiB",
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
//
// The priority order is that of Curio's kinds at the priorities it sends them: WinningPoSt
// CRITICAL, WindowPoSt HIGH (two partitions of one deadline: one request id), PoRep NORMAL (and
// a LOW one). They are submitted lowest first and must start highest first: in arrival order
// (priorities ignored) the PoRep jobs would start first and the WinningPoSt last. The blocker is
// CRITICAL because with --jobs 1 a job starts when no job of its priority or higher runs: a HIGH
// or CRITICAL job would start at once beside a running NORMAL one. The PoSt jobs are real
// proofs, checked by the PoSt tests below (their requests attach to these jobs).
func TestQueueOrderCancelAndAbandon(t *testing.T) {
	c := ctx(t)
	// CRITICAL: every later job waits for it (a job of a lower priority would not hold them).
	if _, err := tcpCli.SubmitProof(c, porep("blocker", Priority_CRITICAL)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, func(p, r uint32) bool { return r == 1 })
	// Priority: submitted lowest first; they must start highest first. The PoRep jobs are
	// refused by the engine at once when they start (another miner's).
	randomness := unhex(t, pfx.Randomness)
	var prio []string
	for _, r := range []*SubmitProofRequest{
		wrongMiner("prio-LOW", Priority_LOW),
		wrongMiner("prio-NORMAL", Priority_NORMAL),
		windowPoSt(randomness, unhex(t, pfx.Sectors[0].Window)),
		windowPoSt(randomness, unhex(t, pfx.Sectors[1].Window)),
		winningPoSt(randomness, unhex(t, pfx.Sectors[0].Winning)),
	} {
		s, err := tcpCli.SubmitProof(c, r)
		if err != nil {
			t.Fatalf("%s: %v", r.RequestId, err)
		}
		prio = append(prio, s.JobId)
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
	// Precondition: the five wait together behind the running proof.
	if st, err := tcpCli.GetStatus(c, &GetStatusRequest{}); err != nil || pending(t) != 5 || st.Queues[0].InProgress != 1 {
		t.Fatalf("the blocker ended before the others were queued: %v %v", st, err)
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
	for i, id := range prio {
		a, err := tcpCli.AwaitProof(c, &AwaitProofRequest{JobId: id})
		if i < 2 && (err != nil || a.Status != AwaitProofResponse_FAILED || !strings.HasPrefix(a.ErrorMessage, "cuzk error 101")) ||
			i >= 2 && (err != nil || a.Status != AwaitProofResponse_COMPLETED || len(a.Proof) != 192) {
			t.Fatalf("%s: %v %v", id, a, err)
		}
	}
	// The real engine call saw its cancel token: it returned an error (cuzk error 502), not a
	// proof. (On the CPU backend a partition's prover section, NTT and MSMs, has no checkpoint
	// inside: a cancel that lands in it waits for its end, most of a CPU proof.)
	if !strings.Contains(logTail.String(), "job blocker: engine call returned after the job ended (failed)") {
		t.Fatalf("the cancelled engine call made a proof:\n%s", logTail)
	}
	// The daemon's stderr reaches logTail through a pipe: its last lines may come after the
	// answers.
	for deadline := time.Now().Add(10 * time.Second); len(startOrder(prio)) < len(prio) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	got := strings.Join(startOrder(append(prio, "cancel-queued", "abandoned")), "\n")
	want := strings.Join([]string{prio[4], prio[2], prio[3], "prio-NORMAL", "prio-LOW"}, "\n")
	if got != want {
		t.Fatalf("start order\n%s\nwant (WinningPoSt, WindowPoSt partitions, PoRep NORMAL, LOW)\n%s\n%s", got, want, logTail)
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
		{"snap", func(r *SubmitProofRequest) { r.ProofKind = ProofKind_SNAP_DEALS_UPDATE }, codes.InvalidArgument, "registered update proof 5"},
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
	if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: "snap-3g"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PreloadSRS snap-3g: %v", err)
	}
	if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: "wpost-3g"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PreloadSRS wpost-3g: %v", err)
	}
	// PoSt and SnapDeals circuits whose parameter files are not in the directory.
	for _, id := range []string{"wpost-32g", "snap-32g"} {
		if _, err := unixCli.PreloadSRS(c, &PreloadSrsRequest{CircuitId: id}); status.Code(err) != codes.FailedPrecondition {
			t.Errorf("PreloadSRS %s: %v", id, err)
		}
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

// After the order test the PoSt sets its jobs loaded are there too (each kept beside porep-2k).
func TestStatusAndMetrics(t *testing.T) {
	c := ctx(t)
	st, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	var sum uint64
	for _, s := range st.LoadedSrs {
		ids = append(ids, s.CircuitId)
		sum += s.SizeBytes
		if s.SizeBytes == 0 {
			t.Errorf("loaded SRS: %+v", st.LoadedSrs)
		}
	}
	if got := strings.Join(ids, ","); got != "porep-2k" && got != "porep-2k,winning-2k,wpost-2k" {
		t.Errorf("loaded SRS: %+v", st.LoadedSrs)
	}
	if st.TotalProofsCompleted == 0 || st.PinnedMemoryBytes < sum {
		t.Errorf("status: %+v", st)
	}
	m, err := unixCli.GetMetrics(c, &GetMetricsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("\ncuzk_proofs_completed_total %d\n", st.TotalProofsCompleted)}
	for _, id := range ids {
		want = append(want, fmt.Sprintf(`cuzk_srs_loaded_bytes{circuit_id="%s"}`, id))
	}
	for _, w := range want {
		if !strings.Contains(m.PrometheusText, w) {
			t.Errorf("metrics lack %q:\n%s", w, m.PrometheusText)
		}
	}
}

// unhex decodes the hex of `cuzk post-fixture`.
func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// windowPoSt is the request Curio's WindowPoStCuzk sends for one partition of a deadline. Its
// wdpost task proves each partition of the chain on its own, as partition 0 of its own call: so
// every partition of a deadline comes with partition_index 0 and the same request id,
// wdpost-<miner>-0-<the first 8 bytes of the randomness, Go's %d of a []byte: "[99 117 ...]">.
// Only the vanilla proofs (its sectors) tell two partitions apart.
func windowPoSt(randomness []byte, vanilla ...[]byte) *SubmitProofRequest {
	return &SubmitProofRequest{
		RequestId:       fmt.Sprintf("wdpost-%d-0-%d", pfx.MinerID, randomness[:8]),
		ProofKind:       ProofKind_WINDOW_POST_PARTITION,
		SectorSize:      pfx.SectorSize,
		RegisteredProof: pfx.Window, // abi.RegisteredPoStProof_StackedDrgWindow2KiBV1_1
		Priority:        Priority_HIGH,
		VanillaProofs:   vanilla,
		MinerId:         pfx.MinerID,
		Randomness:      randomness,
		PartitionIndex:  0,
	}
}

// winningPoSt is the request Curio's WinningPoStCuzk sends (no sector number, no partition).
func winningPoSt(randomness []byte, vanilla ...[]byte) *SubmitProofRequest {
	return &SubmitProofRequest{
		RequestId:       fmt.Sprintf("winpost-%d-%x", pfx.MinerID, randomness[:8]),
		ProofKind:       ProofKind_WINNING_POST,
		SectorSize:      pfx.SectorSize,
		RegisteredProof: pfx.Winning, // abi.RegisteredPoStProof_StackedDrgWinning2KiBV1
		Priority:        Priority_CRITICAL,
		VanillaProofs:   vanilla,
		MinerId:         pfx.MinerID,
		Randomness:      randomness,
	}
}

// verifyPost runs `cuzk verify-post` (filecoin-proofs' verify_window_post or
// verify_winning_post, by the proof type) on proof, for randomness and sectors; returns its exit
// code (0 accepted, 51 rejected).
func verifyPost(t *testing.T, registered uint64, randomness []byte, proof []byte, sectors ...postSector) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proof.bin")
	if err := os.WriteFile(p, proof, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"verify-post", "--registered-proof", fmt.Sprint(registered),
		"--randomness", hex.EncodeToString(randomness), "--prover-id", fmt.Sprintf("f0%d", pfx.MinerID),
		"--params", pfx.Params, "--proof", p}
	for _, s := range sectors {
		args = append(args, "--sector", fmt.Sprintf("%d:%s", s.Number, s.CommR))
	}
	out, err := exec.Command(cuzkBin, args...).CombinedOutput()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("cuzk verify-post: exit %d: %s", ee.ExitCode(), out)
		return ee.ExitCode()
	}
	t.Fatalf("cuzk verify-post: %v", err)
	return -1
}

// flipped is proof with one bit of byte i flipped.
func flipped(proof []byte, i int) []byte {
	b := append([]byte(nil), proof...)
	b[i] ^= 1
	return b
}

// pending is the number of queued jobs of every kind.
func pending(t *testing.T) uint32 {
	t.Helper()
	st, err := tcpCli.GetStatus(ctx(t), &GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var n uint32
	for _, q := range st.Queues {
		n += q.Pending
	}
	return n
}

// proveAll runs Prove for each request at once (as Curio's tasks call it) on both clients.
func proveAll(t *testing.T, reqs ...*SubmitProofRequest) []*AwaitProofResponse {
	t.Helper()
	out := make([]*AwaitProofResponse, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func(i int, r *SubmitProofRequest) {
			defer wg.Done()
			cli := unixCli
			if i%2 == 1 {
				cli = tcpCli
			}
			resp, err := cli.Prove(ctx(t), &ProveRequest{Submit: r})
			if err == nil {
				out[i] = resp.Result
			}
			errs[i] = err
		}(i, r)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Prove %s (request %d): %v\n%s", reqs[i].RequestId, i, err, logTail)
		}
		if r := out[i]; r.Status != AwaitProofResponse_COMPLETED || len(r.Proof) != 192 {
			t.Fatalf("request %d: %v, %d proof bytes: %s", i, r.Status, len(r.Proof), r.ErrorMessage)
		}
	}
	return out
}

// Two partitions of one deadline as Curio sends them: the same request id and partition index,
// sent at once (attached to the jobs of TestQueueOrderCancelAndAbandon, or proved here); the
// second sector is the fixture's replica under another number (PoSt knows a sector by its number
// and comm_r only). Each gets a job and a proof of its own, which verify_window_post accepts for
// its partition's sector and rejects for the other's.
func TestWindowPoStPartitionsOfOneDeadlineGetTheirOwnProofs(t *testing.T) {
	randomness := unhex(t, pfx.Randomness)
	a, b := pfx.Sectors[0], pfx.Sectors[1]
	reqs := []*SubmitProofRequest{windowPoSt(randomness, unhex(t, a.Window)), windowPoSt(randomness, unhex(t, b.Window))}
	if reqs[0].RequestId != reqs[1].RequestId || !strings.HasPrefix(reqs[0].RequestId, fmt.Sprintf("wdpost-%d-0-[", pfx.MinerID)) {
		t.Fatalf("request ids %q, %q", reqs[0].RequestId, reqs[1].RequestId)
	}
	res := proveAll(t, reqs...)
	id := reqs[0].RequestId
	ids := []string{res[0].JobId, res[1].JobId}
	if ids[0] == ids[1] || !(ids[0] == id && strings.HasPrefix(ids[1], id+"#") || ids[1] == id && strings.HasPrefix(ids[0], id+"#")) {
		t.Fatalf("job ids %q: not one job each under request id %q", ids, id)
	}
	if bytes.Equal(res[0].Proof, res[1].Proof) {
		t.Fatalf("both partitions got the same proof")
	}
	for i, own := range []postSector{a, b} {
		other := []postSector{b, a}[i]
		if c := verifyPost(t, pfx.Window, randomness, res[i].Proof, own); c != 0 {
			t.Errorf("partition %d (sector %d): verify_window_post exit %d, want 0", i, own.Number, c)
		}
		if c := verifyPost(t, pfx.Window, randomness, res[i].Proof, other); c != 51 {
			t.Errorf("partition %d's proof for sector %d: verify_window_post exit %d, want 51", i, other.Number, c)
		}
	}
	if c := verifyPost(t, pfx.Window, randomness, flipped(res[0].Proof, 100), a); c != 51 {
		t.Errorf("a flipped byte: verify_window_post exit %d, want 51", c)
	}
}

// WinningPoSt (attached to the job of TestQueueOrderCancelAndAbandon, or proved here): verify_winning_post
// accepts its proof for the challenged sector, not with a flipped byte nor for another sector.
func TestWinningPoStVerifies(t *testing.T) {
	randomness := unhex(t, pfx.Randomness)
	s := pfx.Sectors[0]
	r := proveAll(t, winningPoSt(randomness, unhex(t, s.Winning)))[0]
	if r.JobId != fmt.Sprintf("winpost-%d-%x", pfx.MinerID, randomness[:8]) {
		t.Errorf("job id %q", r.JobId)
	}
	if c := verifyPost(t, pfx.Winning, randomness, r.Proof, s); c != 0 {
		t.Fatalf("verify_winning_post exit %d, want 0", c)
	}
	if c := verifyPost(t, pfx.Winning, randomness, flipped(r.Proof, 100), s); c != 51 {
		t.Fatalf("a flipped byte: verify_winning_post exit %d, want 51", c)
	}
	// The same proof as another sector's (the challenges differ): rejected.
	if c := verifyPost(t, pfx.Winning, randomness, r.Proof, pfx.Sectors[1]); c != 51 {
		t.Fatalf("for sector %d: verify_winning_post exit %d, want 51", pfx.Sectors[1].Number, c)
	}
}

func TestBadPoStInputIsRefused(t *testing.T) {
	c := ctx(t)
	randomness := unhex(t, pfx.Randomness)
	s := pfx.Sectors[0]
	window := func() *SubmitProofRequest { return windowPoSt(randomness, unhex(t, s.Window)) }
	winning := func() *SubmitProofRequest { return winningPoSt(randomness, unhex(t, s.Winning)) }
	cases := []struct {
		name   string
		req    *SubmitProofRequest
		edit   func(r *SubmitProofRequest)
		needle string
	}{
		{"window: winning proof type", window(), func(r *SubmitProofRequest) { r.RegisteredProof = pfx.Winning }, "not a window-post proof type"},
		{"winning: window proof type", winning(), func(r *SubmitProofRequest) { r.RegisteredProof = pfx.Window }, "not a winning-post proof type"},
		{"window: no vanilla proofs", window(), func(r *SubmitProofRequest) { r.VanillaProofs = nil }, "no vanilla proofs"},
		{"winning: an empty vanilla proof", winning(), func(r *SubmitProofRequest) { r.VanillaProofs = [][]byte{{}} }, "vanilla proof 0 (0 bytes)"},
		{"window: truncated vanilla proof", window(), func(r *SubmitProofRequest) { r.VanillaProofs[0] = r.VanillaProofs[0][:100] }, "vanilla proof 0 (100 bytes)"},
		{"winning: a window vanilla proof", winning(), func(r *SubmitProofRequest) { r.VanillaProofs = [][]byte{unhex(t, s.Window)} }, "vanilla proof"},
		{"window: 31-byte randomness", window(), func(r *SubmitProofRequest) { r.Randomness = r.Randomness[:31] }, "randomness of 31 bytes"},
		{"winning: no randomness", winning(), func(r *SubmitProofRequest) { r.Randomness = nil }, "randomness of 0 bytes"},
		{"window: C1 in vanilla_proof", window(), func(r *SubmitProofRequest) { r.VanillaProof = wrap(fx.c1, fx.sectorID, 2048) }, "vanilla_proof is set"},
	}
	before, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		tc.edit(tc.req)
		tc.req.RequestId = "bad-post-" + tc.name
		_, err := unixCli.Prove(c, &ProveRequest{Submit: tc.req})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.needle) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", tc.name, err, tc.needle)
		}
	}
	// Refused before they were queued: nothing failed, nothing waits.
	after, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil || after.TotalProofsFailed != before.TotalProofsFailed || pending(t) != 0 {
		t.Fatalf("status after bad PoSt input: %v %v", after, err)
	}
}

// commitmentCID is the binary CID (go-cid's Cid.Bytes()) of a Filecoin commitment as
// go-fil-commcid makes it: version 1, the codec and the multihash code as unsigned varints, the
// digest's length, the 32-byte commitment. Curio's ProveUpdateCuzk puts these in the commitment
// fields (key.Bytes(), sealed.Bytes(), unsealed.Bytes()).
func commitmentCID(codec, multihash uint64, comm []byte) []byte {
	b := []byte{1}
	b = binary.AppendUvarint(b, codec)
	b = binary.AppendUvarint(b, multihash)
	b = append(b, byte(len(comm)))
	return append(b, comm...)
}

// sealedCID and unsealedCID: a replica commitment (fil-commitment-sealed 0xf102,
// poseidon-bls12_381-a2-fc1 0xb401; 40 bytes) and a data commitment (fil-commitment-unsealed
// 0xf101, sha2-256-trunc254-padded 0x1012; 39 bytes).
func sealedCID(t *testing.T, h string) []byte   { return commitmentCID(0xf102, 0xb401, unhex(t, h)) }
func unsealedCID(t *testing.T, h string) []byte { return commitmentCID(0xf101, 0x1012, unhex(t, h)) }

// snapDeals is the request Curio's ProveUpdateCuzk sends for the fixture: kind
// SNAP_DEALS_UPDATE, priority NORMAL, request id snap-<miner>-<sector>, one vanilla proof per
// partition, the three commitments as CIDs, and sector size 0 (as proof-share jobs send it: the
// daemon takes it from the proof type).
func snapDeals(t *testing.T) *SubmitProofRequest {
	vanilla := make([][]byte, len(sfx.VanillaProofs))
	for i, v := range sfx.VanillaProofs {
		vanilla[i] = unhex(t, v)
	}
	return &SubmitProofRequest{
		RequestId:       fmt.Sprintf("snap-%d-%d", sfx.MinerID, sfx.SectorNumber),
		ProofKind:       ProofKind_SNAP_DEALS_UPDATE,
		SectorSize:      0,
		RegisteredProof: sfx.RegisteredProof, // abi.RegisteredUpdateProof_StackedDrg2KiBV1
		Priority:        Priority_NORMAL,
		VanillaProofs:   vanilla,
		SectorNumber:    sfx.SectorNumber,
		MinerId:         sfx.MinerID,
		CommROld:        sealedCID(t, sfx.CommROld),
		CommRNew:        sealedCID(t, sfx.CommRNew),
		CommDNew:        unsealedCID(t, sfx.CommDNew),
	}
}

// verifySnap runs `cuzk verify-snap` (filecoin-proofs-api's verify_empty_sector_update_proof) on
// proof with the fixture's commitments, comm_r_new replaced by commRNew; returns its exit code
// (0 accepted, 51 rejected).
func verifySnap(t *testing.T, proof []byte, commRNew string) int {
	t.Helper()
	p := filepath.Join(t.TempDir(), "proof.bin")
	if err := os.WriteFile(p, proof, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cuzkBin, "verify-snap", "--registered-proof", fmt.Sprint(sfx.RegisteredProof),
		"--comm-r-old", sfx.CommROld, "--comm-r-new", commRNew, "--comm-d-new", sfx.CommDNew,
		"--params", sfx.Params, "--proof", p).CombinedOutput()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		t.Logf("cuzk verify-snap: exit %d: %s", ee.ExitCode(), out)
		return ee.ExitCode()
	}
	t.Fatalf("cuzk verify-snap: %v", err)
	return -1
}

// SnapDeals in Curio's request shape: verify_empty_sector_update_proof accepts the daemon's
// proof, and rejects it with a flipped byte or for another comm_r_new (Curio does not check the
// proof it gets back: the daemon's own check is what stands between a wrong proof and the chain).
func TestSnapDealsInCurioShapeVerifies(t *testing.T) {
	req := snapDeals(t)
	r := proveAll(t, req)[0]
	if r.JobId != req.RequestId {
		t.Errorf("job id %q, want %q", r.JobId, req.RequestId)
	}
	if c := verifySnap(t, r.Proof, sfx.CommRNew); c != 0 {
		t.Fatalf("verify_empty_sector_update_proof exit %d, want 0", c)
	}
	if c := verifySnap(t, flipped(r.Proof, 100), sfx.CommRNew); c != 51 {
		t.Fatalf("a flipped byte: verify_empty_sector_update_proof exit %d, want 51", c)
	}
	other := unhex(t, sfx.CommRNew)
	other[0] ^= 1
	if c := verifySnap(t, r.Proof, hex.EncodeToString(other)); c != 51 {
		t.Fatalf("another comm_r_new: verify_empty_sector_update_proof exit %d, want 51", c)
	}
}

func TestBadSnapInputIsRefused(t *testing.T) {
	c := ctx(t)
	cases := []struct {
		name   string
		edit   func(r *SubmitProofRequest)
		needle string
	}{
		{"two partition proofs", func(r *SubmitProofRequest) { r.VanillaProofs = append(r.VanillaProofs, r.VanillaProofs[0]) }, "2 vanilla proofs"},
		{"no vanilla proofs", func(r *SubmitProofRequest) { r.VanillaProofs = nil }, "0 vanilla proofs"},
		{"truncated vanilla proof", func(r *SubmitProofRequest) { r.VanillaProofs[0] = r.VanillaProofs[0][:100] }, "vanilla proof 0 (100 bytes)"},
		{"31-byte comm_r_old", func(r *SubmitProofRequest) { r.CommROld = r.CommROld[:31] }, "comm_r_old of 31 bytes"},
		{"no comm_d_new", func(r *SubmitProofRequest) { r.CommDNew = nil }, "comm_d_new of 0 bytes"},
		{"the unsealed CID as comm_r_old", func(r *SubmitProofRequest) { r.CommROld = r.CommDNew }, "comm_r_old of 39 bytes"},
		{"another comm_r_new", func(r *SubmitProofRequest) { r.CommRNew[8] ^= 1 }, "do not verify"},
		{"8 MiB sector size", func(r *SubmitProofRequest) { r.SectorSize = 8 << 20 }, "sector_size 8388608"},
		{"32 GiB proof type", func(r *SubmitProofRequest) { r.RegisteredProof = 3 }, "expected one per partition (16)"},
		{"C1 in vanilla_proof", func(r *SubmitProofRequest) { r.VanillaProof = wrap(fx.c1, fx.sectorID, 2048) }, "vanilla_proof is set"},
	}
	before, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		req := snapDeals(t)
		tc.edit(req)
		req.RequestId = "bad-snap-" + tc.name
		_, err := unixCli.Prove(c, &ProveRequest{Submit: req})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.needle) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", tc.name, err, tc.needle)
		}
	}
	after, err := unixCli.GetStatus(c, &GetStatusRequest{})
	if err != nil || after.TotalProofsFailed != before.TotalProofsFailed || pending(t) != 0 {
		t.Fatalf("status after bad SnapDeals input: %v %v", after, err)
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
