//! A connection's life: the service behind the framing layer, the
//! session's notices pushed (logging or Claude Code's channel), and the
//! session closed or detached when the client leaves.

use std::sync::atomic::Ordering;

use rmcp::model::{
    CustomNotification, LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::ServiceExt;

use host::owner::{Lane, NoticeMessage};

use super::channel::{CLAUDE_CHANNEL_NOTIFICATION, channel_params, takes_channel};
use super::framer::{Framed, framed};
use super::logging::{notice_data, per_request};
use super::{Io, JobsServer, Leave};

impl JobsServer {
    /// Serves this connection over `io` until the client leaves, then closes
    /// the session, or with [`Leave::Detach`] leaves it (and its jobs) for the
    /// next connection. Notices are also pushed as logging notifications.
    ///
    /// # Errors
    ///
    /// When the MCP handshake or transport fails.
    pub async fn serve_io(
        self,
        io: Io,
        mut announced: tokio::sync::mpsc::UnboundedReceiver<(Lane, NoticeMessage)>,
        leave: Leave,
    ) -> anyhow::Result<()> {
        let session = self.session.clone();
        let closing = self.closing.clone();
        let mut this = self;
        this.answer_after_close = leave == Leave::Close;
        let Framed {
            reader,
            writer,
            output: framing,
            input_closed,
            notices,
        } = framed(io, this.offer_tasks);
        let channel = this.claude_channel;
        let channel_taken = this.channel_taken.clone();
        let threshold = this.log_level.clone();
        let handshake_free = this.handshake_free.clone();
        let opt_ins = this.opt_ins.clone();
        let running = match this.serve((reader, writer)).await {
            Ok(running) => running,
            Err(e) => {
                drop(notices);
                // What the service answered before it gave up (a ping, a
                // refusal, a `server/discover`) still reaches the client.
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
                // A client may ask `server/discover` and leave, or give up
                // on a first start that compiles the component longer than
                // its connect timeout: it left, nothing here failed. Said in
                // words true of every such case, and the command ends well.
                if let rmcp::service::ServerInitializeError::ConnectionClosed(_) = e {
                    eprintln!(
                        "jobs-host: the client closed the connection before it initialized a session"
                    );
                    return Ok(());
                }
                return Err(e.into());
            }
        };
        let peer = running.peer().clone();
        if let Some(idle_after) = channel
            && peer.peer_info().is_some_and(|info| takes_channel(&info))
        {
            session.take_followups(idle_after);
            channel_taken.store(true, Ordering::Release);
            session.set_active(false);
        }
        // The client is gone once stdin closes: end the session's jobs now,
        // rather than after the service's grace for its handlers (a wait on
        // one of them ends with it), then abort whatever call is still in
        // flight. Requests the service already read are still answered, as
        // when a script is piped in.
        let closer = session.clone();
        let teardown = tokio::spawn(async move {
            input_closed.cancelled().await;
            match leave {
                Leave::Close => closer.close().await,
                // Nothing more is announced to this client; what settles
                // from now on waits for the next connection's first result.
                Leave::Detach(front_end) => closer.detach(front_end),
            }
            closing.cancel();
        });
        let forwarder = session.clone();
        let forward = tokio::spawn(async move {
            // Once the client is unreachable, the follow-ups handed to this
            // connection alone go back to wait for the next result.
            let mut gone = false;
            while let Some((lane, notice)) = announced.recv().await {
                let taken = lane == Lane::Followup && channel_taken.load(Ordering::Acquire);
                if gone {
                    if taken {
                        forwarder.requeue(notice);
                    }
                    continue;
                }
                // A follow-up notice the session handed over goes out on the
                // channel, and only there.
                if taken {
                    let notification =
                        ServerNotification::CustomNotification(CustomNotification::new(
                            CLAUDE_CHANNEL_NOTIFICATION,
                            Some(channel_params(&notice)),
                        ));
                    if push(&notices, notification).is_err() {
                        // Handed to this client only, and it never got it:
                        // it waits for the next result instead.
                        forwarder.requeue(notice);
                        gone = true;
                    }
                    continue;
                }
                // Each notice is also placed before the next tool result, so
                // one that is not pushed here is still delivered.
                let pushed = if per_request(&peer, &handshake_free) {
                    opt_ins.allows(LoggingLevel::Notice)
                } else {
                    threshold.allows(LoggingLevel::Notice)
                };
                if !pushed {
                    continue;
                }
                let data = notice_data(lane, &notice);
                let mut param = LoggingMessageNotificationParam::new(LoggingLevel::Notice, data);
                param.logger = Some(notice.plugin.clone());
                let notification = ServerNotification::LoggingMessageNotification(
                    LoggingMessageNotification::new(param),
                );
                if push(&notices, notification).is_err() {
                    gone = true;
                }
            }
        });
        let result = running.waiting().await;
        // Also when the service ended for another reason (a transport error).
        teardown.abort();
        match leave {
            Leave::Close => {
                forward.abort();
                session.close().await;
            }
            Leave::Detach(front_end) => {
                // The session's announcements stop coming here, so the
                // forwarder drains what it holds (handing back what only this
                // client would have shown) and ends.
                session.detach(front_end);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), forward).await;
            }
        }
        // The service is gone, so its output ends: what it wrote is flushed.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
        result?;
        Ok(())
    }
}

/// Hands a notification to the framing layer's output, as the service would
/// have written it; an error once the output has ended (the client is gone).
fn push(
    notices: &tokio::sync::mpsc::UnboundedSender<String>,
    notification: ServerNotification,
) -> Result<(), ()> {
    let message = ServerJsonRpcMessage::notification(notification);
    let line = serde_json::to_string(&message).map_err(|e| {
        tracing::warn!("mcp: a notice could not be written as JSON: {e}");
    })?;
    notices.send(line).map_err(drop)
}
