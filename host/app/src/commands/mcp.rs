//! `jobs-host mcp`: one MCP session over stdio, one owner.

use std::sync::Arc;

use anyhow::Result;

use super::Ended;
use crate::mcp;
use crate::wiring::{Host, mcp_server, open_session};

pub(crate) async fn mcp(host: Host) -> Result<Ended> {
    let options = host.mcp;
    let (session, announced) = open_session(&host, "mcp-session");
    // `jobs-host top` sees this session's jobs through it, while it runs.
    let _view =
        crate::daemon::server::view::open(session.registry().clone(), session.owner().clone());
    let server = mcp_server(&host.mount, Arc::new(session), options).await?;
    server
        .serve_io(mcp::Io::Stdio, announced, mcp::Leave::Close)
        .await?;
    Ok(Ended::Done)
}
