//! Listeners (TCP and Unix sockets), the daemon's life cycle, and `cuzk serve`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::transport::Server;

use crate::proto::proving_engine_server::ProvingEngineServer;
use crate::prover::{EngineProver, Prover};
use crate::request::circuit;
use crate::scheduler::{Scheduler, SchedulerConfig, Workers};
use crate::service::ProvingService;

/// Largest message Curio's client sends or accepts (its `MaxCallSendMsgSize`): 256 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 256 << 20;

/// Settings of a [`Daemon`].
#[derive(Clone, Debug)]
pub struct DaemonConfig {
    /// Addresses to listen on: `host:port` (TCP; port 0 picks one) or `unix:///path` (also
    /// `unix:/path`).
    pub listen: Vec<String>,
    /// The queue.
    pub scheduler: SchedulerConfig,
    /// Largest request or answer, bytes (larger requests get RESOURCE_EXHAUSTED).
    pub max_message_bytes: usize,
    /// On shutdown, how long running jobs may take to finish before they are failed.
    pub shutdown_grace: Duration,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            listen: vec!["127.0.0.1:9820".into()],
            scheduler: SchedulerConfig::default(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            shutdown_grace: Duration::from_secs(1800),
        }
    }
}

/// A listen address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listen {
    /// TCP `host:port`.
    Tcp(String),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl Listen {
    /// Parses `unix:///path`, `unix:/path` or `host:port`.
    ///
    /// # Errors
    /// [`cuzk::Error::InvalidConfig`] (name `--listen`) for an empty address or path.
    pub fn parse(s: &str) -> Result<Listen, cuzk::Error> {
        let bad = |reason: &str| cuzk::Error::InvalidConfig {
            name: "--listen".into(),
            value: s.into(),
            reason: reason.into(),
        };
        let s = s.trim();
        if let Some(p) = s
            .strip_prefix("unix://")
            .or_else(|| s.strip_prefix("unix:"))
        {
            if p.is_empty() {
                return Err(bad("expected unix:///path/to/socket"));
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        if s.is_empty() || !s.contains(':') {
            return Err(bad(
                "expected host:port (e.g. 127.0.0.1:9820) or unix:///path",
            ));
        }
        Ok(Listen::Tcp(s.to_string()))
    }
}

/// What a shutdown did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Queued jobs failed with UNAVAILABLE (never started).
    pub queued_failed: usize,
    /// Running jobs failed because the grace period ended before they did.
    pub running_failed: usize,
}

/// A running daemon: the scheduler, its workers and one gRPC server per listener.
pub struct Daemon {
    scheduler: Scheduler,
    workers: Option<Workers>,
    addrs: Vec<String>,
    unix_paths: Vec<PathBuf>,
    stop: watch::Sender<bool>,
    servers: Vec<JoinHandle<Result<(), tonic::transport::Error>>>,
    grace: Duration,
}

/// Binds a Unix socket at `path`, replacing a stale socket file (one nobody listens on).
fn bind_unix(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            ));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                "another process is listening on it",
            ));
        }
        std::fs::remove_file(path)?;
    }
    tokio::net::UnixListener::bind(path)
}

