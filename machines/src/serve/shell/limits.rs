//! The limit on concurrent streams: a permit per stream (a conversation, a
//! synthesis), refused at once when all are taken (a busy error, never a
//! queue that hangs), and the in-flight count a graceful shutdown waits on.

use super::metrics::{Counter, Gauge, Metrics};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// All stream permits are taken.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the server is busy: it serves {capacity} stream(s) at a time and all are in use")]
pub struct Busy {
    /// How many streams the server serves at once.
    pub capacity: usize,
}

/// Hands out at most `capacity` stream permits at once.
#[derive(Debug, Clone)]
pub struct StreamLimit {
    semaphore: Arc<Semaphore>,
    capacity: usize,
    in_flight: Arc<AtomicUsize>,
    idle: Arc<Notify>,
    active: Gauge,
    started: Counter,
    refused: Counter,
}

impl StreamLimit {
    /// A limit of `capacity` streams, its counters registered in `metrics`.
    pub fn new(capacity: usize, metrics: &Metrics) -> Self {
        Self {
            semaphore: Arc::new(Semaphore::new(capacity)),
            capacity,
            in_flight: Arc::new(AtomicUsize::new(0)),
            idle: Arc::new(Notify::new()),
            active: metrics.gauge("voxlane_streams_in_flight", "Streams being served now."),
            started: metrics.counter("voxlane_streams_started_total", "Streams accepted."),
            refused: metrics.counter(
                "voxlane_streams_busy_total",
                "Streams refused because all permits were taken.",
            ),
        }
    }

    /// A permit, or [`Busy`] at once when all are taken.
    pub fn try_acquire(&self) -> Result<StreamPermit, Busy> {
        match self.semaphore.clone().try_acquire_owned() {
            Ok(permit) => {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                self.active.inc();
                self.started.inc();
                Ok(StreamPermit {
                    _permit: permit,
                    limit: self.clone(),
                })
            }
            Err(_) => {
                self.refused.inc();
                Err(Busy {
                    capacity: self.capacity,
                })
            }
        }
    }

    /// Streams holding a permit now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Streams served at once.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waits until no stream holds a permit, or `grace` passes; true when idle.
    pub async fn wait_idle(&self, grace: Duration) -> bool {
        let wait = async {
            loop {
                let notified = self.idle.notified();
                if self.in_flight() == 0 {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(grace, wait).await.is_ok()
    }
}

/// One stream's right to run; released (and counted out) when dropped.
#[derive(Debug)]
pub struct StreamPermit {
    _permit: OwnedSemaphorePermit,
    limit: StreamLimit,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        self.limit.active.dec();
        if self.limit.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.limit.idle.notify_waiters();
        }
    }
}
