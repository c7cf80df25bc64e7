//! Double-buffered host → device uploads: pass k+1's data is copied on its own copy stream while
//! the caller computes on pass k.
//!
//! Used for MSM bases streamed from host memory when they are not resident on the device (the
//! full-staging, partial and streaming tiers of [`crate::gpu::memory::alloc`]): at 2^27 that is
//! 44 GiB of parameters per partition, so the copies must run at the PCIe link's pinned rate
//! (≈ 50 GB/s on an H200 host, PCIe 5.0 x16) and hide behind the kernels. The host ranges are
//! pinned through the process-wide [`PinnedRegistry`]
//! (normally already pinned once for the whole parameter set, so this only adds a reference);
//! a range that cannot be pinned is still copied, synchronously, by the driver's staging path.
//!
//! Order of operations for passes p0, p1, … into buffers B0, B1:
//! `copy(p0→B0); [wait p0; copy(p1→B1); f(B0)]; [wait p1; copy(p2→B0); f(B1)]; …`
//! — a buffer is overwritten only after the `f` that read it returned, so `f` must leave no
//! queued work reading its slice when it returns (a blocking MSM such as
//! [`MsmWorkspace::msm_g1`](crate::gpu::kernels::msm::MsmWorkspace::msm_g1) qualifies).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::gpu::driver::device::{Device, DeviceBuffer, DeviceRepr, DeviceSlice, Event, Stream};
use crate::gpu::memory::pinned::{PinGuard, PinnedRegistry};

/// Time spent by [`for_each_pass`] waiting for uploads (the part of the copies that the
/// caller's computation did not hide), and bytes uploaded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UploadStats {
    /// Host bytes copied to the device.
    pub bytes: u64,
    /// Wall time the host waited for a copy to finish before computing on it.
    pub waited: Duration,
}

/// Waits for the copy stream on every exit path (errors and unwinding included), so no queued
/// copy can outlive the host slices borrowed by [`for_each_pass`]; owns the pins of the passes
/// in flight (at most two), which it releases only after that wait (fields drop after `drop`).
struct Drain<'a> {
    stream: &'a Stream,
    pins: [Vec<PinGuard>; 2],
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.stream.synchronize() {
            log::warn!("upload copy stream: {e}");
        }
    }
}

/// Runs `f(k, slices)` for every pass `k` of `passes`, where `slices` are pass k's `N` host
/// arrays in device memory (the `N` buffers of one of the two slots `bufs`, buffer i at least as
/// long as the longest pass's array i). Pass k+1 is uploaded on a copy stream while `f` runs on
/// pass k; `f` must not return with queued work that still reads its slices (see the module
/// docs). Empty passes are still given to `f` (as empty slices). `N` = 1 for an MSM's bases;
/// a CSR row block is three arrays (row offsets, columns, coefficient indices).
///
/// Returns `f`'s results in pass order and the [`UploadStats`].
///
/// # Errors
/// [`Error::Internal`] when a buffer is shorter than a pass; [`Error::Cuda`] from the copies;
/// whatever `f` returns (the first error stops the loop; queued copies are drained first).
pub fn for_each_pass<T: DeviceRepr, R, const N: usize>(
    dev: &Arc<Device>,
    registry: &PinnedRegistry,
    bufs: [&mut [DeviceBuffer<T>; N]; 2],
    passes: &[[&[T]; N]],
    mut f: impl FnMut(usize, [DeviceSlice<'_, T>; N]) -> Result<R>,
) -> Result<(Vec<R>, UploadStats)> {
    for i in 0..N {
        let cap = bufs[0][i].len().min(bufs[1][i].len());
        if let Some(p) = passes.iter().find(|p| p[i].len() > cap) {
            return Err(Error::internal(format!(
                "upload pass of {} elements exceeds the {cap}-element buffers",
                p[i].len()
            )));
        }
    }
    let copy = Stream::new(dev)?;
    let done = [Event::new(dev, false)?, Event::new(dev, false)?];
    let mut drain = Drain {
        stream: &copy,
        pins: [Vec::new(), Vec::new()],
    };
    let mut stats = UploadStats::default();
    let mut out = Vec::with_capacity(passes.len());
    let queue = |k: usize,
                 slot: &mut [DeviceBuffer<T>; N],
                 pins: &mut Vec<PinGuard>,
                 stats: &mut UploadStats|
     -> Result<()> {
        for (buf, &src) in slot.iter_mut().zip(&passes[k]) {
            let pin = registry.pin_slice(src);
            let mut dst = buf.slice_mut(..src.len())?;
            if pin.is_pinned() {
                // SAFETY: `src` is borrowed from `passes` for the whole call, and every return
                // path (errors and unwinding included) synchronises `copy` first (`Drain`); the
                // pin guard goes to `Drain` right below, which releases it only after that wait.
                unsafe { dst.copy_from_host_async(src, &copy)? };
                pins.push(pin);
            } else {
                // Pageable: the driver stages it synchronously (no overlap; counted as waiting).
                let t = Instant::now();
                dst.copy_from_host(src)?;
                stats.waited += t.elapsed();
            }
            stats.bytes += std::mem::size_of_val(src) as u64;
        }
        done[k % 2].record(&copy)
    };
    let [b0, b1] = bufs;
    if !passes.is_empty() {
        queue(0, b0, &mut drain.pins[0], &mut stats)?;
    }
    for k in 0..passes.len() {
        let t = Instant::now();
        done[k % 2].synchronize()?;
        stats.waited += t.elapsed();
        drain.pins[k % 2].clear(); // pass k is on the device
        let (cur, next) = if k % 2 == 0 {
            (&*b0, &mut *b1)
        } else {
            (&*b1, &mut *b0)
        };
        if k + 1 < passes.len() {
            // `next` was read by pass k−1's `f`, which has returned (no queued reads left).
            queue(k + 1, next, &mut drain.pins[(k + 1) % 2], &mut stats)?;
        }
        let mut slices = Vec::with_capacity(N);
        for (buf, src) in cur.iter().zip(&passes[k]) {
            slices.push(buf.slice(..src.len())?);
        }
        let slices: [DeviceSlice<'_, T>; N] = slices
            .try_into()
            .map_err(|_| Error::internal("upload pass: slice count"))?;
        out.push(f(k, slices)?);
    }
    Ok((out, stats))
}