impl Daemon {
    /// Starts the workers and listens on every address of `cfg`. Call from a tokio runtime.
    ///
    /// # Errors
    /// [`cuzk::Error::InvalidConfig`] for a bad address; [`cuzk::Error::Io`] (naming the
    /// address) when one cannot be bound.
    pub async fn start(cfg: DaemonConfig, prover: Arc<dyn Prover>) -> Result<Daemon, cuzk::Error> {
        let listens = cfg
            .listen
            .iter()
            .map(|s| Listen::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        if listens.is_empty() {
            return Err(cuzk::Error::InvalidConfig {
                name: "--listen".into(),
                value: String::new(),
                reason: "no address to listen on".into(),
            });
        }
        let at = |a: &str| {
            let a = a.to_string();
            move |e: std::io::Error| {
                cuzk::Error::Io(std::io::Error::new(e.kind(), format!("listen on {a}: {e}")))
            }
        };
        // Bind everything before starting anything.
        enum Bound {
            Tcp(tokio::net::TcpListener),
            Unix(tokio::net::UnixListener),
        }
        let mut bound = Vec::new();
        let mut addrs = Vec::new();
        let mut unix_paths = Vec::new();
        for l in &listens {
            match l {
                Listen::Tcp(a) => {
                    let t = tokio::net::TcpListener::bind(a).await.map_err(at(a))?;
                    addrs.push(t.local_addr().map_err(at(a))?.to_string());
                    bound.push(Bound::Tcp(t));
                }
                Listen::Unix(p) => {
                    let u = bind_unix(p).map_err(at(&p.display().to_string()))?;
                    addrs.push(format!("unix://{}", p.display()));
                    unix_paths.push(p.clone());
                    bound.push(Bound::Unix(u));
                }
            }
        }
        let (scheduler, workers) = Scheduler::start(cfg.scheduler.clone(), prover);
        let service = ProvingService::new(scheduler.clone());
        let (stop, _) = watch::channel(false);
        let mut servers = Vec::new();
        for b in bound {
            let svc = ProvingEngineServer::new(service.clone())
                .max_decoding_message_size(cfg.max_message_bytes)
                .max_encoding_message_size(cfg.max_message_bytes);
            // Keepalive pings find clients that vanished without closing the connection (their
            // Prove jobs are then cancelled).
            let router = Server::builder()
                .http2_keepalive_interval(Some(Duration::from_secs(30)))
                .http2_keepalive_timeout(Some(Duration::from_secs(20)))
                .add_service(svc);
            let mut rx = stop.subscribe();
            let signal = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            servers.push(match b {
                Bound::Tcp(t) => tokio::spawn(
                    router.serve_with_incoming_shutdown(TcpListenerStream::new(t), signal),
                ),
                Bound::Unix(u) => tokio::spawn(
                    router.serve_with_incoming_shutdown(UnixListenerStream::new(u), signal),
                ),
            });
        }
        Ok(Daemon {
            scheduler,
            workers: Some(workers),
            addrs,
            unix_paths,
            stop,
            servers,
            grace: cfg.shutdown_grace,
        })
    }

    /// The bound addresses, in the order given: `ip:port` (the port chosen for port 0) or
    /// `unix:///path`.
    pub fn addrs(&self) -> &[String] {
        &self.addrs
    }

    /// The scheduler.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Shuts down gracefully: refuses new jobs (UNAVAILABLE), fails the queued ones
    /// (UNAVAILABLE: not started, submit again), lets the running ones finish for up to the
    /// grace period and fails those still running then; every waiting caller gets its answer
    /// before the servers stop. Removes the Unix socket files.
    pub async fn shutdown(mut self) -> ShutdownReport {
        let queued_failed = self.scheduler.shutdown();
        if queued_failed > 0 {
            log::warn!("shutdown: {queued_failed} queued job(s) failed (not started)");
        }
        let running = self.scheduler.snapshot().running;
        if running > 0 {
            log::info!(
                "shutdown: waiting up to {:.0} s for {running} running job(s)",
                self.grace.as_secs_f64()
            );
        }
        let s = self.scheduler.clone();
        let grace = self.grace;
        let left = tokio::task::spawn_blocking(move || s.wait_idle(grace))
            .await
            .unwrap_or(0);
        let running_failed = self.scheduler.snapshot().running_jobs.len();
        self.scheduler.stop();
        if left == 0 {
            if let Some(w) = self.workers.take() {
                let _ = tokio::task::spawn_blocking(move || w.join()).await;
            }
        } else {
            log::warn!("shutdown: {left} engine call(s) still running after the grace period");
        }
        // Let the answers of the jobs that just ended reach their callers, then stop serving.
        tokio::task::yield_now().await;
        let _ = self.stop.send(true);
        for s in self.servers.drain(..) {
            match tokio::time::timeout(Duration::from_secs(10), s).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(e))) => log::warn!("shutdown: server: {e}"),
                Ok(Err(e)) => log::warn!("shutdown: server task: {e}"),
                Err(_) => log::warn!("shutdown: a server did not stop within 10 s"),
            }
        }
        for p in &self.unix_paths {
            let _ = std::fs::remove_file(p);
        }
        ShutdownReport {
            queued_failed,
            running_failed,
        }
    }
}

