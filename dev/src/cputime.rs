//! The CPU time of this process, for the examples that report core-seconds.

/// CPU time of this process so far (user + system, all threads), in seconds, from
/// `/proc/self/stat` (fields 14 and 15, in clock ticks of 1/100 s on Linux); 0 where the file
/// cannot be read.
pub fn process_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) may hold spaces: count from the closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // `rest` starts at field 3: utime is field 14, stime field 15.
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}
