//! A rate over sampled windows and the throttle time a quota violation asks for, as Kafka's
//! `SampledStat` / `Rate` and `QuotaUtils.throttleTime` compute them (`quota.window.num`
//! samples of `quota.window.size.seconds` each), so a client is throttled by Ketch exactly when
//! and for as long as Kafka would throttle it.
//!
//! Invariants: at most `samples + 1` samples are kept (one more than the window, for the sample
//! overlapping its start, as Kafka); the measured window is never shorter than `samples - 1`
//! whole windows (a new sensor's first bytes are not a huge rate) and never 0 ms.

/// `quota.window.num` and `quota.window.size.seconds`, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub samples: u32,
    pub window_ms: u64,
}

impl Window {
    /// `quota.window.num` and `quota.window.size.seconds` (Kafka's defaults 11 and 1, at least 1).
    pub fn from_properties(properties: &crate::config::Properties) -> anyhow::Result<Window> {
        Window::with_prefix(properties, "")
    }

    /// The controller mutation quota's: `controller.quota.window.num` and
    /// `controller.quota.window.size.seconds` (the same defaults).
    pub fn controller_from_properties(properties: &crate::config::Properties) -> anyhow::Result<Window> {
        Window::with_prefix(properties, "controller.")
    }

    fn with_prefix(properties: &crate::config::Properties, prefix: &str) -> anyhow::Result<Window> {
        use crate::config::int_property;
        let samples = int_property(properties, &format!("{prefix}quota.window.num"), 11, 1, 10_000)? as u32;
        let size_key = format!("{prefix}quota.window.size.seconds");
        let window_ms = int_property(properties, &size_key, 1, 1, 86_400)? as u64 * 1000;
        Ok(Window { samples, window_ms })
    }
}

impl Default for Window {
    /// Kafka's defaults: 11 samples of 1 s.
    fn default() -> Window {
        Window { samples: 11, window_ms: 1000 }
    }
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    start_ms: u64,
    last_event_ms: u64,
    value: f64,
}

impl Sample {
    fn new(now_ms: u64) -> Sample {
        Sample { start_ms: now_ms, last_event_ms: now_ms, value: 0.0 }
    }
}

/// A rate of units per second over the last `samples` windows.
#[derive(Clone, Debug)]
pub struct Rate {
    window: Window,
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    pub fn new(window: Window, now_ms: u64) -> Rate {
        assert!(window.samples >= 1 && window.window_ms >= 1, "a quota window needs a sample and a length");
        Rate { window, samples: vec![Sample::new(now_ms)], current: 0 }
    }

    /// Adds `value` at `now_ms` (Kafka's `SampledStat.record`).
    pub fn record(&mut self, value: f64, now_ms: u64) {
        if now_ms.saturating_sub(self.samples[self.current].start_ms) >= self.window.window_ms {
            self.advance(now_ms);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now_ms;
    }

    /// Takes `value` back (Kafka's unrecord of a throttled fetch: it was never sent).
    pub fn unrecord(&mut self, value: f64, now_ms: u64) {
        self.record(-value, now_ms);
    }

    fn advance(&mut self, now_ms: u64) {
        let kept = self.window.samples as usize + 1;
        self.current = (self.current + 1) % kept;
        if self.current >= self.samples.len() {
            self.samples.push(Sample::new(now_ms));
        } else {
            self.samples[self.current] = Sample::new(now_ms);
        }
        debug_assert!(self.samples.len() <= kept);
    }

    /// Resets samples whose last event is older than the whole window (`purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: u64) {
        let expire_ms = self.window.samples as u64 * self.window.window_ms;
        for sample in &mut self.samples {
            if now_ms.saturating_sub(sample.last_event_ms) >= expire_ms {
                *sample = Sample::new(now_ms);
            }
        }
    }

    /// The window the rate is measured over (Kafka's `Rate.windowSize`), at least 1 ms.
    pub fn window_ms(&mut self, now_ms: u64) -> u64 {
        self.purge(now_ms);
        let oldest = self.samples.iter().map(|s| s.start_ms).min().expect("one sample at least");
        let mut elapsed_ms = now_ms.saturating_sub(oldest);
        let full = elapsed_ms / self.window.window_ms;
        let min_full = self.window.samples as u64 - 1;
        if full < min_full {
            elapsed_ms += (min_full - full) * self.window.window_ms;
        }
        elapsed_ms.max(1)
    }

    /// Units per second now (Kafka's `Rate.measure`).
    pub fn measure(&mut self, now_ms: u64) -> f64 {
        let window_ms = self.window_ms(now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (window_ms as f64 / 1000.0)
    }

    /// The throttle time for a rate `bound` per second: 0 while the rate is within it, else how
    /// long the client must pause for the rate over the window to come back to it
    /// (`QuotaUtils.throttleTime`: (rate - bound) / bound * window, rounded).
    pub fn throttle_ms(&mut self, bound: f64, now_ms: u64) -> u64 {
        let rate = self.measure(now_ms);
        if rate <= bound {
            return 0;
        }
        let window_ms = self.window_ms(now_ms) as f64;
        ((rate - bound) / bound * window_ms).round() as u64
    }

    /// When this rate last counted something (sensors idle long enough are dropped).
    pub fn last_event_ms(&self) -> u64 {
        self.samples.iter().map(|s| s.last_event_ms).max().expect("one sample at least")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_rate_counts_its_first_bytes_over_the_whole_window() {
        let mut r = Rate::new(Window::default(), 0);
        r.record(10_000.0, 0);
        // 10 whole windows assumed: 10 kB over 10 s.
        assert_eq!(r.measure(0), 1000.0);
        assert_eq!(r.throttle_ms(2000.0, 0), 0);
        // Bound 500/s: (1000 - 500) / 500 * 10 s.
        assert_eq!(r.throttle_ms(500.0, 0), 10_000);
    }

    #[test]
    fn a_steady_rate_measures_its_value_and_old_samples_expire() {
        let w = Window { samples: 3, window_ms: 100 };
        let mut r = Rate::new(w, 0);
        for t in (0..1000).step_by(10) {
            r.record(1.0, t); // 100 per second
        }
        let m = r.measure(1000);
        assert!((m - 100.0).abs() < 15.0, "{m}");
        assert!(r.samples.len() <= 4);
        // Idle for longer than the whole window: nothing left.
        assert_eq!(r.measure(5000), 0.0);
    }

    #[test]
    fn unrecord_takes_a_value_back() {
        let mut r = Rate::new(Window::default(), 0);
        r.record(5000.0, 0);
        r.unrecord(5000.0, 0);
        assert_eq!(r.measure(0), 0.0);
    }
}
