//! Progress and timing reports: per partition, per stage, through `log` and a caller's callback.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stage of one `prove_porep_c2` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stage {
    /// Parsing and validating the C1 output: its JSON, then its vanilla proofs against its
    /// commitments (one report per call).
    Parse,
    /// Loading (or reusing) the Groth16 parameters.
    LoadParams,
    /// Circuit synthesis of one partition (CPU).
    Synthesis,
    /// H polynomial: iNTT, coset NTT, divide by Z, coset iNTT.
    Ntt,
    /// MSM over the H query (G1).
    MsmH,
    /// MSM over the L query (G1).
    MsmL,
    /// MSM over the A query (G1).
    MsmA,
    /// MSM over the B query in G1.
    MsmBG1,
    /// MSM over the B query in G2.
    MsmBG2,
    /// Host↔device transfers (GPU backend).
    Transfer,
    /// Waiting for a GPU worker / lock (GPU backend).
    Wait,
    /// Groth16 epilogue: assembling A, B, C from the MSM results.
    Epilogue,
    /// Self-verification of the proof.
    Verify,
    /// The whole call.
    Total,
    /// Loading (or recording) the compiled circuit of the proof type.
    Compile,
    /// Witness generation of one partition (compiled path; part of [`Stage::Synthesis`]).
    Witness,
    /// a, b, c = A·z, B·z, C·z of one partition (compiled path; part of [`Stage::Synthesis`]).
    Spmv,
}

impl Stage {
    /// Short lower-case name, stable (used in logs, the C ABI and bench output).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::LoadParams => "load_params",
            Stage::Synthesis => "synthesis",
            Stage::Ntt => "ntt",
            Stage::MsmH => "msm_h",
            Stage::MsmL => "msm_l",
            Stage::MsmA => "msm_a",
            Stage::MsmBG1 => "msm_b_g1",
            Stage::MsmBG2 => "msm_b_g2",
            Stage::Transfer => "transfer",
            Stage::Wait => "wait",
            Stage::Epilogue => "epilogue",
            Stage::Verify => "verify",
            Stage::Total => "total",
            Stage::Compile => "compile",
            Stage::Witness => "witness",
            Stage::Spmv => "spmv",
        }
    }
}

/// One progress report: a stage finished, for one partition (`None`: the whole call).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ProgressEvent {
    /// Partition index, or `None` for call-wide stages.
    pub partition: Option<usize>,
    /// Which stage finished.
    pub stage: Stage,
    /// How long it took.
    pub elapsed: Duration,
}

/// A caller's progress callback. Called from worker threads: must be `Send + Sync` and quick.
pub type ProgressFn = Arc<dyn Fn(&ProgressEvent) + Send + Sync>;

/// Timings of stages, in the order they were recorded (a stage may appear once per partition).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Timings {
    /// `(partition, stage, elapsed)` entries.
    pub entries: Vec<(Option<usize>, Stage, Duration)>,
}

impl Timings {
    /// Sum of all entries of `stage` (over partitions).
    pub fn total(&self, stage: Stage) -> Duration {
        self.entries
            .iter()
            .filter(|e| e.1 == stage)
            .map(|e| e.2)
            .sum()
    }

    /// Entries of one partition.
    pub fn of_partition(&self, partition: usize) -> impl Iterator<Item = (Stage, Duration)> + '_ {
        self.entries
            .iter()
            .filter(move |e| e.0 == Some(partition))
            .map(|e| (e.1, e.2))
    }
}

/// Sends timing reports to `log` (info level), an optional callback, and a [`Timings`] record.
#[derive(Clone, Default)]
pub struct Reporter {
    callback: Option<ProgressFn>,
}

impl Reporter {
    /// A reporter that also calls `callback` for each event.
    pub fn new(callback: Option<ProgressFn>) -> Self {
        Reporter { callback }
    }

    /// Reports that `stage` of `partition` took `elapsed`, and records it in `timings`.
    pub fn report(
        &self,
        timings: &mut Timings,
        partition: Option<usize>,
        stage: Stage,
        elapsed: Duration,
    ) {
        match partition {
            Some(p) => log::info!(
                "partition {p}: {} {:.3} s",
                stage.name(),
                elapsed.as_secs_f64()
            ),
            None => log::info!("{} {:.3} s", stage.name(), elapsed.as_secs_f64()),
        }
        if let Some(cb) = &self.callback {
            cb(&ProgressEvent {
                partition,
                stage,
                elapsed,
            });
        }
        timings.entries.push((partition, stage, elapsed));
    }

    /// Runs `f`, reports its duration as `stage`, and returns its result.
    pub fn time<T>(
        &self,
        timings: &mut Timings,
        partition: Option<usize>,
        stage: Stage,
        f: impl FnOnce() -> T,
    ) -> T {
        let t = Instant::now();
        let out = f();
        self.report(timings, partition, stage, t.elapsed());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn reporter_records_and_calls_back() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let r = Reporter::new(Some(Arc::new(move |e: &ProgressEvent| {
            s2.lock().unwrap().push((e.partition, e.stage))
        })));
        let mut t = Timings::default();
        let v = r.time(&mut t, Some(3), Stage::Ntt, || 41 + 1);
        r.report(&mut t, None, Stage::Total, Duration::from_millis(5));
        assert_eq!(v, 42);
        assert_eq!(
            *seen.lock().unwrap(),
            vec![(Some(3), Stage::Ntt), (None, Stage::Total)]
        );
        assert_eq!(t.total(Stage::Total), Duration::from_millis(5));
        assert_eq!(t.of_partition(3).count(), 1);
    }
}
