//! Counters, gauges and histograms rendered as Prometheus text for `/metrics`. Routes
//! register theirs when they are built; updates are single atomics.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A monotonically increasing count.
#[derive(Debug, Clone, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The current count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counts by one label's value (`name{label="value"} n`), e.g. responses by status.
#[derive(Debug, Clone)]
pub struct LabelledCounter {
    label: &'static str,
    counts: Arc<Mutex<std::collections::BTreeMap<String, u64>>>,
}

impl LabelledCounter {
    /// Adds one under `value`.
    pub fn inc(&self, value: &str) {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry(value.to_string()).or_insert(0) += 1;
    }
    /// The count under `value`.
    pub fn get(&self, value: &str) -> u64 {
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        counts.get(value).copied().unwrap_or(0)
    }
    fn render(&self, out: &mut String, name: &str, help: &str) {
        use std::fmt::Write;
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} counter\n");
        let counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        for (value, n) in counts.iter() {
            // Label values are status codes and names: escape as Prometheus asks anyway.
            let value = value.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "{name}{{{}=\"{value}\"}} {n}", self.label);
        }
    }
}

/// A value that goes up and down.
#[derive(Debug, Clone, Default)]
pub struct Gauge(Arc<AtomicI64>);

impl Gauge {
    /// Adds one.
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    /// Subtracts one.
    pub fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A Prometheus histogram of seconds over fixed bucket bounds.
#[derive(Debug, Clone)]
pub struct Histogram(Arc<HistogramInner>);

#[derive(Debug)]
struct HistogramInner {
    bounds: &'static [f64],
    /// Observations ≤ each bound (not cumulative; summed when rendered).
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    /// Sum of observations in microseconds (integer, so atomics add it).
    sum_us: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self(Arc::new(HistogramInner {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
        }))
    }

    /// Records one observation of `seconds`.
    pub fn observe(&self, seconds: f64) {
        let h = &self.0;
        if let Some(i) = h.bounds.iter().position(|&b| seconds <= b) {
            h.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        h.count.fetch_add(1, Ordering::Relaxed);
        h.sum_us
            .fetch_add((seconds.max(0.0) * 1e6) as u64, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.0.count.load(Ordering::Relaxed)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        use std::fmt::Write;
        let h = &self.0;
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (b, n) in h.bounds.iter().zip(&h.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
        }
        let count = self.count();
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = h.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}\n{name}_count {count}");
    }
}

/// One registered metric.
#[derive(Debug)]
enum Entry {
    Counter {
        name: &'static str,
        help: &'static str,
        value: Counter,
    },
    Gauge {
        name: &'static str,
        help: &'static str,
        value: Gauge,
    },
    Histogram {
        name: &'static str,
        help: &'static str,
        value: Histogram,
    },
    Labelled {
        name: &'static str,
        help: &'static str,
        value: LabelledCounter,
    },
}

/// The server's metrics, in registration order.
#[derive(Debug, Default)]
pub struct Metrics {
    entries: Mutex<Vec<Entry>>,
}

impl Metrics {
    /// No metrics yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a counter (or returns the one already named `name`).
    pub fn counter(&self, name: &'static str, help: &'static str) -> Counter {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries.iter() {
            if let Entry::Counter { name: n, value, .. } = e {
                if *n == name {
                    return value.clone();
                }
            }
        }
        let value = Counter::default();
        entries.push(Entry::Counter {
            name,
            help,
            value: value.clone(),
        });
        value
    }

    /// Registers a gauge (or returns the one already named `name`).
    pub fn gauge(&self, name: &'static str, help: &'static str) -> Gauge {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries.iter() {
            if let Entry::Gauge { name: n, value, .. } = e {
                if *n == name {
                    return value.clone();
                }
            }
        }
        let value = Gauge::default();
        entries.push(Entry::Gauge {
            name,
            help,
            value: value.clone(),
        });
        value
    }

    /// Registers a counter by `label` (or returns the one already named `name`).
    pub fn labelled_counter(
        &self,
        name: &'static str,
        help: &'static str,
        label: &'static str,
    ) -> LabelledCounter {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries.iter() {
            if let Entry::Labelled { name: n, value, .. } = e {
                if *n == name {
                    return value.clone();
                }
            }
        }
        let value = LabelledCounter {
            label,
            counts: Arc::default(),
        };
        entries.push(Entry::Labelled {
            name,
            help,
            value: value.clone(),
        });
        value
    }

    /// Registers a histogram of seconds with `bounds` (or returns the one named `name`).
    pub fn histogram(
        &self,
        name: &'static str,
        help: &'static str,
        bounds: &'static [f64],
    ) -> Histogram {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        for e in entries.iter() {
            if let Entry::Histogram { name: n, value, .. } = e {
                if *n == name {
                    return value.clone();
                }
            }
        }
        let value = Histogram::new(bounds);
        entries.push(Entry::Histogram {
            name,
            help,
            value: value.clone(),
        });
        value
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        for e in entries.iter() {
            let _ = match e {
                Entry::Counter { name, help, value } => {
                    write!(
                        out,
                        "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                        value.get()
                    )
                }
                Entry::Gauge { name, help, value } => {
                    write!(
                        out,
                        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {}\n",
                        value.get()
                    )
                }
                Entry::Histogram { name, help, value } => {
                    value.render(&mut out, name, help);
                    Ok(())
                }
                Entry::Labelled { name, help, value } => {
                    value.render(&mut out, name, help);
                    Ok(())
                }
            };
        }
        out
    }
}
