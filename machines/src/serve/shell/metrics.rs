//! Counters and gauges rendered as Prometheus text for `/metrics`. Routes
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
            };
        }
        out
    }
}
