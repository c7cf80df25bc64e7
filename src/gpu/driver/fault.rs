//! Device faults and stage deadlines: which CUDA errors poison a context, and how a wait that
//! never ends becomes an error.
//!
//! - A **sticky** error ([`is_sticky`]: illegal address, launch failure, uncorrectable ECC, …)
//!   leaves the CUDA context unusable for the rest of the process: every later call on it fails
//!   the same way. The device layer marks the device *retired* when it sees one, returns
//!   [`Error::Cuda`] with `fault: Some(DeviceFault::Sticky)`, and refuses every later call on that
//!   device; the scheduler ([`crate::scheduler`]) then moves the device's partitions elsewhere or
//!   fails them typed, and never sends it work again.
//! - A **stage deadline** ([`stage_deadline`]) bounds every wait the calling thread makes for the
//!   device (stream and event synchronisation, synchronous copies) while the guard lives: the
//!   wait polls ([`wait_until`], `cuEventQuery`) instead of blocking, and past the deadline
//!   returns [`Error::Cuda`] with `fault: Some(DeviceFault::Timeout)`; the device is retired too,
//!   since the work that hangs still owns its buffers. The GPU backend opens one deadline per
//!   stage with the engine's `stage_timeout`
//!   ([`crate::config::EngineConfig::stage_timeout`], `CUZK_STAGE_TIMEOUT`, default 600 s).
//!
//! This module is plain Rust (no driver calls), so the policy is unit-tested without a GPU.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::error::{DeviceFault, Error, Result};

/// CUDA driver statuses after which the context is unusable (`CUresult` values of `cuda.h`):
/// 214 `ECC_UNCORRECTABLE`, 700 `ILLEGAL_ADDRESS`, 702 `LAUNCH_TIMEOUT`, 714
/// `HARDWARE_STACK_ERROR`, 715 `ILLEGAL_INSTRUCTION`, 716 `MISALIGNED_ADDRESS`, 717
/// `INVALID_ADDRESS_SPACE`, 718 `INVALID_PC`, 719 `LAUNCH_FAILED`, 999 `UNKNOWN` (the driver's
/// answer after an Xid it cannot attribute).
pub const STICKY_CODES: [i32; 10] = [214, 700, 702, 714, 715, 716, 717, 718, 719, 999];

/// Whether the driver status `code` poisons the context (see [`STICKY_CODES`]).
pub fn is_sticky(code: i32) -> bool {
    STICKY_CODES.contains(&code)
}

thread_local! {
    static DEADLINE: Cell<Option<(Instant, &'static str, Duration)>> = const { Cell::new(None) };
}

/// Restores the calling thread's previous deadline when dropped (see [`stage_deadline`]).
#[must_use = "the deadline holds only while the guard lives"]
#[derive(Debug)]
pub struct DeadlineGuard {
    prev: Option<(Instant, &'static str, Duration)>,
}

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.prev));
    }
}

/// Bounds the calling thread's device waits by `timeout` from now, for stage `stage` (named in
/// the error), until the guard drops. `None` leaves waits unbounded. Nested guards replace the
/// deadline and restore the outer one when they drop.
pub fn stage_deadline(stage: &'static str, timeout: Option<Duration>) -> DeadlineGuard {
    let prev = DEADLINE.with(|d| d.get());
    DEADLINE.with(|d| d.set(timeout.map(|t| (Instant::now() + t, stage, t))));
    DeadlineGuard { prev }
}

/// The calling thread's deadline: `(instant, stage, timeout)`, if a [`stage_deadline`] guard
/// is live.
pub fn current_deadline() -> Option<(Instant, &'static str, Duration)> {
    DEADLINE.with(|d| d.get())
}

/// The timeout error of stage `stage` on `device` after `timeout`, waiting in `call`.
pub fn timeout_error(device: usize, call: &str, stage: &str, timeout: Duration) -> Error {
    Error::Cuda {
        device,
        call: call.to_string(),
        message: format!(
            "stage {stage} did not finish within its {:.3} s timeout (CUZK_STAGE_TIMEOUT); \
             the device is retired",
            timeout.as_secs_f64()
        ),
        fault: Some(DeviceFault::Timeout),
    }
}

/// Polls `done` until it returns `Ok(true)` or the deadline passes: first spinning briefly,
/// then sleeping 20 µs, doubling up to 1 ms between polls (a finished kernel is noticed within
/// ~1 ms; a hung one costs no CPU).
///
/// # Errors
/// What `done` returns, or [`timeout_error`] (`fault: Some(Timeout)`) past the deadline.
pub fn wait_until(
    device: usize,
    call: &str,
    deadline: (Instant, &'static str, Duration),
    mut done: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let mut pause = Duration::from_micros(20);
    for spin in 0u32.. {
        if done()? {
            return Ok(());
        }
        if Instant::now() >= deadline.0 {
            return Err(timeout_error(device, call, deadline.1, deadline.2));
        }
        if spin >= 64 {
            std::thread::sleep(pause.min(deadline.0.saturating_duration_since(Instant::now())));
            pause = (pause * 2).min(Duration::from_millis(1));
        } else {
            std::hint::spin_loop();
        }
    }
    Ok(())
}

/// Whether `e` says the device it names can no longer be used (a sticky error or a timeout).
#[cfg(any(test, feature = "internals"))]
pub fn is_fault(e: &Error) -> bool {
    matches!(e, Error::Cuda { fault: Some(_), .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sticky_codes() {
        for c in [700, 719, 214, 714, 715, 716, 718] {
            assert!(is_sticky(c), "{c}");
        }
        for c in [0, 1, 2, 600, 712, 713, 100] {
            assert!(!is_sticky(c), "{c}");
        }
    }

    #[test]
    fn a_hung_wait_times_out_typed() {
        let _g = stage_deadline("msm-h", Some(Duration::from_millis(60)));
        let d = current_deadline().unwrap();
        assert_eq!(d.1, "msm-h");
        let t0 = Instant::now();
        let mut polls = 0u64;
        let r = wait_until(3, "cuEventQuery", d, || {
            polls += 1;
            Ok(false)
        });
        let el = t0.elapsed();
        assert!(el >= Duration::from_millis(60), "{el:?}");
        assert!(el < Duration::from_secs(2), "{el:?}");
        assert!(polls > 10);
        match r {
            Err(
                ref e @ Error::Cuda {
                    device: 3,
                    ref message,
                    fault: Some(DeviceFault::Timeout),
                    ..
                },
            ) => {
                assert!(message.contains("msm-h"), "{message}");
                assert!(is_fault(e));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[test]
    fn a_wait_that_finishes_returns_ok_and_errors_pass_through() {
        let d = (
            Instant::now() + Duration::from_secs(5),
            "ntt",
            Duration::from_secs(5),
        );
        let mut k = 0;
        assert!(wait_until(0, "q", d, || {
            k += 1;
            Ok(k > 100)
        })
        .is_ok());
        let r = wait_until(0, "q", d, || Err(Error::internal("driver said no")));
        assert!(matches!(r, Err(Error::Internal(_))));
    }

    #[test]
    fn deadlines_nest_and_restore() {
        assert!(current_deadline().is_none());
        {
            let _a = stage_deadline("a", Some(Duration::from_secs(1)));
            {
                let _b = stage_deadline("b", None);
                assert!(current_deadline().is_none());
            }
            assert_eq!(current_deadline().unwrap().1, "a");
        }
        assert!(current_deadline().is_none());
    }
}
