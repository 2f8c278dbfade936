//! One websocket connection on `/api/chat`: refuse it (kind 5 + close) on a
//! bad query or when busy, else start the conversation thread and pump
//! messages both ways until the client leaves, the conversation fails or
//! the server shuts down (then the frames already received are answered
//! before the close).

use super::errors::DuplexError;
use super::protocol::{self, Kind};
use super::worker::{Worker, WorkerEvent};
use super::DuplexState;
use crate::serve::duplex::engine::ConverseRequest;
use axum::extract::ws::{close_code, CloseFrame, Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Input messages buffered between the socket and the thread (backpressure on the client).
const CHANNEL_DEPTH: usize = 64;

/// Serves one upgraded connection whose query parsed into `request`.
pub async fn run(
    socket: WebSocket,
    request: Result<ConverseRequest, DuplexError>,
    state: Arc<DuplexState>,
) {
    let (mut sink, mut stream) = socket.split();
    let permit = request.and_then(|req| Ok((req, state.shell.streams.try_acquire()?)));
    let (request, permit) = match permit {
        Ok(ok) => ok,
        Err(e) => {
            state.refused.inc();
            tracing::info!(reason = e.reason(), error = %e, "duplex conversation refused");
            let code = if matches!(e, DuplexError::Busy(_)) {
                close_code::AGAIN
            } else {
                close_code::POLICY
            };
            refuse(&mut sink, &e, code).await;
            return;
        }
    };
    let (in_tx, in_rx) = mpsc::channel::<Vec<u8>>(CHANNEL_DEPTH);
    // Output is unbounded (see `Worker::output`): a bounded one could deadlock
    // with the pump waiting on a full input channel.
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<WorkerEvent>();
    let worker = Worker {
        engine: state.engine.clone(),
        request,
        input: in_rx,
        output: out_tx,
        permit,
        metrics: state.worker_metrics.clone(),
    };
    if let Err(e) = std::thread::Builder::new()
        .name("voxlane-duplex".into())
        .spawn(move || worker.run())
    {
        refuse(&mut sink, &DuplexError::Thread(e), close_code::ERROR).await;
        return;
    }
    let mut input = Some(in_tx);
    let mut shutdown = state.shell.shutdown.clone();
    loop {
        tokio::select! {
            event = out_rx.recv() => match event {
                Some(WorkerEvent::Ready) => {
                    if send(&mut sink, Kind::Handshake, &[]).await.is_err() { break; }
                }
                Some(WorkerEvent::Audio(pages)) => {
                    if send(&mut sink, Kind::Audio, &pages).await.is_err() { break; }
                }
                Some(WorkerEvent::Text(text)) => {
                    if send(&mut sink, Kind::Text, text.as_bytes()).await.is_err() { break; }
                }
                Some(WorkerEvent::Failed(e)) => {
                    refuse(&mut sink, &e, close_code::ERROR).await;
                    break;
                }
                None => {
                    // The thread is done (input closed by shutdown): close politely.
                    let _ = close(&mut sink, close_code::AWAY, "server shutting down").await;
                    break;
                }
            },
            msg = stream.next(), if input.is_some() => match msg {
                Some(Ok(Message::Binary(bytes))) => {
                    if let (Some((Kind::Audio, payload)), Some(tx)) = (protocol::decode(&bytes), input.as_ref()) {
                        // A closed channel means the thread ended; its event follows.
                        let _ = tx.send(payload.to_vec()).await;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {} // text, ping, pong: nothing to do
            },
            _ = shutdown.triggered(), if input.is_some() && !shutdown.is_triggered() => {}
        }
        if shutdown.is_triggered() && input.is_some() {
            // Stop taking audio; the thread answers what it has, then ends.
            input = None;
        }
    }
    // Dropping `input` and `out_rx` here stops the thread if the client left.
}

/// Sends one framed message.
async fn send(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    kind: Kind,
    payload: &[u8],
) -> Result<(), axum::Error> {
    sink.send(Message::Binary(protocol::encode(kind, payload).into()))
        .await
}

/// Sends the error as a kind-5 message, then closes.
async fn refuse(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    e: &DuplexError,
    code: u16,
) {
    let _ = send(sink, Kind::Error, e.to_string().as_bytes()).await;
    let _ = close(sink, code, e.reason()).await;
}

/// Sends a close frame.
async fn close(
    sink: &mut futures_util::stream::SplitSink<WebSocket, Message>,
    code: u16,
    reason: &str,
) -> Result<(), axum::Error> {
    sink.send(Message::Close(Some(CloseFrame {
        code,
        reason: reason.to_string().into(),
    })))
    .await?;
    sink.close().await
}