/// Where partitions run (as `cuzk prove --backend`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum BackendArg {
    /// GPU if built with CUDA and a device exists, else CPU.
    Auto,
    /// CPU.
    Cpu,
    /// GPU (error without one, unless CUZK_ALLOW_CPU=1).
    Gpu,
}

fn duration_arg(s: &str) -> Result<Duration, String> {
    cuzk::config::parse_duration(s)
}

fn bytes_arg(s: &str) -> Result<usize, String> {
    let b = cuzk::config::parse_bytes(s)?;
    usize::try_from(b)
        .ok()
        .filter(|&b| b >= 1024)
        .ok_or_else(|| format!("{s:?}: expected at least 1KiB"))
}

/// The options of `cuzk serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to serve on, repeatable: host:port (TCP) or unix:///path/to/socket. Curio's
    /// Cuzk.Address setting takes the same forms.
    #[arg(long = "listen", value_name = "ADDR", default_value = "127.0.0.1:9820")]
    pub listen: Vec<String>,
    /// Directory of the Groth16 .params / .vk files (default: $FIL_PROOFS_PARAMETER_CACHE, else
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long, value_name = "DIR")]
    pub params: Option<PathBuf>,
    /// Where partitions run (default: $CUZK_BACKEND, else auto).
    #[arg(long, value_enum)]
    pub backend: Option<BackendArg>,
    /// Proofs of one priority or higher in flight at once (as `cuzk prove --jobs`; they share
    /// the engine's devices and host-memory budget): a job starts when fewer than this many
    /// jobs of its priority or higher run.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: u32,
    /// Most jobs waiting in the queue; more are refused with RESOURCE_EXHAUSTED (set Curio's
    /// Cuzk.MaxPending at or below --max-queue + --jobs).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_queue: u32,
    /// End a job not done this long after it was accepted with TIMEOUT (e.g. 45m; default:
    /// none — Curio's ProveTimeout cancels its own calls).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub job_timeout: Option<Duration>,
    /// How long finished jobs are kept for AwaitProof.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = duration_arg)]
    pub retain: Duration,
    /// On SIGINT / SIGTERM, how long running jobs may take to finish (queued jobs fail at once
    /// with UNAVAILABLE).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = duration_arg)]
    pub shutdown_grace: Duration,
    /// Largest request or answer (e.g. 256MiB, Curio's client limit; a 32 GiB C1 output is
    /// ~50 MB).
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = bytes_arg)]
    pub max_message_size: usize,
    /// Load these circuits' parameters before serving, repeatable: porep-, wpost- (WindowPoSt)
    /// or winning- (WinningPoSt) and a sector size: 32g, 64g (also 2k, 8m, 512m), e.g.
    /// porep-32g, wpost-32g, winning-32g. Each is kept while it fits the host-memory budget
    /// beside the others (the least recently used idle set goes first; winning- sets stay).
    #[arg(long = "preload", value_name = "CIRCUIT")]
    pub preload: Vec<String>,
}

