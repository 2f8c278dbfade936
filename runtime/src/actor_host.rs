//! Actor host: one machine behind a crossbeam-channel mailbox.
//!
//! Messages are processed run-to-completion, one at a time, in arrival order;
//! each dispatch runs inside a tracing span naming the machine. Replies travel
//! back through whatever the message carries (a reply sender or a callback),
//! so the host itself stays generic. The host runs on the thread that calls
//! [`ActorHost::run_until_idle`] or [`ActorHost::run`] — it spawns nothing, so
//! it never adds a thread to the compute budget.

use crossbeam_channel::{Receiver, Sender, TryRecvError};

/// A machine that can live behind a mailbox.
pub trait Actor {
    /// The message type the mailbox carries.
    type Message: Send;
    /// Name used in tracing spans.
    fn name(&self) -> &'static str;
    /// Handle one message to completion.
    fn handle(&mut self, msg: Self::Message);
}

/// Errors sending to an actor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The host was dropped; the message was not delivered.
    #[error("actor `{0}` is gone: its host was dropped")]
    Closed(&'static str),
}

/// The sending side of a mailbox; cheap to clone.
#[derive(Debug)]
pub struct Address<M> {
    tx: Sender<M>,
    name: &'static str,
}

impl<M> Clone for Address<M> {
    fn clone(&self) -> Self {
        Self {
            tx: self.tx.clone(),
            name: self.name,
        }
    }
}

impl<M: Send> Address<M> {
    /// Queue `msg` for the actor.
    pub fn send(&self, msg: M) -> Result<(), HostError> {
        self.tx.send(msg).map_err(|_| HostError::Closed(self.name))
    }
}

/// Owns an actor and its mailbox.
pub struct ActorHost<A: Actor> {
    actor: A,
    rx: Receiver<A::Message>,
    dispatched: u64,
}

impl<A: Actor> ActorHost<A> {
    /// Put `actor` behind a fresh unbounded mailbox.
    pub fn new(actor: A) -> (Self, Address<A::Message>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let name = actor.name();
        (
            Self {
                actor,
                rx,
                dispatched: 0,
            },
            Address { tx, name },
        )
    }

    fn dispatch(&mut self, msg: A::Message) {
        let _span = tracing::debug_span!("dispatch", machine = self.actor.name()).entered();
        self.actor.handle(msg);
        self.dispatched += 1;
    }

    /// Process every queued message on this thread; returns how many ran.
    pub fn run_until_idle(&mut self) -> usize {
        let mut n = 0;
        loop {
            match self.rx.try_recv() {
                Ok(msg) => {
                    self.dispatch(msg);
                    n += 1;
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => return n,
            }
        }
    }

    /// Process messages until every [`Address`] is dropped, then return the actor.
    pub fn run(mut self) -> A {
        while let Ok(msg) = self.rx.recv() {
            self.dispatch(msg);
        }
        self.actor
    }

    /// Messages dispatched so far.
    pub fn dispatched(&self) -> u64 {
        self.dispatched
    }

    /// The hosted actor.
    pub fn actor(&self) -> &A {
        &self.actor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Summer(i64);
    enum Msg {
        Add(i64),
        Total(Sender<i64>),
    }
    impl Actor for Summer {
        type Message = Msg;
        fn name(&self) -> &'static str {
            "summer"
        }
        fn handle(&mut self, msg: Msg) {
            match msg {
                Msg::Add(x) => self.0 += x,
                Msg::Total(reply) => {
                    let _ = reply.send(self.0);
                }
            }
        }
    }

    #[test]
    fn processes_in_order_and_replies() {
        let (mut host, addr) = ActorHost::new(Summer(0));
        let (tx, rx) = crossbeam_channel::bounded(1);
        addr.send(Msg::Add(2)).unwrap();
        addr.send(Msg::Add(3)).unwrap();
        addr.send(Msg::Total(tx)).unwrap();
        assert_eq!(host.run_until_idle(), 3);
        assert_eq!(rx.recv().unwrap(), 5);
        assert_eq!(host.dispatched(), 3);
    }

    #[test]
    fn run_returns_when_addresses_drop() {
        let (host, addr) = ActorHost::new(Summer(0));
        let t = std::thread::spawn(move || host.run().0);
        addr.send(Msg::Add(7)).unwrap();
        drop(addr);
        assert_eq!(t.join().unwrap(), 7);
    }

    #[test]
    fn send_after_drop_is_typed_error() {
        let (host, addr) = ActorHost::new(Summer(0));
        drop(host);
        assert_eq!(
            addr.send(Msg::Add(1)).unwrap_err(),
            HostError::Closed("summer")
        );
    }
}