/// `cuzk serve`: builds the engine, preloads, serves until SIGINT or SIGTERM, then shuts down
/// gracefully. Prints `cuzk serve: listening on <addr>` per address on stdout once serving.
///
/// # Errors
/// Engine creation, preload and listen errors (the process should exit with their code).
pub fn run(args: ServeArgs) -> Result<(), cuzk::Error> {
    let mut config = cuzk::EngineConfig::from_env()?;
    if let Some(p) = &args.params {
        config.parameter_dir = Some(p.clone());
    }
    if let Some(b) = args.backend {
        config.backend = match b {
            BackendArg::Auto => cuzk::Backend::Auto,
            BackendArg::Cpu => cuzk::Backend::Cpu,
            BackendArg::Gpu => cuzk::Backend::Gpu,
        };
    }
    let verify = cuzk::ProveOptions::from_env()?.verify;
    let preload = preload_sets(&args.preload)?;
    let engine = cuzk::Engine::new(config)?;
    let prover = Arc::new(EngineProver::new(engine, verify));
    for (id, set) in args.preload.iter().zip(preload) {
        let t = std::time::Instant::now();
        prover.preload(set)?;
        log::info!("preloaded {id} in {:.2} s", t.elapsed().as_secs_f64());
    }
    let cfg = DaemonConfig {
        listen: args.listen.clone(),
        scheduler: SchedulerConfig {
            jobs: args.jobs as usize,
            max_queue: args.max_queue as usize,
            job_timeout: args.job_timeout,
            retain: args.retain,
        },
        max_message_bytes: args.max_message_size,
        shutdown_grace: args.shutdown_grace,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cuzk-serve")
        .build()?;
    rt.block_on(async move {
        let backend = prover.backend();
        let daemon = Daemon::start(cfg, prover).await?;
        log::info!(
            "cuzk serve: backend {backend}, {} job(s) of each priority or higher at once, queue \
             of {}",
            args.jobs,
            args.max_queue
        );
        for a in daemon.addrs() {
            println!("cuzk serve: listening on {a}");
        }
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        let signal = wait_for_signal().await?;
        log::warn!("cuzk serve: {signal}: shutting down");
        let r = daemon.shutdown().await;
        println!(
            "cuzk serve: stopped ({} queued job(s) failed, {} running job(s) failed)",
            r.queued_failed, r.running_failed
        );
        Ok(())
    })
}

/// The parameter sets `--preload` names (circuit ids as `PreloadSRS` takes them:
/// [`crate::request::circuit`]).
///
/// # Errors
/// [`cuzk::Error::InvalidConfig`] naming `--preload` and the first bad id.
fn preload_sets(ids: &[String]) -> Result<Vec<cuzk::srs::ParamSet>, cuzk::Error> {
    ids.iter()
        .map(|id| {
            circuit(id).map_err(|e| cuzk::Error::InvalidConfig {
                name: "--preload".into(),
                value: id.clone(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// Waits for SIGINT or SIGTERM; returns its name.
async fn wait_for_signal() -> Result<&'static str, cuzk::Error> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(
            Listen::parse("unix:///run/curio/cuzk.sock").unwrap(),
            Listen::Unix("/run/curio/cuzk.sock".into())
        );
        assert_eq!(
            Listen::parse("unix:/tmp/c.sock").unwrap(),
            Listen::Unix("/tmp/c.sock".into())
        );
        assert_eq!(
            Listen::parse("0.0.0.0:9820").unwrap(),
            Listen::Tcp("0.0.0.0:9820".into())
        );
        for bad in ["", "unix://", "9820"] {
            assert_eq!(Listen::parse(bad).unwrap_err().code(), 104, "{bad:?}");
        }
    }

    #[test]
    fn preload_takes_the_circuit_ids_of_every_kind() {
        use filecoin_proofs_api::{RegisteredPoStProof, RegisteredSealProof};
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let sets = preload_sets(&ids(&["porep-32g", "wpost-32g", "winning-32g"])).unwrap();
        assert_eq!(
            sets,
            [
                cuzk::srs::ParamSet::Porep(RegisteredSealProof::StackedDrg32GiBV1_1),
                cuzk::srs::ParamSet::Post(RegisteredPoStProof::StackedDrgWindow32GiBV1_2),
                cuzk::srs::ParamSet::Post(RegisteredPoStProof::StackedDrgWinning32GiBV1),
            ]
        );
        let e = preload_sets(&ids(&["wpost-32g", "wpost-33g"])).unwrap_err();
        assert_eq!(e.code(), 104);
        assert!(e.to_string().contains("--preload=\"wpost-33g\""), "{e}");
    }
}
